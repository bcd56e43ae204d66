/*
 * reserve.c - the caching allocator's reserve (reserve.h). Constants from
 * pytorch/pytorch c10/cuda/CUDACachingAllocator.cpp at 001074d (a 2.x version).
 */
#include "reserve.h"

#include <math.h>

#define K_MIN_BLOCK 512.0
#define K_SMALL_SIZE 1048576.0      /* 1 MiB: the small pool's limit */
#define K_SMALL_BUFFER 2097152.0    /* 2 MiB segments for small blocks */
#define K_LARGE_BUFFER 20971520.0   /* 20 MiB segments for 1-10 MiB */
#define K_MIN_LARGE_ALLOC 10485760.0
#define K_ROUND_LARGE 2097152.0

uint64_t gm_alloc_round(double bytes)
{
	double r = ceil(bytes / K_MIN_BLOCK) * K_MIN_BLOCK;

	return r < K_MIN_BLOCK ? (uint64_t)K_MIN_BLOCK : (uint64_t)r;
}

void gm_blocks_add(struct gm_blocks *bs, double bytes, double count,
		   bool churn)
{
	if (!(bytes > 0) || !(count > 0))
		return;
	bs->allocated += (double)gm_alloc_round(bytes) * count;
	if (bs->n < GM_BLOCKS_MAX)
		bs->b[bs->n++] = (struct gm_block){bytes, count, churn};
}

/* Segments for count blocks of rounded size sz packed per segment size. */
static double packed(double sz, double count, double seg)
{
	double per = floor(seg / sz);

	return ceil(count / per) * seg;
}

double gm_reserved_from_allocated(const struct gm_blocks *bs)
{
	double reserved = 0, churn = 0;

	for (int i = 0; i < bs->n; i++) {
		const struct gm_block *b = &bs->b[i];
		double sz = (double)gm_alloc_round(b->bytes), seg;

		if (sz <= K_SMALL_SIZE)
			seg = packed(sz, b->count, K_SMALL_BUFFER);
		else if (sz < K_MIN_LARGE_ALLOC)
			seg = packed(sz, b->count, K_LARGE_BUFFER);
		else
			seg = ceil(sz / K_ROUND_LARGE) * K_ROUND_LARGE *
			      b->count;
		reserved += seg;
		if (b->churn)
			churn += sz * b->count;
	}
	return reserved + GM_FRAGMENTATION * churn;
}
