/*
 * cache.h - GPUMEM_MODE=cache: device allocations served from the
 * allocator core's pool (cache.c), one pool per device.
 *
 * The pool of a device is made on the first allocation on it, in the
 * calling thread's context, over the core's driver backend through the
 * REAL driver functions of the seam table (never the library's own
 * wrappers), wrapped so that every segment the pool takes is charged
 * against the one cap of account.h (gm_pl_reserve): the pool itself has
 * no cap, so pool segments and pass-through allocations share the cap
 * and nothing is counted twice.
 *
 * Segments are plain (cuMemAlloc) unless PyTorch's setting asks for
 * expandable segments (options.h, virtual_segments): then the pool grows
 * virtual segments (pool.h) and each granule is charged before its
 * cuMemCreate and given back after its cuMemRelease returned (the
 * charge hook of cuda.h), so the cap stays exact under either kind. A
 * device without virtual memory management gets plain segments, with
 * one warning.
 *
 * Streams. The pool keeps one arena per stream; a block freed on a
 * stream is reused at once on that stream and on another only after an
 * event shows the work before the free is done. The keys used:
 *  - stream-ordered calls on an explicit stream: that stream;
 *  - on the legacy default stream (0 or CU_STREAM_LEGACY): 0;
 *  - synchronous cuMemAlloc/cuMemAllocPitch, and stream-ordered calls on
 *    the per-thread default stream: GM_PL_SYNC_KEY, an arena whose free
 *    blocks are always idle: a synchronous cuMemFree first waits for the
 *    device (CUDA documents cuMemFree as synchronizing), a stream-ordered
 *    free of such a block is held back (record_stream) until the freeing
 *    stream's work is done.
 *
 * Errors: the functions return 0 or a negative GM_E*: GM_ELIMIT (the
 * cap), GM_EDEVNOMEM (the device), GM_ENOTFOUND (not the pool's
 * address: the caller passes it to the driver), GM_EINVAL, GM_ENODEV
 * (no pool could be made: the caller passes the call through).
 */
#ifndef GM_PL_CACHE_H
#define GM_PL_CACHE_H

#include "account.h"

#include <stdbool.h>
#include <stdint.h>

/* The arena of synchronous allocations: the legacy stream's handle
 * (CU_STREAM_LEGACY, 0x1), so events recorded on it are valid, yet a
 * key distinct from 0, the arena of stream-ordered legacy allocations. */
#define GM_PL_SYNC_KEY ((uintptr_t)0x1)
#define GM_PL_STREAM_PER_THREAD ((uintptr_t)0x2) /* CU_STREAM_PER_THREAD */

/* True when GPUMEM_MODE=cache. */
bool gm_pl_cache_on(void);

/*
 * The pool of d, made on first use; NULL when it cannot be made (then
 * the caller passes through, once warned).
 */
struct gm_pool *gm_pl_cache_pool(struct gm_pl_dev *d);

/*
 * A memory-info answer's free bytes (already clamped to the room under
 * the cap) as what the pool can really serve from a new segment there
 * (its rounding and segment sizes, gm_pool_servable); unchanged outside
 * cache mode or without a pool.
 */
uint64_t gm_pl_cache_servable(struct gm_pl_dev *d, uint64_t free_bytes);

/*
 * The arena key of a stream-ordered call: per_thread says the call is
 * a _ptsz variant (its stream 0 is the per-thread default stream).
 */
uintptr_t gm_pl_cache_key(uintptr_t stream, bool per_thread);

/*
 * Allocate size bytes on d for arena key (gm_pl_cache_key or
 * GM_PL_SYNC_KEY); counts the block as allocated, an OOM as such.
 */
int gm_pl_cache_alloc(struct gm_pl_dev *d, uint64_t size, uintptr_t key,
		      uint64_t *addr);

/*
 * Free addr if a pool owns it. sync: a synchronous free (waits for the
 * device first); else stream is the stream-ordered free's key.
 * GM_ENOTFOUND when no pool owns it, GM_EINVAL for an address inside a
 * block but not at its start.
 */
int gm_pl_cache_free(uint64_t addr, bool sync, uintptr_t key);

#endif
