/*
 * account.h - per-device accounting and the cap (account.c).
 *
 * Every device allocation the hooks see is charged here before it reaches
 * the driver and released only after the driver's free returned, so the
 * bytes the driver holds for the program never pass the cap, under any
 * number of threads (the charge is a compare-and-swap that never
 * overshoots). Each allocation is recorded in a pointer map so its free
 * can be subtracted. Counters are bytes, updated with relaxed
 * atomics; peaks are maxima of the current values.
 *
 * A device is set up the first time an allocation on it is seen
 * (gm_pl_dev_get): name, total, cap, and the undersized-card check. That
 * needs the driver seam; it never runs inside a signal handler.
 *
 * Errors: gm_pl_charge() returns 0 or GM_ELIMIT (over the cap, or the
 * card is refused as undersized); the caller turns it into the API's own
 * out-of-memory code.
 */
#ifndef GM_PL_ACCOUNT_H
#define GM_PL_ACCOUNT_H

#include "cu.h"
#include "options.h"
#include "ptrmap.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define GM_PL_MAX_DEVICES 64

/* What an entry of the pointer map is. */
enum gm_pl_kind {
	GM_PL_KIND_DEVICE,  /* cuMemAlloc, cuMemAllocPitch */
	GM_PL_KIND_MANAGED, /* cuMemAllocManaged */
	GM_PL_KIND_ASYNC,   /* cuMemAllocAsync, cuMemAllocFromPoolAsync */
	GM_PL_KIND_VMM,     /* cuMemCreate physical handle */
	GM_PL_KIND_POOL,    /* segments of the cache-mode pool (reserved
			     * only: its blocks are counted as allocated
			     * by gm_pl_use) */
	GM_PL_KIND_COUNT,
};

struct gm_pl_dev {
	atomic_bool ready;      /* set up (name, total, cap known) */
	int ordinal;
	char name[256];
	uint32_t pci_device_id; /* e.g. 0x2335; 0 when unknown */
	uint64_t total;         /* the driver's total, bytes */
	uint64_t cap;           /* UINT64_MAX when no cap */
	uint64_t claimed;       /* what the card is sold as; 0 unknown */
	uint64_t min_total;     /* least genuine total; 0 unknown */
	bool undersized;
	bool refuse;            /* undersized and GPUMEM_ON_UNDERSIZED=fail */
	bool bad_opts;          /* a cap setting could not be read: refuse */

	/* Counters: zeroed in a fork child from here on (preload.c). */
	_Atomic uint64_t reserved, peak_reserved;
	_Atomic uint64_t allocated, peak_allocated;
	_Atomic uint64_t by_kind[GM_PL_KIND_COUNT];
	_Atomic uint64_t n_alloc, n_free;
	_Atomic uint64_t oom_cap;        /* refused by the cap */
	_Atomic uint64_t oom_device;     /* the driver itself said OOM */
	_Atomic uint64_t oom_undersized; /* refused: undersized card */
	_Atomic uint64_t peak_request;   /* largest single request */
	_Atomic uint64_t last_refused;   /* size of the last refused request */
	atomic_bool active;              /* an allocation was asked for here */
	struct gm_pool *_Atomic pool;    /* cache mode: made on first use */
} __attribute__((aligned(64)));

struct gm_pool;

struct gm_pl_state {
	struct gm_pl_opts opts;
	struct gm_pl_dev dev[GM_PL_MAX_DEVICES];
	struct gm_ptrmap ptrs;    /* CUdeviceptr -> entry */
	struct gm_ptrmap handles; /* CUmemGenericAllocationHandle -> entry */
	_Atomic uint64_t changes; /* bumped on every charge/uncharge */
	/* A device allocation was asked for in this process (served or
	 * refused); only then are reports written. Setting a device up
	 * (cuDeviceTotalMem, cuMemGetInfo) does not count: launchers such
	 * as torchrun query every device and allocate nothing. */
	atomic_bool used;
	/* Cache mode: give the pool's cached segments on d back to the
	 * driver; true when that freed any reserved bytes. Set by
	 * cache.c; NULL otherwise. */
	bool (*release_cached)(struct gm_pl_dev *d);
};

/* The one state of the library (defined in account.c). */
extern struct gm_pl_state gm__pl;

/* The real driver, as the library's own calls reach it (seam, cu.h). */
extern struct gm_cu gm__pl_cu;

/*
 * Per-thread state. guard > 0 while the library itself calls the driver
 * or the dynamic linker: hooks then pass straight through, so nothing the
 * library does is intercepted (or counted) twice. The seen_* counters let
 * the runtime-level hooks tell whether a driver-level hook already
 * accounted the call. initial-exec TLS: no allocation on first use.
 */
struct gm_pl_tls {
	int guard;
	unsigned seen_alloc, seen_free, seen_info;
};
extern __thread struct gm_pl_tls gm__pl_tls
	__attribute__((tls_model("initial-exec")));

static inline void gm__pl_guard_enter(void) { gm__pl_tls.guard++; }
static inline void gm__pl_guard_leave(void) { gm__pl_tls.guard--; }

/*
 * The device with this ordinal, set up on first use; NULL when ordinal
 * is out of range or the driver cannot describe it.
 */
struct gm_pl_dev *gm_pl_dev_get(int ordinal);

/* Take (true) or give back (false) the lock of device set-up: fork
 * handlers, so that no child inherits it held by a thread it lacks. */
void gm_pl_setup_lock(bool take);

/*
 * Set a device up from what the driver reports (name, total, PCI id) and
 * the options: cap = min(GPUMEM_LIMIT, floor(GPUMEM_FRACTION * total))
 * with the fraction read as the exact decimal written, the undersized
 * check; a cap setting that could not be read (opts.bad) refuses every
 * allocation. Split out of gm_pl_dev_get() for unit tests.
 */
void gm_pl_dev_setup(struct gm_pl_dev *d, const struct gm_pl_opts *o,
		     int ordinal, const char *name, uint32_t pci_id,
		     uint64_t total);

/*
 * Charge size bytes of kind to d: 0 or GM_ELIMIT (counted as an OOM).
 * Reserved and allocated both grow (nothing sits between the program and
 * the driver). Over the cap, when a pool caches memory on d
 * (gm__pl.release_cached), its cached segments are given back and the
 * charge is tried once more before it fails.
 */
int gm_pl_charge(struct gm_pl_dev *d, uint64_t size, enum gm_pl_kind kind);

/*
 * The pool's side of the one cap (cache mode): gm_pl_reserve charges a
 * new pool segment to reserved only (kind GM_PL_KIND_POOL), exact like
 * gm_pl_charge but counting no OOM (the pool retries after releasing its
 * cache, and its caller counts the final answer); 0 or GM_ELIMIT
 * (over the cap, or a card refused as undersized). gm_pl_unreserve gives
 * a segment back. gm_pl_use / gm_pl_unuse count a block the pool hands
 * out or takes back as allocated (not reserved: its segment is).
 */
int gm_pl_reserve(struct gm_pl_dev *d, uint64_t size);
void gm_pl_unreserve(struct gm_pl_dev *d, uint64_t size);
void gm_pl_use(struct gm_pl_dev *d, uint64_t size, uint64_t requested);
void gm_pl_unuse(struct gm_pl_dev *d, uint64_t size);

/*
 * Change a charge of from bytes (made by gm_pl_charge) to to bytes, when
 * the size became known only after the driver's answer: growing is
 * checked against the cap like a charge (0 or GM_ELIMIT, counting no
 * OOM: the caller does), shrinking always succeeds.
 */
int gm_pl_recharge(struct gm_pl_dev *d, uint64_t from, uint64_t to,
		   enum gm_pl_kind kind);

/* Count a refusal by the cap (or the undersized check) of size bytes. */
void gm_pl_note_cap_oom(struct gm_pl_dev *d, uint64_t size);

/* Undo a charge (the driver refused, or the memory was freed). */
void gm_pl_uncharge(struct gm_pl_dev *d, uint64_t size, enum gm_pl_kind kind);

/* Count an out-of-memory answer of the driver itself (under the cap). */
void gm_pl_note_device_oom(struct gm_pl_dev *d, uint64_t size);

/* Record key (pointer or handle) after a successful allocation. */
void gm_pl_track(struct gm_ptrmap *m, uint64_t key, struct gm_pl_dev *d,
		 uint64_t size, enum gm_pl_kind kind);

/*
 * A free, in three steps that keep the charge at least what the driver
 * holds at every instant: gm_pl_untrack() forgets key before the driver
 * frees (so an address the driver hands out again at once is never
 * confused with the old one; false when it was not tracked), and keeps
 * its charge; after the driver's free returned, gm_pl_release() gives
 * the charge back, or, if the free failed, gm_pl_restore() puts the
 * entry back (its charge was never released).
 */
bool gm_pl_untrack(struct gm_ptrmap *m, uint64_t key,
		   struct gm_ptrmap_entry *e);
void gm_pl_release(const struct gm_ptrmap_entry *e);
void gm_pl_restore(struct gm_ptrmap *m, const struct gm_ptrmap_entry *e);

/*
 * Rewrite a memory-info answer for d: total = min(cap, total), free =
 * min(free, cap - reserved) clamped at zero. No-op without a cap.
 */
void gm_pl_clamp_info(const struct gm_pl_dev *d, uint64_t *free_bytes,
		      uint64_t *total_bytes);

/* "none", "cap", "device", "cap+device" or "undersized" (see README). */
const char *gm_pl_oom_verdict(const struct gm_pl_dev *d);

#endif
