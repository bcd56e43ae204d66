/*
 * pool.h - the caching device-memory allocator (pool.c and friends).
 *
 * A pool serves allocations from segments obtained through a backend
 * (backend.h) and caches freed blocks for reuse. Policy (each choice is
 * documented with its source in pool.c):
 *  - sizes rounded up to 512 B (optionally to power-of-2 divisions);
 *  - a small pool (<= 1 MiB, 2 MiB segments) and a large pool (1-10 MiB
 *    requests share 20 MiB segments, larger ones get their own rounded
 *    to 2 MiB), as PyTorch's caching allocator;
 *  - best fit by (size, address) in O(log n), split with limits, free
 *    neighbours coalesced at once;
 *  - one arena per stream with its own lock: a block freed on stream S
 *    is reused on S at once; another stream takes a free segment of S
 *    only after an event recorded on S after the free has completed;
 *    record_stream() defers reuse until the other streams' work is done;
 *  - on failure: process events, release cached segments, retry; only
 *    then report out-of-memory (shortage or fragmentation).
 *
 * Cap: enforced on reserved bytes (segments + mapped granules), checked
 * before the backend is asked, exact to the byte; never exceeded.
 *
 * Units: bytes. Device addresses are uint64_t. Streams are uintptr_t
 * (a cudaStream_t cast to an integer; 0 = legacy default stream).
 *
 * Errors: functions return 0 or a negative GM_E* (error.h):
 *  GM_ELIMIT    the request would take reserved bytes over the cap;
 *  GM_EDEVNOMEM the device has no room (after releasing cached memory);
 *  GM_ENOTFOUND free()/record_stream() of an address the pool does not
 *               own (the preload library forwards it to the driver);
 *  GM_EINVAL    bad arguments; GM_ENOMEM host memory; GM_EDEVICE driver.
 *
 * Thread safety: all functions except gm_pool_create/gm_pool_destroy may
 * be called from many threads at once (unless options.single_thread). The fast path takes one lock,
 * the stream's arena's (which also guards the arena's map of live
 * blocks); there is no pool-wide lock on it, and with several streams
 * the pool-wide count of allocated bytes is written only now and then
 * (per-arena credit; an allocation that makes a new peak locks every
 * arena once, so the peaks stay exact: pool.c, allocated_up).
 */
#ifndef GM_POOL_H
#define GM_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_backend;
struct gm_diag;
struct gm_val;
struct gm_pool;

struct gm_pool_options {
	/* Cap on reserved bytes: the smaller of cap_bytes and
	 * cap_fraction * device total; 0 for either means "not set";
	 * neither set = no cap beyond the device. */
	uint64_t cap_bytes;
	double cap_fraction;         /* in (0, 1] */
	uint64_t device_total_bytes; /* 0 = the backend's total_bytes */

	/* Grow and shrink virtual segments in granules instead of plain
	 * segments (PyTorch's expandable_segments); needs a backend with
	 * va_* ops, else gm_pool_create fails with GM_ENOTSUP. */
	bool virtual_segments;

	/* No caching: every allocation is its own segment, freed at once
	 * (the preload library's pass-through "limit" mode). */
	bool no_cache;

	/* PyTorch's max_split_size: blocks >= this are never split; 0 =
	 * unlimited. */
	uint64_t max_split_bytes;

	/* PyTorch's roundup_power2_divisions for sizes > 1 MiB (0, or a
	 * power of 2 such as 4 or 8); 0 = round to 512 B only. */
	unsigned roundup_power2_divisions;

	/* Never move a free segment to another stream's arena (PyTorch:
	 * a stream's cached blocks serve only that stream until they are
	 * released, c10/cuda/CUDACachingAllocator.cpp); for replays of PyTorch. */
	bool no_cross_stream;

	/* The caller never calls the pool from two threads at once (the
	 * planner's replay): allocate and free take no lock and count the
	 * pool-wide allocated bytes with plain loads and stores. The same
	 * blocks, statistics and peaks as without. */
	bool single_thread;
};

/* One statistic, as PyTorch's memory_stats: current, peak, and the
 * historical totals of increases (allocated) and decreases (freed). */
struct gm_pool_stat {
	uint64_t current;
	uint64_t peak;
	uint64_t allocated;
	uint64_t freed;
};

#define GM_POOL_HIST_BUCKETS 48 /* bucket i: live blocks of 2^i..2^(i+1)-1 B */

struct gm_pool_stats {
	/* bytes */
	struct gm_pool_stat allocated_bytes; /* live blocks (rounded) */
	struct gm_pool_stat requested_bytes; /* live blocks (as asked) */
	struct gm_pool_stat reserved_bytes;  /* segments / mapped granules */
	struct gm_pool_stat active_bytes;    /* live + pending-free blocks */
	struct gm_pool_stat inactive_split_bytes; /* free blocks in segments
						   * that are partly used */
	/* counts */
	struct gm_pool_stat allocations;     /* live blocks */
	struct gm_pool_stat segments;
	struct gm_pool_stat active;
	struct gm_pool_stat inactive_split;
	uint64_t num_alloc_retries;  /* cache released and retried */
	uint64_t num_ooms;           /* GM_EDEVNOMEM / GM_ELIMIT returned */
	uint64_t num_limit_rejections; /* segment refused by the cap */
	uint64_t num_device_alloc;   /* backend seg_alloc / va_map calls */
	uint64_t num_device_free;    /* backend seg_free / va_unmap calls */
	uint64_t num_cross_stream_reuse; /* segments moved between streams */
	/* free space (computed when the stats are read) */
	uint64_t free_bytes;          /* reserved - active */
	uint64_t largest_free_bytes;  /* largest free block */
	double fragmentation;         /* 1 - largest free / free; 0 if none */
	/* limits */
	uint64_t cap_bytes;           /* effective cap (device total if none) */
	uint64_t device_total_bytes;
	/* live blocks by size: bucket floor(log2(rounded size)) */
	uint64_t histogram[GM_POOL_HIST_BUCKETS];
};

enum gm_oom_kind {
	GM_OOM_NONE = 0,
	GM_OOM_SHORTAGE,      /* not enough bytes in total: a real shortage */
	GM_OOM_FRAGMENTATION, /* free cached + headroom would cover it, but
			       * no contiguous block of the size exists */
};

/* The last out-of-memory failure, for a message or report. */
struct gm_pool_oom {
	enum gm_oom_kind kind;
	int err;                   /* GM_ELIMIT or GM_EDEVNOMEM */
	uint64_t requested_bytes;  /* as asked */
	uint64_t rounded_bytes;    /* after rounding */
	uintptr_t stream;
	uint64_t allocated_bytes;
	uint64_t reserved_bytes;
	uint64_t free_cached_bytes; /* reserved - active */
	uint64_t largest_free_bytes;
	uint64_t cap_bytes;
	uint64_t device_free_bytes; /* from the backend; 0 if unknown */
};

/*
 * Create a pool over be (which must outlive it). opt may be NULL
 * (defaults: no cap, plain segments, caching on). Returns 0, GM_EINVAL
 * (fraction outside (0, 1], cap 0 after applying the fraction, bad
 * divisions), GM_ENOTSUP (virtual segments without va_* ops) or
 * GM_ENOMEM; diag explains.
 */
int gm_pool_create(struct gm_pool **out, struct gm_backend *be,
		   const struct gm_pool_options *opt, struct gm_diag *diag);

/*
 * Give every segment back to the backend (even ones with live blocks)
 * and free the pool. Not thread safe.
 */
void gm_pool_destroy(struct gm_pool *pool);

/*
 * Allocate size bytes (>= 1) for use on stream. *addr is aligned to 512
 * bytes. Returns 0, GM_EINVAL (size 0 or absurd), GM_ELIMIT,
 * GM_EDEVNOMEM, GM_ENOMEM, GM_EDEVICE. On failure *addr is 0 and the
 * report of gm_pool_last_oom() is updated.
 */
int gm_pool_alloc(struct gm_pool *pool, uint64_t size, uintptr_t stream,
		  uint64_t *addr);

/*
 * gm_pool_alloc() that stops where that would first release cached
 * segments (PyTorch's release_cached_blocks before its retry): it then
 * returns GM_ELIMIT or GM_EDEVNOMEM with nothing released, recorded or
 * left charged (the pool as before the call). Else as gm_pool_alloc().
 */
int gm_pool_alloc_try(struct gm_pool *pool, uint64_t size, uintptr_t stream,
		      uint64_t *addr);

/*
 * Free a block returned by gm_pool_alloc (addr must be its start).
 * The block is reusable at once on its own stream (stream order makes
 * that safe), on other streams only once the streams' work that
 * preceded the free is done. Returns 0 or GM_ENOTFOUND.
 */
int gm_pool_free(struct gm_pool *pool, uint64_t addr);

/*
 * Tell the pool that the block at addr is also used on stream (PyTorch's
 * Tensor.record_stream): at free, an event is recorded on each such
 * stream and the block is not reused until all have completed.
 * Returns 0, GM_ENOTFOUND or GM_ENOMEM.
 */
int gm_pool_record_stream(struct gm_pool *pool, uint64_t addr,
			  uintptr_t stream);

/*
 * Look up an address: if addr lies inside a live block, *base and *size
 * (both may be NULL) get the block's start and rounded size and 0 is
 * returned; else GM_ENOTFOUND.
 */
int gm_pool_lookup(struct gm_pool *pool, uint64_t addr, uint64_t *base,
		   uint64_t *size);

/*
 * Give every fully free cached segment back to the backend (and unmap
 * free granules of virtual segments), after waiting for pending events
 * (PyTorch's empty_cache). Returns 0 or GM_EDEVICE.
 */
int gm_pool_release_cached(struct gm_pool *pool);

/* Read the statistics (each counter exact; no walk over blocks: the
 * largest free block comes from each arena's size tree). */
void gm_pool_get_stats(struct gm_pool *pool, struct gm_pool_stats *st);

/* Reset every peak to its current value. */
void gm_pool_reset_peaks(struct gm_pool *pool);

/* Current reserved bytes and the effective cap (cheap). */
uint64_t gm_pool_reserved(const struct gm_pool *pool);
uint64_t gm_pool_cap(const struct gm_pool *pool);

/* The last out-of-memory failure (kind GM_OOM_NONE if none yet). */
void gm_pool_last_oom(struct gm_pool *pool, struct gm_pool_oom *oom);

/*
 * A one-line explanation of an OOM report into buf ("out of memory:
 * tried to allocate 2.00 GiB on stream 0x0; 3.50 GiB free in the pool
 * but the largest free block is 1.00 GiB: fragmentation ..."). Returns buf.
 */
char *gm_pool_oom_format(const struct gm_pool_oom *oom, char *buf,
			 size_t len);

/*
 * Build report values through the output layer (emit.h); NULL when out
 * of host memory. gm_pool_stats_val: the stats as an object with keys
 * allocated_bytes, peak_allocated_bytes, reserved_bytes,
 * peak_reserved_bytes, active_bytes, inactive_split_bytes,
 * largest_free_bytes, fragmentation, counts, histogram...
 * gm_pool_snapshot: {"segments": [{address, stream, pool, virtual,
 * total_size_bytes, allocated_size_bytes, blocks: [{address, size_bytes,
 * requested_size_bytes, state}]}]} with state "active_allocated",
 * "active_pending_free" or "inactive" (PyTorch's snapshot names).
 */
struct gm_val *gm_pool_stats_val(const struct gm_pool_stats *st);
struct gm_val *gm_pool_snapshot(struct gm_pool *pool);
struct gm_val *gm_pool_oom_val(const struct gm_pool_oom *oom);

/*
 * The largest request (bytes) that a new segment of at most room bytes
 * can serve under the pool's size policy (rounding, segment sizes): what
 * may be reported as free when room bytes can still be reserved. 0 when
 * not even the smallest request fits.
 */
uint64_t gm_pool_servable(const struct gm_pool *pool, uint64_t room);

/* True when the pool grows virtual segments (options.virtual_segments). */
bool gm_pool_virtual(const struct gm_pool *pool);

/* The size a request is rounded to under the pool's options. */
uint64_t gm_pool_round_size(const struct gm_pool *pool, uint64_t size);

/*
 * For a replay that serves a repeated run of small-pool requests without
 * the pool (planner/step.c). gm_pool_is_small: a request of size bytes
 * goes to the small pool (rounded <= 1 MiB, plain segments, caching on;
 * false for virtual or uncached pools). gm_pool_small_state: the small
 * pool of stream's arena as words into buf[0 .. cap): each segment in
 * the arena's order (address, size, its block count), then each of its
 * blocks in address order (address, size, state: free, live or pending).
 * That is every input of the small pool's decisions (best fit by size
 * and address among its free blocks, splits, merges with free
 * neighbours, the empty segments a release would free), so two equal
 * states answer the same requests with the same blocks. Returns the
 * number of words (more than cap: buf holds the first cap). Caller:
 * no thread uses the pool meanwhile. gm_pool_device_calls: segment
 * allocations and frees, releases and failures so far; unchanged over a
 * run of calls, none of them reached the backend or released a cached
 * segment.
 */
bool gm_pool_is_small(const struct gm_pool *pool, uint64_t size);
/* The largest size gm_pool_is_small() accepts (it accepts every size
 * from 1 up to it); 0 when it accepts none. */
uint64_t gm_pool_small_max(const struct gm_pool *pool);
size_t gm_pool_small_state(struct gm_pool *pool, uintptr_t stream,
			   uint64_t *buf, size_t cap);
uint64_t gm_pool_device_calls(const struct gm_pool *pool);
/*
 * The whole pool as words into buf[0 .. cap), in the form of
 * gm_pool_small_state but over every arena (in creation order, each led
 * by its stream) and both pools: each segment in the arena's order
 * (address, size, reserved range, pool and flags, block count), then its
 * blocks (address, size, state). With the backend's own state
 * (gm_sim_state), every input of the pool's decisions: two equal states
 * answer the same calls with the same blocks and device calls. Counters
 * and statistics are left out. Returns the number of words (more than
 * cap: buf holds the first cap). Caller: no thread uses the pool
 * meanwhile.
 */
size_t gm_pool_state(struct gm_pool *pool, uint64_t *buf, size_t cap);
/* Releases of cached segments (and segment frees) so far. */
uint64_t gm_pool_releases(const struct gm_pool *pool);

#endif
