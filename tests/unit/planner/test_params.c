/* Unit tests for planner/params.c: exact Hugging Face parameter counts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "error.h"
#include "params.h"
#include "specs.h"

static uint64_t count(struct gm_spec s)
{
	struct gm_param_layout l;
	struct gm_diag d;

	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	return l.total;
}

static void llama_family(void **state)
{
	(void)state;
	/* Llama-2-7B, Llama-2-13B, Llama-3-8B (GQA 8 KV heads). */
	assert_true(count(spec_llama(32, 4096, 11008, 32, 32, 32000)) ==
		    6738415616ULL);
	assert_true(count(spec_llama(40, 5120, 13824, 40, 40, 32000)) ==
		    13015864320ULL);
	assert_true(count(spec_llama(32, 4096, 14336, 32, 8, 128256)) ==
		    8030261248ULL);
}

static void qwen2_qkv_bias(void **state)
{
	struct gm_spec s = spec_llama(28, 3584, 18944, 28, 4, 152064);

	(void)state;
	/* Qwen2.5-7B (config.json: 28 layers, 3584 hidden, 18944 ffn, 28
	 * heads, 4 KV heads, 152064 vocab, untied): 7,615,616,512. */
	s.model.qkv_bias = true;
	assert_true(count(s) == 7615616512ULL);
	s.model.qkv_bias = false;
	assert_true(count(s) == 7615616512ULL - 28ULL * (3584 + 2 * 4 * 128));
}

/* Qwen3MoeForCausalLM (transformers 5.x modeling_qwen3_moe.py:
 * Qwen3MoeAttention as Qwen3's, the router (experts, hidden),
 * Qwen3MoeExperts' gate_up_proj (experts, 2 x moe_intermediate_size,
 * hidden) and down_proj (experts, hidden, moe_intermediate_size), no
 * dense MLP). Qwen3-30B-A3B's config.json: 48 layers, 2048 hidden, 32
 * heads, 4 KV heads, head_dim 128, 128 experts of 768, top-8, 151936
 * vocab, untied: 30,532,122,624 on the meta device (transformers 5.24.0,
 * tests/data/hf-tensors.json). */
static void qwen3_moe_30b_a3b(void **state)
{
	struct gm_spec s = spec_llama(48, 2048, 6144, 32, 4, 151936);
	struct gm_param_layout l;
	struct gm_diag d;

	(void)state;
	s.model.architecture = GM_ARCH_QWEN3_MOE;
	s.model.head_dim = 128;
	s.model.experts = 128;
	s.model.experts_per_token = 8;
	s.model.moe_ffn_hidden_size = 768;
	assert_true(count(s) == 30532122624ULL);
	/* per layer: q 4096 x 2048, k and v 512 x 2048, o 2048 x 4096,
	 * q/k norms 2 x 128, router 128 x 2048, experts 128 x 3 x 768 x
	 * 2048, two norms 2 x 2048; ffn_hidden_size sizes nothing */
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == 2ULL * 4096 * 2048 + 2ULL * 512 * 2048 +
		    256ULL + 128ULL * 2048 + 128ULL * 3 * 768 * 2048 + 4096ULL);
	s.model.ffn_hidden_size = 1;
	assert_true(count(s) == 30532122624ULL);
	/* the 2-layer model of tests/data/calibration/pending/loops:
	 * 1,868,573,184 (measured-h200.json "parameters") */
	s.model.layers = 2;
	assert_true(count(s) == 1868573184ULL);
}

/* DeepseekV3ForCausalLM (transformers 5.x modeling_deepseek_v3.py:
 * DeepseekV3Attention's q_a_proj, q_a_layernorm, q_b_proj,
 * kv_a_proj_with_mqa, kv_a_layernorm, kv_b_proj, o_proj; DeepseekV3MLP
 * in the first first_k_dense_replace layers, DeepseekV3MoE (router,
 * 3-D experts, shared experts' MLP) in the rest). DeepSeek-V3's
 * config.json: 61 layers (3 dense), 7168 hidden, 18432 ffn, 128 heads,
 * q_lora_rank 1536, kv_lora_rank 512, rope 64, nope 128, v 128, 256
 * experts of 2048, 1 shared, 129280 vocab, untied: 671,026,404,352 on
 * the meta device (transformers 5.24.0, tests/data/hf-tensors.json). */
static void deepseek_v3_671b(void **state)
{
	struct gm_spec s = spec_llama(61, 7168, 18432, 128, 128, 129280);
	struct gm_param_layout l;
	struct gm_diag d;
	uint64_t h = 7168, attn, dense, moe;

	(void)state;
	s.model.architecture = GM_ARCH_DEEPSEEK_V3;
	s.model.experts = 256;
	s.model.experts_per_token = 8;
	s.model.shared_experts = 1;
	s.model.moe_ffn_hidden_size = 2048;
	s.model.dense_layers = 3;
	s.model.q_lora_rank = 1536;
	s.model.kv_lora_rank = 512;
	s.model.qk_rope_head_dim = 64;
	s.model.qk_nope_head_dim = 128;
	s.model.v_head_dim = 128;
	assert_true(count(s) == 671026404352ULL);
	/* one block: attention, two norms, then a dense MLP or the
	 * router, the experts and the shared expert; the largest block is
	 * a routed one */
	attn = 1536 * h + 1536 + 128ULL * 192 * 1536 + 576 * h + 512 +
	       128ULL * 256 * 512 + h * 128 * 128 + 2 * h;
	dense = 3 * 18432 * h;
	moe = 256 * h + 256ULL * 3 * 2048 * h + 3 * 2048 * h;
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == attn + moe);
	assert_true(l.total == 61 * attn + 3 * dense + 58 * moe +
		    2ULL * 129280 * h + h);
	/* the 2-layer model of tests/data/calibration/pending/loops: both
	 * blocks dense (first_k_dense_replace 3): 3,020,332,032
	 * (measured-h200.json "parameters") */
	s.model.layers = 2;
	assert_true(count(s) == 3020332032ULL);
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == attn + dense);
	/* no dense block; a full q_proj without q_lora_rank */
	s.model.layers = 61;
	s.model.dense_layers = 0;
	assert_true(count(s) == 671026404352ULL + 3 * (moe - dense));
	s.model.q_lora_rank = 0;
	assert_true(count(s) == 671026404352ULL + 3 * (moe - dense) -
		    61 * (1536 * h + 1536 + 128ULL * 192 * 1536) +
		    61 * 128ULL * 192 * h);
}

static void llama_tied_drops_lm_head(void **state)
{
	struct gm_spec s = spec_llama(32, 4096, 11008, 32, 32, 32000);

	(void)state;
	s.model.tied_embeddings = true;
	assert_true(count(s) == 6738415616ULL - 32000ULL * 4096);
}

/* MixtralForCausalLM (transformers 5.x modeling_mixtral.py: the router
 * (experts, hidden), MixtralExperts' gate_up_proj (experts, 2 ffn,
 * hidden) and down_proj (experts, hidden, ffn)). Mixtral-8x7B's
 * config.json: 32 layers, 4096 hidden, 14336 ffn, 32 heads, 8 KV heads,
 * 32000 vocab, 8 experts, untied: 46,702,792,704 as published. */
static void mixtral_8x7b(void **state)
{
	struct gm_spec s = spec_llama(32, 4096, 14336, 32, 8, 32000);
	struct gm_param_layout l;
	struct gm_diag d;

	(void)state;
	s.model.architecture = GM_ARCH_MIXTRAL;
	s.model.experts = 8;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 14336;
	assert_true(count(s) == 46702792704ULL);
	/* per layer: attention 2 x 4096^2 + 2 x 1024 x 4096, router
	 * 8 x 4096, experts 8 x 3 x 14336 x 4096, two norms */
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == 41943040ULL + 32768ULL + 1409286144ULL +
		    8192ULL);
	/* the experts' width is moe_ffn_hidden_size */
	s.model.moe_ffn_hidden_size = 7168;
	assert_true(count(s) == 46702792704ULL -
		    32ULL * 8 * 3 * 7168 * 4096);
}

/* GPTNeoXForCausalLM (transformers 5.x modeling_gpt_neox.py: fused
 * query_key_value (3 hidden, hidden) with a bias, dense, dense_h_to_4h,
 * dense_4h_to_h with biases, two LayerNorms with biases, embed_in and an
 * untied lm_head). GPT-NeoX-20B's config.json: 44 layers, 6144 hidden,
 * 24576 ffn, 64 heads, 50432 vocab: 20,554,567,680 on the meta device
 * (transformers 5.24.0, tests/data/hf-tensors.json). */
static void gpt_neox_20b(void **state)
{
	struct gm_spec s = spec_llama(44, 6144, 24576, 64, 64, 50432);
	struct gm_param_layout l;
	struct gm_diag d;
	uint64_t h = 6144, f = 24576;

	(void)state;
	s.model.architecture = GM_ARCH_GPT_NEOX;
	assert_true(count(s) == 20554567680ULL);
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == 4 * h + 3 * h * h + 3 * h + h * h + h +
		    2 * h * f + f + h);
	/* tied: the head's copy of embed_in goes */
	s.model.tied_embeddings = true;
	assert_true(count(s) == 20554567680ULL - 50432ULL * 6144);
	/* Pythia-160M (EleutherAI/pythia-160m config.json: 12 layers, 768
	 * hidden, 3072 ffn, 12 heads, 50304 vocab, untied): 162,322,944 as
	 * the Pythia suite's model table gives it */
	s = spec_llama(12, 768, 3072, 12, 12, 50304);
	s.model.architecture = GM_ARCH_GPT_NEOX;
	assert_true(count(s) == 162322944ULL);
}

/* Qwen3ForCausalLM (transformers 5.x modeling_qwen3.py, Qwen3Attention:
 * q_proj hidden -> heads x head_dim, o_proj back, q_norm and k_norm of
 * (head_dim,)); transformers' meta-device counts of
 * sum(p.numel() for p in model.parameters()). */
static void qwen3_head_dim(void **state)
{
	struct gm_spec s = spec_llama(36, 4096, 12288, 32, 8, 151936);
	struct gm_param_layout l;
	struct gm_diag d;

	(void)state;
	s.model.architecture = GM_ARCH_QWEN3;
	s.model.head_dim = 128;
	/* Qwen3-8B: 36 layers, 4096 hidden, 12288 ffn, 32 heads, 8 KV
	 * heads, head_dim 128, 151936 vocab, untied */
	assert_true(count(s) == 8190735360ULL);
	/* Qwen3-0.6B: 28 layers, 1024 hidden, 3072 ffn, 16 heads, 8 KV
	 * heads, head_dim 128 (16 x 128 = 2048, not 1024), tied */
	s = spec_llama(28, 1024, 3072, 16, 8, 151936);
	s.model.architecture = GM_ARCH_QWEN3;
	s.model.head_dim = 128;
	s.model.tied_embeddings = true;
	assert_true(count(s) == 596049920ULL);
	/* per layer: q 2048 x 1024, k and v 1024 x 1024, o 1024 x 2048,
	 * q/k norms 2 x 128, MLP 3 x 3072 x 1024, two norms 2 x 1024 */
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(l.per_layer == 2ULL * 2048 * 1024 + 2ULL * 1024 * 1024 +
		    256ULL + 3ULL * 3072 * 1024 + 2048ULL);
	/* without head_dim: hidden_size / attention_heads (64) */
	s.model.head_dim = 0;
	assert_true(count(s) == 596049920ULL -
		    28ULL * (2 * 1024 * 1024 + 2 * 512 * 1024 + 128));
}

static void gpt2_small(void **state)
{
	(void)state;
	assert_true(count(spec_gpt2()) == 124439808ULL);
}

static void bert_heads(void **state)
{
	(void)state;
	/* BertForMaskedLM bert-base-uncased: 109,514,298. */
	assert_true(count(spec_bert(GM_HEAD_MASKED_LM)) == 109514298ULL);
	/* BertForSequenceClassification, 2 labels: BertModel with pooler
	 * 109,482,240 + classifier 768*2+2. */
	assert_true(count(spec_bert(GM_HEAD_CLASSIFICATION)) ==
		    109482240ULL + 1538);
}

static void mismatch_and_custom(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_param_layout l;
	struct gm_diag d;

	(void)state;
	s.model.parameters = 124e6;
	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	assert_true(gm_params_mismatch(&s.model, &l) < GM_PARAMS_TOLERANCE);
	s.model.parameters = 350e6;
	assert_true(gm_params_mismatch(&s.model, &l) > GM_PARAMS_TOLERANCE);
	s.model.architecture = GM_ARCH_CUSTOM;
	s.model.parameters = 0;
	assert_int_equal(gm_params_layout(&s.model, &l, &d), GM_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(llama_family),
		cmocka_unit_test(qwen2_qkv_bias),
		cmocka_unit_test(llama_tied_drops_lm_head),
		cmocka_unit_test(mixtral_8x7b),
		cmocka_unit_test(gpt_neox_20b),
		cmocka_unit_test(qwen3_head_dim),
		cmocka_unit_test(qwen3_moe_30b_a3b),
		cmocka_unit_test(deepseek_v3_671b),
		cmocka_unit_test(gpt2_small),
		cmocka_unit_test(bert_heads),
		cmocka_unit_test(mismatch_and_custom),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
