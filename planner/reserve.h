/*
 * reserve.h - the analytic model of the caching allocator's reserve
 * (reserve.c): `--reserve-model analytic`. The default prediction of
 * torch.cuda.max_memory_reserved() replays the step's allocations through
 * the allocator core instead (step.h); this one stays for comparison
 * with measurements and for gm_fit()'s searches, where its
 * microseconds a plan matter.
 *
 * The model hands over the live allocations of its peak phase as a short
 * list of blocks (size in bytes x count, persistent or churning), turned
 * into reserved bytes by PyTorch's rounding and segment rules plus a
 * fragmentation share. Bytes; no errors.
 */
#ifndef GM_RESERVE_H
#define GM_RESERVE_H

#include <stdbool.h>
#include <stdint.h>

struct gm_block {
	double bytes;       /* one allocation, as requested */
	double count;       /* how many alike */
	bool churn;         /* freed and re-allocated every step
			     * (activations, temporaries) */
};

#define GM_BLOCKS_MAX 160

struct gm_blocks {
	struct gm_block b[GM_BLOCKS_MAX];
	int n;
	double allocated;   /* sum of rounded sizes (what
			     * max_memory_allocated counts) */
};

/* Append count blocks of bytes each (ignored when bytes or count is 0). */
void gm_blocks_add(struct gm_blocks *bs, double bytes, double count,
		   bool churn);

/*
 * PyTorch's rounding of one request (CUDACachingAllocator round_size):
 * up to a multiple of 512 B (kMinBlockSize), at least 512 B.
 */
uint64_t gm_alloc_round(double bytes);

/*
 * Fraction of the churning bytes that fragmentation adds on top of their
 * segments: blocks freed and re-requested every step that the caching
 * allocator cannot serve from cached blocks of a fitting size, so it
 * cudaMallocs new segments. 0.05: the median (reserved - allocated) /
 * allocated of the tuning training configurations of
 * tests/data/calibration/measured-h200.json is 5.9% (H200, torch 2.11),
 * most of allocated being churn (a public PyTorch report showed 11-12% for
 * older training loops). The measured spread is wide, 0.5-50%: it depends
 * on the order of allocations (logits-sized blocks split by later smaller
 * requests, torch.cat growing KV caches), which one share cannot follow;
 * the allocator core's replay is the model for that. Build with
 * -DGM_FRAGMENTATION=x to try another share.
 */
#ifndef GM_FRAGMENTATION
#define GM_FRAGMENTATION 0.05
#endif

/*
 * Reserved bytes for blocks live at once: every block rounded to 512 B;
 * blocks <= 1 MiB packed into 2 MiB segments (kSmallBuffer), 1-10 MiB
 * blocks into 20 MiB segments (kLargeBuffer), larger ones in their own
 * segment rounded up to 2 MiB (kRoundLarge) (c10/cuda/CUDACachingAllocator.cpp
 * round_size and get_allocation_size); plus
 * GM_FRAGMENTATION of the churning bytes.
 */
double gm_reserved_from_allocated(const struct gm_blocks *bs);

#endif
