/*
 * gpu.h - the GPU a plan is for, from the catalog (gpu.c).
 * Errors: 0 or GM_EINVAL (unknown or missing GPU; diag names the spec's
 * file:line:column or the option, and the closest catalog names).
 */
#ifndef GM_PLANNER_GPU_H
#define GM_PLANNER_GPU_H

#include "catalog.h"
#include "model.h"

/* Fill g from catalog entry e of cat (NULL: the built-in one) for a task
 * (training or inference use different context costs). */
void gm_plan_gpu_from(struct gm_plan_gpu *g, const struct gm_catalog *cat,
		      const struct gm_gpu *e, enum gm_task task);

/*
 * Resolve the GPU in catalog cat (NULL: the built-in one, else e.g. a
 * --catalog FILE): name (from --gpu) when not NULL, else the spec's
 * hardware.gpu. option names the flag for messages ("--gpu").
 */
int gm_plan_gpu_resolve(struct gm_plan_gpu *g, const struct gm_spec *spec,
			const struct gm_catalog *cat, const char *name,
			const char *option, struct gm_diag *diag);

/*
 * Whether spec asks g for bf16 it lacks (compute capability below 8.0):
 * a bf16 precision, or an inference KV cache in bf16. gm_plan_gpu_warn()
 * says it for one named GPU; fit over the catalog counts them.
 */
bool gm_plan_gpu_lacks_bf16(const struct gm_spec *spec,
			    const struct gm_plan_gpu *g);

/*
 * Warn (gm_warn, stderr) what the spec asks of g that its compute
 * capability cannot run: bf16 precisions or a bf16 KV cache, and
 * FlashAttention (FlashAttention-2 and PyTorch's flash SDPA kernel), all
 * need sm_80 (Ampere) or newer; and a cap (g->cap_bytes, from --limit)
 * above the card's usable memory, which never binds. The plan itself
 * is unchanged.
 */
void gm_plan_gpu_warn(const struct gm_spec *spec, const struct gm_plan_gpu *g);

#endif
