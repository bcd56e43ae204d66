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

#include "arch/family.h"

#include <string.h>

struct gm_act_tensor *gm_act_add(struct gm_act_layer *l, const char *name,
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
	gm_act_add(l, "layernorm1 input", 2, GM_AT_SEQ)->h = 1;
	gm_act_add(l, "qkv input", 2, GM_AT_SEQ)->h = 1;
	gm_act_add(l, "q, k for q*k^T", 2, 0)->h = 2;
	gm_act_add(l, "softmax output", 2, GM_AT_CORE)->as = 1;
	gm_act_add(l, "softmax dropout mask", 1, GM_AT_CORE)->as = 1;
	gm_act_add(l, "softmax dropout output", 2, GM_AT_CORE)->as = 1;
	gm_act_add(l, "v", 2, 0)->h = 1;
	gm_act_add(l, "output projection input", 2, 0)->h = 1;
	gm_act_add(l, "attention dropout mask", 1, GM_AT_SEQ)->h = 1;
	/* MLP block, 19sbh (with f = 4h), and the second LayerNorm 2sbh. */
	gm_act_add(l, "layernorm2 input", 2, GM_AT_SEQ)->h = 1;
	gm_act_add(l, "fc1 input", 2, GM_AT_SEQ)->h = 1;
	gm_act_add(l, "gelu input", 2, 0)->f = 1;
	gm_act_add(l, "fc2 input", 2, 0)->f = 1;
	gm_act_add(l, "mlp dropout mask", 1, GM_AT_SEQ)->h = 1;
}

/*
 * A norm in front of n linears (HF). LlamaRMSNorm computes in fp32:
 * x32 = x.to(fp32) (a copy only when x is 16-bit), saves x32 for pow/mul,
 * the rsqrt (4 B/token) and the normalised tensor it multiplies by the
 * weight (fp32 when R = 4, else its 16-bit cast). nn.LayerNorm saves its
 * input and mean/rstd (8 B/token). Then the linears' inputs: n autocast
 * casts (C each), or the norm output once.
 */
void gm_act_norm(struct gm_act_layer *l, const struct gm_act_style *st,
		 bool rms, int n, const char *what)
{
	double R = st->residual, C = st->compute;
	struct gm_act_tensor *t;

	if (rms) {
		gm_act_add(l, "rmsnorm x (fp32)", 4, GM_AT_SEQ)->h = 1;
		gm_act_add(l, "rmsnorm x*rsqrt", R == 4 ? 4 : C, GM_AT_SEQ)->h = 1;
		gm_act_add(l, "rmsnorm rsqrt", 4, GM_AT_SEQ)->one = 1;
	} else {
		t = gm_act_add(l, "layernorm input", R, GM_AT_SEQ);
		t->h = 1;
		gm_act_add(l, "layernorm mean, rstd", 4, GM_AT_SEQ)->one = 2;
	}
	t = gm_act_add(l, what, st->autocast ? C : R, GM_AT_SEQ);
	t->h = st->autocast ? n : 1;
}

/*
 * Attention core after the q/k/v projections. sdpa (flash or
 * memory-efficient kernels) saves q, k, v, its output and an fp32
 * logsumexp (a per token); dropout inside it uses a Philox seed, no
 * mask. Both kernels allocate their output as (b, s, a, d) and return a
 * transposed view, so HF's transpose(1, 2).contiguous() in
 * sdpa_attention_forward is a no-op and o_proj saves the same storage
 * (the GPT-2 sdpa configurations of
 * tests/data/calibration/measured-h200.json). Eager
 * attention's matmul output is (b, a, s, d): its transpose(1, 2)
 * .contiguous() is a real copy, which o_proj saves. GQA: sdpa
 * and flash take K/V at kv width (enable_gqa); eager repeats them to all
 * heads (repeat_kv), and saves the softmax output in fp32 (softmax(...,
 * dtype=float32) in Llama, autocast's fp32 list for GPT-2/BERT), its cast
 * to C for the product with V, and with dropout a 1-byte mask.
 */
void gm_act_attention(struct gm_act_layer *l, const struct gm_act_style *st,
		      bool kv_saved_already)
{
	double C = st->compute;

	if (st->attn == GM_ATTN_EAGER) {
		if (!kv_saved_already) {
			gm_act_add(l, "q", C, 0)->q = 1;
			gm_act_add(l, "k, v repeated to all heads", C, 0)->q = 2;
		}
		gm_act_add(l, "softmax output (fp32)", 4, GM_AT_CORE)->as = 1;
		gm_act_add(l, "attention probabilities", C, GM_AT_CORE)->as = 1;
		if (st->dropout)
			gm_act_add(l, "attention dropout mask", 1,
			    GM_AT_CORE)->as = 1;
		gm_act_add(l, "attention output (contiguous)", C, 0)->q = 1;
		return;
	}
	if (!kv_saved_already) {
		gm_act_add(l, "q", C, 0)->q = 1;
		gm_act_add(l, "k, v", C, 0)->kv = 2;
	}
	gm_act_add(l, "attention output", C, 0)->q = 1;
	gm_act_add(l, "attention logsumexp", 4, 0)->a = 1;
}

void gm_act_layer_hf(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute, R = st->residual;

	memset(l, 0, sizeof(*l));
	l->input_bytes = R;
	/*
	 * Transient (an estimate): backward of the MLP holds the gradients
	 * of its widest tensors (the family's mlp_grads: 3 f-wide for a
	 * gated MLP: d(gate), d(up), d(product); 2 otherwise); flash/sdpa
	 * backward holds dq, dk, dv plus an fp32 dq accumulator; eager
	 * attention's backward holds d(probs) in C and two fp32 a*s
	 * tensors (softmax backward's input and output). Plus the residual
	 * stream's gradient in and out of the block (2 R h, SEQ).
	 */
	{
		double mlp = C * st->fam->mlp_grads;
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
	/* the family's saved tensors (it may refine the transient) */
	st->fam->saved(l, st);
}

double gm_act_tensor_bytes(const struct gm_act_tensor *t,
			   const struct gm_act_dims *d)
{
	double per_tok = t->h * d->h + t->q * d->q + t->kv * d->kv +
			 t->f * d->f +
			 t->as * d->a * d->s + t->a * d->a + t->one +
			 t->fe * d->fe;
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
