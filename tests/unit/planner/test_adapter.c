/*
 * test_adapter.c - PEFT LoRA in the training step (planner/step_adapter.h,
 * block.c's frozen linear and LoRA branch): which modules are targets,
 * the trained parameters against PEFT's own count of the H200 runs, what
 * a LoRA block saves for backward by first principles, and the plan's
 * model-state rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "arch/family.h"
#include "block.h"
#include "error.h"
#include "model.h"
#include "params.h"
#include "recipe.h"
#include "specs.h"
#include "step_adapter.h"

static const struct gm_plan_gpu h200 = {
	.name = "NVIDIA H200", .capacity_bytes = 143771ULL * 1024 * 1024,
	.context_bytes = 760ULL * 1024 * 1024, .sm_major = 9};

static struct gm_spec_training lora(uint64_t r, const char *t0,
				    const char *t1)
{
	struct gm_spec_training t = {.adapter = GM_ADAPTER_LORA,
				     .lora_rank = r};

	strcpy(t.lora_targets[t.n_lora_targets++], t0);
	if (t1)
		strcpy(t.lora_targets[t.n_lora_targets++], t1);
	return t;
}

/* PEFT's matching (tuners_utils.py check_target_module_exists): a name
 * in the list, or every linear with all-linear; nothing without an
 * adapter. */
static void targets(void **state)
{
	struct gm_spec_training t = lora(16, "q_proj", "v_proj");

	(void)state;
	assert_true(gm_adapter_targets(&t, "q_proj"));
	assert_true(gm_adapter_targets(&t, "v_proj"));
	assert_false(gm_adapter_targets(&t, "k_proj"));
	assert_false(gm_adapter_targets(&t, NULL));
	t = lora(16, "all-linear", NULL);
	assert_true(gm_adapter_targets(&t, "down_proj"));
	t.adapter = GM_ADAPTER_NONE;
	assert_false(gm_adapter_targets(&t, "down_proj"));
}

static double layer_params(struct gm_spec s, struct gm_spec_training t)
{
	struct gm_param_layout l;
	struct gm_diag d;

	assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
	return gm_adapter_layer_params(&l, &t) * (double)s.model.layers;
}

/* LoRA trains r (in + out) per target linear (LoraLayer.update_layer:
 * lora_A r x in, lora_B out x r): PEFT's own count of the H200 runs
 * (trainable_parameters, get_nb_trainable_parameters, in
 * tests/data/calibration/pending/loops/measured-h200.json). */
static void peft_counts(void **state)
{
	struct gm_spec tiny = spec_llama(22, 2048, 5632, 32, 4, 32000);
	struct gm_spec l7b = spec_llama(32, 4096, 11008, 32, 32, 32000);
	struct gm_spec g = spec_gpt2();

	(void)state;
	/* lora-llama-1.1b-r16-qv: 22 x 16 x ((2048 + 2048) + (2048 + 256)) */
	assert_true(layer_params(tiny, lora(16, "q_proj", "v_proj")) ==
		    2252800);
	/* lora-llama-1.1b-r64-alllinear */
	assert_true(layer_params(tiny, lora(64, "all-linear", NULL)) ==
		    50462720);
	/* qlora-llama-1.1b-r16-alllinear-fullckpt */
	assert_true(layer_params(tiny, lora(16, "all-linear", NULL)) ==
		    12615680);
	/* lora-llama-7b-r16-alllinear */
	assert_true(layer_params(l7b, lora(16, "all-linear", NULL)) ==
		    39976960);
	/* GPT-2: c_proj names both the attention's and the MLP's Conv1D
	 * (768 x 768 and 3072 x 768) */
	assert_true(layer_params(g, lora(8, "c_proj", NULL)) ==
		    12.0 * 8 * (768 + 768 + 3072 + 768));
}

/* 4 tokens, hidden 64, 4 heads of 16 (kv 64), ffn 128; a bf16 base under
 * autocast (compute and residual 2 bytes), LoRA r 8 on q_proj, v_proj. */
static struct gm_step_shape shape(const struct gm_spec_training *t)
{
	struct gm_step_shape s = {
		.fam = gm_family(GM_ARCH_LLAMA), .autocast = true,
		.tok = 4, .seq = 4, .hidden = 64, .q = 64, .kv = 64,
		.ffn = 128, .heads = 4, .head_dim = 16, .c = 2, .r = 2,
		.adapter = t};

	return s;
}

/* Bytes the forward leaves saved for backward (kind activations, the
 * block's output aside). */
static double saved(const struct gm_step_block *p)
{
	double b = 0;

	for (int i = 0; i < p->n_fwd; i++)
		if (p->op[i].op == GM_BOP_ALLOC &&
		    p->op[i].kind == GM_SK_ACT && p->op[i].id != GM_BLK_OUT)
			b += p->op[i].bytes;
	return b;
}

/*
 * What a LoRA Llama block keeps, per token, by the derivatives (a frozen
 * linear saves nothing of its input; tensors of 8 bytes a token or less
 * are left out, block.c): each RMSNorm its fp32 input (4 h: pow and
 * x * rsqrt; the frozen weight needs no normalised copy); each LoRA
 * lora_A's 16-bit input cast (2 h) and lora_B's input (2 r); sdpa q, k,
 * v, its output (2 (q + kv + kv + q)) and the fp32 logsumexp (4 heads);
 * the MLP gate's output (SiLU), SiLU's and up's outputs (the product):
 * 3 x 2 f. Full fine-tuning keeps more (every linear's input).
 */
static void block_saves(void **state)
{
	struct gm_spec_training t = lora(8, "q_proj", "v_proj");
	struct gm_step_shape s = shape(&t), full = s;
	struct gm_step_block p, q;
	double per_tok = 2 * 4 * 64 + 2 * (2 * 64 + 2 * 8) +
			 2 * (64 + 64 + 64 + 64) + 4 * 4 + 3 * 2 * 128;

	(void)state;
	assert_int_equal(gm_block_build(&s, &p), 0);
	assert_true(saved(&p) == per_tok * 4);
	assert_int_equal(p.n_lora, 2);
	assert_true(p.lora[0].in == 64 && p.lora[0].out == 64);
	/* every weight trained: more saved, no adapter */
	full.adapter = NULL;
	assert_int_equal(gm_block_build(&full, &q), 0);
	assert_int_equal(q.n_lora, 0);
	assert_true(saved(&q) > saved(&p));
	/* all-linear: LoRA on each of the 7 linears */
	t = lora(8, "all-linear", NULL);
	assert_int_equal(gm_block_build(&s, &p), 0);
	assert_int_equal(p.n_lora, 7);
}

/* The first block under a frozen embedding: its input does not require
 * grad, so input_layernorm records nothing (its fp32 copy, 4 h a token,
 * is not kept) and no gradient of the input is made. */
static void first_block(void **state)
{
	struct gm_spec_training t = lora(8, "q_proj", "v_proj");
	struct gm_step_shape s = shape(&t);
	struct gm_step_block p, q;

	(void)state;
	assert_int_equal(gm_block_build(&s, &p), 0);
	s.in_no_grad = true;
	assert_int_equal(gm_block_build(&s, &q), 0);
	assert_true(saved(&p) - saved(&q) == 4 * 64 * 4);
	assert_true(q.n_ids <= p.n_ids);
	assert_int_equal(q.gin_id, GM_BLK_GIN);
	for (int i = q.n_fwd; i < q.n; i++)
		assert_false(q.op[i].op == GM_BOP_ALLOC &&
			     q.op[i].id == GM_BLK_GIN);
}

/*
 * QLoRA's block (fp32 residual stream after prepare_model_for_kbit_
 * training, bf16 compute under autocast): a Linear4bit saves nothing of
 * its input (MatMul4Bit keeps the packed weight only) and dequantizes
 * its whole weight (in x out, 16-bit) for the matmul. What is kept, per
 * token: each LoRA's lora_A input cast (2 h) and lora_A's output (2 r);
 * sdpa's 16-bit casts of q, k, v, its output and logsumexp; the second
 * RMSNorm's fp32 input (4 h; the first one's is the block input); the
 * MLP's gate, SiLU and up outputs in fp32 (3 x 4 f). PEFT's defensive
 * clone of the fp32 output is made only where it wraps the Linear4bit
 * (q_proj, v_proj here): the MLP's f-wide fp32 tensors are gate's cast
 * back, SiLU, up's cast back and their product, as in the H200 trace of
 * qlora-qwen3-0.6b-r16 (no clone of gate's or up's).
 */
static void qlora_block(void **state)
{
	struct gm_spec_training t = lora(8, "q_proj", "v_proj");
	struct gm_step_shape s = shape(&t);
	struct gm_step_block p;
	double per_tok = 2 * (2 * 64 + 2 * 8) + 2 * (64 + 64 + 64 + 64) +
			 4 * 4 + 4 * 64 + 3 * 4 * 128;
	int dq[2] = {0, 0};

	(void)state;
	t.adapter = GM_ADAPTER_QLORA;
	s.r = 4;
	s.tok = s.seq = 2048; /* past 1536 rows: the dequantized copy */
	assert_int_equal(gm_block_build(&s, &p), 0);
	assert_true(saved(&p) == per_tok * 2048);
	assert_int_equal(p.n_lora, 2);
	for (int i = 0; i < p.n_fwd; i++) {
		if (p.op[i].op != GM_BOP_ALLOC)
			continue;
		dq[0] += p.op[i].bytes == 64 * 64 * 2;
		dq[1] += p.op[i].bytes == 64 * 128 * 2;
	}
	assert_int_equal(dq[0], 4);  /* q, k, v, o */
	assert_int_equal(dq[1], 3);  /* gate, up, down */
	dq[0] = 0;
	for (int i = 0; i < p.n_fwd; i++)
		dq[0] += p.op[i].op == GM_BOP_ALLOC &&
			 p.op[i].bytes == 2048.0 * 128 * 4;
	assert_int_equal(dq[0], 4);
	/* 4 rows: bitsandbytes' own kernel, no copy; the same saves */
	s.tok = s.seq = 4;
	assert_int_equal(gm_block_build(&s, &p), 0);
	assert_true(saved(&p) == per_tok * 4);
	dq[0] = 0;
	for (int i = 0; i < p.n_fwd; i++)
		dq[0] += p.op[i].op == GM_BOP_ALLOC &&
			 p.op[i].bytes == 64 * 64 * 2;
	assert_int_equal(dq[0], 0);
	s.ckpt = GM_STEP_CKPT_FULL;
	s.reentrant = true;
	assert_int_equal(gm_block_build(&s, &p), 0);
	assert_true(p.reentrant);
}

/* The plan's model states: the base in bf16 without gradients or
 * states, the adapters' fp32 weights, gradients and AdamW's two fp32
 * states (PeftModel's autocast_adapter_dtype); the recipe named. */
static void plan_states(void **state)
{
	struct gm_spec s = spec_llama(22, 2048, 5632, 32, 4, 32000);
	struct gm_plan p;
	struct gm_diag d;
	double A = 2252800, P;

	(void)state;
	s.training.micro_batch_size = 1;
	s.training.sequence_length = 512;
	s.training.adapter = GM_ADAPTER_LORA;
	s.training.lora_rank = 16;
	s.training.n_lora_targets = 2;
	strcpy(s.training.lora_targets[0], "q_proj");
	strcpy(s.training.lora_targets[1], "v_proj");
	assert_int_equal(gm_plan(&s, &h200, NULL, &p, &d), 0);
	P = (double)p.parameters;
	assert_true(P == 1100048384);
	assert_true(p.per_gpu.weights == 2 * P + 4 * A);
	assert_true(p.per_gpu.gradients == 4 * A);
	assert_true(p.per_gpu.optimizer_states == 8 * A);
	assert_string_equal(p.recipe, "pytorch-lora-bf16-mixed");
	assert_true(p.init_peak == p.per_gpu.weights);
	/* the replay's peak holds the weights, the adapters' states and
	 * the saved tensors: far below full fine-tuning's 16 B per weight */
	assert_true(p.per_gpu.peak_allocated > p.per_gpu.weights);
	assert_true(p.per_gpu.peak_allocated < 8 * P);
	/* QLoRA: the block linears in NF4 with double quantization, the
	 * rest in fp32 (prepare_model_for_kbit_training) */
	{
		struct gm_param_layout l;
		double nf4 = 0, q = 0;
		assert_int_equal(gm_params_layout(&s.model, &l, &d), 0);
		for (int i = 0; i < l.n; i++)
			if ((l.t[i].flags & GM_PT_LAYER) &&
			    (l.t[i].flags & GM_PT_MATMUL)) {
				nf4 += 22 * gm_nf4_bytes(l.t[i].rows *
							 l.t[i].cols);
				q += 22.0 * l.t[i].rows * l.t[i].cols;
			}
		s.training.adapter = GM_ADAPTER_QLORA;
		assert_int_equal(gm_plan(&s, &h200, NULL, &p, &d), 0);
		assert_true(fabs(p.per_gpu.weights -
				 (4 * (P - q) + nf4 + 4 * A)) < 1);
		assert_string_equal(p.recipe, "pytorch-qlora-nf4-bf16-mixed");
		/* about 0.52 B per quantized weight */
		assert_true(nf4 / q > 0.51 && nf4 / q < 0.52);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(targets),
		cmocka_unit_test(peft_counts),
		cmocka_unit_test(block_saves),
		cmocka_unit_test(first_block),
		cmocka_unit_test(qlora_block),
		cmocka_unit_test(plan_states),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
