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
 * Training replays the analytic saved-tensor list (no op-by-op block);
 * inference is not modelled yet (train_only).
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
	uint64_t E = m->experts, F = m->moe_ffn_hidden_size;
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
	gm_params_add(l, "layers.*.mlp.gate.weight", E, h, rep);
	gm_params_blocks(l, k, L);
	/* not autocast-cast (grouped_mm, as mixtral.c says) */
	gm_params_add3(l, "layers.*.mlp.experts.gate_up_proj", E, 2 * F, h,
		       GM_PT_LAYER | GM_PT_TP);
	gm_params_blocks(l, k, L);
	gm_params_add3(l, "layers.*.mlp.experts.down_proj", E, h, F,
		       GM_PT_LAYER | GM_PT_TP);
	gm_params_blocks(l, k, L);
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
	gm_params_add(l, "layers.*.input_layernorm", h, 1, GM_PT_LAYER);
	gm_params_add(l, "layers.*.post_attention_layernorm", h, 1,
		      GM_PT_LAYER);
	gm_params_add(l, "norm", h, 1, GM_PT_HEAD);
	gm_params_lm_head(m, l);
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

/* Inference is refused for this family (train_only, spec_rules.c): the
 * infer ops are llama's and never reached. */
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
	.train_only = true,
	/* attention_dropout 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs_as_query = true},
	.block = NULL,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_layer = gm_llama_infer_layer,
	.infer_head = gm_llama_infer_head,
};
