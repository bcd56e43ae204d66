/*
 * oom_say.h - one line on stderr when the library (or the driver behind
 * it) refuses a device allocation (oom_say.c), in the manner of
 * PyTorch's OutOfMemoryError message (c10/cuda/CUDACachingAllocator.cpp,
 * DeviceCachingAllocator::malloc): what was asked, the cap, allocated,
 * reserved, the cache's largest free block (cache mode only), the room
 * under the cap, and why.
 */
#ifndef GM_PL_OOM_SAY_H
#define GM_PL_OOM_SAY_H

#include <stdint.h>

struct gm_pl_dev;

enum gm_pl_oom_why {
	GM_PL_OOM_CAP,        /* over the cap */
	GM_PL_OOM_DEVICE,     /* the driver said out of memory */
	GM_PL_OOM_UNDERSIZED, /* GPUMEM_ON_UNDERSIZED=fail refuses all */
	GM_PL_OOM_UNREADABLE, /* GPUMEM_LIMIT/FRACTION unreadable: all */
};

/*
 * Say that size bytes were refused on d. Once per burst: a refusal
 * within GM_PL_OOM_BURST_NS of the previous one on d is counted, not
 * printed; the next line says how many were. Fragmentation is told from
 * a shortage by the cache-mode pool's last OOM. Thread safe; allocates
 * nothing.
 */
/*
 * The largest free block on d, one source for the out-of-memory line and
 * the report's largest_free_block_bytes: pool_largest (the cache's, in
 * bytes) in cache mode; 0 in limit mode, which caches nothing (the
 * driver's free memory is not a block of the library's).
 */
uint64_t gm_pl_largest_free_block(const struct gm_pl_dev *d,
				  uint64_t pool_largest);

#define GM_PL_OOM_BURST_NS 1000000000ULL
void gm_pl_oom_say(struct gm_pl_dev *d, uint64_t size, enum gm_pl_oom_why why);

#endif
