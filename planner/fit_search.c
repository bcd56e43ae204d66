/*
 * fit_search.c - the smallest change that fits (see fit_search.h).
 *
 * A table of levers: each lists the values a user would try for one
 * spec key, smallest change first, and spells them as --set strings. A
 * candidate change is the spec with those strings applied
 * (gm_spec_apply()), refused where the validator or
 * gm_spec_check_modelled() refuses it, and planned with gm_plan_capped()
 * (fits_only probes; the answer is planned again in full), the one
 * definition of "fits" gpumem plan and gpumem fit share.
 */
#include "fit_search.h"

#include "cap.h"
#include "custom_layers.h"
#include "error.h"
#include "spec.h"
#include "text.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Probes a search remembers (each makes a few dozen). */
#define GM_FIT_MEMO 256

/* The most values a lever lists (data parallel up to GM_FIT_MAX). */
#define GM_FIT_VALUES (GM_FIT_MAX + 1)

struct search;

struct lever {
	const char *name;
	bool train_only;
	bool numeric; /* many values, memory falls along them: bisected */
	/* The values to try, smallest change first, for cur (the spec
	 * with the other levers of a change applied) from base (the spec
	 * as given); their count. */
	size_t (*values)(const struct gm_spec *base,
			 const struct gm_spec *cur, uint64_t *v, size_t max);
	/* Value v as --set strings into out; their count (1 or 2). NULL:
	 * the one string "key=v". */
	unsigned (*sets)(const struct gm_spec *base, uint64_t v,
			 char out[][GM_FIT_SET_LEN]);
	const char *key;
};

static uint64_t dp_of(const struct gm_spec *s)
{
	return gm_spec_data_parallel(s);
}

static uint64_t batch_of(const struct gm_spec *s)
{
	return s->task == GM_TASK_TRAIN ? s->training.micro_batch_size
					: s->inference.batch_size;
}

/* The global batch as the spec runs it: given, or micro x dp (one
 * accumulation step). */
static uint64_t global_of(const struct gm_spec *s)
{
	return s->training.global_batch_size ? s->training.global_batch_size
					     : s->training.micro_batch_size *
					       dp_of(s);
}

/* Micro-batch: the divisors of global / dp below the spec's, largest
 * first (micro x accumulation x dp stays the global batch); inference:
 * every batch below the spec's. */
static size_t mb_values(const struct gm_spec *base, const struct gm_spec *cur,
			uint64_t *v, size_t max)
{
	uint64_t b = batch_of(base), n;
	size_t k = 0;

	(void)cur;
	if (base->task != GM_TASK_TRAIN) {
		for (uint64_t x = b - 1; x >= 1 && k < max; x--)
			v[k++] = x;
		return k;
	}
	n = global_of(base) / dp_of(base);
	for (uint64_t x = b - 1; x >= 1 && k < max; x--)
		if (n % x == 0)
			v[k++] = x;
	return k;
}

static unsigned mb_sets(const struct gm_spec *base, uint64_t v,
			char out[][GM_FIT_SET_LEN])
{
	if (base->task != GM_TASK_TRAIN) {
		snprintf(out[0], GM_FIT_SET_LEN, "inference.batch_size=%llu",
			 (unsigned long long)v);
		return 1;
	}
	snprintf(out[0], GM_FIT_SET_LEN, "training.micro_batch_size=%llu",
		 (unsigned long long)v);
	/* a global batch the spec gives stays; one the DeepSpeed JSON
	 * derives (micro x gradient_accumulation_steps x dp) would follow
	 * the new micro-batch, so the change writes it */
	if (base->training.global_batch_size &&
	    gm_spec_origin_of(base, "training.global_batch_size") !=
		    GM_SPEC_DEEPSPEED)
		return 1;
	snprintf(out[1], GM_FIT_SET_LEN, "training.global_batch_size=%llu",
		 (unsigned long long)global_of(base));
	return 2;
}

/* Checkpointing: selective (recompute attention's core), then full
 * (recompute each layer), from the spec's. */
static size_t ckpt_values(const struct gm_spec *base,
			  const struct gm_spec *cur, uint64_t *v, size_t max)
{
	enum gm_ckpt c = base->training.activation_checkpointing;
	size_t k = 0;

	(void)cur;
	if (c == GM_CKPT_NONE && k < max)
		v[k++] = GM_CKPT_SELECTIVE;
	if (c != GM_CKPT_FULL && k < max)
		v[k++] = GM_CKPT_FULL;
	return k;
}

static unsigned ckpt_sets(const struct gm_spec *base, uint64_t v,
			  char out[][GM_FIT_SET_LEN])
{
	(void)base;
	snprintf(out[0], GM_FIT_SET_LEN,
		 "training.activation_checkpointing=%s",
		 gm_ckpt_name((enum gm_ckpt)v));
	return 1;
}

/* ZeRO: each stage above the spec's, to 3 (FSDP full shard). */
static size_t zero_values(const struct gm_spec *base,
			  const struct gm_spec *cur, uint64_t *v, size_t max)
{
	size_t k = 0;

	(void)cur;
	for (unsigned z = base->parallelism.zero_stage + 1; z <= 3 && k < max;
	     z++)
		v[k++] = z;
	return k;
}


/* Megatron-LM's distributed optimizer (fp32 master weights and Adam's
 * states sharded over data parallel), where the spec has it off; the
 * validator keeps it to framework megatron. */
static size_t distopt_values(const struct gm_spec *base,
			     const struct gm_spec *cur, uint64_t *v,
			     size_t max)
{
	(void)cur;
	if (base->parallelism.distributed_optimizer || !max)
		return 0;
	v[0] = 1;
	return 1;
}

static unsigned distopt_sets(const struct gm_spec *base, uint64_t v,
			     char out[][GM_FIT_SET_LEN])
{
	(void)base;
	(void)v;
	snprintf(out[0], GM_FIT_SET_LEN,
		 "parallelism.distributed_optimizer=true");
	return 1;
}

/* DeepSpeed's CPU offload (training.framework deepspeed): the
 * optimizer states to the host (1), then at ZeRO-3 the parameters too
 * (2), from what the spec offloads already; NVMe is not modelled. */
static size_t offload_values(const struct gm_spec *base,
			     const struct gm_spec *cur, uint64_t *v,
			     size_t max)
{
	const struct gm_spec_parallel *p = &base->parallelism;
	size_t k = 0;

	if (base->training.framework != GM_FW_DEEPSPEED)
		return 0;
	if (p->offload_optimizer == GM_OFFLOAD_NONE && k < max)
		v[k++] = 1;
	if (p->offload_parameters == GM_OFFLOAD_NONE &&
	    cur->parallelism.zero_stage == 3 && k < max)
		v[k++] = 2;
	return k;
}

static unsigned offload_sets(const struct gm_spec *base, uint64_t v,
			     char out[][GM_FIT_SET_LEN])
{
	unsigned n = 0;

	if (base->parallelism.offload_optimizer == GM_OFFLOAD_NONE)
		snprintf(out[n++], GM_FIT_SET_LEN,
			 "parallelism.offload_optimizer=cpu");
	if (v == 2)
		snprintf(out[n++], GM_FIT_SET_LEN,
			 "parallelism.offload_parameters=cpu");
	return n;
}

/* Data parallel: degrees above the spec's, fewest first; with a global
 * batch only those that keep it exact (divisors of global / micro);
 * without one every degree (each rank keeps its micro-batch). */
static size_t dp_values(const struct gm_spec *base, const struct gm_spec *cur,
			uint64_t *v, size_t max)
{
	uint64_t d0 = dp_of(base), gb = cur->training.global_batch_size;
	uint64_t n = gb ? gb / cur->training.micro_batch_size : 0;
	size_t k = 0;

	for (uint64_t d = d0 + 1; d <= GM_FIT_MAX && k < max; d++)
		if (!gb || n % d == 0)
			v[k++] = d;
	return k;
}


/* Tensor parallel: twice, four times, ... the spec's, up to
 * GM_FIT_TP_MAX; none for a model without a shape (a custom model of a
 * parameter count has no heads or widths to split: custom_layers.h). */
static size_t tp_values(const struct gm_spec *base, const struct gm_spec *cur,
			uint64_t *v, size_t max)
{
	uint64_t t = base->parallelism.tensor_parallel ?
		     base->parallelism.tensor_parallel : 1;
	size_t k = 0;

	(void)cur;
	if (!gm_model_has_shape(base))
		return 0;
	for (t *= 2; t <= GM_FIT_TP_MAX && k < max; t *= 2)
		v[k++] = t;
	return k;
}


/* Adapter: LoRA, then QLoRA (its base weights in 4 bits), PEFT's
 * defaults for rank and targets. */
static size_t adapter_values(const struct gm_spec *base,
			     const struct gm_spec *cur, uint64_t *v,
			     size_t max)
{
	size_t k = 0;

	(void)cur;
	if (base->training.adapter == GM_ADAPTER_NONE && k < max)
		v[k++] = GM_ADAPTER_LORA;
	if (base->training.adapter != GM_ADAPTER_QLORA && k < max)
		v[k++] = GM_ADAPTER_QLORA;
	return k;
}

static unsigned adapter_sets(const struct gm_spec *base, uint64_t v,
			     char out[][GM_FIT_SET_LEN])
{
	(void)base;
	snprintf(out[0], GM_FIT_SET_LEN, "training.adapter=%s",
		 gm_adapter_name((enum gm_adapter)v));
	return 1;
}

/* Indexed by enum gm_fit_lever: one row per lever, in its order. */
static const struct lever levers[GM_FL_N] = {
	[GM_FL_MICRO_BATCH] = {"micro-batch", false, true, mb_values,
			       mb_sets},
	[GM_FL_CHECKPOINTING] = {"activation checkpointing", true, false,
				 ckpt_values, ckpt_sets},
	[GM_FL_ZERO] = {"ZeRO stage", true, false, zero_values, NULL,
			 "parallelism.zero_stage"},
	[GM_FL_DIST_OPTIMIZER] = {"distributed optimizer", true, false,
				  distopt_values, distopt_sets},
	[GM_FL_OFFLOAD] = {"CPU offload", true, false, offload_values,
			   offload_sets},
	[GM_FL_DATA_PARALLEL] = {"data parallel", true, true, dp_values,
				 NULL, "parallelism.data_parallel"},
	[GM_FL_TENSOR_PARALLEL] = {"tensor parallel", false, false,
				   tp_values, NULL, "parallelism.tensor_parallel"},
	[GM_FL_ADAPTER] = {"adapter", true, false, adapter_values,
			   adapter_sets},
};

const char *gm_fit_lever_name(enum gm_fit_lever l)
{
	return (unsigned)l < GM_FL_N ? levers[l].name : "?";
}

/* The search's state (on the heap: value lists and a plan). */
struct search {
	const struct gm_spec *base;
	const struct gm_plan_gpu *gpu;
	struct gm_model_opts probe;    /* the caller's, fits_only */
	struct gm_model_opts guess;    /* the same, analytic reserve */
	struct gm_fit_progress *prog;
	unsigned long plans;
	struct gm_plan plan;
	struct gm_spec given;          /* the spec with the caller's sets */
	struct gm_spec cur;
	/* each lever's values from the spec as given (linear levers: those
	 * the validator accepts on their own) */
	uint64_t vals[GM_FL_N][GM_FIT_VALUES];
	size_t n_vals[GM_FL_N];
	uint64_t searched[GM_FIT_VALUES]; /* the bisected lever's, per cur */
	/* the change being planned: lever i at value pick[i] (or not) */
	bool in[GM_FL_N];
	uint64_t pick[GM_FL_N];
	/* the last probe that fitted: its change and figures (a plan that
	 * fits is whole even with fits_only: model.h) */
	bool fit_in[GM_FL_N];
	uint64_t fit_pick[GM_FL_N];
	struct gm_fit_figures fit_fig;
	bool fitted;
	/* probes made, by change (in, pick): whether each fitted */
	struct memo {
		unsigned in;
		uint64_t pick[GM_FL_N];
		bool ok;
		struct gm_fit_figures fig; /* where it fitted */
	} memo[GM_FIT_MEMO];
	unsigned n_memo;
};

static void figures(const struct gm_spec *spec, const struct gm_plan *p,
		    struct gm_fit_figures *f);

/* The --set strings of the change in s->in / s->pick, in lever order,
 * into sets; their count. */
static unsigned change_sets(const struct search *s,
			    char sets[][GM_FIT_SET_LEN])
{
	unsigned n = 0;

	for (int l = 0; l < GM_FL_N; l++) {
		if (!s->in[l])
			continue;
		if (levers[l].sets) {
			n += levers[l].sets(s->base, s->pick[l], sets + n);
			continue;
		}
		snprintf(sets[n++], GM_FIT_SET_LEN, "%s=%llu", levers[l].key,
			 (unsigned long long)s->pick[l]);
	}
	return n;
}

/*
 * Build s->cur from the base with the change applied; false where the
 * validator or gm_spec_check_modelled() refuses it.
 */
static bool build(struct search *s)
{
	char sets[GM_FIT_CHANGE_SETS][GM_FIT_SET_LEN];
	const char *ptr[GM_FIT_CHANGE_SETS];
	struct gm_diag d = {{0}};
	unsigned n = change_sets(s, sets);

	for (unsigned i = 0; i < n; i++)
		ptr[i] = sets[i];
	s->cur = *s->base;
	return !gm_spec_apply(&s->cur, ptr, (int)n, &d) &&
	       !gm_spec_check_modelled(&s->cur, &d);
}


/* The memo's key of the change in s->in / s->pick. */
static struct memo memo_key(const struct search *s)
{
	struct memo m = {0};

	for (int l = 0; l < GM_FL_N; l++)
		if (s->in[l]) {
			m.in |= 1u << l;
			m.pick[l] = s->pick[l];
		}
	return m;
}

/* Record a fitting probe of the change in s->in / s->pick. */
static void fitted(struct search *s, const struct gm_fit_figures *f)
{
	memcpy(s->fit_in, s->in, sizeof(s->in));
	memcpy(s->fit_pick, s->pick, sizeof(s->pick));
	s->fit_fig = *f;
	s->fitted = true;
}

/* Whether the change was probed before (*ok: whether it fitted, and
 * then recorded again as the last that fitted). */
static bool recall(struct search *s, bool *ok)
{
	struct memo k = memo_key(s);

	for (unsigned i = 0; i < s->n_memo; i++) {
		const struct memo *m = &s->memo[i];

		if (m->in != k.in || memcmp(m->pick, k.pick, sizeof(k.pick)))
			continue;
		*ok = m->ok;
		if (m->ok)
			fitted(s, &m->fig);
		return true;
	}
	return false;
}

static void remember(struct search *s, bool ok,
		     const struct gm_fit_figures *f)
{
	if (s->n_memo < GM_FIT_MEMO) {
		s->memo[s->n_memo] = memo_key(s);
		s->memo[s->n_memo].ok = ok;
		s->memo[s->n_memo++].fig = *f;
	}
}

/* Plan the change (*ok = fits); a change the validator refuses or the
 * model cannot lay out does not fit. 0 or GM_ENOMEM. */
static int probe(struct search *s, bool *ok, struct gm_diag *diag)
{
	struct gm_fit_figures f = {0};
	struct gm_diag d = {{0}};
	int rc;

	*ok = false;
	if (recall(s, ok))
		return 0;
	if (!build(s))
		return 0;
	rc = gm_plan_capped(&s->cur, s->gpu, &s->probe, &s->plan, &d);
	s->plans++;
	if (s->prog) {
		s->prog->plans++;
		if (s->prog->tick)
			s->prog->tick(s->prog);
	}
	if (rc == GM_ENOMEM)
		return gm_diag_set(diag, rc, "%s", d.msg);
	*ok = !rc && s->plan.fits;
	if (*ok)
		figures(&s->cur, &s->plan, &f);
	remember(s, *ok, &f);
	if (*ok)
		fitted(s, &f);
	return 0;
}

/* The analytic model's answer for the change (microseconds; not counted
 * or recorded): where the replay's search starts. */
static bool guess(struct search *s)
{
	struct gm_diag d = {{0}};

	if (!build(s))
		return false;
	return !gm_plan_capped(&s->cur, s->gpu, &s->guess, &s->plan, &d) &&
	       s->plan.fits;
}

/* The first index in (lo, hi] where the analytic model fits lever l's
 * value (hi where none does). */
static size_t guess_edge(struct search *s, int l, size_t lo, size_t hi)
{
	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		s->pick[l] = s->searched[mid];
		*(guess(s) ? &hi : &lo) = mid;
	}
	return hi;
}

/* Bisect (lo, hi] on the replay, lo planned as not fitting and hi as
 * fitting: *at = the first index that fits whose predecessor does not. */
static int bisect(struct search *s, int l, size_t lo, size_t hi, size_t *at,
		  struct gm_diag *diag)
{
	bool ok;
	int rc;

	while (hi - lo > 1) {
		size_t mid = lo + (hi - lo) / 2;

		s->pick[l] = s->searched[mid];
		if ((rc = probe(s, &ok, diag)))
			return rc;
		*(ok ? &hi : &lo) = mid;
	}
	*at = hi;
	return 0;
}

/*
 * With the other levers of the change picked, the first value of lever
 * l (numeric: bisected) that fits; *ok false where none does. The
 * values are l's for s->cur built without l.
 */
static int search_lever(struct search *s, int l, bool *ok,
			struct gm_diag *diag)
{
	size_t n, lo, hi, g, nb;
	int rc;

	*ok = false;
	s->in[l] = false;
	if (!build(s))
		return 0;
	n = levers[l].values(s->base, &s->cur, s->searched, GM_FIT_VALUES);
	if (!n)
		return 0;
	s->in[l] = true;
	if (!levers[l].numeric) {
		for (size_t i = 0; i < n; i++) {
			s->pick[l] = s->searched[i];
			if ((rc = probe(s, ok, diag)) || *ok)
				return rc;
		}
		return 0;
	}
	/* the first value (the smallest change) */
	s->pick[l] = s->searched[0];
	if ((rc = probe(s, ok, diag)) || *ok || n == 1)
		return rc;
	/* the analytic model's edge g, then its neighbour on the side the
	 * answer lies, then bisection on the replay */
	g = guess_edge(s, l, 0, n - 1);
	s->pick[l] = s->searched[g];
	if ((rc = probe(s, ok, diag)))
		return rc;
	if (*ok) {
		lo = 0;
		hi = g;
		nb = g - 1;
	} else {
		if (g == n - 1)
			return 0;
		s->pick[l] = s->searched[n - 1];
		if ((rc = probe(s, ok, diag)) || !*ok)
			return rc;
		lo = g;
		hi = n - 1;
		nb = g + 1;
	}
	if (nb > lo && nb < hi) {
		s->pick[l] = s->searched[nb];
		if ((rc = probe(s, ok, diag)))
			return rc;
		*(*ok ? &hi : &lo) = nb;
	}
	if ((rc = bisect(s, l, lo, hi, &hi, diag)))
		return rc;
	s->pick[l] = s->searched[hi];
	*ok = true;
	return 0;
}

/*
 * The first change moving exactly the levers of mask that fits: the
 * numeric lever among them (data parallel before micro-batch) is
 * bisected, the others' values are tried in order, the earlier lever
 * varying slowest. Where the change with every lever at its last value
 * does not fit, the subset is skipped after that one plan (one lever
 * alone: its own search).
 */
static int search_mask(struct search *s, unsigned mask, bool *ok,
		       struct gm_diag *diag)
{
	int last = -1, idx[GM_FL_N] = {0};
	bool at_end = false;
	int rc;

	*ok = false;
	for (int l = 0; l < GM_FL_N; l++)
		s->in[l] = mask & (1u << l);
	if (s->in[GM_FL_DATA_PARALLEL])
		last = GM_FL_DATA_PARALLEL;
	else if (s->in[GM_FL_MICRO_BATCH])
		last = GM_FL_MICRO_BATCH;
	for (int l = 0; l < GM_FL_N; l++) {
		if (!s->in[l] || l == last)
			continue;
		if (!s->n_vals[l])
			return 0;
		s->pick[l] = s->vals[l][s->n_vals[l] - 1];
	}
	/* one lever alone: its own search says where none fits */
	if (__builtin_popcount(mask) == 1)
		return last >= 0 ? search_lever(s, last, ok, diag) :
				   search_lever(s, __builtin_ctz(mask), ok,
						diag);
	/* every lever at its last value first */
	if (last >= 0) {
		s->in[last] = false;
		if (!build(s))
			return 0;
		s->in[last] = true;
		size_t n = levers[last].values(s->base, &s->cur, s->searched,
					       GM_FIT_VALUES);
		if (!n)
			return 0;
		s->pick[last] = s->searched[n - 1];
	}
	if ((rc = probe(s, ok, diag)) || !*ok)
		return rc;
	/* then in order: an odometer over the other levers' values */
	while (!at_end) {
		for (int l = 0; l < GM_FL_N; l++)
			if (s->in[l] && l != last)
				s->pick[l] = s->vals[l][idx[l]];
		if (last >= 0)
			rc = search_lever(s, last, ok, diag);
		else
			rc = probe(s, ok, diag);
		if (last >= 0)
			s->in[last] = true;
		if (rc || *ok)
			return rc;
		at_end = true;
		for (int l = GM_FL_N - 1; l >= 0; l--) {
			if (!s->in[l] || l == last)
				continue;
			if (++idx[l] < (int)s->n_vals[l]) {
				at_end = false;
				break;
			}
			idx[l] = 0;
		}
	}
	return 0;
}

/* The levers that add GPUs to the run, and the one that changes what is
 * trained (LoRA trains adapters over a frozen base, not the model). */
#define GM_FIT_MORE_GPUS ((1u << GM_FL_DATA_PARALLEL) | \
			  (1u << GM_FL_TENSOR_PARALLEL))
#define GM_FIT_OTHER_MODEL (1u << GM_FL_ADAPTER)

/*
 * The order changes are tried in, the first that fits being the answer:
 * those on the GPUs as given before those that add GPUs (a user may
 * have no more); within each, those that train the same model before
 * the adapter; then by how many levers move; then in lever order (the
 * lower lever first, as words sort). planner/README.md, "The smallest
 * change that fits".
 */
static int mask_cmp(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	bool gx = x & GM_FIT_MORE_GPUS, gy = y & GM_FIT_MORE_GPUS;
	bool ox = x & GM_FIT_OTHER_MODEL, oy = y & GM_FIT_OTHER_MODEL;
	int px = __builtin_popcount(x), py = __builtin_popcount(y);

	if (gx != gy)
		return gx ? 1 : -1;
	if (ox != oy)
		return ox ? 1 : -1;
	if (px != py)
		return px - py;
	for (int l = 0; l < GM_FL_N; l++) {
		bool bx = x & (1u << l), by = y & (1u << l);
		if (bx != by)
			return bx ? -1 : 1;
	}
	return 0;
}

/* A plan's figures into f. */
static void figures(const struct gm_spec *spec, const struct gm_plan *p,
		    struct gm_fit_figures *f)
{
	const struct gm_spec_parallel *par = &spec->parallelism;

	f->micro_batch = batch_of(spec);
	f->gradient_accumulation_steps = p->gradient_accumulation_steps;
	f->global_batch = spec->task == GM_TASK_TRAIN ?
			  spec->training.global_batch_size : 0;
	f->gpus = dp_of(spec) *
		  (par->tensor_parallel ? par->tensor_parallel : 1) *
		  (par->pipeline_parallel ? par->pipeline_parallel : 1);
	f->peak_allocated = p->per_gpu.peak_allocated;
	f->peak_reserved = p->per_gpu.peak_reserved;
	f->device_used = p->per_gpu.device_used;
	f->host = p->host;
	f->headroom_bytes = p->headroom_bytes;
}

/* The levers a spec's task takes, with the values each takes on its
 * own (linear levers: those the validator accepts). */
static void lever_values(struct search *s)
{
	for (int l = 0; l < GM_FL_N; l++) {
		size_t n = 0, k = 0;

		s->n_vals[l] = 0;
		if (levers[l].train_only && s->base->task != GM_TASK_TRAIN)
			continue;
		n = levers[l].values(s->base, s->base, s->vals[l],
				     GM_FIT_VALUES);
		if (levers[l].numeric) {
			s->n_vals[l] = n;
			continue;
		}
		for (size_t i = 0; i < n; i++) {
			memset(s->in, 0, sizeof(s->in));
			s->in[l] = true;
			s->pick[l] = s->vals[l][i];
			/* sharding is judged with the degree of the change,
			 * and on one data-parallel rank by its plan: DeepSpeed
			 * runs each ZeRO stage's optimizer there too (its
			 * stage 3 keeps no flat 16-bit copy and may offload
			 * the parameters: recipe/deepspeed.c), PyTorch's
			 * recipe plans one rank unwrapped (recipe/pytorch.c) */
			if (build(s))
				s->vals[l][k++] = s->vals[l][i];
		}
		s->n_vals[l] = k;
	}
	memset(s->in, 0, sizeof(s->in));
}

/* Whether lever l can move: the task takes it and it has values
 * (data parallel's depend on the change's micro-batch). */
static bool lever_usable(const struct search *s, int l)
{
	if (levers[l].train_only && s->base->task != GM_TASK_TRAIN)
		return false;
	return s->n_vals[l] || l == GM_FL_DATA_PARALLEL;
}

/*
 * Where nothing fits: the widest change searched that the validator
 * accepts, into out's sets and figures, planned in full with fo: every
 * lever the search could move at its last value (data parallel's for
 * the micro-batch that gives); where that is refused (LoRA on more than
 * one GPU, say), the widest of fewer levers, in the reverse of the
 * search's order (masks, n of them, sorted by mask_cmp). With no lever
 * to move, the spec as given (every lever at its last step). None where
 * the validator refuses every one.
 */
static int widest(struct search *s, const struct gm_model_opts *fo,
		  const unsigned *masks, unsigned n_masks,
		  struct gm_fit_change *out, struct gm_diag *diag)
{
	static const unsigned none = 0;

	if (!n_masks) {
		masks = &none;
		n_masks = 1;
	}
	for (unsigned i = n_masks; i-- > 0;) {
		bool dp = false;
		size_t n;
		int rc;

		memset(s->in, 0, sizeof(s->in));
		for (int l = 0; l < GM_FL_N; l++) {
			if (!(masks[i] & (1u << l)))
				continue;
			if (l == GM_FL_DATA_PARALLEL) {
				dp = true;
				continue;
			}
			s->in[l] = true;
			s->pick[l] = s->vals[l][s->n_vals[l] - 1];
		}
		if (dp && build(s)) {
			n = levers[GM_FL_DATA_PARALLEL].values(s->base, &s->cur,
								s->searched,
								GM_FIT_VALUES);
			s->in[GM_FL_DATA_PARALLEL] = n > 0;
			s->pick[GM_FL_DATA_PARALLEL] = n ? s->searched[n - 1]
							 : 0;
		}
		if (!build(s))
			continue;
		rc = gm_plan_capped(&s->cur, s->gpu, fo, &s->plan, diag);
		if (rc == GM_EINVAL)
			continue;
		if (rc)
			return rc;
		out->n_sets += change_sets(s, out->sets + out->n_sets);
		for (int l = 0; l < GM_FL_N; l++)
			if (s->in[l])
				out->levers |= 1u << l;
		figures(&s->cur, &s->plan, &out->change);
		out->widest = true;
		return 0;
	}
	return 0;
}

/* Whether the last probe that fitted is the change in s->in / s->pick. */
static bool same_change(const struct search *s)
{
	for (int l = 0; l < GM_FL_N; l++)
		if (s->fit_in[l] != s->in[l] ||
		    (s->in[l] && s->fit_pick[l] != s->pick[l]))
			return false;
	return true;
}

static int change_run(struct search *s, const struct gm_model_opts *fo,
		      const struct gm_plan *given, struct gm_fit_change *out,
		      struct gm_diag *diag)
{
	unsigned masks[1u << GM_FL_N], n_masks = 0;
	bool ok = false;
	int rc;

	if (!given) {
		rc = gm_plan_capped(s->base, s->gpu, fo, &s->plan, diag);
		if (rc)
			return rc;
		given = &s->plan;
	}
	out->training = s->base->task == GM_TASK_TRAIN;
	figures(s->base, given, &out->given);
	out->fits_as_given = given->fits;
	if (out->fits_as_given)
		return 0;
	lever_values(s);
	for (int l = 0; l < GM_FL_N; l++)
		if (lever_usable(s, l))
			out->tried |= 1u << l;
	for (unsigned m = 1; m < (1u << GM_FL_N); m++) {
		bool usable = true;

		for (int l = 0; l < GM_FL_N; l++)
			if (m & (1u << l))
				usable = usable && lever_usable(s, l);
		if (usable)
			masks[n_masks++] = m;
	}
	qsort(masks, n_masks, sizeof(masks[0]), mask_cmp);
	for (unsigned i = 0; i < n_masks && !ok; i++)
		if ((rc = search_mask(s, masks[i], &ok, diag)))
			return rc;
	out->plans = s->plans;
	if (!ok)
		return widest(s, fo, masks, n_masks, out, diag);
	out->n_sets += change_sets(s, out->sets + out->n_sets);
	for (int l = 0; l < GM_FL_N; l++)
		if (s->in[l])
			out->levers |= 1u << l;
	/* the answer's figures: its probe's, the last that fitted */
	if (s->fitted && same_change(s) && fo->reserve == s->probe.reserve) {
		out->found = true;
		out->change = s->fit_fig;
		return 0;
	}
	if (!build(s))
		return gm_diag_set(diag, GM_EINVAL, "the change found no "
				   "longer validates");
	rc = gm_plan_capped(&s->cur, s->gpu, fo, &s->plan, diag);
	if (rc)
		return rc;
	out->found = s->plan.fits;
	figures(&s->cur, &s->plan, &out->change);
	return 0;
}

int gm_fit_change(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		  const struct gm_model_opts *opts,
		  const struct gm_plan *given, const char *const *pre,
		  int n_pre, struct gm_fit_change *out,
		  struct gm_fit_progress *prog, struct gm_diag *diag)
{
	struct gm_model_opts def, full;
	struct gm_diag d = {{0}};
	struct search *s;
	int rc;

	memset(out, 0, sizeof(*out));
	if (!opts) {
		gm_model_opts_default(&def);
		opts = &def;
	}
	s = calloc(1, sizeof(*s));
	if (!s)
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	full = *opts;
	full.trace = NULL;
	s->given = *spec;
	s->base = &s->given;
	if (n_pre > GM_FIT_CHANGE_SETS / 2)
		n_pre = GM_FIT_CHANGE_SETS / 2;
	for (int i = 0; i < n_pre; i++)
		gm_text_copy(out->sets[out->n_sets++], GM_FIT_SET_LEN, pre[i]);
	if (gm_spec_apply(&s->given, pre, n_pre, &d) ||
	    gm_spec_check_modelled(&s->given, &d)) {
		gm_text_copy(out->refused, sizeof(out->refused), d.msg);
		free(s);
		return 0;
	}
	s->gpu = gpu;
	s->probe = full;
	s->probe.fits_only = true;
	s->probe.trace = NULL;
	s->guess = s->probe;
	s->guess.reserve = GM_RESERVE_ANALYTIC;
	s->prog = prog;
	rc = change_run(s, &full, n_pre ? NULL : given, out, diag);
	out->plans = s->plans;
	free(s);
	return rc;
}
