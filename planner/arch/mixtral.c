/*
 * mixtral.c - the Mixtral family (family.h): MixtralForCausalLM of
 * transformers 5.x (src/transformers/models/mixtral/modeling_mixtral.py:
 * MixtralDecoderLayer, MixtralAttention (as Llama's), MixtralSparseMoeBlock
 * with MixtralTopKRouter and MixtralExperts, whose gate_up_proj and
 * down_proj are 3-D parameters of all experts).
 *
 * Training runs the experts as transformers' grouped_mm experts forward
 * (moe.c): every token is in experts_per_token rows of one grouped
 * matmul, so the saved tensors and the backward's transient do not
 * depend on how the router splits the tokens. Inference runs the same
 * grouped_mm forward (transformers 5.17's default experts
 * implementation) over a prompt, and generate()'s decode forwards run
 * batched_mm, which copies each (token, expert) row's expert weights
 * (moe.c gm_moe_infer_experts); neither depends on the split.
 * Training runs MixtralDecoderLayer op by op (block): Llama's attention
 * half (llama.c), then the router and the grouped_mm experts of moe.c
 * as transformers 5.17.0 runs them; the analytic saved-tensor list below
 * is the closed form of the same tensors.
 */
#include "arch/family.h"
#include "arch/llama.h"
#include "arch/moe.h"

#include "activations.h"
#include "block.h"
#include "loss.h"
#include "params.h"
#include "step_emit.h"

/* MixtralConfig's defaults: intermediate_size 14336, vocab_size 32000,
 * num_local_experts 8, num_experts_per_tok 2. */
static uint64_t ffn(uint64_t hidden)
{
	(void)hidden;
	return 14336;
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t q = d * m->attention_heads, kv = d * m->kv_heads;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	(void)diag;
	gm_params_add(l, "embed_tokens", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "layers.*.self_attn.q_proj", q, h, lin);
	gm_params_add(l, "layers.*.self_attn.k_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.v_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.o_proj", h, q, lin);
	/* MixtralTopKRouter and MixtralExperts */
	gm_moe_params(m, l, 0, 0);
	gm_llama_norm_params(m, l);
	return 0;
}

/*
 * What a MixtralDecoderLayer keeps for backward: the attention as
 * Llama's, post_attention_layernorm in front of the router, then the
 * router and experts of moe.c (MixtralSparseMoeBlock: MixtralTopKRouter,
 * MixtralExperts under grouped_mm).
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	gm_act_norm(l, st, true, 3, "q/k/v input");
	gm_act_attention(l, st, false);
	gm_act_norm(l, st, true, 1, "router input");
	gm_moe_saved(l, st);
}

/* MixtralDecoderLayer.forward, op by op: Llama's attention half, then
 * MixtralSparseMoeBlock (router_jitter_noise 0: no jitter) and the
 * residual add. */
static void block(struct gm_blk *b)
{
	int n2, r1 = gm_llama_block_attention(b, &n2);

	gm_moe_block_mlp(b, r1, n2, false);
}

/* One MixtralDecoderLayer in inference: the attention as Llama's, then
 * the sparse MoE block (moe.c; MixtralTopKRouter keeps its top-k
 * weights in fp32). */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	uint32_t n2, r = gm_llama_infer_attention(e, l, f, &n2);

	return gm_moe_infer_mlp(e, f, &n2, &r, false);
}

const struct gm_family gm_family_mixtral = {
	.name = "mixtral",
	.shaped = true,
	.defaults = {.ffn = ffn, .vocab = 32000, .head = GM_HEAD_CAUSAL_LM,
		     .experts = 8, .experts_per_token = 2,
		     .lora_targets = {"q_proj", "v_proj"}},
	.keys = GM_FK_MOE,
	/* the experts are fused parameters (MixtralExperts), not Linear */
	.linears = {"q_proj", "k_proj", "v_proj", "o_proj", "gate"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 3,
	.moe = true,
	/* attention_dropout 0; router_jitter_noise 0 */
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
