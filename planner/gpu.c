/*
 * gpu.c - catalog entries as the model sees them (see gpu.h).
 */
#include "gpu.h"

#include "error.h"
#include "log.h"
#include "units.h"

#include <stdio.h>
#include <string.h>

uint64_t gm_plan_gpu_usable(const struct gm_plan_gpu *g)
{
	if (g->usable_bytes)
		return g->usable_bytes;
	return g->cuda_total_bytes ? g->cuda_total_bytes : g->capacity_bytes;
}

bool gm_plan_gpu_cap_above_usable(const struct gm_plan_gpu *g)
{
	return g->cap_bytes > gm_plan_gpu_usable(g);
}

void gm_plan_gpu_from(struct gm_plan_gpu *g, const struct gm_catalog *cat,
		      const struct gm_gpu *e, enum gm_task task)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->name, sizeof(g->name), "%s", e->name);
	g->capacity_bytes = e->total_bytes;
	g->cuda_total_bytes = e->cuda_total_bytes;
	g->usable_bytes = gm_gpu_usable_bytes(cat, e, &g->usable_estimated);
	g->context_bytes = task == GM_TASK_INFERENCE &&
			   e->cuda_context_inference_bytes ?
			   e->cuda_context_inference_bytes :
			   e->cuda_context_bytes;
	g->sm_major = (int)e->cc_major;
	g->multiprocessors = e->multiprocessors;
	g->threads_per_sm = gm_gpu_threads_per_sm(e);
	g->bandwidth_gbps = e->bandwidth_gbps;
	g->bf16_tflops = e->bf16_tflops;
}

int gm_plan_gpu_resolve(struct gm_plan_gpu *g, const struct gm_spec *spec,
			const struct gm_catalog *cat, const char *name,
			const char *option, struct gm_diag *diag)
{
	const struct gm_gpu *e;
	char near[512];

	if (!cat)
		cat = gm_catalog_builtin();
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
			gm_spec_gpu_suggest(cat, name, near, sizeof(near));
			return gm_diag_set(diag, GM_EINVAL,
					   "%s: unknown GPU '%s'%s", option,
					   name, near);
		}
	}
	gm_plan_gpu_from(g, cat, e, spec->task);
	return 0;
}

/* The precision the spec's task runs in. */
static enum gm_precision task_precision(const struct gm_spec *spec)
{
	return spec->task == GM_TASK_TRAIN ? spec->training.precision :
	       spec->inference.precision;
}

static bool precision_bf16(enum gm_precision p)
{
	return p == GM_PREC_BF16_MIXED || p == GM_PREC_BF16_TRUE;
}

static bool kv_bf16(const struct gm_spec *spec)
{
	return spec->task == GM_TASK_INFERENCE &&
	       spec->inference.kv_cache_dtype == GM_KV_BF16;
}

bool gm_plan_gpu_lacks_bf16(const struct gm_spec *spec,
			    const struct gm_plan_gpu *g)
{
	return g->sm_major < 8 &&
	       (precision_bf16(task_precision(spec)) || kv_bf16(spec));
}

void gm_plan_gpu_warn(const struct gm_spec *spec, const struct gm_plan_gpu *g)
{
	enum gm_precision p = task_precision(spec);
	uint64_t usable = gm_plan_gpu_usable(g);

	/* a --limit above the card: no allocation can reach it (the card
	 * runs out first), so the plan is the card's */
	if (gm_plan_gpu_cap_above_usable(g))
		gm_warn("the cap %.2f GiB is above %s's usable memory "
			"(%.2f GiB%s): it never binds, and the plan is against "
			"the card's %.2f GiB", g->cap_bytes / (double)GM_GiB,
			g->name, usable / (double)GM_GiB, g->usable_estimated ?
			", estimated" : ", CUDA's total", usable /
			(double)GM_GiB);
	if (g->sm_major >= 8)
		return;
	if (precision_bf16(p))
		gm_warn("%s (compute capability %d.x) has no bf16: %s needs "
			"sm_80 or newer (Ampere); plan with fp16 precision",
			g->name, g->sm_major, gm_precision_name(p));
	if (kv_bf16(spec))
		gm_warn("%s (compute capability %d.x) has no bf16: "
			"kv_cache_dtype bf16 needs sm_80 or newer (Ampere)",
			g->name, g->sm_major);
	if (spec->task == GM_TASK_TRAIN &&
	    spec->training.attention == GM_ATTN_FLASH)
		gm_warn("%s (compute capability %d.x) cannot run "
			"FlashAttention (sm_80 or newer); plan with "
			"attention sdpa or eager", g->name, g->sm_major);
}
