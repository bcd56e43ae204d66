/*
 * gpu.c - catalog entries as the model sees them (see gpu.h).
 */
#include "gpu.h"

#include "error.h"

#include <stdio.h>
#include <string.h>

void gm_plan_gpu_from(struct gm_plan_gpu *g, const struct gm_gpu *e,
		      enum gm_task task)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", e->name);
	g->capacity_bytes = e->total_bytes;
	g->context_bytes = task == GM_TASK_INFERENCE &&
			   e->cuda_context_inference_bytes ?
			   e->cuda_context_inference_bytes :
			   e->cuda_context_bytes;
	g->sm_major = (int)e->cc_major;
	g->bandwidth_gbps = e->bandwidth_gbps;
	g->bf16_tflops = e->bf16_tflops;
}

int gm_plan_gpu_resolve(struct gm_plan_gpu *g, const struct gm_spec *spec,
			const char *name, const char *option,
			struct gm_diag *diag)
{
	const struct gm_catalog *cat = gm_catalog_builtin();
	const struct gm_gpu *e;
	const char *near[3];
	size_t n;

	if (!name) {
		if (!spec->gpu[0])
			return gm_diag_set(diag, GM_EINVAL,
					   "%s: no GPU: give hardware.gpu in "
					   "the spec or %s NAME", spec->path,
					   option);
		e = gm_catalog_find(cat, spec->gpu);
		if (!e) {
			if (gm_spec_check_gpu_catalog(spec, cat, diag))
				return GM_EINVAL;
			return gm_diag_set(diag, GM_EINVAL,
					   "hardware.gpu: unknown GPU '%s'",
					   spec->gpu);
		}
	} else {
		e = gm_catalog_find(cat, name);
		if (!e) {
			n = gm_catalog_suggest(cat, name, near, 3);
			return gm_diag_set(diag, GM_EINVAL,
					   "%s: unknown GPU '%s'%s%s%s%s%s%s",
					   option, name, n ? "; closest: " : "",
					   n ? near[0] : "", n > 1 ? ", " : "",
					   n > 1 ? near[1] : "",
					   n > 2 ? ", " : "",
					   n > 2 ? near[2] : "");
		}
	}
	gm_plan_gpu_from(g, e, spec->task);
	return 0;
}
