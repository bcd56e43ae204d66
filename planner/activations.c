/*
 * activations.c - saved tensors of a transformer block (activations.h).
 *
 * Reading guide for the HF lists: "saves" means autograd keeps the tensor
 * for backward (torch's derivatives.yaml: a linear saves its input and
 * weight, SiLU/GeLU their input, mul both operands, softmax/log_softmax
 * their output, LayerNorm its input plus mean/rstd, dropout its bool
 * mask). Under autocast every linear casts its fp32 input to 16 bits on
 * its own, so q/k/v each save a copy (autocast only caches casts of
 * weights). C = compute bytes, R = residual-stream bytes.
 */
#include "activations.h"

#include <string.h>

static struct gm_act_tensor *add(struct gm_act_layer *l, const char *name,
				 double bytes, unsigned flags)
{
	struct gm_act_tensor *t = &l->t[l->n < GM_ACT_MAX - 1 ? l->n++ : l->n];

	memset(t, 0, sizeof(*t));
	t->name = name;
	t->bytes = bytes;
	t->flags = flags;
	return t;
}

void gm_act_layer_paper(struct gm_act_layer *l)
{
	memset(l, 0, sizeof(*l));
	l->input_bytes = 2; /* "full recompute: 2sbh" */
	/* Attention block, 11sbh + 5as^2b (paper section 4.1). */
	add(l, "layernorm1 input", 2, GM_AT_SEQ)->h = 1;
	add(l, "qkv input", 2, GM_AT_SEQ)->h = 1;
	add(l, "q, k for q*k^T", 2, 0)->h = 2;
	add(l, "softmax output", 2, GM_AT_CORE)->as = 1;
	add(l, "softmax dropout mask", 1, GM_AT_CORE)->as = 1;
	add(l, "softmax dropout output", 2, GM_AT_CORE)->as = 1;
	add(l, "v", 2, 0)->h = 1;
	add(l, "output projection input", 2, 0)->h = 1;
	add(l, "attention dropout mask", 1, GM_AT_SEQ)->h = 1;
	/* MLP block, 19sbh (with f = 4h), and the second LayerNorm 2sbh. */
	add(l, "layernorm2 input", 2, GM_AT_SEQ)->h = 1;
	add(l, "fc1 input", 2, GM_AT_SEQ)->h = 1;
	add(l, "gelu input", 2, 0)->f = 1;
	add(l, "fc2 input", 2, 0)->f = 1;
	add(l, "mlp dropout mask", 1, GM_AT_SEQ)->h = 1;
}

/*
 * A norm in front of n linears (HF). LlamaRMSNorm computes in fp32:
 * x32 = x.to(fp32) (a copy only when x is 16-bit), saves x32 for pow/mul,
 * the rsqrt (4 B/token) and the normalised tensor it multiplies by the
 * weight (fp32 when R = 4, else its 16-bit cast). nn.LayerNorm saves its
 * input and mean/rstd (8 B/token). Then the linears' inputs: n autocast
 * casts (C each), or the norm output once.
 */
static void norm(struct gm_act_layer *l, const struct gm_act_style *st,
		 bool rms, int n, const char *what)
{
	double R = st->residual, C = st->compute;
	struct gm_act_tensor *t;

	if (rms) {
		add(l, "rmsnorm x (fp32)", 4, GM_AT_SEQ)->h = 1;
		add(l, "rmsnorm x*rsqrt", R == 4 ? 4 : C, GM_AT_SEQ)->h = 1;
		add(l, "rmsnorm rsqrt", 4, GM_AT_SEQ)->one = 1;
	} else {
		t = add(l, "layernorm input", R, GM_AT_SEQ);
		t->h = 1;
		add(l, "layernorm mean, rstd", 4, GM_AT_SEQ)->one = 2;
	}
	t = add(l, what, st->autocast ? C : R, GM_AT_SEQ);
	t->h = st->autocast ? n : 1;
}

/*
 * Attention core after the q/k/v projections. sdpa (flash or
 * memory-efficient kernels) saves q, k, v, its output and an fp32
 * logsumexp (a per token); dropout inside it uses a Philox seed, no
 * mask. Both kernels allocate their output as (b, s, a, d) and return a
 * transposed view, so HF's transpose(1, 2).contiguous() in
 * sdpa_attention_forward is a no-op and o_proj saves the same storage
 * (measured: removing a second copy brought the GPT-2 sdpa configurations
 * of tests/data/calibration/measured-h200.json within 1%). Eager
 * attention's matmul output is (b, a, s, d): its transpose(1, 2)
 * .contiguous() is a real copy, which o_proj saves. GQA: sdpa
 * and flash take K/V at kv width (enable_gqa); eager repeats them to all
 * heads (repeat_kv), and saves the softmax output in fp32 (softmax(...,
 * dtype=float32) in Llama, autocast's fp32 list for GPT-2/BERT), its cast
 * to C for the product with V, and with dropout a 1-byte mask.
 */
static void attention(struct gm_act_layer *l, const struct gm_act_style *st,
		      bool kv_saved_already)
{
	double C = st->compute;

	if (st->attn == GM_ATTN_EAGER) {
		if (!kv_saved_already) {
			add(l, "q", C, 0)->h = 1;
			add(l, "k, v repeated to all heads", C, 0)->h = 2;
		}
		add(l, "softmax output (fp32)", 4, GM_AT_CORE)->as = 1;
		add(l, "attention probabilities", C, GM_AT_CORE)->as = 1;
		if (st->dropout)
			add(l, "attention dropout mask", 1,
			    GM_AT_CORE)->as = 1;
		add(l, "attention output (contiguous)", C, 0)->h = 1;
		return;
	}
	if (!kv_saved_already) {
		add(l, "q", C, 0)->h = 1;
		add(l, "k, v", C, 0)->kv = 2;
	}
	add(l, "attention output", C, 0)->h = 1;
	add(l, "attention logsumexp", 4, 0)->a = 1;
}

void gm_act_layer_hf(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute, R = st->residual;
	bool rms = st->arch == GM_ARCH_LLAMA;
	struct gm_act_tensor *t;

	memset(l, 0, sizeof(*l));
	l->input_bytes = R;
	switch (st->arch) {
	case GM_ARCH_GPT2:
		/* GPT2Block: ln_1 -> c_attn (fused qkv; split views keep
		 * the whole output alive) -> attention -> c_proj ->
		 * resid dropout -> add; ln_2 -> c_fc -> gelu_new -> c_proj
		 * -> dropout -> add. */
		norm(l, st, false, 1, "c_attn input");
		t = add(l, "c_attn output (q, k, v views)", C, 0);
		t->h = 1;
		t->kv = 2;
		attention(l, st, true);
		if (st->dropout)
			add(l, "resid dropout mask", 1, GM_AT_SEQ)->h = 1;
		norm(l, st, false, 1, "c_fc input");
		/* gelu_new is Python: 0.5*x*(1+tanh(c*(x+0.044715x^3)))
		 * (NewGELUActivation): pow saves x, tanh its output, the
		 * last mul 0.5*x and 1+tanh; c_proj saves the product.
		 * Under autocast pow is on the fp32 list, so it saves an
		 * fp32 copy of x, and x + 0.044715x^3 promotes to fp32:
		 * tanh's output and 1+tanh are fp32, 0.5*x stays 16-bit. */
		if (st->autocast) {
			add(l, "gelu_new pow input (fp32)", 4, 0)->f = 1;
			add(l, "gelu_new tanh, 1+tanh (fp32)", 4, 0)->f = 2;
			add(l, "gelu_new 0.5x", C, 0)->f = 1;
		} else {
			add(l, "c_fc output", C, 0)->f = 1;
			add(l, "gelu_new tanh, 0.5x, 1+tanh", C, 0)->f = 3;
		}
		add(l, "c_proj input", C, 0)->f = 1;
		if (st->dropout)
			add(l, "mlp dropout mask", 1, GM_AT_SEQ)->h = 1;
		break;
	case GM_ARCH_BERT:
		/* BertLayer (post-norm): q/k/v linears on the block input
		 * -> attention -> dense -> dropout -> add -> LayerNorm;
		 * intermediate dense -> gelu -> output dense -> dropout ->
		 * add -> LayerNorm. */
		t = add(l, "q/k/v input", st->autocast ? C : R, GM_AT_SEQ);
		t->h = st->autocast ? 3 : 1;
		attention(l, st, false);
		if (st->dropout)
			add(l, "attention dropout mask", 1, GM_AT_SEQ)->h = 1;
		norm(l, st, false, 1, "intermediate input");
		add(l, "gelu input", C, 0)->f = 1;
		add(l, "output dense input", C, 0)->f = 1;
		if (st->dropout)
			add(l, "output dropout mask", 1, GM_AT_SEQ)->h = 1;
		t = add(l, "output layernorm input", R, GM_AT_SEQ);
		t->h = 1;
		add(l, "layernorm mean, rstd", 4, GM_AT_SEQ)->one = 2;
		break;
	default:
		/* LlamaDecoderLayer: input_layernorm -> q/k/v (RoPE saves
		 * only cos/sin) -> attention -> o_proj -> add;
		 * post_attention_layernorm -> gate/up -> SiLU(gate)*up ->
		 * down -> add. No dropout (attention_dropout 0). */
		norm(l, st, rms, 3, "q/k/v input");
		attention(l, st, false);
		norm(l, st, rms, 2, "gate/up input");
		add(l, "gate output (SiLU input)", C, 0)->f = 1;
		add(l, "SiLU output, up output", C, 0)->f = 2;
		add(l, "down_proj input", C, 0)->f = 1;
		break;
	}
	/*
	 * Transient (an estimate): backward of the
	 * MLP holds the gradients of its widest tensors (3 f-wide for a
	 * gated MLP: d(gate), d(up), d(product); 2 otherwise); flash/sdpa
	 * backward holds dq, dk, dv plus an fp32 dq accumulator; eager
	 * attention's backward holds d(probs) in C and two fp32 a*s
	 * tensors (softmax backward's input and output). Plus the residual
	 * stream's gradient in and out of the block (2 R h, SEQ).
	 */
	{
		double mlp = C * (st->arch == GM_ARCH_LLAMA ? 3 : 2);
		struct gm_act_tensor *x = &l->transient;

		memset(x, 0, sizeof(*x));
		x->name = "block transient";
		x->bytes = 1;
		if (st->attn == GM_ATTN_EAGER) {
			x->as = C + 8;
			x->h = 0;
		} else {
			x->h = C + 4;
			x->kv = 2 * C;
		}
		x->f = mlp; /* max() of the two is taken in bytes below */
		l->transient_seq = (struct gm_act_tensor){
			.name = "residual gradients", .h = 2, .bytes = R,
			.flags = GM_AT_SEQ};
	}
}

double gm_act_tensor_bytes(const struct gm_act_tensor *t,
			   const struct gm_act_dims *d)
{
	double per_tok = t->h * d->h + t->kv * d->kv + t->f * d->f +
			 t->as * d->a * d->s + t->a * d->a + t->one;
	double div = !(t->flags & GM_AT_SEQ) || d->sp ? d->t : 1;

	/* Per-token elements that are counts (rsqrt, mean/rstd) are per
	 * token whatever TP does; the rest divide as flagged. */
	if (t->flags & GM_AT_SEQ)
		return per_tok * t->bytes * d->s * d->b / div;
	return per_tok * t->bytes * d->s * d->b / div;
}

double gm_act_layer_saved(const struct gm_act_layer *l,
			  const struct gm_act_dims *d, enum gm_ckpt ck)
{
	double sum = 0;

	if (ck == GM_CKPT_FULL)
		return l->input_bytes * d->s * d->b * d->h / (d->sp ? d->t : 1);
	for (int i = 0; i < l->n; i++) {
		if (ck == GM_CKPT_SELECTIVE && (l->t[i].flags & GM_AT_CORE))
			continue;
		sum += gm_act_tensor_bytes(&l->t[i], d);
	}
	return sum;
}

double gm_act_layer_transient(const struct gm_act_layer *l,
			      const struct gm_act_dims *d)
{
	struct gm_act_tensor attn = l->transient, mlp = l->transient;
	double a, m;

	attn.f = 0;
	mlp.h = mlp.kv = mlp.as = 0;
	a = gm_act_tensor_bytes(&attn, d);
	m = gm_act_tensor_bytes(&mlp, d);
	return (a > m ? a : m) + gm_act_tensor_bytes(&l->transient_seq, d);
}
