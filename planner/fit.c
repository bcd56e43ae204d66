/*
 * fit.c - sizing search (see fit.h).
 */
#include "fit.h"

#include "error.h"

#include <string.h>

static int try(const struct gm_spec *base, const struct gm_plan_gpu *gpu,
	       const struct gm_model_opts *o, uint64_t mb, uint64_t dp,
	       uint64_t gb, bool *fits, double *used, struct gm_diag *diag)
{
	struct gm_spec s = *base;
	struct gm_plan p;
	int rc;

	s.training.micro_batch_size = mb;
	s.inference.batch_size = mb;
	s.parallelism.data_parallel = dp;
	s.training.global_batch_size = gb;
	rc = gm_plan(&s, gpu, o, &p, diag);
	if (rc)
		return rc;
	*fits = p.fits;
	*used = p.per_gpu.device_used;
	return 0;
}

static uint64_t ga_for(uint64_t gb, uint64_t mb, uint64_t dp)
{
	uint64_t per = mb * dp;

	return gb && per ? (gb + per - 1) / per : 1;
}

int gm_fit(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	   const struct gm_model_opts *o, uint64_t gb, struct gm_fit *out,
	   struct gm_diag *diag)
{
	const struct gm_spec_parallel *par = &spec->parallelism;
	uint64_t dp = par->data_parallel ? par->data_parallel : 1;
	uint64_t lo = 0, hi = GM_FIT_MAX, mb;
	bool ok;
	double used;
	int rc;

	memset(out, 0, sizeof(*out));
	out->gpu = *gpu;
	if (!gb && spec->task == GM_TASK_TRAIN)
		gb = spec->training.global_batch_size;
	out->global_batch = gb;
	/* Largest micro-batch: lo fits (or is 0), hi + 1 does not. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		rc = try(spec, gpu, o, mid, dp, gb, &ok, &used, diag);
		if (rc)
			return rc;
		if (ok)
			lo = mid;
		else
			hi = mid - 1;
	}
	if (gb && dp && gb / dp > lo && gb / dp <= GM_FIT_MAX) {
		/* no accumulation at all frees the gradients in forward */
		rc = try(spec, gpu, o, gb / dp, dp, gb, &ok, &used, diag);
		if (rc)
			return rc;
		if (ok)
			lo = gb / dp;
	}
	out->max_micro_batch = lo;
	out->gradient_accumulation_steps = lo ? ga_for(gb, lo, dp) : 0;
	mb = lo ? lo : 1;
	rc = try(spec, gpu, o, mb, dp, gb, &ok, &out->device_used, diag);
	if (rc)
		return rc;

	/* Fewest data-parallel ranks at the spec's micro-batch. */
	mb = spec->task == GM_TASK_TRAIN ? spec->training.micro_batch_size
					 : spec->inference.batch_size;
	rc = try(spec, gpu, o, mb, 1, 0, &ok, &used, diag);
	if (rc)
		return rc;
	if (ok) {
		out->min_data_parallel = 1;
	} else if (spec->task == GM_TASK_TRAIN && par->zero_stage > 0) {
		lo = 2;
		hi = GM_FIT_MAX;
		rc = try(spec, gpu, o, mb, hi, 0, &ok, &used, diag);
		if (rc)
			return rc;
		if (ok) {
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2;
				rc = try(spec, gpu, o, mb, mid, 0, &ok, &used,
					 diag);
				if (rc)
					return rc;
				if (ok)
					hi = mid;
				else
					lo = mid + 1;
			}
			out->min_data_parallel = lo;
		}
	}
	out->min_gpus = out->min_data_parallel *
			(par->tensor_parallel ? par->tensor_parallel : 1) *
			(par->pipeline_parallel ? par->pipeline_parallel : 1);
	return 0;
}
