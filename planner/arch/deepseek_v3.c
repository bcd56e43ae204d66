/*
 * deepseek_v3.c - the DeepSeek-V3 family (family.h): DeepseekV3ForCausalLM
 * of transformers 5.x (src/transformers/models/deepseek_v3/
 * modeling_deepseek_v3.py: DeepseekV3DecoderLayer, DeepseekV3Attention,
 * DeepseekV3MLP, DeepseekV3MoE with DeepseekV3TopkRouter and
 * DeepseekV3NaiveMoe).
 *
 * Multi-head latent attention: q is q_b_proj(q_a_layernorm(q_a_proj(x)))
 * with q_a_proj hidden -> q_lora_rank (or one q_proj when q_lora_rank is
 * 0, the config's null), heads x (qk_nope_head_dim + qk_rope_head_dim)
 * wide; kv_a_proj_with_mqa gives kv_lora_rank + qk_rope_head_dim, the
 * compressed part through kv_a_layernorm and kv_b_proj to heads x
 * (qk_nope_head_dim + v_head_dim), the rope part one rotary key shared
 * by all heads; o_proj heads x v_head_dim -> hidden. No biases
 * (attention_bias true is refused by hf_config.c).
 * The first model.dense_layers blocks (first_k_dense_replace) have a
 * dense SwiGLU MLP of ffn_hidden_size; the others a router over
 * `experts` experts of moe_ffn_hidden_size (sigmoid scores, n_group /
 * topk_group selection: the same top-k tensors' sizes), run as moe.c
 * says, plus shared_experts always-on experts as one DeepseekV3MLP of
 * shared_experts x moe_ffn_hidden_size. The router's
 * e_score_correction_bias is a buffer, not a parameter. Multi-token
 * prediction (num_nextn_predict_layers) is not part of transformers'
 * model and not planned.
 * Training runs DeepseekV3DecoderLayer op by op (block), read off
 * transformers 5.17.0's modeling_deepseek_v3.py (DeepseekV3Attention
 * with rope_interleave, the config's default; DeepseekV3MLP;
 * DeepseekV3MoE with DeepseekV3TopkRouter, the grouped_mm experts of
 * moe.c and the shared experts); a stage whose first blocks are dense
 * runs their program there (model.c).
 * Inference follows transformers 5.17 (modeling_deepseek_v3.py
 * DeepseekV3Attention.forward and expand_kv, DeepseekV3TopkRouter,
 * DeepseekV3MoE, DeepseekV3Experts under integrations/moe.py's default
 * grouped_mm; the H200 trace of native-deepseekv3-2l-bf16true-sgd in
 * tests/data/calibration/traces/pending-loops/ shows the same sequence):
 * the cache holds the compressed latents, not per-head keys and values.
 */
#include "arch/family.h"
#include "arch/llama.h"
#include "arch/moe.h"

#include "activations.h"
#include "block.h"
#include "loss.h"
#include "params.h"
#include "step_emit.h"

/* DeepseekV3Config's intermediate_size default (18432). */
static uint64_t ffn(uint64_t hidden)
{
	(void)hidden;
	return 18432;
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, H = m->attention_heads;
	uint64_t qk = m->qk_nope_head_dim + m->qk_rope_head_dim;
	uint64_t F = m->moe_ffn_hidden_size;
	uint64_t Fs = m->shared_experts * F, k = m->dense_layers;
	uint64_t L = m->layers;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	unsigned rep = GM_PT_LAYER | GM_PT_MATMUL;

	(void)diag;
	gm_params_add(l, "embed_tokens", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	if (m->q_lora_rank) {
		gm_params_add(l, "layers.*.self_attn.q_a_proj", m->q_lora_rank,
			      h, rep);
		gm_params_add(l, "layers.*.self_attn.q_a_layernorm",
			      m->q_lora_rank, 1, GM_PT_LAYER);
		gm_params_add(l, "layers.*.self_attn.q_b_proj", H * qk,
			      m->q_lora_rank, lin);
	} else {
		gm_params_add(l, "layers.*.self_attn.q_proj", H * qk, h, lin);
	}
	gm_params_add(l, "layers.*.self_attn.kv_a_proj_with_mqa",
		      m->kv_lora_rank + m->qk_rope_head_dim, h, rep);
	gm_params_add(l, "layers.*.self_attn.kv_a_layernorm", m->kv_lora_rank,
		      1, GM_PT_LAYER);
	gm_params_add(l, "layers.*.self_attn.kv_b_proj",
		      H * (m->qk_nope_head_dim + m->v_head_dim),
		      m->kv_lora_rank, lin);
	gm_params_add(l, "layers.*.self_attn.o_proj", h, H * m->v_head_dim,
		      lin);
	/* DeepseekV3MLP in blocks 0..k-1 */
	gm_params_add(l, "layers.*.mlp.gate_proj", m->ffn_hidden_size, h, lin);
	gm_params_blocks(l, 0, k);
	gm_params_add(l, "layers.*.mlp.up_proj", m->ffn_hidden_size, h, lin);
	gm_params_blocks(l, 0, k);
	gm_params_add(l, "layers.*.mlp.down_proj", h, m->ffn_hidden_size, lin);
	gm_params_blocks(l, 0, k);
	/* DeepseekV3MoE in blocks k..L-1: the router (experts, hidden),
	 * the experts' 3-D parameters, the shared experts' MLP */
	gm_moe_params(m, l, k, L);
	if (Fs) {
		gm_params_add(l, "layers.*.mlp.shared_experts.gate_proj", Fs,
			      h, lin);
		gm_params_blocks(l, k, L);
		gm_params_add(l, "layers.*.mlp.shared_experts.up_proj", Fs, h,
			      lin);
		gm_params_blocks(l, k, L);
		gm_params_add(l, "layers.*.mlp.shared_experts.down_proj", h,
			      Fs, lin);
		gm_params_blocks(l, k, L);
	}
	gm_llama_norm_params(m, l);
	return 0;
}

/*
 * An RMSNorm inside the attention over w elements per token
 * (q_a_layernorm, kv_a_layernorm): as gm_act_norm's RMSNorm (the fp32
 * copy, x * rsqrt, rsqrt), then the next linear's input (its autocast
 * cast, or the norm's output).
 */
static void latent_norm(struct gm_act_layer *l, const struct gm_act_style *st,
			double w, const char *what)
{
	double R = st->residual, C = st->compute;

	gm_act_add(l, "latent rmsnorm x (fp32)", 4, 0)->one = w;
	gm_act_add(l, "latent rmsnorm x*rsqrt", R == 4 ? 4 : C, 0)->one = w;
	gm_act_add(l, "latent rmsnorm rsqrt", 4, 0)->one = 1;
	gm_act_add(l, what, st->autocast ? C : R, 0)->one = w;
}

/* Scale the per-token units of tensors from..l->n-1 by f (the share of
 * blocks that have them). */
static void weigh(struct gm_act_layer *l, int from, double f)
{
	for (int i = from; i < l->n; i++) {
		struct gm_act_tensor *t = &l->t[i];
		t->h *= f, t->q *= f, t->kv *= f, t->f *= f;
		t->as *= f, t->a *= f, t->one *= f, t->fe *= f;
	}
}

/*
 * What a DeepseekV3DecoderLayer keeps for backward, per token.
 * Attention: input_layernorm in front of q_a_proj and kv_a_proj (or
 * q_proj), the latent norms with q_b_proj's and kv_b_proj's inputs, the
 * query and key states (torch.cat of the nope and rotary parts: new
 * tensors, heads x (nope + rope); the rotary embedding saves only
 * cos/sin), kv_b_proj's output (the values are a view of it), with
 * flash attention the values padded to the q/k width (F.pad), the
 * attention output (o_proj's input) and sdpa's logsumexp; eager adds
 * its fp32 softmax and the probabilities. MLP: the average block
 * (moe_frac of the blocks routed): a dense block as Llama's MLP; a
 * routed one post_attention_layernorm in front of the router and the
 * shared experts' gate/up, the experts (moe.c) and the shared experts'
 * SwiGLU (shared_experts x moe_ffn_hidden_size wide).
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	const struct gm_spec_model *m = st->model;
	double C = st->compute, H = (double)m->attention_heads;
	double qk = (double)(m->qk_nope_head_dim + m->qk_rope_head_dim);
	double v = (double)m->v_head_dim, S = (double)m->shared_experts;
	double phi = st->moe_frac;
	int n0;

	gm_act_norm(l, st, true, 2, "q_a/kv_a input");
	if (m->q_lora_rank)
		latent_norm(l, st, (double)m->q_lora_rank, "q_b_proj input");
	latent_norm(l, st, (double)m->kv_lora_rank, "kv_b_proj input");
	gm_act_add(l, "query states (cat)", C, 0)->one = H * qk;
	gm_act_add(l, "key states (cat)", C, 0)->one = H * qk;
	gm_act_add(l, "kv_b_proj output (values)", C, 0)->one =
		H * (double)(m->qk_nope_head_dim + m->v_head_dim);
	if (st->attn == GM_ATTN_FLASH && qk != v)
		gm_act_add(l, "values padded to q/k width", C, 0)->one = H * qk;
	if (st->attn == GM_ATTN_EAGER) {
		gm_act_add(l, "softmax output (fp32)", 4, GM_AT_CORE)->as = 1;
		gm_act_add(l, "attention probabilities", C,
			   GM_AT_CORE)->as = 1;
	} else {
		gm_act_add(l, "attention logsumexp", 4, 0)->a = 1;
	}
	gm_act_add(l, "attention output", C, 0)->one = H * v;
	if (phi < 1) {
		n0 = l->n;
		gm_act_norm(l, st, true, 2, "gate/up input");
		gm_act_add(l, "gate output (SiLU input)", C, 0)->f = 1;
		gm_act_add(l, "SiLU output, up output", C, 0)->f = 2;
		gm_act_add(l, "down_proj input", C, 0)->f = 1;
		weigh(l, n0, 1 - phi);
	}
	if (phi > 0) {
		double tf = l->transient.f;

		n0 = l->n;
		gm_act_norm(l, st, true, S > 0 ? 3 : 1,
			    "router, shared gate/up input");
		gm_moe_saved(l, st);
		if (S > 0) {
			gm_act_add(l, "shared gate output", C, 0)->fe = S;
			gm_act_add(l, "shared SiLU output, up output", C,
				   0)->fe = 2 * S;
			gm_act_add(l, "shared down_proj input", C, 0)->fe = S;
		}
		weigh(l, n0, phi);
		/* the widest block's backward: the dense MLP's where the
		 * model has dense blocks */
		if (phi < 1)
			l->transient.f = tf;
	}
}

#define END GM_BLK_END

static double maxd(double a, double c)
{
	return a > c ? a : c;
}

/* torch.split of x (a linear's output) into views of widths a and c per
 * token: SplitWithSizesBackward concatenates their gradients into one
 * of x's size. With heads, x was viewed per head and transposed first
 * (q_states, kv_b_proj's output): that concatenation is laid out head
 * by head, and the view's backward reshapes it into the linear's layout,
 * a second copy (the H200 trace of native-deepseekv3-2l-bf16true-sgd:
 * two 64 MiB gradients of kv_b_proj's output in turn). */
static void split2(struct gm_blk *b, int x, double a, double c, bool heads,
		   int *xa, int *xc)
{
	double T = gm_blk_shape(b)->tok, e = gm_blk_eb(b, x);

	*xa = gm_blk_view(b, x, 0);
	*xc = gm_blk_view(b, x, 0);
	gm_blk_set_grad_bytes(b, *xa, T * a * e);
	gm_blk_set_grad_bytes(b, *xc, T * c * e);
	gm_blk_node(b, (int[]){x, END}, (int[]){*xa, *xc, END}, NULL);
	if (heads)
		gm_blk_set_tmp(b, T * (a + c) * e, false);
}

/* A strided slice of x (x[..., 0::2]) of n elements: SliceBackward
 * makes a zero tensor of x's size and copies its part in. */
static int slice(struct gm_blk *b, int x, double n)
{
	int v = gm_blk_view(b, x, 0);

	gm_blk_set_grad_bytes(b, v, n * gm_blk_eb(b, x));
	gm_blk_node(b, (int[]){x, END}, (int[]){v, END}, NULL);
	return v;
}

/*
 * apply_rotary_pos_emb_interleave for one of q_rot, k_rot (x, n
 * elements): x1 = x[..., 0::2], x2 = x[..., 1::2]; cat([x1 * cos - x2 *
 * sin, x2 * cos + x1 * sin]) (cos and sin, the residual dtype, save
 * nothing that needs a gradient; the subtraction's second gradient is a
 * new tensor, the cat's backward narrows its incoming one).
 */
static int rope_interleave(struct gm_blk *b, int x, double n)
{
	double e = gm_blk_eb(b, x), eo = maxd(e, gm_blk_shape(b)->r);
	int x1 = slice(b, x, n / 2), x2 = slice(b, x, n / 2);
	int a, c, s1, d, f, s2, o;

	a = gm_blk_op(b, n / 2, eo, (int[]){x1, END}, NULL);
	c = gm_blk_op(b, n / 2, eo, (int[]){x2, END}, NULL);
	s1 = gm_blk_op(b, n / 2, eo, (int[]){a, c, END}, NULL);
	gm_blk_drop(b, a);
	gm_blk_drop(b, c);
	d = gm_blk_op(b, n / 2, eo, (int[]){x2, END}, NULL);
	f = gm_blk_op(b, n / 2, eo, (int[]){x1, END}, NULL);
	s2 = gm_blk_add(b, d, f);
	gm_blk_drop(b, d);
	gm_blk_drop(b, f);
	o = gm_blk_op(b, n, eo, (int[]){s1, s2, END}, NULL);
	gm_blk_view_grads_last(b);
	gm_blk_drop(b, s1);
	gm_blk_drop(b, s2);
	gm_blk_drop(b, x1);
	gm_blk_drop(b, x2);
	return o;
}

/*
 * DeepseekV3Attention.forward and the residual add, op by op: q from
 * q_b_proj(q_a_layernorm(q_a_proj(x))) (or q_proj), split into the nope
 * and rope parts (views); kv_a_proj_with_mqa split into the latent
 * (through kv_a_layernorm) and the shared rotary key; the interleaved
 * rotary on both rope parts; the cache takes the compressed latent and
 * key (past_key_values.update on them: the cat copies); query_states =
 * cat(q_pass, q_rot); expand_kv: kv_b_proj of the latent split into
 * k_nope and the values (views), the rotary key expanded over the
 * heads (a view), key_states = new_empty + two copy_ into its halves
 * (CopySlices);
 * the attention with q/k head dim nope + rope and v head dim v_head_dim
 * (block.c's gm_blk_attention_dims); o_proj. Returns the residual,
 * *n2 post_attention_layernorm's output.
 */
static int mla_attention(struct gm_blk *b, int *n2)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, h = sh->hidden, H = sh->heads;
	double nope = sh->nope_dim, rope = sh->rope_dim, vd = sh->v_dim;
	double qk = nope + rope, kvl = sh->kv_lora, ql = sh->q_lora;
	int n1, qb, qp, qr, ckv, kvn, kr, kvnn, qre, kre, qs, kvb, kn, vs;
	int kx, ks, at, o, r1;

	n1 = gm_blk_rms_norm(b, GM_BLK_IN);
	if (ql > 0) {
		int qa = gm_blk_linear_named(b, "q_a_proj", n1, h, ql, false);
		int qan = gm_blk_rms_norm_width(b, qa, ql);

		gm_blk_drop(b, qa);
		qb = gm_blk_linear_named(b, "q_b_proj", qan, ql, H * qk,
					 false);
		gm_blk_drop(b, qan);
	} else {
		qb = gm_blk_linear_named(b, "q_proj", n1, h, H * qk, false);
	}
	split2(b, qb, H * nope, H * rope, true, &qp, &qr);
	ckv = gm_blk_linear_named(b, "kv_a_proj_with_mqa", n1, h, kvl + rope,
				  false);
	split2(b, ckv, kvl, rope, false, &kvn, &kr);
	kvnn = gm_blk_rms_norm_width(b, kvn, kvl);
	gm_blk_drop(b, kvn);
	qre = rope_interleave(b, qr, T * H * rope);
	kre = rope_interleave(b, kr, T * rope);
	gm_blk_drop(b, qr);
	gm_blk_drop(b, kr);
	gm_blk_kv_cache(b, &kvnn, &kre);
	qs = gm_blk_op(b, T * H * qk, maxd(gm_blk_eb(b, qp), gm_blk_eb(b, qre)),
		       (int[]){qp, qre, END}, NULL);
	gm_blk_view_grads_last(b);
	gm_blk_drop(b, qp);
	kvb = gm_blk_linear_named(b, "kv_b_proj", kvnn, kvl, H * (nope + vd),
				  false);
	split2(b, kvb, H * nope, H * vd, true, &kn, &vs);
	gm_blk_drop(b, kvb);
	kx = gm_blk_view(b, kre, 0);
	gm_blk_set_grad_bytes(b, kx, T * H * rope * gm_blk_eb(b, kre));
	gm_blk_node(b, (int[]){kre, END}, (int[]){kx, END}, NULL);
	/* key_states[..., :nope].copy_(k_nope), [..., nope:].copy_(k_rot):
	 * two CopySlices; each backward clones its incoming gradient
	 * (key_states' size) and the slice it hands to the source */
	ks = gm_blk_op(b, T * H * qk, gm_blk_eb(b, kn), (int[]){kn, kx, END},
		       NULL);
	gm_blk_set_tmp(b, 2 * T * H * qk * gm_blk_eb(b, kn), false);
	gm_blk_drop(b, kn);
	gm_blk_drop(b, kx);
	at = gm_blk_attention_dims(b, qs, ks, vs, qk, vd);
	gm_blk_drop(b, qs);
	gm_blk_drop(b, ks);
	gm_blk_drop(b, vs);
	o = gm_blk_linear_named(b, "o_proj", at, H * vd, h, false);
	gm_blk_drop(b, at);
	/* the forward's names of q_states, q_rot, compressed_kv, the
	 * latent and the rotary key go when it returns */
	gm_blk_drop(b, qb);
	gm_blk_drop(b, qre);
	gm_blk_drop(b, ckv);
	gm_blk_drop(b, kvnn);
	gm_blk_drop(b, kre);
	gm_blk_drop(b, n1);
	r1 = gm_blk_add(b, GM_BLK_IN, o);
	gm_blk_drop(b, o);
	*n2 = gm_blk_rms_norm(b, r1);
	return r1;
}

/*
 * DeepseekV3TopkRouter.forward on x: F.linear(x.type(float32),
 * weight.type(float32)) (without autocast the 16-bit weight's fp32
 * copy, which the linear saves; under autocast the linear casts both to
 * 16 bits again); sigmoid (saves its output, the scores);
 * scores_for_choice = scores + e_score_correction_bias; the group
 * scores (topk 2 per group, summed), the top topk_group groups, their
 * mask (zeros_like, scatter_, the expanded mask reshaped: a copy of
 * tokens x experts, its bool and its negation), the masked scores,
 * their top-k indices (int64); the weights gathered from the scores
 * (GatherBackward saves the indices), divided in place by their sum
 * (norm_topk_prob; autograd saves a clone) and scaled by
 * routed_scaling_factor. The group tensors (tokens x n_group) are a few
 * bytes per token and left out. Returns the weights, *idx the indices.
 */
static int router_sigmoid(struct gm_blk *b, int x, int *idx)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, E = sh->experts, k = sh->topk, h = sh->hidden;
	int xf = x, wf = -1, lg, sc, sfc, gm, mb, mn, sm, vi, w, den, cl, wd;
	int ws;
	double e;

	if (!sh->autocast && gm_blk_eb(b, x) != 4)
		xf = gm_blk_cast(b, x, 4);
	if (!sh->autocast && sh->r != 4) {
		wf = gm_blk_tensor(b, E * h, 4);
		gm_blk_node(b, NULL, NULL, (int[]){wf, END});
	}
	lg = gm_blk_linear_named(b, "gate", xf, h, E, false);
	if (wf >= 0) /* the fp32 weight's gradient, cast to the weight's */
		gm_blk_set_tmp(b, E * h * 4, false);
	gm_blk_drop(b, wf);
	if (xf != x)
		gm_blk_drop(b, xf);
	e = gm_blk_eb(b, lg);
	sc = gm_blk_ew(b, lg, END, (int[]){GM_BLK_OUTP, END});
	sfc = gm_blk_op(b, T * E, maxd(e, 4), (int[]){sc, END}, NULL);
	gm = gm_blk_tensor(b, T * E, e);        /* the group mask, reshaped */
	mb = gm_blk_tensor(b, T * E, 1);        /* .bool() */
	gm_blk_drop(b, gm);
	mn = gm_blk_tensor(b, T * E, 1);        /* ~ */
	gm_blk_drop(b, mb);
	sm = gm_blk_op(b, T * E, gm_blk_eb(b, sfc), (int[]){sfc, END},
		       (int[]){mn, END});
	gm_blk_drop(b, mn);
	gm_blk_drop(b, sfc);
	vi = gm_blk_tensor(b, T * k, gm_blk_eb(b, sm)); /* topk values */
	*idx = gm_blk_tensor(b, T * k, 8);
	gm_blk_drop(b, vi);
	gm_blk_drop(b, sm);
	w = gm_blk_op(b, T * k, e, (int[]){sc, END}, (int[]){*idx, END});
	den = gm_blk_op(b, T, e, (int[]){w, END}, NULL);
	cl = gm_blk_tensor(b, T * k, e);
	wd = gm_blk_view(b, w, 0);
	gm_blk_set_grad_bytes(b, wd, T * k * e);
	gm_blk_node(b, (int[]){w, den, END}, (int[]){wd, END},
		    (int[]){cl, den, END});
	gm_blk_drop(b, cl);
	gm_blk_drop(b, den);
	gm_blk_drop(b, w);
	ws = gm_blk_op(b, T * k, e, (int[]){wd, END}, NULL);
	gm_blk_drop(b, wd);
	gm_blk_drop(b, sc);
	gm_blk_drop(b, lg);
	return ws;
}

/*
 * DeepseekV3MoE.forward and the residual add: the router, the experts
 * (moe.c's grouped_mm experts on the MLP input viewed as tokens x
 * hidden), the shared experts (a DeepseekV3MLP of shared_experts x
 * moe_intermediate_size on the same input, as LlamaMLP) and their sum;
 * then hidden_states = residual + that.
 */
static void moe_mlp(struct gm_blk *b, int r1, int n2)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double h = sh->hidden, Fs = sh->ffn_shared;
	int idx, w = router_sigmoid(b, n2, &idx), eo, mo, sum;

	eo = gm_moe_block_experts(b, n2, w, idx);
	gm_blk_drop(b, w);
	gm_blk_drop(b, idx);
	mo = eo;
	if (Fs > 0) {
		int g, s, u, m, d;

		g = gm_blk_linear_named(b, "gate_proj", n2, h, Fs, false);
		s = gm_blk_ew(b, g, END, (int[]){g, END});
		u = gm_blk_linear_named(b, "up_proj", n2, h, Fs, false);
		m = gm_blk_ew(b, s, u, (int[]){s, u, END});
		gm_blk_drop(b, g);
		gm_blk_drop(b, s);
		gm_blk_drop(b, u);
		d = gm_blk_linear_named(b, "down_proj", m, Fs, h, false);
		gm_blk_drop(b, m);
		sum = gm_blk_add(b, eo, d);
		gm_blk_drop(b, eo);
		gm_blk_drop(b, d);
		mo = sum;
	}
	gm_blk_drop(b, n2);
	gm_blk_output_next(b);
	gm_blk_add(b, r1, mo);
	gm_blk_drop(b, mo);
	gm_blk_drop(b, r1);
	/* DeepseekV3Model's loop holds the layer's input until the layer
	 * returns */
	gm_blk_drop(b, GM_BLK_IN);
}

/* DeepseekV3DecoderLayer.forward: MLA, then the routed MLP
 * (sh->moe_layer) or the dense DeepseekV3MLP (LlamaMLP's ops). */
static void block(struct gm_blk *b)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	int n2, r1 = mla_attention(b, &n2);

	if (sh->moe_layer)
		moe_mlp(b, r1, n2);
	else
		gm_llama_block_mlp(b, r1, n2, sh->ffn);
}

/*
 * The widths of an inference pass (family.h infer_shapes). transformers
 * 5.17's DeepseekV3Attention.forward calls past_key_values.update(kv_nope,
 * k_rot) while the latent is still compressed: DynamicLayer's "keys" are
 * kv_a_layernorm's output, kv_lora_rank wide, its "values" the rotary key
 * shared by all heads, qk_rope_head_dim wide, both one head (b, 1, s,
 * width): (kv_lora_rank + qk_rope_head_dim) elements per token and layer,
 * whatever the head count (kv_a_proj_with_mqa is replicated, so every
 * tensor-parallel rank holds them whole). The rotary tables are
 * qk_rope_head_dim wide (DeepseekV3Config sets head_dim to it).
 */
static void infer_shapes(const struct gm_spec_model *m, double t,
			 struct gm_step_infer *in)
{
	in->kv = (double)m->kv_lora_rank;
	in->kv_v = (double)m->qk_rope_head_dim;
	in->head_dim = (double)m->qk_rope_head_dim;
	in->mla.heads = (double)m->attention_heads / t;
	in->mla.q_lora = (double)m->q_lora_rank;
	in->mla.kv_lora = (double)m->kv_lora_rank;
	in->mla.rope = (double)m->qk_rope_head_dim;
	in->mla.nope = (double)m->qk_nope_head_dim;
	in->mla.v = (double)m->v_head_dim;
	in->mla.ffn_shared = (double)(m->shared_experts *
				      m->moe_ffn_hidden_size) / t;
	in->mla.dense_layers = m->dense_layers;
}

/* apply_rotary_pos_emb_interleave (rope_interleave, DeepseekV3Config's
 * default true) for one of q, k of the given bytes: x1 * cos, x2 * sin,
 * their difference, x2 * cos, x1 * sin, their sum (each half the bytes),
 * then their cat. Returns the cat. */
static uint32_t rotary_interleave(struct gm_em *e, double bytes)
{
	uint32_t h[2], a, b, out;

	for (int k = 0; k < 2; k++) {
		a = gm_em_alloc(e, bytes / 2, GM_SK_TRANSIENT);
		b = gm_em_alloc(e, bytes / 2, GM_SK_TRANSIENT);
		h[k] = gm_em_alloc(e, bytes / 2, GM_SK_TRANSIENT);
		gm_em_free(e, &a);
		gm_em_free(e, &b);
	}
	out = gm_em_alloc(e, bytes, GM_SK_TRANSIENT);
	gm_em_free(e, &h[1]);
	gm_em_free(e, &h[0]);
	return out;
}

/*
 * DeepseekV3Attention in inference over f->T tokens (b sequences of q
 * positions; N positions in the cache after this forward), from
 * input_layernorm to the residual add, which it returns; *n2 =
 * post_attention_layernorm's output. Per rank H heads, qk = nope + rope:
 * q_a_proj (T x q_lora_rank), q_a_layernorm, q_b_proj (T x H x qk; or
 * q_proj without q_lora_rank); kv_a_proj_with_mqa (T x (kv_lora_rank +
 * rope)), kv_a_layernorm on its first kv_lora_rank columns; the
 * interleaved rotary embedding of q's rope part (H heads) and of the
 * shared rotary key (one head), after which compressed_kv has no name
 * left; the cache update (the latents, gm_em_kv_append), which rebinds
 * kv_nope and k_rot to the cache; query_states (cat: T x H x qk); then
 * expand_kv over the whole cache: kv_b_proj (b x N x H x (nope + v))
 * and key_states (new_empty and two copy_: b x N x H x qk), the values a
 * view of kv_b_proj's output; sdpa's output (T x H x v: the value width,
 * nothing padded) and, for a prefill (q > 1), sdpa_attention_forward's
 * transpose(1, 2).contiguous() copy (the H200 trace: its own block, the
 * kernel's output freed on rebinding; a single position's transpose is
 * contiguous already); o_proj. The forward's names die when it returns.
 */
static uint32_t infer_attention(struct gm_em *e, uint64_t l,
				const struct gm_em_fwd *f, uint32_t *n2)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c, H = in->mla.heads;
	double b = (double)in->batch, q = T / b, N = (double)f->n + q;
	double qk = in->mla.nope + in->mla.rope, X = T * in->hidden * c;
	uint32_t n1, qa, qn, qb, ckv, kvn, qr, kr, qs, kvb, ks, o, oc, p, r;

	n1 = gm_em_rms_norm(e, T);                       /* input_ln */
	if (in->mla.q_lora) {
		qa = gm_em_alloc(e, T * in->mla.q_lora * c, GM_SK_TRANSIENT);
		qn = gm_em_rms_norm_w(e, T, in->mla.q_lora);
		gm_em_free(e, &qa);
		qb = gm_em_alloc(e, T * H * qk * c, GM_SK_TRANSIENT);
		gm_em_free(e, &qn);
	} else {
		qb = gm_em_alloc(e, T * H * qk * c, GM_SK_TRANSIENT);
	}
	ckv = gm_em_alloc(e, T * (in->mla.kv_lora + in->mla.rope) * c,
			  GM_SK_TRANSIENT);             /* kv_a_proj */
	kvn = gm_em_rms_norm_w(e, T, in->mla.kv_lora);  /* kv_a_ln */
	qr = rotary_interleave(e, T * H * in->mla.rope * c);
	kr = rotary_interleave(e, T * in->mla.rope * c);
	gm_em_free(e, &ckv);
	gm_em_kv_append(e, l, f);
	gm_em_free(e, &kvn);
	gm_em_free(e, &kr);
	qs = gm_em_alloc(e, T * H * qk * c, GM_SK_TRANSIENT); /* cat */
	kvb = gm_em_alloc(e, b * N * H * (in->mla.nope + in->mla.v) * c,
			  GM_SK_TRANSIENT);             /* kv_b_proj */
	ks = gm_em_alloc(e, b * N * H * qk * c, GM_SK_TRANSIENT);
	o = gm_em_alloc(e, T * H * in->mla.v * c, GM_SK_TRANSIENT); /* sdpa */
	if (q > 1) {
		oc = gm_em_alloc(e, T * H * in->mla.v * c, GM_SK_TRANSIENT);
		gm_em_free(e, &o);
		o = oc;
	}
	p = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* o_proj */
	gm_em_free(e, &qb);
	gm_em_free(e, &qr);
	gm_em_free(e, &qs);
	gm_em_free(e, &ks);
	gm_em_free(e, &kvb);
	gm_em_free(e, &o);
	gm_em_free(e, &n1);
	r = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* residual + */
	gm_em_free(e, &p);
	*n2 = gm_em_rms_norm(e, T);
	return r;
}

/* DeepseekV3MLP over T tokens of a held input, width w per rank:
 * gate_proj, SiLU, up_proj, the product, down_proj. Returns down's
 * output. */
static uint32_t swiglu(struct gm_em *e, double T, double w)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, I = T * w * c;
	uint32_t gt, s, up, m, d;

	gt = gm_em_alloc(e, I, GM_SK_TRANSIENT);
	s = gm_em_alloc(e, I, GM_SK_TRANSIENT);
	gm_em_free(e, &gt);
	up = gm_em_alloc(e, I, GM_SK_TRANSIENT);
	m = gm_em_alloc(e, I, GM_SK_TRANSIENT);
	gm_em_free(e, &s);
	gm_em_free(e, &up);
	d = gm_em_alloc(e, T * in->hidden * c, GM_SK_TRANSIENT);
	gm_em_free(e, &m);
	return d;
}

/*
 * DeepseekV3MoE in inference over the f->T tokens of forward f, of a
 * held input (5.17):
 * DeepseekV3TopkRouter.forward (the input and the router weight cast to
 * fp32 where they are not, the logits, their sigmoid, the scores plus
 * e_score_correction_bias, the group mask expanded to the experts (a
 * copy of the fp32 zeros_like), its bool and its negation, masked_fill,
 * the top-k indices, the gathered weights, their sum and its epsilon
 * (norm_topk_prob), the weights times routed_scaling_factor; the group
 * scores are n_group per token, a few bytes, and left out), the routed
 * experts (moe.c, fp32 weights), the shared experts' MLP on the same
 * input and the sum of the two. The router logits (`_`), the weights and
 * the indices live until the block returns. Returns its output.
 */
static uint32_t infer_moe(struct gm_em *e, const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T;
	double c = in->c, E = in->experts, k = in->topk, H = in->hidden;
	double TE = T * E * 4;
	uint32_t hf = GM_EM_NONE, wf = GM_EM_NONE, lg, sc, sf, sm, bm, nm;
	uint32_t sf2, ti, tv, tw, su, de, tw2, ro, sh, out;

	if (c != 4) {
		hf = gm_em_alloc(e, T * H * 4, GM_SK_TRANSIENT);
		wf = gm_em_alloc(e, E * H * 4, GM_SK_TRANSIENT);
	}
	lg = gm_em_alloc(e, TE, GM_SK_TRANSIENT);             /* linear */
	gm_em_free(e, &hf);
	gm_em_free(e, &wf);
	sc = gm_em_alloc(e, TE, GM_SK_TRANSIENT);             /* sigmoid */
	sf = gm_em_alloc(e, TE, GM_SK_TRANSIENT);             /* + bias */
	sm = gm_em_alloc(e, TE, GM_SK_TRANSIENT);             /* mask */
	bm = gm_em_alloc(e, T * E, GM_SK_TRANSIENT);          /* .bool() */
	nm = gm_em_alloc(e, T * E, GM_SK_TRANSIENT);          /* ~ */
	gm_em_free(e, &bm);
	sf2 = gm_em_alloc(e, TE, GM_SK_TRANSIENT);            /* masked */
	gm_em_free(e, &nm);
	gm_em_free(e, &sf);
	tv = gm_em_alloc(e, T * k * 4, GM_SK_TRANSIENT);      /* topk */
	ti = gm_em_alloc(e, T * k * 8, GM_SK_TRANSIENT);
	gm_em_free(e, &tv);
	tw = gm_em_alloc(e, T * k * 4, GM_SK_TRANSIENT);      /* gather */
	su = gm_em_alloc(e, T * 4, GM_SK_TRANSIENT);          /* sum */
	de = gm_em_alloc(e, T * 4, GM_SK_TRANSIENT);          /* + eps */
	gm_em_free(e, &su);
	gm_em_free(e, &de);
	tw2 = gm_em_alloc(e, T * k * 4, GM_SK_TRANSIENT);     /* * scale */
	gm_em_free(e, &tw);
	gm_em_free(e, &sc);
	gm_em_free(e, &sf2);
	gm_em_free(e, &sm);
	ro = gm_moe_infer_experts(e, f, 4);
	sh = swiglu(e, T, in->mla.ffn_shared);
	out = gm_em_alloc(e, T * H * c, GM_SK_TRANSIENT);     /* + */
	gm_em_free(e, &ro);
	gm_em_free(e, &sh);
	gm_em_free(e, &lg);
	gm_em_free(e, &tw2);
	gm_em_free(e, &ti);
	return out;
}

/* One DeepseekV3DecoderLayer in inference: the attention half, then
 * DeepseekV3MLP (intermediate_size: llama.c's MLP half) in the first
 * dense_layers blocks of the model, DeepseekV3MoE in the others, and the
 * residual add. Returns its output; the caller frees the input. */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T;
	uint32_t n2, r = infer_attention(e, l, f, &n2), mo, out;

	if (in->layer0 + l < in->mla.dense_layers || !in->experts)
		return gm_llama_infer_mlp(e, f, &n2, &r);
	mo = infer_moe(e, f);
	gm_em_free(e, &n2);
	out = gm_em_alloc(e, T * in->hidden * in->c, GM_SK_TRANSIENT);
	gm_em_free(e, &mo);
	gm_em_free(e, &r);
	return out;
}

/* DeepseekV3Model's embedding, rotary tables (qk_rope_head_dim wide),
 * final norm and return are LlamaModel's sequence: llama.c's. */
const struct gm_family gm_family_deepseek_v3 = {
	.name = "deepseek-v3",
	.shaped = true,
	/* DeepseekV3Config: vocab_size 129280, n_routed_experts 256,
	 * num_experts_per_tok 8, n_shared_experts 1,
	 * first_k_dense_replace 3, q_lora_rank 1536, kv_lora_rank 512,
	 * qk_rope_head_dim 64, qk_nope_head_dim 128, v_head_dim 128,
	 * tie_word_embeddings false */
	.defaults = {.ffn = ffn, .vocab = 129280, .head = GM_HEAD_CAUSAL_LM,
		     .experts = 256, .experts_per_token = 8,
		     .shared_experts = 1, .dense_layers = 3,
		     .mla = {.q_lora_rank = 1536, .kv_lora_rank = 512,
			     .qk_rope_head_dim = 64, .qk_nope_head_dim = 128,
			     .v_head_dim = 128},
		     /* PEFT has no deepseek_v3 entry: its attention's
		      * projections */
		     .lora_targets = {"q_b_proj", "kv_b_proj"}},
	.keys = GM_FK_MOE | GM_FK_SHARED_EXPERTS | GM_FK_MLA |
		GM_FK_DENSE_LAYERS,
	/* the routed experts are fused parameters, not Linear */
	.linears = {"q_a_proj", "q_b_proj", "kv_a_proj_with_mqa", "kv_b_proj",
		    "o_proj", "gate_proj", "up_proj", "down_proj"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 3,
	.moe = true,
	/* attention_dropout 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs = GM_PROBS_TO_QUERY},
	.block = block,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_shapes = infer_shapes,
	.infer_layer = infer_layer,
	.infer_head = gm_llama_infer_head,
};
