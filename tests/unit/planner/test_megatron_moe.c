/*
 * Megatron-Core's MoE layer (planner/megatron_moe.c) and expert
 * parallelism in a Megatron-LM stage (planner/model_megatron.c): the
 * layer's parameter count, the experts split over expert_parallel
 * ranks, their optimizer states over the expert data-parallel group,
 * and the rows a rank's experts save.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <math.h>

#include "megatron_moe.h"
#include "model_megatron.h"
#include "params.h"
#include "specs.h"

/* Mixtral-8x7B under Megatron-LM: 8 experts, top-2, SwiGLU. */
static struct gm_spec spec_mixtral(void)
{
	struct gm_spec s = spec_llama(32, 4096, 14336, 32, 8, 32000);

	s.model.architecture = GM_ARCH_MIXTRAL;
	s.model.experts = 8;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 14336;
	s.training.framework = GM_FW_MEGATRON;
	s.training.optimizer = GM_OPT_ADAM;
	return s;
}

/* Megatron's layer has the Hugging Face model's parameters: 46.7B for
 * Mixtral-8x7B (the published count, 46,702,792,704). */
static void mixtral_count(void **state)
{
	struct gm_spec s = spec_mixtral();
	struct gm_param_layout hf, mg;

	(void)state;
	assert_int_equal(gm_params_layout(&s.model, &hf, NULL), 0);
	mg = hf;
	gm_mg_moe_layout(&s, &mg);
	assert_true(mg.total == hf.total);
	assert_true(mg.total == 46702792704ULL);
	assert_true(mg.per_layer == hf.per_layer);
}

/* The gpt2 layer with experts: its MLP (fc and proj weights and
 * biases) replaced by a router of E x h and E experts of two weights
 * and two biases each. */
static void gpt2_experts_count(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_param_layout pl;
	uint64_t h = 768, f = 3072, E = 8, F = 1024, L = 12, dense;

	(void)state;
	assert_int_equal(gm_params_layout(&s.model, &pl, NULL), 0);
	dense = pl.total;
	s.training.framework = GM_FW_MEGATRON;
	s.model.experts = E;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = F;
	gm_mg_moe_layout(&s, &pl);
	assert_true(pl.total == dense - L * (2 * h * f + f + h) +
			       L * (E * h + E * (2 * h * F + F + h)));
	for (int i = 0; i < pl.n; i++)
		if (gm_mg_moe_expert(&pl.t[i]))
			assert_int_equal(pl.t[i].groups, E);
}

/* --disable-bias-linear (model.add_bias_linear false) on the gpt2 layer
 * under Megatron-LM: the attention's c_attn (3h) and c_proj (h) biases
 * go, and the MLP's (f + h) or, with experts, the experts' (E x (F +
 * h)); the LayerNorms keep theirs. */
static void gpt2_no_bias_count(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_param_layout pl, nb;
	uint64_t h = 768, f = 3072, E = 8, F = 1024, L = 12;

	(void)state;
	s.training.framework = GM_FW_MEGATRON;
	assert_int_equal(gm_params_layout(&s.model, &pl, NULL), 0);
	nb = pl;
	gm_mg_moe_layout(&s, &pl); /* dense, with biases: unchanged */
	s.model.add_bias_linear = false;
	gm_mg_moe_layout(&s, &nb);
	assert_true(pl.total - nb.total == L * (3 * h + h + f + h));
	s.model.experts = E;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = F;
	s.model.add_bias_linear = true;
	assert_int_equal(gm_params_layout(&s.model, &pl, NULL), 0);
	nb = pl;
	gm_mg_moe_layout(&s, &pl);
	s.model.add_bias_linear = false;
	gm_mg_moe_layout(&s, &nb);
	assert_true(pl.total - nb.total == L * (3 * h + h + E * (F + h)));
}

static void stage_mg(const struct gm_spec *s, struct gm_terms *T,
		     struct gm_mg_step *mg)
{
	struct gm_param_layout pl;
	struct gm_mg_in in;

	assert_int_equal(gm_params_layout(&s->model, &pl, NULL), 0);
	gm_mg_moe_layout(s, &pl);
	in = (struct gm_mg_in){
		.spec = s, .pl = &pl,
		.t = (double)s->parallelism.tensor_parallel,
		.d = (double)s->parallelism.data_parallel, .p = 1, .r = 0,
		.layers = s->model.layers, .m = 1, .workspace = 0,
		.sm_major = 9};
	memset(T, 0, sizeof(*T));
	gm_mg_stage(&in, mg, T);
}

static void stage(const struct gm_spec *s, struct gm_terms *T)
{
	struct gm_mg_step mg;

	stage_mg(s, T, &mg);
}

/*
 * Expert parallel 8 keeps one expert of 8 per layer: the weights drop by
 * 7/8 of the experts' (2 bytes each, bf16); without the distributed
 * optimizer each rank keeps Adam's 12 bytes per parameter it holds.
 * With it, the experts' states shard over d x t / ep ranks and the dense
 * ones over d.
 */
static void experts_split(void **state)
{
	struct gm_spec s = spec_mixtral();
	struct gm_terms one, eight;
	double X = 32.0 * 8 * 3 * 4096 * 14336; /* expert parameters */

	(void)state;
	s.parallelism.data_parallel = 8;
	stage(&s, &one);
	s.parallelism.expert_parallel = 8;
	stage(&s, &eight);
	assert_true(fabs(one.weights - eight.weights - X * 7 / 8 * 2) < 1);
	assert_true(fabs(one.optimizer_states - eight.optimizer_states -
			 X * 7 / 8 * 12) < 1);
	assert_true(one.parameters - eight.parameters ==
		    (uint64_t)(X * 7 / 8));
	/* distributed optimizer, d 8, t 1, ep 8: one rank per expert group,
	 * the experts' states whole (12 bytes x X / 8), the dense ones / 8 */
	s.parallelism.distributed_optimizer = true;
	stage(&s, &eight);
	assert_true(fabs(eight.optimizer_states -
			 ((double)eight.parameters - X / 8) * 12 / 8 -
			 X / 8 * 12) < 1);
	/* ep 4: two ranks share each expert group */
	s.parallelism.expert_parallel = 4;
	stage(&s, &one);
	assert_true(fabs(one.optimizer_states -
			 ((double)one.parameters - X / 4) * 12 / 8 -
			 X / 4 * 12 / 2) < 1);
}

/* One micro-batch of 4096 tokens, top-2, SwiGLU: the rank's experts
 * save fc1's input (h), output (2F) and fc2's input (F) per row, 8192
 * rows with balanced routing, whatever expert_parallel is. */
static void saved_rows(void **state)
{
	struct gm_spec s = spec_mixtral();
	struct gm_mg_moe_in in = {.spec = &s, .tok = 4096, .c = 2,
				  .gated = true};
	double act[32], sum1 = 0, sum2 = 0, f, b, N = 4096 * 2;
	int n;

	(void)state;
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLTOALL;
	n = gm_mg_moe_saved(&in, act, 0, 32, &f, &b);
	for (int i = 0; i < n; i++)
		sum1 += act[i];
	s.model.experts_per_token = 1;
	n = gm_mg_moe_saved(&in, act, 0, 32, &f, &b);
	for (int i = 0; i < n; i++)
		sum2 += act[i];
	/* one more row per token: its h + 3F values, 4 bytes of
	 * probability, 8 of index */
	assert_true(fabs(sum1 - sum2 - N / 2 * ((4096 + 3 * 14336) * 2 + 4 +
						8)) < 1);
	/* the all-to-all's send and receive buffers at once */
	s.model.experts_per_token = 2;
	gm_mg_moe_saved(&in, act, 0, 32, &f, &b);
	assert_true(f == 2 * N * 4096 * 2);
	/* no skew without expert parallel; with 8 ranks of one expert each,
	 * the worst rank gets every token of the group once: 8 x 4096 rows
	 * instead of 8192 */
	assert_true(gm_mg_moe_skew(&in) == 0);
	s.parallelism.expert_parallel = 8;
	assert_true(fabs(gm_mg_moe_skew(&in) - (8 * 4096 - N) *
			 ((4096 + 3 * 14336) * 2 + 4)) < 1);
}

/*
 * The two dispatchers on Megatron-LM's ep8 MoE CI shape (gpt2 layer,
 * h 512, moe_ffn 1024, 8 experts, top-2, 4096 tokens a rank, bf16,
 * expert parallel 8): allgather keeps a global buffer of the 8 x 4096
 * gathered rows (33,554,432 bytes) and, per layer, the local-expert map,
 * the masked_select's mask and input (G x 1 x (1 + 1 + 2) bytes); its
 * forward peaks at unpermute (the experts' 8192 output rows and the
 * gathered-shape zeros), its backward at the experts' gradients or
 * unpermute's. alltoall keeps no buffer; its forward peaks at the
 * unfused GeLU's fp32 product, its backward adds the combine
 * all-to-all's receive buffer to the experts' gradients.
 */
static void dispatchers_differ(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_mg_moe_in in = {.spec = &s, .tok = 4096, .c = 2,
				  .layernorm = true, .gated = false};
	double ag[32], aa[32], sum_ag = 0, sum_aa = 0, fg, bg, fa, ba;
	double G = 8.0 * 4096, N = 8192, h = 512, F = 1024;
	int n_ag, n_aa;

	(void)state;
	s.training.framework = GM_FW_MEGATRON;
	s.model.hidden_size = 512;
	s.model.experts = 8;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 1024;
	s.parallelism.expert_parallel = 8;
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLGATHER;
	n_ag = gm_mg_moe_saved(&in, ag, 0, 32, &fg, &bg);
	assert_true(gm_mg_moe_buffer(&in) == G * h * 2);
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLTOALL;
	n_aa = gm_mg_moe_saved(&in, aa, 0, 32, &fa, &ba);
	assert_true(gm_mg_moe_buffer(&in) == 0);
	for (int i = 0; i < n_ag; i++)
		sum_ag += ag[i];
	for (int i = 0; i < n_aa; i++)
		sum_aa += aa[i];
	assert_int_equal(n_ag, n_aa + 1);
	assert_true(sum_ag - sum_aa == G * 1 * 4);
	assert_true(fg == (G + N) * h * 2);     /* 41,943,040 */
	assert_true(fa == N * F * 4);           /* 33,554,432 */
	assert_true(bg == N * 2 * (F + F + h)); /* 41,943,040 */
	assert_true(ba == N * 2 * (F + F + h) + 4096 * 2 * h * 2);
	/* without expert parallelism allgather gathers nothing: no buffer */
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLGATHER;
	s.parallelism.expert_parallel = 1;
	assert_true(gm_mg_moe_buffer(&in) == 0);
}

/* A stage of that shape: the buffer is the stage's (held from the first
 * forward by step_megatron.c), the layer's saved tensors and transients
 * are the dispatcher's, the states the same. */
static void dispatcher_stage(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_terms ag, aa;
	struct gm_mg_step mg_ag, mg_aa;
	double G = 8.0 * 4096, sum_ag = 0, sum_aa = 0;

	(void)state;
	s.training.framework = GM_FW_MEGATRON;
	s.training.optimizer = GM_OPT_ADAM;
	s.training.micro_batch_size = 4;
	s.training.sequence_length = 1024;
	s.model.hidden_size = 512;
	s.model.attention_heads = 8;
	s.model.experts = 8;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 1024;
	s.parallelism.data_parallel = 8;
	s.parallelism.expert_parallel = 8;
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLGATHER;
	stage_mg(&s, &ag, &mg_ag);
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLTOALL;
	stage_mg(&s, &aa, &mg_aa);
	assert_true(mg_ag.global_buffer == G * 512 * 2);
	assert_true(mg_aa.global_buffer == 0);
	for (int i = 0; i < mg_ag.n_act; i++)
		sum_ag += mg_ag.act[i];
	for (int i = 0; i < mg_aa.n_act; i++)
		sum_aa += mg_aa.act[i];
	assert_true(sum_ag - sum_aa == G * 4);
	assert_true(ag.weights == aa.weights);
	assert_true(ag.optimizer_states == aa.optimizer_states);
	/* tensor parallel 2 with sequence parallelism: the output layer's
	 * all-gather of the 4096 tokens x 512 (4,194,304 B) shares the
	 * buffer; with alltoall it is the buffer, with allgather the
	 * dispatcher's 4 x 2048 gathered rows (8,388,608 B) are larger */
	s.parallelism.data_parallel = 4;
	s.parallelism.tensor_parallel = 2;
	s.parallelism.sequence_parallel = true;
	s.parallelism.expert_parallel = 4;
	s.parallelism.expert_tensor_parallel = 1;
	stage_mg(&s, &aa, &mg_aa);
	assert_true(mg_aa.global_buffer == 4096.0 * 512 * 2);
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLGATHER;
	stage_mg(&s, &ag, &mg_ag);
	assert_true(mg_ag.global_buffer == 4.0 * 2048 * 512 * 2);
}

/*
 * Expert tensor parallel (--expert-tensor-parallel-size) on a small
 * Mixtral-shaped MoE: 2 layers, h 256, 4 experts of moe_ffn 512, top-2,
 * d 2 x t 2 (sequence parallel), ep 2: the rank holds 2 experts a layer,
 * fc1 2 x 512 x 256 and fc2 256 x 512 each, 393,216 parameters an
 * expert, 1,572,864 on the rank at expert tensor parallel 1, half at 2
 * (Megatron's default, the tensor-parallel size: 0 in the spec); the
 * dense tensors do not move. bf16-mixed: 2 B of weight, 4 B of fp32
 * gradient per parameter; Adam's 12 B each without the distributed
 * optimizer. With it the experts' states shard over world / (etp x ep)
 * = 2 ranks at etp 1 and 1 at etp 2: 1,572,864 x 12 / 2 =
 * 786,432 x 12 / 1 = 9,437,184 B either way.
 */
static void expert_tensor_split(void **state)
{
	struct gm_spec s = spec_llama(2, 256, 1024, 4, 4, 1024);
	struct gm_terms one, two;
	struct gm_mg_step m1, m2;
	double X1 = 1572864, X2 = 786432;

	(void)state;
	s.model.architecture = GM_ARCH_MIXTRAL;
	s.model.experts = 4;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 512;
	s.training.framework = GM_FW_MEGATRON;
	s.training.optimizer = GM_OPT_ADAM;
	s.training.precision = GM_PREC_BF16_MIXED;
	s.parallelism.data_parallel = 2;
	s.parallelism.tensor_parallel = 2;
	s.parallelism.sequence_parallel = true;
	s.parallelism.expert_parallel = 2;
	s.parallelism.expert_tensor_parallel = 1;
	stage_mg(&s, &one, &m1);
	s.parallelism.expert_tensor_parallel = 0; /* = tensor_parallel 2 */
	stage_mg(&s, &two, &m2);
	assert_true(m1.grad_buf_x[0] == X1 * 4);
	assert_true(m2.grad_buf_x[0] == X2 * 4);
	assert_true(one.parameters - two.parameters == (uint64_t)(X1 - X2));
	assert_true(one.weights - two.weights == (X1 - X2) * 2);
	assert_true(one.gradients - two.gradients == (X1 - X2) * 4);
	assert_true(one.optimizer_states - two.optimizer_states ==
		    (X1 - X2) * 12);
	/* distributed optimizer: the experts' fp32 masters (4 B) and Adam's
	 * states (8 B) over the expert data-parallel group */
	s.parallelism.distributed_optimizer = true;
	s.parallelism.expert_tensor_parallel = 1;
	stage_mg(&s, &one, &m1);
	s.parallelism.expert_tensor_parallel = 2;
	stage_mg(&s, &two, &m2);
	assert_true(m1.param_buf_x[0] == X1 * 2);
	assert_true(m2.param_buf_x[0] == X2 * 2);
	assert_true(fabs(X1 * 2 * (m1.master_frac_x + m1.state_frac_x) -
			 9437184) < 1e-6);
	assert_true(fabs(X2 * 2 * (m2.master_frac_x + m2.state_frac_x) -
			 9437184) < 1e-6);
	assert_true(fabs(one.optimizer_states - two.optimizer_states) < 1e-3);
	assert_true(one.weights - two.weights == (X1 - X2) * 2);
}

/*
 * What a rank's experts save at expert tensor parallel 2 (Mixtral-8x7B's
 * layer, 4096 tokens a rank, top-2, alltoall): the all-to-all's 8192 rows
 * all-gathered over the 2 expert tensor ranks, N = 16,384 rows, each
 * with fc1's whole-hidden input (4096) but only this rank's half of
 * fc1's output (2 x 7168) and fc2's input (7168), and a 4 B probability:
 * 16,384 x 51,204 B against 8192 x 94,212 B at 1, 8192 x 8196 B more.
 * The forward transient is the gathered and the chunk-sorted rows, 2 x
 * 16,384 x 4096 x 2 B; backward the experts' gradients and the combine
 * all-to-all's 8192 rows.
 */
static void expert_tensor_saved(void **state)
{
	struct gm_spec s = spec_mixtral();
	struct gm_mg_moe_in in = {.spec = &s, .tok = 4096, .c = 2,
				  .gated = true};
	double act[32], sum1 = 0, sum2 = 0, f, b;
	int n;

	(void)state;
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLTOALL;
	s.parallelism.expert_tensor_parallel = 1;
	n = gm_mg_moe_saved(&in, act, 0, 32, &f, &b);
	for (int i = 0; i < n; i++)
		sum1 += act[i];
	s.parallelism.expert_tensor_parallel = 2;
	n = gm_mg_moe_saved(&in, act, 0, 32, &f, &b);
	for (int i = 0; i < n; i++)
		sum2 += act[i];
	assert_true(sum2 - sum1 == 8192.0 * 8196);
	assert_true(f == 2 * 16384.0 * 4096 * 2);
	assert_true(b == 16384.0 * 2 * (7168 + 14336 + 4096) +
			 8192.0 * 4096 * 2);
	/* no skew without expert parallel: every row is the rank's */
	assert_true(gm_mg_moe_skew(&in) == 0);
	/* ep 4 (2 local experts): the worst rank gets each of the group's
	 * 4096 x 2 x 4 tokens twice, 65,536 rows instead of 16,384, of
	 * (4096 + 14,336 + 7168) x 2 + 4 B */
	s.parallelism.expert_parallel = 4;
	assert_true(gm_mg_moe_skew(&in) == (65536.0 - 16384) * 51204);
	/* allgather gathers over expert tensor x expert parallel: 4096 x 2
	 * x 4 rows of hidden into the global buffer; at ep 1 still over
	 * the 2 expert tensor ranks (token_dispatch gathers when either is
	 * above 1) */
	s.parallelism.moe_token_dispatcher_type = GM_MOE_DISPATCH_ALLGATHER;
	assert_true(gm_mg_moe_buffer(&in) == 32768.0 * 4096 * 2);
	s.parallelism.expert_parallel = 1;
	assert_true(gm_mg_moe_buffer(&in) == 8192.0 * 4096 * 2);
	s.parallelism.expert_tensor_parallel = 1;
	assert_true(gm_mg_moe_buffer(&in) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mixtral_count),
		cmocka_unit_test(gpt2_experts_count),
		cmocka_unit_test(gpt2_no_bias_count),
		cmocka_unit_test(experts_split),
		cmocka_unit_test(saved_rows),
		cmocka_unit_test(dispatchers_differ),
		cmocka_unit_test(dispatcher_stage),
		cmocka_unit_test(expert_tensor_split),
		cmocka_unit_test(expert_tensor_saved),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
