/*
 * cap.h - plans under a per-process memory cap (cap.c): the cap that
 * `gpumem run --fraction F / --limit SIZE` (the preload library) or
 * torch.cuda.set_per_process_memory_fraction(F) enforces.
 *
 * The cap covers the allocator's memory (what the caching allocator
 * reserves from the driver: torch.cuda.max_memory_reserved()), not the
 * CUDA context, the libraries' modules or NCCL's buffers, which no
 * allocation call takes and which are outside every per-process cap.
 * A plan under a cap fits when peak reserved <= cap and reserved plus
 * the memory outside the allocator <= the card. Bytes throughout.
 */
#ifndef GM_PLANNER_CAP_H
#define GM_PLANNER_CAP_H

#include <stdint.h>

#include "model.h"

/*
 * Set g->cap_bytes from a fraction num/den (num 0: none) and a limit in
 * bytes (0: none): floor(num x the total / den, exact, as the preload
 * library's GPUMEM_FRACTION; the total is the one CUDA reports,
 * cudaMemGetInfo's, which both caps take the fraction of: the plan's
 * usable memory, gm_plan_gpu_usable), and the smaller of the two when both are
 * given, as the preload library does. No cap leaves cap_bytes 0.
 */
void gm_plan_gpu_cap(struct gm_plan_gpu *g, uint64_t num, uint64_t den,
		     uint64_t limit);

/*
 * gm_plan() under gpu->cap_bytes (none: gm_plan() itself). The step is
 * replayed with the allocator held to the cap, as the caching allocator
 * runs under set_per_process_memory_fraction (it frees its cached blocks
 * and retries before it reports out of memory); fits and headroom_bytes
 * are against the cap (headroom = cap - peak reserved) or the card,
 * whichever binds. out->gpu keeps the card's capacity and the cap.
 * Errors as gm_plan().
 */
int gm_plan_capped(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		   const struct gm_model_opts *opts, struct gm_plan *out,
		   struct gm_diag *diag);

#endif
