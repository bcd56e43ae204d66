/*
 * step.c - the allocation sequence of a modelled step and its replay
 * through the allocator core (step.h).
 *
 * Order of a training step, as PyTorch eager with transformers issues it
 * (each choice names its source; where the order follows a
 * simplification of the memory model (model.h), it says so, so that the
 * replay's peak of live bytes is the model's peak_allocated):
 *  - before the first step: weights, tensor by tensor in module order
 *    (nn.Module construction), the cuBLAS workspace (first matmul), the
 *    data-parallel buffers (DDP allocates its buckets at construction);
 *  - forward of each block: the autocast copies of its matmul weights
 *    (torch.autocast's cache, planners.md 7.11; shared by the micro-
 *    batches in flight: one autocast region per step), its saved tensors
 *    in order, then its largest transient, allocated and freed at once;
 *  - the loss: the logits in the compute dtype, the fp32 copy
 *    (logits.float() in transformers' ForCausalLMLoss), log_softmax's
 *    output; the copy is freed; in backward nll_loss's and log_softmax's
 *    fp32 gradients, then the head's weight gradient (the model counts
 *    it with the loss); the three fp32 tensors are freed;
 *  - backward of each block, last first: its transient (for
 *    checkpointing, the recomputed forward is part of it), then its saved
 *    tensors and autocast copies are freed and its gradients allocated
 *    (with zero_grad(set_to_none=True) they do not exist before the first
 *    backward of a step; later micro-batches accumulate in place). The
 *    returned logits, the head's saved inputs and its autocast copies
 *    stay alive through the last block's backward (the model's
 *    "one block's transient + held logits"); then the embedding's saved
 *    tensors are freed and the embedding's and the head's small
 *    gradients allocated;
 *  - pipeline parallelism: 1F1B (Narayanan et al. 2021): in_flight
 *    forwards, then backward/forward pairs, then the remaining backwards;
 *  - optimizer step: at the first step the states, tensor by tensor
 *    (PyTorch creates them lazily in _init_group); then the foreach
 *    temporaries (one tensor list, freed at the end of the step), or for
 *    Adafactor three temporaries per tensor; then zero_grad frees the
 *    gradients.
 * Gradient accumulation: micro-batches 3..ga issue exactly the requests
 * of micro-batch 2 from the same live set, so at most micro_max are
 * emitted (the replay's figures with all ga micro-batches are the same:
 * tests/unit/planner/test_step.c checks it).
 *
 * An inference pass: weights and workspace, then per block the autocast
 * copies and K and V (first pass; transformers' DynamicCache grows them
 * by torch.cat, which the block's transient carries as one block's K
 * doubled), the block's transient; then the pass's logits, while the
 * previous pass's logits are still referenced (generate() keeps
 * `outputs` until the next forward returns).
 */
#include "step.h"

#include "backend.h"
#include "error.h"
#include "pool.h"
#include "sim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

/* The emitter: slots for ids and the ids of what is live. */
struct em {
	const struct gm_step *st;
	const struct gm_step_sink *sk;
	uint32_t *freelist;
	uint32_t nfree, cap, next;
	int err;
	uint64_t L;
	int np;
	uint32_t *w, *g, *s, *c;  /* (L + 1) x np; s: x GM_STEP_STATES */
	uint32_t *a;              /* in_flight x L x n_act (inference:
				   * L x K, V) */
	size_t na;
	uint32_t *emb;            /* in_flight */
	uint32_t *cref;           /* (L + 1) autocast references */
	uint32_t head_saved, held, lp[3], ws;
	uint32_t *comm;          /* every data-parallel buffer */
	size_t ncomm;
	bool have_states;
};

static uint32_t slot_get(struct em *e)
{
	if (e->nfree)
		return e->freelist[--e->nfree];
	return e->next++;
}

static uint32_t ealloc(struct em *e, double bytes, enum gm_step_kind k)
{
	uint32_t id;
	int rc;

	if (e->err || !(bytes > 0))
		return NONE;
	id = slot_get(e);
	/* past 2^62 bytes no backend has room; saturate, never overflow */
	rc = e->sk->alloc(e->sk->ctx, id, bytes >= 0x1p62 ?
			  (uint64_t)1 << 62 : (uint64_t)ceil(bytes), k);
	if (rc) {
		e->err = rc;
		return NONE;
	}
	return id;
}

static void efree(struct em *e, uint32_t *id)
{
	int rc;

	if (*id == NONE)
		return;
	if (!e->err) {
		rc = e->sk->free(e->sk->ctx, *id);
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

/* Index of parameter i in block l (non-layer tensors: row L). */
static size_t pix(const struct em *e, uint64_t l, int i)
{
	return (size_t)l * (size_t)e->np + (size_t)i;
}

static uint64_t row_of(const struct em *e, int i, uint64_t l)
{
	return e->st->p[i].where == GM_STEP_LAYER ? l : e->L;
}

/* Autocast copies of a group (block l, or the head for l == L). */
static void cache_ref(struct em *e, uint64_t l, bool head)
{
	if (e->cref[l]++)
		return;
	for (int i = 0; i < e->np; i++) {
		const struct gm_step_param *p = &e->st->p[i];
		if ((l < e->L) != (p->where == GM_STEP_LAYER) ||
		    (head && p->where != GM_STEP_HEAD))
			continue;
		e->c[pix(e, l, i)] = ealloc(e, p->cache, GM_SK_CACHE);
	}
}

static void cache_unref(struct em *e, uint64_t l)
{
	if (!e->cref[l] || --e->cref[l])
		return;
	for (int i = 0; i < e->np; i++)
		efree(e, &e->c[pix(e, l, i)]);
}

static void grads_of(struct em *e, uint64_t l, enum gm_step_where wh,
		     bool at_loss)
{
	for (int i = 0; i < e->np; i++) {
		const struct gm_step_param *p = &e->st->p[i];
		uint32_t *id = &e->g[pix(e, row_of(e, i, l), i)];
		if (p->where != wh || p->grad_at_loss != at_loss ||
		    p->grad_shared || *id != NONE)
			continue;
		*id = ealloc(e, p->grad, GM_SK_GRAD);
	}
}

static void transient(struct em *e)
{
	uint32_t t = ealloc(e, e->st->trans, GM_SK_TRANSIENT);

	efree(e, &t);
}

static void forward(struct em *e, uint64_t slot)
{
	const struct gm_step *st = e->st;

	e->emb[slot] = ealloc(e, st->emb_saved, GM_SK_ACT);
	for (uint64_t l = 0; l < e->L; l++) {
		uint32_t *a = &e->a[(slot * e->L + l) * (size_t)st->n_act];
		cache_ref(e, l, false);
		for (int k = 0; k < st->n_act; k++)
			a[k] = ealloc(e, st->act[k], GM_SK_ACT);
		transient(e);
	}
	cache_ref(e, e->L, true);
	e->head_saved = ealloc(e, st->head_saved, GM_SK_ACT);
	if (st->logits_held > 0 || st->logits_piece > 0) {
		uint32_t copy;
		e->held = ealloc(e, st->logits_held, GM_SK_LOGITS);
		copy = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		e->lp[0] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		efree(e, &copy);
	}
}

static void backward(struct em *e, uint64_t slot)
{
	const struct gm_step *st = e->st;

	if (st->logits_piece > 0) {
		e->lp[1] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		e->lp[2] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
	}
	grads_of(e, 0, GM_STEP_HEAD, true);
	for (int k = 0; k < 3; k++)
		efree(e, &e->lp[k]);
	for (uint64_t l = e->L; l-- > 0;) {
		uint32_t *a = &e->a[(slot * e->L + l) * (size_t)st->n_act];
		transient(e);
		if (l == e->L - 1) {
			efree(e, &e->held);
			efree(e, &e->head_saved);
			cache_unref(e, e->L);
		}
		for (int k = 0; k < st->n_act; k++)
			efree(e, &a[k]);
		cache_unref(e, l);
		grads_of(e, l, GM_STEP_LAYER, false);
	}
	efree(e, &e->emb[slot]);
	grads_of(e, 0, GM_STEP_HEAD, false);
	grads_of(e, 0, GM_STEP_EMBED, false);
}

static void optimizer(struct em *e)
{
	const struct gm_step *st = e->st;
	size_t n = (size_t)(e->L + 1) * (size_t)e->np;
	uint32_t *tmp;

	if (!e->have_states) {
		for (size_t j = 0; j < n; j++) {
			const struct gm_step_param *p = &st->p[j % e->np];
			if ((j / e->np < e->L) != (p->where == GM_STEP_LAYER))
				continue;
			for (int k = 0; k < p->n_state; k++)
				e->s[j * GM_STEP_STATES + k] =
					ealloc(e, p->state[k], GM_SK_STATE);
		}
		e->have_states = true;
	}
	tmp = calloc(n, sizeof(*tmp));
	if (!tmp) {
		e->err = GM_ENOMEM;
		return;
	}
	for (size_t j = 0; j < n; j++) {
		const struct gm_step_param *p = &st->p[j % e->np];
		tmp[j] = NONE;
		if ((j / e->np < e->L) != (p->where == GM_STEP_LAYER))
			continue;
		if (st->opt_tmp_per_tensor) {
			uint32_t t3[3];
			for (int k = 0; k < 3; k++)
				t3[k] = ealloc(e, p->opt_tmp, GM_SK_OPT_TMP);
			for (int k = 0; k < 3; k++)
				efree(e, &t3[k]);
		} else {
			tmp[j] = ealloc(e, p->opt_tmp, GM_SK_OPT_TMP);
		}
	}
	for (size_t j = 0; j < n; j++)
		efree(e, &tmp[j]);
	free(tmp);
	for (size_t j = 0; j < n; j++) /* zero_grad(set_to_none=True) */
		efree(e, &e->g[j]);
}

/* One training step: micro-batches in 1F1B order, then the optimizer. */
static void train_step(struct em *e)
{
	const struct gm_step *st = e->st;
	uint64_t m = st->ga < st->micro_max ? st->ga : st->micro_max;
	uint64_t k = st->in_flight < m ? st->in_flight : m;
	uint64_t fwd = 0, bwd = 0;

	while (fwd < k)
		forward(e, fwd++ % k);
	while (bwd < m) {
		backward(e, bwd++ % k);
		if (fwd < m)
			forward(e, fwd++ % k);
	}
	optimizer(e);
}

static void infer_pass(struct em *e)
{
	const struct gm_step *st = e->st;
	uint32_t prev = e->held;

	for (uint64_t l = 0; l < e->L; l++) {
		uint32_t *kv = &e->a[2 * l];
		if (!e->cref[l])
			cache_ref(e, l, false);
		if (kv[0] == NONE && st->kv_layer > 0) {
			kv[0] = ealloc(e, st->kv_layer, GM_SK_KV);
			kv[1] = ealloc(e, st->kv_layer, GM_SK_KV);
		}
		transient(e);
	}
	if (!e->cref[e->L])
		cache_ref(e, e->L, true);
	e->held = ealloc(e, st->logits, GM_SK_LOGITS);
	efree(e, &prev);
}

static void em_free_all(struct em *e)
{
	size_t n = (size_t)(e->L + 1) * (size_t)e->np;

	for (size_t j = 0; j < e->na; j++)
		efree(e, &e->a[j]);
	for (uint64_t j = 0; j < e->st->in_flight; j++)
		efree(e, &e->emb[j]);
	efree(e, &e->held);
	efree(e, &e->head_saved);
	for (int k = 0; k < 3; k++)
		efree(e, &e->lp[k]);
	for (size_t j = 0; j < n; j++) {
		efree(e, &e->c[j]);
		efree(e, &e->g[j]);
		for (int k = 0; k < GM_STEP_STATES; k++)
			efree(e, &e->s[j * GM_STEP_STATES + k]);
	}
	for (size_t k = 0; k < e->ncomm; k++)
		efree(e, &e->comm[k]);
	efree(e, &e->ws);
	for (size_t j = 0; j < n; j++)
		efree(e, &e->w[j]);
}

static uint32_t *ids(size_t n)
{
	uint32_t *p = malloc((n ? n : 1) * sizeof(*p));

	for (size_t i = 0; p && i < n; i++)
		p[i] = NONE;
	return p;
}

int gm_step_emit(const struct gm_step *st, const struct gm_step_sink *sink)
{
	struct em e = {.st = st, .sk = sink, .L = st->layers, .np = st->n_param,
		       .head_saved = NONE, .held = NONE,
		       .lp = {NONE, NONE, NONE}, .ws = NONE};
	size_t n, na;
	int rc;

	if (!st->layers || !st->steps || !st->ga || !st->in_flight ||
	    !st->micro_max || st->n_param < 0 || st->n_param > GM_PARAMS_MAX ||
	    st->n_act < 0 || st->n_act > GM_ACT_MAX || st->n_comm < 0 ||
	    st->n_comm > 3)
		return GM_EINVAL;
	n = (size_t)(e.L + 1) * (size_t)e.np;
	/* training: saved tensors per micro-batch in flight; inference: K
	 * and V of each block */
	na = st->training ? (size_t)st->in_flight * e.L * (size_t)st->n_act
			  : 2 * (size_t)e.L;
	for (int k = 0; k < st->n_comm; k++)
		e.ncomm += st->comm[k].count;
	e.w = ids(n);
	e.g = ids(n);
	e.c = ids(n);
	e.s = ids(n * GM_STEP_STATES);
	e.na = na;
	e.a = ids(na);
	e.emb = ids(st->in_flight);
	e.cref = calloc(e.L + 1, sizeof(*e.cref));
	e.comm = ids(e.ncomm);
	if (!e.w || !e.g || !e.c || !e.s || !e.a || !e.emb || !e.cref ||
	    !e.comm) {
		rc = GM_ENOMEM;
		goto out;
	}
	for (int i = 0; i < e.np; i++) /* embeddings first, head last */
		if (st->p[i].where == GM_STEP_EMBED)
			e.w[pix(&e, e.L, i)] = ealloc(&e, st->p[i].weight,
						      GM_SK_WEIGHT);
	for (uint64_t l = 0; l < e.L; l++)
		for (int i = 0; i < e.np; i++)
			if (st->p[i].where == GM_STEP_LAYER)
				e.w[pix(&e, l, i)] = ealloc(
					&e, st->p[i].weight, GM_SK_WEIGHT);
	for (int i = 0; i < e.np; i++)
		if (st->p[i].where == GM_STEP_HEAD)
			e.w[pix(&e, e.L, i)] = ealloc(&e, st->p[i].weight,
						      GM_SK_WEIGHT);
	e.ws = ealloc(&e, st->workspace, GM_SK_WORKSPACE);
	for (int k = 0, j = 0; k < st->n_comm; k++)
		for (uint64_t i = 0; i < st->comm[k].count; i++)
			e.comm[j++] = ealloc(&e, st->comm[k].bytes,
					     GM_SK_COMM);
	for (unsigned s = 1; s <= st->steps && !e.err; s++) {
		if (sink->step)
			sink->step(sink->ctx, s);
		if (st->training)
			train_step(&e);
		else
			infer_pass(&e);
	}
	rc = e.err;
	em_free_all(&e);
	if (!rc)
		rc = e.err;
out:
	free(e.w);
	free(e.g);
	free(e.c);
	free(e.s);
	free(e.a);
	free(e.emb);
	free(e.cref);
	free(e.comm);
	free(e.freelist);
	return rc;
}

/* The replay sink: ids to pool addresses, peaks tracked per step. */
struct rp {
	struct gm_pool *pool;
	uint64_t *addr, *req;
	uint32_t cap;
	unsigned step;
	double live, live_alloc;
	uint64_t nlive;
	struct gm_step_result *r;
	const struct gm_step_observer *obs;
};

static int rp_alloc(void *ctx, uint32_t id, uint64_t bytes,
		    enum gm_step_kind kind)
{
	struct rp *p = ctx;
	uint64_t a, res;
	int rc;

	(void)kind;
	if (id >= p->cap) {
		uint32_t n = p->cap ? 2 * p->cap : 1024;
		uint64_t *x, *y;
		while (n <= id)
			n *= 2;
		x = realloc(p->addr, n * sizeof(*x));
		if (!x)
			return GM_ENOMEM;
		p->addr = x;
		y = realloc(p->req, n * sizeof(*y));
		if (!y)
			return GM_ENOMEM;
		p->req = y;
		p->cap = n;
	}
	rc = gm_pool_alloc(p->pool, bytes, 0, &a);
	if (rc)
		return rc;
	if (p->obs) {
		rc = p->obs->event(p->obs->ctx, true, a, bytes);
		if (rc)
			return rc;
	}
	p->addr[id] = a;
	p->req[id] = bytes;
	p->live += (double)bytes;
	p->live_alloc += (double)gm_pool_round_size(p->pool, bytes);
	p->nlive++;
	p->r->allocations++;
	if (p->live > p->r->peak_requested) {
		p->r->peak_requested = p->live;
		p->r->live_at_peak = p->nlive;
	}
	if (p->live_alloc > p->r->peak_allocated)
		p->r->peak_allocated = p->live_alloc;
	res = gm_pool_reserved(p->pool);
	if ((double)res > p->r->peak_reserved) {
		p->r->peak_reserved = (double)res;
		p->r->peak_reserved_step = p->step;
	}
	return 0;
}

static int rp_free(void *ctx, uint32_t id)
{
	struct rp *p = ctx;
	int rc;

	if (p->obs) {
		rc = p->obs->event(p->obs->ctx, false, p->addr[id],
				   p->req[id]);
		if (rc)
			return rc;
	}
	p->live -= (double)p->req[id];
	p->live_alloc -= (double)gm_pool_round_size(p->pool, p->req[id]);
	p->nlive--;
	return gm_pool_free(p->pool, p->addr[id]);
}

static void rp_step(void *ctx, unsigned step)
{
	((struct rp *)ctx)->step = step;
}

static int replay_once(const struct gm_step *st, uint64_t total,
		       struct gm_step_result *out,
		       const struct gm_step_observer *obs)
{
	struct gm_sim_options so = {.total_bytes = total};
	struct gm_backend *be = NULL;
	struct rp p = {.r = out, .obs = obs};
	struct gm_step_sink sk = {&p, rp_alloc, rp_free, rp_step};
	int rc;

	memset(out, 0, sizeof(*out));
	if (obs && obs->begin) {
		rc = obs->begin(obs->ctx);
		if (rc)
			return rc;
	}
	rc = gm_sim_backend_create(&be, &so);
	if (rc)
		return rc;
	rc = gm_pool_create(&p.pool, be, NULL, NULL);
	if (rc)
		goto out;
	rc = gm_step_emit(st, &sk);
	gm_pool_destroy(p.pool);
out:
	be->ops->destroy(be);
	free(p.addr);
	free(p.req);
	return rc;
}

/* A card no step reaches: 1 PiB. */
#define UNLIMITED ((uint64_t)1 << 50)

int gm_step_replay_observed(const struct gm_step *st,
			    uint64_t capacity_bytes,
			    struct gm_step_result *out,
			    const struct gm_step_observer *obs)
{
	int rc = replay_once(st, capacity_bytes ? capacity_bytes : UNLIMITED,
			     out, obs);

	if (rc != GM_EDEVNOMEM && rc != GM_ELIMIT)
		return rc;
	rc = replay_once(st, UNLIMITED, out, obs);
	out->unlimited = true;
	return rc;
}

int gm_step_replay(const struct gm_step *st, uint64_t capacity_bytes,
		   struct gm_step_result *out)
{
	return gm_step_replay_observed(st, capacity_bytes, out, NULL);
}
