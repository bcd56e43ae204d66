/*
 * verify.h - gpumem verify: prove a card's real capacity and health.
 *
 * Owns: the card's identity and claims (ident.c: CUDA + NVML through the
 * seams, the GPU catalog, --claimed), the test plan and its passes over
 * every allocatable byte (verify.c: one engine for every backend), the
 * backends that run the passes (gpu.c: kernels.cu through the driver
 * seam; a VMM-aliased fake; emu.c: an emulated card in host memory, with
 * the same pattern code, pattern.h), the verdict, and the report tree.
 *
 * Units: bytes (uint64_t), seconds (double), GB/s = 10^9 bytes/s.
 * Errors: functions return 0 or a negative GM_E* (error.h) with a message
 * in diag. A card failing verification is NOT an error: it is a verdict.
 */
#ifndef GM_VERIFY_H
#define GM_VERIFY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pattern.h"

struct gm_diag;
struct gm_val;
struct gm_cu;
struct gm_nvml;

enum gm_verify_level {
	GM_VERIFY_QUICK, /* unique values: one write, one verify */
	GM_VERIFY_FULL,  /* + complement, walking ones, moving inversions */
};

enum gm_verify_verdict {
	GM_VERDICT_OK,
	GM_VERDICT_UNDERSIZED,
	GM_VERDICT_FAULTY,
	GM_VERDICT_ERROR, /* the check could not run (driver error) */
};

/* Progress: called from the thread testing the device after each pass
 * (done of total passes); pass is the name of the one just finished. */
typedef void (*gm_verify_progress_fn)(void *arg, int device,
				      const char *pass, int done, int total);

struct gm_verify_opts {
	enum gm_verify_level level;
	uint64_t claimed_bytes; /* --claimed; 0 = from the catalog */
	uint64_t seed;          /* 0 = pick one (time, pid, device) */
	uint64_t max_bytes;     /* test at most this much; 0 = all */
	unsigned bit_fade_s;    /* > 0: bit-fade test holding this long */
	gm_verify_progress_fn progress;
	void *progress_arg;
};

/* What the card says about itself, read without writing. */
struct gm_verify_ident {
	char name[96];
	char bus_id[32];
	unsigned pci_device_id;    /* e.g. 0x2335 (0 if unknown) */
	unsigned pci_subsystem_id; /* e.g. 0x18be10de (0 if unknown) */
	int cc_major, cc_minor, sm_count;
	uint64_t cuda_total_bytes; /* cuDeviceTotalMem */
	uint64_t cuda_free_bytes;  /* cuMemGetInfo before testing */
	int driver_cuda_version;   /* cuDriverGetVersion: 13000 */
	char driver_version[80];   /* NVML: "580.159.04" */
	bool nvml;                 /* NVML answered for this card */
	char nvml_error[512];      /* why not, when !nvml */
	uint64_t nvml_total_bytes, nvml_reserved_bytes;
	int ecc;                   /* 1 on, 0 off, -1 unknown/unsupported */
	int mig;                   /* 1 on, 0 off, -1 unknown/unsupported */
	int retired_sbe, retired_dbe, retired_pending; /* -1 unknown */
	int remap_corrected, remap_uncorrected, remap_pending, remap_failed;
	bool gddr;                 /* ECC costs capacity (not HBM) */
};

struct gm_verify_pass {
	char name[32];
	uint64_t bytes;    /* read + written */
	double seconds;
	uint64_t bad;      /* wrong words */
};

#define GM_VERIFY_MAX_PASSES 20
#define GM_VERIFY_MAX_NOTES 8

struct gm_verify_result {
	int device;           /* index, or -1 for an emulated card */
	struct gm_verify_ident id;
	char kind[16];        /* "gpu", "emulated", "vmm-fake" */
	uint64_t claimed_bytes;
	char claimed_source[24]; /* "--claimed", "catalog", "emulate", "" */
	uint64_t claimed_min_bytes; /* catalog: least a genuine card reports */
	bool claimed_estimate;    /* catalog total assumed: only a note */
	char catalog_name[64];
	uint64_t reported_bytes; /* NVML total, else CUDA total */
	uint64_t free_bytes;  /* free when testing began */
	uint64_t allocated_bytes, unallocated_bytes;
	unsigned chunks;
	uint64_t tested_bytes;   /* = allocated, or less with max_bytes */
	uint64_t verified_bytes; /* tested minus the worst pass's bad words */
	uint64_t real_bytes;     /* estimate when undersized by test, else 0 */
	uint64_t seed;
	/* errors over all passes (words) */
	uint64_t errors, alias_errors, flip_errors, garbage_errors;
	uint64_t first_bad_offset; /* bytes; UINT64_MAX if none */
	uint64_t alias_stride_bytes; /* smallest alias distance; 0 if none */
	uint64_t alias_bits;  /* OR of aliased byte-offset differences */
	uint64_t flip_bits;   /* OR of flipped data bits */
	uint64_t bit_hist[64];
	struct gm_ve_rec rec[GM_VE_RECORDS];
	unsigned nrec;
	char rec_pass[GM_VE_RECORDS][32];
	struct gm_verify_pass passes[GM_VERIFY_MAX_PASSES];
	int npasses;
	int planned_passes;
	uint64_t worst_bad_bytes; /* bad words * 8 of the worst pass */
	uint64_t lost_tail_bytes; /* unique pass: every word from here on bad */
	double seconds;       /* all passes */
	double wall_seconds;  /* context up -> all passes done (alloc too) */
	double bandwidth_gbps; /* bytes moved / seconds over all passes */
	double write_gbps;    /* the slowest pure-write pass */
	double verify_gbps;   /* the slowest pure-verify pass */
	enum gm_verify_verdict verdict;
	char reason[512];
	char notes[GM_VERIFY_MAX_NOTES][256];
	int nnotes;
	int err;              /* GM_E* when verdict is GM_VERDICT_ERROR */
	char errmsg[1024];
	unsigned emulate_scale; /* emulated card run at 1/scale (emu.c); 0,
				 * 1 = full size */
};

/* ==== The engine (verify.c) ==== */

/* One contiguous piece of the memory under test. */
struct gm_vchunk {
	uint64_t addr;  /* device pointer (gpu) or word offset (emu) */
	uint64_t words; /* even */
	uint64_t base;  /* index of its first word in the tested range */
};

/*
 * A backend runs one operation over one chunk. Launches may be queued:
 * sync() waits for all and, for a verify pass, copies its errors out.
 * Each returns 0 or a GM_E* with diag set.
 */
struct gm_vbackend {
	void *ctx;
	int (*begin)(void *ctx, struct gm_diag *d); /* clear errors */
	int (*write)(void *ctx, const struct gm_vchunk *c, int kind,
		     uint64_t seed, uint64_t konst, struct gm_diag *d);
	int (*verify)(void *ctx, const struct gm_vchunk *c, int kind,
		      uint64_t seed, uint64_t konst, int next_kind,
		      uint64_t next_konst, uint64_t total,
		      struct gm_diag *d);
	int (*walk)(void *ctx, const struct gm_vchunk *c, int verify,
		    uint64_t seed, uint64_t total, struct gm_diag *d);
	int (*sync)(void *ctx, struct gm_ve *errors, struct gm_diag *d);
};

/*
 * Run the test plan of o->level over chunks (in order; their bases must
 * be consecutive from 0) and record passes and errors in r (tested_bytes,
 * verified_bytes, errors, passes, bandwidth). Returns 0 or the backend's
 * error.
 */
int gm_verify_run(const struct gm_vbackend *be, const struct gm_vchunk *c,
		  size_t n, const struct gm_verify_opts *o,
		  struct gm_verify_result *r, struct gm_diag *d);

/*
 * Decide the verdict from identity, claims and errors (fills verdict,
 * reason, real_bytes, notes). Rules are in verify.c's comment.
 */
void gm_verify_judge(struct gm_verify_result *r);

/* Add a note (printf-style) to r; extra notes beyond the cap are lost. */
void gm_verify_note(struct gm_verify_result *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* "ok", "undersized", "faulty", "error". */
const char *gm_verify_verdict_name(enum gm_verify_verdict v);

/*
 * The report: {"kind": "gpumem-verify", "host": host, "devices": [...]}
 * with one object per result (keys in allocator/verify/README.md). NULL on no memory.
 */
struct gm_val *gm_verify_report(const struct gm_verify_result *r, size_t n,
				const char *host);

/* The short view: one flat row per device (table and CSV), with or
 * without the verdict's reason. */
struct gm_val *gm_verify_summary(const struct gm_verify_result *r, size_t n,
				 bool reason);

/* The program's exit code for results: 3 if any could not run, else 1 if
 * any card is undersized or faulty, else 0. */
int gm_verify_exit_code(const struct gm_verify_result *r, size_t n);

/* ==== Identity and claims (ident.c) ==== */

/*
 * Read device dev's identity from CUDA (cu, with a current context or
 * not) and NVML (nvml may be NULL or an unopened table: then id->nvml is
 * false and nvml_error says why). Returns 0 or GM_EDEVICE.
 */
int gm_verify_identify(const struct gm_cu *cu, const struct gm_nvml *nvml,
		       int dev, struct gm_verify_ident *id,
		       struct gm_diag *d);

/*
 * Fill r->claimed_bytes/claimed_source/catalog_name: claimed (--claimed)
 * if nonzero, else the GPU catalog's capacity for id->name, else 0.
 * Also sets r->reported_bytes from the identity.
 */
void gm_verify_claims(struct gm_verify_result *r, uint64_t claimed);

/* What the GPU catalog says of a model. */
struct gm_verify_catalog {
	char name[64];
	uint64_t total_bytes; /* nvidia-smi total, default ECC mode */
	uint64_t min_bytes;   /* least a genuine card reports */
	bool estimate;        /* total assumed, not seen: only warn */
	bool gddr;
	unsigned pci_device_id;
};

/*
 * The GPU catalog's entry for a device name (or, failing that, its PCI
 * device id): the one place that asks the catalog. Returns 0, or
 * GM_ENOTFOUND.
 */
int gm_verify_catalog_lookup(const char *name, unsigned pci_device_id,
			     struct gm_verify_catalog *out);

/* ==== Emulated cards (emu.c) ==== */

enum gm_emu_mode {
	GM_EMU_WRAP,    /* beyond real: aliases onto (offset mod real) */
	GM_EMU_DROP,    /* beyond real: writes lost, reads give zeros */
	GM_EMU_GARBAGE, /* beyond real: writes lost, reads give noise */
};

struct gm_verify_emu {
	uint64_t claimed_bytes;  /* what its name promises */
	uint64_t reported_bytes; /* what its driver reports (= claimed) */
	uint64_t real_bytes;     /* storage behind it (= reported) */
	enum gm_emu_mode mode;
	unsigned bad_bits;       /* stuck bits placed through real memory */
	bool nvml;               /* NVML present (default true) */
	int ecc;                 /* -1 unknown, 0 off, 1 on */
	bool gddr;
	int mig;                 /* -1 unknown, 0 off, 1 on */
	char name[96];
};

/*
 * Parse "claimed=SIZE,real=SIZE[,mode=wrap|drop|garbage][,bad_bits=N]
 * [,reported=SIZE][,name=TEXT][,nvml=0|1][,ecc=0|1][,gddr=0|1][,mig=0|1]".
 * claimed=, real= and reported= are card capacities, all read by
 * gm_claimed_size_parse (GB = GiB, what the seller means).
 * Sizes must be multiples of 16 bytes, real <= reported, real > 0, and
 * each at most GM_EMU_MAX_BYTES. Returns 0 or GM_EINVAL / GM_ERANGE with
 * a message naming the key.
 *
 * A card whose tested bytes exceed GM_EMU_FULL_BYTES runs at a scale:
 * every size divided by the smallest power of 2 that brings the tested
 * bytes within it (an 80 GiB card at 1/256: 320 MiB of passes, 304 MiB
 * of host memory for 76 GiB real), then every byte count and offset of
 * the result multiplied back before the verdict; counts of words (errors)
 * are the scaled run's. The result says so (emulate_scale, a note).
 */
#define GM_EMU_MAX_BYTES ((uint64_t)1 << 50)
#define GM_EMU_FULL_BYTES ((uint64_t)512 << 20)
int gm_verify_emu_parse(const char *text, struct gm_verify_emu *emu,
			struct gm_diag *d);

/* Parse --emulate-vmm "claimed=SIZE,real=SIZE" (0 < real <= claimed;
 * both card capacities, as in gm_verify_emu_parse). Returns 0 or GM_EINVAL / GM_ERANGE naming the key. */
int gm_verify_vmm_parse(const char *text, uint64_t *claimed, uint64_t *real,
			struct gm_diag *d);

/* Verify the emulated card: identity, claims, passes, verdict. Returns 0
 * (verdict in r) or GM_ENOMEM when its storage cannot be allocated. */
int gm_verify_emulated(const struct gm_verify_emu *emu,
		       const struct gm_verify_opts *o,
		       struct gm_verify_result *r, struct gm_diag *d);

/* ==== Real GPUs (gpu.c) ==== */

/*
 * Verify devices devs[0..n) concurrently, a thread per device, each
 * through its own primary context: identity, allocate all it can in
 * chunks, passes, verdict. A driver failure on one device sets that
 * result's verdict to GM_VERDICT_ERROR; others carry on. cu is opened by
 * the caller; NVML is opened here when present. Returns 0, or GM_ENODEV
 * / GM_EDEVICE when nothing could run at all (no driver or no device).
 */
int gm_verify_devices(const struct gm_cu *cu, const int *devs, size_t n,
		      const struct gm_verify_opts *o,
		      struct gm_verify_result *r, struct gm_diag *d);

/*
 * A real fake on a real GPU: reserve claimed bytes of virtual address
 * space and map real bytes of physical memory over it again and again,
 * so that address a shows physical byte (a mod real), then verify it
 * like a card. The physical memory is real/c allocations of c bytes, c
 * the largest multiple of the allocation granularity dividing both sizes
 * (the driver maps whole allocations only); virtual chunk i shows
 * allocation i mod (real/c). Returns 0 (verdict in r); GM_EINVAL naming
 * --emulate-vmm when a size is not a multiple of the granularity or real
 * exceeds claimed; GM_ENOTSUP without the VMM API; GM_EDEVICE /
 * GM_EDEVNOMEM when the driver refuses.
 */
int gm_verify_vmm_fake(const struct gm_cu *cu, int dev,
		       uint64_t claimed, uint64_t real,
		       const struct gm_verify_opts *o,
		       struct gm_verify_result *r, struct gm_diag *d);

/* Internal, for the unit tests (tests/unit/verify/test_vmm.c). */

/* The VMM fake's chunk: gran * gcd(claimed / gran, real / gran), or 0
 * when a size is not a multiple of gran (bytes). */
uint64_t gm__vmm_chunk(uint64_t claimed, uint64_t real, uint64_t gran);

/* gm_verify_vmm_fake() with the passes run by be (not the kernels) when
 * be is not NULL: the same driver calls build and tear down the fake. */
int gm__verify_vmm_fake_on(const struct gm_cu *cu, int dev,
			   uint64_t claimed, uint64_t real,
			   const struct gm_verify_opts *o,
			   const struct gm_vbackend *be,
			   struct gm_verify_result *r, struct gm_diag *d);

/* Number of CUDA devices (cuInit + cuDeviceGetCount). */
int gm_verify_device_count(const struct gm_cu *cu, int *count,
			   struct gm_diag *d);

/* True when the library was built with the kernels (nvcc found). */
bool gm_verify_have_kernels(void);

#endif
