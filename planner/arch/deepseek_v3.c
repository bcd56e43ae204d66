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
 * Training replays the analytic saved-tensor list (no op-by-op block).
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
	.attn = {.mask = true, .softmax_fp32 = true, .probs_as_query = true},
	.block = NULL,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_shapes = infer_shapes,
	.infer_layer = infer_layer,
	.infer_head = gm_llama_infer_head,
};
