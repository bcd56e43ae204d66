/* Unit tests for planner/model.c and fit.c: the phases and how each
 * setting moves the figures. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "fit.h"
#include "model.h"
#include "report.h"
#include "specs.h"
#include "units.h"

static const struct gm_plan_gpu h200 = {
	.name = "NVIDIA H200", .capacity_bytes = 143771ULL * 1024 * 1024,
	.context_bytes = 760ULL * 1024 * 1024, .sm_major = 9};
static const struct gm_plan_gpu a100 = {
	.name = "NVIDIA A100-SXM4-40GB", .capacity_bytes = 40960ULL << 20,
	.context_bytes = 500ULL << 20, .sm_major = 8};

static struct gm_plan plan(struct gm_spec s, const struct gm_plan_gpu *g)
{
	struct gm_plan p;
	struct gm_diag d;

	assert_int_equal(gm_plan(&s, g, NULL, &p, &d), 0);
	return p;
}

static struct gm_spec l7b(void)
{
	return spec_llama(32, 4096, 11008, 32, 32, 32000);
}

static void at_peak_sums_to_peak(void **state)
{
	struct gm_plan p = plan(l7b(), &h200);
	const struct gm_parts *a = &p.per_gpu.at_peak;
	double sum = a->weights + a->gradients + a->optimizer_states +
		     a->activations + a->logits + a->temporary + a->kv_cache +
		     a->communication + a->workspace;

	(void)state;
	assert_true(fabs(sum - p.per_gpu.peak_allocated) < 1);
	assert_true(p.per_gpu.peak_reserved >= p.per_gpu.peak_allocated);
	assert_true(p.per_gpu.device_used == p.per_gpu.peak_reserved +
		    p.per_gpu.cuda_context);
	/* 7B bf16-mixed AdamW: 4 + 4 + 8 bytes per parameter */
	assert_true(p.per_gpu.weights == 4.0 * 6738415616ULL);
	assert_true(p.per_gpu.optimizer_states == 8.0 * 6738415616ULL);
	/* training: the forward's and the autograd thread's workspace */
	assert_true(p.per_gpu.workspace == 2 * 32.0 * GM_MiB);
	assert_true(plan(l7b(), &a100).per_gpu.workspace ==
		    2 * (8.0 * GM_MiB + 128 * GM_KiB));
}

static void phases(void **state)
{
	struct gm_spec s = l7b();
	struct gm_plan p;

	(void)state;
	/* tiny batch: the optimizer step (grads + foreach temp) peaks */
	s.training.sequence_length = 128;
	p = plan(s, &h200);
	assert_int_equal(p.per_gpu.peak_phase, GM_PHASE_OPTIMIZER);
	/* long sequence: forward-backward peaks */
	s.training.sequence_length = 8192;
	p = plan(s, &h200);
	assert_int_equal(p.per_gpu.peak_phase, GM_PHASE_FWD_BWD);
	/* gradient accumulation keeps gradients alive during forward */
	s.training.global_batch_size = 4;
	assert_true(plan(s, &h200).per_gpu.phase_allocated[0] >
		    p.per_gpu.phase_allocated[0] + 0.9 * p.per_gpu.gradients);
	assert_int_equal(plan(s, &h200).gradient_accumulation_steps, 4);
}

static void settings_move_the_right_way(void **state)
{
	struct gm_spec s = l7b(), t;
	double base = plan(s, &h200).per_gpu.activations;

	(void)state;
	t = s;
	t.training.attention = GM_ATTN_EAGER;
	assert_true(plan(t, &h200).per_gpu.activations > base);
	t = s;
	t.training.activation_checkpointing = GM_CKPT_FULL;
	/* full: the fp32 block input per layer (4 B x s x h), plus the
	 * final norm/lm_head inputs (4 + 2 B) and token ids/labels */
	assert_true(fabs(plan(t, &h200).per_gpu.activations -
			 (32 * 4.0 * 4096 * 4096 + 4096 * 4096 * 6.0 +
			  16 * 4096.0)) < 1);
	t = s;
	t.training.micro_batch_size = 2;
	assert_true(fabs(plan(t, &h200).per_gpu.activations - 2 * base) <
		    1);
	t = s;
	t.parallelism.tensor_parallel = 4;
	assert_true(plan(t, &h200).per_gpu.activations < base);
	assert_true(plan(t, &h200).per_gpu.weights <
		    plan(s, &h200).per_gpu.weights / 3.9);
	t.parallelism.sequence_parallel = true;
	assert_true(fabs(plan(t, &h200).per_gpu.activations -
			 base / 4) < base * 0.01);
	t = s;
	t.parallelism.data_parallel = 8;
	t.parallelism.zero_stage = 3;
	assert_true(plan(t, &h200).per_gpu.weights ==
		    plan(s, &h200).per_gpu.weights / 8);
}

static void pipeline_stages(void **state)
{
	struct gm_spec s = l7b();
	struct gm_plan p;

	(void)state;
	s.parallelism.pipeline_parallel = 4;
	s.training.global_batch_size = 16;
	p = plan(s, &h200);
	assert_int_equal(p.n_stages, 4);
	assert_int_equal(p.stages[0].in_flight, 4);
	assert_int_equal(p.stages[3].in_flight, 1);
	assert_int_equal(p.stages[1].layers, 8);
	assert_true(p.stages[0].logits == 0 && p.stages[3].logits > 0);
	/* 8 layers x 4 micro-batches on stage 0 = a whole model's worth */
	assert_true(p.stages[0].activations >
		    0.95 * plan(l7b(), &h200).per_gpu.activations -
		    plan(l7b(), &h200).per_gpu.logits);
	s.parallelism.pipeline_parallel = 33;
	{
		struct gm_plan q;
		struct gm_diag d;
		assert_int_equal(gm_plan(&s, &h200, NULL, &q, &d), GM_EINVAL);
	}
}

static void inference_kv_cache(void **state)
{
	struct gm_spec s = spec_llama(32, 4096, 14336, 32, 8, 128256);
	struct gm_plan p;

	(void)state;
	s.task = GM_TASK_INFERENCE;
	s.inference = (struct gm_spec_inference){
		.precision = GM_PREC_BF16_TRUE, .batch_size = 8,
		.prompt_length = 2048, .generate_length = 256,
		.kv_cache_dtype = GM_KV_BF16};
	p = plan(s, &h200);
	/* the peak is the prefill's last block (its MLP's three 8 x 2048 x
	 * 14336 x 2 B tensors outweigh the 2 GiB cache's growth while
	 * generating): K and V x 32 layers x 8 x 2048 positions x 1024 wide
	 * x 2 B, before any logits; the term at its largest is the cache
	 * after the last decode step: 2048 + 255 positions (generate()
	 * does not feed the last token back) */
	assert_true(p.per_gpu.at_peak.kv_cache ==
		    2.0 * 32 * 8 * 2048 * 1024 * 2);
	assert_true(p.per_gpu.kv_cache == 2.0 * 32 * 8 * 2303 * 1024 * 2);
	assert_true(p.per_gpu.logits == 0);
	assert_true(p.per_gpu.temporary >= 3.0 * 8 * 2048 * 14336 * 2);
	/* inference replicas do not talk: no NCCL buffers for data parallel */
	s.parallelism.data_parallel = 8;
	assert_true(plan(s, &h200).per_gpu.nccl == 0);
	s.parallelism.data_parallel = 1;
	assert_true(p.per_gpu.weights == 2.0 * 8030261248ULL);
	assert_true(p.per_gpu.gradients == 0 &&
		    p.per_gpu.optimizer_states == 0);
	assert_true(p.fits);
}

/* A small Mixtral (2 layers, 8 experts, top-2): the plan is balanced;
 * one expert taking every token would add nothing, in training or in
 * inference (transformers 5.17's default grouped_mm experts run every
 * (token, expert) row in one matmul, arch/moe.c); a dense model reports
 * nothing either. */
static void moe_skew_reported(void **state)
{
	struct gm_spec s = spec_llama(2, 512, 1024, 8, 8, 32000);
	struct gm_plan p;

	(void)state;
	assert_true(plan(s, &h200).per_gpu.moe_skew == 0);
	s.model.architecture = GM_ARCH_MIXTRAL;
	s.model.experts = 8;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 1024;
	s.training.precision = GM_PREC_BF16_TRUE;
	p = plan(s, &h200);
	assert_true(p.per_gpu.moe_skew == 0);
	assert_true(p.per_gpu.peak_allocated > 0);
	s.task = GM_TASK_INFERENCE;
	s.inference = (struct gm_spec_inference){
		.precision = GM_PREC_BF16_TRUE, .batch_size = 2,
		.prompt_length = 512, .generate_length = 0,
		.kv_cache_dtype = GM_KV_BF16};
	p = plan(s, &h200);
	assert_true(p.per_gpu.moe_skew == 0);
	/* the cache is Llama's: 2 x layers x tokens x kv width x 2 B */
	assert_true(p.per_gpu.kv_cache == 2.0 * 2 * 2 * 512 * 512 * 2);
}

/*
 * DeepSeek-V3's inference cache (multi-head latent attention), a tiny
 * shape by hand: transformers 5.17's DeepseekV3Attention caches the
 * compressed latents, kv_a_layernorm's output (kv_lora_rank 64) and the
 * shared rotary key (qk_rope_head_dim 16), not per-head keys and values:
 * (64 + 16) x 2 B = 160 B per token and layer, whatever the heads (8
 * here, whose expanded keys and values would take 8 x (48 + 24) x 2 B =
 * 1152 B). 4 layers x batch 2 x (100 prompt + 9 fed back) positions at
 * the end; at the peak the cache holds at least the prompt. The first
 * block is dense (dense_layers 1), the other three routed.
 */
static void inference_mla_cache(void **state)
{
	struct gm_spec s = spec_llama(4, 256, 512, 8, 8, 1024);
	struct gm_plan p;

	(void)state;
	s.model.architecture = GM_ARCH_DEEPSEEK_V3;
	s.model.experts = 16;
	s.model.experts_per_token = 4;
	s.model.moe_ffn_hidden_size = 64;
	s.model.shared_experts = 1;
	s.model.dense_layers = 1;
	s.model.q_lora_rank = 96;
	s.model.kv_lora_rank = 64;
	s.model.qk_rope_head_dim = 16;
	s.model.qk_nope_head_dim = 32;
	s.model.v_head_dim = 24;
	s.task = GM_TASK_INFERENCE;
	s.inference = (struct gm_spec_inference){
		.precision = GM_PREC_BF16_TRUE, .batch_size = 2,
		.prompt_length = 100, .generate_length = 10,
		.kv_cache_dtype = GM_KV_BF16};
	p = plan(s, &h200);
	assert_true(p.per_gpu.kv_cache == 4.0 * 2 * 109 * (64 + 16) * 2);
	assert_true(p.per_gpu.at_peak.kv_cache >= 4.0 * 2 * 100 * 160);
	assert_true(p.per_gpu.at_peak.kv_cache <= 4.0 * 2 * 109 * 160);
	/* fp32 cache: twice the bytes */
	s.inference.kv_cache_dtype = GM_KV_FP32;
	assert_true(plan(s, &h200).per_gpu.kv_cache ==
		    4.0 * 2 * 109 * (64 + 16) * 4);
}

static void fits_and_fit_search(void **state)
{
	struct gm_spec s = l7b();
	struct gm_fit f;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_fit(&s, &h200, NULL, 0, &f, &d), 0);
	assert_true(f.max_micro_batch >= 1);
	s.training.micro_batch_size = f.max_micro_batch;
	assert_true(plan(s, &h200).fits);
	s.training.micro_batch_size = f.max_micro_batch + 1;
	assert_false(plan(s, &h200).fits);
	assert_true(plan(s, &h200).headroom_bytes < 0);
	/* 40 GB: 7B with AdamW needs ZeRO over several GPUs (bf16-true:
	 * under autocast FSDP2's 16-bit casts of every block's unsharded
	 * weights are kept for the backward, 13.5 GB whatever the ranks) */
	s = l7b();
	s.training.precision = GM_PREC_BF16_TRUE;
	s.parallelism.zero_stage = 3;
	assert_int_equal(gm_fit(&s, &a100, NULL, 0, &f, &d), 0);
	assert_true(f.min_gpus > 1);
	s.parallelism.data_parallel = f.min_data_parallel;
	assert_true(plan(s, &a100).fits);
	s.parallelism.data_parallel = f.min_data_parallel - 1;
	assert_false(plan(s, &a100).fits);
	/* without ZeRO no number of replicas helps */
	s.parallelism.zero_stage = 0;
	assert_int_equal(gm_fit(&s, &a100, NULL, 0, &f, &d), 0);
	assert_int_equal(f.min_gpus, 0);
}

/*
 * fit reports only exact pairs: micro x GA x dp = global, with the
 * micro-batch a divisor of global / dp (not 15 x 8 for a global batch of
 * 64, nor 14 x 5 x 8 = 560 for 512).
 */
static void fit_pairs_are_exact(void **state)
{
	static const uint64_t gbs[] = {64, 96, 512, 520};
	struct gm_spec s = l7b();
	struct gm_diag d;
	struct gm_fit f;

	(void)state;
	s.parallelism.data_parallel = 8;
	s.parallelism.zero_stage = 3;
	for (size_t i = 0; i < sizeof(gbs) / sizeof(gbs[0]); i++) {
		assert_int_equal(gm_fit(&s, &h200, NULL, gbs[i], &f, &d), 0);
		assert_true(f.max_micro_batch >= 1);
		assert_int_equal(gbs[i] / 8 % f.max_micro_batch, 0);
		assert_int_equal(f.max_micro_batch *
				 f.gradient_accumulation_steps * 8, gbs[i]);
	}
	/* not a multiple of the data-parallel degree: refused */
	assert_int_equal(gm_fit(&s, &h200, NULL, 7, &f, &d), GM_EINVAL);
	assert_int_equal(gm_fit(&s, &h200, NULL, 100, &f, &d), GM_EINVAL);
}

/*
 * At every size key's upper bound (models/README.md, Bounds) the
 * parameter count is exact (no 64-bit wrap) and the byte figures and
 * headroom saturate instead of overflowing (UBSan runs this suite).
 */
static void largest_shapes_do_not_wrap(void **state)
{
	struct gm_spec s = spec_llama(10000, 1u << 20, 1u << 22, 1u << 16,
				      1u << 16, 1u << 24);
	struct gm_param_layout pl;
	long double want = 0;
	struct gm_plan p;

	(void)state;
	s.training.micro_batch_size = 65536;
	s.training.sequence_length = 1u << 20;
	s.training.attention = GM_ATTN_EAGER;
	assert_int_equal(gm_params_layout(&s.model, &pl, NULL), 0);
	for (int i = 0; i < pl.n; i++)
		want += (long double)pl.t[i].rows * pl.t[i].cols *
			(pl.t[i].flags & GM_PT_LAYER ? 10000 : 1);
	p = plan(s, &h200);
	assert_true((long double)p.parameters == want);
	assert_true(p.parameters > 10000ULL * 4 * (1ULL << 40));
	assert_false(p.fits);
	assert_true(p.headroom_bytes == INT64_MIN);
}

/*
 * tensor_parallel_vocab: replicated keeps the embedding and lm_head whole
 * on every TP rank (torch.distributed.tensor.parallel with only the
 * blocks' linears parallelized): the weights grow by exactly the two
 * vocab x hidden tensors' other (t - 1)/t, the logits are the full
 * vocabulary's.
 */
static void tp_vocab_replicated(void **state)
{
	struct gm_spec s = l7b(), r;
	struct gm_plan a, b;
	double vh = 32000.0 * 4096;

	(void)state;
	s.parallelism.tensor_parallel = 2;
	r = s;
	r.parallelism.tp_vocab = GM_TPV_REPLICATED;
	a = plan(s, &h200);
	b = plan(r, &h200);
	/* bf16-mixed: fp32 weights, 4 B per element */
	assert_true(b.per_gpu.weights - a.per_gpu.weights == 2 * vh / 2 * 4);
	assert_true(b.per_gpu.parameters - a.per_gpu.parameters ==
		    (uint64_t)vh);
	assert_true(b.per_gpu.logits == 2 * a.per_gpu.logits);
	/* without TP the key changes nothing */
	s.parallelism.tensor_parallel = 1;
	r.parallelism.tensor_parallel = 1;
	assert_true(plan(s, &h200).per_gpu.peak_reserved ==
		    plan(r, &h200).per_gpu.peak_reserved);
}

/*
 * FSDP with *-mixed as a MixedPrecisionPolicy (param-dtype): the same
 * fp32 shards, gradients and Adam states as under autocast (16 bytes
 * per parameter over d), no whole-model autocast cache, 16-bit
 * unsharded units, activations and residual stream in 16 bits.
 */
static void fsdp_param_dtype(void **state)
{
	struct gm_spec s = l7b();
	struct gm_plan ac, pd;
	double P;

	(void)state;
	s.parallelism.data_parallel = 8;
	s.parallelism.zero_stage = 3;
	s.training.activation_checkpointing = GM_CKPT_FULL;
	ac = plan(s, &h200);
	s.parallelism.fsdp_mixed_precision = GM_FSDP_MP_PARAM_DTYPE;
	pd = plan(s, &h200);
	P = (double)pd.per_gpu.parameters; /* the stage's, before sharding */
	assert_true(fabs(pd.per_gpu.weights + pd.per_gpu.gradients +
			 pd.per_gpu.optimizer_states - 16 * P / 8) < 64);
	assert_true(pd.per_gpu.weights == ac.per_gpu.weights);
	assert_true(pd.per_gpu.optimizer_states ==
		    ac.per_gpu.optimizer_states);
	/* autocast's cache held 2 bytes of every matmul weight (> 12 GiB
	 * for 6.5e9 of them); param-dtype's temporaries are far below */
	assert_true(ac.per_gpu.temporary - pd.per_gpu.temporary >
		    12.0 * GM_GiB);
	/* full checkpointing keeps each block's input: fp32 residual under
	 * autocast, 16-bit under param-dtype (the int64 ids and labels
	 * stay: a little under twice) */
	assert_true(ac.per_gpu.activations / pd.per_gpu.activations > 1.9 &&
		    ac.per_gpu.activations / pd.per_gpu.activations < 2);
	assert_true(pd.per_gpu.communication < ac.per_gpu.communication);
	assert_true(pd.per_gpu.peak_reserved < ac.per_gpu.peak_reserved);
	/* only FSDP: DDP's plan does not change */
	s.parallelism.zero_stage = 0;
	ac = plan(s, &h200);
	s.parallelism.fsdp_mixed_precision = GM_FSDP_MP_AUTOCAST;
	pd = plan(s, &h200);
	assert_true(ac.per_gpu.peak_reserved == pd.per_gpu.peak_reserved);
}

/*
 * The plan names its recipe and its build peak: a model built whole on
 * every rank, then sharded by FSDP2, peaks at the whole fp32 model plus
 * one unit's shards, which the op-by-op replay reaches too (it emits the
 * build); DDP builds the weights and its buckets.
 */
static void recipe_and_init_peak(void **state)
{
	struct gm_spec s = l7b();
	struct gm_plan p;
	double P;

	(void)state;
	p = plan(s, &h200);
	assert_string_equal(p.recipe, "pytorch-bf16-mixed");
	assert_true(p.init_peak == 4.0 * (double)p.per_gpu.parameters);
	assert_true(p.host == 0);
	s.parallelism.data_parallel = 4;
	p = plan(s, &h200);
	assert_string_equal(p.recipe, "pytorch-ddp-bf16-mixed");
	assert_true(p.init_peak == 8.0 * (double)p.per_gpu.parameters);
	s.parallelism.zero_stage = 3;
	s.parallelism.built_whole = true;
	s.parallelism.data_parallel = 64; /* the build dominates the step */
	s.training.micro_batch_size = 1;
	s.training.sequence_length = 256;
	p = plan(s, &h200);
	assert_string_equal(p.recipe, "pytorch-fsdp2-bf16-mixed-autocast");
	P = (double)p.per_gpu.parameters;
	assert_true(p.init_peak > 4 * P && p.init_peak < 4 * P * 1.01);
	assert_true(fabs(p.init_peak - p.per_gpu.peak_allocated) <
		    0.001 * p.init_peak);
	s.parallelism.fsdp_mixed_precision = GM_FSDP_MP_PARAM_DTYPE;
	s.parallelism.built_whole = false;
	p = plan(s, &h200);
	assert_string_equal(p.recipe, "pytorch-fsdp2-bf16-mixed-param-dtype");
	assert_true(fabs(p.init_peak - 4 * P / 64) < 1);
	s.task = GM_TASK_INFERENCE;
	s.inference.precision = GM_PREC_BF16_TRUE;
	s.inference.batch_size = 1;
	s.inference.prompt_length = 128;
	s.parallelism.zero_stage = 0;
	p = plan(s, &h200);
	assert_string_equal(p.recipe, "pytorch-inference-bf16-true");
	assert_true(p.init_peak == p.per_gpu.weights);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(at_peak_sums_to_peak),
		cmocka_unit_test(phases),
		cmocka_unit_test(settings_move_the_right_way),
		cmocka_unit_test(pipeline_stages),
		cmocka_unit_test(inference_kv_cache),
		cmocka_unit_test(inference_mla_cache),
		cmocka_unit_test(moe_skew_reported),
		cmocka_unit_test(fits_and_fit_search),
		cmocka_unit_test(largest_shapes_do_not_wrap),
		cmocka_unit_test(fit_pairs_are_exact),
		cmocka_unit_test(fsdp_param_dtype),
		cmocka_unit_test(recipe_and_init_peak),
		cmocka_unit_test(tp_vocab_replicated),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
