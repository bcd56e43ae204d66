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
 * MixtralSparseMoeBlock in inference over T tokens of hidden states n2:
 * the router (logits, their fp32 softmax, top-k values and indices), the
 * output buffer (zeros_like), the one-hot expert mask, then expert by
 * expert: torch.where's positions and token indices, the gathered input,
 * gate_up, SiLU, the product, down, the product with the fp32 routing
 * weights (fp32), its cast to the output dtype for index_add_. A loop
 * iteration's names live until the next rebinds them. Returns the
 * block's output.
 */
uint32_t gm_moe_infer(struct gm_em *e, double T)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, E = in->experts, k = in->topk, H = in->hidden;
	double F = in->ffn_expert, tk = T * k;
	double hit = tk < E ? tk : E, n = tk / hit;
	uint32_t lg, lf = GM_EM_NONE, pr, tv, ti, out, mask;
	uint32_t pos = GM_EM_NONE, idx = GM_EM_NONE, cur = GM_EM_NONE;
	uint32_t gu = GM_EM_NONE, chs = GM_EM_NONE;

	lg = gm_em_alloc(e, T * E * c, GM_SK_TRANSIENT);     /* gate */
	if (c != 4)
		lf = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT); /* float */
	pr = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT);     /* softmax */
	gm_em_free(e, &lf);
	tv = gm_em_alloc(e, tk * 4, GM_SK_TRANSIENT);        /* topk */
	ti = gm_em_alloc(e, tk * 8, GM_SK_TRANSIENT);
	gm_em_free(e, &pr);
	gm_em_free(e, &lg);
	out = gm_em_alloc(e, T * H * c, GM_SK_TRANSIENT);    /* zeros_like */
	mask = gm_em_alloc(e, tk * E * 8, GM_SK_TRANSIENT);  /* one_hot */
	for (double x = 0; x < hit; x++) {
		uint32_t np, ni, nc, ng, s, m, w, d, nh, cast;

		np = gm_em_alloc(e, n * 8, GM_SK_TRANSIENT);  /* where */
		ni = gm_em_alloc(e, n * 8, GM_SK_TRANSIENT);
		gm_em_free(e, &pos);
		gm_em_free(e, &idx);
		pos = np;
		idx = ni;
		nc = gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT); /* gather */
		gm_em_free(e, &cur);
		cur = nc;
		ng = gm_em_alloc(e, n * 2 * F * c, GM_SK_TRANSIENT);
		gm_em_free(e, &gu);                   /* gate, up rebound */
		gu = ng;
		s = gm_em_alloc(e, n * F * c, GM_SK_TRANSIENT);   /* act */
		m = gm_em_alloc(e, n * F * c, GM_SK_TRANSIENT);   /* * up */
		gm_em_free(e, &s);
		gm_em_free(e, &chs);
		w = gm_em_alloc(e, n * 4, GM_SK_TRANSIENT);   /* weights */
		d = gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT);   /* down */
		gm_em_free(e, &m);
		nh = gm_em_alloc(e, n * H * 4, GM_SK_TRANSIENT);  /* * w */
		gm_em_free(e, &d);
		gm_em_free(e, &w);
		chs = nh;
		cast = c != 4 ? gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT) :
				GM_EM_NONE;                   /* .to() */
		gm_em_free(e, &cast);                     /* index_add_ */
	}
	gm_em_free(e, &cur);
	gm_em_free(e, &gu);
	gm_em_free(e, &pos);
	gm_em_free(e, &idx);
	gm_em_free(e, &chs);
	gm_em_free(e, &mask);
	gm_em_free(e, &tv);
	gm_em_free(e, &ti);
	return out;
}

uint32_t gm_moe_infer_mlp(struct gm_em *e, const struct gm_em_fwd *f,
			  uint32_t *n2, uint32_t *r)
{
	double T = (double)f->T;
	double X = T * gm_em_infer(e)->hidden * gm_em_infer(e)->c;
	uint32_t mo = gm_moe_infer(e, T), out;

	gm_em_free(e, n2);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &mo);
	gm_em_free(e, r);
	return out;
}
