/*
 * block.c - one transformer block's training allocation program
 * (block.h): the op builders a family's forward is written with (the
 * families' blocks are in planner/arch/, each from its Hugging Face
 * transformers 5.x modeling file; the attention function from
 * integrations/sdpa_attention.py) as PyTorch 2.11 eager runs them, and
 * the backward autograd derives from the tape they record.
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
 *    out of scope, release_variables()). An elementwise op of two
 *    tensors (a mul by a broadcast rstd, cos or sin; bf16 x fp32 under
 *    autocast) makes each input's gradient at the output's shape and
 *    dtype (mul_tensor_backward: grad * other), which the engine then
 *    sums to the input's shape and casts to its dtype (engine.cpp
 *    validate_outputs), each step freeing the last; pow's backward makes
 *    x.pow(e - 1) and e * it before x's gradient (FunctionsManual.cpp
 *    pow_backward); a slice's, a zero-filled tensor of its base's size
 *    (slice_backward); cat's are views. The H200 traces of
 *    gpt2-1.5b-bf16mixed-adamw-fullckpt, llama-134m-bf16true-sgd-seq8192
 *    and llama-1.1b-bf16mixed-adamw show these allocations one for one.
 *    A linear or grouped_mm in the
 *    parameters' dtype makes its weight's gradient first (GM_BOP_PGRAD:
 *    the parameter's own, step.c allocates it there; the H200 traces of
 *    llama-134m-bf16true-sgd-seq8192 and native-mixtral-2l-bf16true-sgd
 *    show it right before the input's gradient); under autocast it
 *    first computes its 16-bit weight gradient (cast to the parameter's
 *    dtype afterwards, that fp32 gradient allocated by step.c after the
 *    block: planner/README.md, what is not modelled); the
 *    flash / memory-efficient backward holds an fp32 dq accumulator and
 *    a per-head fp32 row sum after dq, dk, dv (aten/src/ATen/native/
 *    transformers/cuda/attention_backward.cu).
 * Tensors a few bytes per token (norm statistics, the logsumexp) are
 * kept, scalars are not.
 */
#include "block.h"

#include "arch/family.h"
#include "error.h"
#include "reduce.h"
#include "step_adapter.h"

#include <math.h>
#include <string.h>

#define MAXN 192
#define END GM_BLK_END
#define OUTP GM_BLK_OUTP

struct tn {
	double n, eb;      /* elements, bytes per element (0 bytes: a view
			    * or the block input, not allocated here) */
	double gbytes;     /* its gradient's bytes */
	int base;          /* storage holder (views), else itself */
	int py, saves;     /* Python references, saving nodes */
	bool core_only;    /* saved by attention-core nodes only */
	int alloc_op;      /* its ALLOC in the program, -1 none */
	int grad;          /* id of its gradient, -1 none yet */
	bool nog;          /* does not require grad (made from tensors that
			    * do not, by ops without trainable weights) */
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
	bool vgrad;        /* its inputs' gradients are views of the
			    * incoming one, whatever their sizes */
	bool bcast;        /* elementwise over broadcast inputs: each
			    * input's gradient is made at the output's
			    * shape and dtype, then summed to the input's
			    * shape and cast to its dtype */
	bool pow;          /* pow(x, e): x.pow(e - 1) and e * it first */
	bool core;
	double pg;         /* its weight's elements: the parameter's
			    * gradient is made here, before the input's
			    * (0: none, or step.c allocates it after the
			    * block) */
};

struct gm_blk {
	const struct gm_step_shape *sh;
	struct gm_step_block *p;
	struct tn t[GM_STEP_BLOCK_IDS];
	int nt;
	struct nd n[MAXN];
	int nn;
	bool core;         /* building the attention function */
	bool want_out;     /* the next tensor is the block's output */
	bool trains;       /* the next node has a trainable weight */
	int gref[GM_STEP_BLOCK_IDS]; /* references to a gradient */
	bool err;
};

static void emit(struct gm_blk *b, int op, int id, double bytes, bool core)
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

static int tid(struct gm_blk *b)
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

static void tinit(struct gm_blk *b, int id, double n, double eb)
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

static bool tiny(const struct gm_blk *b, double bytes)
{
	return bytes <= TINY_PER_TOKEN * b->sh->tok;
}

/* A new tensor of n elements of eb bytes, allocated now. */
static int tnew(struct gm_blk *b, double n, double eb)
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
static int tview(struct gm_blk *b, int x, double n)
{
	int id = tid(b), r = b->t[x].base;

	tinit(b, id, n, b->t[x].eb);
	b->t[id].base = r;
	b->t[id].n = 0;
	b->t[id].nog = b->t[x].nog;
	b->t[r].py++;
	b->t[id].py = 0;
	return id;
}

/* Python drops a reference to x (a view: to its storage). */
static void drop(struct gm_blk *b, int x)
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
		if (t->alloc_op >= 0 &&
		    b->p->op[t->alloc_op].kind != GM_SK_KV)
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
static struct nd *node(struct gm_blk *b, const int *in, const int *out,
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
	/* autograd records no node for an op none of whose inputs (nor a
	 * weight) requires grad: its outputs do not either, it saves
	 * nothing (the node stays on the tape, inert) */
	{
		bool rg = d->nin == 0 || b->trains;
		for (int i = 0; i < d->nin && i < 3; i++)
			rg = rg || !b->t[in[i]].nog;
		b->trains = false;
		if (!rg) {
			for (int i = 0; i < d->nout && i < 3; i++)
				b->t[out[i]].nog = true;
			d->nsv = 0;
		}
	}
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
static int op(struct gm_blk *b, double n, double eb, const int *in,
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

static int cast(struct gm_blk *b, int x, double eb)
{
	return op(b, b->t[x].n, eb, (int[]){x, END}, NULL);
}

/* x as an op on autocast's lower-precision list reads it: a copy in the
 * compute dtype under autocast where x is in another, else x itself.
 * An op casts its arguments the last first: WrapFunction_ passes
 * cached_cast(..., args, ...)... to it (torch 2.11
 * aten/src/ATen/autocast_mode.h), an argument list whose order of
 * evaluation C++ leaves to the compiler, and GCC, which builds PyTorch's
 * Linux wheels, evaluates it right to left: the H200 traces show
 * F.linear's bias, weight, then input copies, and sdpa's 8 MiB key cast
 * before its 64 MiB query cast (trainer-llama-1.1b-bf16mixed-fullckpt). */
static int autocast_in(struct gm_blk *b, int x)
{
	const struct gm_step_shape *sh = b->sh;

	return sh->autocast && b->t[x].eb != sh->c ? cast(b, x, sh->c) : x;
}

/* The staging buffer of a sum over the tokens to n values (a bias or
 * norm weight's gradient). */
static double red(const struct gm_blk *b, double n)
{
	return gm_reduce_staging_bytes(b->sh->tok, n, b->sh->sms,
				       b->sh->sm_threads);
}

/* nn.Linear / GPT-2's Conv1D (addmm): x (tok x in) -> tok x out; with a
 * bias, its gradient sums the output's over the tokens. */
static int linear(struct gm_blk *b, int x, double in, double out, bool bias)
{
	const struct gm_step_shape *sh = b->sh;
	int xc, o;
	struct nd *d;

	/* autocast's cached_cast of F.linear's arguments, the last first
	 * (autocast_in()): the bias's copy, the weight's, then the
	 * input's (the H200 trace
	 * of bert-large-mlm-selective-eager: each linear's 2 KiB bias
	 * copy, its 2 MiB weight copy, its input's 16 MiB one); of
	 * Conv1D's addmm(bias, x, W): the weight's, the input's, then the
	 * bias's (gpt2-1.5b-bf16mixed-adamw-fullckpt) */
	bool conv = sh->fam && sh->fam->conv1d;

	if (sh->autocast && bias && !conv)
		emit(b, GM_BOP_BCAST, 0, out, b->core);
	if (sh->autocast)
		emit(b, GM_BOP_WCAST, 0, in * out, b->core);
	xc = autocast_in(b, x);
	if (sh->autocast && bias && conv)
		emit(b, GM_BOP_BCAST, 0, out, b->core);
	o = tnew(b, sh->tok * out, sh->autocast ? sh->c : b->t[x].eb);
	b->trains = true; /* its weight */
	d = node(b, (int[]){xc, END}, (int[]){o, END}, (int[]){xc, END});
	/* the weight's gradient at this node (bf16 / fp16 / fp32: the
	 * product is the parameter's gradient); under autocast the
	 * 16-bit product, whose cast back makes the fp32 one, which
	 * step.c still allocates after the block (planner/README.md,
	 * what is not modelled) */
	if (sh->autocast)
		d->tmp = in * out * sh->c;
	else
		d->pg = in * out;
	if (bias)
		d->red = red(b, out);
	if (xc != x)
		drop(b, xc);
	return o;
}

/* Whether the base weights are frozen (a PEFT adapter trains instead). */
static bool frozen(const struct gm_blk *b)
{
	return b->sh->adapter && b->sh->adapter->adapter != GM_ADAPTER_NONE;
}

/* A frozen linear (requires_grad False): autograd needs only its weight
 * for the input's gradient, so nothing of the input is saved (the mm /
 * addmm derivative saves `self` only when the weight needs a gradient:
 * PyTorch's generated VariableType, should_compute_output), and there
 * is no weight or bias gradient. Under autocast its input cast is
 * freed at once. */
static int frozen_linear(struct gm_blk *b, int x, double out)
{
	const struct gm_step_shape *sh = b->sh;
	int xc = autocast_in(b, x), o;

	o = tnew(b, sh->tok * out, sh->autocast ? sh->c : b->t[x].eb);
	node(b, (int[]){xc, END}, (int[]){o, END}, NULL);
	if (xc != x)
		drop(b, xc);
	return o;
}

/* Elementwise op of x (and y) promoting to the wider dtype. */
static int ew(struct gm_blk *b, int x, int y, const int *sv)
{
	double eb = b->t[x].eb;
	int o;

	if (y >= 0)
		eb = maxd(eb, b->t[y].eb);
	o = op(b, b->t[x].n > 0 ? b->t[x].n : b->t[b->t[x].base].n, eb,
	       y >= 0 ? (int[]){x, y, END} : (int[]){x, END}, sv);
	b->n[b->nn - 1].bcast = y >= 0;
	return o;
}

/* x ** e for a scalar e != 0 (saves x; the output in x's dtype). */
static int pow_op(struct gm_blk *b, int x)
{
	int o = ew(b, x, END, (int[]){x, END});

	b->n[b->nn - 1].pow = true;
	return o;
}

/* x + y (AddBackward0 passes its gradient through). */
static int add(struct gm_blk *b, int x, int y)
{
	int o = ew(b, x, y, NULL);

	b->n[b->nn - 1].alias = true;
	return o;
}

/* Elements of a tensor (views: their own count). */
static double nel(const struct gm_blk *b, int x)
{
	return b->t[x].gbytes / b->t[x].eb;
}

/* A view of n elements of x that autograd records (a slice, a view):
 * its backward makes a gradient of x's size, unless the node is marked
 * vgrad. */
static int view_node(struct gm_blk *b, int x, double n)
{
	int v = tview(b, x, n);

	node(b, (int[]){x, END}, (int[]){v, END}, NULL);
	return v;
}

/* x (tok x heads*d, from a linear) viewed (b, s, heads, d) and
 * transposed to (b, heads, s, d): no new tensor. Its backward reshapes
 * the incoming gradient back (ViewBackward0: reshape), a copy where
 * that gradient is contiguous in the transposed layout, as rotary's is
 * (slice_backward's zeros): with more than one head and token. */
static int head_view(struct gm_blk *b, int x)
{
	double N = nel(b, x);
	int v = view_node(b, x, N);

	if (N <= b->sh->tok * b->sh->head_dim || b->sh->seq <= 1)
		b->n[b->nn - 1].vgrad = true;
	return v;
}

/*
 * A bitsandbytes Linear4bit (bitsandbytes 0.50 nn/modules.py
 * Linear4bit.forward, autograd/_functions.py MatMul4Bit, backends/cuda/
 * ops.py gemm_4bit) under PEFT's lora.bnb.Linear4bit: x cast to the
 * compute dtype; the 4-bit weight dequantized into a compute-dtype copy
 * of the whole weight (_dequant_linear_fallback: past 1536 rows, and
 * past 512 for a weight of 4 Mi elements or more, whatever the card;
 * fewer rows take bitsandbytes' own kernel, no copy), the matmul's
 * output made, the copy freed; the output cast back to x's dtype;
 * where PEFT wraps it (lora.bnb.Linear4bit, a lora_targets module:
 * clone), its defensive result.clone() (peft 0.21 tuners/lora/bnb.py;
 * the H200 trace of qlora-qwen3-0.6b-r16: q_proj's and v_proj's fp32
 * outputs copied, k_proj's and the MLP's not). MatMul4Bit saves only the packed
 * weight; its backward dequantizes the weight again (a transient before
 * the input's gradient). The absmax dequantization's fp32 buffers (n/16
 * bytes each) are left out.
 */
static int linear4bit(struct gm_blk *b, int x, double in, double out,
		      bool clone)
{
	const struct gm_step_shape *sh = b->sh;
	double C = sh->c, eb = b->t[x].eb;
	bool copy = sh->tok > 1536 ||
		    (sh->tok > 512 && in * out >= 4.0 * 1024 * 1024);
	int xc = eb == C ? x : cast(b, x, C), dq, o, oc, r;
	struct nd *d;

	dq = -1;
	if (copy) { /* weight-sized: never left out as per-token tiny */
		dq = tid(b);
		tinit(b, dq, in * out, C);
		b->t[dq].alloc_op = b->p->n;
		emit(b, GM_BOP_ALLOC, dq, in * out * C, b->core);
	}
	o = tnew(b, sh->tok * out, C);
	d = node(b, (int[]){xc, END}, (int[]){o, END}, NULL);
	d->tmp = in * out * C;
	if (dq >= 0)
		drop(b, dq);
	oc = o;
	if (eb != C) {
		oc = cast(b, o, eb);
		drop(b, o);
	}
	if (xc != x)
		drop(b, xc);
	if (!clone)
		return oc;
	r = op(b, nel(b, oc), b->t[oc].eb, (int[]){oc, END}, NULL);
	drop(b, oc);
	return r;
}

/*
 * PEFT's LoRA on a linear whose frozen output is res (peft 0.20
 * tuners/lora/layer.py, Linear.forward): result + lora_B(lora_A(
 * dropout(x))) * scaling, with x first cast to the adapter's dtype
 * (tuners_utils.py _cast_input_dtype: fp32, as get_peft_model's
 * autocast_adapter_dtype keeps the adapters) and the sum cast back to
 * the base output's dtype. lora_dropout is PEFT's default 0.0 (an
 * nn.Identity). lora_A saves its input (under autocast its 16-bit
 * cast: one copy per adapter, not shared with the frozen matmul),
 * lora_B lora_A's output; the fp32 x lives until the forward returns.
 */
static int lora(struct gm_blk *b, int x, int res, double in, double out)
{
	double r = (double)b->sh->adapter->lora_rank, rb = b->t[res].eb;
	struct gm_step_block *p = b->p;
	/* lora.bnb.Linear4bit casts x only when autocast is off
	 * (requires_conversion = not torch.is_autocast_enabled()) */
	bool conv = b->sh->adapter->adapter != GM_ADAPTER_QLORA ||
		    !b->sh->autocast;
	int x32 = b->t[x].eb == 4 || !conv ? x : cast(b, x, 4);
	int a, lb, s, sum;

	a = linear(b, x32, in, r, false);
	lb = linear(b, a, r, out, false);
	drop(b, a);
	s = op(b, nel(b, lb), b->t[lb].eb, (int[]){lb, END}, NULL);
	drop(b, lb);
	sum = add(b, res, s);
	drop(b, s);
	drop(b, res);
	if (b->t[sum].eb != rb) {
		int c = cast(b, sum, rb);
		drop(b, sum);
		sum = c;
	}
	if (x32 != x)
		drop(b, x32);
	if (p->n_lora < GM_STEP_LORA_MAX) {
		p->lora[p->n_lora].in = in;
		p->lora[p->n_lora++].out = out;
	} else {
		b->err = true;
	}
	return sum;
}

/* A linear the family's block names (module name, its PEFT target
 * name): frozen under an adapter, with LoRA where lora_targets match. */
static int linear_named(struct gm_blk *b, const char *name, int x,
			double in, double out, bool bias)
{
	bool target = name && frozen(b) &&
		      gm_adapter_targets(b->sh->adapter, name);
	int o;

	if (!frozen(b))
		return linear(b, x, in, out, bias);
	/* QLoRA: every block linear is a Linear4bit (transformers'
	 * bitsandbytes quantizer replaces each nn.Linear but the head) */
	o = b->sh->adapter->adapter == GM_ADAPTER_QLORA ?
	    linear4bit(b, x, in, out, target) : frozen_linear(b, x, out);
	if (target)
		o = lora(b, x, o, in, out);
	return o;
}

/* nn.LayerNorm: fp32 under autocast; saves its input, mean and rstd. */
static int layer_norm(struct gm_blk *b, int x)
{
	const struct gm_step_shape *sh = b->sh;
	int o = tnew(b, nel(b, x), sh->autocast ? 4 : b->t[x].eb);
	int st = tnew(b, sh->tok * 2, 4);

	node(b, (int[]){x, END}, (int[]){o, END}, (int[]){x, st, END});
	drop(b, st);
	return o;
}

/* LlamaRMSNorm: x.to(fp32); pow(2).mean(-1); x * rsqrt(var + eps);
 * weight * x.to(input dtype). T rows (the mean's elements), the weight
 * `width` wide. */
static int rms_norm_rows(struct gm_blk *b, int x, double T, double width)
{
	double R = b->t[x].eb, N = nel(b, x);
	int x32 = R == 4 ? x : cast(b, x, 4);
	int pw, var, ve, r, y, yc, o;

	pw = pow_op(b, x32);
	var = op(b, T, 4, (int[]){pw, END}, NULL);
	drop(b, pw);
	ve = op(b, T, 4, (int[]){var, END}, NULL);
	drop(b, var);
	r = op(b, T, 4, (int[]){ve, END}, (int[]){OUTP, END});
	drop(b, ve);
	y = op(b, N, 4, (int[]){x32, r, END}, (int[]){x32, r, END});
	b->n[b->nn - 1].bcast = true;
	drop(b, r);
	if (x32 != x)
		drop(b, x32);
	yc = R == 4 ? y : cast(b, y, R);
	/* a frozen weight: MulBackward0 saves the weight alone (yc is what
	 * the weight's gradient would need) */
	o = op(b, N, R, (int[]){yc, END},
	       frozen(b) ? NULL : (int[]){yc, END});
	if (yc != y) /* the name hidden_states holds y until the return */
		drop(b, y);
	/* MulBackward0: the weight's gradient is grad * yc summed over the
	 * tokens, after yc's */
	if (!frozen(b)) {
		b->n[b->nn - 1].wtmp = N * R;
		b->n[b->nn - 1].red = gm_reduce_staging_bytes(
			T, width, b->sh->sms, b->sh->sm_threads);
	}
	drop(b, yc);
	return o;
}

/* LlamaRMSNorm over the hidden size: one row per token. */
static int rms_norm(struct gm_blk *b, int x)
{
	return rms_norm_rows(b, x, b->sh->tok, b->sh->hidden);
}

/* apply_rotary_pos_emb for one of q, k: x * cos + rotate_half(x) * sin,
 * rotate_half = cat(-x2, x1) of the halves x1 = x[..., :d/2],
 * x2 = x[..., d/2:] (views). cos and sin (the residual dtype: fp32
 * under autocast, so the products promote) are saved by the muls but
 * belong to the model. Backward, last op first: the sin product's
 * gradient (at the output's dtype, cast to x's), cat's (views of it),
 * neg's, each slice's (slice_backward: a zeroed tensor of x's size),
 * the cos product's (the H200 trace of llama-1.1b-bf16mixed-adamw:
 * k's 8 MiB fp32 gradients, q's 64 MiB fp32, 32 MiB cast, 16 MiB neg,
 * 2 x 32 MiB slice, 64 + 32 MiB). */
static int rotary(struct gm_blk *b, int x)
{
	double N = nel(b, x), eb = b->t[x].eb, eo = maxd(eb, b->sh->r);
	int a, x1, x2, ng, ct, s, o;

	a = op(b, N, eo, (int[]){x, END}, NULL);
	b->n[b->nn - 1].bcast = true;
	x1 = view_node(b, x, N / 2);
	x2 = view_node(b, x, N / 2);
	ng = op(b, N / 2, eb, (int[]){x2, END}, NULL);
	drop(b, x2);
	ct = op(b, N, eb, (int[]){ng, x1, END}, NULL);
	b->n[b->nn - 1].vgrad = true;
	drop(b, ng);
	drop(b, x1);
	s = op(b, N, eo, (int[]){ct, END}, NULL);
	b->n[b->nn - 1].bcast = true;
	drop(b, ct);
	o = op(b, N, eo, (int[]){a, s, END}, NULL);
	b->n[b->nn - 1].alias = true;
	drop(b, a);
	drop(b, s);
	return o;
}

/*
 * softmax over the last dim of x, in fp32 where f32 (autocast's fp32
 * list passes dtype=float32, or the model asks for it), else in x's
 * dtype. ATen's softmax(input, dim, dtype) (PyTorch 2.11.0,
 * aten/src/ATen/native/SoftMax.cpp) has a half-to-float kernel for a
 * CUDA float16 input only; a bfloat16 input is first converted to a
 * new fp32 tensor (autograd records the copy; _softmax saves its
 * output), freed when softmax returns. The softmax is the last node.
 */
static int softmax(struct gm_blk *b, int x, bool f32)
{
	double eb = b->t[x].eb;
	int xc = x, p;

	if (f32 && eb == 2 && b->sh->bf16)
		xc = cast(b, x, 4);
	p = op(b, nel(b, x), f32 ? 4 : eb, (int[]){xc, END},
	       (int[]){OUTP, END});
	if (xc != x)
		drop(b, xc);
	return p;
}

/* Dropout (p > 0 in training): a bool mask and the output, which
 * replaces x (the caller's reference to x is dropped: every model reads
 * only the dropped-out tensor after it). Without dropout, x itself. */
static int dropout(struct gm_blk *b, int x)
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
 * transpose(1, 2).contiguous() after them copies nothing. Eager: GQA's
 * repeat_kv, q k^T (autocast casts at the matmul; bmm copies the
 * transposed operands into contiguous batches), the scaling, the causal
 * mask (the model dtype, (b, 1, s, s)), softmax (fp32: Llama asks for
 * it, autocast's list for GPT-2/BERT), the family's cast, dropout, the
 * product with v (copied unless repeat_kv made it), and the transpose's
 * contiguous copy.
 */
/* The widths of an attention's q (Q = heads x hd), k (K) and v (V =
 * K / hd x vd) and the head dims of q/k (hd) and of v (vd). */
struct attn_w {
	double Q, K, V, hd, vd;
};

static int attention_w(struct gm_blk *b, int q, int k, int v,
		       const struct attn_w *aw);

static int attention(struct gm_blk *b, int q, int k, int v)
{
	const struct gm_step_shape *sh = b->sh;
	struct attn_w aw = {sh->q, sh->kv, sh->kv, sh->head_dim, sh->head_dim};

	return attention_w(b, q, k, v, &aw);
}

/* The attention with the widths of aw (attention's contract above;
 * MLA's v head dim differs from q/k's). */
static int attention_w(struct gm_blk *b, int q, int k, int v,
		       const struct attn_w *aw)
{
	const struct gm_step_shape *sh = b->sh;
	double T = sh->tok, Q = aw->Q, K = aw->K;
	double Qv = Q / aw->hd * aw->vd; /* the output's width */
	double S = T * sh->heads * sh->seq; /* b x a x s x s */
	int qc = q, kc = k, vc = v, o;

	/* under selective checkpointing torch.utils.checkpoint keeps the
	 * function's arguments to re-run it (non-reentrant: the recompute
	 * closure holds them) until the attention's backward */
	if (sh->ckpt == GM_STEP_CKPT_SELECTIVE)
		node(b, NULL, NULL, (int[]){q, k, v, END});
	b->core = true;
	/* sdpa is on autocast's list: its three inputs cast first, the
	 * last first (autocast_in()) */
	if (!sh->eager) {
		vc = autocast_in(b, v);
		kc = autocast_in(b, k);
		qc = autocast_in(b, q);
	}
	if (!sh->eager) {
		double e = b->t[qc].eb, hd = aw->hd;
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
		 * transpose(1, 2).contiguous() after it copies (head dim 100:
		 * llama-3b-fsdp2-bf16true-sgd of tests/data/calibration/
		 * multi/measured-h200x2.json). */
		if (pad) {
			qp = op(b, T * Q * w, e, (int[]){qc, END}, NULL);
			kp = op(b, T * K * w, e, (int[]){kc, END}, NULL);
			vp = op(b, T * aw->V * w, e, (int[]){vc, END}, NULL);
		}
		o = tnew(b, T * Qv * w, e);
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
			 (K < Q ? 2 * T * Q * w * e : 0);
		d->tmp_after = true;
		drop(b, lse);
		if (pad) {
			int oc = op(b, T * Qv, e, (int[]){o, END}, NULL);

			drop(b, qp);
			drop(b, kp);
			drop(b, vp);
			drop(b, o);
			o = oc;
		} else if (aw->vd != aw->hd) {
			/* v's head dim not q's: not the flash kernel, whose
			 * output is laid out (b, s, a, d); the one sdpa picks
			 * then returns (b, a, s, d), and sdpa_attention_
			 * forward's transpose(1, 2).contiguous() copies it
			 * (the H200 trace of native-deepseekv3-2l-bf16true-
			 * sgd: 32 MiB at sdpa_attention.py:168) */
			int oc = op(b, T * Qv, e, (int[]){o, END}, NULL);

			drop(b, o);
			o = oc;
		}
	} else {
		bool rep = K < Q;
		double e, me;
		int qa, ka, va, qm, km, s1, s2, s3, p, pq, pd, pm, vm, o1;

		/* repeat_kv: GQA's k, v expanded to all heads, new
		 * contiguous tensors in their own dtype (autocast casts
		 * only at the matmuls: the H200 trace of
		 * llama-1.1b-eager-mb2 has fp32 32 MiB k and bf16 16 MiB v
		 * copies at repeat_kv, then the q and k casts) */
		if (rep) {
			kc = op(b, T * Q, b->t[k].eb, (int[]){k, END}, NULL);
			vc = op(b, T * Qv, b->t[v].eb, (int[]){v, END}, NULL);
		}
		/* q k^T: autocast casts each operand (the copy keeps its
		 * strides); bmm copies q, a transposed view, into
		 * contiguous batches, and k too unless it is repeat_kv's
		 * contiguous output, whose transpose it reads as it is */
		ka = autocast_in(b, kc);
		qa = autocast_in(b, q);
		e = b->t[qa].eb;
		qm = op(b, T * Q, e, (int[]){qa, END}, NULL);
		km = rep ? ka : op(b, T * Q, e, (int[]){ka, END}, NULL);
		s1 = op(b, S, e, (int[]){qm, km, END},
			(int[]){qm, km, END});
		drop(b, qm);
		if (km != ka)
			drop(b, km);
		if (ka != kc)
			drop(b, ka);
		if (kc != k)
			drop(b, kc);
		if (qa != q)
			drop(b, qa);
		s2 = op(b, S, e, (int[]){s1, END}, NULL);
		drop(b, s1);
		me = maxd(e, sh->r);   /* + the causal mask */
		s3 = !sh->fam->attn.mask ? s2 :
		     op(b, S, me, (int[]){s2, END}, NULL);
		if (s3 != s2)
			b->n[b->nn - 1].alias = true;
		if (s3 != s2)
			drop(b, s2);
		p = softmax(b, s3, sh->fam->attn.softmax_fp32 ||
			    sh->autocast);
		/* its backward allocates a second score-sized tensor after
		 * the input gradient, freed at once (the H200 trace of
		 * llama-134m-eager-seq1024) */
		b->n[b->nn - 1].tmp = S * b->t[p].eb;
		b->n[b->nn - 1].tmp_after = true;
		drop(b, s3);
		/* Llama: .to(query.dtype); GPT-2: .type(value.dtype); BERT
		 * keeps softmax's dtype (autocast casts at the matmul) */
		pq = p;
		if (sh->fam->attn.probs != GM_PROBS_KEPT) {
			double to = sh->fam->attn.probs == GM_PROBS_TO_QUERY ?
				    b->t[q].eb : b->t[v].eb;
			if (to != b->t[p].eb)
				pq = cast(b, p, to);
		}
		if (pq != p)
			drop(b, p);
		pd = dropout(b, pq);
		va = autocast_in(b, vc);
		pm = autocast_in(b, pd);
		vm = rep ? va : op(b, T * Qv, b->t[va].eb, (int[]){va, END},
				   NULL);
		o1 = op(b, T * Qv, b->t[pm].eb, (int[]){pm, vm, END},
			(int[]){pm, vm, END});
		if (vm != va)
			drop(b, vm);
		if (va != vc)
			drop(b, va);
		if (pm != pd)
			drop(b, pm);
		drop(b, pd);
		if (vc != v)
			drop(b, vc);
		o = op(b, T * Qv, b->t[o1].eb, (int[]){o1, END}, NULL);
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

/*
 * DynamicLayer.update (transformers 5.17 cache_utils.py): the layer's
 * first update makes empty keys and values in the dtype of key_states
 * (lazy_initialization), then torch.cat([self.keys, key_states]) and
 * likewise for the values: a copy of each, the values promoted to the
 * keys' dtype (under autocast with an fp32 residual the rotary keys are
 * fp32, so the bf16 values become fp32: the H200 trace of
 * native-keep-llama-1.1b-bf16mixed shows two 8 MiB copies per layer
 * where K and V are 4 MiB in bf16). The cache holds both (HOLD); the
 * attention goes on with them and the originals' names are rebound.
 * CatBackward saves nothing. Without sh->kv_cache, nothing.
 */
static void kv_cache(struct gm_blk *b, int *k, int *v)
{
	double ek = b->t[*k].eb;
	int kc, vc;

	if (!b->sh->kv_cache)
		return;
	kc = op(b, nel(b, *k), ek, (int[]){*k, END}, NULL);
	if (b->t[kc].alloc_op >= 0)
		b->p->op[b->t[kc].alloc_op].kind = GM_SK_KV;
	emit(b, GM_BOP_HOLD, kc, 0, false);
	vc = op(b, nel(b, *v), maxd(ek, b->t[*v].eb), (int[]){*v, END},
		NULL);
	if (b->t[vc].alloc_op >= 0)
		b->p->op[b->t[vc].alloc_op].kind = GM_SK_KV;
	emit(b, GM_BOP_HOLD, vc, 0, false);
	drop(b, *k);
	drop(b, *v);
	*k = kc;
	*v = vc;
}

/* A new gradient buffer of the given bytes. */
static int galloc(struct gm_blk *b, double bytes)
{
	int g = tid(b);

	tinit(b, g, 0, 1);
	b->gref[g] = 1;
	if (!tiny(b, bytes))
		emit(b, GM_BOP_ALLOC, g, bytes, false);
	return g;
}

static void grel(struct gm_blk *b, int g)
{
	if (g >= 0 && --b->gref[g] == 0)
		emit(b, GM_BOP_FREE, g, 0, false);
}

/* Tensor x receives gradient g (a reference it now owns). A second one
 * is summed: in place into the first when that one is x's alone and g
 * was computed for it (InputBuffer::accumulate), else into a new one. */
static void gset(struct gm_blk *b, int x, int g, bool fresh)
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
static int scratch(struct gm_blk *b, double bytes)
{
	int t = tid(b);

	tinit(b, t, 0, 1);
	emit(b, GM_BOP_ALLOC, t, bytes, false);
	return t;
}

/* A parameter gradient's product (wtmp bytes, 0: none) and the staging
 * buffer of its sum (red bytes), allocated and freed in turn. */
static void transient(struct gm_blk *b, double wtmp, double red)
{
	int w = wtmp > 0 ? scratch(b, wtmp) : -1;

	if (red > 0)
		emit(b, GM_BOP_FREE, scratch(b, red), 0, false);
	if (w >= 0)
		emit(b, GM_BOP_FREE, w, 0, false);
}

/* A weight's gradient of n elements, made now (GM_BOP_PGRAD: step.c
 * allocates the parameter's gradient there, or in a later micro-batch
 * the product AccumulateGrad adds into it, under the returned id, which
 * the program frees once it is added). */
static int pgrad_alloc(struct gm_blk *b, double n)
{
	int g = tid(b);

	tinit(b, g, 0, 1);
	emit(b, GM_BOP_PGRAD, g, n, false);
	return g;
}

/* pow_backward (PyTorch 2.11 torch/csrc/autograd/FunctionsManual.cpp):
 * grad * (e * x.pow(e - 1)): x.pow(e - 1) is made, then e * it, and the
 * first freed; the second (returned) is freed once the product with the
 * incoming gradient, x's gradient, is made. */
static int pow_first(struct gm_blk *b, int x)
{
	double bytes = b->t[x].gbytes;
	int a = scratch(b, bytes), m = scratch(b, bytes);

	emit(b, GM_BOP_FREE, a, 0, false);
	return m;
}

/* Input i of elementwise node d got wide, its gradient at the output's
 * shape and dtype (mul_tensor_backward: grad * other). The engine
 * (torch/csrc/autograd/engine.cpp validate_outputs) sums it to the
 * input's shape (sum_to_size) where they differ, then casts it to the
 * input's dtype where they differ, each step freeing the last; the
 * gradient it returns. */
static int narrow(struct gm_blk *b, const struct nd *d, int i, int wide)
{
	const struct tn *x = &b->t[d->in[i]], *o = &b->t[d->out[0]];
	double n = nel(b, d->in[i]);
	int g = wide;

	if (n < o->n) {
		int s = galloc(b, n * o->eb);
		grel(b, g);
		g = s;
	}
	if (x->eb < o->eb) {
		int c = galloc(b, x->gbytes);
		grel(b, g);
		g = c;
	}
	return g;
}

/* The tape's backward; out is the tensor that receives GM_BLK_GOUT. */
static void backward(struct gm_blk *b, int out)
{
	bool recomputed = false;

	b->t[out].grad = GM_BLK_GOUT;
	b->gref[GM_BLK_GOUT] = 1;
	for (int j = b->nn; j-- > 0;) {
		struct nd *d = &b->n[j];
		int tmp = -1, g0 = -1, pg = -1, pow_tmp = -1, wide[3];
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
		if (any && d->pg > 0)
			pg = pgrad_alloc(b, d->pg);
		if (any && d->pow)
			pow_tmp = pow_first(b, d->in[0]);
		for (int i = 0; any && i < d->nin; i++) {
			struct tn *x = &b->t[d->in[i]];
			const struct tn *o = &b->t[d->out[0]];
			wide[i] = -1;
			if (x->nog)
				continue;
			if (d->vgrad || (d->alias && x->eb == o->eb &&
					 x->gbytes == o->gbytes)) {
				b->gref[g0]++;
				gset(b, d->in[i], g0, false);
			} else if (d->bcast && !d->alias &&
				   (x->eb < o->eb || nel(b, d->in[i]) < o->n)) {
				wide[i] = galloc(b, o->n * o->eb);
			} else {
				gset(b, d->in[i], galloc(b, x->gbytes), true);
			}
		}
		if (pow_tmp >= 0)
			emit(b, GM_BOP_FREE, pow_tmp, 0, false);
		for (int i = 0; any && i < d->nin; i++)
			if (wide[i] >= 0)
				gset(b, d->in[i], narrow(b, d, i, wide[i]), true);
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
		if (pg >= 0) /* AccumulateGrad runs next */
			emit(b, GM_BOP_FREE, pg, 0, false);
	}
	b->p->gin_id = b->t[GM_BLK_IN].grad >= 0 ? b->t[GM_BLK_IN].grad :
		       GM_BLK_GIN;
}

/* A program's tape, emptied, its input the block input (GM_BLK_IN). */
static struct gm_blk *begin(const struct gm_step_shape *sh,
			struct gm_step_block *out)
{
	static _Thread_local struct gm_blk b;

	memset(&b, 0, sizeof(b));
	memset(out, 0, offsetof(struct gm_step_block, op));
	b.sh = sh;
	b.p = out;
	b.nt = GM_BLK_FIRST;
	tinit(&b, GM_BLK_IN, sh->tok * sh->hidden, sh->r);
	b.t[GM_BLK_IN].nog = sh->in_no_grad;
	return &b;
}

/* The forward is written and x is its output: mark x kept, derive the
 * backward, and name x GM_BLK_OUT in the program (step.c's id for it).
 * 0 or GM_ERANGE (the program is emptied). */
static int finish(struct gm_blk *b, int x)
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
	struct gm_blk *b;

	if (!sh->fam->block) {
		memset(out, 0, offsetof(struct gm_step_block, op));
		return GM_EINVAL;
	}
	b = begin(sh, out);

	out->in_bytes = sh->tok * sh->hidden * sh->r;
	/* eager attention of a causal model adds a materialised mask,
	 * (b, 1, s, s) in the model's dtype (masking_utils.eager_mask);
	 * sdpa gets none (is_causal), BERT none (no padding) */
	if (sh->eager && sh->fam->attn.mask) {
		out->mask_bytes = sh->tok * sh->seq * sh->r;
		/* sdpa_mask's causal_mask_function (transformers 5.17.0
		 * masking_utils.py) before it: (s, s) bool (the H200
		 * traces: 1 MiB at s 1024, gpt2-124m-selective-eager; 4 MiB
		 * at 2048, llama-1.1b-eager-mb2) */
		out->mask_fn_bytes = sh->seq * sh->seq;
	}
	out->ckpt = sh->ckpt;
	out->reentrant = sh->reentrant;
	sh->fam->block(b);
	/* the output: the residual dtype (LayerNorm: fp32 under autocast) */
	return finish(b, GM_BLK_OUT);
}

int gm_block_head_build(const struct gm_step_shape *sh,
			struct gm_step_block *out)
{
	struct gm_blk *b;
	int o, x;

	if (!sh->fam->final_norm) {
		memset(out, 0, offsetof(struct gm_step_block, op));
		return GM_EINVAL;
	}
	b = begin(sh, out);
	out->ckpt = GM_STEP_CKPT_NONE;
	/* hidden_states = self.norm(hidden_states): the last block's
	 * output keeps no name, only what the norm saved of it */
	o = sh->fam->final_norm(b, GM_BLK_IN);
	drop(b, GM_BLK_IN);
	x = autocast_in(b, o); /* lm_head's input cast */
	if (x != o)
		drop(b, o);
	/* lm_head saves x; step.c frees it where that backward ends */
	return finish(b, x);
}

/* ==== The op builders for the families' blocks (block.h) ==== */

const struct gm_step_shape *gm_blk_shape(const struct gm_blk *b)
{
	return b->sh;
}

double gm_blk_eb(const struct gm_blk *b, int x)
{
	return b->t[x].eb;
}

void gm_blk_set_grad_bytes(struct gm_blk *b, int x, double bytes)
{
	b->t[x].gbytes = bytes;
}

void gm_blk_alias_last(struct gm_blk *b)
{
	b->n[b->nn - 1].alias = true;
}

void gm_blk_view_grads_last(struct gm_blk *b)
{
	b->n[b->nn - 1].vgrad = true;
}

void gm_blk_output_next(struct gm_blk *b)
{
	b->want_out = true;
}

void gm_blk_node(struct gm_blk *b, const int *in, const int *out,
		 const int *sv)
{
	node(b, in, out, sv);
}

int gm_blk_view(struct gm_blk *b, int x, double n)
{
	return tview(b, x, n);
}

int gm_blk_op(struct gm_blk *b, double n, double eb, const int *in,
	      const int *sv)
{
	return op(b, n, eb, in, sv);
}

int gm_blk_tensor(struct gm_blk *b, double n, double eb)
{
	int x = tnew(b, n, eb);

	b->t[x].nog = true;
	return x;
}

void gm_blk_set_tmp(struct gm_blk *b, double bytes, bool after)
{
	if (b->nn <= 0)
		return;
	b->n[b->nn - 1].tmp = bytes;
	b->n[b->nn - 1].tmp_after = after;
}

/*
 * torch.nn.functional.grouped_mm (transformers integrations/moe.py
 * _grouped_mm: grouped_mm(input.to(weight.dtype), weight, offs)): the
 * output in the weight's dtype, which is the parameters' (sh->r: fp32
 * under *-mixed, the 16-bit dtype otherwise); GroupedMmBackward saves
 * the input (and the weight, a parameter).
 */
int gm_blk_grouped_mm(struct gm_blk *b, int x, double rows, double in,
		      double out)
{
	double wb = b->sh->r;
	int xc = b->t[x].eb == wb ? x : cast(b, x, wb), o;

	o = tnew(b, rows * out, wb);
	b->trains = true; /* the experts' weight */
	node(b, (int[]){xc, END}, (int[]){o, END}, (int[]){xc, END})->pg =
		b->sh->experts * in * out;
	if (xc != x)
		drop(b, xc);
	return o;
}

void gm_blk_drop(struct gm_blk *b, int x)
{
	drop(b, x);
}

int gm_blk_cast(struct gm_blk *b, int x, double eb)
{
	return cast(b, x, eb);
}

int gm_blk_softmax(struct gm_blk *b, int x, bool f32)
{
	return softmax(b, x, f32);
}

int gm_blk_linear(struct gm_blk *b, int x, double in, double out, bool bias)
{
	return linear_named(b, NULL, x, in, out, bias);
}

int gm_blk_linear_named(struct gm_blk *b, const char *name, int x, double in,
			double out, bool bias)
{
	return linear_named(b, name, x, in, out, bias);
}

int gm_blk_ew(struct gm_blk *b, int x, int y, const int *sv)
{
	return ew(b, x, y, sv);
}

int gm_blk_head_view(struct gm_blk *b, int x)
{
	return head_view(b, x);
}

int gm_blk_pow(struct gm_blk *b, int x)
{
	return pow_op(b, x);
}

int gm_blk_add(struct gm_blk *b, int x, int y)
{
	return add(b, x, y);
}

int gm_blk_layer_norm(struct gm_blk *b, int x)
{
	return layer_norm(b, x);
}

int gm_blk_rms_norm(struct gm_blk *b, int x)
{
	return rms_norm(b, x);
}

int gm_blk_rms_norm_width(struct gm_blk *b, int x, double width)
{
	return rms_norm_rows(b, x, b->sh->tok, width);
}

int gm_blk_head_rms_norm(struct gm_blk *b, int x)
{
	return rms_norm_rows(b, x, nel(b, x) / b->sh->head_dim,
			     b->sh->head_dim);
}

int gm_blk_rotary(struct gm_blk *b, int x)
{
	return rotary(b, x);
}

int gm_blk_dropout(struct gm_blk *b, int x)
{
	return dropout(b, x);
}

int gm_blk_attention(struct gm_blk *b, int q, int k, int v)
{
	return attention(b, q, k, v);
}

int gm_blk_attention_dims(struct gm_blk *b, int q, int k, int v, double hd,
			  double vd)
{
	const struct gm_step_shape *sh = b->sh;
	struct attn_w aw = {sh->heads * hd, sh->heads * hd, sh->heads * vd, hd,
			    vd};

	return attention_w(b, q, k, v, &aw);
}

void gm_blk_kv_cache(struct gm_blk *b, int *k, int *v)
{
	kv_cache(b, k, v);
}
