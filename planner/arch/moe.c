/*
 * moe.c - the routed experts of the MoE families (moe.h).
 *
 * Training follows transformers 5.x's grouped_mm experts forward
 * (src/transformers/integrations/moe.py grouped_mm_experts_forward and
 * _grouped_mm; the `grouped_mm` frames of the H200 traces in
 * tests/data/calibration/traces/pending-loops/, transformers 5.17):
 * every (token, expert) pair of the top-k, S = tokens x experts_per_token
 * rows, is gathered once (hidden_states[token_idx], sorted by expert)
 * and goes through two grouped matmuls over all experts at once, so
 * neither the saved tensors nor the backward's transient depend on how
 * the router splits the tokens. torch's grouped_mm is not on autocast's
 * lists and _grouped_mm casts its input to the weight's dtype: the
 * experts compute in the parameters' dtype (fp32 under *-mixed, the
 * residual stream's dtype R), not autocast's 16 bits.
 */
#include "arch/moe.h"

#include "activations.h"
#include "step_emit.h"

/*
 * Saved, per token: the router's softmax over the experts (fp32; its
 * linear's input cast is the caller's norm row); per (token, expert)
 * pair in R bytes: the gathered input (grouped_mm saves it), gate_up
 * (SiLU saves the gate half, the product the up half: one tensor), the
 * SiLU output and the product (the product's and down's grouped_mm
 * inputs), down's output (saved by the product with the fp32 routing
 * weights, S x 4 bytes). The backward's widest moment over the S rows
 * is the product's backward: d(product), d(SiLU output) and d(up) live
 * while the product itself is already freed, 2 expert widths beyond
 * what is still saved (the order of the H200 trace of
 * native-mixtral-2l-bf16true-sgd: 448 MiB blocks, S = 16384, bf16).
 */
void gm_moe_saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double R = st->residual, k = st->topk, E = st->experts;

	gm_act_add(l, "router probabilities (fp32)", 4, 0)->one = E;
	gm_act_add(l, "routing weights (fp32)", 4, 0)->one = k;
	gm_act_add(l, "expert inputs (gathered)", R, 0)->h = k;
	gm_act_add(l, "expert gate_up output", R, 0)->fe = 2 * k;
	gm_act_add(l, "expert SiLU output, product", R, 0)->fe = 2 * k;
	gm_act_add(l, "expert down output", R, 0)->h = k;
	l->transient.f = 0;
	l->transient.fe = R * 2 * k;
}

/*
 * The routed experts in inference over T tokens as transformers 5.17 runs
 * them by default: PreTrainedModel.get_correct_experts_implementation
 * (modeling_utils.py) picks "grouped_mm" where it can dispatch (CUDA,
 * compute capability 8.0 and up), so the experts' forward is
 * integrations/moe.py grouped_mm_experts_forward: with S = T x
 * experts_per_token (token, expert) rows, the sort by expert (ids and
 * permutation, int64), the gathered input (hidden_states[perm // top_k]),
 * the permuted routing weights (wb bytes each), histc's counts and their cumsum,
 * the sentinel mask (bool), gate_up's grouped_mm and its masked_fill
 * copy, SiLU(gate) and its product with up, down's grouped_mm and its
 * masked_fill copy, the product with the routing weights (in the
 * promoted dtype: p bytes, fp32 where the weights are), the inverse
 * permutation (empty_like and an arange), the rows put back in token
 * order, their sum over the top-k and its cast to the activation dtype. Every name lives until the function returns. Returns
 * the output (T x hidden, activation dtype).
 */
uint32_t gm_moe_infer_experts(struct gm_em *e, double T, double wb)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, E = in->experts, H = in->hidden;
	double F = in->ffn_expert, S = T * in->topk, p = wb > c ? wb : c;
	uint32_t eg, perm, pd, sel, sw, hi, tpe, off, sm, gu, gm, a, m, d, dm;
	uint32_t wo, ip, ar, wi, su, out;

	eg = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);         /* sort */
	perm = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);
	pd = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);         /* // top_k */
	sel = gm_em_alloc(e, S * H * c, GM_SK_TRANSIENT);    /* gather */
	gm_em_free(e, &pd);
	sw = gm_em_alloc(e, S * wb, GM_SK_TRANSIENT);        /* weights */
	hi = gm_em_alloc(e, S * 4, GM_SK_TRANSIENT);         /* .int() */
	tpe = gm_em_alloc(e, E * 4, GM_SK_TRANSIENT);        /* histc */
	gm_em_free(e, &hi);
	off = gm_em_alloc(e, E * 4, GM_SK_TRANSIENT);        /* cumsum */
	sm = gm_em_alloc(e, S, GM_SK_TRANSIENT);             /* sentinel */
	gu = gm_em_alloc(e, S * 2 * F * c, GM_SK_TRANSIENT); /* gate_up */
	gm = gm_em_alloc(e, S * 2 * F * c, GM_SK_TRANSIENT); /* masked */
	gm_em_free(e, &gu);
	a = gm_em_alloc(e, S * F * c, GM_SK_TRANSIENT);      /* act */
	m = gm_em_alloc(e, S * F * c, GM_SK_TRANSIENT);      /* * up */
	gm_em_free(e, &a);
	gm_em_free(e, &gm);
	d = gm_em_alloc(e, S * H * c, GM_SK_TRANSIENT);      /* down */
	gm_em_free(e, &m);
	dm = gm_em_alloc(e, S * H * c, GM_SK_TRANSIENT);     /* masked */
	gm_em_free(e, &d);
	wo = gm_em_alloc(e, S * H * p, GM_SK_TRANSIENT);     /* * w */
	ip = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);         /* inv_perm */
	ar = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);         /* arange */
	gm_em_free(e, &ar);
	wi = gm_em_alloc(e, S * H * p, GM_SK_TRANSIENT);     /* [inv_perm] */
	gm_em_free(e, &wo);
	su = gm_em_alloc(e, T * H * p, GM_SK_TRANSIENT);     /* sum */
	if (p != c) {
		out = gm_em_alloc(e, T * H * c, GM_SK_TRANSIENT); /* .to() */
		gm_em_free(e, &su);
	} else {
		out = su;
	}
	gm_em_free(e, &eg);
	gm_em_free(e, &perm);
	gm_em_free(e, &sel);
	gm_em_free(e, &sw);
	gm_em_free(e, &tpe);
	gm_em_free(e, &off);
	gm_em_free(e, &sm);
	gm_em_free(e, &dm);
	gm_em_free(e, &wi);
	gm_em_free(e, &ip);
	return out;
}

/*
 * MixtralSparseMoeBlock and Qwen3MoeSparseMoeBlock in inference over T
 * tokens of hidden states n2 (transformers 5.17 modeling_mixtral.py
 * MixtralTopKRouter, modeling_qwen3_moe.py Qwen3MoeTopKRouter): the
 * router's logits, their fp32 softmax (through an fp32 copy), the top-k
 * values and indices, the values' sum; Qwen3-MoE's router then casts the
 * weights back to the logits' dtype (cast), Mixtral's keeps them fp32.
 * Then the experts (gm_moe_infer_experts). The block keeps the router
 * logits (`_`), the weights and the indices until it returns. Returns
 * the block's output.
 */
uint32_t gm_moe_infer(struct gm_em *e, double T, bool cast)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, E = in->experts, k = in->topk, tk = T * k;
	uint32_t lg, lf = GM_EM_NONE, pr, tv, ti, sum, out;

	lg = gm_em_alloc(e, T * E * c, GM_SK_TRANSIENT);     /* gate */
	if (c != 4)
		lf = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT); /* float */
	pr = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT);     /* softmax */
	gm_em_free(e, &lf);
	tv = gm_em_alloc(e, tk * 4, GM_SK_TRANSIENT);        /* topk */
	ti = gm_em_alloc(e, tk * 8, GM_SK_TRANSIENT);
	sum = gm_em_alloc(e, T * 4, GM_SK_TRANSIENT);        /* /= sum */
	gm_em_free(e, &sum);
	if (cast && c != 4) {
		uint32_t tc = gm_em_alloc(e, tk * c, GM_SK_TRANSIENT);

		gm_em_free(e, &tv);
		tv = tc;
	}
	gm_em_free(e, &pr);
	out = gm_moe_infer_experts(e, T, cast ? c : 4);
	gm_em_free(e, &lg);
	gm_em_free(e, &tv);
	gm_em_free(e, &ti);
	return out;
}

uint32_t gm_moe_infer_mlp(struct gm_em *e, const struct gm_em_fwd *f,
			  uint32_t *n2, uint32_t *r, bool cast)
{
	double T = (double)f->T;
	double X = T * gm_em_infer(e)->hidden * gm_em_infer(e)->c;
	uint32_t mo = gm_moe_infer(e, T, cast), out;

	gm_em_free(e, n2);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &mo);
	gm_em_free(e, r);
	return out;
}
