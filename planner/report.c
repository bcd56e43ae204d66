/*
 * report.c - plan and fit reports (see report.h).
 */
#include "report.h"

#include "chart.h"

#include "emit.h"
#include "error.h"
#include "units.h"

#include <math.h>
#include <string.h>

/* Bytes as an integer, saturated at 2^63 (no undefined conversion). */
static uint64_t u(double bytes)
{
	if (!(bytes > 0))
		return 0;
	if (bytes >= 0x1p63)
		return (uint64_t)1 << 63;
	return (uint64_t)llround(bytes);
}

static struct gm_val *terms_obj(const struct gm_terms *t, bool stage)
{
	struct gm_val *o = gm_val_obj();

	if (stage) {
		gm_obj_set_uint(o, "layers", t->layers);
		gm_obj_set_uint(o, "micro_batches_in_flight", t->in_flight);
	}
	gm_obj_set_uint(o, "weights_bytes", u(t->weights));
	gm_obj_set_uint(o, "gradients_bytes", u(t->gradients));
	gm_obj_set_uint(o, "optimizer_states_bytes", u(t->optimizer_states));
	gm_obj_set_uint(o, "activations_bytes", u(t->activations));
	gm_obj_set_uint(o, "logits_bytes", u(t->logits));
	gm_obj_set_uint(o, "temporary_bytes", u(t->temporary));
	gm_obj_set_uint(o, "kv_cache_bytes", u(t->kv_cache));
	gm_obj_set_uint(o, "communication_bytes", u(t->communication));
	gm_obj_set_uint(o, "workspace_bytes", u(t->workspace));
	gm_obj_set_str(o, "peak_phase", gm_phase_name(t->peak_phase));
	gm_obj_set_uint(o, "peak_allocated_bytes", u(t->peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", u(t->peak_reserved));
	gm_obj_set_uint(o, "cuda_context_bytes", u(t->cuda_context));
	gm_obj_set_uint(o, "nccl_bytes", u(t->nccl));
	gm_obj_set_uint(o, "device_used_bytes", u(t->device_used));
	return o;
}

struct gm_val *gm_plan_report(const struct gm_plan *p)
{
	struct gm_val *o = gm_val_obj(), *st;

	gm_obj_set_str(o, "name", p->name);
	gm_obj_set_str(o, "gpu", p->gpu.name);
	gm_obj_set_uint(o, "gpu_capacity_bytes", p->gpu.capacity_bytes);
	/* only under --fraction / --limit: the allocator's cap (cap.h) */
	if (p->gpu.cap_bytes)
		gm_obj_set_uint(o, "cap_bytes", p->gpu.cap_bytes);
	gm_obj_set_uint(o, "parameters", p->parameters);
	gm_obj_set(o, "per_gpu", terms_obj(&p->per_gpu, false));
	gm_obj_set_bool(o, "fits", p->fits);
	gm_obj_set_int(o, "headroom_bytes", p->headroom_bytes);
	gm_obj_set_uint(o, "gradient_accumulation_steps",
			p->gradient_accumulation_steps);
	if (p->n_stages > 1) {
		st = gm_val_arr();
		for (unsigned i = 0; i < p->n_stages; i++) {
			struct gm_val *s = terms_obj(&p->stages[i], true);
			gm_arr_push(st, s);
		}
		gm_obj_set(o, "stages", st);
	}
	return o;
}

struct gm_val *gm_fit_report(const char *name, const struct gm_fit *f,
			     size_t n)
{
	struct gm_val *arr = gm_val_arr();

	(void)name;
	for (size_t i = 0; i < n; i++) {
		struct gm_val *r = gm_val_obj();
		gm_obj_set_str(r, "gpu", f[i].gpu.name);
		gm_obj_set_uint(r, "capacity_bytes", f[i].gpu.capacity_bytes);
		if (f[i].gpu.cap_bytes)
			gm_obj_set_uint(r, "cap_bytes", f[i].gpu.cap_bytes);
		gm_obj_set_real(r, "bandwidth_gbps", f[i].gpu.bandwidth_gbps);
		/* 0 in the catalog: not known (a table prints "-") */
		if (f[i].gpu.bf16_tflops > 0)
			gm_obj_set_real(r, "bf16_tflops",
					f[i].gpu.bf16_tflops);
		else
			gm_obj_set(r, "bf16_tflops", gm_val_null());
		gm_obj_set_uint(r, "max_micro_batch", f[i].max_micro_batch);
		gm_obj_set_uint(r, "gradient_accumulation_steps",
				f[i].gradient_accumulation_steps);
		gm_obj_set_uint(r, "min_gpus", f[i].min_gpus);
		gm_obj_set_uint(r, "device_used_bytes", u(f[i].device_used));
		gm_arr_push(arr, r);
	}
	return arr;
}

/* ==== SVG ==== */

int gm_plan_svg(FILE *out, const struct gm_plan *plans,
		const struct gm_fit *fits, size_t n)
{
	if (!fits && n == 1)
		return gm_chart_stages(out, plans);
	return gm_chart_fit(out, plans, fits, n);
}
