/*
 * gpu.h - the GPU a plan is for, from the catalog (gpu.c).
 * Errors: 0 or GM_EINVAL (unknown or missing GPU; diag names the spec's
 * file:line:column or the option, and the closest catalog names).
 */
#ifndef GM_PLANNER_GPU_H
#define GM_PLANNER_GPU_H

#include "catalog.h"
#include "model.h"

/* Fill g from catalog entry e for a task (training or inference use
 * different context costs). */
void gm_plan_gpu_from(struct gm_plan_gpu *g, const struct gm_gpu *e,
		      enum gm_task task);

/*
 * Resolve the GPU: name (from --gpu) when not NULL, else the spec's
 * hardware.gpu. option names the flag for messages ("--gpu").
 */
int gm_plan_gpu_resolve(struct gm_plan_gpu *g, const struct gm_spec *spec,
			const char *name, const char *option,
			struct gm_diag *diag);

#endif
