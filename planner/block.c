/*
 * block.c - one transformer block's training allocation program
 * (block.h): a forward written op by op from Hugging Face transformers
 * 5.x (modeling_llama.py, modeling_gpt2.py, modeling_bert.py,
 * integrations/sdpa_attention.py) as PyTorch 2.11 eager runs it, and the
 * backward autograd derives from it.
 *
 * Rules the forward follows (checked against the H200 allocation traces
 * of tests/data/calibration/traces with tools/measure/trace_compare.py
 * --sequence):
 *  - every op allocates its output; Python drops a reference where the
 *    modeling code rebinds or leaves the name; what autograd saved lives
 *    on (derivatives.yaml: a linear saves its input, mul both operands,
 *    pow its input, tanh / softmax / rsqrt their output, SiLU / GELU
 *    their input, LayerNorm its input with mean and rstd, dropout its
 *    bool mask, the flash / memory-efficient sdpa kernels q, k, v, the
 *    output and an fp32 logsumexp per head and token);
 *  - torch.autocast casts a matmul's input to the compute dtype (a copy
 *    the linear saves) unless it already has it, and runs layer_norm,
 *    softmax and pow in fp32 (autocast_mode.cpp's fp32 list); other
 *    elementwise ops promote (bf16 x fp32 -> fp32);
 *  - the backward visits the nodes in reverse creation order (the
 *    engine's ready queue orders by sequence number); a node allocates
 *    its inputs' gradients (a second gradient of the same tensor is added
 *    in place and freed), then its incoming gradients and its saved
 *    tensors are released (engine.cpp evaluate_function: the inputs go
 *    out of scope, release_variables()). A linear under autocast first
 *    computes its 16-bit weight gradient (cast to the parameter's dtype
 *    afterwards: the parameter gradients themselves are step.c's); the
 *    flash / memory-efficient backward holds an fp32 dq accumulator and
 *    a per-head fp32 row sum after dq, dk, dv (aten/src/ATen/native/
 *    transformers/cuda/attention_backward.cu).
 * Tensors a few bytes per token (norm statistics, the logsumexp) are
 * kept, scalars are not.
 */
#include "block.h"

#include "error.h"
#include "reduce.h"

#include <math.h>
#include <string.h>

#define MAXN 192
#define END -1
#define OUTP -2 /* in a save list: the node's own output */

struct tn {
	double n, eb;      /* elements, bytes per element (0 bytes: a view
			    * or the block input, not allocated here) */
	double gbytes;     /* its gradient's bytes */
	int base;          /* storage holder (views), else itself */
	int py, saves;     /* Python references, saving nodes */
	bool core_only;    /* saved by attention-core nodes only */
	int alloc_op;      /* its ALLOC in the program, -1 none */
	int grad;          /* id of its gradient, -1 none yet */
};

struct nd {
	int in[3], nin, out[3], nout, sv[6], nsv;
	double tmp;        /* backward temporary, bytes */
	bool tmp_after;    /* allocated after the input gradients */
	double wtmp;       /* a parameter's gradient before its sum over
			    * the tokens (after the input gradients) */
	double red;        /* that sum's staging buffer (reduce.h) */
	bool alias;        /* an add: its inputs' gradients are the
			    * incoming one (a cast where dtypes differ) */
	bool core;
};

struct bb {
	const struct gm_step_shape *sh;
	struct gm_step_block *p;
	struct tn t[GM_STEP_BLOCK_IDS];
	int nt;
	struct nd n[MAXN];
	int nn;
	bool core;         /* building the attention function */
	bool want_out;     /* the next tensor is the block's output */
	int gref[GM_STEP_BLOCK_IDS]; /* references to a gradient */
	bool err;
};

static void emit(struct bb *b, int op, int id, double bytes, bool core)
{
	struct gm_step_blockop *o;

	if (b->p->n >= GM_STEP_BLOCK_OPS) {
		b->err = true;
		return;
	}
	o = &b->p->op[b->p->n++];
	o->op = (unsigned char)op;
	o->kind = GM_SK_TRANSIENT;
	o->core = core;
	o->id = (unsigned short)id;
	o->bytes = bytes;
}

static int tid(struct bb *b)
{
	if (b->want_out) {
		b->want_out = false;
		return GM_BLK_OUT;
	}
	if (b->nt >= GM_STEP_BLOCK_IDS) {
		b->err = true;
		return GM_STEP_BLOCK_IDS - 1;
	}
	return b->nt++;
}

static void tinit(struct bb *b, int id, double n, double eb)
{
	struct tn *t = &b->t[id];

	memset(t, 0, sizeof(*t));
	t->n = n;
	t->eb = eb;
	t->gbytes = n * eb;
	t->base = id;
	t->py = 1;
	t->core_only = true;
	t->alloc_op = -1;
	t->grad = -1;
}

/* Tensors of at most this many bytes per token (norm statistics,
 * RMSNorm's variance and rsqrt, their gradients) are left out of the
 * program: under 1 MiB below 131072 tokens, and a dozen more pool calls
 * per block otherwise. */
#define TINY_PER_TOKEN 8

static bool tiny(const struct bb *b, double bytes)
{
	return bytes <= TINY_PER_TOKEN * b->sh->tok;
}

/* A new tensor of n elements of eb bytes, allocated now. */
static int tnew(struct bb *b, double n, double eb)
{
	int id = tid(b);

	tinit(b, id, n, eb);
	if (n * eb > 0 && !tiny(b, n * eb)) {
		b->t[id].alloc_op = b->p->n;
		emit(b, GM_BOP_ALLOC, id, n * eb, b->core);
	}
	return id;
}

/* A view of x (shares its storage) of n elements. */
static int tview(struct bb *b, int x, double n)
{
	int id = tid(b), r = b->t[x].base;

	tinit(b, id, n, b->t[x].eb);
	b->t[id].base = r;
	b->t[id].n = 0;
	b->t[r].py++;
	b->t[id].py = 0;
	return id;
}

/* Python drops a reference to x (a view: to its storage). */
static void drop(struct bb *b, int x)
{
	struct tn *t;
	int r;

	if (x < 0)
		return;
	r = b->t[x].base;
	t = &b->t[r];
	if (--t->py > 0)
		return;
	if (t->saves > 0) {
		if (t->alloc_op >= 0)
			b->p->op[t->alloc_op].kind = GM_SK_ACT;
		emit(b, GM_BOP_DROP, r, 0, t->core_only);
	} else {
		emit(b, GM_BOP_FREE, r, 0, b->core);
	}
}

static int count(const int *l)
{
	int k = 0;

	while (l && l[k] != END)
		k++;
	return k;
}

/* Record a node: inputs (get gradients), outputs, saved tensors. */
static struct nd *node(struct bb *b, const int *in, const int *out,
		       const int *sv)
{
	struct nd *d;

	if (b->nn >= MAXN) {
		b->err = true;
		return &b->n[MAXN - 1];
	}
	d = &b->n[b->nn++];
	memset(d, 0, sizeof(*d));
	d->core = b->core;
	d->nin = count(in);
	d->nout = count(out);
	d->nsv = count(sv);
	for (int i = 0; i < d->nin && i < 3; i++)
		d->in[i] = in[i];
	for (int i = 0; i < d->nout && i < 3; i++)
		d->out[i] = out[i];
	for (int i = 0; i < d->nsv && i < 6; i++) {
		int r = b->t[sv[i] == OUTP ? out[0] : sv[i]].base;
		d->sv[i] = r;
		b->t[r].saves++;
		if (!b->core)
			b->t[r].core_only = false;
	}
	return d;
}

/* An op with one new output of n elements, eb bytes each. */
static int op(struct bb *b, double n, double eb, const int *in,
	      const int *sv)
{
	int o = tnew(b, n, eb);

	node(b, in, (int[]){o, END}, sv);
	return o;
}

static double maxd(double a, double c)
{
	return a > c ? a : c;
}

static int cast(struct bb *b, int x, double eb)
{
	return op(b, b->t[x].n, eb, (int[]){x, END}, NULL);
}

/* The staging buffer of a sum over the tokens to n values (a bias or
 * norm weight's gradient). */
static double red(const struct bb *b, double n)
{
	return gm_reduce_staging_bytes(b->sh->tok, n, b->sh->sms,
				       b->sh->sm_threads);
}

/* nn.Linear / GPT-2's Conv1D (addmm): x (tok x in) -> tok x out; with a
 * bias, its gradient sums the output's over the tokens. */
static int linear(struct bb *b, int x, double in, double out, bool bias)
{
	const struct gm_step_shape *sh = b->sh;
	int xc = x, o;
	struct nd *d;

	if (sh->autocast && b->t[x].eb != sh->c)
		xc = cast(b, x, sh->c);
	o = tnew(b, sh->tok * out, sh->autocast ? sh->c : b->t[x].eb);
	d = node(b, (int[]){xc, END}, (int[]){o, END}, (int[]){xc, END});
	if (sh->autocast) /* the 16-bit weight gradient */
		d->tmp = in * out * sh->c;
	if (bias)
		d->red = red(b, out);
	if (xc != x)
		drop(b, xc);
	return o;
}

/* Elementwise op of x (and y) promoting to the wider dtype. */
static int ew(struct bb *b, int x, int y, const int *sv)
{
	double eb = b->t[x].eb;

	if (y >= 0)
		eb = maxd(eb, b->t[y].eb);
	return op(b, b->t[x].n > 0 ? b->t[x].n : b->t[b->t[x].base].n, eb,
		  y >= 0 ? (int[]){x, y, END} : (int[]){x, END}, sv);
}

/* x + y (AddBackward0 passes its gradient through). */
static int add(struct bb *b, int x, int y)
{
	int o = ew(b, x, y, NULL);

	b->n[b->nn - 1].alias = true;
	return o;
}

/* Elements of a tensor (views: their own count). */
static double nel(const struct bb *b, int x)
{
	return b->t[x].gbytes / b->t[x].eb;
}

/* nn.LayerNorm: fp32 under autocast; saves its input, mean and rstd. */
static int layer_norm(struct bb *b, int x)
{
	const struct gm_step_shape *sh = b->sh;
	int o = tnew(b, nel(b, x), sh->autocast ? 4 : b->t[x].eb);
	int st = tnew(b, sh->tok * 2, 4);

	node(b, (int[]){x, END}, (int[]){o, END}, (int[]){x, st, END});
	drop(b, st);
	return o;
}

/* LlamaRMSNorm: x.to(fp32); pow(2).mean(-1); x * rsqrt(var + eps);
 * weight * x.to(input dtype). */
static int rms_norm(struct bb *b, int x)
{
	const struct gm_step_shape *sh = b->sh;
	double R = b->t[x].eb, N = nel(b, x), T = sh->tok;
	int x32 = R == 4 ? x : cast(b, x, 4);
	int pw, var, ve, r, y, yc, o;

	pw = op(b, N, 4, (int[]){x32, END}, (int[]){x32, END});
	var = op(b, T, 4, (int[]){pw, END}, NULL);
	drop(b, pw);
	ve = op(b, T, 4, (int[]){var, END}, NULL);
	drop(b, var);
	r = op(b, T, 4, (int[]){ve, END}, (int[]){OUTP, END});
	drop(b, ve);
	y = op(b, N, 4, (int[]){x32, r, END}, (int[]){x32, r, END});
	drop(b, r);
	if (x32 != x)
		drop(b, x32);
	yc = R == 4 ? y : cast(b, y, R);
	o = op(b, N, R, (int[]){yc, END}, (int[]){yc, END});
	if (yc != y) /* the name hidden_states holds y until the return */
		drop(b, y);
	/* MulBackward0: the weight's gradient is grad * yc summed over the
	 * tokens, after yc's */
	b->n[b->nn - 1].wtmp = N * R;
	b->n[b->nn - 1].red = red(b, sh->hidden);
	drop(b, yc);
	return o;
}

/* apply_rotary_pos_emb for one of q, k: x * cos + rotate_half(x) * sin,
 * rotate_half = cat(-x2, x1); cos and sin (the residual dtype) are
 * saved by the muls but belong to the model. */
static int rotary(struct bb *b, int x)
{
	double N = nel(b, x), eo = maxd(b->t[x].eb, b->sh->r);
	int a, ng, ct, s, o;

	a = op(b, N, eo, (int[]){x, END}, NULL);
	ng = op(b, N / 2, b->t[x].eb, (int[]){x, END}, NULL);
	ct = op(b, N, b->t[x].eb, (int[]){ng, x, END}, NULL);
	drop(b, ng);
	s = op(b, N, eo, (int[]){ct, END}, NULL);
	drop(b, ct);
	o = op(b, N, eo, (int[]){a, s, END}, NULL);
	b->n[b->nn - 1].alias = true;
	drop(b, a);
	drop(b, s);
	return o;
}

/* Dropout (p > 0 in training): a bool mask and the output, which
 * replaces x (the caller's reference to x is dropped: every model reads
 * only the dropped-out tensor after it). Without dropout, x itself. */
static int dropout(struct bb *b, int x)
{
	int m, o;

	if (!b->sh->dropout)
		return x;
	m = tnew(b, nel(b, x), 1);
	o = tnew(b, nel(b, x), b->t[x].eb);
	node(b, (int[]){x, END}, (int[]){o, END}, (int[]){m, END});
	drop(b, m);
	drop(b, x);
	return o;
}

/*
 * The attention function (sdpa_attention_forward / the model's
 * eager_attention_forward): q (tok x q), k, v (tok x kv) -> tok x q.
 * sdpa under autocast casts q, k, v to the compute dtype; flash and
 * memory-efficient kernels allocate the output as (b, s, a, d), so the
 * transpose(1, 2).contiguous() after them copies nothing. Eager: q k^T
 * (matmul reshapes the transposed operands into contiguous copies for
 * bmm), the scaling, the causal mask (the model dtype, (b, 1, s, s)),
 * softmax (fp32: Llama asks for it, autocast's list for GPT-2/BERT),
 * cast back, dropout, the product with v (again a copy of v), and the
 * transpose's contiguous copy.
 */
static int attention(struct bb *b, int q, int k, int v)
{
	const struct gm_step_shape *sh = b->sh;
	double T = sh->tok, C = sh->c, Q = sh->q;
	double S = T * sh->heads * sh->seq; /* b x a x s x s */
	int qc = q, kc = k, vc = v, o;

	/* under selective checkpointing torch.utils.checkpoint keeps the
	 * function's arguments to re-run it (non-reentrant: the recompute
	 * closure holds them) until the attention's backward */
	if (sh->ckpt == GM_STEP_CKPT_SELECTIVE)
		node(b, NULL, NULL, (int[]){q, k, v, END});
	b->core = true;
	if (sh->autocast && b->t[q].eb != C)
		qc = cast(b, q, C);
	if (sh->autocast && b->t[k].eb != C)
		kc = cast(b, k, C);
	if (sh->autocast && b->t[v].eb != C)
		vc = cast(b, v, C);
	if (!sh->eager) {
		double e = b->t[qc].eb, hd = sh->head_dim;
		double hp = ceil(hd / 8) * 8, w = hp / hd;
		bool pad = e == 2 && hp != hd;
		int lse, qp = qc, kp = kc, vp = vc;
		struct nd *d;

		/* The flash kernel (fp16 / bf16) wants the head dim a
		 * multiple of 8: sdpa pads q, k, v into new tensors first
		 * and slices the output (PyTorch attention.cpp,
		 * pad_last_dim<8>, post_process_flash_output), so the
		 * padded copies are what it keeps for backward, the
		 * originals live only until the caller drops them, and the
		 * transpose(1, 2).contiguous() after it copies. Seen in the
		 * 2x H200 trace of llama-3b-fsdp2-bf16true-sgd (head dim
		 * 100: four 52 MiB tensors where 50 MiB were planned). */
		if (pad) {
			qp = op(b, T * Q * w, e, (int[]){qc, END}, NULL);
			kp = op(b, T * sh->kv * w, e, (int[]){kc, END}, NULL);
			vp = op(b, T * sh->kv * w, e, (int[]){vc, END}, NULL);
		}
		o = tnew(b, T * Q * w, e);
		lse = tnew(b, T * sh->heads, 4);
		d = node(b, (int[]){qp, kp, vp, END}, (int[]){o, END},
			 (int[]){qp, kp, vp, o, lse, END});
		/* flash backward (flash-attn 2 mha_bwd): an fp32 dq
		 * accumulator with the head dim rounded up to 32
		 * (head_size_rounded), the fp32 row sums (softmax_d), and
		 * with GQA dk, dv at all heads before their sum over the
		 * group */
		d->tmp = T * sh->heads * ceil(hp / 32) * 32 * 4 +
			 T * sh->heads * 4 +
			 (sh->kv < Q ? 2 * T * Q * w * e : 0);
		d->tmp_after = true;
		drop(b, lse);
		if (pad) {
			int oc = op(b, T * Q, e, (int[]){o, END}, NULL);

			drop(b, qp);
			drop(b, kp);
			drop(b, vp);
			drop(b, o);
			o = oc;
		}
	} else {
		double e = b->t[qc].eb, me;
		int qm, km, s1, s2, s3, p, pq, pd, pm, vm, o1;
		/* repeat_kv: GQA's k, v expanded to all heads */
		if (sh->kv < Q) {
			int kr = op(b, T * Q, b->t[kc].eb,
				    (int[]){kc, END}, NULL);
			int vr = op(b, T * Q, b->t[vc].eb,
				    (int[]){vc, END}, NULL);
			if (kc != k)
				drop(b, kc);
			if (vc != v)
				drop(b, vc);
			kc = kr;
			vc = vr;
		}
		qm = op(b, T * Q, e, (int[]){qc, END}, NULL);
		km = op(b, T * Q, e, (int[]){kc, END}, NULL);
		s1 = op(b, S, e, (int[]){qm, km, END},
			(int[]){qm, km, END});
		drop(b, qm);
		drop(b, km);
		if (kc != k)
			drop(b, kc);
		if (qc != q)
			drop(b, qc);
		s2 = op(b, S, e, (int[]){s1, END}, NULL);
		drop(b, s1);
		me = maxd(e, sh->r);   /* + the causal mask */
		s3 = sh->net == GM_NET_BERT ? s2 :
		     op(b, S, me, (int[]){s2, END}, NULL);
		if (s3 != s2)
			b->n[b->nn - 1].alias = true;
		if (s3 != s2)
			drop(b, s2);
		p = op(b, S, sh->net == GM_NET_LLAMA || sh->autocast ? 4 :
		       b->t[s3].eb, (int[]){s3, END}, (int[]){OUTP, END});
		/* its backward allocates a second score-sized tensor after
		 * the input gradient, freed at once (the H200 trace of
		 * llama-134m-eager-seq1024) */
		b->n[b->nn - 1].tmp = S * b->t[p].eb;
		b->n[b->nn - 1].tmp_after = true;
		drop(b, s3);
		/* Llama: .to(query.dtype); GPT-2: .type(value.dtype) */
		pq = p;
		{
			double to = sh->net == GM_NET_LLAMA ? b->t[q].eb :
				    b->t[v].eb;
			if (to != b->t[p].eb)
				pq = cast(b, p, to);
		}
		if (pq != p)
			drop(b, p);
		pd = dropout(b, pq);
		pm = sh->autocast && b->t[pd].eb != C ? cast(b, pd, C) : pd;
		vm = op(b, T * Q, b->t[vc].eb, (int[]){vc, END}, NULL);
		o1 = op(b, T * Q, b->t[pm].eb, (int[]){pm, vm, END},
			(int[]){pm, vm, END});
		drop(b, vm);
		if (pm != pd)
			drop(b, pm);
		drop(b, pd);
		if (vc != v)
			drop(b, vc);
		o = op(b, T * Q, b->t[o1].eb, (int[]){o1, END}, NULL);
		drop(b, o1);
		b->core = false;
		return o;
	}
	if (qc != q)
		drop(b, qc);
	if (kc != k)
		drop(b, kc);
	if (vc != v)
		drop(b, vc);
	b->core = false;
	return o;
}

/* LlamaDecoderLayer (modeling_llama.py). */
static void llama(struct bb *b)
{
	const struct gm_step_shape *sh = b->sh;
	double h = sh->hidden, Q = sh->q, K = sh->kv, F = sh->ffn;
	int n1, q, k, v, qe, ke, at, o, r1, n2, g, s, u, m, d;

	n1 = rms_norm(b, GM_BLK_IN);
	q = linear(b, n1, h, Q, sh->qkv_bias);
	k = linear(b, n1, h, K, sh->qkv_bias);
	v = linear(b, n1, h, K, sh->qkv_bias);
	qe = rotary(b, q);
	ke = rotary(b, k);
	drop(b, q);
	drop(b, k);
	at = attention(b, qe, ke, v);
	o = linear(b, at, Q, h, false);
	drop(b, at);
	drop(b, qe);
	drop(b, ke);
	drop(b, v);
	drop(b, n1);
	r1 = add(b, GM_BLK_IN, o);
	drop(b, o);
	n2 = rms_norm(b, r1);
	g = linear(b, n2, h, F, false);
	s = ew(b, g, END, (int[]){g, END});
	u = linear(b, n2, h, F, false);
	m = ew(b, s, u, (int[]){s, u, END});
	drop(b, g);
	drop(b, s);
	drop(b, u);
	d = linear(b, m, F, h, false);
	drop(b, m);
	drop(b, n2);
	b->want_out = true;
	add(b, r1, d);
	drop(b, d);
	drop(b, r1);
	/* LlamaModel's loop holds the layer's input until the layer
	 * returns (hidden_states = decoder_layer(hidden_states, ...)): it
	 * is freed last, after the residual stream (where RMSNorm's fp32
	 * copy did not save it; the H200 trace of
	 * llama-134m-bf16true-sgd-seq8192) */
	drop(b, GM_BLK_IN);
}

/* GPT2Block (modeling_gpt2.py): fused c_attn split into q, k, v views,
 * gelu_new op by op (activations.py NewGELUActivation). */
static void gpt2(struct bb *b)
{
	const struct gm_step_shape *sh = b->sh;
	double h = sh->hidden, Q = sh->q, K = sh->kv, F = sh->ffn, T = sh->tok;
	int n1, qkv, q, k, v, at, cp, d1, r1, n2, fc, h0, xc, p3, m1, a1, m2;
	int th, p1, g, fc2, d2;

	n1 = layer_norm(b, GM_BLK_IN);
	qkv = linear(b, n1, h, Q + 2 * K, true);
	q = tview(b, qkv, 0);
	k = tview(b, qkv, 0);
	v = tview(b, qkv, 0);
	b->t[q].gbytes = T * Q * b->t[qkv].eb;
	b->t[k].gbytes = b->t[v].gbytes = T * K * b->t[qkv].eb;
	node(b, (int[]){qkv, END}, (int[]){q, k, v, END}, NULL);
	drop(b, qkv);
	at = attention(b, q, k, v);
	drop(b, q);
	drop(b, k);
	drop(b, v);
	cp = linear(b, at, Q, h, true);
	drop(b, at);
	d1 = dropout(b, cp);
	r1 = add(b, d1, GM_BLK_IN);
	drop(b, n1);
	drop(b, GM_BLK_IN);
	n2 = layer_norm(b, r1);
	fc = linear(b, n2, h, F, true);
	h0 = ew(b, fc, END, NULL);                       /* 0.5 * x */
	xc = sh->autocast && b->t[fc].eb != 4 ? cast(b, fc, 4) : fc;
	p3 = ew(b, xc, END, (int[]){xc, END});           /* x ** 3 */
	if (xc != fc)
		drop(b, xc);
	m1 = ew(b, p3, END, NULL);                       /* 0.044715 * */
	drop(b, p3);
	a1 = add(b, fc, m1);                        /* x + */
	drop(b, m1);
	m2 = ew(b, a1, END, NULL);                       /* sqrt(2/pi) * */
	drop(b, a1);
	th = ew(b, m2, END, (int[]){OUTP, END});         /* tanh */
	drop(b, m2);
	p1 = ew(b, th, END, NULL);                       /* 1.0 + */
	b->n[b->nn - 1].alias = true;
	drop(b, th);
	g = ew(b, h0, p1, (int[]){h0, p1, END});
	drop(b, h0);
	drop(b, p1);
	drop(b, fc);
	fc2 = linear(b, g, F, h, true);
	drop(b, g);
	d2 = dropout(b, fc2);
	b->want_out = true;
	add(b, r1, d2);
	drop(b, n2);
	drop(b, d1);
	drop(b, d2);
	drop(b, r1);
}

/* BertLayer (modeling_bert.py, post-LayerNorm, exact GELU). */
static void bert(struct bb *b)
{
	const struct gm_step_shape *sh = b->sh;
	double h = sh->hidden, Q = sh->q, K = sh->kv, F = sh->ffn;
	int q, k, v, at, d, dd, s1, n1, i, gl, o, od, s2;

	q = linear(b, GM_BLK_IN, h, Q, true);
	k = linear(b, GM_BLK_IN, h, K, true);
	v = linear(b, GM_BLK_IN, h, K, true);
	at = attention(b, q, k, v);
	drop(b, q);
	drop(b, k);
	drop(b, v);
	d = linear(b, at, Q, h, true);
	drop(b, at);
	dd = dropout(b, d);
	s1 = add(b, dd, GM_BLK_IN);
	drop(b, dd);
	n1 = layer_norm(b, s1);
	drop(b, s1);
	drop(b, GM_BLK_IN);
	i = linear(b, n1, h, F, true);
	gl = ew(b, i, END, (int[]){i, END});
	drop(b, i);
	o = linear(b, gl, F, h, true);
	drop(b, gl);
	od = dropout(b, o);
	s2 = add(b, od, n1);
	drop(b, od);
	b->want_out = true;
	layer_norm(b, s2);
	drop(b, s2);
	drop(b, n1);
}

/* A new gradient buffer of the given bytes. */
static int galloc(struct bb *b, double bytes)
{
	int g = tid(b);

	tinit(b, g, 0, 1);
	b->gref[g] = 1;
	if (!tiny(b, bytes))
		emit(b, GM_BOP_ALLOC, g, bytes, false);
	return g;
}

static void grel(struct bb *b, int g)
{
	if (g >= 0 && --b->gref[g] == 0)
		emit(b, GM_BOP_FREE, g, 0, false);
}

/* Tensor x receives gradient g (a reference it now owns). A second one
 * is summed: in place into the first when that one is x's alone and g
 * was computed for it (InputBuffer::accumulate), else into a new one. */
static void gset(struct bb *b, int x, int g, bool fresh)
{
	struct tn *t = &b->t[x];
	int s;

	if (t->grad < 0) {
		t->grad = g;
		return;
	}
	if (fresh && b->gref[t->grad] == 1) {
		grel(b, g);
		return;
	}
	s = galloc(b, t->gbytes);
	grel(b, t->grad);
	grel(b, g);
	t->grad = s;
}

/* A backward temporary of the given bytes, allocated now; its id. */
static int scratch(struct bb *b, double bytes)
{
	int t = tid(b);

	tinit(b, t, 0, 1);
	emit(b, GM_BOP_ALLOC, t, bytes, false);
	return t;
}

/* A parameter gradient's product (wtmp bytes, 0: none) and the staging
 * buffer of its sum (red bytes), allocated and freed in turn. */
static void transient(struct bb *b, double wtmp, double red)
{
	int w = wtmp > 0 ? scratch(b, wtmp) : -1;

	if (red > 0)
		emit(b, GM_BOP_FREE, scratch(b, red), 0, false);
	if (w >= 0)
		emit(b, GM_BOP_FREE, w, 0, false);
}

/* The tape's backward; out is the tensor that receives GM_BLK_GOUT. */
static void backward(struct bb *b, int out)
{
	bool recomputed = false;

	b->t[out].grad = GM_BLK_GOUT;
	b->gref[GM_BLK_GOUT] = 1;
	for (int j = b->nn; j-- > 0;) {
		struct nd *d = &b->n[j];
		int tmp = -1, g0 = -1;
		bool any = false;

		for (int i = 0; i < d->nout; i++)
			if (b->t[d->out[i]].grad >= 0) {
				any = true;
				if (g0 < 0)
					g0 = b->t[d->out[i]].grad;
			}
		if (d->core && !recomputed) {
			emit(b, GM_BOP_RECOMPUTE, 0, 0, false);
			recomputed = true;
		}
		if (any && d->tmp > 0 && !d->tmp_after)
			tmp = scratch(b, d->tmp);
		for (int i = 0; any && i < d->nin; i++) {
			struct tn *x = &b->t[d->in[i]];
			const struct tn *o = &b->t[d->out[0]];
			if (d->alias && x->eb == o->eb &&
			    x->gbytes == o->gbytes) {
				b->gref[g0]++;
				gset(b, d->in[i], g0, false);
			} else {
				gset(b, d->in[i], galloc(b, x->gbytes), true);
			}
		}
		if (any && d->tmp > 0 && d->tmp_after)
			emit(b, GM_BOP_FREE, scratch(b, d->tmp), 0, false);
		if (any)
			transient(b, d->wtmp, d->red);
		for (int i = 0; i < d->nout; i++) {
			struct tn *t = &b->t[d->out[i]];
			grel(b, t->grad);
			t->grad = -1;
		}
		for (int i = 0; i < d->nsv; i++) {
			struct tn *t = &b->t[d->sv[i]];
			if (--t->saves == 0 && t->py <= 0)
				emit(b, GM_BOP_FREE, d->sv[i], 0, false);
		}
		if (tmp >= 0)
			emit(b, GM_BOP_FREE, tmp, 0, false);
	}
	b->p->gin_id = b->t[GM_BLK_IN].grad >= 0 ? b->t[GM_BLK_IN].grad :
		       GM_BLK_GIN;
}

/* A program's tape, emptied, its input the block input (GM_BLK_IN). */
static struct bb *begin(const struct gm_step_shape *sh,
			struct gm_step_block *out)
{
	static _Thread_local struct bb b;

	memset(&b, 0, sizeof(b));
	memset(out, 0, offsetof(struct gm_step_block, op));
	b.sh = sh;
	b.p = out;
	b.nt = GM_BLK_FIRST;
	tinit(&b, GM_BLK_IN, sh->tok * sh->hidden, sh->r);
	return &b;
}

/* The forward is written and x is its output: mark x kept, derive the
 * backward, and name x GM_BLK_OUT in the program (step.c's id for it).
 * 0 or GM_ERANGE (the program is emptied). */
static int finish(struct bb *b, int x)
{
	struct gm_step_block *out = b->p;

	out->gout_bytes = b->t[x].n * b->t[x].eb;
	if (b->t[x].alloc_op >= 0)
		out->op[b->t[x].alloc_op].kind = GM_SK_ACT;
	out->n_fwd = out->n;
	backward(b, x);
	out->n_ids = b->nt;
	for (int i = 0; i < out->n; i++)
		if (out->op[i].id == x)
			out->op[i].id = GM_BLK_OUT;
	if (b->err) {
		memset(out, 0, offsetof(struct gm_step_block, op));
		return GM_ERANGE;
	}
	return 0;
}

int gm_block_build(const struct gm_step_shape *sh, struct gm_step_block *out)
{
	struct bb *b = begin(sh, out);

	out->in_bytes = sh->tok * sh->hidden * sh->r;
	/* eager attention of a causal model adds a materialised mask,
	 * (b, 1, s, s) in the model's dtype (masking_utils.eager_mask);
	 * sdpa gets none (is_causal), BERT none (no padding) */
	if (sh->eager && sh->net != GM_NET_BERT)
		out->mask_bytes = sh->tok * sh->seq * sh->r;
	out->ckpt = sh->ckpt;
	switch (sh->net) {
	case GM_NET_GPT2:
		gpt2(b);
		break;
	case GM_NET_BERT:
		bert(b);
		break;
	default:
		llama(b);
		break;
	}
	/* the output: the residual dtype (LayerNorm: fp32 under autocast) */
	return finish(b, GM_BLK_OUT);
}

int gm_block_head_build(const struct gm_step_shape *sh,
			struct gm_step_block *out)
{
	struct bb *b;
	int o, x;

	if (sh->net == GM_NET_BERT) {
		memset(out, 0, offsetof(struct gm_step_block, op));
		return GM_EINVAL;
	}
	b = begin(sh, out);
	out->ckpt = GM_STEP_CKPT_NONE;
	/* hidden_states = self.norm(hidden_states): the last block's
	 * output keeps no name, only what the norm saved of it */
	o = sh->net == GM_NET_LLAMA ? rms_norm(b, GM_BLK_IN) :
	    layer_norm(b, GM_BLK_IN);
	drop(b, GM_BLK_IN);
	x = o;
	if (sh->autocast && b->t[o].eb != sh->c) { /* lm_head's input cast */
		x = cast(b, o, sh->c);
		drop(b, o);
	}
	/* lm_head saves x; step.c frees it where that backward ends */
	return finish(b, x);
}
