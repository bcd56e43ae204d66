/*
 * cap.c - plans under a per-process memory cap (see cap.h).
 */
#include "cap.h"

#include <stdint.h>

void gm_plan_gpu_cap(struct gm_plan_gpu *g, uint64_t num, uint64_t den,
		     uint64_t limit)
{
	uint64_t base = gm_plan_gpu_usable(g);
	uint64_t cap = 0;

	if (num && den) {
		__extension__ typedef unsigned __int128 u128;

		cap = (uint64_t)((u128)base * num / den);
	}
	if (limit && (!cap || limit < cap))
		cap = limit;
	g->cap_bytes = cap;
}

/*
 * The model holds the allocator to the card less what lies outside it
 * (context, libraries, NCCL: the same on every stage) and calls a plan
 * fit when reserved plus that is at most what a process can get of the
 * card (gm_plan_gpu_usable). Planning on a card of
 * cap + outside bytes therefore holds the allocator to the cap and fits
 * exactly when peak reserved <= cap; when that card is not smaller than
 * the real one the cap does not bind and the first plan stands.
 */
int gm_plan_capped(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		   const struct gm_model_opts *opts, struct gm_plan *out,
		   struct gm_diag *diag)
{
	struct gm_plan_gpu g = *gpu;
	double outside, card;
	int rc = gm_plan(spec, gpu, opts, out, diag);

	if (rc || !gpu->cap_bytes)
		return rc;
	outside = out->per_gpu.cuda_context;
	card = (double)gpu->cap_bytes + outside;
	if (card >= (double)gm_plan_gpu_usable(gpu))
		return 0;
	g.usable_bytes = (uint64_t)card;
	rc = gm_plan(spec, &g, opts, out, diag);
	out->gpu = *gpu;
	return rc;
}
