/*
 * step_megatron.c - a Megatron-LM training step's allocation sequence
 * (step_megatron.h), NVIDIA/Megatron-LM d98e8a6:
 *
 *  - build: megatron/training/training.py get_model builds every model
 *    chunk on the GPU in the 16-bit dtype (each parameter its own
 *    tensor, module order), then wraps each chunk in Megatron-Core's
 *    DistributedDataParallel, whose _ParamAndGradBuffer allocates the
 *    chunk's grad_data (and with the distributed optimizer its
 *    param_data, into which every parameter is copied and its own
 *    storage dropped: `param.data = new_param_data`, `del
 *    old_param_data`); then the optimizer (megatron/core/optimizer/
 *    optimizer.py Float16OptimizerWithFloat16Params, distrib_optimizer.py
 *    _build_model_and_main_param_groups) clones an fp32 master of each
 *    parameter, or of this rank's shard of it;
 *  - each step: the schedule of pipeline_parallel/schedules.py (no
 *    pipeline: forward then backward per micro-batch; 1F1B; interleaved
 *    1F1B over the chunks), each forward keeping its layers' saved
 *    tensors until that micro-batch's backward of the same chunk; the
 *    weight gradients go into grad_data in place (gradient accumulation
 *    fusion, Megatron's default), so a backward allocates only its
 *    transients; the first optimizer step creates Adam's two states per
 *    master tensor (apex / Transformer Engine FusedAdam, lazily, as
 *    torch.optim); the update is multi-tensor and in place, the buffers
 *    are zeroed, never freed.
 */
#include "step_megatron.h"

#include "error.h"
#include "step.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

unsigned gm_mg_chunk(unsigned pp, unsigned chunks, uint64_t m, uint64_t k,
		     bool backward)
{
	uint64_t g = pp ? pp : 1, full, size;
	unsigned c;

	if (chunks < 2 || !m)
		return 0;
	/* get_schedule_table: groups of g micro-batches, each run through
	 * every chunk in turn; the group at s is the last one when s + g
	 * >= m and takes the m - s left */
	full = m > g ? (m - 1) / g : 0;
	if (k < full * g * chunks) {
		c = (unsigned)(k % (g * chunks) / g);
	} else {
		size = m - full * g;
		c = (unsigned)((k - full * g * chunks) / size);
	}
	if (c >= chunks)
		c = chunks - 1;
	return backward ? chunks - 1 - c : c;
}

uint64_t gm_mg_warmup(unsigned pp, unsigned chunks, unsigned rank,
		      uint64_t m)
{
	uint64_t total = m * (chunks ? chunks : 1), w;

	if (pp < 2)
		return 0;
	if (chunks < 2)
		w = pp - rank - 1;
	else
		w = (uint64_t)(pp - rank - 1) * 2 + (uint64_t)(chunks - 1) * pp;
	return w < total ? w : total;
}

uint64_t gm_mg_micro_emitted(const struct gm_mg_step *mg)
{
	uint64_t cap = 3 * (uint64_t)(mg->pp ? mg->pp : 1);

	if (mg->pp < 2)
		return mg->m < 2 ? mg->m : 2;
	return mg->m < cap ? mg->m : cap;
}

/* The emitter's state: slots and what is live. */
struct mg_em {
	const struct gm_mg_step *mg;
	const struct gm_step_sink *sk;
	uint32_t *freelist;
	uint32_t nfree, cap, next;
	int err;
	size_t per_set;          /* ids of one micro-batch's saved set */
	uint64_t depth;          /* sets a chunk's queue holds at most */
	uint32_t *sets;          /* chunks x depth x per_set */
	uint64_t *head, *count;  /* per chunk: the queue's oldest, size */
	uint32_t *w, *master, *state; /* every parameter tensor */
	size_t nw;
	uint32_t pbuf[GM_MG_CHUNKS], gbuf[GM_MG_CHUNKS];
	uint32_t pbuf_x[GM_MG_CHUNKS], gbuf_x[GM_MG_CHUNKS];
	uint32_t ws_fwd, ws_bwd, ws_te, ws_group[GM_MG_GROUP_WS];
	uint32_t gbuf_mpu;  /* Megatron's global memory buffer */
	bool have_states;
};

static void phase(const struct gm_step_sink *sk, enum gm_step_phase ph)
{
	if (sk->phase)
		sk->phase(sk->ctx, ph);
}

static uint32_t alloc(struct mg_em *e, double bytes, enum gm_step_kind k)
{
	uint32_t id;
	int rc;

	if (e->err || !(bytes > 0))
		return NONE;
	id = e->nfree ? e->freelist[--e->nfree] : e->next++;
	rc = e->sk->alloc(e->sk->ctx, id, bytes >= 0x1p62 ?
			  (uint64_t)1 << 62 : (uint64_t)ceil(bytes), k);
	if (rc) {
		e->err = rc;
		return NONE;
	}
	return id;
}

static void release(struct mg_em *e, uint32_t *id)
{
	if (*id == NONE)
		return;
	if (!e->err) {
		int rc = e->sk->free(e->sk->ctx, *id);
		if (rc)
			e->err = rc;
	}
	if (e->nfree == e->cap) {
		uint32_t n = e->cap ? 2 * e->cap : 256;
		uint32_t *f = realloc(e->freelist, n * sizeof(*f));
		if (!f) {
			e->err = GM_ENOMEM;
			*id = NONE;
			return;
		}
		e->freelist = f;
		e->cap = n;
	}
	e->freelist[e->nfree++] = *id;
	*id = NONE;
}

/* Tensor i of chunk c (layer tensors first, then the others). */
static size_t per_chunk(const struct gm_mg_step *mg)
{
	return (size_t)mg->layers_chunk * (size_t)mg->n_layer_t +
	       (size_t)mg->n_other_t;
}

static double tensor_bytes(const struct gm_mg_step *mg, size_t i)
{
	size_t nl = (size_t)mg->layers_chunk * (size_t)mg->n_layer_t;
	size_t j = i % per_chunk(mg);

	if (j < nl)
		return mg->layer_t[j % (size_t)mg->n_layer_t];
	return mg->other_t[j - nl];
}

/* Whether tensor i is a routed expert's (its own buffer and optimizer
 * shard). */
static bool expert_t(const struct gm_mg_step *mg, size_t i)
{
	size_t nl = (size_t)mg->layers_chunk * (size_t)mg->n_layer_t;
	size_t j = i % per_chunk(mg);

	return j < nl && mg->layer_x[j % (size_t)mg->n_layer_t];
}

static double master_of(const struct gm_mg_step *mg, size_t i)
{
	return tensor_bytes(mg, i) * (expert_t(mg, i) ? mg->master_frac_x
						       : mg->master_frac);
}

static double state_of(const struct gm_mg_step *mg, size_t i)
{
	return tensor_bytes(mg, i) * (expert_t(mg, i) ? mg->state_frac_x
						       : mg->state_frac);
}

/* Whether a chunk builds the rank's other tensors (other_t): chunk 0. */
static bool other_on(const struct gm_mg_step *mg, unsigned c)
{
	(void)mg;
	return c == 0;
}

/* Whether tensor i is built on the rank (a chunk's other tensors only
 * on chunk 0). */
static bool built(const struct gm_mg_step *mg, size_t i)
{
	size_t pc = per_chunk(mg);
	bool other = i % pc >= (size_t)mg->layers_chunk * (size_t)mg->n_layer_t;

	return !other || other_on(mg, (unsigned)(i / pc));
}

/* Build, DDP wrap, optimizer construction. */
static void setup(struct mg_em *e)
{
	const struct gm_mg_step *mg = e->mg;
	size_t pc = per_chunk(mg);

	phase(e->sk, GM_SP_SETUP);
	for (size_t i = 0; i < e->nw; i++)
		if (built(mg, i))
			e->w[i] = alloc(e, tensor_bytes(mg, i), GM_SK_WEIGHT);
	for (unsigned c = 0; c < mg->chunks; c++) {
		e->pbuf[c] = alloc(e, mg->param_buf[c], GM_SK_WEIGHT);
		e->gbuf[c] = alloc(e, mg->grad_buf[c], GM_SK_GRAD);
		e->pbuf_x[c] = alloc(e, mg->param_buf_x[c], GM_SK_WEIGHT);
		e->gbuf_x[c] = alloc(e, mg->grad_buf_x[c], GM_SK_GRAD);
		if (e->pbuf[c] == NONE)
			continue;
		for (size_t i = c * pc; i < (c + 1) * pc; i++)
			release(e, &e->w[i]); /* now a view of param_data */
	}
	for (size_t i = 0; i < e->nw; i++)
		if (built(mg, i))
			e->master[i] = alloc(e, master_of(mg, i),
					     GM_SK_STATE);
}

static uint32_t *set_of(struct mg_em *e, unsigned c, uint64_t slot)
{
	return &e->sets[((size_t)c * e->depth + slot) * e->per_set];
}

static bool first_chunk(const struct mg_em *e, unsigned c)
{
	return e->mg->rank == 0 && c == 0;
}

static bool last_chunk(const struct mg_em *e, unsigned c)
{
	return e->mg->rank + 1 == (e->mg->pp ? e->mg->pp : 1) &&
	       c + 1 == e->mg->chunks;
}

/* Forward of one micro-batch through chunk c. A set: per layer n_act
 * ids, then the stage input, the head's input, the fp32 logits. */
static void forward(struct mg_em *e, unsigned c)
{
	const struct gm_mg_step *mg = e->mg;
	uint64_t slot;
	uint32_t *s, t, lg;

	if (e->count[c] >= e->depth) {
		e->err = GM_EINVAL;
		return;
	}
	slot = (e->head[c] + e->count[c]++) % e->depth;
	s = set_of(e, c, slot);
	phase(e->sk, GM_SP_FORWARD);
	if (first_chunk(e, c))
		s[e->per_set - 3] = alloc(e, mg->stage_in, GM_SK_ACT);
	if (e->ws_fwd == NONE) {
		e->ws_fwd = alloc(e, mg->workspace, GM_SK_WORKSPACE);
		e->ws_te = alloc(e, mg->te_workspace, GM_SK_WORKSPACE);
		for (unsigned i = 0; i < mg->te_group_n; i++)
			e->ws_group[i] = alloc(e, mg->te_group_ws,
					       GM_SK_WORKSPACE);
		if (mg->global_buffer > 0)
			e->gbuf_mpu = alloc(e, mg->global_buffer, GM_SK_COMM);
	}
	for (uint64_t l = 0; l < mg->layers_chunk; l++) {
		for (int k = 0; k < mg->n_act; k++)
			s[l * (size_t)mg->n_act + (size_t)k] =
				alloc(e, mg->act[k], GM_SK_ACT);
		t = alloc(e, mg->fwd_trans, GM_SK_TRANSIENT);
		release(e, &t);
	}
	if (!last_chunk(e, c))
		return;
	s[e->per_set - 2] = alloc(e, mg->head_in, GM_SK_ACT);
	phase(e->sk, GM_SP_LOSS);
	/* output_layer's logits; vocab_parallel_cross_entropy's .float()
	 * copy, softmax'd in place and saved; the logits go when the
	 * forward returns */
	lg = alloc(e, mg->logits16, GM_SK_LOGITS);
	s[e->per_set - 1] = alloc(e, mg->logits32, GM_SK_LOGITS);
	release(e, &lg);
}

/* Backward of the oldest micro-batch in flight on chunk c. */
static void backward(struct mg_em *e, unsigned c)
{
	const struct gm_mg_step *mg = e->mg;
	uint32_t *s, t, r, g;

	if (!e->count[c]) {
		e->err = GM_EINVAL;
		return;
	}
	s = set_of(e, c, e->head[c]);
	e->head[c] = (e->head[c] + 1) % e->depth;
	e->count[c]--;
	phase(e->sk, GM_SP_BACKWARD);
	if (e->ws_bwd == NONE)
		e->ws_bwd = alloc(e, mg->workspace, GM_SK_WORKSPACE);
	if (last_chunk(e, c)) {
		/* the cross entropy's gradient is its saved softmax,
		 * modified in place, cast to the logits' dtype for the
		 * output layer's backward */
		g = alloc(e, mg->logits16, GM_SK_LOGITS);
		release(e, &s[e->per_set - 1]);
		t = alloc(e, mg->stage_grad, GM_SK_TRANSIENT);
		release(e, &g);
		release(e, &s[e->per_set - 2]);
		release(e, &t);
	}
	for (uint64_t l = mg->layers_chunk; l-- > 0;) {
		r = alloc(e, mg->recompute, GM_SK_ACT);
		t = alloc(e, mg->bwd_trans, GM_SK_TRANSIENT);
		release(e, &t);
		release(e, &r);
		for (int k = 0; k < mg->n_act; k++)
			release(e, &s[l * (size_t)mg->n_act + (size_t)k]);
	}
	release(e, &s[e->per_set - 3]);
	t = alloc(e, mg->stage_grad, GM_SK_TRANSIENT);
	release(e, &t);
}

/* The first step creates Adam's states, per master tensor. */
static void optimizer(struct mg_em *e)
{
	phase(e->sk, GM_SP_OPTIMIZER);
	if (e->have_states)
		return;
	for (size_t i = 0; i < e->nw; i++)
		if (built(e->mg, i))
			e->state[i] = alloc(e, state_of(e->mg, i),
					    GM_SK_STATE);
	e->have_states = true;
}

/* One step: warm-up forwards, 1F1B pairs, the remaining backwards
 * (schedules.py; without a pipeline each micro-batch's forward then its
 * backward), then the optimizer. */
static void step(struct mg_em *e)
{
	const struct gm_mg_step *mg = e->mg;
	uint64_t m = gm_mg_micro_emitted(mg);
	uint64_t total = m * mg->chunks;
	uint64_t warm = gm_mg_warmup(mg->pp, mg->chunks, mg->rank, m);
	uint64_t f = 0, b = 0;

	while (f < warm)
		forward(e, gm_mg_chunk(mg->pp, mg->chunks, m, f++, false));
	while (b < total && !e->err) {
		if (f < total)
			forward(e, gm_mg_chunk(mg->pp, mg->chunks, m, f++,
					       false));
		backward(e, gm_mg_chunk(mg->pp, mg->chunks, m, b++, true));
	}
	optimizer(e);
}

static uint32_t *ids(size_t n)
{
	uint32_t *p = malloc((n ? n : 1) * sizeof(*p));

	for (size_t i = 0; p && i < n; i++)
		p[i] = NONE;
	return p;
}

int gm_mg_emit(const struct gm_mg_step *mg, const struct gm_step_sink *sink)
{
	struct mg_em e = {.mg = mg, .sk = sink, .ws_fwd = NONE,
			  .ws_bwd = NONE, .ws_te = NONE, .gbuf_mpu = NONE};
	uint64_t m;
	int rc;

	if (!mg->steps || !mg->chunks || mg->chunks > GM_MG_CHUNKS ||
	    !mg->layers_chunk || !mg->m || mg->n_act < 0 ||
	    mg->n_act > GM_MG_ACT || mg->n_layer_t < 0 ||
	    mg->n_layer_t > GM_PARAMS_MAX || mg->n_other_t < 0 ||
	    mg->n_other_t > GM_PARAMS_MAX || mg->te_group_n > GM_MG_GROUP_WS ||
	    (mg->pp > 1 &&
	    mg->rank >= mg->pp))
		return GM_EINVAL;
	m = gm_mg_micro_emitted(mg);
	e.per_set = (size_t)mg->layers_chunk * (size_t)mg->n_act + 3;
	e.depth = gm_mg_warmup(mg->pp, mg->chunks, mg->rank, m) + 2;
	e.nw = per_chunk(mg) * mg->chunks;
	e.sets = ids((size_t)mg->chunks * e.depth * e.per_set);
	e.head = calloc(mg->chunks, sizeof(*e.head));
	e.count = calloc(mg->chunks, sizeof(*e.count));
	e.w = ids(e.nw);
	e.master = ids(e.nw);
	e.state = ids(e.nw);
	for (int i = 0; i < GM_MG_CHUNKS; i++)
		e.pbuf[i] = e.gbuf[i] = e.pbuf_x[i] = e.gbuf_x[i] = NONE;
	for (int i = 0; i < GM_MG_GROUP_WS; i++)
		e.ws_group[i] = NONE;
	rc = GM_ENOMEM;
	if (!e.sets || !e.head || !e.count || !e.w || !e.master || !e.state)
		goto out;
	setup(&e);
	for (unsigned s = 1;
	     gm_step_next(sink, s, mg->steps, mg->steps_max, &e.err); s++) {
		if (sink->step)
			sink->step(sink->ctx, s);
		gm_step_mark(sink, s, mg->steps, mg->steps_max, &e.err);
		if (s >= 2)
			gm_step_ids_order(e.freelist, e.nfree);
		step(&e);
	}
	rc = e.err;
	phase(sink, GM_SP_TEARDOWN);
	for (size_t i = 0; i < (size_t)mg->chunks * e.depth * e.per_set; i++)
		release(&e, &e.sets[i]);
	for (size_t i = 0; i < e.nw; i++) {
		release(&e, &e.state[i]);
		release(&e, &e.master[i]);
		release(&e, &e.w[i]);
	}
	for (unsigned c = 0; c < mg->chunks; c++) {
		release(&e, &e.gbuf_x[c]);
		release(&e, &e.pbuf_x[c]);
		release(&e, &e.gbuf[c]);
		release(&e, &e.pbuf[c]);
	}
	release(&e, &e.gbuf_mpu);
	for (unsigned i = mg->te_group_n; i-- > 0;)
		release(&e, &e.ws_group[i]);
	release(&e, &e.ws_te);
	release(&e, &e.ws_bwd);
	release(&e, &e.ws_fwd);
	if (!rc)
		rc = e.err;
out:
	free(e.sets);
	free(e.head);
	free(e.count);
	free(e.w);
	free(e.master);
	free(e.state);
	free(e.freelist);
	return rc;
}
