/*
 * catalog.h - the GPU catalog: NVIDIA GPU models, their names, memory
 * capacities, bandwidths and the CUDA context cost of their generation.
 *
 * The one source is models/gpus.yaml. At build time a generator
 * (gen_catalog.c) reads it with the YAML loader below and writes a C
 * table, compiled into gm_catalog_dep (catalog.c + the table; no libyaml,
 * position-independent), so the planner, the preload library's start-up
 * check and the verifier all see the same entries without parsing YAML at
 * run time. gm_catalog_load() (in gm_catalog_yaml_dep, needs libyaml)
 * reads a catalog file at run time, for `--catalog FILE`.
 *
 * Units: every capacity is in bytes (uint64_t); bandwidth in GB/s
 * (10^9 bytes per second); compute in TFLOP/s (10^12).
 * Errors: functions returning int give 0 or a negative GM_E* code and
 * explain failures in a struct gm_diag ("file:line:column: message" for
 * YAML). Lookups return NULL when nothing matches.
 */
#ifndef GM_CATALOG_H
#define GM_CATALOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_diag;

/*
 * One GPU model (SKU). Strings are never NULL (empty when not known);
 * numbers are 0 when not known, except where a field says otherwise.
 */
struct gm_gpu {
	/* Exact name as nvidia-smi --query-gpu=name / NVML prints it,
	 * e.g. "NVIDIA H200", "Tesla V100-SXM2-32GB". Unique. */
	const char *name;
	/* Short forms users type ("h200", "a100-80gb"); matched
	 * case-insensitively. NULL-terminated array of n_aliases. */
	const char *const *aliases;
	size_t n_aliases;

	/* Capacity as sold, as printed ("80 GB") and in bytes (GB = 10^9;
	 * NVIDIA's "80 GB" means 80 GiB for most HBM parts, see below). */
	const char *marketed;
	uint64_t marketed_bytes;
	/* nvidia-smi memory.total on R5xx+ drivers, in the card's default
	 * ECC mode (MiB * 2^20). The number to compare NVML totals with. */
	uint64_t total_bytes;
	/* nvidia-smi memory.total in the other ECC mode (GDDR cards lose
	 * 1/16 to ECC when it is on); 0 when ECC does not change it. */
	uint64_t total_other_ecc_bytes;
	/* memory.total on older (R4xx) drivers, which printed total minus
	 * reserved; 0 when not known. */
	uint64_t total_legacy_bytes;
	/* CUDA's total (cudaMemGetInfo, totalGlobalMem) = NVML total minus
	 * NVML reserved, as measured on some driver; 0 when not known. The
	 * reserved part grows slowly with the driver version. */
	uint64_t cuda_total_bytes;
	/* true when total_bytes was not seen on a real board but assumed
	 * (e.g. from a sibling SKU); checks should only warn then. */
	bool total_estimate;
	/* Default ECC state of the board. */
	bool ecc_default_on;

	/* "HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR6", "GDDR6X", "GDDR7". */
	const char *memory_type;
	/* Peak memory bandwidth, GB/s (10^9 B/s), from the datasheet. */
	double bandwidth_gbps;
	/* Dense tensor-core TFLOP/s without sparsity: bf16 (fp16 on cards
	 * without bf16, Volta and Turing; see bf16_is_fp16). */
	double bf16_tflops;
	bool bf16_is_fp16;

	/* "volta", "turing", "ampere", "ada", "hopper", "blackwell". */
	const char *architecture;
	unsigned cc_major, cc_minor; /* compute capability, e.g. 9.0 */
	unsigned multiprocessors;    /* SMs; 0 when not known */
	uint32_t pci_device_id;      /* e.g. 0x2335; 0 when not known */
	const char *form_factor;     /* "SXM", "PCIe", ... */

	/*
	 * Memory a training process uses outside the framework's caching
	 * allocator: CUDA context plus cuBLAS/cuDNN/NCCL modules (bytes).
	 * Per generation; measured for Hopper, estimated for others (see
	 * cuda_context_estimate and cuda_context_source).
	 */
	uint64_t cuda_context_bytes;
	/* The same for an inference-only process (fewer libraries). */
	uint64_t cuda_context_inference_bytes;
	bool cuda_context_estimate;
	const char *cuda_context_source;

	/*
	 * Fraction (e.g. 0.01) below the smallest genuine total that a
	 * reading may fall before the card counts as undersized; covers
	 * driver-era drift of the reserved memory. See gm_gpu_min_total().
	 */
	double tolerance;

	const char *source; /* where the figures come from (URLs, docs) */
	const char *notes;  /* caveats: same name with other capacity... */
};

/*
 * One GPU generation: the memory a process uses outside the framework's
 * allocator (bytes), which its GPUs inherit unless they override it.
 */
struct gm_gpu_arch {
	const char *name;         /* "volta", ..., "blackwell" */
	uint64_t cuda_context_bytes;
	uint64_t cuda_context_inference_bytes;
	const char *measured_on;  /* GPU name it was measured on, or "" */
	const char *source;
};

/* A set of GPUs: the built-in table or one loaded from a file. */
struct gm_catalog {
	const struct gm_gpu *gpus;
	size_t n;
	const struct gm_gpu_arch *archs; /* the generations the GPUs name */
	size_t n_archs;
	void *owned; /* storage of a loaded catalog; NULL for the built-in */
};

/* The table generated from models/gpus.yaml at build time. Never NULL. */
const struct gm_catalog *gm_catalog_builtin(void);

/*
 * Find a GPU by exact name, then by name or alias ignoring case, then by
 * the normalized form of both (lowercase letters and digits only, with
 * the words "nvidia", "tesla", "geforce" dropped): "NVIDIA A100-SXM4-80GB",
 * "a100-sxm4-80gb" and "A100 SXM4 80GB" all find one entry. cat NULL
 * means the built-in catalog. NULL when nothing matches.
 */
const struct gm_gpu *gm_catalog_find(const struct gm_catalog *cat,
				     const char *name);

/* The entry with this PCI device id (0x2335), or NULL. */
const struct gm_gpu *gm_catalog_find_pci(const struct gm_catalog *cat,
					 uint32_t pci_device_id);

/*
 * The names closest to an unknown name, best first, for "did you mean"
 * messages: at most max of them into out (pointers into the catalog),
 * one per GPU, each its short name to type (its first alias; the
 * nvidia-smi name where it has none), ranked by its best-matching name
 * or alias. Candidates are the GPUs with a name or alias containing the
 * (normalized) name, or when there are none, those within an edit
 * distance of max(2, strlen / 3) of it. Returns how many were written.
 */
size_t gm_catalog_suggest(const struct gm_catalog *cat, const char *name,
			  const char **out, size_t max);

/*
 * True for a MIG slice (form_factor "MIG"): an entry named as NVML names
 * the slice, "NVIDIA A100-SXM4-80GB MIG 3g.40gb", whose total is the
 * slice's memory.
 */
bool gm_gpu_is_mig(const struct gm_gpu *gpu);

/*
 * The smallest memory total a genuine card of this model may report,
 * in bytes: the least of its known totals (nvidia-smi in either ECC
 * mode, older drivers, CUDA's total) less the tolerance. Compare either
 * an NVML/nvidia-smi total or a cudaMemGetInfo total with it; a reading
 * below it means an undersized card, a MIG/vGPU slice or a memory cap.
 */
uint64_t gm_gpu_min_total(const struct gm_gpu *gpu);

/*
 * The memory a process can get on gpu, in bytes: what cudaMemGetInfo
 * reports as total (NVML's total less NVML's reserved part), which device
 * used (context + reserved + libraries) can never exceed. Where the
 * catalog does not know it, an estimate (*estimated true): total less the
 * largest reserved part (total - cuda_total) of a measured card of the
 * same architecture, or of any architecture when none of this one is
 * measured, and never more than the R4xx total (which printed total less
 * reserved, on drivers that reserved less). A MIG slice's listed memory
 * stands, as an estimate: no source measures CUDA's total on a slice.
 * cat NULL: the built-in catalog. estimated may be NULL.
 */
uint64_t gm_gpu_usable_bytes(const struct gm_catalog *cat,
			     const struct gm_gpu *gpu, bool *estimated);

/*
 * The most threads that can be resident on one SM of this GPU, from its
 * compute capability: 2048 on 6.0, 6.1, 7.0, 8.0, 8.7, 9.0 and 10.x;
 * 1024 on 7.5;
 * 1536 on 8.6, 8.9 and 12.x (CUDA C++ Programming Guide, table
 * "Technical Specifications per Compute Capability", row "Maximum number
 * of resident threads per SM"). 0 when the capability is not in that
 * list. Times multiprocessors, the threads the whole GPU keeps resident.
 */
unsigned gm_gpu_threads_per_sm(const struct gm_gpu *gpu);

/* gm_catalog_report() flags. BRIEF: only the columns a table has room
 * for, bf16 TFLOP/s of a card without bf16 as "125 (fp16)"; FLAT:
 * aliases as one comma-separated string (CSV), else a list. */
#define GM_GPU_REPORT_BRIEF 1u
#define GM_GPU_REPORT_FLAT 2u

/*
 * The catalog as an output tree (emit.h): an array with one object per
 * GPU, capacities as *_bytes keys, unknown values as null. BRIEF keeps
 * only the columns a table has room for (name, capacities, memory type,
 * bandwidth, TFLOP/s, architecture, context); the full form adds
 * aliases, compute capability, SM count (multiprocessors), PCI id, ECC
 * and driver-era totals, bf16_is_fp16, tolerance and sources.
 * NULL when out of host memory. Free with gm_val_free().
 */
struct gm_val;
struct gm_val *gm_catalog_report(const struct gm_catalog *cat,
				 unsigned flags);
struct gm_val *gm_gpu_report(const struct gm_gpu *gpu, unsigned flags);

/*
 * Read a catalog file (the schema of models/gpus.yaml) into cat.
 * Returns 0, GM_EIO (cannot read path), GM_EINVAL (bad entry; diag
 * "path:line:column: message"), or GM_ENOMEM. On error cat is left
 * empty. Free with gm_catalog_free(). Defined in gm_catalog_yaml_dep
 * (needs libyaml); the preload library never calls it.
 */
int gm_catalog_load(struct gm_catalog *cat, const char *path,
		    struct gm_diag *diag);

/*
 * Read a catalog file over base (the built-in one when base is NULL):
 * cat gets base's GPUs and architectures with the file's added, an entry
 * of the file replacing the base's entry of the same name (the nvidia-smi
 * name, compared in normalized form; an architecture by its name). The
 * file may leave out 'architectures' and name base's instead. A name or
 * alias of the file that also names another base GPU, or a PCI id of
 * one, is an error at the file's line and column. Errors as
 * gm_catalog_load(). cat points into base's strings: base must outlive
 * it (the built-in always does).
 */
int gm_catalog_load_over(struct gm_catalog *cat, const char *path,
			 const struct gm_catalog *base,
			 struct gm_diag *diag);

/* Free a catalog filled by gm_catalog_load(); the built-in is ignored. */
void gm_catalog_free(struct gm_catalog *cat);

#endif
