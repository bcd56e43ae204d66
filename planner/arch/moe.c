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
#include "block.h"
#include "params.h"
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
void gm_moe_params(const struct gm_spec_model *m, struct gm_param_layout *l,
		   uint64_t lo, uint64_t hi)
{
	uint64_t h = m->hidden_size, E = m->experts;
	uint64_t F = m->moe_ffn_hidden_size;

	/* MixtralTopKRouter / Qwen3MoeTopKRouter / DeepseekV3TopkRouter
	 * .weight */
	gm_params_add(l, "layers.*.mlp.gate.weight", E, h,
		      GM_PT_LAYER | GM_PT_MATMUL);
	if (hi)
		gm_params_blocks(l, lo, hi);
	/* not GM_PT_MATMUL: grouped_mm is not on autocast's lists, so
	 * autocast makes no 16-bit copy of them (integrations/moe.py
	 * _grouped_mm; the H200 trace of accelerate-qwen3moe-2l-bf16mixed
	 * has none) */
	gm_params_add3(l, "layers.*.mlp.experts.gate_up_proj", E, 2 * F, h,
		       GM_PT_LAYER | GM_PT_TP);
	if (hi)
		gm_params_blocks(l, lo, hi);
	gm_params_add3(l, "layers.*.mlp.experts.down_proj", E, h, F,
		       GM_PT_LAYER | GM_PT_TP);
	if (hi)
		gm_params_blocks(l, lo, hi);
}

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

/* ==== Training: the routed MLP op by op (block.h's builders) ==== */

#define END GM_BLK_END

static double maxd(double a, double c)
{
	return a > c ? a : c;
}

/*
 * MixtralTopKRouter.forward (transformers 5.17.0 models/mixtral/
 * modeling_mixtral.py) and Qwen3MoeTopKRouter.forward (models/qwen3_moe/
 * modeling_qwen3_moe.py) on x (tokens x hidden): router_logits =
 * F.linear(x, weight) (autocast's 16 bits, or x's dtype); their fp32
 * copy (Mixtral's .float(), Qwen3-MoE's softmax(dtype=float) but from
 * float16: freed once the softmax, which saves its output, has run);
 * topk's values (fp32) and int64 indices (TopkBackward saves the
 * indices); the in-place division by their sum (autograd saves a clone
 * of the values and the sum). Qwen3-MoE casts the weights back to the
 * logits' dtype (to_logits); Mixtral keeps them in fp32. Qwen3-MoE divides only
 * where norm_topk_prob (true in Qwen3-30B-A3B's and Qwen3-235B-A22B's
 * config.json), which the spec does not say: the division is planned,
 * a clone of tokens x top-k fp32. Returns the weights, *idx the
 * indices, *lg the logits (the block's `_` until it returns).
 */
static int router_softmax(struct gm_blk *b, int x, bool to_logits, int *idx,
			  int *lg)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, E = sh->experts, k = sh->topk;
	int lf, p, v, sm, vc, w;

	*lg = gm_blk_linear_named(b, "gate", x, sh->hidden, E, false);
	/* Mixtral's .float() copies; Qwen3-MoE's softmax(dtype=float)
	 * copies all but a float16 input (gm_blk_softmax) */
	lf = gm_blk_eb(b, *lg) == 4 || to_logits ? *lg :
	     gm_blk_cast(b, *lg, 4);
	p = gm_blk_softmax(b, lf, true);
	if (lf != *lg)
		gm_blk_drop(b, lf);
	*idx = gm_blk_tensor(b, T * k, 8);
	v = gm_blk_op(b, T * k, 4, (int[]){p, END}, (int[]){*idx, END});
	gm_blk_drop(b, p);
	sm = gm_blk_op(b, T, 4, (int[]){v, END}, NULL);
	vc = gm_blk_tensor(b, T * k, 4);
	w = gm_blk_view(b, v, 0);
	gm_blk_set_grad_bytes(b, w, T * k * 4);
	gm_blk_node(b, (int[]){v, sm, END}, (int[]){w, END},
		    (int[]){vc, sm, END});
	gm_blk_drop(b, vc);
	gm_blk_drop(b, sm);
	gm_blk_drop(b, v);
	if (to_logits && gm_blk_eb(b, *lg) != 4) {
		int wc = gm_blk_cast(b, w, gm_blk_eb(b, *lg));
		gm_blk_drop(b, w);
		w = wc;
	}
	return w;
}

/*
 * grouped_mm_experts_forward (transformers 5.17.0 integrations/moe.py,
 * the experts implementation transformers picks on CUDA for sm80+) on x
 * (T tokens x hidden), the top-k weights w and indices idx, S = T x top-k
 * rows: torch.sort of the expert ids (int64 values and permutation; cub's
 * scratch, freed inside, left out), perm // top_k, the gather
 * x[perm // top_k] (IndexBackward saves the indices), the weights in
 * that order, histc's int32 input, the sentinel mask (bool) and the
 * in-place masked_fill_ of the gathered rows; gate_up's grouped_mm, its
 * masked_fill (a new tensor; the grouped_mm output is freed), chunk,
 * SiLU (saves the gate half, which keeps the whole masked gate_up), the
 * product (saves both halves' results); down's grouped_mm and its
 * masked_fill; the product with the weights (promoted: fp32 with
 * Mixtral's fp32 weights); inv_perm (empty_like, arange freed), the
 * rows put back in token order (IndexBackward saves inv_perm), their
 * view as tokens x top-k x hidden summed over the top-k (its backward
 * reshapes the expanded gradient: a copy of S rows), and .to(x's dtype).
 * Returns the output (T x hidden, x's dtype).
 */
static int experts(struct gm_blk *b, int x, int w, int idx)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, k = sh->topk, S = T * k, H = sh->hidden;
	double F = sh->ffn_expert, R = gm_blk_eb(b, x);
	int eg, perm, pk, g, sw, hi, mask, gv, o1, mo, gate, up, sg, pr;
	int o2, mo2, wo, inv, ar, wp, fs, out;
	double ew, eo;

	(void)idx;
	eg = gm_blk_tensor(b, S, 8);
	perm = gm_blk_tensor(b, S, 8);
	pk = gm_blk_tensor(b, S, 8);
	g = gm_blk_op(b, S * H, R, (int[]){x, END}, (int[]){pk, END});
	sw = gm_blk_op(b, S, gm_blk_eb(b, w), (int[]){w, END},
		       (int[]){perm, END});
	hi = gm_blk_tensor(b, S, 4);
	mask = gm_blk_tensor(b, S, 1);
	gv = gm_blk_view(b, g, 0);
	gm_blk_set_grad_bytes(b, gv, S * H * R);
	gm_blk_node(b, (int[]){g, END}, (int[]){gv, END},
		    (int[]){mask, END});
	gm_blk_drop(b, g);
	o1 = gm_blk_grouped_mm(b, gv, S, H, 2 * F);
	ew = gm_blk_eb(b, o1);
	mo = gm_blk_op(b, S * 2 * F, ew, (int[]){o1, END},
		       (int[]){mask, END});
	gm_blk_drop(b, o1);
	gate = gm_blk_view(b, mo, 0);
	up = gm_blk_view(b, mo, 0);
	gm_blk_set_grad_bytes(b, gate, S * F * ew);
	gm_blk_set_grad_bytes(b, up, S * F * ew);
	gm_blk_node(b, (int[]){mo, END}, (int[]){gate, up, END}, NULL);
	sg = gm_blk_op(b, S * F, ew, (int[]){gate, END}, (int[]){gate, END});
	pr = gm_blk_op(b, S * F, ew, (int[]){sg, up, END},
		       (int[]){sg, up, END});
	gm_blk_drop(b, sg);
	gm_blk_drop(b, gate);
	gm_blk_drop(b, up);
	gm_blk_drop(b, mo);
	gm_blk_drop(b, gv);
	o2 = gm_blk_grouped_mm(b, pr, S, F, H);
	gm_blk_drop(b, pr);
	mo2 = gm_blk_op(b, S * H, ew, (int[]){o2, END}, (int[]){mask, END});
	gm_blk_drop(b, o2);
	eo = maxd(ew, gm_blk_eb(b, sw));
	wo = gm_blk_op(b, S * H, eo, (int[]){mo2, sw, END},
		       (int[]){mo2, sw, END});
	/* MulBackward0: the weights' gradient from grad x rows (S rows in
	 * the product's dtype, summed over hidden), and the rows' from
	 * grad x weights, cast to their dtype where it differs */
	gm_blk_set_tmp(b, S * H * eo * (ew != eo ? 2 : 1), false);
	gm_blk_drop(b, mo2);
	inv = gm_blk_tensor(b, S, 8);
	ar = gm_blk_tensor(b, S, 8);
	gm_blk_drop(b, ar);
	wp = gm_blk_op(b, S * H, eo, (int[]){wo, END}, (int[]){inv, END});
	gm_blk_drop(b, wo);
	fs = gm_blk_op(b, T * H, eo, (int[]){wp, END}, NULL);
	out = eo == R ? fs : gm_blk_cast(b, fs, R);
	gm_blk_drop(b, eg);
	gm_blk_drop(b, hi);
	gm_blk_drop(b, wp);
	if (out != fs)
		gm_blk_drop(b, fs);
	gm_blk_drop(b, perm);
	gm_blk_drop(b, pk);
	gm_blk_drop(b, inv);
	gm_blk_drop(b, sw);
	gm_blk_drop(b, mask);
	return out;
}

int gm_moe_block_routed(struct gm_blk *b, int x, bool to_logits)
{
	int idx, lg, w = router_softmax(b, x, to_logits, &idx, &lg);
	int o = experts(b, x, w, idx);

	gm_blk_drop(b, lg);
	gm_blk_drop(b, w);
	gm_blk_drop(b, idx);
	return o;
}

int gm_moe_block_experts(struct gm_blk *b, int x, int w, int idx)
{
	return experts(b, x, w, idx);
}

void gm_moe_block_mlp(struct gm_blk *b, int r1, int n2, bool to_logits)
{
	int mo = gm_moe_block_routed(b, n2, to_logits);

	gm_blk_drop(b, n2);
	gm_blk_output_next(b);
	gm_blk_add(b, r1, mo);
	gm_blk_drop(b, mo);
	gm_blk_drop(b, r1);
	/* the decoder loop holds the layer's input until the layer
	 * returns, as LlamaModel's does */
	gm_blk_drop(b, GM_BLK_IN);
}

/*
 * The routed experts in a prefill (or a plain forward) over T tokens as
 * transformers 5.17 runs them by default: PreTrainedModel.
 * get_correct_experts_implementation (modeling_utils.py) picks
 * "grouped_mm" where it can dispatch (CUDA, compute capability 8.0 and
 * up), so the experts' forward is integrations/moe.py
 * grouped_mm_experts_forward: with S = T x
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
static uint32_t grouped_mm(struct gm_em *e, double T, double wb)
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
 * The routed experts in one of generate()'s decode forwards (T tokens):
 * GenerationMixin._optimize_model_for_decode (transformers 5.17.0
 * generation/utils.py) switches every "grouped_mm" experts
 * implementation to "batched_mm" for the decode loop on a GPU (the
 * prefill, GenerationMixin._prefill, runs before it under grouped_mm),
 * so the experts' forward is integrations/moe.py
 * batched_mm_experts_forward: with S = T x experts_per_token rows,
 * hidden_states.repeat_interleave(top_k) (S x hidden), the clamped
 * expert ids (int64, out of place), gate_up_proj[expert_ids]: a copy of
 * one expert's whole gate_up matrix per row (S x 2 ffn x hidden in the
 * weights' dtype, c under *-true), its bmm (S x 2 ffn), SiLU(gate) and
 * its product with up (the bmm output freed as proj_out is rebound),
 * down_proj[expert_ids] (S x hidden x ffn) allocated while the gate_up
 * copy is still bound to selected_weights (both live: the measured
 * peak of gen-mixtral-2l-b8-p2048-g256, tests/data/calibration/pending/
 * longgen/measured-h200.json, is the weights, the cache and these two
 * copies, 16 rows x 3 x 14336 x 4096 x 2 B = 5.25 GiB), its bmm
 * (S x hidden), the product with the routing weights (promoted: p
 * bytes), the sum over the top-k and its cast. Every name lives until
 * the function returns; repeat_interleave's own index (S int64, inside
 * ATen) is left out. Returns the output (T x hidden, activation dtype).
 */
static uint32_t batched_mm(struct gm_em *e, double T, double wb)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, H = in->hidden, F = in->ffn_expert;
	double S = T * in->topk, p = wb > c ? wb : c;
	uint32_t rep, ids, wg, gu, a, m, wd, d, wo, su, out;

	rep = gm_em_alloc(e, S * H * c, GM_SK_TRANSIENT);     /* repeat */
	ids = gm_em_alloc(e, S * 8, GM_SK_TRANSIENT);         /* clamp */
	wg = gm_em_alloc(e, S * 2 * F * H * c, GM_SK_TRANSIENT); /* [ids] */
	gu = gm_em_alloc(e, S * 2 * F * c, GM_SK_TRANSIENT);  /* bmm */
	a = gm_em_alloc(e, S * F * c, GM_SK_TRANSIENT);       /* act */
	m = gm_em_alloc(e, S * F * c, GM_SK_TRANSIENT);       /* * up */
	gm_em_free(e, &a);
	gm_em_free(e, &gu);
	wd = gm_em_alloc(e, S * H * F * c, GM_SK_TRANSIENT);  /* [ids] */
	gm_em_free(e, &wg);
	d = gm_em_alloc(e, S * H * c, GM_SK_TRANSIENT);       /* bmm */
	gm_em_free(e, &m);
	wo = gm_em_alloc(e, S * H * p, GM_SK_TRANSIENT);      /* * w */
	su = gm_em_alloc(e, T * H * p, GM_SK_TRANSIENT);      /* sum */
	if (p != c) {
		out = gm_em_alloc(e, T * H * c, GM_SK_TRANSIENT); /* .to() */
		gm_em_free(e, &su);
	} else {
		out = su;
	}
	gm_em_free(e, &rep);
	gm_em_free(e, &ids);
	gm_em_free(e, &wd);
	gm_em_free(e, &d);
	gm_em_free(e, &wo);
	return out;
}

uint32_t gm_moe_infer_experts(struct gm_em *e, const struct gm_em_fwd *f,
			      double wb)
{
	if (f->decode)
		return batched_mm(e, (double)f->T, wb);
	return grouped_mm(e, (double)f->T, wb);
}

/*
 * MixtralSparseMoeBlock and Qwen3MoeSparseMoeBlock in inference over T
 * tokens of hidden states n2 (transformers 5.17 modeling_mixtral.py
 * MixtralTopKRouter, modeling_qwen3_moe.py Qwen3MoeTopKRouter): the
 * router's logits, their fp32 softmax (through an fp32 copy), the top-k
 * values and indices, the values' sum; Qwen3-MoE's router then casts the
 * weights back to the logits' dtype (cast), Mixtral's keeps them fp32.
 * Then the experts (gm_moe_infer_experts: grouped_mm, or batched_mm in
 * a decode forward). The block keeps the router
 * logits (`_`), the weights and the indices until it returns. Returns
 * the block's output.
 */
uint32_t gm_moe_infer(struct gm_em *e, const struct gm_em_fwd *f, bool cast)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T;
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
	out = gm_moe_infer_experts(e, f, cast ? c : 4);
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
	uint32_t mo = gm_moe_infer(e, f, cast), out;

	gm_em_free(e, n2);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &mo);
	gm_em_free(e, r);
	return out;
}
