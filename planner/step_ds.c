/*
 * step_ds.c - DeepSpeed's engine in the step emitter (see step_ds.h).
 *
 * Read from DeepSpeed's source (0.19.6, commit edaa722: deepspeed/runtime/
 * engine.py, fp16/unfused_optimizer.py, zero/stage_1_and_2.py,
 * zero/stage3.py, zero/partition_parameters.py,
 * zero/partitioned_param_coordinator.py) and checked against the
 * allocation traces of DeepSpeed 0.19.8 on one H200
 * (tests/data/calibration/traces/pending-loops/ds-*, whose frames name
 * each function below). P: the rank's parameters, d: the data-parallel
 * degree, b: bytes of a 16-bit element.
 *
 * Stage 0 with bf16 or fp16 (engine.py _configure_fp16_optimizer ->
 * FP16_UnfusedOptimizer for a torch.optim client optimizer): per
 * parameter an fp32 master (p.clone().float(): the 16-bit clone is a
 * transient); initialize_optimizer_states gives every 16-bit and every
 * fp32 parameter a zero gradient and runs optimizer.step() once, so the
 * optimizer's states exist from the start, then drops the gradients.
 * The gradients are the module's own 16-bit .grad; at the end of the
 * backward engine.allreduce_gradients flattens them in buckets of
 * reduce_bucket_size elements (allreduce_no_retain: a bucket closes
 * once its elements exceed the size), one at a time. step():
 * get_weight_norm casts each gradient to fp32 for its norm (one at a
 * time), then every gradient is cast to fp32 at once, the optimizer
 * steps, the fp32 gradients go, and zero_grad frees the 16-bit ones.
 *
 * Stages 1 and 2 (stage_1_and_2.py, DeepSpeedZeroOptimizer): the 16-bit
 * parameters flattened into one buffer (flatten_dense_tensors_aligned;
 * the parameters become views of it and their own storage is freed);
 * the fp32 partition of P/d elements (flat_partition.clone().float():
 * a 16-bit clone first); initialize_optimizer_states a zero fp32
 * gradient of the partition, freed again (no optimizer step: the states
 * of a torch.optim optimizer appear at the first real step). Backward:
 * the first gradient hook allocates the IPG bucket (setup_buckets:
 * reduce_bucket_size elements with contiguous_gradients, a second
 * buffer with overlap_comm), every gradient is copied into it and
 * freed (reduce_independent_p_g_buckets_and_remove_grads); the first
 * reduction allocates the 16-bit gradient partition of P/d elements
 * (copy_grads_in_partition); the bucket goes at the end of the
 * backward. Stage 1 without overlap_comm (process_gradients) sets the
 * bucket up at the first hook but leaves the gradients to the end of the
 * backward (reduce_gradients), which moves them in the group's order.
 * step(): get_grad_norm_direct takes each gradient's norm in
 * fp64 (g.double(): 8 bytes per element, one at a time); the
 * partition's gradients are flattened (16-bit) and cast to fp32
 * (single_grad_partition), the flat copy and the 16-bit partition are
 * freed, the optimizer steps (torch AdamW: exp_avg and exp_avg_sq at
 * the first step; foreach: one fp32 temporary of the partition), the
 * fp32 gradient goes.
 *
 * Stage 3 (stage3.py, DeepSpeedZeroOptimizer_Stage3): each parameter
 * partitioned (P/d; its full storage freed; under zero.Init,
 * partition_parameters.py Init, built so: no full storage), the
 * partitions moved into
 * one flat 16-bit buffer (_create_fp16_partitions_with_defragmentation);
 * per sub-group (parameters in order until sub_group_size elements are
 * reached) an fp32 partition (_create_fp32_partitions: a transient fp32
 * copy, then the partition); a zero fp32 gradient of the largest
 * sub-group (initialize_optimizer_states), freed; then, kept for the
 * whole run, the IPG bucket of reduce_bucket_size elements
 * (contiguous_gradients) and grad_partitions_flat_buffer, the 16-bit
 * gradient partition of all P/d elements (_setup_for_real_optimizer).
 * Those two are why ZeRO-3 holds more than ZeRO-2 on few GPUs: stage 2
 * allocates its partition in the backward and frees it at the step,
 * its bucket only for the backward; stage 3 keeps 2 P/d + 2 bucket
 * bytes all the time (on one H200: 35.07 GiB against 32.09 GiB,
 * tests/data/calibration/pending/loops/measured-h200.json). Backward:
 * gradients copied into the bucket and freed; a full bucket is
 * reduce-scattered from a flat copy of its contents
 * (reduce_scatter_coalesced) into the partition buffer, the rest at the
 * end of the backward. step(): the fp64 norms, then sub-group by
 * sub-group (_prepare_fp32_grad_for_sub_group) the gradients flattened
 * and cast to fp32, the optimizer's states (first step) and temporary,
 * the fp32 gradient freed.
 * Gathering (partitioned_param_coordinator.py): with d > 1, or with
 * offload_param, a module's full 16-bit parameters are allocated when
 * it is fetched; release_sub_module frees them after its forward or
 * backward unless they are persistent (at most
 * stage3_param_persistence_threshold elements: kept from the first
 * fetch) or, once the first step recorded the module order
 * (is_complete_trace), used again within stage3_max_reuse_distance
 * elements of the modules to come (__params_to_release). A unit here is
 * a block or the root (embeddings, final norm, head). With d = 1 and
 * the parameters on the GPU the partition is the parameter and the
 * gather allocates nothing that lives.
 *
 * offload_optimizer cpu: the fp32 partitions, the optimizer states and
 * the fp32 gradients live in pinned host memory and the optimizer steps
 * there; on the GPU stage 1/2 keep a 16-bit buffer of the largest
 * parameter (stage_1_and_2.py __init__, for the gradient copies to the
 * host) and take each reduced gradient's fp64 norm and fp32 copy on the
 * GPU (set_norm_for_param_grad_in_gpu, async_inplace_copy_grad_to_fp32_
 * buffer_from_gpu); stage 3 keeps its bucket, its gradient partition
 * buffer is on the host. offload_param cpu (stage 3): the 16-bit
 * partitions are on the host too; every fetch allocates the full
 * parameters on the GPU.
 *
 * Once the trace is complete stage 3 also prefetches (prefetch(): the
 * fetch queue runs ahead to stage3_max_live_parameters, and a block
 * whose backward use it passes while gathered stays gathered to it).
 *
 * Stage 3 reduces a bucket on its own stream (stage3.py
 * __reduce_and_partition_ipg_grads, reduce_and_partition_stream): the
 * flat copy reduce_scatter_coalesced makes of the bucket (none for one
 * gradient that splits evenly: comm/coalesced_collectives.py reduces it
 * in place) lives while partition_grads runs over the bucket's
 * gradients; under
 * offload_optimizer that makes, per gradient partition of n elements,
 * a 16-bit copy on the GPU (grad_buffer.to(device)), the fp64 copy of
 * _constant_buffered_norm2 (8 n bytes, freed once its norm is taken)
 * and the fp32 copy _offload_grad_partition_at_boundary sends to the
 * host (4 n), each freed before the next gradient (the H200 traces of
 * ds-zero3-llama-1.1b-bf16 and ds-zero3-offload-llama-1.1b-bf16: the
 * flat copies alone on the reduce stream without offload; 2 n, 8 n, 4
 * n per gradient with it). The norms' few-byte tensors are left out.
 *
 * Simplifications: parameters in one group in module order; gathering,
 * prefetch and release are decided at unit granularity (a block or the
 * root), the root kept gathered for the whole step; the
 * prefetch runs until max_live_parameters, not bucket by bucket;
 * without contiguous_gradients the gradients are still
 * freed as they are reduced; the optimizer is torch.optim's (the
 * harness's client optimizer), not DeepSpeed's FusedAdam.
 */
#include "step_ds.h"

#include "optstep.h"

#include "step.h"
#include "step_emit.h"
#include "error.h"

#include <math.h>
#include <stdlib.h>

#define NONE UINT32_MAX

/* The engine's live tensors. */
struct gm_ds_em {
	uint32_t flat16;        /* stage 1/2: the flat 16-bit parameters;
				 * stage 3: the flat 16-bit partitions */
	uint32_t *master;       /* fp32 masters: per parameter slot (stage
				 * 0), [0] (stage 1/2), per sub-group (3) */
	uint32_t *state;        /* optimizer states, 2 per master */
	size_t n_master;
	uint32_t gpart;         /* 16-bit gradient partition */
	uint32_t ipg, ipg2;     /* the IPG bucket (stage 1/2: its two
				 * buffers under overlap_comm) */
	bool buckets_set;       /* stage 1/2: setup_buckets ran */
	uint32_t offbuf;        /* stage 1/2 offload: the largest
				 * parameter's 16-bit buffer */
	double ipg_fill;        /* elements in the bucket */
	size_t ipg_n;           /* gradients in the bucket */
	double *bk;             /* stage 3 with offload_optimizer: the
				 * partition elements of each gradient in
				 * the bucket, in the order they came */
	size_t nbk, capbk;
	bool have_states;
	unsigned steps;         /* optimizer steps done */
	uint32_t *gath;         /* stage 3: gathered parameters, (L + 1) x
				 * np */
	double *sg;             /* stage 3: elements of each sub-group */
	int n_sg;
	/* stage 3's prefetcher once the trace is complete (steps > 0): the
	 * uses of the blocks in order, block u's forward at u, its
	 * backward at 2 L - 1 - u; pf: the next use the fetch queue holds;
	 * avail: elements gathered (__n_available_params); mark[u]: the
	 * last use of block u the queue gave up while u was gathered
	 * (__most_recent_step_id_param_fetched_for), -1: none */
	uint64_t pf;
	double avail;
	int64_t *mark;
};

static struct gm_ds_em *ds_of(struct gm_em *e)
{
	return *gm_em_ds(e);
}

static const struct gm_step_ds *cfg(struct gm_em *e)
{
	return &gm_em_step(e)->ds;
}

/* Elements of parameter i in row `row` (the tensor as built, per TP
 * rank; 0 in a block outside its span). */
static double elems(struct gm_em *e, uint64_t row, int i)
{
	return gm_em_param(e, row, i)->weight / cfg(e)->b;
}

/* Whether parameter i belongs to row `row` (row L: embeddings, head). */
static bool in_row(struct gm_em *e, uint64_t row, int i)
{
	const struct gm_step *st = gm_em_step(e);

	return (row < st->layers) == (st->p[i].where == GM_STEP_LAYER) &&
	       gm_em_param(e, row, i) == &st->p[i];
}

/* The parameter slots in module order: the embeddings, each block's
 * tensors, the final norm and head. Calls fn(e, row, i, arg) for each
 * that exists on this rank. */
static void each_param(struct gm_em *e,
		       void (*fn)(struct gm_em *, uint64_t, int, void *),
		       void *arg)
{
	const struct gm_step *st = gm_em_step(e);
	uint64_t L = st->layers;

	for (int i = 0; i < st->n_param; i++)
		if (st->p[i].where == GM_STEP_EMBED && st->p[i].weight > 0)
			fn(e, L, i, arg);
	for (uint64_t l = 0; l < L; l++)
		for (int i = 0; i < st->n_param; i++)
			if (st->p[i].where == GM_STEP_LAYER &&
			    gm_em_param(e, l, i)->weight > 0)
				fn(e, l, i, arg);
	for (int i = 0; i < st->n_param; i++)
		if (st->p[i].where == GM_STEP_HEAD && st->p[i].weight > 0)
			fn(e, L, i, arg);
}

static double total_elems(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	double n = 0;

	for (uint64_t row = 0; row <= st->layers; row++)
		for (int i = 0; i < st->n_param; i++)
			if (in_row(e, row, i))
				n += elems(e, row, i);
	return n;
}

static size_t slot(struct gm_em *e, uint64_t row, int i)
{
	return (size_t)row * (size_t)gm_em_step(e)->n_param + (size_t)i;
}

/* ---- stage 0: FP16_UnfusedOptimizer ---- */

static void unf_master(struct gm_em *e, uint64_t row, int i, void *arg)
{
	struct gm_ds_em *s = ds_of(e);
	double n = elems(e, row, i);
	uint32_t c = gm_em_alloc(e, n * cfg(e)->b, GM_SK_OPT_TMP);

	(void)arg;
	s->master[slot(e, row, i)] = gm_em_alloc(e, 4 * n, GM_SK_STATE);
	gm_em_free(e, &c);
}

/* One zero gradient per parameter (bytes per element in *arg) into the
 * array after it. */
struct zeros {
	double bytes;
	uint32_t *ids;
};

static void zero_grad(struct gm_em *e, uint64_t row, int i, void *arg)
{
	struct zeros *z = arg;

	z->ids[slot(e, row, i)] = gm_em_alloc(e, elems(e, row, i) * z->bytes,
					      GM_SK_OPT_TMP);
}

/* The optimizer's states of master j of n elements (torch.optim
 * _init_group: exp_avg, exp_avg_sq, zeros_like, at its first step). */
static void states_of(struct gm_em *e, size_t j, double n)
{
	struct gm_ds_em *s = ds_of(e);

	for (int k = 0; k < 2 && k < cfg(e)->states; k++)
		s->state[2 * j + (size_t)k] = gm_em_alloc(e, 4 * n,
							  GM_SK_STATE);
}

/* One optimizer step over masters whose elements are n[0 .. m): the
 * states at the first step, then the implementation's temporaries
 * (optstep.h; foreach: all at once, freed). */
static void opt_step(struct gm_em *e, size_t first, const double *n,
		     size_t m)
{
	struct gm_ds_em *s = ds_of(e);
	double *b = calloc(m ? m : 1, sizeof(*b));

	if (!b) {
		gm_em_fail(e, GM_ENOMEM);
		return;
	}
	for (size_t j = 0; j < m; j++)
		if (!s->have_states)
			states_of(e, first + j, n[j]);
	for (size_t j = 0; j < m; j++)
		b[j] = cfg(e)->adam_tmp ? 4 * n[j] : 0;
	gm_optstep_rule(gm_em_step(e)->opt_impl)->emit(e, b, m);
	free(b);
}

/* Elements of every parameter slot, in slot order (0 where none). */
static double *slot_elems(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	size_t n = (size_t)(st->layers + 1) * (size_t)st->n_param;
	double *v = calloc(n ? n : 1, sizeof(*v));

	for (uint64_t row = 0; v && row <= st->layers; row++)
		for (int i = 0; i < st->n_param; i++)
			if (in_row(e, row, i))
				v[slot(e, row, i)] = elems(e, row, i);
	return v;
}

static void setup_stage0(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	size_t n = s->n_master;
	struct zeros z16 = {cfg(e)->b, calloc(n, sizeof(uint32_t))};
	struct zeros z32 = {4, calloc(n, sizeof(uint32_t))};
	double *v = slot_elems(e);

	(void)st;
	if (!z16.ids || !z32.ids || !v) {
		gm_em_fail(e, GM_ENOMEM);
		goto out;
	}
	for (size_t j = 0; j < n; j++)
		z16.ids[j] = z32.ids[j] = NONE;
	each_param(e, unf_master, NULL);
	each_param(e, zero_grad, &z16);
	each_param(e, zero_grad, &z32);
	opt_step(e, 0, v, n);
	s->have_states = true;
	for (size_t j = 0; j < n; j++) {
		gm_em_free(e, &z16.ids[j]);
		gm_em_free(e, &z32.ids[j]);
	}
out:
	free(z16.ids);
	free(z32.ids);
	free(v);
}

/* ---- stages 1 and 2: DeepSpeedZeroOptimizer ---- */

static void drop_weight(struct gm_em *e, uint64_t row, int i, void *arg)
{
	(void)arg;
	gm_em_free(e, gm_em_wid(e, row, i));
}

static double largest_param(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	double m = 0;

	for (int i = 0; i < st->n_param; i++)
		if (st->p[i].weight / cfg(e)->b > m)
			m = st->p[i].weight / cfg(e)->b;
	return m;
}

static void setup_stage12(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	double P = total_elems(e), part = P / c->d;
	uint32_t clone, zero;

	s->flat16 = gm_em_alloc(e, P * c->b, GM_SK_WEIGHT);
	each_param(e, drop_weight, NULL);
	clone = gm_em_alloc(e, part * c->b, GM_SK_OPT_TMP);
	if (!c->off_opt)
		s->master[0] = gm_em_alloc(e, 4 * part, GM_SK_STATE);
	gm_em_free(e, &clone);
	if (c->off_opt) {
		s->offbuf = gm_em_alloc(e, largest_param(e) * c->b,
					GM_SK_COMM);
		return;
	}
	zero = gm_em_alloc(e, 4 * part, GM_SK_OPT_TMP);
	gm_em_free(e, &zero);
}

/* ---- stage 3: DeepSpeedZeroOptimizer_Stage3 ---- */

/* Sub-groups in module order (_create_fp16_sub_groups: a group closes
 * once it holds sub_group_size elements, or at the last parameter). */
static void sub_group_add(struct gm_em *e, uint64_t row, int i, void *arg)
{
	struct gm_ds_em *s = ds_of(e);
	double *acc = arg;

	*acc += elems(e, row, i) / cfg(e)->d;
	if (*acc >= cfg(e)->sub_group) {
		s->sg[s->n_sg++] = *acc;
		*acc = 0;
	}
}

static void partition_one(struct gm_em *e, uint64_t row, int i, void *arg)
{
	uint32_t *part = arg;
	uint32_t *w = gm_em_wid(e, row, i);

	/* _partition_param: the partition, then the full storage freed */
	part[slot(e, row, i)] = gm_em_alloc(e, elems(e, row, i) / cfg(e)->d *
					    cfg(e)->b, GM_SK_WEIGHT);
	gm_em_free(e, w);
}

static void setup_stage3(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	double P = total_elems(e), part = P / c->d, acc = 0, big = 0;
	size_t n = s->n_master;
	uint32_t *pp = malloc((n ? n : 1) * sizeof(*pp));

	if (!pp) {
		gm_em_fail(e, GM_ENOMEM);
		return;
	}
	for (size_t j = 0; j < n; j++)
		pp[j] = NONE;
	each_param(e, partition_one, pp);
	/* defragment (deepspeed/runtime/zero/utils.py): the partitions
	 * leave for the host, gc.collect() and empty_cache(), then the flat
	 * buffer is allocated and filled (the H200 traces of
	 * ds-zero3-llama-1.1b-bf16 and ds-zero3-offload-llama-1.1b-bf16:
	 * 114 segments, 2.38 GiB, released before defragment's 2.05 GiB
	 * buffer); offload_param keeps the partitions on the host, with no
	 * release (ds-zero3-offload-all-llama-1.1b-bf16) */
	for (size_t j = 0; j < n; j++)
		gm_em_free(e, &pp[j]);
	free(pp);
	if (!c->off_param) {
		gm_em_empty_cache(e);
		s->flat16 = gm_em_alloc(e, part * c->b, GM_SK_WEIGHT);
	}
	each_param(e, sub_group_add, &acc);
	if (acc > 0)
		s->sg[s->n_sg++] = acc;
	for (int g = 0; g < s->n_sg; g++) {
		uint32_t t;
		if (c->off_opt)
			break;
		t = gm_em_alloc(e, 4 * s->sg[g], GM_SK_OPT_TMP);
		s->master[g] = gm_em_alloc(e, 4 * s->sg[g], GM_SK_STATE);
		gm_em_free(e, &t);
		big = s->sg[g] > big ? s->sg[g] : big;
	}
	if (big > 0) {
		uint32_t z = gm_em_alloc(e, 4 * big, GM_SK_OPT_TMP);
		gm_em_free(e, &z);
	}
	if (c->contiguous)
		s->ipg = gm_em_alloc(e, c->bucket * c->b, GM_SK_COMM);
	if (!c->off_opt)
		s->gpart = gm_em_alloc(e, part * c->b, GM_SK_GRAD);
}

void gm_ds_setup(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = calloc(1, sizeof(*s));
	size_t n = (size_t)(st->layers + 1) * (size_t)st->n_param;

	if (!s) {
		gm_em_fail(e, GM_ENOMEM);
		return;
	}
	*gm_em_ds(e) = s;
	s->flat16 = s->gpart = s->ipg = s->ipg2 = s->offbuf = NONE;
	s->n_master = st->ds.stage == 0 ? n : st->ds.stage == 3 ? n + 1 : 1;
	s->master = malloc(s->n_master * sizeof(*s->master));
	s->state = malloc(2 * s->n_master * sizeof(*s->state));
	s->gath = malloc((n ? n : 1) * sizeof(*s->gath));
	s->sg = calloc(n + 1, sizeof(*s->sg));
	s->mark = malloc((st->layers + 1) * sizeof(*s->mark));
	if (!s->master || !s->state || !s->gath || !s->sg || !s->mark) {
		free(s->mark);
		gm_em_fail(e, GM_ENOMEM);
		free(s->master);
		free(s->state);
		free(s->gath);
		free(s->sg);
		free(s);
		*gm_em_ds(e) = NULL;
		return;
	}
	for (size_t j = 0; j < s->n_master; j++)
		s->master[j] = s->state[2 * j] = s->state[2 * j + 1] = NONE;
	for (size_t j = 0; j < n; j++)
		s->gath[j] = NONE;
	if (st->ds.stage == 0)
		setup_stage0(e);
	else if (st->ds.stage <= 2)
		setup_stage12(e);
	else
		setup_stage3(e);
}

/* ---- stage 3 gathering ---- */

static bool gathers(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);

	return c->stage == 3 && (c->d > 1 || c->off_param);
}

/* Elements of unit u's parameters that are partitioned (not
 * persistent): what __n_available_params counts. */
static double unit_gathered_elems(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	double n = 0;

	for (int i = 0; i < st->n_param; i++)
		if (in_row(e, u, i) && elems(e, u, i) > cfg(e)->persist)
			n += elems(e, u, i);
	return n;
}

/* Whether unit u's partitioned parameters are gathered. */
static bool gathered(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);

	for (int i = 0; i < st->n_param; i++)
		if (in_row(e, u, i) && elems(e, u, i) > cfg(e)->persist)
			return s->gath[slot(e, u, i)] != NONE;
	return false;
}

/* Unit u's parameters gathered where they are not; whether any was
 * (its partitioned ones then count in avail). */
static bool gather(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	bool any = false, was = gathered(e, u);

	for (int i = 0; i < st->n_param; i++) {
		uint32_t *g = &s->gath[slot(e, u, i)];
		if (in_row(e, u, i) && *g == NONE) {
			*g = gm_em_alloc(e, st->p[i].weight, GM_SK_GATHER);
			any = true;
		}
	}
	if (any && !was)
		s->avail += unit_gathered_elems(e, u);
	return any;
}

/*
 * The prefetch after the fetch of use q (DeepSpeed
 * deepspeed/runtime/zero/partitioned_param_coordinator.py
 * fetch_sub_module once is_complete_trace(), read at the snapshot
 * edaa722, version.txt 0.19.6, the nearest to the measured 0.19.8 in
 * the store): the fetch queue gives up the uses after q in trace
 * order; a parameter not available is all-gathered and counts, one
 * available is skipped and marked with that use's step, which
 * __params_to_release honours (no release before it). Each submodule's
 * fetch takes up to stage3_prefetch_bucket_size more elements, bounded
 * by stage3_max_live_parameters - __n_available_params; a block is a
 * dozen submodule fetches (its linears, norms, attention, MLP, the
 * block itself) and about one bucket of elements (1.1B Llama: 44M per
 * block, 5e7 a bucket), so the queue runs ahead until
 * max_live_parameters stops it: the loop here goes while avail <
 * max_live. The H200 trace of ds-zero3-offload-all-llama-1.1b-bf16
 * (tests/data/calibration/traces/pending-loops/) shows it: in the
 * second step the blocks' weights are gathered together (coalesced
 * handles, partition_parameters.py NoGatherCoalescedHandle) at the
 * forward's start and kept to their backward, about 1e9 elements live
 * at the peak.
 */
static void prefetch(struct gm_em *e, uint64_t q)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	uint64_t L = st->layers;

	if (s->steps == 0 || !(cfg(e)->prefetch > 0))
		return;
	if (s->pf <= q)
		s->pf = q + 1;
	while (s->pf < 2 * L &&
	       s->avail < cfg(e)->max_live) {
		uint64_t use = s->pf++;
		uint64_t u = use < L ? use : 2 * L - 1 - use;
		if (!gather(e, u) && (int64_t)use > s->mark[u])
			s->mark[u] = (int64_t)use;
	}
}

void gm_ds_fetch(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);

	if (!s || !gathers(e))
		return;
	if (u == st->layers) { /* the step's first fetch: reset_step */
		s->pf = 0;
		s->avail = 0;
		for (uint64_t v = 0; v <= st->layers; v++)
			s->mark[v] = -1;
	}
	gather(e, u);
	if (u < st->layers)
		prefetch(e, u);
}

void gm_ds_fetch_bwd(struct gm_em *e, uint64_t u)
{
	struct gm_ds_em *s = ds_of(e);

	if (!s || !gathers(e))
		return;
	gather(e, u);
	prefetch(e, 2 * gm_em_step(e)->layers - 1 - u);
}

/* Unit u's parameters freed, but the persistent ones. */
static void release(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);

	if (gathered(e, u))
		s->avail -= unit_gathered_elems(e, u);
	for (int i = 0; i < st->n_param; i++)
		if (in_row(e, u, i) && elems(e, u, i) > cfg(e)->persist)
			gm_em_free(e, &s->gath[slot(e, u, i)]);
}

/* Elements of unit u's parameters. */
static double unit_elems(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	double n = 0;

	for (int i = 0; i < st->n_param; i++)
		if (in_row(e, u, i))
			n += elems(e, u, i);
	return n;
}

void gm_ds_release_fwd(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	double between = 0;

	if (!s || !gathers(e))
		return;
	/* its backward's use given up by the prefetcher while gathered */
	if (u < st->layers && s->steps > 0 && s->mark[u] > (int64_t)u)
		return;
	if (u < st->layers && s->steps > 0) {
		/* the modules until block u's backward: the later blocks'
		 * forward, the root's, the later blocks' backward */
		for (uint64_t v = u + 1; v < st->layers; v++)
			between += 2 * unit_elems(e, v);
		between += unit_elems(e, st->layers);
		if (between < cfg(e)->max_reuse)
			return;
	}
	if (u < st->layers)
		release(e, u);
}

/* ---- gradients ---- */

/* Stage 1/2's setup_buckets at the first gradient hook: a buffer of
 * reduce_bucket_size elements with contiguous_gradients, a second one
 * with overlap_comm (double buffering). */
static void setup_buckets(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);

	if (s->buckets_set || c->stage == 3)
		return;
	s->buckets_set = true;
	if (c->contiguous)
		s->ipg = gm_em_alloc(e, c->bucket * c->b, GM_SK_COMM);
	if (c->overlap)
		s->ipg2 = gm_em_alloc(e, c->bucket * c->b, GM_SK_COMM);
}

/* The bucket is reduced and emptied: stage 3 reduce-scatters a flat copy
 * of it (none for a single gradient that splits evenly over the ranks:
 * reduce_scatter_coalesced reduces it in place); the first reduction
 * allocates the stage 1/2 partition. */
static void reduce_bucket(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	double n = s->ipg_fill;
	bool one = s->ipg_n == 1 && fmod(n, c->d) == 0;
	uint32_t t = NONE;

	s->ipg_fill = 0;
	s->ipg_n = 0;
	if (!(n > 0))
		return;
	if (c->stage == 3) {
		if (!one)
			t = gm_em_alloc(e, n * c->b, GM_SK_RCOMM);
		for (size_t k = 0; k < s->nbk; k++) {
			uint32_t g = gm_em_alloc(e, s->bk[k] * c->b,
						 GM_SK_RTMP);
			uint32_t x = gm_em_alloc(e, 8 * s->bk[k],
						 GM_SK_RTMP);
			gm_em_free(e, &x);
			x = gm_em_alloc(e, 4 * s->bk[k], GM_SK_RTMP);
			gm_em_free(e, &x);
			gm_em_free(e, &g);
		}
		s->nbk = 0;
		if (t != NONE)
			gm_em_free(e, &t);
		return;
	}
	if (!c->off_opt && s->gpart == NONE)
		s->gpart = gm_em_alloc(e, total_elems(e) / c->d * c->b,
				       GM_SK_GRAD);
}

/* Elements of (row, i)'s gradient: its parameter's; a tied lm_head holds
 * no weight of its own (the embedding's) but the whole gradient. */
static double grad_elems(struct gm_em *e, uint64_t row, int i)
{
	const struct gm_step_param *p = gm_em_param(e, row, i);

	return (p->weight > 0 ? p->weight : p->grad) / cfg(e)->b;
}

/* Whether head parameter i is an lm_head tied to the input embedding
 * (whose gradient is the head's, gm_step_param.grad_shared): autograd
 * accumulates both uses before the shared parameter's hook runs, after
 * the embedding's backward. */
static bool tied_head(const struct gm_step *st, int i)
{
	if (st->p[i].where != GM_STEP_HEAD || !st->p[i].grad_at_loss)
		return false;
	for (int j = 0; j < st->n_param; j++)
		if (st->p[j].where == GM_STEP_EMBED && st->p[j].grad_shared)
			return true;
	return false;
}

/* The gradient of (row, i) is ready: into the bucket (stages 1-3), its
 * own tensor freed; stage 0 keeps it. The bucket is reduced first when
 * the gradient would overflow it (stage3.py
 * reduce_independent_p_g_buckets_and_remove_grads, stage_1_and_2.py
 * likewise). */
static void take_grad(struct gm_em *e, uint64_t row, int i)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	uint32_t *g = gm_em_gid(e, row, i);
	double n = grad_elems(e, row, i);

	if (*g == NONE)
		return;
	setup_buckets(e);
	if (s->ipg_fill + n > c->bucket)
		reduce_bucket(e);
	s->ipg_fill += n;
	s->ipg_n++;
	if (c->stage == 3 && c->off_opt) {
		if (s->nbk == s->capbk) {
			size_t m = s->capbk ? 2 * s->capbk : 64;
			double *b = realloc(s->bk, m * sizeof(*b));
			if (!b) {
				gm_em_fail(e, GM_ENOMEM);
				return;
			}
			s->bk = b;
			s->capbk = m;
		}
		s->bk[s->nbk++] = n / c->d;
	}
	if (c->stage <= 2 && c->off_opt) {
		/* the fp64 norm and fp32 copy of the reduced gradient */
		uint32_t a = gm_em_alloc(e, 8 * n, GM_SK_OPT_TMP);
		uint32_t b;
		gm_em_free(e, &a);
		b = gm_em_alloc(e, 4 * n, GM_SK_OPT_TMP);
		gm_em_free(e, &b);
	}
	gm_em_free(e, g);
}

/* Stage 0's all-reduce at the end of the backward (allreduce_no_retain):
 * the gradients flattened bucket by bucket, in module order. */
static void flat_allreduce(struct gm_em *e, uint64_t row, int i, void *arg)
{
	double *acc = arg;
	uint32_t t;

	if (gm_em_step(e)->p[i].grad_shared || *gm_em_gid(e, row, i) == NONE)
		return;
	*acc += elems(e, row, i);
	if (*acc > cfg(e)->bucket) {
		t = gm_em_alloc(e, *acc * cfg(e)->b, GM_SK_COMM);
		gm_em_free(e, &t);
		*acc = 0;
	}
}

static void take_one(struct gm_em *e, uint64_t row, int i, void *arg)
{
	(void)arg;
	take_grad(e, row, i);
}

void gm_ds_post_backward(struct gm_em *e, uint64_t u)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	uint64_t L = st->layers;

	if (!s)
		return;
	if (gathers(e))
		release(e, u);
	if (st->ds.stage == 0) {
		double acc = 0;
		uint32_t t;
		if (u < L)
			return;
		each_param(e, flat_allreduce, &acc);
		t = gm_em_alloc(e, acc * st->ds.b, GM_SK_COMM);
		gm_em_free(e, &t);
		return;
	}
	if (st->ds.stage == 1 && !st->ds.overlap) {
		/* process_gradients: the buckets set up at the first hook,
		 * the reduction left to reduce_gradients at the end of the
		 * backward, over the parameters in their group's order */
		setup_buckets(e);
		if (u < L)
			return;
		each_param(e, take_one, NULL);
	} else {
		/* the head's gradients are ready before the blocks', but
		 * a tied lm_head's after the embedding's backward */
		for (int i = st->n_param; i-- > 0;)
			if (st->p[i].where == GM_STEP_HEAD && !tied_head(st, i))
				take_grad(e, L, i);
		for (int i = st->n_param; u < L && i-- > 0;)
			if (in_row(e, u, i))
				take_grad(e, u, i);
		if (u < L)
			return;
		for (int i = st->n_param; i-- > 0;)
			if (st->p[i].where == GM_STEP_EMBED || tied_head(st, i))
				take_grad(e, L, i);
	}
	reduce_bucket(e);
	if (st->ds.stage <= 2) {
		gm_em_free(e, &s->ipg);
		gm_em_free(e, &s->ipg2);
		s->buckets_set = false;
	}
}

/* ---- the optimizer step ---- */

/* A norm's transient per gradient, one at a time: bytes per element. */
static void norm_one(struct gm_em *e, uint64_t row, int i, void *arg)
{
	const double *bytes = arg;
	uint32_t t;

	if (gm_em_step(e)->p[i].grad_shared)
		return;
	t = gm_em_alloc(e, elems(e, row, i) / (cfg(e)->stage ? cfg(e)->d : 1) *
			*bytes, GM_SK_OPT_TMP);
	gm_em_free(e, &t);
}

static void step_stage0(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	size_t n = s->n_master;
	double four = 4, *v = slot_elems(e);
	uint32_t *g32 = malloc((n ? n : 1) * sizeof(*g32));

	if (!v || !g32) {
		gm_em_fail(e, GM_ENOMEM);
		goto out;
	}
	each_param(e, norm_one, &four);
	for (size_t j = 0; j < n; j++)
		g32[j] = v[j] > 0 ? gm_em_alloc(e, 4 * v[j], GM_SK_OPT_TMP)
				  : NONE;
	opt_step(e, 0, v, n);
	for (size_t j = 0; j < n; j++)
		gm_em_free(e, &g32[j]);
	for (uint64_t row = 0; row <= st->layers; row++)
		for (int i = 0; i < st->n_param; i++)
			gm_em_free(e, gm_em_gid(e, row, i));
out:
	free(v);
	free(g32);
}

static void step_stage12(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	double eight = 8, part = total_elems(e) / c->d;
	uint32_t flat, g32;

	if (c->off_opt)
		return; /* the step runs on the host */
	each_param(e, norm_one, &eight);
	flat = gm_em_alloc(e, part * c->b, GM_SK_OPT_TMP);
	g32 = gm_em_alloc(e, 4 * part, GM_SK_OPT_TMP);
	gm_em_free(e, &flat);
	gm_em_free(e, &s->gpart);
	opt_step(e, 0, &part, 1);
	gm_em_free(e, &g32);
}

static void step_stage3(struct gm_em *e)
{
	const struct gm_step_ds *c = cfg(e);
	struct gm_ds_em *s = ds_of(e);
	double eight = 8;

	if (c->off_opt)
		return;
	each_param(e, norm_one, &eight);
	for (int g = 0; g < s->n_sg; g++) {
		uint32_t flat = gm_em_alloc(e, s->sg[g] * c->b,
					    GM_SK_OPT_TMP);
		uint32_t g32 = gm_em_alloc(e, 4 * s->sg[g], GM_SK_OPT_TMP);
		gm_em_free(e, &flat);
		opt_step(e, (size_t)g, &s->sg[g], 1);
		gm_em_free(e, &g32);
	}
}

void gm_ds_optimizer(struct gm_em *e)
{
	struct gm_ds_em *s = ds_of(e);

	if (!s)
		return;
	if (cfg(e)->stage == 0)
		step_stage0(e);
	else if (cfg(e)->stage <= 2)
		step_stage12(e);
	else
		step_stage3(e);
	s->have_states = true;
	s->steps++;
}

void gm_ds_free(struct gm_em *e)
{
	const struct gm_step *st = gm_em_step(e);
	struct gm_ds_em *s = ds_of(e);
	size_t n = (size_t)(st->layers + 1) * (size_t)st->n_param;

	if (!s)
		return;
	for (size_t j = 0; s->gath && j < n; j++)
		gm_em_free(e, &s->gath[j]);
	for (size_t j = 0; s->master && s->state && j < s->n_master; j++) {
		gm_em_free(e, &s->master[j]);
		gm_em_free(e, &s->state[2 * j]);
		gm_em_free(e, &s->state[2 * j + 1]);
	}
	gm_em_free(e, &s->gpart);
	gm_em_free(e, &s->ipg);
	gm_em_free(e, &s->ipg2);
	gm_em_free(e, &s->offbuf);
	gm_em_free(e, &s->flat16);
	free(s->master);
	free(s->state);
	free(s->gath);
	free(s->sg);
	free(s->mark);
	free(s->bk);
	free(s);
	*gm_em_ds(e) = NULL;
}
