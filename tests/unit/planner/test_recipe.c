/*
 * The recipe table (planner/recipe/) against the frameworks' own
 * figures: DeepSpeed's model-state estimators reproduced exactly (and
 * the plan's rows at or above them), Megatron-LM's theoretical bytes
 * per parameter and in-flight micro-batches, FSDP2's MixedPrecision-
 * Policy without a whole-model cache, LoRA's r (in + out) and the NF4
 * bytes bitsandbytes stores.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "recipe.h"
#include "model_megatron.h"
#include "step.h"
#include "units.h"

/* A figure printed as GiB with two decimals, as DeepSpeed's estimators
 * print theirs ("%.2fGB" of bytes / 2^30). */
static double gib2(int64_t b)
{
	return round((double)b / (double)GM_GiB * 100) / 100;
}

/*
 * docs/code-docs/source/memory.rst (DeepSpeed 0.19.6),
 * estimate_zero3_model_states_mem_needs_all_cold(total_params=2851e6,
 * largest_layer_params=32e6, num_gpus_per_node=8, num_nodes=1): every
 * row of the published table.
 */
static void deepspeed_zero3_estimator(void **state)
{
	static const struct {
		bool off_opt, off_par, zero_init;
		double cpu, gpu;
	} rows[] = {
		{true, true, true, 71.69, 0.12},
		{true, true, false, 127.45, 0.12},
		{true, false, true, 63.72, 0.78},
		{true, false, false, 127.45, 0.78},
		{false, false, true, 1.43, 6.09},
		{false, false, false, 127.45, 6.09},
	};
	int64_t cpu, gpu, llm;

	(void)state;
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		gm_ds_estimate_zero3(2851000000, 32000000, 8, 1, rows[i].off_opt,
				     rows[i].off_par, rows[i].zero_init, 1.5,
				     &cpu, &gpu, &llm);
		assert_true(gib2(cpu) == rows[i].cpu);
		assert_true(gib2(gpu) == rows[i].gpu);
		assert_int_equal(llm, 128000000);
	}
	/* the same, exactly in bytes: 4 * 32e6 + int(18 * 2851e6 / 8) */
	gm_ds_estimate_zero3(2851000000, 32000000, 8, 1, false, false, true,
			     1.5, &cpu, &gpu, &llm);
	assert_int_equal(gpu, 128000000 + 6414750000);
	assert_int_equal(cpu, 1536000000);
}

/*
 * estimate_zero2_model_states_mem_needs (stage_1_and_2.py): the docs'
 * offload row (2 * params per GPU: 5.31 GB; 127.45 GB per CPU) and the
 * code's 2 * params + int(18 * params / gpus) without offload (the
 * docs' table still shows the older 4 + 16 / gpus bytes, 15.93 GB).
 */
static void deepspeed_zero2_estimator(void **state)
{
	int64_t cpu, gpu;

	(void)state;
	gm_ds_estimate_zero2(2851000000, 8, 1, true, 1.5, &cpu, &gpu);
	assert_true(gib2(gpu) == 5.31);
	assert_true(gib2(cpu) == 127.45);
	assert_int_equal(gpu, 5702000000);
	gm_ds_estimate_zero2(2851000000, 8, 1, false, 1.5, &cpu, &gpu);
	assert_int_equal(gpu, 5702000000 + 6414750000);
	assert_int_equal(cpu, 136848000000);
}

static struct gm_recipe_in ds_in(unsigned zero, uint64_t dp, bool off_opt,
				 bool off_par)
{
	return (struct gm_recipe_in){
		.params = 2851e6, .trainable = 2851e6, .matmul_params = 2800e6,
		.largest_layer = 32e6, .precision = GM_PREC_BF16_MIXED,
		.optimizer = GM_OPT_ADAMW, .dp = dp, .zero = zero,
		.offload_optimizer = off_opt ? GM_OFFLOAD_CPU : GM_OFFLOAD_NONE,
		.offload_parameters = off_par ? GM_OFFLOAD_CPU
					      : GM_OFFLOAD_NONE,
	};
}

/*
 * The plan's model-state rows meet or exceed DeepSpeed's estimators
 * (the estimators leave out the buckets, the prefetch and the 16-bit
 * flatten before the fp32 cast at the step). ZeRO-3's 18 bytes count
 * the fp32 gradient of the whole partition; the engine makes it one
 * sub-group of sub_group_size (1e9) elements at a time, so the
 * estimator is a lower bound while a partition is at most one
 * sub-group: from 4 ranks up here.
 */
static void deepspeed_rows_meet_estimators(void **state)
{
	struct gm_recipe_states s;
	struct gm_diag diag;
	int64_t cpu, gpu, llm;

	(void)state;
	for (uint64_t dp = 4; dp <= 64; dp *= 4) {
		struct gm_recipe_in in = ds_in(2, dp, false, false);

		assert_int_equal(gm_recipe_states(GM_FW_DEEPSPEED, &in, &s,
						  &diag), 0);
		gm_ds_estimate_zero2(2851000000, (int64_t)dp, 1, false, 1.5,
				     &cpu, &gpu);
		assert_true(gm_recipe_gpu_bytes(&s) >= (double)gpu);
		/* 2 + 14 / d bytes per parameter between steps, the step's
		 * 16-bit flatten and fp32 cast 6 / d more */
		assert_true(fabs(s.weights + s.gradients + s.optimizer -
				 2851e6 * (2 + 14.0 / (double)dp)) < 1);
		assert_true(fabs(s.step - 2851e6 * 6.0 / (double)dp) < 1);
		in = ds_in(2, dp, true, false);
		assert_int_equal(gm_recipe_deepspeed(&in, &s, &diag), 0);
		gm_ds_estimate_zero2(2851000000, (int64_t)dp, 1, true, 1.5,
				     &cpu, &gpu);
		assert_true(gm_recipe_gpu_bytes(&s) >= (double)gpu);
		assert_true(s.host > 0);
		assert_string_equal(s.name, "deepspeed-zero2-offload-optimizer-"
				    "bf16-mixed");
		for (int k = 0; k < 3; k++) {
			in = ds_in(3, dp, k >= 1, k == 2);
			assert_int_equal(gm_recipe_deepspeed(&in, &s, &diag), 0);
			gm_ds_estimate_zero3(2851000000, 32000000, (int64_t)dp,
					     1, k >= 1, k == 2, true, 1.5, &cpu,
					     &gpu, &llm);
			assert_true(gm_recipe_gpu_bytes(&s) >= (double)gpu);
		}
	}
	assert_string_equal(s.name, "deepspeed-zero3-offload-optimizer-"
				    "parameters-bf16-mixed");
	assert_true(s.weights == 0 && s.optimizer == 0);
	/* fp32 master 4 + Adam 8 + fp32 gradient 4 + bf16 params and
	 * gradients 2 + 2, per parameter over 64 ranks, on the host */
	assert_true(fabs(s.host - 2851e6 * 20 / 64) < 1);
}

/*
 * megatron/training/theoretical_memory_usage.py (Megatron-LM d98e8a6),
 * compute_weight_and_optimizer_memory: 18 bytes per parameter, 6 +
 * 12 / DP with the distributed optimizer; and the recipe's rows add up
 * to the same.
 */
static void megatron_theoretical_bytes(void **state)
{
	struct gm_recipe_states s;
	struct gm_diag diag;

	(void)state;
	assert_true(gm_megatron_bytes_per_param(GM_PREC_BF16_MIXED, false, 8)
		    == 18);
	assert_true(gm_megatron_bytes_per_param(GM_PREC_BF16_MIXED, true, 8)
		    == 7.5);
	assert_true(gm_megatron_bytes_per_param(GM_PREC_FP16_MIXED, false, 4)
		    == 20);
	assert_true(gm_megatron_bytes_per_param(GM_PREC_FP16_MIXED, true, 4)
		    == 8);
	assert_true(gm_megatron_bytes_per_param(GM_PREC_FP32, true, 2) == 12);
	for (uint64_t d = 1; d <= 1024; d *= 2) {
		const enum gm_precision ps[] = {GM_PREC_BF16_MIXED,
						GM_PREC_FP16_MIXED,
						GM_PREC_FP32};
		for (int i = 0; i < 3; i++) {
			for (int dist = 0; dist < 2; dist++) {
				struct gm_recipe_in in = {
					.params = 1e9, .trainable = 1e9,
					.precision = ps[i],
					.optimizer = GM_OPT_ADAMW, .dp = d,
					.distributed_optimizer = dist};
				double b;

				assert_int_equal(gm_recipe_states(
					GM_FW_MEGATRON, &in, &s, &diag), 0);
				b = (s.weights + s.gradients + s.optimizer) /
				    1e9;
				assert_true(fabs(b - gm_megatron_bytes_per_param(
					ps[i], dist, d)) < 1e-9);
			}
		}
	}
	assert_string_equal(s.name, "megatron-distributed-optimizer-fp32");
}


/*
 * Megatron-LM's report_theoretical_memory (megatron/training/
 * theoretical_memory_usage.py at NVIDIA/Megatron-LM d98e8a6), run in
 * Python on these arguments (Llama-2-7B: h 4096, 32 heads, kv_channels
 * 128, ffn 11008, swiglu, RMSNorm, untied, vocab 32000, seq 4096;
 * Llama-3-8B: 8 query groups, ffn 14336, vocab 128256; GPT: 12 layers,
 * h 512, 8 heads, ffn 2048, LayerNorm, tied, vocab 50304, seq 1024,
 * micro-batch 4) printed these MB (2^20 B); reproduced to 1e-9.
 */
static void megatron_theoretical_report(void **state)
{
	const struct gm_megatron_args l7 = {
		.hidden_size = 4096, .num_attention_heads = 32,
		.kv_channels = 128, .ffn_hidden_size = 11008, .num_layers = 32,
		.padded_vocab_size = 32000, .swiglu = true, .rmsnorm = true,
		.untie = true, .tp = 1, .pp = 1, .dp = 8, .seq_length = 4096,
		.micro_batch_size = 1};
	struct {
		struct gm_megatron_args a;
		double wo, act;
	} c[5];
	double wo, act;

	(void)state;
	for (int i = 0; i < 4; i++)
		c[i].a = l7;
	c[0].wo = 115672.5703125;
	c[0].act = 18591.3328125;
	c[1].a.distributed_optimizer = true;
	c[1].wo = 48196.904296875;
	c[1].act = 18591.3328125;
	c[2].a.tp = 2;
	c[2].a.pp = 2;
	c[2].a.vpp = 4;
	c[2].a.dp = 2;
	c[2].a.sequence_parallel = c[2].a.selective = true;
	c[2].a.distributed_optimizer = true;
	c[2].a.num_microbatches = 32;
	c[2].wo = 19279.5234375;
	c[2].act = 8298.03515625;
	c[3].a.num_query_groups = 8;
	c[3].a.ffn_hidden_size = 14336;
	c[3].a.padded_vocab_size = 128256;
	c[3].a.tp = 4;
	c[3].a.pp = 2;
	c[3].a.dp = 1;
	c[3].a.num_microbatches = 3;
	c[3].wo = 17232.78515625;
	c[3].act = 8635.265625;
	c[4].a = (struct gm_megatron_args){
		.hidden_size = 512, .num_attention_heads = 8, .kv_channels = 64,
		.ffn_hidden_size = 2048, .num_layers = 12,
		.padded_vocab_size = 50304, .tp = 1, .pp = 1, .dp = 8,
		.distributed_optimizer = true, .seq_length = 1024,
		.micro_batch_size = 4};
	c[4].wo = 454.40185546875;
	c[4].act = 1275.7828125;
	for (int i = 0; i < 5; i++) {
		gm_megatron_theoretical(&c[i].a, &wo, &act);
		assert_true(fabs(wo / c[i].wo - 1) < 1e-9);
		assert_true(fabs(act / c[i].act - 1) < 1e-9);
	}
}

/*
 * Megatron's schedule (schedules.py get_schedule_table with
 * microbatch_group_size_per_vp_stage = pp, get_pp_rank_microbatches):
 * the chunks the forwards run, groups of pp micro-batches through each
 * chunk in turn, the last group whatever is left; backwards in reverse
 * chunk order; the warm-up forwards.
 */
static void megatron_schedule(void **state)
{
	/* pp 2, 2 chunks, 4 micro-batches: table (0,0)(1,0)(0,1)(1,1)
	 * (2,0)(3,0)(2,1)(3,1) */
	const unsigned want[8] = {0, 0, 1, 1, 0, 0, 1, 1};
	/* pp 2, 2 chunks, 3 micro-batches: a group of 2, then one of 1:
	 * (0,0)(1,0)(0,1)(1,1)(2,0)(2,1) */
	const unsigned want3[6] = {0, 0, 1, 1, 0, 1};

	(void)state;
	for (uint64_t k = 0; k < 8; k++) {
		assert_int_equal(gm_mg_chunk(2, 2, 4, k, false), want[k]);
		assert_int_equal(gm_mg_chunk(2, 2, 4, k, true), 1 - want[k]);
	}
	for (uint64_t k = 0; k < 6; k++)
		assert_int_equal(gm_mg_chunk(2, 2, 3, k, false), want3[k]);
	assert_int_equal(gm_mg_chunk(4, 1, 8, 5, false), 0);
	assert_int_equal(gm_mg_warmup(4, 1, 0, 8), 3);
	assert_int_equal(gm_mg_warmup(4, 1, 3, 8), 0);
	assert_int_equal(gm_mg_warmup(4, 2, 0, 8), 10);
	assert_int_equal(gm_mg_warmup(4, 2, 0, 4), 8);
	assert_int_equal(gm_mg_warmup(1, 1, 0, 8), 0);
	/* the vocabulary padding: multiples of 128 x tp */
	assert_int_equal(gm_mg_padded_vocab(50257, 1), 50304);
	assert_int_equal(gm_mg_padded_vocab(32000, 2), 32000);
	assert_int_equal(gm_mg_padded_vocab(32000, 8), 32768);
}


/*
 * The Megatron emitter (step_megatron.c): rank r of a pipeline holds the
 * saved tensors of its warm-up forwards plus one (1F1B), counted in
 * chunk passes under the interleaved schedule; the fp32 masters and
 * Adam's states are every weight byte's 2 + 4 here.
 */
static void megatron_emitter(void **state)
{
	struct gm_mg_step mg;
	struct gm_step st;
	struct gm_step_peak pk;

	(void)state;
	for (unsigned pp = 1; pp <= 4; pp++) {
		for (unsigned v = 1; v <= 3; v++) {
			if (pp == 1 && v > 1)
				continue;
			for (unsigned r = 0; r < pp; r++) {
				double want;

				memset(&mg, 0, sizeof(mg));
				memset(&st, 0, sizeof(st));
				mg.steps = 2;
				mg.chunks = v;
				mg.layers_chunk = 2;
				mg.n_layer_t = 1;
				mg.layer_t[0] = 1 << 20;
				mg.grad_buf[0] = 4 << 20;
				mg.master_frac = 2;
				mg.state_frac = 4;
				mg.pp = pp;
				mg.rank = r;
				mg.m = 4 * pp;
				mg.n_act = 2;
				mg.act[0] = 3000;
				mg.act[1] = 5000;
				st.megatron = &mg;
				assert_int_equal(gm_step_peak(&st, (1u << GM_SK_ACT)
							      | GM_STEP_NOGROUP,
							      &pk), 0);
				want = (double)(gm_mg_warmup(pp, v, r, mg.m) +
						1) * 2 * 8000;
				assert_true(pk.peak == want);
				assert_int_equal(gm_step_peak(&st, (1u <<
					GM_SK_STATE) | GM_STEP_NOGROUP, &pk), 0);
				/* masters (2 per weight byte) and states (4) */
				assert_true(pk.peak == 2.0 * v * (2 << 20) * 3);
			}
		}
	}
}

/*
 * In-flight micro-batches (schedules.py get_pp_rank_microbatches)
 * against theoretical_memory_usage.py's compute_activation_memory:
 * the first stage holds pp micro-batches under 1F1B (fewer when the
 * step has fewer), and under the interleaved schedule
 * pp * (1 + (pp - 1) / (pp * vpp)) of them, counted in whole stages.
 */
static void megatron_in_flight(void **state)
{
	(void)state;
	assert_int_equal(gm_megatron_in_flight(4, 1, 0, 64), 4);
	assert_int_equal(gm_megatron_in_flight(4, 1, 3, 64), 1);
	assert_int_equal(gm_megatron_in_flight(8, 1, 0, 2), 2);
	assert_int_equal(gm_megatron_in_flight(1, 1, 0, 16), 1);
	for (uint64_t pp = 2; pp <= 16; pp++) {
		for (uint64_t vpp = 2; vpp <= 8; vpp++) {
			double penalty = 1 + (double)(pp - 1) /
					     (double)(pp * vpp);
			double chunks = (double)gm_megatron_in_flight(
				pp, vpp, 0, 1000);

			assert_true(fabs(chunks / (double)vpp -
					 penalty * (double)pp) < 1e-9);
			/* the last stage starts its backward soonest */
			assert_true(gm_megatron_in_flight(pp, vpp, pp - 1, 1000)
				    == (vpp - 1) * pp + 1);
		}
	}
}

/*
 * FSDP2 with MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32):
 * 16 bytes per parameter over the data-parallel group (fp32 sharded
 * parameters, gradients and Adam's two states), no whole-model autocast
 * cache; under autocast the 16-bit casts of every matmul weight stay.
 */
static void fsdp2_param_dtype(void **state)
{
	struct gm_recipe_in in = {
		.params = 6.738e9, .trainable = 6.738e9, .matmul_params = 6.476e9,
		.largest_layer = 202e6, .precision = GM_PREC_BF16_MIXED,
		.optimizer = GM_OPT_ADAMW, .dp = 8, .zero = 3,
		.fsdp_mp = GM_FSDP_MP_PARAM_DTYPE};
	struct gm_recipe_states pd, ac;
	struct gm_diag diag;

	(void)state;
	assert_int_equal(gm_recipe_pytorch(&in, &pd, &diag), 0);
	assert_true(fabs(pd.weights + pd.gradients + pd.optimizer -
			 16 * 6.738e9 / 8) < 1);
	assert_true(pd.cache == 0);
	assert_string_equal(pd.name, "pytorch-fsdp2-bf16-mixed-param-dtype");
	in.fsdp_mp = GM_FSDP_MP_AUTOCAST;
	assert_int_equal(gm_recipe_pytorch(&in, &ac, &diag), 0);
	assert_true(ac.cache == 2 * 6.476e9);
	/* the same sharded states; 16-bit unsharded units instead of fp32 */
	assert_true(ac.weights + ac.gradients + ac.optimizer ==
		    pd.weights + pd.gradients + pd.optimizer);
	assert_true(pd.gathered < ac.gathered);
	/* DDP: 16 bytes per parameter on every rank plus its buckets */
	in.zero = 0;
	assert_int_equal(gm_recipe_pytorch(&in, &ac, &diag), 0);
	assert_true(ac.weights + ac.gradients + ac.optimizer == 16 * 6.738e9);
	assert_true(ac.buffers == 4 * 6.738e9);
	assert_string_equal(ac.name, "pytorch-ddp-bf16-mixed");
}

/*
 * LoRA: r (in + out) per target. PEFT's print_trainable_parameters for
 * Llama-2-7B with r = 8 on q_proj and v_proj (PEFT's defaults for
 * llama): 4,194,304 trainable parameters.
 */
static void lora_parameters(void **state)
{
	double per_layer = gm_lora_params(8, 4096, 4096) * 2;

	(void)state;
	assert_true(gm_lora_params(16, 4096, 11008) == 16 * (4096 + 11008));
	assert_true(32 * per_layer == 4194304);
}

/*
 * NF4 with double quantization as bitsandbytes stores it: half a byte
 * per element, an 8-bit absmax per 64, an fp32 absmax per 256 of those,
 * plus 1,092 bytes of constants (offset 4, nested code 1,024, NF4 code
 * 64) per weight: 0.5159 bytes per element on a 4096 x 4096 weight.
 */
static void nf4_bytes(void **state)
{
	double n = 4096.0 * 4096.0;

	(void)state;
	assert_true(gm_nf4_bytes(4096 * 4096) ==
		    n / 2 + n / 64 + 4 * n / 64 / 256 + 1092);
	assert_true(fabs(gm_nf4_bytes(4096 * 4096) / n - 0.5159) < 1e-4);
	/* odd sizes round up: 65 elements = 33 bytes, 2 absmax blocks */
	assert_true(gm_nf4_bytes(65) == 33 + 2 + 4 + 1092);
}

/* QLoRA's model states: the NF4 base, fp32 adapters with their
 * gradients and Adam, the rest fp32 after prepare_model_for_kbit_
 * training; LoRA over a *-true base keeps it 16-bit. */
static void adapter_states(void **state)
{
	struct gm_adapter_in in = {
		.adapter = GM_ADAPTER_QLORA, .precision = GM_PREC_BF16_TRUE,
		.optimizer = GM_OPT_ADAMW, .base_params = 6.738e9,
		.matmul_params = 6.476e9, .quantized = 6.476e9,
		.quantized_bytes = 6.476e9 * 0.516, .adapter_params = 4194304,
		.largest_linear = 4096.0 * 11008, .kbit_prepared = true};
	struct gm_recipe_states s;
	struct gm_diag diag;

	(void)state;
	assert_int_equal(gm_recipe_adapter(&in, &s, &diag), 0);
	assert_true(s.gradients == 4 * 4194304.0);
	assert_true(s.optimizer == 8 * 4194304.0);
	assert_true(fabs(s.weights - (6.476e9 * 0.516 + 4 * (6.738e9 -
		    6.476e9) + 4 * 4194304.0)) < 1);
	assert_true(s.step == 2 * 4096.0 * 11008);
	assert_string_equal(s.name, "pytorch-qlora-nf4-bf16-true");
	in.adapter = GM_ADAPTER_LORA;
	assert_int_equal(gm_recipe_adapter(&in, &s, &diag), 0);
	assert_true(s.weights == 2 * 6.738e9 + 4 * 4194304.0);
	assert_true(s.cache == 0);
	in.adapter = GM_ADAPTER_NONE;
	assert_int_equal(gm_recipe_adapter(&in, &s, &diag), GM_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(deepspeed_zero3_estimator),
		cmocka_unit_test(deepspeed_zero2_estimator),
		cmocka_unit_test(deepspeed_rows_meet_estimators),
		cmocka_unit_test(megatron_theoretical_bytes),
		cmocka_unit_test(megatron_in_flight),
		cmocka_unit_test(megatron_theoretical_report),
		cmocka_unit_test(megatron_schedule),
		cmocka_unit_test(megatron_emitter),
		cmocka_unit_test(fsdp2_param_dtype),
		cmocka_unit_test(lora_parameters),
		cmocka_unit_test(nf4_bytes),
		cmocka_unit_test(adapter_states),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
