/*
 * qwen3_moe.c - the Qwen3-MoE family (family.h): Qwen3MoeForCausalLM of
 * transformers 5.x (src/transformers/models/qwen3_moe/
 * modeling_qwen3_moe.py: Qwen3MoeDecoderLayer, Qwen3MoeAttention (as
 * Qwen3Attention: q_norm, k_norm, head_dim), Qwen3MoeSparseMoeBlock with
 * Qwen3MoeTopKRouter and Qwen3MoeExperts, whose gate_up_proj (experts,
 * 2 x moe_intermediate_size, hidden) and down_proj (experts, hidden,
 * moe_intermediate_size) are 3-D parameters).
 *
 * Every layer is sparse: decoder_sparse_step 1 and no mlp_only_layers
 * (Qwen3-30B-A3B, Qwen3-235B-A22B; hf_config.c refuses the others).
 * The router is Mixtral's (softmax over the experts in fp32, top-k,
 * renormalised where norm_topk_prob, which changes no tensor's size);
 * the experts run as moe.c says (grouped_mm in training). No shared
 * expert, no biases. Training runs Qwen3MoeDecoderLayer op by op
 * (block): Qwen3's attention half (qwen3.c), then the router (whose
 * weights are cast back to the logits' dtype) and the grouped_mm experts
 * of moe.c, as transformers 5.17.0 runs them.
 */
#include "arch/family.h"
#include "arch/llama.h"
#include "arch/moe.h"
#include "arch/qwen3.h"

#include "activations.h"
#include "block.h"
#include "loss.h"
#include "params.h"
#include "step_emit.h"

/* Qwen3MoeConfig's intermediate_size default (6144): the width of a
 * dense Qwen3MoeMLP, which no layer has here. */
static uint64_t ffn(uint64_t hidden)
{
	(void)hidden;
	return 6144;
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	(void)diag;
	gm_qwen3_attention_params(m, l);
	/* Qwen3MoeTopKRouter and Qwen3MoeExperts */
	gm_moe_params(m, l, 0, 0);
	gm_llama_norm_params(m, l);
	return 0;
}

/* What a Qwen3MoeDecoderLayer keeps for backward: Qwen3's attention half
 * (qwen3.c), post_attention_layernorm in front of the router, the router
 * and the experts (moe.c). */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	gm_qwen3_saved_attention(l, st);
	gm_act_norm(l, st, true, 1, "router input");
	gm_moe_saved(l, st);
}

/* Qwen3MoeDecoderLayer.forward, op by op: Qwen3's attention half, then
 * Qwen3MoeSparseMoeBlock and the residual add. */
static void block(struct gm_blk *b)
{
	int n2, r1 = gm_qwen3_block_attention(b, &n2);

	gm_moe_block_mlp(b, r1, n2, true);
}

/* One Qwen3MoeDecoderLayer in inference: Qwen3's attention half, the
 * sparse MoE block (moe.c; Qwen3MoeTopKRouter casts its top-k weights
 * to the logits' dtype), the residual add. */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	uint32_t n2, r = gm_qwen3_infer_attention(e, l, f, &n2);

	return gm_moe_infer_mlp(e, f, &n2, &r, true);
}

/* Qwen3MoeModel's embedding, rotary tables, final norm and return are
 * LlamaModel's: llama.c's. */
const struct gm_family gm_family_qwen3_moe = {
	.name = "qwen3-moe",
	.shaped = true,
	/* Qwen3MoeConfig: vocab_size 151936, num_experts 128,
	 * num_experts_per_tok 8, head_dim hidden_size / heads when not
	 * given, tie_word_embeddings false */
	.defaults = {.ffn = ffn, .vocab = 151936, .head = GM_HEAD_CAUSAL_LM,
		     .experts = 128, .experts_per_token = 8,
		     /* PEFT's q_proj, v_proj (qwen3_moe) */
		     .lora_targets = {"q_proj", "v_proj"}},
	.keys = GM_FK_MOE | GM_FK_HEAD_DIM,
	/* the experts are fused parameters (Qwen3MoeExperts), not Linear */
	.linears = {"q_proj", "k_proj", "v_proj", "o_proj", "gate"},
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
	.infer_layer = infer_layer,
	.infer_head = gm_llama_infer_head,
};
