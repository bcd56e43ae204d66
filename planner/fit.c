/*
 * fit.c - sizing search (see fit.h).
 *
 * One definition of "fits" serves gpumem plan and gpumem fit:
 * gm_plan_capped() (cap.h: gm_plan() unless a cap is set) with the
 * caller's options (the replay by default). The analytic
 * reserve model (microseconds a plan) only proposes where to start;
 * every answer is the replay's, and its neighbour has been planned as
 * not fitting.
 */
#include "fit.h"

#include "cap.h"
#include "custom_layers.h"
#include "error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Plans a fit remembers (each search makes O(log) of them). */
#define GM_FIT_SEEN 256

/* What a search varies, and how candidates are numbered. */
struct probe {
	const struct gm_spec *spec;
	const struct gm_plan_gpu *gpu;
	const struct gm_model_opts *o;  /* the definition of "fits" */
	const struct gm_model_opts *guess; /* the analytic model */
	bool by_dp;    /* vary data_parallel (else the micro-batch) */
	uint64_t mb, dp, gb;
	const uint64_t *table; /* candidate t -> value; NULL: t itself, or
				* for by_dp the mirror lo + hi - t */
	uint64_t lo, hi;       /* candidates searched */
	struct gm_fit_progress *prog;
	/* o's plans made so far: (micro-batch, degree) -> fits, and
	 * device_used where it fits (a plan that fits is complete even
	 * with fits_only) */
	struct seen {
		uint64_t mb, dp;
		bool fits;
		double used;
	} seen[GM_FIT_SEEN];
	unsigned n_seen;
};

static uint64_t value(const struct probe *p, uint64_t t)
{
	if (p->table)
		return p->table[t];
	return p->by_dp ? p->lo + p->hi - t : t;
}

/* An earlier plan of o at (mb, dp), or NULL. */
static const struct seen *seen_at(const struct probe *p, uint64_t mb,
				  uint64_t dp)
{
	for (unsigned i = 0; i < p->n_seen; i++)
		if (p->seen[i].mb == mb && p->seen[i].dp == dp)
			return &p->seen[i];
	return NULL;
}

/* Plan candidate t with o (or the guess model): *ok = plan.fits. */
static int probe_at(struct probe *p, uint64_t t, bool guess, bool *ok,
		    struct gm_diag *diag)
{
	struct gm_spec s = *p->spec;
	struct gm_plan *plan;
	uint64_t x = value(p, t);
	const struct seen *was;
	int rc;

	s.training.micro_batch_size = p->by_dp ? p->mb : x;
	s.inference.batch_size = s.training.micro_batch_size;
	s.parallelism.data_parallel = p->by_dp ? x : p->dp;
	s.training.global_batch_size = p->gb;
	/* a data-parallel degree that Megatron-Core's expert grid refuses
	 * (expert tensor x expert parallel must divide data x tensor
	 * parallel: spec_rules.c check_expert_grid) is not a run: it does
	 * not fit */
	if (s.task == GM_TASK_TRAIN &&
	    s.training.framework == GM_FW_MEGATRON && s.model.experts &&
	    s.parallelism.data_parallel * (s.parallelism.tensor_parallel ?
					   s.parallelism.tensor_parallel : 1) %
	    (gm_spec_expert_tensor_parallel(&s) *
	     (s.parallelism.expert_parallel ? s.parallelism.expert_parallel
					    : 1))) {
		*ok = false;
		return 0;
	}
	was = guess ? NULL : seen_at(p, s.training.micro_batch_size,
				     s.parallelism.data_parallel);
	if (was) {
		*ok = was->fits;
		return 0;
	}
	plan = malloc(sizeof(*plan));
	if (!plan)
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	rc = gm_plan_capped(&s, p->gpu, guess ? p->guess : p->o, plan,
			    diag);
	if (!rc)
		*ok = plan->fits;
	if (!rc && !guess && p->n_seen < GM_FIT_SEEN)
		p->seen[p->n_seen++] = (struct seen){
			s.training.micro_batch_size,
			s.parallelism.data_parallel, plan->fits,
			plan->per_gpu.device_used};
	free(plan);
	if (!guess && p->prog) {
		p->prog->plans++;
		if (p->prog->tick)
			p->prog->tick(p->prog);
	}
	return rc;
}

/*
 * The largest candidate t in [lo, hi] that fits while t + 1 does not (or
 * t = hi), searching from the analytic model's answer: bisection on the
 * analytic plans (microseconds), then galloping from there and bisection
 * on o's, O(log distance) of them. *t = lo - 1 (as a flag: *none) when
 * not even lo fits. "fits" only ever turns from true to false as t grows
 * (callers number candidates so), but a search for an edge needs no more
 * than that the answer fits and its neighbour does not.
 */
static int edge(struct probe *p, uint64_t *t, bool *none,
		struct gm_diag *diag)
{
	uint64_t lo = p->lo, hi = p->hi, good, bad, step = 1;
	bool ok;
	int rc;

	/* the analytic answer, as a start */
	while (lo < hi) {
		uint64_t mid = lo + (hi - lo + 1) / 2;
		if ((rc = probe_at(p, mid, true, &ok, diag)))
			return rc;
		if (ok)
			lo = mid;
		else
			hi = mid - 1;
	}
	*none = false;
	if ((rc = probe_at(p, lo, false, &ok, diag)))
		return rc;
	if (ok) {
		for (good = lo;; step *= 2) {
			uint64_t n = p->hi - good > step ? good + step : p->hi;
			if (good == p->hi) {
				*t = good;
				return 0;
			}
			if ((rc = probe_at(p, n, false, &ok, diag)))
				return rc;
			if (!ok) {
				bad = n;
				break;
			}
			good = n;
		}
	} else {
		for (bad = lo;; step *= 2) {
			uint64_t n = bad - p->lo > step ? bad - step : p->lo;
			if (bad == p->lo) {
				*none = true;
				return 0;
			}
			if ((rc = probe_at(p, n, false, &ok, diag)))
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
		if ((rc = probe_at(p, mid, false, &ok, diag)))
			return rc;
		*(ok ? &good : &bad) = mid;
	}
	*t = good;
	return 0;
}

/* Divisors of a number below 2^31: at most 1,600 (1,344 below 2^30). */
#define GM_FIT_MAX_DIVISORS 2048

static int asc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/*
 * The largest micro-batch that divides gb / dp (so that micro x GA x dp
 * is gb exactly) and fits, its next larger divisor planned as not
 * fitting. The largest divisor (GA = 1) is tried first: without
 * accumulation the gradients are not alive during the forward, so it
 * may fit where smaller ones do not; below it memory grows with the
 * micro-batch. *mb = 0: not even 1 fits.
 */
static int exact_mb(struct probe *p, uint64_t *mb, struct gm_diag *diag)
{
	uint64_t n, div[GM_FIT_MAX_DIVISORS], t;
	size_t nd = 0;
	bool ok, none;
	int rc;

	*mb = 0;
	if (p->gb > GM_FIT_MAX_GLOBAL)
		return gm_diag_set(diag, GM_EINVAL, "global batch %llu is "
				   "more than %llu", (unsigned long long)p->gb,
				   (unsigned long long)GM_FIT_MAX_GLOBAL);
	n = p->gb / p->dp;
	if (!n || p->gb % p->dp)
		return gm_diag_set(diag, GM_EINVAL, "global batch %llu is not "
				   "a multiple of data_parallel %llu",
				   (unsigned long long)p->gb,
				   (unsigned long long)p->dp);
	for (uint64_t k = 1; k * k <= n; k++) {
		if (n % k)
			continue;
		if (n / k <= GM_FIT_MAX)
			div[nd++] = n / k;
		if (k != n / k && k <= GM_FIT_MAX)
			div[nd++] = k;
	}
	qsort(div, nd, sizeof(div[0]), asc);
	p->table = div;
	if ((rc = probe_at(p, nd - 1, false, &ok, diag)))
		goto out;
	if (ok) {
		*mb = div[nd - 1];
		goto out;
	}
	if (nd == 1)
		goto out;
	p->lo = 0;
	p->hi = nd - 2;
	if ((rc = edge(p, &t, &none, diag)))
		goto out;
	if (!none)
		*mb = div[t];
out:
	p->table = NULL;
	return rc;
}

/* The largest micro-batch in [1, GM_FIT_MAX] that fits (GA from gb). */
static int plain_mb(struct probe *p, uint64_t *mb, struct gm_diag *diag)
{
	uint64_t t;
	bool none;
	int rc;

	p->lo = 1;
	p->hi = GM_FIT_MAX;
	rc = edge(p, &t, &none, diag);
	*mb = rc || none ? 0 : t;
	return rc;
}

/* Divisors of n in [lo, hi], largest first; their count. */
static size_t divisors_desc(uint64_t n, uint64_t lo, uint64_t hi,
			    uint64_t *div)
{
	size_t nd = 0;

	for (uint64_t k = 1; k * k <= n; k++) {
		if (n % k)
			continue;
		if (n / k >= lo && n / k <= hi)
			div[nd++] = n / k;
		if (k != n / k && k >= lo && k <= hi)
			div[nd++] = k;
	}
	qsort(div, nd, sizeof(div[0]), asc);
	for (size_t i = 0; i < nd / 2; i++) {
		uint64_t x = div[i];
		div[i] = div[nd - 1 - i];
		div[nd - 1 - i] = x;
	}
	return nd;
}

/*
 * The fewest data-parallel ranks at micro-batch mb, with the global
 * batch as gm_plan() takes it (with one, only degrees that make micro x
 * GA x dp = global exactly: divisors of global / mb), that fit while
 * the next fewer do not: 1, else a search over the degrees from 2 up to
 * spec_dp when that fits, else up to GM_FIT_MAX when the largest does.
 * Per-GPU memory from 2 on only falls with the degree (ZeRO shards
 * states, gradients and weights; GA falls); 1 differs (no NCCL, no DDP
 * buckets). *dp = 0: no degree fits.
 */
static int min_dp(struct probe *p, uint64_t mb, uint64_t spec_dp,
		  uint64_t *dp, struct gm_diag *diag)
{
	uint64_t div[GM_FIT_MAX_DIVISORS], one = 1, t;
	bool ok = false, none;
	size_t nd;
	int rc = 0;

	*dp = 0;
	p->by_dp = true;
	p->mb = mb;
	if (p->gb && p->gb % mb)
		goto out; /* no degree gives the global batch exactly */
	p->table = &one;
	if ((rc = probe_at(p, 0, false, &ok, diag)) || ok) {
		*dp = ok ? 1 : 0;
		goto out;
	}
	/* the degrees above 1, largest first, from spec_dp if it fits */
	p->table = div;
	nd = 0;
	if (spec_dp >= 2 && (!p->gb || (p->gb / mb) % spec_dp == 0)) {
		div[0] = spec_dp;
		if ((rc = probe_at(p, 0, false, &ok, diag)))
			goto out;
		if (ok)
			nd = p->gb ? divisors_desc(p->gb / mb, 2, spec_dp, div)
				   : 1;
	}
	if (!ok) {
		nd = p->gb ? divisors_desc(p->gb / mb, 2, GM_FIT_MAX, div) : 1;
		if (!nd)
			goto out;
		div[0] = p->gb ? div[0] : GM_FIT_MAX;
		if ((rc = probe_at(p, 0, false, &ok, diag)) || !ok)
			goto out;
	}
	if (!p->gb) {
		/* every degree from 2 to div[0]: t -> div[0] - t */
		p->table = NULL;
		p->lo = 2;
		p->hi = div[0];
		if ((rc = edge(p, &t, &none, diag)))
			goto out;
		*dp = none ? 0 : value(p, t);
		goto out;
	}
	p->lo = 0;
	p->hi = nd - 1;
	if ((rc = edge(p, &t, &none, diag)))
		goto out;
	*dp = none ? 0 : div[t];
out:
	p->table = NULL;
	p->by_dp = false;
	return rc;
}

/*
 * Inference: data parallel replicates the model (each replica plans
 * alike), so the fewest GPUs of a replica is the smallest tensor-parallel
 * degree that fits at batch mb: the spec's, twice it, ... up to
 * GM_FIT_TP_MAX, as the smallest change's tensor-parallel lever tries
 * them (fit_search.c); a degree the spec's validation refuses (heads it
 * does not divide) is not a run. *tp: 0 where none fits.
 */
static int min_tp(struct probe *p, uint64_t mb, uint64_t *tp,
		  struct gm_diag *diag)
{
	const struct gm_spec *spec = p->spec;
	uint64_t t0 = spec->parallelism.tensor_parallel ?
		      spec->parallelism.tensor_parallel : 1;
	struct gm_plan *plan = malloc(sizeof(*plan));
	struct gm_spec *s = malloc(sizeof(*s));
	int rc = 0;

	*tp = 0;
	if (!plan || !s) {
		free(plan);
		free(s);
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	}
	for (uint64_t t = t0; t == t0 || t <= GM_FIT_TP_MAX; t *= 2) {
		char set[64];
		const char *sets[] = {set};
		struct gm_diag d = {{0}};

		if (t != t0 && !gm_model_has_shape(spec))
			break;
		*s = *spec;
		s->inference.batch_size = mb;
		s->training.micro_batch_size = mb;
		snprintf(set, sizeof(set), "parallelism.tensor_parallel=%llu",
			 (unsigned long long)t);
		if (t != t0 && gm_spec_apply(s, sets, 1, &d))
			continue;
		rc = gm_plan_capped(s, p->gpu, p->o, plan, diag);
		if (rc || plan->fits) {
			*tp = rc ? 0 : t;
			break;
		}
	}
	free(plan);
	free(s);
	return rc;
}

/* gm_fit_observed() with its search state in p (zeroed, on the heap:
 * it remembers GM_FIT_SEEN plans). */
static int fit_run(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		   const struct gm_model_opts *fo, uint64_t gb,
		   struct gm_fit *out, struct gm_fit_progress *prog,
		   struct probe *pp, struct gm_diag *diag)
{
	struct gm_model_opts def, o, guess;
	const struct gm_spec_parallel *par = &spec->parallelism;
	uint64_t dp = gm_spec_data_parallel(spec);
	uint64_t mb, spec_mb;
	struct gm_plan *plan;
	int rc;

	if (!fo) {
		gm_model_opts_default(&def);
		fo = &def;
	}
	o = *fo;
	o.fits_only = true;
	o.trace = NULL;
	guess = o;
	guess.reserve = GM_RESERVE_ANALYTIC;
	memset(out, 0, sizeof(*out));
	out->gpu = *gpu;
	out->training = spec->task == GM_TASK_TRAIN;
	out->zero_stage = spec->parallelism.zero_stage;
	if (!gb && spec->task == GM_TASK_TRAIN)
		gb = spec->training.global_batch_size;
	if (spec->task != GM_TASK_TRAIN)
		gb = 0;
	out->global_batch = gb;
	*pp = (struct probe){.spec = spec, .gpu = gpu, .o = &o,
			     .guess = &guess, .dp = dp, .gb = gb,
			     .prog = prog};
	rc = gb ? exact_mb(pp, &mb, diag) : plain_mb(pp, &mb, diag);
	if (rc)
		return rc;
	out->max_micro_batch = mb;
	out->gradient_accumulation_steps = mb && gb ?
		(gb + mb * dp - 1) / (mb * dp) : mb ? 1 : 0;

	/* the figures at the answer (or 1), as gpumem plan gives them */
	{
		const struct seen *was = seen_at(pp, mb ? mb : 1, dp);

		if (was && was->fits && fo->reserve == o.reserve) {
			out->device_used = was->used;
			goto figures;
		}
	}
	plan = malloc(sizeof(*plan));
	if (!plan)
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	{
		struct gm_spec s = *spec;
		s.training.micro_batch_size = mb ? mb : 1;
		s.inference.batch_size = s.training.micro_batch_size;
		s.training.global_batch_size = gb;
		rc = gm_plan_capped(&s, gpu, fo, plan, diag);
		out->device_used = plan->per_gpu.device_used;
	}
	free(plan);
	if (rc)
		return rc;
figures:
	/* Fewest data-parallel ranks at the spec's micro-batch; where that
	 * fits at no degree, at the largest that fits (which fits at the
	 * spec's degree, so some degree does). */
	spec_mb = spec->task == GM_TASK_TRAIN ? spec->training.micro_batch_size
					      : spec->inference.batch_size;
	if (spec->task != GM_TASK_TRAIN) {
		uint64_t tp;

		rc = min_tp(pp, spec_mb, &tp, diag);
		out->min_gpus_micro_batch = spec_mb;
		/* none at the spec's batch: at the largest that fits one
		 * GPU, or at batch 1 where none does (more GPUs may hold
		 * it: the smallest change's tensor parallel) */
		if (!rc && !tp && (mb ? mb : 1) != spec_mb) {
			rc = min_tp(pp, mb ? mb : 1, &tp, diag);
			out->min_gpus_micro_batch = mb ? mb : 1;
		}
		if (rc)
			return rc;
		out->min_data_parallel = tp ? 1 : 0;
		out->min_gpus_micro_batch = tp ? out->min_gpus_micro_batch : 0;
		out->min_gpus = tp * (par->pipeline_parallel ?
				      par->pipeline_parallel : 1);
		return 0;
	}
	/* a spec on one rank that the validator models on no more (a PEFT
	 * adapter): min_gpus is that rank's */
	out->one_gpu = dp <= 1;
	for (uint64_t d2 = 2; out->one_gpu && d2 <= 8; d2 *= 2) {
		struct gm_spec more = *spec;
		struct gm_diag d = {{0}};

		more.parallelism.data_parallel = d2;
		out->one_gpu = gm_spec_check_modelled(&more, &d) != 0;
	}
	if (out->one_gpu) {
		/* one rank (the spec's: the validator takes no other):
		 * at the spec's micro-batch where the largest that fits
		 * reaches it, else at the largest */
		out->min_data_parallel = mb ? 1 : 0;
		out->min_gpus_micro_batch = mb < spec_mb ? mb : spec_mb;
	} else {
		rc = min_dp(pp, spec_mb, dp, &out->min_data_parallel, diag);
		if (rc)
			return rc;
		out->min_gpus_micro_batch = spec_mb;
		if (!out->min_data_parallel && mb && mb != spec_mb) {
			rc = min_dp(pp, mb, dp, &out->min_data_parallel, diag);
			if (rc)
				return rc;
			out->min_gpus_micro_batch = mb;
		}
	}
	if (!out->min_data_parallel)
		out->min_gpus_micro_batch = 0;
	out->min_gpus = out->min_data_parallel *
			(par->tensor_parallel ? par->tensor_parallel : 1) *
			(par->pipeline_parallel ? par->pipeline_parallel : 1);
	return 0;
}

int gm_fit_observed(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		    const struct gm_model_opts *fo, uint64_t gb,
		    struct gm_fit *out, struct gm_fit_progress *prog,
		    struct gm_diag *diag)
{
	struct probe *pp = calloc(1, sizeof(*pp));
	int rc;

	if (!pp)
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	rc = fit_run(spec, gpu, fo, gb, out, prog, pp, diag);
	free(pp);
	return rc;
}

int gm_fit(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	   const struct gm_model_opts *opts, uint64_t gb, struct gm_fit *out,
	   struct gm_diag *diag)
{
	return gm_fit_observed(spec, gpu, opts, gb, out, NULL, diag);
}

const char *gm_fit_min_gpus_none(const struct gm_fit *f, char *buf,
				 size_t len)
{
	if (f->min_gpus)
		return NULL;
	if (!f->training)
		snprintf(buf, len, "none");
	else if (f->one_gpu)
		snprintf(buf, len, "none on one GPU");
	else
		snprintf(buf, len, "none at ZeRO %u", f->zero_stage);
	return buf;
}
