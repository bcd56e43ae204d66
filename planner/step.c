/*
 * step.c - the allocation sequence of a modelled step and its replay
 * through the allocator core (step.h).
 *
 * Order of a training step, as PyTorch eager with transformers issues it
 * (each choice names its source; where the order follows a
 * simplification of the memory model (model.h), it says so, so that the
 * replay's peak of live bytes is the model's peak_allocated):
 *  - before the first step: weights, tensor by tensor in module order
 *    (nn.Module construction), the data-parallel buffers (DDP
 *    allocates its buckets at construction); the cuBLAS workspace
 *    comes with the first matmul, in the first forward (first_matmul());
 *  - forward of each block: the autocast copies of its matmul weights
 *    (torch.autocast's cache, cache_enabled; shared by the micro-batches
 *    in flight: one autocast region per step; under full checkpointing
 *    freed at the forward's end and cast again by the recompute,
 *    ckpt_drops_cache()), then its program
 *    (gm_step.blk, planner/block.c: every op's output with its exact
 *    size, freed where Python drops it unless autograd saved it; full
 *    checkpointing frees the saved ones too and keeps the block input;
 *    selective those of the attention function); the first block's
 *    input is the embedding output; eager attention's mask lives over
 *    the blocks. Without a program (the paper's block, sequence
 *    parallelism): its saved tensors in order, then its largest
 *    transient, allocated and freed at once;
 *  - the loss: with a loss program (gm_step.loss, model.c's
 *    loss_program(): each logits-sized tensor as the H200 traces show
 *    it, allocated and freed in PyTorch's order) its forward part, and
 *    its backward part before the head's weight gradient; else the
 *    older aggregate: the logits in the compute dtype, the fp32 copy,
 *    log_softmax's output; the copy is freed; in backward nll_loss's and
 *    log_softmax's fp32 gradients, then the head's weight gradient; the
 *    three fp32 tensors are freed;
 *  - backward of each block, last first: with a program, the final
 *    norm's gradient enters the last block, full checkpointing re-runs
 *    the forward up to its last saved tensor (non-reentrant checkpoint
 *    stops there), then the program's backward (the gradients autograd
 *    allocates node by node, selective checkpointing's recompute of the
 *    attention function where its backward begins) hands the input's
 *    gradient to the block before; without one, its transient (for
 *    checkpointing, the recomputed forward is part of it); then its saved
 *    tensors and autocast copies are freed and its gradients allocated
 *    (with zero_grad(set_to_none=True) they do not exist before the first
 *    backward of a step; later micro-batches accumulate in place) but
 *    those the program made at their weight's node (GM_BOP_PGRAD,
 *    pgrad_op(): there, as AccumulateGrad keeps the first gradient; a
 *    later micro-batch's product is allocated there and freed once
 *    added). The
 *    returned logits, the head's saved inputs and its autocast copies
 *    stay alive through the last block's backward (the model's
 *    "one block's transient + held logits"); then the embedding's saved
 *    tensors are freed and the embedding's and the head's small
 *    gradients allocated;
 *  - what the training loop keeps (planner/loop.c): the blocks'
 *    past_key_values copies (HOLD ops) and, with keep_outputs, the
 *    logits outlive the program; at each forward's end (after the loss's
 *    forward part) the loop lets the last forward's go (this one's
 *    without keep_outputs), then Lightning's zero_grad frees the last
 *    step's gradients (grads_to_next_forward; see "The training loop");
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
 * An inference pass (struct gm_step_infer): the weights and workspace,
 * then the tensors of one Hugging Face forward (or of generate(): a
 * prefill and generate - 1 decode forwards) op by op, each with its
 * exact size; see "Inference" below for the sources.
 */
#include "step.h"

#include "arch/family.h"
#include "backend.h"
#include "step_emit.h"
#include "step_ds.h"
#include "step_megatron.h"
#include "error.h"
#include "optstep.h"
#include "pool.h"
#include "sim.h"
#include "units.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NONE UINT32_MAX

const char *gm_step_kind_name(enum gm_step_kind k)
{
	static const char *const n[GM_SK_N] = {
		"weight", "workspace", "comm", "state", "grad", "act",
		"cache", "transient", "logits", "opt_tmp", "kv", "gather",
		"reduce", "reduce_comm", "reduce_tmp"};

	return (unsigned)k < GM_SK_N ? n[k] : "?";
}

unsigned gm_step_kind_stream(enum gm_step_kind k)
{
	return k == GM_SK_GATHER ? 1 :
	       k == GM_SK_REDUCE || k == GM_SK_RCOMM || k == GM_SK_RTMP ? 2 :
	       0;
}

const char *gm_step_phase_name(enum gm_step_phase p)
{
	static const char *const n[GM_SP_N] = {
		"setup", "forward", "loss", "backward", "optimizer",
		"inference", "teardown"};

	return (unsigned)p < GM_SP_N ? n[p] : "?";
}

static void phase(const struct gm_step_sink *sk, enum gm_step_phase ph)
{
	if (sk->phase)
		sk->phase(sk->ctx, ph);
}

/* The emitter: slots for ids and the ids of what is live. */
struct gm_em {
	const struct gm_step *st;
	const struct gm_step_sink *sk;
	uint32_t *freelist;
	uint32_t nfree, cap, next;
	int err;
	uint64_t L;
	int np;
	uint32_t *w, *g, *s, *c;  /* (L + 1) x np; s: x GM_STEP_STATES */
	uint32_t *bc;             /* (L + 1) x np: biases' autocast copies */
	uint32_t *a;              /* in_flight x L x n_act (inference:
				   * L x K, V) */
	size_t na;
	uint32_t *emb;            /* in_flight */
	uint32_t *embn;           /* in_flight: the embedding output the
				   * model's forward keeps a name for */
	uint32_t embsum;          /* GPT-2's embedding sum (transient) */
	uint32_t *embp;           /* in_flight: GPT-2's position_embeds */
	uint32_t *cref;           /* (L + 1) autocast references */
	uint64_t wl;              /* the block whose WCASTs are served */
	bool wlin;                /* ... at their linears (cache_block) */
	unsigned char claim[2][GM_PARAMS_MAX]; /* its weights and biases
				  * cast in this forward or recompute */
	uint32_t head_saved, held, lp[3], ws;
	uint32_t ws_bwd;        /* the autograd thread's cuBLAS workspace */
	uint32_t hw16[2];       /* the head's 16-bit weight gradients */
	uint32_t loss[GM_STEP_LOSS_IDS];
	uint32_t *bid;            /* block programs: in_flight x L x n_ids */
	uint32_t *hid;            /* the head program: in_flight x n_ids */
	size_t nhid;
	uint32_t rec[GM_STEP_BLOCK_IDS]; /* recomputed copies */
	unsigned char reckind[GM_STEP_BLOCK_IDS];
	struct gm_step_param pz[GM_PARAMS_MAX]; /* each parameter as a
				  * block outside its span holds it: none */
	unsigned char pclaim[GM_PARAMS_MAX]; /* block parameters whose
				  * gradient this block's backward made */
	uint32_t gcarry;          /* the gradient flowing to the block
				   * before */
	size_t nbid;
	uint32_t *comm;          /* every data-parallel buffer */
	size_t ncomm;
	uint32_t *bk;            /* DDP: its buckets ((L + 1) x np) */
	size_t nbk;
	uint32_t *up, *ug;       /* FSDP: unsharded parameters and their
				  * gradients ((L + 1) x np) */
	bool *gathered;          /* FSDP: unit unsharded (L + 1) */
	unsigned char *own;      /* ZeRO-1: this rank's tensors ((L + 1) x
				  * np) */
	uint32_t ag, rsin;       /* FSDP: the last all-gather output and
				  * reduce-scatter input */
	bool have_states;
	/* the training loop (step.c, "The training loop") */
	unsigned char *hold;     /* per slot id: HOLD_LOOP | HOLD_PROG */
	uint32_t nhold;
	uint32_t *kcur, *kprev;  /* kept by this forward's outputs, by the
				  * previous one's (keep_outputs) */
	size_t ncur, nprev, kcap;
	uint32_t *gdef;          /* gradients zero_grad frees after the
				  * next forward ((L + 1) x np) */
	struct gm_ds_em *ds;     /* DeepSpeed's engine (step_ds.c) */
};

static int slot_cmp_desc(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

void gm_step_ids_order(uint32_t *free_ids, uint32_t n)
{
	qsort(free_ids, n, sizeof(*free_ids), slot_cmp_desc);
}

static uint32_t slot_get(struct gm_em *e)
{
	if (e->nfree)
		return e->freelist[--e->nfree];
	return e->next++;
}

static uint32_t ealloc(struct gm_em *e, double bytes, enum gm_step_kind k)
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

/* efree() of a live id. */
static __attribute__((noinline)) void efree_live(struct gm_em *e,
						 uint32_t *id)
{
	int rc;

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

/* Free *id (nothing for NONE) and set it to NONE. Inline: most calls
 * find NONE (a program's ids that were never made or already freed). */
static inline void efree(struct gm_em *e, uint32_t *id)
{
	if (*id != NONE)
		efree_live(e, id);
}

/* Index of parameter i in block l (non-layer tensors: row L). */
static size_t pix(const struct gm_em *e, uint64_t l, int i)
{
	return (size_t)l * (size_t)e->np + (size_t)i;
}

/* Parameter i as block l holds it (l == L: the embeddings and head):
 * its own sizes, or none outside its span (step.h). */
static inline const struct gm_step_param *par(const struct gm_em *e,
					      uint64_t l, int i)
{
	const struct gm_step_param *p = &e->st->p[i];

	if (p->span == GM_STEP_SPAN_ALL || l >= e->L)
		return p;
	return (l < e->st->span_split) == (p->span == GM_STEP_SPAN_LOW) ?
	       p : &e->pz[i];
}

/* par() of slot j of a (L + 1) x np array. */
static const struct gm_step_param *pslot(const struct gm_em *e, size_t j)
{
	return par(e, j / (size_t)e->np, (int)(j % (size_t)e->np));
}

const struct gm_step_param *gm_em_param(const struct gm_em *e, uint64_t row,
					int i)
{
	return par(e, row, i);
}

static uint64_t row_of(const struct gm_em *e, int i, uint64_t l)
{
	return e->st->p[i].where == GM_STEP_LAYER ? l : e->L;
}

/* Autocast copies of a group (block l, or the head for l == L). */
static void cache_ref(struct gm_em *e, uint64_t l, bool head)
{
	if (e->cref[l]++)
		return;
	for (int i = 0; i < e->np; i++) {
		const struct gm_step_param *p = par(e, l, i);
		if ((l < e->L) != (p->where == GM_STEP_LAYER) ||
		    (head && p->where != GM_STEP_HEAD))
			continue;
		e->c[pix(e, l, i)] = ealloc(e, p->cache, GM_SK_CACHE);
		if (e->bc[pix(e, l, i)] == NONE)
			e->bc[pix(e, l, i)] = ealloc(e, p->bcache,
						     GM_SK_CACHE);
	}
}

/* Free the biases' autocast copies of row l (the autocast context that
 * cached them exits). */
static void bias_copies_free(struct gm_em *e, uint64_t l)
{
	for (int i = 0; i < e->np; i++)
		efree(e, &e->bc[pix(e, l, i)]);
}

static void cache_unref(struct gm_em *e, uint64_t l)
{
	if (!e->cref[l] || --e->cref[l])
		return;
	for (int i = 0; i < e->np; i++)
		efree(e, &e->c[pix(e, l, i)]);
}

/* The autocast copies a block program names (step.h): a weight's
 * (GM_BOP_WCAST, gm_step_param.cache, ids e->c) or a bias's (GM_BOP_BCAST,
 * bcache, e->bc); claims: those cast in this forward or recompute. */
enum cast_of { CAST_WEIGHT, CAST_BIAS, CAST_N };

static double cast_bytes(const struct gm_step_param *p, enum cast_of k)
{
	return k == CAST_BIAS ? p->bcache : p->cache;
}

static uint32_t *cast_id(struct gm_em *e, enum cast_of k, uint64_t l, int i)
{
	return &(k == CAST_BIAS ? e->bc : e->c)[pix(e, l, i)];
}

/* The layer parameter of block l a cast of kind k and n elements makes
 * the copy of: the first with a copy of that size not cast yet (claim:
 * mark it); -1 when none. */
static int cast_param(struct gm_em *e, enum cast_of k, uint64_t l, double n,
		      bool claim)
{
	for (int i = 0; i < e->np && i < GM_PARAMS_MAX; i++) {
		const struct gm_step_param *p = par(e, l, i);
		if (p->where != GM_STEP_LAYER || cast_bytes(p, k) <= 0 ||
		    e->claim[k][i] || fabs(p->elems - n) >= 0.5)
			continue;
		if (claim)
			e->claim[k][i] = 1;
		return i;
	}
	return -1;
}

/* The kind of cast op o (CAST_N: not a cast). */
static enum cast_of cast_kind(const struct gm_step_blockop *o)
{
	return o->op == GM_BOP_WCAST ? CAST_WEIGHT :
	       o->op == GM_BOP_BCAST ? CAST_BIAS : CAST_N;
}

/* Whether program p's casts name every autocast copy of block l. */
static bool wcast_covers(struct gm_em *e, const struct gm_step_block *p,
			 uint64_t l)
{
	bool all = true;

	memset(e->claim, 0, sizeof(e->claim));
	for (int i = 0; i < p->n_fwd; i++) {
		enum cast_of k = cast_kind(&p->op[i]);
		if (k != CAST_N)
			(void)cast_param(e, k, l, p->op[i].bytes, true);
	}
	for (int i = 0; i < e->np && i < GM_PARAMS_MAX; i++) {
		const struct gm_step_param *q = par(e, l, i);
		for (int k = 0; k < CAST_N && q->where == GM_STEP_LAYER; k++)
			if (cast_bytes(q, (enum cast_of)k) > 0 &&
			    !e->claim[k][i])
				all = false;
	}
	memset(e->claim, 0, sizeof(e->claim));
	return all;
}

/* The autocast copies of block l (program p) for a forward or its
 * recompute: taken (cache_ref) and made at their linears (WCAST) where
 * the program names them all, else all made now. */
static void cache_block(struct gm_em *e, uint64_t l,
			const struct gm_step_block *p)
{
	e->wl = l;
	e->wlin = p->n > 0 && wcast_covers(e, p, l);
	if (!e->wlin) {
		cache_ref(e, l, false);
		return;
	}
	e->cref[l]++;
}

/* A cast op o (cache_block's block): its copy made. */
static void cast_op(struct gm_em *e, const struct gm_step_blockop *o)
{
	enum cast_of k = cast_kind(o);
	uint32_t *id;
	int i;

	if (!e->wlin || k == CAST_N ||
	    (i = cast_param(e, k, e->wl, o->bytes, true)) < 0)
		return;
	id = cast_id(e, k, e->wl, i);
	if (*id == NONE)
		*id = ealloc(e, cast_bytes(par(e, e->wl, i), k), GM_SK_CACHE);
}

/* An unsharded FSDP parameter's bytes per byte of its shard's element
 * (gm_step.fsdp_unshard). */
static double unshard_scale(const struct gm_em *e)
{
	return e->st->fsdp_unshard > 0 ? e->st->fsdp_unshard : 1;
}

static void grads_of(struct gm_em *e, uint64_t l, enum gm_step_where wh,
		     bool at_loss)
{
	bool fsdp = e->st->fsdp;

	for (int i = 0; i < e->np; i++) {
		const struct gm_step_param *p = par(e, row_of(e, i, l), i);
		/* FSDP: autograd's gradients of the unsharded parameters */
		uint32_t *id = &(fsdp ? e->ug : e->g)[pix(e, row_of(e, i, l),
							  i)];
		if (p->where != wh || p->grad_at_loss != at_loss ||
		    p->grad_shared || *id != NONE)
			continue;
		*id = ealloc(e, fsdp ? p->grad * e->st->fsdp_d *
					       unshard_scale(e) : p->grad,
			     GM_SK_GRAD);
	}
}

/* GM_BOP_PGRAD of block l: the gradient of n elements that a weight's
 * backward makes (step.h): the first unclaimed layer parameter of that
 * size gets its gradient allocated, or, holding one already (a later
 * micro-batch), the product goes to *B for the program to free. */
static void pgrad_op(struct gm_em *e, uint64_t l, double n, uint32_t *B)
{
	bool fsdp = e->st->fsdp;

	for (int i = 0; i < e->np && i < GM_PARAMS_MAX; i++) {
		const struct gm_step_param *p = par(e, l, i);
		uint32_t *id = &(fsdp ? e->ug : e->g)[pix(e, l, i)];
		double bytes = fsdp ? p->grad * e->st->fsdp_d *
				      unshard_scale(e) : p->grad;
		if (p->where != GM_STEP_LAYER || p->grad_at_loss ||
		    p->grad_shared || p->added || e->pclaim[i] ||
		    p->grad <= 0 || fabs(p->elems - n) >= 0.5)
			continue;
		e->pclaim[i] = 1;
		if (*id == NONE)
			*id = ealloc(e, bytes, GM_SK_GRAD);
		else
			*B = ealloc(e, bytes, GM_SK_TRANSIENT);
		return;
	}
}

/*
 * FSDP2 (gm_step.fsdp), as torch 2.11's torch/distributed/fsdp/
 * _fully_shard does it (_fsdp_param_group.py unshard / reshard /
 * post_backward, _fsdp_collectives.py foreach_all_gather /
 * foreach_reduce) and the 2x H200 traces show it
 * (tests/data/calibration/traces/multi/llama-*-fsdp2.*): a unit is a
 * block, or the root (embedding, final norm, head). unshard: the
 * all-gather output, one flat buffer of the unit's full parameters on
 * the all-gather stream, then each unsharded parameter on the default
 * stream (init_all_gather_outputs / alloc_storage); in forward the flat
 * buffer is freed once copied out, in backward when the next all-gather
 * replaces it. reshard_after_forward frees a block's unsharded
 * parameters after its forward (gm_step.fsdp_keep, False: they stay
 * until its post-backward); the root stays unsharded until its
 * post-backward. Backward prefetches the next block (the one before in
 * the model) in each block's pre-backward. post_backward: reshard, the
 * reduce-scatter input (the unit's full gradients flattened, replacing
 * the previous one), the unsharded gradients freed, the reduce-scatter
 * output on the reduce-scatter stream: the unit's sharded gradients,
 * alive until zero_grad (with accumulation a later output is added to
 * them and freed). Model construction allocates the full weights; each
 * fully_shard allocates its unit's shards and frees the full ones.
 * Under MixedPrecisionPolicy(param_dtype=16-bit, reduce_dtype=fp32)
 * (_fsdp_api.py) the all-gather output, the unsharded parameters and
 * their gradients are 16-bit (gm_step.fsdp_unshard) and the
 * reduce-scatter input fp32 (foreach_reduce: reduce_dtype).
 */

/* Whether parameter i belongs to unit u (u == L: the root). */
static bool in_unit(const struct gm_em *e, uint64_t u, int i)
{
	return (u < e->L) == (e->st->p[i].where == GM_STEP_LAYER) &&
	       par(e, u, i) == &e->st->p[i];
}

/* Unit u's full parameters (grads false) or gradients, bytes. */
static double unit_bytes(const struct gm_em *e, uint64_t u, bool grads)
{
	double b = 0;

	for (int i = 0; i < e->np; i++) {
		const struct gm_step_param *p = par(e, u, i);
		if (!in_unit(e, u, i))
			continue;
		b += grads ? (p->grad_shared ? 0 : p->grad) : p->weight;
	}
	return b * e->st->fsdp_d;
}

static void fsdp_unshard(struct gm_em *e, uint64_t u)
{
	if (!e->st->fsdp || e->gathered[u])
		return;
	efree(e, &e->ag);
	e->ag = ealloc(e, unit_bytes(e, u, false) * unshard_scale(e),
		       GM_SK_GATHER);
	for (int i = 0; i < e->np; i++)
		if (in_unit(e, u, i))
			e->up[pix(e, u, i)] = ealloc(e, par(e, u, i)->weight *
						     e->st->fsdp_d *
						     unshard_scale(e),
						     GM_SK_WEIGHT);
	e->gathered[u] = true;
}

static void fsdp_reshard(struct gm_em *e, uint64_t u)
{
	if (e->st->ds.on) {
		gm_ds_release_fwd(e, u);
		return;
	}
	if (!e->st->fsdp)
		return;
	for (int i = 0; i < e->np; i++)
		if (in_unit(e, u, i))
			efree(e, &e->up[pix(e, u, i)]);
	e->gathered[u] = false;
}

/* Forward of unit u: unshard; the flat buffer is copied out. */
static void fsdp_forward(struct gm_em *e, uint64_t u)
{
	if (e->st->ds.on)
		gm_ds_fetch(e, u);
	if (!e->st->fsdp)
		return;
	fsdp_unshard(e, u);
	efree(e, &e->ag);
}

/* Pre-backward of block l: unshard it, prefetch block l - 1. */
static void fsdp_pre_backward(struct gm_em *e, uint64_t l)
{
	if (e->st->ds.on) {
		gm_ds_fetch_bwd(e, l);
		return;
	}
	fsdp_unshard(e, l);
	if (l > 0)
		fsdp_unshard(e, l - 1);
}

static void fsdp_post_backward(struct gm_em *e, uint64_t u)
{
	uint32_t *g = NULL, id;
	double full;

	if (e->st->ds.on) {
		gm_ds_post_backward(e, u);
		return;
	}
	if (!e->st->fsdp)
		return;
	fsdp_reshard(e, u);
	full = unit_bytes(e, u, true);
	efree(e, &e->rsin);
	e->rsin = ealloc(e, full, GM_SK_COMM);
	for (int i = 0; i < e->np; i++)
		if (in_unit(e, u, i)) {
			efree(e, &e->ug[pix(e, u < e->L ? u : e->L, i)]);
			if (!g)
				g = &e->g[pix(e, u, i)];
		}
	id = ealloc(e, full / e->st->fsdp_d, GM_SK_REDUCE);
	if (g && *g == NONE)
		*g = id;
	else
		efree(e, &id);
	if (u == e->L) { /* the root's is the last: the queue drains */
		efree(e, &e->ag);
		efree(e, &e->rsin);
	}
}

/* The bytes of parameter p as the model was built (step.h). */
static double built_bytes(const struct gm_step_param *p)
{
	return p->built > 0 ? p->built : p->weight;
}

/* The bytes of p as the model is built under st: none under
 * DeepSpeed's zero.Init, which builds each parameter partitioned
 * (step_ds.c). */
static double built_of(const struct gm_step *st, const struct gm_step_param *p)
{
	return st->ds.on && st->ds.zero_init ? 0 : built_bytes(p);
}

/*
 * Model construction, then the parallel wrappers: unit by unit (each
 * block, then the rest: fully_shard per block then on the root;
 * parallelize_module per block), the unit's shards are allocated and
 * the tensors as built freed (the 2x H200 traces: _init_sharded_param,
 * distribute_tensor).
 */
static void shard_setup(struct gm_em *e)
{
	uint32_t sh[GM_PARAMS_MAX];

	for (uint64_t u = 0; u <= e->L; u++) {
		for (int i = 0; i < e->np; i++)
			sh[i] = in_unit(e, u, i) && par(e, u, i)->built > 0 ?
				ealloc(e, par(e, u, i)->weight, GM_SK_WEIGHT) :
				NONE;
		for (int i = 0; i < e->np; i++)
			if (sh[i] != NONE) {
				efree(e, &e->w[pix(e, u, i)]);
				e->w[pix(e, u, i)] = sh[i];
			}
	}
}

static void transient(struct gm_em *e)
{
	uint32_t t = ealloc(e, e->st->trans, GM_SK_TRANSIENT);

	efree(e, &t);
}

/*
 * The training loop (gm_step.keep_outputs, kv_cache,
 * grads_to_next_forward; the rules and their sources: planner/loop.c).
 * A tensor the DynamicCache or `outputs` references is held: hold[id]
 * says who still does, HOLD_LOOP (the loop's kept set) and HOLD_PROG
 * (the block program, which saved it or still names it); it is freed
 * when both have let it go. The kept set of a forward is released when
 * that forward returns (the loss alone leaves it), or with keep_outputs
 * when the next forward has returned (`outputs = model(**batch)` rebinds
 * the name only then).
 */
enum { HOLD_LOOP = 1, HOLD_PROG = 2 };

static bool hold_room(struct gm_em *e, uint32_t id)
{
	uint32_t n;
	unsigned char *h;

	if (id < e->nhold)
		return true;
	n = e->nhold ? e->nhold : 1024;
	while (n <= id)
		n *= 2;
	h = realloc(e->hold, n);
	if (!h) {
		e->err = GM_ENOMEM;
		return false;
	}
	memset(h + e->nhold, 0, n - e->nhold);
	e->hold = h;
	e->nhold = n;
	return true;
}

/* This forward's outputs take a reference to id; prog: the program
 * keeps its own too. */
static void loop_hold(struct gm_em *e, uint32_t id, bool prog)
{
	if (id == NONE || !hold_room(e, id))
		return;
	if (e->ncur == e->kcap) {
		e->err = GM_EINVAL;
		return;
	}
	e->hold[id] = HOLD_LOOP | (prog ? HOLD_PROG : 0);
	e->kcur[e->ncur++] = id;
}

/* The program lets *id go: freed unless the loop still holds it. */
static void prog_free(struct gm_em *e, uint32_t *id)
{
	if (*id != NONE && *id < e->nhold && e->hold[*id]) {
		if (e->hold[*id] & HOLD_LOOP) {
			e->hold[*id] &= (unsigned char)~HOLD_PROG;
			*id = NONE;
			return;
		}
		e->hold[*id] = 0;
	}
	efree(e, id);
}

/* The loop lets the n ids of set go (freed unless a program still
 * holds one). */
static void loop_release(struct gm_em *e, uint32_t *set, size_t *n)
{
	for (size_t k = 0; k < *n; k++) {
		uint32_t id = set[k];
		if (id >= e->nhold)
			continue;
		if (e->hold[id] & HOLD_PROG) {
			e->hold[id] = HOLD_PROG;
			continue;
		}
		e->hold[id] = 0;
		efree(e, &id);
	}
	*n = 0;
}

/* The model's forward has returned: the outputs of the one before go
 * (keep_outputs), else this one's (only the loss is kept); then
 * Lightning's zero_grad frees the last step's gradients. */
/* Whether the blocks' autocast copies live only inside their forward
 * and their recompute: full checkpointing with a block program. Under
 * torch.utils.checkpoint the forward saves none of a block's casts, so
 * the cache alone holds them, and torch.autocast's __exit__ drops the
 * cache (torch.clear_autocast_cache()) when the outermost region ends
 * (torch 2.11 torch/amp/autocast_mode.py): at the forward's end, the
 * loss included (every loop of tools/measure/measure_loops.py enters
 * autocast around model(**batch) only, accelerate's prepared forward
 * the same). The recompute enters autocast again (torch 2.11
 * torch/utils/checkpoint.py, its recompute_fn under the forward's
 * saved autocast state) and casts the block's weights anew; the
 * recomputed graph saves those copies to the block's backward's end.
 * The H200 trace of trainer-llama-1.1b-bf16mixed-fullckpt
 * (tests/data/calibration/traces/pending-loops/) shows both: no 22 MiB
 * MLP weight copy live when the backward begins (the head's 125 MiB
 * one is, saved by its linear), and twice the forward's 22 MiB
 * allocations in each backward (132 against 66: the recompute's casts
 * and the copies' gradients). lm_head is not checkpointed: its copy is
 * saved by the graph and kept as before. */
static bool ckpt_drops_cache(const struct gm_em *e)
{
	return e->st->blk.n > 0 && e->st->blk.ckpt == GM_STEP_CKPT_FULL;
}

static void loop_forward_end(struct gm_em *e)
{
	size_t n = (size_t)(e->L + 1) * (size_t)e->np;

	/* the forward's autocast context exits: its cache goes */
	for (uint64_t l = 0; l <= e->L; l++)
		bias_copies_free(e, l);
	for (uint64_t l = 0; ckpt_drops_cache(e) && l < e->L; l++)
		cache_unref(e, l);

	if (e->st->keep_outputs) {
		uint32_t *t = e->kprev;
		loop_release(e, e->kprev, &e->nprev);
		e->kprev = e->kcur;
		e->nprev = e->ncur;
		e->kcur = t;
		e->ncur = 0;
	} else {
		loop_release(e, e->kcur, &e->ncur);
	}
	for (size_t j = 0; e->gdef && j < n; j++)
		efree(e, &e->gdef[j]);
}

/* A block whose program does not take them (kv_block > 0; no program,
 * or none written for the cache): the K and V its DynamicCache layer
 * holds, kv_block bytes each. Under autocast they are copies (torch.cat
 * promotes to the keys' dtype, sdpa saves its own casts), allocated in
 * the forward (fwd); else they are the very K and V sdpa saved, which
 * the analytic block frees in its backward: kept outputs keep them past
 * it (allocated there again, into the forward's kept set, to hold the
 * same live bytes). */
static void loop_kv_analytic(struct gm_em *e, bool fwd)
{
	const struct gm_step *st = e->st;
	uint32_t *set = fwd ? e->kcur : e->kprev;
	size_t *n = fwd ? &e->ncur : &e->nprev;

	if (!st->kv_cache || !(st->kv_block > 0) || st->kv_copies != fwd ||
	    (!fwd && !st->keep_outputs))
		return;
	for (int k = 0; k < 2; k++) {
		uint32_t id = ealloc(e, st->kv_block, GM_SK_KV);
		if (id == NONE || !hold_room(e, id))
			continue;
		if (*n == e->kcap) {
			e->err = GM_EINVAL;
			return;
		}
		e->hold[id] = HOLD_LOOP;
		set[(*n)++] = id;
	}
}

/* Run loss ops [from, to) of the program (step.h). */
static void loss_ops(struct gm_em *e, int from, int to)
{
	for (int i = from; i < to; i++) {
		const struct gm_step_lossop *o = &e->st->loss[i];
		if (o->alloc) {
			efree(e, &e->loss[o->id]);
			e->loss[o->id] = ealloc(e, o->bytes, GM_SK_LOGITS);
		} else if (o->id == 0 && e->st->keep_outputs &&
			   i < e->st->n_loss_fwd) {
			/* the logits: outputs.logits keeps them */
			loop_hold(e, e->loss[0], false);
			e->loss[0] = NONE;
		} else {
			efree(e, &e->loss[o->id]);
		}
	}
}


/* Block program (gm_step.blk): the ids of micro-batch slot, block l. */
static uint32_t *blk_ids(struct gm_em *e, uint64_t slot, uint64_t l)
{
	return &e->bid[(slot * e->L + l) * (size_t)e->st->blk.n_ids];
}

/* The forward ops of program p on the ids B. With named (not NULL),
 * the input has a name outside the program: where the program frees it
 * it moves to *named instead, for the caller to free. */
static void prog_forward_ops(struct gm_em *e, const struct gm_step_block *p,
			     uint32_t *B, uint32_t *named, int from, int to)
{
	for (int i = from; i < to && !e->err; i++) {
		const struct gm_step_blockop *o = &p->op[i];
		switch (o->op) {
		case GM_BOP_ALLOC:
			B[o->id] = ealloc(e, o->bytes, o->kind);
			break;
		case GM_BOP_DROP:
			if (o->id == GM_BLK_IN && p->ckpt == GM_STEP_CKPT_FULL)
				break;
			if (p->ckpt == GM_STEP_CKPT_FULL ||
			    (p->ckpt == GM_STEP_CKPT_SELECTIVE && o->core))
				prog_free(e, &B[o->id]);
			break;
		case GM_BOP_FREE:
			if (o->id == GM_BLK_IN && p->ckpt == GM_STEP_CKPT_FULL)
				break;
			if (o->id == GM_BLK_IN && named) {
				*named = B[GM_BLK_IN];
				B[GM_BLK_IN] = NONE;
				break;
			}
			prog_free(e, &B[o->id]);
			break;
		case GM_BOP_HOLD:
			loop_hold(e, B[o->id], true);
			break;
		case GM_BOP_WCAST:
		case GM_BOP_BCAST:
			cast_op(e, o);
			break;
		default:
			break;
		}
	}
}

/* The forward ops of program p on the ids B; named: where the input goes
 * when the program frees its name (the model keeps inputs_embeds). */
static void prog_forward(struct gm_em *e, const struct gm_step_block *p,
			 uint32_t *B, uint32_t *named)
{
	prog_forward_ops(e, p, B, named, 0, p->n_fwd);
}

/* Block l's program: the first block's own where it has one. */
static const struct gm_step_block *blk_prog(const struct gm_em *e, uint64_t l)
{
	uint64_t n0 = e->st->blk0_layers ? e->st->blk0_layers : 1;

	return l < n0 && e->st->blk0.n > 0 ? &e->st->blk0 : &e->st->blk;
}

/* Forward of block l (step.h, struct gm_step_block). Under full
 * checkpointing the block input is kept by torch.utils.checkpoint
 * whatever the ops do with it. */
static void blk_forward(struct gm_em *e, uint64_t slot, uint64_t l)
{
	const struct gm_step_block *p = blk_prog(e, l);
	uint32_t *B = blk_ids(e, slot, l);

	if (l == 0) {
		B[GM_BLK_IN] = ealloc(e, p->in_bytes, GM_SK_ACT);
		efree(e, &e->embsum);
	} else {
		uint32_t *A = blk_ids(e, slot, l - 1);
		B[GM_BLK_IN] = A[GM_BLK_OUT];
		A[GM_BLK_OUT] = NONE;
	}
	/* the model's forward keeps inputs_embeds (the first block's
	 * input) named until it returns */
	prog_forward(e, p, B, l == 0 && e->st->emb_in_named ?
		     &e->embn[slot] : NULL);
}


/* Re-run the forward (all of it, or the attention core) into the
 * recompute slots, up to the last saved tensor (non-reentrant
 * checkpoint stops early there: torch.utils.checkpoint
 * _StopRecomputationError); what is not saved is then freed. */
static void blk_recompute(struct gm_em *e, const struct gm_step_block *p,
			  bool all)
{
	int last = -1;

	/* a linear saves its weight's autocast copy (WCAST) too */
	for (int i = 0; i < p->n_fwd; i++)
		if ((p->op[i].op == GM_BOP_ALLOC && (all || p->op[i].core) &&
		     p->op[i].kind == GM_SK_ACT &&
		     (p->op[i].id != GM_BLK_OUT || (all && p->reentrant))) ||
		    (p->op[i].op == GM_BOP_WCAST && all && e->wlin))
			last = i;
	for (int i = 0; i <= last && !e->err; i++) {
		const struct gm_step_blockop *o = &p->op[i];
		if (!all && !o->core)
			continue;
		if (cast_kind(o) != CAST_N && all) {
			cast_op(e, o);
		} else if (o->op == GM_BOP_ALLOC) {
			efree(e, &e->rec[o->id]);
			e->rec[o->id] = ealloc(e, o->bytes, o->kind);
			e->reckind[o->id] = o->kind;
		} else if (o->op == GM_BOP_FREE) {
			efree(e, &e->rec[o->id]);
		}
	}
	/* reentrant: torch.utils.checkpoint's CheckpointFunction.backward
	 * holds the re-run's outputs until its torch.autograd.backward
	 * returns (prog_backward frees them) */
	for (int id = 0; id < p->n_ids; id++)
		if (e->rec[id] != NONE && (e->reckind[id] != GM_SK_ACT ||
					   (id == GM_BLK_OUT &&
					    !(all && p->reentrant))))
			efree(e, &e->rec[id]);
	/* the recompute's autocast context exits (torch.utils.checkpoint
	 * re-enters the forward's) */
	if (all)
		bias_copies_free(e, e->wl);
}

/* The backward ops of program p (the block's, or the head's: no
 * checkpointing) on the ids B, whose GM_BLK_GOUT holds the incoming
 * gradient; leaves the input's gradient in e->gcarry and frees the rest,
 * recomputed copies included. */
static void prog_backward(struct gm_em *e, const struct gm_step_block *p,
			  uint32_t *B, uint64_t l)
{
	for (int i = p->n_fwd; i < p->n && !e->err; i++) {
		const struct gm_step_blockop *o = &p->op[i];
		switch (o->op) {
		case GM_BOP_ALLOC:
			B[o->id] = ealloc(e, o->bytes, o->kind);
			break;
		case GM_BOP_FREE:
			prog_free(e, &B[o->id]);
			efree(e, &e->rec[o->id]);
			break;
		case GM_BOP_RECOMPUTE:
			if (p->ckpt == GM_STEP_CKPT_SELECTIVE)
				blk_recompute(e, p, false);
			break;
		case GM_BOP_PGRAD:
			if (l < e->L)
				pgrad_op(e, l, o->bytes, &B[o->id]);
			break;
		default:
			break;
		}
	}
	e->gcarry = B[p->gin_id];
	B[p->gin_id] = NONE;
	for (int id = 0; id < p->n_ids; id++) {
		prog_free(e, &B[id]);
		efree(e, &e->rec[id]);
	}
}

/* Backward of block l: the incoming gradient is e->gcarry (the last
 * block: a new one, the final norm's); leaves the input's in it. */
static void blk_backward(struct gm_em *e, uint64_t slot, uint64_t l)
{
	const struct gm_step_block *p = blk_prog(e, l);
	uint32_t *B = blk_ids(e, slot, l);

	if (l == e->L - 1 && e->st->head.n == 0) {
		e->gcarry = ealloc(e, p->gout_bytes, GM_SK_TRANSIENT);
		efree(e, &B[GM_BLK_OUT]); /* saved by the final norm */
	}
	B[GM_BLK_GOUT] = e->gcarry;
	e->gcarry = NONE;
	if (p->ckpt == GM_STEP_CKPT_FULL)
		blk_recompute(e, p, true);
	memset(e->pclaim, 0, sizeof(e->pclaim));
	prog_backward(e, p, B, l);
}

/* Whether p is a weight of lm_head's matmul with an autocast copy. */
static bool head_copy(const struct gm_step_param *p)
{
	return p->where == GM_STEP_HEAD && p->grad_at_loss && p->cache > 0;
}

/* Whether lm_head runs under autocast (its weight has an autocast copy). */
static bool head_cast(const struct gm_em *e)
{
	for (int i = 0; i < e->np; i++)
		if (head_copy(&e->st->p[i]))
			return true;
	return false;
}

/* The head's 16-bit weight gradients under autocast (the matmul's
 * product for the autocast copy; model.c sizes the copy as cache): into
 * e->hw16, at most two. Returns whether there were any. */
static bool head_wgrad16(struct gm_em *e)
{
	int k = 0;

	for (int i = 0; i < e->np && k < 2; i++)
		if (head_copy(&e->st->p[i]) && e->st->p[i].grad > 0)
			e->hw16[k++] = ealloc(e, e->st->p[i].cache,
					      GM_SK_TRANSIENT);
	return k > 0;
}

/* Under autocast, the head weights' own gradients from their 16-bit
 * ones (the cast back, then AccumulateGrad), which are freed; nothing
 * when there were none. */
static void head_wgrad_cast(struct gm_em *e)
{
	if (e->hw16[0] == NONE)
		return;
	grads_of(e, 0, GM_STEP_HEAD, true);
	for (int k = 0; k < 2; k++)
		efree(e, &e->hw16[k]);
}

/* The head's input program (gm_step.head): the ids of slot. */
static uint32_t *head_ids(struct gm_em *e, uint64_t slot)
{
	return &e->hid[slot * (size_t)e->st->head.n_ids];
}

/* The base model's eager attention mask (create_causal_mask): the mask
 * function's bool, then the mask, then the bool freed. */
static uint32_t mask_make(struct gm_em *e)
{
	uint32_t fn = ealloc(e, e->st->blk.mask_fn_bytes, GM_SK_TRANSIENT);
	uint32_t m = ealloc(e, e->st->blk.mask_bytes, GM_SK_TRANSIENT);

	efree(e, &fn);
	return m;
}

/* What the base model's forward names until it returns (inputs_embeds,
 * GPT-2's position_embeds), released as it does. */
static void embed_names_free(struct gm_em *e, uint64_t slot)
{
	efree(e, &e->embn[slot]);
	efree(e, &e->embp[slot]);
}

/* Its forward: takes the last block's output. The program is the final
 * norm and, under autocast, lm_head's input cast (its last allocation).
 * Between them the base model's forward returns, freeing what it named
 * (the eager attention mask, *mask; inputs_embeds), and F.linear casts
 * lm_head's weight before its input: the H200 trace of
 * llama-134m-eager-seq1024 shows the norm's output, the 32 MiB mask
 * freed, the 46.875 MiB weight copy, the 12 MiB input copy, the logits. */
static void head_forward(struct gm_em *e, uint64_t slot, uint32_t *mask)
{
	const struct gm_step_block *p = &e->st->head;
	uint32_t *B = head_ids(e, slot);
	uint32_t *A = blk_ids(e, slot, e->L - 1);
	int last = p->n_fwd;    /* no autocast: no input cast */

	B[GM_BLK_IN] = A[GM_BLK_OUT];
	A[GM_BLK_OUT] = NONE;
	e->wlin = false; /* its weights: cache_ref below */
	for (int i = 0; head_cast(e) && i < p->n_fwd; i++)
		if (p->op[i].op == GM_BOP_ALLOC)
			last = i;
	prog_forward_ops(e, p, B, NULL, 0, last);
	efree(e, mask);
	embed_names_free(e, slot);
	cache_ref(e, e->L, true);
	prog_forward_ops(e, p, B, NULL, last, p->n_fwd);
}

/* Its backward: lm_head's input gradient in, the last block's output
 * gradient out (e->gcarry); lm_head's saved input is released first. */
static void head_backward(struct gm_em *e, uint64_t slot)
{
	const struct gm_step_block *p = &e->st->head;
	uint32_t *B = head_ids(e, slot);

	if (B[GM_BLK_GOUT] == NONE) /* backward() allocates it */
		B[GM_BLK_GOUT] = ealloc(e, p->gout_bytes, GM_SK_TRANSIENT);
	efree(e, &B[GM_BLK_OUT]);
	head_wgrad_cast(e);
	prog_backward(e, p, B, e->L); /* its weights: not in the program */
}

/* A cuBLAS handle's workspace (*ws): allocated at the handle's first
 * matmul. The main thread's (e->ws) comes inside the first forward
 * (Llama: the rotary frequencies, inv_freq @ position_ids; GPT-2, BERT:
 * the first block's first linear), not at set-up: in every H200 trace of
 * tests/data/calibration/traces it is a 32 MiB segment after the
 * embedding output. Where it lands decides whether later small blocks
 * split a freed logits segment (llama-134m-bf16true-sgd-seq8192). */
static void first_matmul(struct gm_em *e, uint32_t *ws)
{
	if (*ws == NONE)
		*ws = ealloc(e, e->st->workspace, GM_SK_WORKSPACE);
}

const struct gm_step_infer *gm_em_infer(const struct gm_em *e)
{
	return &e->st->inf;
}

uint32_t gm_em_alloc(struct gm_em *e, double bytes, enum gm_step_kind k)
{
	return ealloc(e, bytes, k);
}

void gm_em_free(struct gm_em *e, uint32_t *id)
{
	efree(e, id);
}

void gm_em_empty_cache(struct gm_em *e)
{
	int rc;

	if (e->err || !e->sk->empty_cache)
		return;
	rc = e->sk->empty_cache(e->sk->ctx);
	if (rc)
		e->err = rc;
}

const struct gm_step *gm_em_step(const struct gm_em *e)
{
	return e->st;
}

uint32_t *gm_em_wid(struct gm_em *e, uint64_t row, int i)
{
	return &e->w[pix(e, row, i)];
}

uint32_t *gm_em_gid(struct gm_em *e, uint64_t row, int i)
{
	return &e->g[pix(e, row, i)];
}

struct gm_ds_em **gm_em_ds(struct gm_em *e)
{
	return &e->ds;
}

void gm_em_fail(struct gm_em *e, int err)
{
	if (!e->err)
		e->err = err;
}

static void forward(struct gm_em *e, uint64_t slot)
{
	const struct gm_step *st = e->st;
	uint32_t mask = NONE;

	phase(e->sk, GM_SP_FORWARD);
	fsdp_forward(e, e->L);
	if (st->emb_named > 0)
		e->embn[slot] = ealloc(e, st->emb_named, GM_SK_ACT);
	if (st->emb_pos > 0)
		e->embp[slot] = ealloc(e, st->emb_pos, GM_SK_TRANSIENT);
	if (st->emb_sum > 0)
		e->embsum = ealloc(e, st->emb_sum, GM_SK_TRANSIENT);
	/* GPT2Model.forward makes the mask before the embeddings'
	 * dropout (the H200 trace of gpt2-124m-selective-eager) */
	if (st->emb_sum > 0 && st->blk.n > 0)
		mask = mask_make(e);
	e->emb[slot] = ealloc(e, st->emb_saved, GM_SK_ACT);
	for (uint64_t l = 0; l < e->L; l++) {
		uint32_t *a = &e->a[(slot * e->L + l) * (size_t)st->n_act];
		fsdp_forward(e, l);
		if (st->blk.n > 0)
			cache_block(e, l, blk_prog(e, l));
		else
			cache_ref(e, l, false);
		first_matmul(e, &e->ws);
		if (st->blk.n > 0) {
			if (l == 0 && mask == NONE)
				mask = mask_make(e);
			blk_forward(e, slot, l);
			loop_kv_analytic(e, true);
			if (l + 1 == e->L && st->head.n == 0)
				efree(e, &mask);
			if (!st->fsdp_keep)
				fsdp_reshard(e, l);
			continue;
		}
		for (int k = 0; k < st->n_act; k++)
			a[k] = ealloc(e, st->act[k], GM_SK_ACT);
		loop_kv_analytic(e, true);
		transient(e);
		if (!st->fsdp_keep)
			fsdp_reshard(e, l);
	}
	if (st->head.n > 0 && st->blk.n > 0) {
		head_forward(e, slot, &mask);
	} else {
		cache_ref(e, e->L, true);
		embed_names_free(e, slot); /* the base model returns */
	}
	e->head_saved = ealloc(e, st->head_saved, GM_SK_ACT);
	if (st->n_loss > 0) {
		phase(e->sk, GM_SP_LOSS);
		loss_ops(e, 0, st->n_loss_fwd);
		/* a frozen lm_head saved nothing of its input: the name the
		 * causal LM's forward keeps (hidden_states) goes when it
		 * returns, after the loss (the H200 trace of
		 * lora-llama-1.1b-r16-qv: the final norm's output freed
		 * after log_softmax's output) */
		if (st->head_unsaved && st->head.n > 0 && st->blk.n > 0)
			efree(e, &head_ids(e, slot)[GM_BLK_OUT]);
	} else if (st->logits_held > 0 || st->logits_piece > 0) {
		uint32_t copy;
		phase(e->sk, GM_SP_LOSS);
		e->held = ealloc(e, st->logits_held, GM_SK_LOGITS);
		copy = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		e->lp[0] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		efree(e, &copy);
	}
	loop_forward_end(e);
}

static void backward(struct gm_em *e, uint64_t slot)
{
	const struct gm_step *st = e->st;

	phase(e->sk, GM_SP_BACKWARD);
	if (st->n_loss > 0) {
		loss_ops(e, st->n_loss_fwd, st->n_loss);
	} else if (st->logits_piece > 0) {
		e->lp[1] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
		e->lp[2] = ealloc(e, st->logits_piece, GM_SK_LOGITS);
	}
	/* the engine runs the backward on its own device thread, whose
	 * cuBLAS handle gets a workspace of its own at its first matmul,
	 * the head's weight gradient (one more 32 MiB segment in every H200
	 * training trace of tests/data/calibration/traces, after that
	 * product). Under autocast the product is the 16-bit gradient of
	 * the weight's autocast copy, and the weight's own gradient comes
	 * from its cast back (ToCopyBackward), after which the 16-bit one
	 * is freed (the trace of llama-134m-eager-seq1024: 46.875 MiB, the
	 * workspace, then the fp32 93.75 MiB); without autocast the product
	 * is the gradient itself. */
	if (!head_wgrad16(e))
		grads_of(e, 0, GM_STEP_HEAD, true);
	first_matmul(e, &e->ws_bwd);
	/* then the same matmul's input gradient, before the loss tensors
	 * go; the weight's own gradient (under autocast) once the input's
	 * cast back has run (head_backward) */
	if (st->head.n > 0 && st->blk.n > 0)
		head_ids(e, slot)[GM_BLK_GOUT] = ealloc(e,
			st->head.gout_bytes, GM_SK_TRANSIENT);
	else
		head_wgrad_cast(e);
	for (int k = 0; k < 3; k++)
		efree(e, &e->lp[k]);
	for (int k = 0; k < GM_STEP_LOSS_IDS; k++)
		efree(e, &e->loss[k]);
	for (uint64_t l = e->L; l-- > 0;) {
		uint32_t *a = &e->a[(slot * e->L + l) * (size_t)st->n_act];
		fsdp_pre_backward(e, l);
		if (st->blk.n > 0) {
			if (l == e->L - 1) {
				efree(e, &e->held);
				efree(e, &e->head_saved);
				cache_unref(e, e->L);
				if (st->head.n > 0)
					head_backward(e, slot);
			}
			if (ckpt_drops_cache(e)) /* the recompute's */
				cache_block(e, l, blk_prog(e, l));
			blk_backward(e, slot, l);
			loop_kv_analytic(e, false);
			cache_unref(e, l);
			grads_of(e, l, GM_STEP_LAYER, false);
			fsdp_post_backward(e, l);
			continue;
		}
		transient(e);
		if (l == e->L - 1) {
			efree(e, &e->held);
			efree(e, &e->head_saved);
			cache_unref(e, e->L);
		}
		for (int k = 0; k < st->n_act; k++)
			efree(e, &a[k]);
		loop_kv_analytic(e, false);
		cache_unref(e, l);
		grads_of(e, l, GM_STEP_LAYER, false);
		fsdp_post_backward(e, l);
	}
	efree(e, &e->gcarry);   /* the embedding's backward */
	efree(e, &e->emb[slot]);
	grads_of(e, 0, GM_STEP_HEAD, false);
	grads_of(e, 0, GM_STEP_EMBED, false);
	fsdp_post_backward(e, e->L);
}

/*
 * ZeRO-1 (gm_step.zero1_d): torch/distributed/optim/
 * zero_redundancy_optimizer.py _partition_parameters gives whole
 * parameters to ranks: sorted by numel, largest first (a stable sort),
 * each to the rank with the fewest elements so far (the lowest on a
 * tie); each rank's optimizer keeps the states of its own. The rank
 * emitted is the most loaded one (the lowest on a tie). The traces of
 * llama-1.1b-zero1-dp2 show whole 250 / 44 / 16 / 2 MiB states per rank.
 */
static _Thread_local const struct gm_em *sort_em;

static int by_size(const void *a, const void *b)
{
	size_t x = *(const size_t *)a, y = *(const size_t *)b;
	double wx = pslot(sort_em, x)->weight;
	double wy = pslot(sort_em, y)->weight;

	if (wx != wy)
		return wx < wy ? 1 : -1;
	return x < y ? -1 : x > y;
}

static int zero1_partition(struct gm_em *e)
{
	size_t n = (size_t)(e->L + 1) * (size_t)e->np, m = 0;
	unsigned d = e->st->zero1_d, top = 0;
	size_t *ix = malloc(n * sizeof(*ix));
	unsigned *rank = malloc(n * sizeof(*rank));
	double load[256] = {0};

	e->own = calloc(n, 1);
	if (!ix || !rank || !e->own) {
		free(ix);
		free(rank);
		return GM_ENOMEM;
	}
	for (size_t j = 0; j < n; j++) {
		const struct gm_step_param *p = pslot(e, j);
		if ((j / e->np < e->L) == (p->where == GM_STEP_LAYER) &&
		    p->weight > 0)
			ix[m++] = j;
	}
	sort_em = e; /* qsort has no context argument in C11 */
	qsort(ix, m, sizeof(*ix), by_size);
	for (size_t k = 0; k < m; k++) {
		unsigned r = 0;
		for (unsigned q = 1; q < d; q++)
			if (load[q] < load[r])
				r = q;
		rank[k] = r;
		load[r] += pslot(e, ix[k])->weight;
	}
	for (unsigned q = 1; q < d; q++)
		if (load[q] > load[top])
			top = q;
	for (size_t k = 0; k < m; k++)
		e->own[ix[k]] = rank[k] == top;
	free(ix);
	free(rank);
	return 0;
}

/* The factor on parameter slot j's optimizer bytes: d for this rank's
 * own under ZeRO-1, 0 for another rank's, else 1. */
static double zero1_f(const struct gm_em *e, size_t j)
{
	if (!e->own)
		return 1;
	return e->own[j] ? (double)e->st->zero1_d : 0;
}

/* Slot j's optimizer temporary (0: none on this rank). */
static double opt_tmp_of(const struct gm_em *e, size_t j)
{
	const struct gm_step_param *p = pslot(e, j);

	if ((j / e->np < e->L) != (p->where == GM_STEP_LAYER))
		return 0;
	return p->opt_tmp * zero1_f(e, j);
}

/*
 * torch.optim's temporaries (optstep.h) over the rank's tensors: the
 * foreach list in slot order (the blocks', then the model's own), the
 * for-loop in named_parameters() order (the model's own tensors before
 * the first block tensor, each block's, the rest).
 */
static void opt_temporaries(struct gm_em *e)
{
	const struct gm_step *st = e->st;
	size_t n = (size_t)(e->L + 1) * (size_t)e->np, k = 0;
	double *b = calloc(n ? n : 1, sizeof(*b));
	int first = e->np;

	if (!b) {
		e->err = GM_ENOMEM;
		return;
	}
	if (st->opt_impl != GM_OPT_IMPL_FOR_LOOP) {
		for (size_t j = 0; j < n; j++)
			b[k++] = opt_tmp_of(e, j);
	} else {
		size_t top = (size_t)e->L * (size_t)e->np;
		for (int i = 0; i < e->np; i++)
			if (st->p[i].where == GM_STEP_LAYER) {
				first = i;
				break;
			}
		for (int i = 0; i < first; i++)
			b[k++] = opt_tmp_of(e, top + (size_t)i);
		for (uint64_t l = 0; l < e->L; l++)
			for (int i = 0; i < e->np; i++)
				b[k++] = opt_tmp_of(e, (size_t)l *
						    (size_t)e->np + (size_t)i);
		for (int i = first; i < e->np; i++)
			b[k++] = opt_tmp_of(e, top + (size_t)i);
	}
	gm_optstep_rule(st->opt_impl)->emit(e, b, k);
	free(b);
}

static void optimizer(struct gm_em *e)
{
	const struct gm_step *st = e->st;
	size_t n = (size_t)(e->L + 1) * (size_t)e->np;

	phase(e->sk, GM_SP_OPTIMIZER);
	if (st->ds.on) {
		gm_ds_optimizer(e);
		return;
	}
	if (!e->have_states) {
		for (size_t j = 0; j < n; j++) {
			const struct gm_step_param *p = pslot(e, j);
			if ((j / e->np < e->L) != (p->where == GM_STEP_LAYER))
				continue;
			for (int k = 0; k < p->n_state; k++)
				e->s[j * GM_STEP_STATES + k] =
					ealloc(e, p->state[k] * zero1_f(e, j),
					       GM_SK_STATE);
		}
		e->have_states = true;
	}
	if (st->opt_tmp_per_tensor) {
		for (size_t j = 0; j < n; j++) {
			const struct gm_step_param *p = pslot(e, j);
			uint32_t t3[3];
			if ((j / e->np < e->L) != (p->where == GM_STEP_LAYER))
				continue;
			for (int k = 0; k < 3; k++)
				t3[k] = ealloc(e, p->opt_tmp, GM_SK_OPT_TMP);
			for (int k = 0; k < 3; k++)
				efree(e, &t3[k]);
		}
	} else {
		opt_temporaries(e);
	}
	for (size_t j = 0; j < n; j++) { /* zero_grad(set_to_none=True) */
		if (e->gdef) { /* after the next forward */
			e->gdef[j] = e->g[j];
			e->g[j] = NONE;
		}
		efree(e, &e->g[j]);
	}
}

/*
 * DistributedDataParallel (gm_step.ddp), as torch 2.11 does it:
 * torch/nn/parallel/distributed.py (__init__: _sync_module_states with
 * a 250 MiB broadcast_bucket_size, then _ddp_init_helper: one bucket of
 * every parameter when find_unused_parameters is False) and
 * torch/csrc/distributed/c10d/reducer.cpp (initialize_buckets: one flat
 * tensor per bucket in the parameters' dtype, the gradients' copies as
 * gradient_as_bucket_view is False; compute_bucket_assignment_by_size: a
 * bucket closes once its bytes reach the current limit, the first limit
 * for the first bucket only; rebuild_buckets from the forward of the
 * second iteration, in the order the gradients became ready). The 2x
 * H200 traces (tests/data/calibration/traces/multi/) show each: the
 * coalesced broadcasts, two alive at a time; one allocation of all
 * gradients in _ddp_init_helper; the rebuilt buckets in _pre_forward of
 * step 2. Simplifications: a broadcast buffer closes at the cap like a
 * bucket (PyTorch's take_tensors groups slightly differently: 256-294
 * MiB buffers there); the gradients become ready in the reverse of the
 * module order (the head first, the blocks last first, each block's
 * tensors in reverse), which moves a few KiB of norm weights between
 * neighbouring buckets. The single bucket is freed when rebuild drops
 * the last reference; the traces show that Python's cyclic collector
 * sometimes keeps it until later in the step (tools/measure/README.md),
 * which no model predicts.
 */

/* Bytes parameter i adds to DDP's buckets (a tied weight once). */
static double ddp_bytes(const struct gm_em *e, uint64_t l, int i)
{
	const struct gm_step_param *p = par(e, l, i);

	return p->grad_shared ? 0 : p->grad;
}

/* Close a broadcast buffer of acc bytes: the previous one is freed once
 * this one is allocated (two in flight). */
static void ddp_bcast(struct gm_em *e, double *acc, uint32_t *prev)
{
	uint32_t cur;

	if (!(*acc > 0))
		return;
	cur = ealloc(e, *acc, GM_SK_COMM);
	efree(e, prev);
	*prev = cur;
	*acc = 0;
}

/* Construction: the weights' broadcast, then the single bucket. */
static void ddp_setup(struct gm_em *e)
{
	static const enum gm_step_where order[3] = {
		GM_STEP_EMBED, GM_STEP_LAYER, GM_STEP_HEAD};
	const struct gm_step *st = e->st;
	double acc = 0, total = 0;
	uint32_t prev = NONE;

	for (int w = 0; w < 3; w++) {
		uint64_t rows = order[w] == GM_STEP_LAYER ? e->L : 1;
		for (uint64_t l = 0; l < rows; l++)
			for (int i = 0; i < e->np; i++) {
				if (st->p[i].where != order[w])
					continue;
				acc += par(e, order[w] == GM_STEP_LAYER ?
					   l : e->L, i)->weight;
				total += ddp_bytes(e, order[w] ==
						   GM_STEP_LAYER ? l : e->L,
						   i);
				if (acc >= st->ddp_bcast_cap)
					ddp_bcast(e, &acc, &prev);
			}
	}
	ddp_bcast(e, &acc, &prev);
	efree(e, &prev);
	e->bk[0] = ealloc(e, total, GM_SK_COMM);
	e->nbk = 1;
}

/* The second iteration's forward: the buckets rebuilt in the order the
 * gradients become ready, then the single one freed. */
static void ddp_rebuild(struct gm_em *e)
{
	static const enum gm_step_where order[3] = {
		GM_STEP_HEAD, GM_STEP_LAYER, GM_STEP_EMBED};
	const struct gm_step *st = e->st;
	double acc = 0, lim = st->ddp_first_cap;
	size_t n = 1;

	phase(e->sk, GM_SP_FORWARD);
	for (int w = 0; w < 3; w++) {
		uint64_t rows = order[w] == GM_STEP_LAYER ? e->L : 1;
		for (uint64_t l = rows; l-- > 0;)
			for (int i = e->np; i-- > 0;) {
				if (st->p[i].where != order[w])
					continue;
				acc += ddp_bytes(e, order[w] ==
						 GM_STEP_LAYER ? l : e->L, i);
				if (acc > 0 && acc >= lim) {
					e->bk[n++] = ealloc(e, acc,
							    GM_SK_COMM);
					acc = 0;
					lim = st->ddp_cap;
				}
			}
	}
	if (acc > 0)
		e->bk[n++] = ealloc(e, acc, GM_SK_COMM);
	efree(e, &e->bk[0]);
	e->nbk = n;
}

/* One training step: micro-batches in 1F1B order, then the optimizer. */
static void train_step(struct gm_em *e)
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

/*
 * Inference (struct gm_step_infer). What a Hugging Face model (transformers
 * 5.x, torch.inference_mode(), sdpa attention without a mask: the harness
 * passes no padding, so masking_utils builds none) allocates, read from
 * the allocation traces of the calibration set
 * (tests/data/calibration/traces/ *-infer-*.trace.jsonl.gz, H200, torch
 * 2.11, transformers 5.17). Every tensor whose size scales with the batch,
 * the sequence or the vocabulary is emitted with its exact size and in
 * the traced order; scalars and index tensors of a few bytes are not.
 * T is the tokens of the forward (batch x prompt in the prefill, batch in
 * a decode step); X = T x hidden activations.
 */

/* LayerNorm: output plus mean and rstd (fp32 per token), freed at once. */
uint32_t gm_em_layer_norm(struct gm_em *e, double T)
{
	const struct gm_step_infer *in = &e->st->inf;
	uint32_t out = ealloc(e, T * in->hidden * in->c, GM_SK_TRANSIENT);
	uint32_t m = ealloc(e, T * 4, GM_SK_TRANSIENT);
	uint32_t r = ealloc(e, T * 4, GM_SK_TRANSIENT);

	efree(e, &m);
	efree(e, &r);
	return out;
}

/* LlamaRMSNorm: x.to(float32); x.pow(2).mean(-1); x * rsqrt(var + eps);
 * weight * x.to(dtype). In fp32 both casts return their input. N
 * elements in T rows. */
static uint32_t rms_norm_n(struct gm_em *e, double N, double T)
{
	const struct gm_step_infer *in = &e->st->inf;
	double X = N * in->c, F = N * 4, S = T * 4;
	bool cast = in->c != 4;
	uint32_t a = NONE, b, var, t, r, y, g = NONE, out;

	if (cast)
		a = ealloc(e, F, GM_SK_TRANSIENT);
	b = ealloc(e, F, GM_SK_TRANSIENT);          /* pow */
	var = ealloc(e, S, GM_SK_TRANSIENT);        /* mean */
	efree(e, &b);
	t = ealloc(e, S, GM_SK_TRANSIENT);          /* var + eps */
	r = ealloc(e, S, GM_SK_TRANSIENT);          /* rsqrt */
	efree(e, &t);
	y = ealloc(e, F, GM_SK_TRANSIENT);          /* x * rsqrt */
	efree(e, &r);
	efree(e, &a);
	if (cast)
		g = ealloc(e, X, GM_SK_TRANSIENT);  /* to(dtype) */
	out = ealloc(e, X, GM_SK_TRANSIENT);        /* weight * */
	efree(e, &g);
	efree(e, &y);
	efree(e, &var);
	return out;
}

uint32_t gm_em_rms_norm(struct gm_em *e, double T)
{
	return rms_norm_n(e, T * e->st->inf.hidden, T);
}

uint32_t gm_em_rms_norm_w(struct gm_em *e, double T, double width)
{
	return rms_norm_n(e, T * width, T);
}

uint32_t gm_em_head_rms_norm(struct gm_em *e, double T, double width)
{
	return rms_norm_n(e, T * width, T * width / e->st->inf.head_dim);
}

/* apply_rotary_pos_emb for one of q, k (bytes each): x * cos +
 * rotate_half(x) * sin, rotate_half = cat(-x2, x1). */
uint32_t gm_em_rotary(struct gm_em *e, double bytes)
{
	uint32_t a = ealloc(e, bytes, GM_SK_TRANSIENT);     /* x * cos */
	uint32_t n = ealloc(e, bytes / 2, GM_SK_TRANSIENT); /* -x2 */
	uint32_t c = ealloc(e, bytes, GM_SK_TRANSIENT);     /* cat */
	uint32_t s, out;

	efree(e, &n);
	s = ealloc(e, bytes, GM_SK_TRANSIENT);              /* * sin */
	efree(e, &c);
	out = ealloc(e, bytes, GM_SK_TRANSIENT);            /* + */
	efree(e, &a);
	efree(e, &s);
	return out;
}

/*
 * torch.nn.functional.scaled_dot_product_attention over f's T queries and
 * the gm_em_kv_len() key positions (PyTorch aten/src/ATen/native/
 * transformers/attention.cpp scaled_dot_product_attention): with 16-bit
 * inputs and no mask the flash kernel runs, and a head_dim that is not a
 * multiple of 8 (at most 256, flash's limit) is padded first
 * (pad_last_dim<8>: copies of q, k and v at the padded width), the
 * kernel's output is padded too and post_process_flash_output returns a
 * slice of it, which transformers' sdpa_attention_forward then copies
 * (transpose(1, 2).contiguous() of a non-contiguous slice); the padded
 * inputs die when the call returns, the padded output with the slice.
 * Otherwise one output of T x q. (The H200 trace of
 * llama-3b-infer-fp16-gen, head_dim 100: 104-wide copies of q, k and v,
 * the 104-wide output, then the 100-wide copy.) Returns the output.
 */
uint32_t gm_em_sdpa(struct gm_em *e, const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = &e->st->inf;
	double T = (double)f->T, c = in->c, hd = in->head_dim;
	double N = (double)gm_em_kv_len(e, f);
	double Q = T * in->q * c, K = (double)in->batch * N * in->kv * c;
	double r;
	uint32_t qp, kp, vp, op, o;

	if (c == 4 || hd <= 0 || hd > 256 || fmod(hd, 8) == 0)
		return ealloc(e, Q, GM_SK_TRANSIENT);
	r = ceil(hd / 8) * 8 / hd;
	qp = ealloc(e, Q * r, GM_SK_TRANSIENT);
	kp = ealloc(e, K * r, GM_SK_TRANSIENT);
	vp = ealloc(e, K * r, GM_SK_TRANSIENT);
	op = ealloc(e, Q * r, GM_SK_TRANSIENT);
	efree(e, &qp);
	efree(e, &kp);
	efree(e, &vp);
	o = ealloc(e, Q, GM_SK_TRANSIENT);
	efree(e, &op);
	return o;
}

/* Bytes per position of the cache's key (k 0) or value (k 1) tensor of
 * one layer: batch x its width x the cache dtype. */
static double kv_per_pos(const struct gm_step_infer *in, int k)
{
	return (double)in->batch * (k ? in->kv_v : in->kv) * in->kvb;
}

/*
 * The positions of the key and value states a layer's cache update
 * returns for forward f (what attention reads, and the length of the
 * tensor torch.cat makes): the positions before f and f's own. With a
 * sliding window W (transformers 5.17.0 cache_utils.py: DynamicCache
 * builds a DynamicSlidingWindowLayer for every layer when the config
 * has sliding_window and no layer_types, get_layer_types_and_kwargs)
 * the layer keeps only the last W - 1 positions before f.
 */
uint64_t gm_em_kv_len(const struct gm_em *e, const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = &e->st->inf;
	uint64_t kept = f->n;

	if (in->window && kept > in->window - 1)
		kept = in->window - 1;
	return kept + f->T / in->batch;
}

/* DynamicCache.update (transformers 5.17 cache_utils.py
 * DynamicLayer.update): torch.cat([self.keys, key_states], dim=-2), then
 * the same for the values: a tensor of the new length replaces the old
 * one (the prefill's cat copies the new states into the empty tensors
 * lazy_initialization made, so the cache never aliases them).
 * DynamicSlidingWindowLayer.update makes the same cat of what it kept
 * and keeps a slice of its last W - 1 positions: a view, so the cat's
 * whole output stays allocated (after the prefill, the whole prompt)
 * until the next update replaces it. */
void gm_em_kv_append(struct gm_em *e, uint64_t l, const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = &e->st->inf;
	uint64_t len = gm_em_kv_len(e, f);

	for (int k = 0; k < 2; k++) {
		uint32_t *slot = &e->a[2 * l + k];
		uint32_t id = ealloc(e, kv_per_pos(in, k) * (double)len,
				     GM_SK_KV);
		efree(e, slot);
		*slot = id;
	}
}

/* The rotary cos and sin (Llama's rotary embedding) for q positions (shape (1, q, head_dim):
 * the harness's position ids have batch 1): the fp32 frequencies, their
 * cat, cos and sin (scaled: a second tensor), cast to the dtype. */
void gm_em_rope_tables(struct gm_em *e, double q, uint32_t *cs)
{
	const struct gm_step_infer *in = &e->st->inf;
	double E = q * in->head_dim;
	bool cast = in->c != 4;
	uint32_t fr, emb, t[4];

	fr = ealloc(e, E / 2 * 4, GM_SK_TRANSIENT);
	first_matmul(e, &e->ws);                    /* inv_freq @ ids */
	emb = ealloc(e, E * 4, GM_SK_TRANSIENT);
	for (int k = 0; k < 4; k += 2) {
		t[k] = ealloc(e, E * 4, GM_SK_TRANSIENT);     /* cos / sin */
		t[k + 1] = ealloc(e, E * 4, GM_SK_TRANSIENT); /* * scaling */
		efree(e, &t[k]);
	}
	for (int k = 0; k < 2; k++)
		cs[k] = cast ? ealloc(e, E * in->c, GM_SK_TRANSIENT) : NONE;
	efree(e, &fr);
	efree(e, &emb);
	for (int k = 0; k < 2; k++)
		if (cast)
			efree(e, &t[2 * k + 1]);
		else
			cs[k] = t[2 * k + 1];
}

/*
 * One forward of the model over f->T tokens (a pipeline stage's share:
 * embeddings on the first, the head on the last): returns the logits'
 * id (NONE when the stage has no vocabulary head). generate() keeps only
 * the last position's logits (logits_to_keep=1).
 */
static uint32_t infer_forward(struct gm_em *e, const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = &e->st->inf;
	const struct gm_family *fam = in->fam;
	double T = (double)f->T, c = in->c, X = T * in->hidden * c;
	double q = T / (double)in->batch;
	struct gm_em_live lv = {.hs = NONE, .keep = {NONE, NONE, NONE},
				.cs = {NONE, NONE}};
	uint32_t out, nf, lg = NONE;

	if (!in->first)
		lv.hs = ealloc(e, X, GM_SK_TRANSIENT);  /* received */
	else
		lv.hs = fam->infer_embed(e, f, &lv);
	if (fam->infer_pre)
		fam->infer_pre(e, q, &lv);
	first_matmul(e, &e->ws);
	for (uint64_t l = 0; l < e->L && !e->err; l++) {
		out = fam->infer_layer(e, l, f);
		if (lv.hs != lv.keep[2])
			efree(e, &lv.hs);
		lv.hs = out;
	}
	if (!in->last) {
		efree(e, &lv.keep[2]);
		efree(e, &lv.hs);  /* sent on */
		for (int k = 0; k < 2; k++)
			efree(e, &lv.keep[k]);
		return NONE;
	}
	nf = fam->infer_head(e, f, &lv);
	if (nf != NONE) {
		lg = ealloc(e, (in->generate ? (double)in->batch : T) *
			    in->vocab * c, GM_SK_LOGITS);
		efree(e, &nf);
	}
	efree(e, &lv.hs);
	return lg;
}

/* Grow a per-step tensor by torch.cat: the new one, then the old freed. */
static void regrow(struct gm_em *e, uint32_t *id, double bytes,
		   enum gm_step_kind k)
{
	uint32_t n = ealloc(e, bytes, k);

	efree(e, id);
	*id = n;
}

/*
 * generate()'s work on one step's logits (transformers generation/
 * utils.py _sample, greedy, with the harness's min_new_tokens): the
 * attention mask grown by one column, next_token_logits (an fp32 copy of
 * the last position, replacing the previous step's), two logits
 * processors that each clone the scores (with a boolean mask of the
 * vocabulary), the input ids grown by one column, then the step's model
 * logits released before the next forward.
 */
static void gen_tail(struct gm_em *e, uint32_t *g, uint32_t *lg, uint64_t len)
{
	const struct gm_step_infer *in = &e->st->inf;
	double b = (double)in->batch, BV = b * in->vocab;
	uint32_t n, m, s1, s2, t;

	regrow(e, &g[0], b * (double)(len + 1) * 8,   /* attention mask */
	       GM_SK_TRANSIENT);
	if (*lg != NONE) {
		n = ealloc(e, BV * 4, GM_SK_LOGITS);   /* next_token_logits */
		efree(e, &g[1]);
		g[1] = n;
		m = ealloc(e, BV, GM_SK_LOGITS);
		s1 = ealloc(e, BV * 4, GM_SK_LOGITS);
		s2 = ealloc(e, BV * 4, GM_SK_LOGITS);
		efree(e, &s1);
		efree(e, &m);
		t = ealloc(e, BV * 4, GM_SK_LOGITS);
		m = ealloc(e, BV, GM_SK_LOGITS);
		n = ealloc(e, BV * 4, GM_SK_LOGITS);   /* next_token_scores */
		efree(e, &t);
		efree(e, &m);
		efree(e, &s2);
		efree(e, &g[2]);
		g[2] = n;
	}
	regrow(e, &g[3], b * (double)(len + 1) * 8,   /* input ids */
	       GM_SK_TRANSIENT);
	efree(e, lg);
}

/* One pass: a forward over the prompt, or generate() of `generate`
 * tokens (a prefill and generate - 1 decode forwards; the cache ends
 * with prompt + generate - 1 positions). */
static void infer_pass(struct gm_em *e)
{
	const struct gm_step_infer *in = &e->st->inf;
	uint64_t b = in->batch, s = in->prompt, G = in->generate;
	struct gm_em_fwd f = {.T = b * s, .n = 0};
	uint32_t g[4] = {NONE, NONE, NONE, NONE}, lg;

	phase(e->sk, GM_SP_INFER);
	if (!b || !s)
		return;
	g[3] = ealloc(e, (double)(b * s) * 8, GM_SK_TRANSIENT); /* ids */
	g[0] = ealloc(e, (double)(b * s) * 8, GM_SK_TRANSIENT); /* mask */
	lg = infer_forward(e, &f);
	if (G) {
		gen_tail(e, g, &lg, s);
		f.T = b;
		f.decode = true;
		for (uint64_t k = 1; k < G && !e->err; k++) {
			f.n = s + k - 1;
			if (in->last_decode_only && k + 1 < G)
				continue;
			if (in->last_decode_only && k > 1) {
				/* jump to the last step's lengths: the cache
				 * as the step before left it */
				struct gm_em_fwd pf = {.T = b, .n = f.n - 1};
				double kept = (double)gm_em_kv_len(e, &pf);

				for (uint64_t l = 0; l < 2 * e->L; l++)
					if (e->a[l] != NONE)
						regrow(e, &e->a[l], kept *
						       kv_per_pos(in, (int)
								  (l % 2)),
						       GM_SK_KV);
				for (int j = 0; j < 4; j += 3)
					regrow(e, &g[j], (double)(b *
					       (f.n + 1)) * 8,
					       GM_SK_TRANSIENT);
			}
			lg = infer_forward(e, &f);
			gen_tail(e, g, &lg, f.n + 1);
		}
	}
	efree(e, &lg);
	for (uint64_t l = 0; l < 2 * e->L; l++)
		efree(e, &e->a[l]);
	for (int k = 0; k < 4; k++)
		efree(e, &g[k]);
}

static void em_free_all(struct gm_em *e)
{
	size_t n = (size_t)(e->L + 1) * (size_t)e->np;

	loop_release(e, e->kprev, &e->nprev);
	loop_release(e, e->kcur, &e->ncur);
	for (size_t j = 0; e->gdef && j < n; j++)
		efree(e, &e->gdef[j]);

	for (size_t j = 0; j < e->na; j++)
		efree(e, &e->a[j]);
	for (size_t j = 0; j < e->nbid; j++)
		efree(e, &e->bid[j]);
	for (size_t j = 0; j < e->nhid; j++)
		efree(e, &e->hid[j]);
	for (int j = 0; j < GM_STEP_BLOCK_IDS; j++)
		efree(e, &e->rec[j]);
	efree(e, &e->gcarry);
	for (uint64_t j = 0; j < e->st->in_flight; j++)
		efree(e, &e->emb[j]);
	for (size_t j = 0; j < e->st->in_flight; j++)
		efree(e, &e->embn[j]);
	for (size_t j = 0; j < e->st->in_flight; j++)
		efree(e, &e->embp[j]);
	efree(e, &e->embsum);
	efree(e, &e->held);
	efree(e, &e->head_saved);
	for (int k = 0; k < 3; k++)
		efree(e, &e->lp[k]);
	for (int k = 0; k < GM_STEP_LOSS_IDS; k++)
		efree(e, &e->loss[k]);
	for (size_t j = 0; j < n; j++) {
		efree(e, &e->c[j]);
		efree(e, &e->bc[j]);
		efree(e, &e->g[j]);
		for (int k = 0; k < GM_STEP_STATES; k++)
			efree(e, &e->s[j * GM_STEP_STATES + k]);
	}
	for (size_t k = 0; k < e->ncomm; k++)
		efree(e, &e->comm[k]);
	for (size_t k = 0; k < e->nbk; k++)
		efree(e, &e->bk[k]);
	for (size_t j = 0; e->up && j < n; j++) {
		efree(e, &e->up[j]);
		efree(e, &e->ug[j]);
	}
	gm_ds_free(e);
	efree(e, &e->ag);
	efree(e, &e->rsin);
	efree(e, &e->ws);
	efree(e, &e->ws_bwd);
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
	struct gm_em e = {.st = st, .sk = sink, .L = st->layers, .np = st->n_param,
		       .head_saved = NONE, .held = NONE,
		       .lp = {NONE, NONE, NONE}, .ws = NONE, .ws_bwd = NONE,
		       .hw16 = {NONE, NONE},
		       .embsum = NONE,
		       .ag = NONE,
		       .rsin = NONE, .gcarry = NONE};
	size_t n, na;
	int rc;

	if (st->megatron)
		return gm_mg_emit(st->megatron, sink);
	for (int k = 0; k < GM_STEP_LOSS_IDS; k++)
		e.loss[k] = NONE;
	for (int i = 0; i < st->n_param && i < GM_PARAMS_MAX; i++)
		e.pz[i] = (struct gm_step_param){.where = st->p[i].where,
						 .span = st->p[i].span,
						 .added = st->p[i].added};
	for (int k = 0; k < GM_STEP_BLOCK_IDS; k++)
		e.rec[k] = NONE;
	if (st->blk.n < 0 || st->blk.n > GM_STEP_BLOCK_OPS ||
	    st->blk.n_fwd < 0 || st->blk.n_fwd > st->blk.n ||
	    (st->blk.n > 0 && (st->blk.n_ids <= GM_BLK_FIRST ||
			       st->blk.n_ids > GM_STEP_BLOCK_IDS ||
			       st->blk.gin_id < 0 ||
			       st->blk.gin_id >= st->blk.n_ids)))
		return GM_EINVAL;
	for (int i = 0; i < st->blk.n; i++)
		if (st->blk.op[i].id >= st->blk.n_ids ||
		    st->blk.op[i].kind >= GM_SK_N)
			return GM_EINVAL;
	if (st->blk0.n && (st->blk.n <= 0 || st->blk0.n < 0 ||
			   st->blk0.n > GM_STEP_BLOCK_OPS ||
			   st->blk0.n_fwd < 0 || st->blk0.n_fwd > st->blk0.n ||
			   st->blk0.n_ids > st->blk.n_ids ||
			   st->blk0.gin_id < 0 ||
			   st->blk0.gin_id >= st->blk0.n_ids))
		return GM_EINVAL;
	for (int i = 0; i < st->blk0.n; i++)
		if (st->blk0.op[i].id >= st->blk0.n_ids ||
		    st->blk0.op[i].kind >= GM_SK_N)
			return GM_EINVAL;
	if (st->n_loss < 0 || st->n_loss > GM_STEP_LOSS_OPS ||
	    st->n_loss_fwd < 0 || st->n_loss_fwd > st->n_loss)
		return GM_EINVAL;
	for (int i = 0; i < st->n_loss; i++)
		if (st->loss[i].id >= GM_STEP_LOSS_IDS)
			return GM_EINVAL;
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
	e.bc = ids(n);
	e.s = ids(n * GM_STEP_STATES);
	e.na = na;
	e.a = ids(na);
	e.emb = ids(st->in_flight);
	e.embn = ids(st->in_flight);
	e.embp = ids(st->in_flight);
	e.cref = calloc(e.L + 1, sizeof(*e.cref));
	e.comm = ids(e.ncomm);
	e.bk = ids(st->ddp ? n + 2 : 0);
	e.nbid = st->training && st->blk.n > 0 ? (size_t)st->in_flight *
		 e.L * (size_t)st->blk.n_ids : 0;
	e.bid = ids(e.nbid);
	e.nhid = e.nbid && st->head.n > 0 ? (size_t)st->in_flight *
		 (size_t)st->head.n_ids : 0;
	e.hid = ids(e.nhid);
	if (st->training && st->zero1_d >= 2 && st->zero1_d <= 256 &&
	    !st->opt_tmp_per_tensor && zero1_partition(&e)) {
		rc = GM_ENOMEM;
		goto out;
	}
	/* the loop's kept sets: K and V of every block, the logits */
	e.kcap = 2 * (size_t)e.L + 2;
	e.kcur = ids(e.kcap);
	e.kprev = ids(e.kcap);
	if (st->training && st->grads_to_next_forward)
		e.gdef = ids(n);
	if (st->fsdp && st->training) {
		e.up = ids(n);
		e.ug = ids(n);
		e.gathered = calloc(e.L + 1, sizeof(*e.gathered));
	}
	if (!e.w || !e.g || !e.c || !e.bc || !e.s || !e.a || !e.emb || !e.cref ||
	    !e.comm || !e.bk || !e.bid || !e.hid || !e.embn || !e.embp || !e.kcur ||
	    !e.kprev || (st->training && st->grads_to_next_forward &&
			 !e.gdef) ||
	    (st->fsdp && st->training &&
	     (!e.up || !e.ug || !e.gathered))) {
		rc = GM_ENOMEM;
		goto out;
	}
	/* the model as built; parallel wrappers shard it (shard_setup) */
	for (int i = 0; i < e.np; i++) /* embeddings first, head last */
		if (st->p[i].where == GM_STEP_EMBED)
			e.w[pix(&e, e.L, i)] = ealloc(
				&e, built_of(st, &st->p[i]), GM_SK_WEIGHT);
	for (uint64_t l = 0; l < e.L; l++)
		for (int i = 0; i < e.np; i++)
			if (st->p[i].where == GM_STEP_LAYER && !st->p[i].added)
				e.w[pix(&e, l, i)] = ealloc(
					&e, built_of(st, par(&e, l, i)),
					GM_SK_WEIGHT);
	for (int i = 0; i < e.np; i++)
		if (st->p[i].where == GM_STEP_HEAD)
			e.w[pix(&e, e.L, i)] = ealloc(
				&e, built_of(st, &st->p[i]), GM_SK_WEIGHT);
	/* then what is added to the built model (get_peft_model's
	 * adapters), block by block */
	for (uint64_t l = 0; l < e.L; l++)
		for (int i = 0; i < e.np; i++)
			if (st->p[i].where == GM_STEP_LAYER && st->p[i].added)
				e.w[pix(&e, l, i)] = ealloc(
					&e, built_of(st, par(&e, l, i)),
					GM_SK_WEIGHT);
	shard_setup(&e);
	if (st->ds.on && st->training)
		gm_ds_setup(&e);
	if (st->ddp && st->training)
		ddp_setup(&e);
	for (int k = 0, j = 0; k < st->n_comm; k++)
		for (uint64_t i = 0; i < st->comm[k].count; i++)
			e.comm[j++] = ealloc(&e, st->comm[k].bytes,
					     GM_SK_COMM);
	for (unsigned s = 1;
	     gm_step_next(sink, s, st->steps, st->steps_max, &e.err); s++) {
		if (sink->step)
			sink->step(sink->ctx, s);
		if (st->ddp && st->training && s == 2)
			ddp_rebuild(&e);
		gm_step_mark(sink, s, st->steps, st->steps_max, &e.err);
		if (s >= 2)
			gm_step_ids_order(e.freelist, e.nfree);
		if (st->training)
			train_step(&e);
		else
			infer_pass(&e);
	}
	rc = e.err;
	phase(sink, GM_SP_TEARDOWN);
	em_free_all(&e);
	if (!rc)
		rc = e.err;
out:
	free(e.w);
	free(e.g);
	free(e.c);
	free(e.bc);
	free(e.s);
	free(e.a);
	free(e.emb);
	free(e.embn);
	free(e.embp);
	free(e.cref);
	free(e.comm);
	free(e.bk);
	free(e.up);
	free(e.ug);
	free(e.gathered);
	free(e.own);
	free(e.bid);
	free(e.hid);
	free(e.kcur);
	free(e.kprev);
	free(e.gdef);
	free(e.hold);
	free(e.freelist);
	return rc;
}

bool gm_step_next(const struct gm_step_sink *sink, unsigned s, unsigned steps,
		  unsigned steps_max, int *err)
{
	int r;

	if (*err)
		return false;
	if (s <= steps)
		return true;
	if (s > steps_max || steps < 2 || !sink->steady)
		return false;
	r = sink->steady(sink->ctx, true);
	if (r < 0)
		*err = r;
	return r == 0;
}

void gm_step_mark(const struct gm_step_sink *sink, unsigned s, unsigned steps,
		  unsigned steps_max, int *err)
{
	int r;

	if (*err || s != steps || s < 2 || steps_max <= steps || !sink->steady)
		return;
	r = sink->steady(sink->ctx, false);
	if (r < 0)
		*err = r;
}

/* The counting sink of gm_step_peak: live bytes per id; a second run
 * stops at the peak's allocation and groups what is live. */
struct pk {
	double *bytes;          /* per id; < 0: not live */
	unsigned char *kind;
	uint32_t cap;
	double live, kind_live[GM_SK_N], row_live[GM_SR_N];
	unsigned mask;          /* kinds whose live bytes make the peak */
	enum gm_step_phase phase;
	uint64_t events, peak_event, stop_at;
	struct gm_step_peak *r;
	int pk_rc;              /* fed by the replay (gm_step_replay_peak):
				 * its first error; it is fed no more */
};

#define PK_STOP 1 /* not an error: the second run reached the peak */

/* Room for id in p's tables. */
static __attribute__((noinline)) int pk_grow(struct pk *p, uint32_t id)
{
	uint32_t n = p->cap ? 2 * p->cap : 1024;
	double *x;
	unsigned char *y;

	while (n <= id)
		n *= 2;
	x = realloc(p->bytes, n * sizeof(*x));
	if (!x)
		return GM_ENOMEM;
	for (uint32_t i = p->cap; i < n; i++)
		x[i] = -1;
	p->bytes = x;
	y = realloc(p->kind, n);
	if (!y)
		return GM_ENOMEM;
	p->kind = y;
	p->cap = n;
	return 0;
}

static int pk_alloc(void *ctx, uint32_t id, uint64_t bytes,
		    enum gm_step_kind kind)
{
	struct pk *p = ctx;

	if (id >= p->cap && pk_grow(p, id))
		return GM_ENOMEM;
	p->bytes[id] = (double)bytes;
	p->kind[id] = (unsigned char)kind;
	if (p->mask >> kind & 1)
		p->live += (double)bytes;
	p->kind_live[kind] += (double)bytes;
	{
		enum gm_step_row r = gm_step_kind_row(kind);

		p->row_live[r] += (double)bytes;
		if (p->row_live[r] > p->r->row_max[r])
			p->r->row_max[r] = p->row_live[r];
	}
	if (++p->events == p->stop_at)
		return PK_STOP;
	if (p->live > p->r->phase_peak[p->phase])
		p->r->phase_peak[p->phase] = p->live;
	if (p->live > p->r->peak) {
		p->r->peak = p->live;
		p->r->phase = p->phase;
		memcpy(p->r->kind, p->kind_live, sizeof(p->r->kind));
		p->peak_event = p->events;
	}
	return 0;
}

static int pk_free(void *ctx, uint32_t id)
{
	struct pk *p = ctx;

	if (p->mask >> p->kind[id] & 1)
		p->live -= p->bytes[id];
	p->kind_live[p->kind[id]] -= p->bytes[id];
	p->row_live[gm_step_kind_row(p->kind[id])] -= p->bytes[id];
	p->bytes[id] = -1;
	return 0;
}

static void pk_phase(void *ctx, enum gm_step_phase ph)
{
	((struct pk *)ctx)->phase = ph;
}

static int group_cmp(const void *a, const void *b)
{
	const double *x = a, *y = b; /* bytes, count, kind */
	double u = x[0] * x[1], v = y[0] * y[1];

	return u < v ? 1 : u > v ? -1 : 0;
}

/* Group the live ids of p by size and kind into r. */
static int pk_group(const struct pk *p, struct gm_step_peak *r)
{
	double (*g)[3] = NULL;
	size_t n = 0, cap = 0;

	for (uint32_t id = 0; id < p->cap; id++) {
		size_t j;
		if (p->bytes[id] < 0)
			continue;
		for (j = 0; j < n; j++)
			if (g[j][0] == p->bytes[id] && g[j][2] == p->kind[id])
				break;
		if (j == n) {
			if (n == cap) {
				size_t c2 = cap ? 2 * cap : 64;
				double (*x)[3] = realloc(g, c2 * sizeof(*g));
				if (!x) {
					free(g);
					return GM_ENOMEM;
				}
				g = x;
				cap = c2;
			}
			g[n][0] = p->bytes[id];
			g[n][1] = 0;
			g[n][2] = p->kind[id];
			n++;
		}
		g[j][1]++;
	}
	if (n)
		qsort(g, n, sizeof(*g), group_cmp);
	r->n_group = n < GM_STEP_GROUPS ? (int)n : GM_STEP_GROUPS;
	for (int j = 0; j < r->n_group; j++) {
		r->group[j].bytes = g[j][0];
		r->group[j].count = g[j][1];
		r->group[j].kind = (enum gm_step_kind)g[j][2];
	}
	free(g);
	return 0;
}

enum gm_step_row gm_step_kind_row(enum gm_step_kind k)
{
	switch (k) {
	case GM_SK_WEIGHT:
		return GM_SR_WEIGHTS;
	case GM_SK_GRAD:
	case GM_SK_REDUCE:
		return GM_SR_GRADIENTS;
	case GM_SK_STATE:
		return GM_SR_OPTIMIZER;
	case GM_SK_ACT:
		return GM_SR_ACTIVATIONS;
	case GM_SK_LOGITS:
		return GM_SR_LOGITS;
	case GM_SK_KV:
		return GM_SR_KV;
	case GM_SK_COMM:
	case GM_SK_GATHER:
	case GM_SK_RCOMM:
		return GM_SR_COMM;
	case GM_SK_WORKSPACE:
		return GM_SR_WORKSPACE;
	case GM_SK_TRANSIENT:
	case GM_SK_CACHE:
	case GM_SK_OPT_TMP:
	case GM_SK_RTMP:
	case GM_SK_N:
		break;
	}
	return GM_SR_TEMPORARY;
}

int gm_step_peak(const struct gm_step *st, unsigned kinds,
		 struct gm_step_peak *out)
{
	struct pk p = {.r = out, .mask = kinds & ~GM_STEP_NOGROUP};
	struct gm_step_sink sk = {&p, pk_alloc, pk_free, NULL, pk_phase,
				  NULL, NULL};
	int rc;

	memset(out, 0, sizeof(*out));
	rc = gm_step_emit(st, &sk);
	if (rc || (kinds & GM_STEP_NOGROUP))
		goto out;
	free(p.bytes);
	free(p.kind);
	p = (struct pk){.r = out, .mask = kinds & ~GM_STEP_NOGROUP,
			.stop_at = p.peak_event};
	{
		struct gm_step_peak keep = *out;
		rc = gm_step_emit(st, &sk);
		*out = keep;
	}
	if (rc == PK_STOP)
		rc = pk_group(&p, out);
out:
	free(p.bytes);
	free(p.kind);
	return rc;
}

/*
 * Serving a repeated run of small requests without the pool.
 *
 * Most calls of a long replay are small-pool requests (<= 1 MiB: a
 * decode step's activations, 40 layers x 2048 steps of them in a long
 * generation) that repeat one pattern layer after layer. The replay
 * sink answers such a run from a record instead of the pool where that
 * is provably what the pool would answer:
 *
 *  - The small pool of stream 0's arena decides (best fit by size and
 *    address among its free blocks, splits, merges with free neighbours;
 *    allocator/core/pool.c) from its own segments and blocks, plus the
 *    backend when it needs a segment. Two equal small-pool states
 *    (gm_pool_small_state: every segment, block and block state) answer
 *    the same requests (rounded sizes; for a free, the address) with the
 *    same blocks, and when the first run made no backend call
 *    (gm_pool_device_calls unchanged) neither does the second.
 *  - Other calls (large requests, other streams) touch the small pool
 *    only when an allocation releases cached segments before its retry
 *    (gm_pool_releases counts those) or reads the pool's allocated bytes
 *    when it fails (rp_refused).
 *  - Checkpoints: after each other allocation, a fingerprint of the small
 *    pool's live blocks (their count and a sum of a hash of their
 *    addresses, kept as the requests come: O(1) a checkpoint, where the
 *    whole state costs words in proportion to the blocks; a training
 *    step of 1,000 layers keeps thousands of small blocks live) is
 *    compared with the last LZ_CKPTS checkpoints'. Equal states have
 *    equal fingerprints, so only a checkpoint with an equal fingerprint
 *    can hold an equal state; the fingerprint proves nothing more.
 *    Where at most LZ_SNAP_BLOCKS small blocks are live (a decode step's
 *    activations) a checkpoint keeps the whole state too: the state now
 *    equal to one's word for word, with no backend call and no release
 *    since, makes the small requests logged since it a cycle, and the
 *    small pool is in its start state. Where one without the whole
 *    state has the fingerprint, the requests since it are a candidate:
 *    the state now is taken (the trial's start state), the next requests
 *    are made on the pool and compared with the candidate's; when they
 *    were its requests with its answers, with no backend call and no
 *    release among them, and the state after them is the start state
 *    again word for word, the cycle is proven by what the pool did.
 *  - Proven cycles are kept (LZ_KEPT, the least recently armed one
 *    replaced): at a checkpoint whose fingerprint is a kept cycle's
 *    start state's, the state is compared word for word and, equal,
 *    the cycle is armed again.
 *  - Armed (in the start state), each small request equal to the
 *    cycle's next one gets the recorded block without a pool call; the
 *    real pool lags behind by the requests served so far (pos). When the
 *    whole cycle was served, the state is its start state again, which
 *    the real pool holds: pos = 0. Another allocation made meanwhile is
 *    tried with gm_pool_alloc_try(): if it is served without releasing
 *    anything, its answer cannot depend on the small pool (the backend
 *    sees the same segments: none was made or freed in the cycle) and it
 *    changes nothing in it; if it would release, the lagging requests
 *    are first made on the real pool (lz_flush, each returning the
 *    recorded address), which brings it to the true state, and the
 *    allocation is made as in the full replay. A small request that
 *    differs from the cycle flushes too. Frees of other blocks touch no
 *    small-pool block and call no backend.
 * So every address, every reserved figure an event reports (no segment
 * is made or freed by a served request) and every peak are those of the
 * full replay (gm_step_replay_plain; tests/unit/planner/test_step_lazy.c
 * compares both on random and long sequences).
 */
struct lz_op {
	uint64_t x;             /* alloc: rounded size; free: address */
	uint64_t addr;          /* alloc: the block's address */
	bool alloc;
};

struct lz_words {
	uint64_t *w;
	size_t n, cap;
};

/* The small pool's live blocks: their count and the sum of a mix of
 * their addresses (equal states: equal fingerprints). */
struct lz_fp {
	uint64_t n, sum;
};

/* A proven cycle: its requests with their answers, its start (and end)
 * state, how often it was served whole and how often a request differed
 * from it. */
struct lz_cyc {
	struct lz_op *op;
	size_t n, cap;          /* n = 0: an empty slot */
	struct lz_words st;
	struct lz_fp fp;
	uint64_t passes, fails, used;
};

#define LZ_CKPTS 16 /* a power of two: the checkpoints are a ring */
/* buckets of the checkpoints' fingerprints (a power of two) */
#define LZ_FP_BUCKETS 64
#define LZ_LOG_MAX ((size_t)1 << 20)
/* proven cycles kept for arming again (a decode step runs a few in
 * turn: its layers', its head's) */
#define LZ_KEPT 4
/* a checkpoint keeps the whole state too where at most this many small
 * blocks are live, so that a cycle from it is proven at once */
#define LZ_SNAP_BLOCKS 256
/* ... while snapshots pay: after LZ_SNAP_TRIES of them with no cycle
 * found, one checkpoint in LZ_SNAP_EVERY takes one until a cycle is
 * found again (a checkpoint without it is proven by a trial instead:
 * the same answers, found another way; a training step's checkpoints
 * seldom start a cycle, a decode step's do) */
#define LZ_SNAP_TRIES 64
#define LZ_SNAP_EVERY 64
/* a failed cycle's length bounds the next one's for this many
 * checkpoints (lz.minlen), twice as many each time it is set again
 * before a cycle passes */
#define LZ_MINLEN_AGE 64
#define LZ_MINLEN_AGE_MAX (1u << 30)

struct lz {
	bool on;
	struct lz_op *log;      /* small requests since the oldest
				 * checkpoint, all made on the pool */
	size_t nlog, caplog;
	int nck;                /* checkpoints: where the log stood (as
				 * lbase counts), the small pool's
				 * fingerprint then; the j-th oldest in
				 * slot lz_ck(z, j) */
	int ck0;                /* the oldest one's slot */
	size_t lbase;           /* requests logged before log[0] since the
				 * last lz_reset(); the log holds those
				 * since the oldest checkpoint (and
				 * earlier ones until it is full) */
	size_t ck_at[LZ_CKPTS];
	struct lz_fp ck_fp[LZ_CKPTS];
	bool ck_full[LZ_CKPTS]; /* and its whole state (ck), taken where
				 * few blocks are live */
	struct lz_words ck[LZ_CKPTS];
	unsigned char ck_nfp[LZ_FP_BUCKETS]; /* checkpoints per bucket of
					       * lz_fp_bucket() */
	bool scanned;           /* the newest checkpoint's search found
				 * nothing without taking the state, and
				 * nothing changed since (lz_checkpoint) */
	unsigned snap_miss;     /* snapshots since a cycle was found */
	unsigned snap_skip;     /* checkpoints since one, backed off */
	struct lz_fp fp;        /* the small pool's live blocks now (served
				 * requests included) */
	struct lz_cyc kc[LZ_KEPT];
	int cur;                /* the armed one (or the last armed) */
	uint64_t arms;          /* LRU clock of kc[].used */
	bool armed;             /* the small pool is (virtually) in kc[cur],
				 * pos requests in */
	size_t pos;
	uint64_t *pbytes;       /* requested bytes of the lagging allocs */
	size_t cappb;
	bool trial;             /* a candidate (tcyc) is being made on the
				 * pool from state tst, tpos requests in */
	struct lz_op *tcyc;
	size_t ntcyc, captcyc, tpos;
	struct lz_words tst;
	struct lz_fp tst_fp;
	struct lz_words tmp;
	size_t minlen;          /* a new cycle must be longer ... */
	unsigned minlen_age;    /* ... for this many more checkpoints */
	unsigned age_next;      /* the next bound's (0: LZ_MINLEN_AGE) */
	uint64_t served;        /* requests answered from a cycle */
};

/* What the replay keeps of a live id (one line of a cache per id). */
struct rp_id {
	uint64_t addr;      /* the block's address */
	uint64_t req;       /* bytes asked */
	double reqd, rndd;  /* req and its block's size (PyTorch's
			     * allocated_bytes), as the live sums add them */
	unsigned char kind;
	bool small;         /* a small request lz follows */
	bool live;
};

/*
 * Checkpoints inside the steps that repeat the last one's calls (from
 * its gm_step_mark on, step.h): every `every` calls, the replay's whole
 * state (rp_state) is kept, those since the step's last device call only
 * (an earlier one lacks a segment the next step starts with) and none in
 * a step that made no device call (it usually ends where it began, and
 * no step follows), at most `keep` of them. Both are set where the first
 * repeated step begins, from the size W of the state then: every
 * max(RP_CK_EVERY, W / 2) calls (taking a state costs about as much as a
 * few calls per word), at most RP_CK_WORDS / W states (at most
 * RP_CK_MAX) a step. Where the next step's state at the same call equals
 * one kept, its remaining calls get the answers the last
 * step's got and end in the state that step ended in, which is the one
 * this step began in: the figures of the rest are those already counted
 * (each a maximum of equal values), and no further step is needed. The
 * replay then only counts the calls (muted). Not with an observer: its
 * events are made one by one.
 */
#define RP_CK_EVERY 1024
#define RP_CK_MAX 64
#define RP_CK_WORDS ((size_t)1 << 21) /* 16 MiB of states a step */

struct rp_ck {
	bool muted;         /* proven to repeat the last step to its end */
	uint64_t every;     /* calls between two checkpoints (0: unset) */
	unsigned keep;      /* states kept a step, at most */
	uint64_t calls;     /* calls since the repeated ones began */
	uint64_t next;      /* calls at the next checkpoint (0: none) */
	uint64_t dc0, dc;   /* device calls where the step began, at the
			     * last checkpoint */
	unsigned n_last, n; /* kept of the last step, of this one */
	uint64_t at_last[RP_CK_MAX], at[RP_CK_MAX];
	struct lz_words last[RP_CK_MAX], now[RP_CK_MAX];
};

/* The replay sink: ids to pool addresses, peaks tracked per step. */
struct rp {
	struct gm_pool *pool;
	struct rp_id *id;
	uint32_t cap;
	uint64_t small_max; /* larger requests are not small (lz) */
	unsigned step;
	enum gm_step_phase phase;
	double live, live_alloc;
	uint64_t nlive;
	struct gm_step_result *r;
	const struct gm_step_observer *obs;
	struct gm_backend *be;
	bool stop_at_oom;   /* gm_step_replay_fits(): end at the first */
	struct lz lz;       /* repeated runs of small requests */
	struct pk *pk;      /* gm_step_replay_peak(): the counting sink fed
			     * the same calls */
	/* (the counting sink's own error: struct pk's pk_rc) */
	uint64_t res_seen;  /* reserved after the last allocation */
	uint64_t used_max;  /* the simulated card's peak of used bytes */
	struct lz_words kept, now; /* rp_steady(): the replay's state */
	struct rp_ck ck;    /* the repeated steps' checkpoints */
	struct gm_step_sink *sink; /* the emitter's: muting swaps its calls */
};

/* Room for id in p's table. */
static __attribute__((noinline)) int rp_grow(struct rp *p, uint32_t id)
{
	uint32_t n = p->cap ? 2 * p->cap : 1024;
	struct rp_id *x;

	while (n <= id)
		n *= 2;
	x = realloc(p->id, n * sizeof(*x));
	if (!x)
		return GM_ENOMEM;
	memset(x + p->cap, 0, (n - p->cap) * sizeof(*x));
	p->id = x;
	p->cap = n;
	return 0;
}

/*
 * A request the pool refused after freeing its cache and retrying (as
 * PyTorch's DeviceCachingAllocator::malloc does: alloc_block, then
 * release_available_cached_blocks, which frees nothing unless
 * max_split_size_mb is set, then release_cached_blocks and alloc_block
 * again; c10/cuda/CUDACachingAllocator.cpp at pytorch/pytorch 001074d2):
 * the run would stop here with an out-of-memory error. The first one is
 * recorded; then the simulated card grows by what the device lacked and
 * the request is made again, so the replay goes on to the step's end and
 * the card's final size is the smallest this replay got through on.
 */
static int rp_refused(struct rp *p, uint64_t bytes, uintptr_t stream,
		      uint64_t *a)
{
	int rc = GM_EDEVNOMEM;

	if (!p->r->out_of_memory) {
		struct gm_pool_stats ps;

		/* allocated as torch.cuda.memory_allocated() counts it: the
		 * live blocks, as the pool carved them */
		gm_pool_get_stats(p->pool, &ps);
		p->r->out_of_memory = true;
		p->r->oom_requested = (double)bytes;
		p->r->oom_allocated = (double)ps.allocated_bytes.current;
		p->r->oom_reserved = (double)gm_pool_reserved(p->pool);
	}
	if (p->stop_at_oom)
		return GM_EDEVNOMEM;
	for (int i = 0; i < 4 && (rc == GM_EDEVNOMEM || rc == GM_ELIMIT);
	     i++) {
		uint64_t n = gm_sim_short_by(p->be);

		if (!n) /* refused for another reason: ask for it whole */
			n = gm_pool_round_size(p->pool, bytes) + 20 * GM_MiB;
		rc = gm_sim_grow(p->be, n);
		if (rc)
			return rc;
		rc = gm_pool_alloc(p->pool, bytes, stream, a);
	}
	return rc;
}

static int lz_state(struct gm_pool *pool, struct lz_words *o)
{
	size_t n = gm_pool_small_state(pool, 0, o->w, o->cap);

	if (n > o->cap) {
		size_t c = n + n / 2 + 64;
		uint64_t *w = realloc(o->w, c * sizeof(*w));

		if (!w)
			return GM_ENOMEM;
		o->w = w;
		o->cap = c;
		n = gm_pool_small_state(pool, 0, o->w, o->cap);
	}
	o->n = n;
	return 0;
}

/* splitmix64's finalizer: a block address spread over 64 bits */
static uint64_t lz_mix(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static void lz_fp_put(struct lz *z, bool alloc, uint64_t addr)
{
	uint64_t h = lz_mix(addr);

	if (alloc) {
		z->fp.n++;
		z->fp.sum += h;
	} else {
		z->fp.n--;
		z->fp.sum -= h;
	}
}

static bool lz_fp_eq(struct lz_fp a, struct lz_fp b)
{
	return a.n == b.n && a.sum == b.sum;
}

/* Equal fingerprints fall in the same bucket: a checkpoint's search
 * looks at its checkpoints only when one is in the bucket now's falls
 * in (a training step's checkpoints seldom match: O(1) instead of
 * LZ_CKPTS comparisons). */
static unsigned lz_fp_bucket(struct lz_fp f)
{
	return (unsigned)((f.sum ^ f.n) & (LZ_FP_BUCKETS - 1));
}

/* The slot of the j-th oldest checkpoint. */
static int lz_ck(const struct lz *z, int j)
{
	return (z->ck0 + j) & (LZ_CKPTS - 1);
}

/* Requests logged since the j-th oldest checkpoint. */
static size_t lz_since(const struct lz *z, int j)
{
	return z->lbase + z->nlog - z->ck_at[lz_ck(z, j)];
}

/* The log from the j-th oldest checkpoint on. */
static const struct lz_op *lz_log_at(const struct lz *z, int j)
{
	return z->log + (z->ck_at[lz_ck(z, j)] - z->lbase);
}

/* Append a checkpoint (nck < LZ_CKPTS) at the log's end with
 * fingerprint f; its whole state is in slot lz_ck(z, nck) when full. */
static void lz_ck_push(struct lz *z, struct lz_fp f, bool full)
{
	int k = lz_ck(z, z->nck++);

	z->ck_fp[k] = f;
	z->ck_full[k] = full;
	z->ck_at[k] = z->lbase + z->nlog;
	z->ck_nfp[lz_fp_bucket(f)]++;
}

static bool lz_same(const struct lz_words *a, const struct lz_words *b)
{
	return a->n == b->n &&
	       (!a->n || !memcmp(a->w, b->w, a->n * sizeof(*a->w)));
}

static int lz_copy(struct lz_words *to, const struct lz_words *from)
{
	if (from->n > to->cap) {
		uint64_t *w = realloc(to->w, from->n * sizeof(*w));

		if (!w)
			return GM_ENOMEM;
		to->w = w;
		to->cap = from->n;
	}
	if (from->n)
		memcpy(to->w, from->w, from->n * sizeof(*to->w));
	to->n = from->n;
	return 0;
}

static void lz_swap(struct lz_words *a, struct lz_words *b)
{
	struct lz_words t = *a;

	*a = *b;
	*b = t;
}

/* Forget the checkpoints, the log and a trial (the state jumped, or the
 * log is too long). */
static void lz_reset(struct lz *z)
{
	if (z->nck)
		memset(z->ck_nfp, 0, sizeof(z->ck_nfp));
	z->nck = 0;
	z->ck0 = 0;
	z->nlog = 0;
	z->lbase = 0;
	z->trial = false;
	z->scanned = false;
}

static void lz_log(struct lz *z, bool alloc, uint64_t x, uint64_t addr)
{
	if (!z->nck)
		return; /* nothing to find a cycle from */
	z->scanned = false;
	if (z->nlog == z->caplog) {
		/* what the oldest checkpoint no longer needs goes first */
		size_t d = z->ck_at[z->ck0] - z->lbase;

		if (d) {
			memmove(z->log, z->log + d,
				(z->nlog - d) * sizeof(*z->log));
			z->nlog -= d;
			z->lbase += d;
		}
	}
	if (z->nlog == z->caplog) {
		size_t c = z->caplog ? 2 * z->caplog : 1024;
		struct lz_op *l;

		if (c > LZ_LOG_MAX ||
		    !(l = realloc(z->log, c * sizeof(*l)))) {
			lz_reset(z);
			return;
		}
		z->log = l;
		z->caplog = c;
	}
	z->log[z->nlog++] = (struct lz_op){x, addr, alloc};
}

/* minlen was set: it holds for the next bound's checkpoints, and
 * the one after it for twice as many (a shorter cycle found again only
 * to fail again costs a trial each time) */
static void lz_bound(struct lz *z)
{
	unsigned a = z->age_next ? z->age_next : LZ_MINLEN_AGE;

	z->minlen_age = a;
	z->age_next = a < LZ_MINLEN_AGE_MAX ? 2 * a : a;
}

/* Make the lagging requests (the armed cycle's first pos) on the real
 * pool; the log then starts at the cycle's start state with them. */
static int lz_flush(struct rp *p)
{
	struct lz *z = &p->lz;
	struct lz_cyc *c = &z->kc[z->cur];
	uint64_t dc = gm_pool_device_calls(p->pool), a;
	int rc;

	z->armed = false;
	lz_reset(z);
	lz_ck_push(z, c->fp, c->fp.n <= LZ_SNAP_BLOCKS);
	if (z->ck_full[0] && (rc = lz_copy(&z->ck[0], &c->st)))
		return rc;
	for (size_t i = 0; i < z->pos; i++) {
		const struct lz_op *o = &c->op[i];

		if (o->alloc) {
			rc = gm_pool_alloc(p->pool, z->pbytes[i], 0, &a);
			if (!rc && a != o->addr)
				rc = GM_EINVAL; /* not the recorded block:
						 * a bug, never a figure */
		} else {
			rc = gm_pool_free(p->pool, o->x);
		}
		if (rc)
			return rc;
		lz_log(z, o->alloc, o->x, o->addr);
	}
	z->pos = 0;
	/* A cycle that failed more often than it passed is one of the
	 * pool's states but not of the requests (a layer's tensors swap
	 * blocks every other layer): dropped, a longer one is looked for.
	 * Else it is kept, to be armed again in its start state (a decode
	 * step's own requests end its layers' run). */
	z->minlen = 0;
	if (++c->fails > c->passes) {
		z->minlen = c->n;
		lz_bound(z);
		c->n = 0;
	}
	return gm_pool_device_calls(p->pool) != dc ? GM_EINVAL : 0;
}

/* A small request while armed: answered from the cycle (*addr for an
 * alloc; true), else the lagging requests are flushed (false, *rc). */
static bool lz_serve(struct rp *p, bool alloc, uint64_t x, uint64_t bytes,
		     uint64_t *addr, int *rc)
{
	struct lz *z = &p->lz;
	struct lz_cyc *c = &z->kc[z->cur];
	const struct lz_op *o = &c->op[z->pos];

	*rc = 0;
	if (o->alloc != alloc || o->x != x) {
		*rc = lz_flush(p);
		return false;
	}
	if (alloc) {
		if (z->pos >= z->cappb) {
			size_t n = z->cappb ? 2 * z->cappb : 1024;
			uint64_t *b;

			while (n <= z->pos)
				n *= 2;
			b = realloc(z->pbytes, n * sizeof(*b));
			if (!b) {
				*rc = lz_flush(p);
				return false;
			}
			z->pbytes = b;
			z->cappb = n;
		}
		z->pbytes[z->pos] = bytes;
		*addr = o->addr;
	}
	z->served++;
	if (++z->pos == c->n) {
		z->pos = 0; /* back in the start state, which the pool holds */
		c->passes++;
		z->age_next = 0;
	}
	return true;
}

/* Arm kept cycle k: the small pool is in its start state. */
static void lz_arm(struct lz *z, int k)
{
	z->cur = k;
	z->kc[k].used = ++z->arms;
	z->armed = true;
	z->pos = 0;
	z->snap_miss = 0;
	lz_reset(z);
}

/* The trial's candidate is proven (made on the pool from tst, with its
 * answers, back in tst): kept in an empty slot or the least recently
 * armed one's, and armed. */
static void lz_keep(struct lz *z)
{
	struct lz_cyc *c;
	struct lz_op *op;
	size_t cap;
	int k = 0;

	for (int i = 1; i < LZ_KEPT && z->kc[k].n; i++)
		if (!z->kc[i].n || z->kc[i].used < z->kc[k].used)
			k = i;
	c = &z->kc[k];
	op = c->op;
	cap = c->cap;
	c->op = z->tcyc;
	c->cap = z->captcyc;
	c->n = z->ntcyc;
	z->tcyc = op;
	z->captcyc = cap;
	lz_swap(&c->st, &z->tst);
	c->fp = z->tst_fp;
	c->passes = c->fails = 0;
	lz_arm(z, k);
}

/* The state (in tmp) is checkpoint j's: the requests logged since it
 * are a cycle from it, kept and armed. */
static int lz_found(struct lz *z, int j)
{
	size_t n = lz_since(z, j);

	if (n > z->captcyc) {
		struct lz_op *c = realloc(z->tcyc, n * sizeof(*c));

		if (!c)
			return GM_ENOMEM;
		z->tcyc = c;
		z->captcyc = n;
	}
	memcpy(z->tcyc, lz_log_at(z, j), n * sizeof(*z->tcyc));
	z->ntcyc = n;
	lz_swap(&z->tst, &z->tmp);
	z->tst_fp = z->fp;
	lz_keep(z);
	return 0;
}

/* A request made on the pool during a trial: the candidate's next one
 * with its answer, else the trial ends; after its last one, the state
 * is compared with the start state: equal, the cycle is kept and
 * armed. */
static int lz_trial(struct rp *p, bool alloc, uint64_t x, uint64_t addr)
{
	struct lz *z = &p->lz;
	const struct lz_op *o = &z->tcyc[z->tpos];
	int rc;

	if (o->alloc != alloc || o->x != x || (alloc && o->addr != addr)) {
		/* not the candidate's requests: a longer one is looked for */
		z->trial = false;
		if (z->ntcyc > z->minlen)
			z->minlen = z->ntcyc;
		lz_bound(z);
		return 0;
	}
	if (++z->tpos < z->ntcyc)
		return 0;
	z->trial = false;
	if (!lz_fp_eq(z->fp, z->tst_fp))
		return 0;
	if ((rc = lz_state(p->pool, &z->tmp)))
		return rc;
	if (lz_same(&z->tmp, &z->tst))
		lz_keep(z);
	return 0;
}

/* A small request made on the pool (dc: device calls before it). */
static int lz_made(struct rp *p, uint64_t dc, bool alloc, uint64_t x,
		   uint64_t addr)
{
	if (gm_pool_device_calls(p->pool) != dc) {
		lz_reset(&p->lz); /* the backend was asked: no cycle
				   * through here */
		return 0;
	}
	lz_log(&p->lz, alloc, x, addr);
	return p->lz.trial ? lz_trial(p, alloc, x, addr) : 0;
}

/* Whether a checkpoint takes the whole state (LZ_SNAP_TRIES). */
static bool lz_snap_due(struct lz *z)
{
	return z->snap_miss < LZ_SNAP_TRIES ||
	       ++z->snap_skip % LZ_SNAP_EVERY == 0;
}

/* After another allocation (rel: releases before it): a checkpoint;
 * armed when the small pool is back in a kept cycle's start state, a
 * trial begun when its fingerprint is one of the checkpoints'. */
static int lz_checkpoint(struct rp *p, uint64_t rel)
{
	struct lz *z = &p->lz;
	bool have = false;      /* the state is in tmp */
	int rc, j;

	if (gm_pool_releases(p->pool) != rel) {
		/* it released cached segments (after a flush, or in the
		 * start state): the small pool changed; start again */
		z->armed = false;
		z->pos = 0;
		lz_reset(z);
	}
	if (z->armed || z->trial)
		return 0;
	/* The requests that made a cycle fail may be past (a decode step
	 * whose card filled changes the blocks its layers get): after
	 * LZ_MINLEN_AGE checkpoints a shorter cycle may be found again */
	if (z->minlen && !--z->minlen_age) {
		z->minlen = 0;
		z->scanned = false;
	}
	/* Nothing logged, kept, reset or armed since the newest checkpoint,
	 * whose search found nothing without taking the state: this one's
	 * would find nothing the same way (the same fingerprint, the same
	 * requests since each older checkpoint, the same kept cycles and
	 * minlen; the newest has none since it) */
	if (z->scanned)
		goto push;
	for (int k = 0; k < LZ_KEPT; k++) {
		if (!z->kc[k].n || !lz_fp_eq(z->fp, z->kc[k].fp))
			continue;
		if (!have && (rc = lz_state(p->pool, &z->tmp)))
			return rc;
		have = true;
		if (lz_same(&z->tmp, &z->kc[k].st)) {
			lz_arm(z, k);
			return 0;
		}
	}
	j = z->ck_nfp[lz_fp_bucket(z->fp)] ? z->nck - 1 : -1;
	for (; j >= 0; j--) {
		int k = lz_ck(z, j);

		if (!lz_fp_eq(z->fp, z->ck_fp[k]) ||
		    lz_since(z, j) <= z->minlen)
			continue;
		if (!z->ck_full[k])
			break; /* a candidate: tried below */
		if (!have && (rc = lz_state(p->pool, &z->tmp)))
			return rc;
		have = true;
		if (lz_same(&z->tmp, &z->ck[k]))
			return lz_found(z, j);
	}
	if (j >= 0) {
		size_t n = lz_since(z, j);

		if (n > z->captcyc) {
			struct lz_op *c = realloc(z->tcyc, n * sizeof(*c));

			if (!c)
				return GM_ENOMEM;
			z->tcyc = c;
			z->captcyc = n;
		}
		memcpy(z->tcyc, lz_log_at(z, j), n * sizeof(*z->tcyc));
		if (have)
			lz_swap(&z->tst, &z->tmp);
		else if ((rc = lz_state(p->pool, &z->tst)))
			return rc;
		lz_reset(z);
		z->ntcyc = n;
		z->tst_fp = z->fp;
		z->tpos = 0;
		z->trial = true;
		return 0;
	}
push:
	if (z->nck == LZ_CKPTS) {
		/* drop the oldest: its slot (and its state's words) takes
		 * the new one; the log before the second oldest is dropped
		 * when the log is full (lz_log) */
		z->ck_nfp[lz_fp_bucket(z->ck_fp[z->ck0])]--;
		z->ck0 = lz_ck(z, 1);
		z->nck--;
	}
	{
		bool full = z->fp.n <= LZ_SNAP_BLOCKS &&
			    (have || lz_snap_due(z));
		int k = lz_ck(z, z->nck);

		if (full) {
			if (!have && (rc = lz_state(p->pool, &z->tmp)))
				return rc;
			z->snap_miss++;
			z->snap_skip = 0;
			lz_swap(&z->ck[k], &z->tmp);
		}
		lz_ck_push(z, z->fp, full);
		z->scanned = !have;
	}
	return 0;
}

static void lz_free_all(struct lz *z)
{
	free(z->log);
	for (int k = 0; k < LZ_KEPT; k++) {
		free(z->kc[k].op);
		free(z->kc[k].st.w);
	}
	for (int k = 0; k < LZ_CKPTS; k++)
		free(z->ck[k].w);
	free(z->tcyc);
	free(z->pbytes);
	free(z->tst.w);
	free(z->tmp.w);
}

static int rp_ck_take(struct rp *p);

/* The sink's calls once muted (struct rp_ck): counted, not replayed. */
static int rp_alloc_muted(void *ctx, uint32_t id, uint64_t bytes,
			  enum gm_step_kind kind)
{
	struct rp *p = ctx;

	p->r->allocations++;
	p->r->skipped++;
	if (p->pk && !p->pk->pk_rc)
		p->pk->pk_rc = pk_alloc(p->pk, id, bytes, kind);
	return 0;
}

static int rp_free_muted(void *ctx, uint32_t id)
{
	struct rp *p = ctx;

	p->r->skipped++;
	if (p->pk && !p->pk->pk_rc)
		p->pk->pk_rc = pk_free(p->pk, id);
	return 0;
}

/* After each call: the checkpoints of a repeated step (rp_ck_take). */
static inline int rp_ck_call(struct rp *p)
{
	return ++p->ck.calls == p->ck.next ? rp_ck_take(p) : 0;
}

static int rp_alloc(void *ctx, uint32_t id, uint64_t bytes,
		    enum gm_step_kind kind)
{
	struct rp *p = ctx;
	struct rp_id *d;
	uint64_t a, res, rnd;
	uintptr_t stream;
	bool small;
	int rc = 0;

	if (id >= p->cap && (rc = rp_grow(p, id)))
		return rc;
	/* FSDP's collectives allocate on their own streams (step.h) */
	stream = gm_step_kind_stream(kind);
	/* gm_pool_is_small(): 1 <= bytes <= gm_pool_small_max() (0 with lz
	 * off: none) */
	small = !stream && bytes - 1 < p->small_max;
	rnd = gm_pool_round_size(p->pool, bytes);
	if (small) {
		uint64_t x = rnd, dc;

		if (p->lz.armed && lz_serve(p, true, x, bytes, &a, &rc)) {
			lz_fp_put(&p->lz, true, a);
			goto got;
		}
		if (rc)
			return rc;
		dc = gm_pool_device_calls(p->pool);
		rc = gm_pool_alloc(p->pool, bytes, stream, &a);
		if (rc == GM_EDEVNOMEM || rc == GM_ELIMIT)
			rc = rp_refused(p, bytes, stream, &a);
		if (rc)
			return rc;
		lz_fp_put(&p->lz, true, a);
		if ((rc = lz_made(p, dc, true, x, a)))
			return rc;
	} else {
		uint64_t rel = p->lz.on ? gm_pool_releases(p->pool) : 0;

		if (p->lz.armed && p->lz.pos) {
			/* lagging: only an answer that releases nothing */
			rc = gm_pool_alloc_try(p->pool, bytes, stream, &a);
			if ((rc == GM_EDEVNOMEM || rc == GM_ELIMIT) &&
			    !(rc = lz_flush(p)))
				rc = gm_pool_alloc(p->pool, bytes, stream, &a);
		} else {
			rc = gm_pool_alloc(p->pool, bytes, stream, &a);
		}
		if (rc == GM_EDEVNOMEM || rc == GM_ELIMIT)
			rc = rp_refused(p, bytes, stream, &a);
		if (rc)
			return rc;
		if (p->lz.on && (rc = lz_checkpoint(p, rel)))
			return rc;
		/* the block's size, as PyTorch's allocated_bytes counts it:
		 * a large block keeps a remainder it does not split off */
		if ((rc = gm_pool_lookup(p->pool, a, NULL, &rnd)))
			return rc;
	}
got:
	if (p->obs) {
		struct gm_step_event ev = {kind, p->phase, p->step,
					   gm_pool_reserved(p->pool)};
		rc = p->obs->event(p->obs->ctx, true, a, bytes, &ev);
		if (rc)
			return rc;
	}
	d = &p->id[id];
	d->addr = a;
	d->req = bytes;
	d->reqd = (double)bytes;
	d->rndd = (double)rnd;
	d->kind = (unsigned char)kind;
	d->small = small;
	d->live = true;
	p->live += d->reqd;
	p->live_alloc += d->rndd;
	p->nlive++;
	p->r->allocations++;
	if (p->live > p->r->peak_requested) {
		p->r->peak_requested = p->live;
		p->r->live_at_peak = p->nlive;
	}
	if (p->live_alloc > p->r->peak_allocated)
		p->r->peak_allocated = p->live_alloc;
	res = gm_pool_reserved(p->pool);
	/* unchanged since the last allocation (frees release no segment):
	 * not above the peak that allocation saw */
	if (res != p->res_seen) { /* a segment was made (or freed) */
		uint64_t u = gm_sim_used(p->be);

		p->res_seen = res;
		if (u > p->used_max)
			p->used_max = u;
		if ((double)res > p->r->peak_reserved) {
			p->r->peak_reserved = (double)res;
			p->r->peak_reserved_step = p->step;
		}
	}
	if (p->pk && !p->pk->pk_rc)
		p->pk->pk_rc = pk_alloc(p->pk, id, bytes, kind);
	return rp_ck_call(p);
}

static int rp_free(void *ctx, uint32_t id)
{
	struct rp *p = ctx;
	const struct rp_id *d = &p->id[id];
	int rc = 0;

	p->id[id].live = false;
	p->live -= d->reqd;
	p->live_alloc -= d->rndd;
	p->nlive--;
	if (d->small) { /* lz on, stream 0, the small pool */
		uint64_t dc;

		if (p->lz.armed &&
		    lz_serve(p, false, d->addr, 0, NULL, &rc)) {
			lz_fp_put(&p->lz, false, d->addr);
			goto done;
		}
		if (rc)
			return rc;
		dc = gm_pool_device_calls(p->pool);
		rc = gm_pool_free(p->pool, d->addr);
		if (!rc) {
			lz_fp_put(&p->lz, false, d->addr);
			rc = lz_made(p, dc, false, d->addr, 0);
		}
	} else {
		rc = gm_pool_free(p->pool, d->addr);
	}
done:
	if (!rc && p->pk && !p->pk->pk_rc)
		p->pk->pk_rc = pk_free(p->pk, id);
	if (!rc && p->obs) {
		struct gm_step_event ev = {d->kind, p->phase, p->step,
					   gm_pool_reserved(p->pool)};
		rc = p->obs->event(p->obs->ctx, false, d->addr, d->req, &ev);
	}
	return rc ? rc : rp_ck_call(p);
}

/* torch.cuda.empty_cache(): the lagging requests of an armed cycle made
 * first, the small-pool shortcut's checkpoints forgotten (the pool's
 * state jumps), then the release. */
static int rp_empty_cache(void *ctx)
{
	struct rp *p = ctx;
	int rc;

	if (p->lz.armed && p->lz.pos && (rc = lz_flush(p)))
		return rc;
	p->lz.armed = false;
	lz_reset(&p->lz);
	if ((rc = gm_pool_release_cached(p->pool)))
		return rc;
	p->res_seen = gm_pool_reserved(p->pool);
	if (p->obs && p->obs->empty_cache) {
		struct gm_step_event ev = {GM_SK_TRANSIENT, p->phase, p->step,
					   p->res_seen};
		rc = p->obs->empty_cache(p->obs->ctx, &ev);
	}
	return rc;
}

static void rp_step(void *ctx, unsigned step)
{
	struct rp *p = ctx;

	p->step = step;
	p->r->steps = step;
}

/* Append n words of f(pool or backend, buf, cap) to o. */
static int words_put(struct lz_words *o, size_t (*f)(void *, uint64_t *,
						     size_t), void *x)
{
	size_t n = f(x, o->w ? o->w + o->n : NULL, o->cap - o->n);

	if (n > o->cap - o->n) {
		size_t c = o->n + n + (o->n + n) / 2 + 64;
		uint64_t *w = realloc(o->w, c * sizeof(*w));

		if (!w)
			return GM_ENOMEM;
		o->w = w;
		o->cap = c;
		n = f(x, o->w + o->n, o->cap - o->n);
	}
	o->n += n;
	return 0;
}

static size_t pool_words(void *x, uint64_t *buf, size_t cap)
{
	return gm_pool_state(x, buf, cap);
}

static size_t sim_words(void *x, uint64_t *buf, size_t cap)
{
	return gm_sim_state(x, buf, cap);
}

/* The live ids with their blocks' addresses. */
static size_t id_words(void *x, uint64_t *buf, size_t cap)
{
	const struct rp *p = x;
	size_t n = 0;

	for (uint32_t i = 0; i < p->cap; i++)
		if (p->id[i].live) {
			if (n + 2 <= cap) {
				buf[n] = i;
				buf[n + 1] = p->id[i].addr;
			}
			n += 2;
		}
	return n;
}

/* The replay's whole state into o: the pool (an armed cycle's lagging
 * requests made first), the simulated card, which id holds which
 * block. The pool and the card answer every call from it alone. */
static int rp_state(struct rp *p, struct lz_words *o)
{
	int rc;

	if (p->lz.armed && p->lz.pos && (rc = lz_flush(p)))
		return rc;
	o->n = 0;
	if ((rc = words_put(o, pool_words, p->pool)) ||
	    (rc = words_put(o, sim_words, p->be)) ||
	    (rc = words_put(o, id_words, p)))
		return rc;
	return 0;
}

static bool words_equal(const struct lz_words *a, const struct lz_words *b)
{
	return a->n == b->n && !memcmp(a->w, b->w, a->n * sizeof(*a->w));
}

/* Where a repeated step's calls begin: this step's checkpoints become
 * the last step's (struct rp_ck). */
static void rp_ck_begin(struct rp *p)
{
	struct rp_ck *c = &p->ck;

	if (p->obs)
		return;
	if (!c->every) {
		size_t w = p->kept.n ? p->kept.n : 1;

		c->every = w / 2 > RP_CK_EVERY ? w / 2 : RP_CK_EVERY;
		c->keep = RP_CK_WORDS / w < RP_CK_MAX ?
			  (unsigned)(RP_CK_WORDS / w) : RP_CK_MAX;
		if (!c->keep)
			c->keep = 1;
	}
	for (unsigned i = 0; i < RP_CK_MAX; i++) {
		struct lz_words t = c->last[i];

		c->last[i] = c->now[i];
		c->now[i] = t;
		c->at_last[i] = c->at[i];
	}
	c->n_last = c->n;
	c->n = 0;
	c->calls = 0;
	c->next = c->every;
	c->dc0 = c->dc = gm_pool_device_calls(p->pool);
}

/* A checkpoint: keep the state, or mute the replay where it equals the
 * last step's there. */
static __attribute__((noinline)) int rp_ck_take(struct rp *p)
{
	struct rp_ck *c = &p->ck;
	struct lz_words *o;
	uint64_t dc;
	unsigned i;
	bool keep;
	int rc;

	c->next += c->every;
	dc = gm_pool_device_calls(p->pool);
	if (dc != c->dc) {
		c->n = 0;
		c->dc = dc;
	}
	for (i = 0; i < c->n_last && c->at_last[i] != c->calls; i++)
		;
	/* a step that made no device call usually ends where it began,
	 * and then no step follows to use its states */
	keep = c->n < c->keep && dc != c->dc0;
	if (i == c->n_last && !keep)
		return 0;
	o = keep ? &c->now[c->n] : &p->now; /* p->now: rp_steady's scratch */
	if ((rc = rp_state(p, o)))
		return rc;
	if (i < c->n_last && words_equal(o, &c->last[i])) {
		c->muted = true;
		p->sink->alloc = rp_alloc_muted;
		p->sink->free = rp_free_muted;
		return 0;
	}
	if (keep)
		c->at[c->n++] = c->calls;
	return 0;
}

/*
 * The emitter's steady(): the whole replay's state now (the pool, the
 * simulated card, which id holds which block) compared with the one kept
 * at the last call, and kept. The pool and the card answer every call
 * from that state alone, so where the two are equal and the emitter's
 * next step repeats the calls of the last, the next step repeats its
 * answers too, and so does every step after it. An armed cycle of small
 * requests is made on the pool first, so that the pool holds its state.
 * A replay that ran out of memory has its answer: no more steps (the
 * card it grew to is the smallest the steps so far got through on).
 */
static int rp_steady(void *ctx, bool compare)
{
	struct rp *p = ctx;
	struct lz_words t;
	int rc;

	if (compare && (p->r->out_of_memory || p->ck.muted))
		return 1;
	if ((rc = rp_state(p, &p->now)))
		return rc;
	rc = compare && words_equal(&p->now, &p->kept);
	t = p->kept;
	p->kept = p->now;
	p->now = t;
	if (!rc)
		rp_ck_begin(p);
	return rc;
}

static void rp_phase(void *ctx, enum gm_step_phase ph)
{
	struct rp *p = ctx;

	p->phase = ph;
	if (p->pk)
		pk_phase(p->pk, ph);
}

/*
 * Replays kept for another plan of the same step (gpumem fit plans each
 * candidate on every card of the catalog, and plans a card's answers
 * again for their figures). A replay depends on the step, the card's
 * size and, from the first out-of-memory on, on whether it stops there;
 * the simulated card enters it only through its charges. So a replay
 * answers a plan of the same step on a card of the same size, with the
 * same stop where it ran out of memory (any stop where it did not). Where
 * none of its charges was refused (no retry or release of cached
 * segments, no out-of-memory), it made the calls, got the answers and
 * reached the figures that a replay on any card on which each of those
 * charges fits would: it answers every card of at least the peak of used
 * bytes it reached (used_max), each with its own size (card_needed). The
 * key is the whole step (without a pointer whose data could change under
 * it: Megatron-LM's steps are not kept); only replays without an
 * observer are kept or answered.
 */
#define RP_MEMO 32

static struct rp_memo {
	bool on;
	bool any_card;      /* answers every card of at least used_max */
	bool stop;          /* it stopped at its out-of-memory */
	int rc;             /* what it returned: 0 or GM_EDEVNOMEM */
	struct gm_step st;
	struct gm_step_result r;
	uint64_t total;     /* the card it ran on */
	uint64_t used_max;
} rp_memo[RP_MEMO];
static unsigned rp_memo_next;
/* gpumem fit plans its GPUs on several threads at once */
static pthread_mutex_t rp_memo_lock = PTHREAD_MUTEX_INITIALIZER;

/* Whether m answers a replay of its step on a card of total bytes that
 * stops at its out-of-memory or not. */
static bool memo_valid(const struct rp_memo *m, uint64_t total, bool stop)
{
	if (m->any_card)
		return total >= m->used_max;
	return total == m->total && (stop == m->stop || !m->r.out_of_memory);
}

/* With rp_memo_lock held: the entry of st that answers (total, stop),
 * or NULL. */
static struct rp_memo *memo_find(const struct gm_step *st, uint64_t total,
				 bool stop)
{
	for (unsigned i = 0; i < RP_MEMO; i++)
		if (rp_memo[i].on && memo_valid(&rp_memo[i], total, stop) &&
		    !memcmp(&rp_memo[i].st, st, sizeof(*st)))
			return &rp_memo[i];
	return NULL;
}

/* Keep a replay of st on a card of total bytes that returned rc (0, or
 * GM_EDEVNOMEM where it stopped at its out-of-memory); any_card as in
 * struct rp_memo. */
static void memo_keep(const struct gm_step *st, const struct gm_step_result *r,
		      int rc, uint64_t total, bool stop, bool any_card,
		      uint64_t used_max)
{
	struct rp_memo *m;

	pthread_mutex_lock(&rp_memo_lock);
	m = memo_find(st, total, stop);
	if (!m) {
		m = &rp_memo[rp_memo_next];
		rp_memo_next = (rp_memo_next + 1) % RP_MEMO;
	}
	*m = (struct rp_memo){.on = true, .any_card = any_card, .stop = stop,
			      .rc = rc, .st = *st, .r = *r, .total = total,
			      .used_max = used_max};
	pthread_mutex_unlock(&rp_memo_lock);
}

/* A kept replay of st that answers (total, stop) into *out and its
 * return value into *rc. */
static bool memo_answer(const struct gm_step *st, uint64_t total, bool stop,
			struct gm_step_result *out, int *rc)
{
	const struct rp_memo *m;

	pthread_mutex_lock(&rp_memo_lock);
	m = memo_find(st, total, stop);
	if (m) {
		*out = m->r;
		*rc = m->rc;
		if (m->any_card)
			out->card_needed = (double)total;
	}
	pthread_mutex_unlock(&rp_memo_lock);
	return m != NULL;
}

static int replay_once(const struct gm_step *st, uint64_t total,
		       struct gm_step_result *out,
		       const struct gm_step_observer *obs, bool stop,
		       bool lazy, struct pk *pk)
{
	bool memo = lazy && !obs && !st->megatron;

	struct gm_sim_options so = {.total_bytes = total,
				    .placement = GM_SIM_PLACE_DRIVER};
	/* PyTorch: FSDP's streams keep their cached blocks (step.h); the
	 * replay makes its calls from this thread alone */
	struct gm_pool_options po = {.no_cross_stream = true,
				     .single_thread = true};
	struct gm_backend *be = NULL;
	struct rp p = {.r = out, .obs = obs, .stop_at_oom = stop,
		       .lz = {.on = lazy}, .pk = pk};
	struct gm_step_sink sk = {&p, rp_alloc, rp_free, rp_step, rp_phase,
				  rp_empty_cache, rp_steady};
	int rc;

	p.sink = &sk;
	if (memo && memo_answer(st, total, stop, out, &rc))
		return rc;
	memset(out, 0, sizeof(*out));
	if (obs && obs->begin) {
		rc = obs->begin(obs->ctx, &so, &po);
		if (rc)
			return rc;
	}
	rc = gm_sim_backend_create(&be, &so);
	if (rc)
		return rc;
	p.be = be;
	rc = gm_pool_create(&p.pool, be, &po, NULL);
	if (rc)
		goto out;
	p.small_max = lazy ? gm_pool_small_max(p.pool) : 0;
	rc = gm_step_emit(st, &sk);
	out->card_needed = (double)be->total_bytes;
	out->served = p.lz.served;
	if (memo && (!rc || (rc == GM_EDEVNOMEM && out->out_of_memory)))
		memo_keep(st, out, rc, total, stop, !rc && !out->out_of_memory &&
			  !gm_pool_releases(p.pool) && !gm_sim_short_by(be),
			  p.used_max);
	gm_pool_destroy(p.pool);
out:
	be->ops->destroy(be);
	lz_free_all(&p.lz);
	free(p.id);
	free(p.kept.w);
	free(p.now.w);
	for (unsigned i = 0; i < RP_CK_MAX; i++) {
		free(p.ck.last[i].w);
		free(p.ck.now[i].w);
	}
	return rc;
}

/* A card no step reaches: 1 PiB. */
#define UNLIMITED ((uint64_t)1 << 50)

int gm_step_replay_observed(const struct gm_step *st,
			    uint64_t capacity_bytes,
			    struct gm_step_result *out,
			    const struct gm_step_observer *obs)
{
	return replay_once(st, capacity_bytes ? capacity_bytes : UNLIMITED,
			   out, obs, false, true, NULL);
}

int gm_step_replay_peak(const struct gm_step *st, uint64_t capacity_bytes,
			struct gm_step_result *out,
			const struct gm_step_observer *obs,
			struct gm_step_peak *peak, int *peak_rc)
{
	struct pk k = {.r = peak, .mask = GM_STEP_ALL};
	int rc;

	memset(peak, 0, sizeof(*peak));
	rc = replay_once(st, capacity_bytes ? capacity_bytes : UNLIMITED,
			 out, obs, false, true, &k);
	*peak_rc = rc ? rc : k.pk_rc;
	free(k.bytes);
	free(k.kind);
	/* the replay ended early (its error is the caller's), the count
	 * ran out of host memory, or a kept replay answered (nothing was
	 * emitted): counted on its own, as gm_step_peak() */
	if (*peak_rc || !k.events)
		*peak_rc = gm_step_peak(st, GM_STEP_ALL | GM_STEP_NOGROUP,
					peak);
	return rc;
}

int gm_step_replay_fits(const struct gm_step *st, uint64_t capacity_bytes,
			struct gm_step_result *out)
{
	int rc = replay_once(st, capacity_bytes ? capacity_bytes : UNLIMITED,
			     out, NULL, true, true, NULL);

	return rc == GM_EDEVNOMEM && out->out_of_memory ? 0 : rc;
}

int gm_step_replay(const struct gm_step *st, uint64_t capacity_bytes,
		   struct gm_step_result *out)
{
	return gm_step_replay_observed(st, capacity_bytes, out, NULL);
}

int gm_step_replay_plain(const struct gm_step *st, uint64_t capacity_bytes,
			 bool fits_only, struct gm_step_result *out,
			 const struct gm_step_observer *obs)
{
	int rc = replay_once(st, capacity_bytes ? capacity_bytes : UNLIMITED,
			     out, obs, fits_only, false, NULL);

	return fits_only && rc == GM_EDEVNOMEM && out->out_of_memory ? 0 : rc;
}
