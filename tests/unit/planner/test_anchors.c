/*
 * Published anchors, reproduced through the model's own functions with
 * the papers' assumptions (Korthikanti's block, the DeepSpeed and
 * Megatron recipes). The expected figures are the papers' numbers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "activations.h"
#include "error.h"
#include "model.h"
#include "model_megatron.h"
#include "recipe.h"
#include "specs.h"
#include "states.h"
#include "units.h"

/* Megatron 22B of Korthikanti et al. 2022 (Table 3): L=48, h=6144,
 * a=64, t=8, s=2048, b=4. */
static double korthikanti_22b(bool sp, enum gm_ckpt ck)
{
	struct gm_act_layer l;
	struct gm_act_dims d = {.h = 6144, .kv = 6144, .f = 4 * 6144,
				.a = 64, .s = 2048, .b = 4, .t = 8, .sp = sp};

	gm_act_layer_paper(&l);
	return 48 * gm_act_layer_saved(&l, &d, ck) / (double)GM_GiB;
}

static void korthikanti_activations(void **state)
{
	(void)state;
	/* tensor parallel, nothing recomputed: 59.25 GiB (Korthikanti
	 * et al. 2022, section 4; calculon-ai/calculon
	 * calculon/llm/validation.py, "seqsel_fig1") */
	assert_true(korthikanti_22b(false, GM_CKPT_NONE) == 59.25);
	/* sequence parallel + selective recomputation: 9.5625 GiB */
	assert_true(korthikanti_22b(true, GM_CKPT_SELECTIVE) == 9.5625);
	/* selective alone: sbhL(10 + 24/t) = 29.25 GiB; sequence parallel
	 * alone: 39.5625 GiB; full recomputation 2sbhL = 4.5 GiB */
	assert_true(korthikanti_22b(false, GM_CKPT_SELECTIVE) == 29.25);
	assert_true(korthikanti_22b(true, GM_CKPT_NONE) == 39.5625);
	assert_true(korthikanti_22b(false, GM_CKPT_FULL) == 4.5);
}

static void korthikanti_untouched_block(void **state)
{
	struct gm_act_layer l;
	struct gm_act_dims d = {.h = 1, .kv = 1, .f = 4, .a = 0, .s = 1,
				.b = 1, .t = 1};

	(void)state;
	/* 34 bytes per s*b*h without parallelism (section 4.1) */
	gm_act_layer_paper(&l);
	assert_true(gm_act_layer_saved(&l, &d, GM_CKPT_NONE) == 34);
}

static void megatron_weights_and_optimizer(void **state)
{
	struct gm_state_bytes b = gm_state_bytes(
		GM_RECIPE_MEGATRON, GM_PREC_BF16_MIXED, GM_OPT_ADAM);
	double P = 12.0 * 48 * 6144 * 6144 / 8; /* 12Lh^2 / t */

	(void)state;
	/* 18 bytes per parameter: 45.5625 GiB for the 22B model */
	assert_true((b.weights + b.gradients + b.optimizer) * P /
		    (double)GM_GiB == 45.5625);
	b = gm_state_shard(b, 1, 8); /* distributed optimizer 6 + 12/d */
	assert_true(b.weights + b.gradients + b.optimizer == 6 + 12.0 / 8);
}

/* ZeRO paper, Figure 1: Psi = 7.5B, N_d = 64, K = 12, through gm_plan()
 * with the DeepSpeed recipe on a custom model. */
static double zero_gb(unsigned stage)
{
	struct gm_spec s = spec_llama(32, 4096, 11008, 32, 32, 32000);
	struct gm_model_opts o;
	struct gm_plan_gpu g = {.name = "x", .capacity_bytes = 1ULL << 50};
	struct gm_plan p;
	struct gm_diag d;

	s.model.architecture = GM_ARCH_CUSTOM;
	s.model.layers = 1;
	s.model.parameters = 7.5e9;
	s.training.precision = GM_PREC_FP16_MIXED;
	s.training.optimizer = GM_OPT_ADAM;
	s.parallelism.data_parallel = 64;
	s.parallelism.zero_stage = stage;
	gm_model_opts_default(&o);
	o.recipe = GM_RECIPE_DEEPSPEED;
	assert_int_equal(gm_plan(&s, &g, &o, &p, &d), 0);
	return (p.per_gpu.weights + p.per_gpu.gradients +
		p.per_gpu.optimizer_states) / 1e9;
}

static void zero_paper(void **state)
{
	(void)state;
	/* 120, 31.4, 16.6, 1.9 GB (one decimal in the paper) */
	assert_true(round(zero_gb(0) * 10) / 10 == 120.0);
	assert_true(round(zero_gb(1) * 10) / 10 == 31.4);
	assert_true(round(zero_gb(2) * 10) / 10 == 16.6);
	assert_true(round(zero_gb(3) * 10) / 10 == 1.9);
	/* and exactly: 4 + 12/64, 2 + 14/64, 16/64 bytes x 7.5e9 */
	assert_true(fabs(zero_gb(1) - 31.40625) < 1e-9);
	assert_true(fabs(zero_gb(2) - 16.640625) < 1e-9);
	assert_true(fabs(zero_gb(3) - 1.875) < 1e-9);
}


/*
 * training.framework megatron through gm_plan(): the first stage's
 * weights + gradients + optimizer states against Megatron-LM's own
 * weight_and_optimizer_memory (megatron/training/theoretical_memory_
 * usage.py at d98e8a6, reproduced by gm_megatron_theoretical) for
 * Llama-2-7B and a Llama-3-8B shape (args.padded_vocab_size as
 * Megatron pads it), within 0.1%: the plan pads the
 * buffers as _ParamAndGradBuffer does and keeps the final norm on the
 * last stage where Megatron's estimate spreads it over the stages.
 */
static void megatron_plan_theoretical(void **state)
{
	struct {
		unsigned t, p, v, d, g, f, V;
		bool dist;
	} c[] = {
		{1, 1, 1, 8, 32, 11008, 32000, false},
		{1, 1, 1, 8, 32, 11008, 32000, true},
		{2, 2, 4, 2, 32, 11008, 32000, true},
		{4, 2, 1, 1, 8, 14336, 128256, false},
		{8, 4, 2, 4, 8, 14336, 128256, true},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		struct gm_spec s = spec_llama(32, 4096, c[i].f, 32, c[i].g,
					      c[i].V);
		struct gm_model_opts o;
		struct gm_plan_gpu g = {.name = "x",
					.capacity_bytes = 1ULL << 50};
		struct gm_plan p;
		struct gm_diag d;
		struct gm_megatron_args a = {
			.hidden_size = 4096, .num_attention_heads = 32,
			.num_query_groups = c[i].g, .kv_channels = 128,
			.ffn_hidden_size = c[i].f, .num_layers = 32,
			.padded_vocab_size = gm_mg_padded_vocab(c[i].V,
							       c[i].t),
			.swiglu = true,
			.rmsnorm = true, .untie = true, .tp = c[i].t,
			.pp = c[i].p, .vpp = c[i].v > 1 ? c[i].v : 0,
			.dp = c[i].d, .distributed_optimizer = c[i].dist,
			.seq_length = 4096, .micro_batch_size = 1};
		double wo, act, mine;

		s.training.framework = GM_FW_MEGATRON;
		s.training.optimizer = GM_OPT_ADAM;
		s.training.global_batch_size = 64 * c[i].d;
		s.parallelism.tensor_parallel = c[i].t;
		s.parallelism.pipeline_parallel = c[i].p;
		s.parallelism.virtual_pipeline_stages = c[i].v;
		s.parallelism.data_parallel = c[i].d;
		s.parallelism.distributed_optimizer = c[i].dist;
		gm_model_opts_default(&o);
		o.reserve = GM_RESERVE_ANALYTIC;
		assert_int_equal(gm_plan(&s, &g, &o, &p, &d), 0);
		gm_megatron_theoretical(&a, &wo, &act);
		mine = p.stages[0].weights + p.stages[0].gradients +
		       p.stages[0].optimizer_states;
		assert_true(fabs(mine / (wo * 1024 * 1024) - 1) < 1e-3);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(korthikanti_activations),
		cmocka_unit_test(korthikanti_untouched_block),
		cmocka_unit_test(megatron_weights_and_optimizer),
		cmocka_unit_test(zero_paper),
		cmocka_unit_test(megatron_plan_theoretical),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
