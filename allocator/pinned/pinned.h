/*
 * pinned.h - a cache of page-locked (pinned) host memory behind
 * cudaMallocHost, cudaHostAlloc, cuMemAllocHost and cuMemHostAlloc
 * (defined in pinned.c).
 *
 * The driver takes milliseconds to pin and unpin memory, so programs that
 * allocate a staging buffer every step crawl. This cache serves such
 * requests from jemalloc arenas (gpumem's private copy, see
 * jemalloc_private.h) whose extent hooks take chunks from cuMemHostAlloc:
 * one arena per flag set (portable, device-mapped, write-combined and
 * their combinations: 8 at most), created on first use. A freed buffer
 * returns to its arena and is reused; driver chunks go back to the driver
 * on gm_pinned_trim() and gm_pinned_destroy().
 *
 * Chunks: with jemalloc's "retain" growth an arena asks the hooks for
 * slabs of 2 MiB first, then one size class more per growth, up to
 * grow_limit; a request larger than the next slab gets a chunk of its own
 * size class (a 64 MiB request: one 64 MiB chunk). Every chunk is one
 * cuMemHostAlloc call. jemalloc may split a chunk freely, but the merge
 * hook refuses to join ranges of two different driver calls: the driver
 * frees, maps and answers pointer queries per allocation. Parts of a
 * chunk cannot be unpinned, so the hooks refuse decommit and purge and
 * free a chunk only when jemalloc hands back the whole of it.
 *
 * A sorted range map (chunk -> size, flags, device pointer), read under
 * a read-write lock, answers "is this pointer ours" and the pointer
 * queries; the device pointer of a mapped sub-allocation is that of its
 * chunk plus the offset. The cache's own memory comes from the private
 * jemalloc, never from the program's malloc.
 *
 * Units: bytes. Errors: 0 or a negative GM_E*; where the driver failed,
 * *res holds its CUresult so an interposed entry point can return it.
 * Thread-safe.
 */
#ifndef GM_PINNED_H
#define GM_PINNED_H

#include "cu.h"
#include "emit.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_diag;
struct gm_pinned;

/* Exported from libgpumem-pinned.so (the preload library finds it). */
#define GM_PINNED_API __attribute__((visibility("default")))

/* The flag bits the cache serves (CU_MEMHOSTALLOC_*); others pass through. */
#define GM_PINNED_FLAGS_ALL                                                  \
	(GM_CU_MEMHOSTALLOC_PORTABLE | GM_CU_MEMHOSTALLOC_DEVICEMAP |        \
	 GM_CU_MEMHOSTALLOC_WRITECOMBINED)

/* Every buffer starts on a multiple of this (like cudaMalloc's 256). */
#define GM_PINNED_ALIGN 256

struct gm_pinned_opts {
	/* Largest slab one growth asks for; 0 means 64 MiB. */
	size_t grow_limit;
};

struct gm_pinned_stats {
	uint64_t in_use_bytes;   /* in live buffers (usable sizes) */
	uint64_t reserved_bytes; /* held from the driver now */
	uint64_t cached_bytes;   /* reserved - in use: ready for reuse */
	uint64_t peak_reserved_bytes;
	uint64_t peak_in_use_bytes;
	uint64_t buffers;        /* live buffers */
	uint64_t chunks;         /* driver allocations held */
	uint64_t allocs;         /* buffers served */
	uint64_t frees;          /* buffers taken back */
	uint64_t driver_allocs;  /* cuMemHostAlloc calls that succeeded */
	uint64_t driver_frees;   /* cuMemFreeHost calls */
	uint64_t driver_failures; /* cuMemHostAlloc calls that failed */
	uint64_t merges_refused; /* jemalloc merges across driver chunks */
};

/* What the range map knows about a pointer inside a cached chunk. */
struct gm_pinned_info {
	void *chunk;          /* start of the driver allocation */
	size_t chunk_size;
	unsigned flags;       /* CU_MEMHOSTALLOC_* of the chunk */
	gm_cu_ptr device_ptr; /* the pointer's device address; 0 unmapped */
};

/*
 * Make a cache over cu's cuMemHostAlloc / cuMemFreeHost (and
 * cuMemHostGetDevicePointer_v2 for mapped memory). cu must outlive the
 * cache; opts may be NULL. Returns 0, GM_ENOTSUP when cu lacks the
 * host-allocation functions, GM_ENOMEM.
 */
GM_PINNED_API int gm_pinned_create(struct gm_pinned **out, const struct gm_cu *cu,
		     const struct gm_pinned_opts *opts, struct gm_diag *diag);

/*
 * Give every chunk back to the driver and free the cache. Buffers still
 * live become invalid. NULL is ignored.
 */
GM_PINNED_API void gm_pinned_destroy(struct gm_pinned *pc);

/*
 * A pinned buffer of size bytes with CU_MEMHOSTALLOC_* flags, page
 * aligned from 4 KiB up, GM_PINNED_ALIGN aligned below. Returns 0;
 * GM_ENOTSUP for size 0 or flags the cache does not serve (pass the call
 * through); GM_ENOMEM or GM_EDEVICE when the driver failed, with its
 * CUresult in *res (res may be NULL).
 */
GM_PINNED_API int gm_pinned_alloc(struct gm_pinned *pc, void **p, size_t size,
		    unsigned flags, gm_cu_result *res);

/*
 * Take back a buffer gm_pinned_alloc() returned. Returns 0, or
 * GM_ENOTFOUND when p is not in a cached chunk (pass the call through).
 * p must be the start of a live buffer, as for cuMemFreeHost.
 */
GM_PINNED_API int gm_pinned_free(struct gm_pinned *pc, void *p);

/* Fill *info for p, any address inside a cached chunk; GM_ENOTFOUND. */
GM_PINNED_API int gm_pinned_query(struct gm_pinned *pc, const void *p,
		    struct gm_pinned_info *info);

/*
 * The device address of p in mapped (DEVICEMAP) memory: the chunk's
 * device pointer plus p's offset. GM_ENOTFOUND when p is not cached,
 * GM_EINVAL when its chunk is not mapped (the driver's
 * CUDA_ERROR_INVALID_VALUE).
 */
GM_PINNED_API int gm_pinned_device_pointer(struct gm_pinned *pc, const void *p,
			     gm_cu_ptr *d);

/*
 * Give cached memory back: every arena is purged (whole free chunks go
 * to the driver), and arenas without live buffers are destroyed, which
 * returns all their chunks. Returns the bytes given back.
 */
GM_PINNED_API size_t gm_pinned_trim(struct gm_pinned *pc);

/* A consistent-enough snapshot of the counters (each read atomically). */
GM_PINNED_API void gm_pinned_stats(struct gm_pinned *pc, struct gm_pinned_stats *s);

/*
 * Add the report keys to obj: pinned_in_use_bytes, pinned_cached_bytes,
 * pinned_reserved_bytes, pinned_peak_reserved_bytes, pinned_buffers,
 * pinned_chunks, pinned_allocs_total, pinned_frees_total,
 * pinned_driver_allocs_total, pinned_driver_frees_total. Prometheus
 * metrics are the same names prefixed "gpumem_". Inline, so the caller's
 * own output layer builds the values (the cache may live in another
 * shared library).
 */
static inline void gm_pinned_stats_set(struct gm_val *obj,
				       const struct gm_pinned_stats *s)
{
	gm_obj_set_uint(obj, "pinned_in_use_bytes", s->in_use_bytes);
	gm_obj_set_uint(obj, "pinned_cached_bytes", s->cached_bytes);
	gm_obj_set_uint(obj, "pinned_reserved_bytes", s->reserved_bytes);
	gm_obj_set_uint(obj, "pinned_peak_reserved_bytes",
			s->peak_reserved_bytes);
	gm_obj_set_uint(obj, "pinned_buffers", s->buffers);
	gm_obj_set_uint(obj, "pinned_chunks", s->chunks);
	gm_obj_set_uint(obj, "pinned_allocs_total", s->allocs);
	gm_obj_set_uint(obj, "pinned_frees_total", s->frees);
	gm_obj_set_uint(obj, "pinned_driver_allocs_total", s->driver_allocs);
	gm_obj_set_uint(obj, "pinned_driver_frees_total", s->driver_frees);
}

/* ==== Internal, for tests ==== */

/*
 * The merge hook's rule: whether jemalloc may join [a, a + sa) and
 * [b, b + sb), i.e. whether one driver allocation holds both.
 */
bool gm__pinned_merge_ok(struct gm_pinned *pc, const void *a, size_t sa,
			 const void *b, size_t sb);

#endif
