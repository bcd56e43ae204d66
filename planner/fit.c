/*
 * fit.c - sizing search (see fit.h).
 */
#include "fit.h"

#include "cap.h"

#include "error.h"

#include <stdlib.h>
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
	rc = gm_plan_capped(&s, gpu, o, &p, diag);
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

/* What an edge search varies: the micro-batch at a fixed data-parallel
 * degree, or the degree at a fixed micro-batch. */
struct probe {
	const struct gm_spec *spec;
	const struct gm_plan_gpu *gpu;
	const struct gm_model_opts *o;
	bool by_dp;   /* vary dp (fits grows with it) or mb (fits shrinks) */
	uint64_t mb, dp, gb;
	uint64_t lo, hi; /* the range searched */
};

/* Position t in [lo, hi] maps to a value such that "fits" only ever
 * turns from true to false as t grows: the micro-batch itself, or the
 * data-parallel degree mirrored (hi + lo - t). */
static uint64_t probe_value(const struct probe *p, uint64_t t)
{
	return p->by_dp ? p->hi + p->lo - t : t;
}

static int probe_fits(const struct probe *p, uint64_t t, bool *ok,
		      struct gm_diag *diag)
{
	uint64_t x = probe_value(p, t);
	double used;

	return p->by_dp ? try(p->spec, p->gpu, p->o, p->mb, x, 0, ok, &used,
			      diag)
			: try(p->spec, p->gpu, p->o, x, p->dp, p->gb, ok, &used,
			      diag);
}

/*
 * Move an answer *v of the analytic search to o's (the reserve models
 * differ by a few percent): the largest micro-batch that fits at
 * data-parallel degree dp, or the smallest degree >= 2 that fits at
 * micro-batch mb. Galloping from *v, then bisection: O(log distance)
 * plans. *v = 0: none fits.
 */
static int edge(const struct probe *p, uint64_t *v, struct gm_diag *diag)
{
	uint64_t t, good, bad, step = 1;
	bool ok;
	int rc;

	if (*v < p->lo)
		*v = p->lo;
	if (*v > p->hi)
		*v = p->hi;
	t = probe_value(p, *v); /* the mirror is its own inverse */
	if ((rc = probe_fits(p, t, &ok, diag)))
		return rc;
	if (ok) {
		for (good = t;; step *= 2) {
			uint64_t n = good + step;
			if (n > p->hi) {
				bad = p->hi + 1;
				break;
			}
			if ((rc = probe_fits(p, n, &ok, diag)))
				return rc;
			if (!ok) {
				bad = n;
				break;
			}
			good = n;
		}
	} else {
		for (bad = t;; step *= 2) {
			uint64_t n = bad > p->lo + step ? bad - step : p->lo;
			if (bad == p->lo) {
				*v = 0;
				return 0;
			}
			if ((rc = probe_fits(p, n, &ok, diag)))
				return rc;
			if (ok) {
				good = n;
				break;
			}
			bad = n;
		}
	}
	while (bad - good > 1) {
		uint64_t mid = good + (bad - good) / 2;
		if ((rc = probe_fits(p, mid, &ok, diag)))
			return rc;
		*(ok ? &good : &bad) = mid;
	}
	*v = probe_value(p, good);
	return 0;
}

static int mb_edge(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		   const struct gm_model_opts *o, uint64_t dp, uint64_t gb,
		   uint64_t *v, struct gm_diag *diag)
{
	struct probe p = {spec, gpu, o, false, 0, dp, gb, 1, GM_FIT_MAX};

	return edge(&p, v, diag);
}

static int dp_edge(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		   const struct gm_model_opts *o, uint64_t mb, uint64_t *v,
		   struct gm_diag *diag)
{
	struct probe p = {spec, gpu, o, true, mb, 0, 0, 2, GM_FIT_MAX};

	return edge(&p, v, diag);
}

/* Divisors of a number below 2^31: at most 1,600 (1,344 below 2^30). */
#define GM_FIT_MAX_DIVISORS 2048

static int desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/*
 * The largest micro-batch that divides gb / dp (so that micro x GA x dp
 * is gb exactly) and fits: the divisors, largest first, on the analytic
 * model (microseconds a plan), then from its answer down on o's until
 * o agrees. *mb = 0: not even 1 fits. gb / dp has at most 1,344
 * divisors below 2^30.
 */
static int exact_mb(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		    const struct gm_model_opts *search,
		    const struct gm_model_opts *o, uint64_t dp, uint64_t gb,
		    uint64_t *mb, struct gm_diag *diag)
{
	uint64_t n = gb / dp, div[GM_FIT_MAX_DIVISORS];
	bool ok = false, checked = false;
	size_t nd = 0;
	double used;
	int rc;

	*mb = 0;
	if (gb > GM_FIT_MAX_GLOBAL)
		return gm_diag_set(diag, GM_EINVAL, "global batch %llu is "
				   "more than %llu", (unsigned long long)gb,
				   (unsigned long long)GM_FIT_MAX_GLOBAL);
	if (!n || gb % dp)
		return gm_diag_set(diag, GM_EINVAL, "global batch %llu is not "
				   "a multiple of data_parallel %llu",
				   (unsigned long long)gb,
				   (unsigned long long)dp);
	/* divisors of n up to GM_FIT_MAX, largest first */
	for (uint64_t k = 1; k * k <= n; k++) {
		if (n % k)
			continue;
		if (n / k <= GM_FIT_MAX)
			div[nd++] = n / k;
		if (k != n / k && k <= GM_FIT_MAX)
			div[nd++] = k;
	}
	qsort(div, nd, sizeof(div[0]), desc);
	for (size_t i = 0; i < nd; i++) {
		rc = try(spec, gpu, checked ? o : search, div[i], dp, gb, &ok,
			 &used, diag);
		if (rc)
			return rc;
		if (ok && !checked) {
			/* the analytic answer; now ask o from here down */
			checked = true;
			rc = try(spec, gpu, o, div[i], dp, gb, &ok, &used,
				 diag);
			if (rc)
				return rc;
		}
		if (ok) {
			*mb = div[i];
			return 0;
		}
	}
	return 0;
}

int gm_fit(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	   const struct gm_model_opts *fo, uint64_t gb, struct gm_fit *out,
	   struct gm_diag *diag)
{
	struct gm_model_opts def, search;
	const struct gm_model_opts *o = fo;
	const struct gm_spec_parallel *par = &spec->parallelism;
	uint64_t dp = par->data_parallel ? par->data_parallel : 1;
	uint64_t lo = 0, hi = GM_FIT_MAX, mb;
	bool ok;
	double used;
	int rc;

	if (!o) {
		gm_model_opts_default(&def);
		o = &def;
	}
	/* The searches run on the analytic reserve (microseconds a plan);
	 * the answers are then checked with o's (the replay takes
	 * milliseconds: tools/bench/results/planner-cpu.md). */
	search = *o;
	search.reserve = GM_RESERVE_ANALYTIC;
	memset(out, 0, sizeof(*out));
	out->gpu = *gpu;
	if (!gb && spec->task == GM_TASK_TRAIN)
		gb = spec->training.global_batch_size;
	out->global_batch = gb;
	if (spec->task == GM_TASK_TRAIN && gb) {
		/* only exact pairs: micro x GA x dp = global */
		rc = exact_mb(spec, gpu, &search, o, dp, gb, &lo, diag);
		if (rc)
			return rc;
		goto found;
	}
	/* Largest micro-batch: lo fits (or is 0), hi + 1 does not. */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		rc = try(spec, gpu, &search, mid, dp, gb, &ok, &used, diag);
		if (rc)
			return rc;
		if (ok)
			lo = mid;
		else
			hi = mid - 1;
	}
	/* o's answer near the analytic one: the largest that fits */
	rc = mb_edge(spec, gpu, o, dp, gb, &lo, diag);
	if (rc)
		return rc;
found:
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
		rc = try(spec, gpu, &search, mb, hi, 0, &ok, &used, diag);
		if (rc)
			return rc;
		if (ok) {
			while (lo < hi) {
				uint64_t mid = lo + (hi - lo) / 2;
				rc = try(spec, gpu, &search, mb, mid, 0, &ok,
					 &used, diag);
				if (rc)
					return rc;
				if (ok)
					hi = mid;
				else
					lo = mid + 1;
			}
			rc = dp_edge(spec, gpu, o, mb, &lo, diag);
			if (rc)
				return rc;
			out->min_data_parallel = lo;
		}
	}
	out->min_gpus = out->min_data_parallel *
			(par->tensor_parallel ? par->tensor_parallel : 1) *
			(par->pipeline_parallel ? par->pipeline_parallel : 1);
	return 0;
}
