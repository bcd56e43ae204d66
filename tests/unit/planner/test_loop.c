/* Unit tests for planner/loop.c and the training loop of planner/step.c:
 * when transformers builds past_key_values in training, what the block
 * program hands to the cache, and what a loop keeping `outputs` (or
 * Lightning's zero_grad order) adds to the step's live bytes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/family.h"
#include "block.h"
#include "error.h"
#include "loop.h"
#include "model.h"
#include "spec.h"
#include "specs.h"
#include "step.h"

static const struct gm_plan_gpu h200 = {
	.name = "NVIDIA H200", .capacity_bytes = 143771ULL * 1024 * 1024,
	.context_bytes = 760ULL * 1024 * 1024, .sm_major = 9};

/* transformers 5.17: use_cache false never builds the cache; true and
 * auto (the config's use_cache=True) do, unless gradient checkpointing
 * turns it off (GradientCheckpointingLayer.__call__,
 * merge_with_config_defaults); selective checkpointing here wraps only
 * the attention function (tools/measure/selective.py), not the model's
 * gradient_checkpointing, so the cache stays; encoders and Megatron-LM's
 * GPTModel have none; inference is not the training loop's. */
static void use_cache_rules(void **state)
{
	static const struct {
		enum gm_use_cache u;
		enum gm_ckpt ck;
		bool want;
	} row[] = {
		{GM_CACHE_FALSE, GM_CKPT_NONE, false},
		{GM_CACHE_TRUE, GM_CKPT_NONE, true},
		{GM_CACHE_AUTO, GM_CKPT_NONE, true},
		{GM_CACHE_TRUE, GM_CKPT_FULL, false},
		{GM_CACHE_AUTO, GM_CKPT_FULL, false},
		{GM_CACHE_TRUE, GM_CKPT_SELECTIVE, true},
		{GM_CACHE_FALSE, GM_CKPT_SELECTIVE, false},
	};
	struct gm_spec s;

	(void)state;
	for (size_t i = 0; i < sizeof(row) / sizeof(row[0]); i++) {
		s = spec_llama(2, 256, 512, 4, 4, 1000);
		s.training.use_cache = row[i].u;
		s.training.activation_checkpointing = row[i].ck;
		assert_int_equal(gm_loop_kv_cache(&s), row[i].want);
	}
	s = spec_gpt2();
	s.training.use_cache = GM_CACHE_AUTO;
	assert_true(gm_loop_kv_cache(&s));
	s.model.head = GM_HEAD_CLASSIFICATION; /* the base model builds it */
	assert_true(gm_loop_kv_cache(&s));
	s = spec_bert(GM_HEAD_MASKED_LM);
	s.training.use_cache = GM_CACHE_TRUE;
	assert_false(gm_loop_kv_cache(&s));
	s = spec_llama(2, 256, 512, 4, 4, 1000);
	s.training.use_cache = GM_CACHE_AUTO;
	s.training.framework = GM_FW_MEGATRON;
	assert_false(gm_loop_kv_cache(&s));
	s.training.framework = GM_FW_PYTORCH;
	s.task = GM_TASK_INFERENCE;
	assert_false(gm_loop_kv_cache(&s));
}

/* The loop table: a row per training.loop value, each with its source;
 * Lightning's zero_grad after the next training_step is `lightning`. */
static void loop_table(void **state)
{
	const struct gm_loop_rule *t = gm_loop_rule(GM_LOOP_TRAINER);
	const struct gm_loop_rule *k = gm_loop_rule(GM_LOOP_KEEP_OUTPUTS);
	const struct gm_loop_rule *l = gm_loop_rule(GM_LOOP_LIGHTNING);

	(void)state;
	assert_string_equal(t->name, gm_loop_name(GM_LOOP_TRAINER));
	assert_string_equal(k->name, gm_loop_name(GM_LOOP_KEEP_OUTPUTS));
	assert_string_equal(l->name, gm_loop_name(GM_LOOP_LIGHTNING));
	assert_string_equal(l->name, "lightning");
	assert_false(t->keep_outputs);
	assert_true(k->keep_outputs);
	assert_false(t->grads_to_next_forward || k->grads_to_next_forward);
	assert_true(l->grads_to_next_forward);
	assert_false(l->keep_outputs);
	assert_non_null(t->source);
	assert_non_null(k->source);
	assert_non_null(l->source);
}

/* The ALLOC bytes of the ids the program HOLDs, in order; their count. */
static int held(const struct gm_step_block *p, double *bytes)
{
	int n = 0;

	for (int i = 0; i < p->n_fwd; i++) {
		if (p->op[i].op != GM_BOP_HOLD)
			continue;
		for (int j = i; j-- > 0;)
			if (p->op[j].op == GM_BOP_ALLOC &&
			    p->op[j].id == p->op[i].id) {
				bytes[n] = p->op[j].bytes;
				assert_int_equal(p->op[j].kind, GM_SK_KV);
				break;
			}
		n++;
	}
	return n;
}

/* DynamicLayer.update's copies in the block program: K and V in the
 * keys' dtype. Llama under autocast: the rotary keys are fp32 (cos, sin
 * in the fp32 residual dtype promote), so both are fp32 (the H200 trace
 * of native-keep-llama-1.1b-bf16mixed: 8 MiB each for 4 x 2048 tokens x
 * 256 KV width); 16-bit weights: both 16-bit. GPT-2 has no rotary: its
 * c_attn output's dtype. Without the cache: no HOLD, and the program has
 * two allocations fewer. */
static void block_holds_cache(void **state)
{
	struct gm_step_shape sh = {
		.fam = gm_family(GM_ARCH_LLAMA), .autocast = true,
		.tok = 8, .seq = 8, .hidden = 64, .q = 64, .kv = 32,
		.ffn = 128, .heads = 4, .head_dim = 16, .c = 2, .r = 4,
		.kv_cache = true};
	static struct gm_step_block p, q;
	double b[4];
	int na = 0, nb = 0;

	(void)state;
	assert_int_equal(gm_block_build(&sh, &p), 0);
	assert_int_equal(held(&p, b), 2);
	assert_true(b[0] == 8 * 32 * 4 && b[1] == 8 * 32 * 4);
	sh.kv_cache = false;
	assert_int_equal(gm_block_build(&sh, &q), 0);
	assert_int_equal(held(&q, b), 0);
	for (int i = 0; i < p.n_fwd; i++)
		na += p.op[i].op == GM_BOP_ALLOC;
	for (int i = 0; i < q.n_fwd; i++)
		nb += q.op[i].op == GM_BOP_ALLOC;
	/* + K, V copies, + the value's cast for sdpa (the fp32 copy) */
	assert_int_equal(na, nb + 3);
	sh.kv_cache = true;
	sh.autocast = false;
	sh.r = 2;
	assert_int_equal(gm_block_build(&sh, &p), 0);
	assert_int_equal(held(&p, b), 2);
	assert_true(b[0] == 8 * 32 * 2 && b[1] == 8 * 32 * 2);
	sh = (struct gm_step_shape){
		.fam = gm_family(GM_ARCH_GPT2), .autocast = true, .dropout = true,
		.tok = 8, .seq = 8, .hidden = 64, .q = 64, .kv = 64,
		.ffn = 256, .heads = 4, .head_dim = 16, .c = 2, .r = 4,
		.kv_cache = true};
	assert_int_equal(gm_block_build(&sh, &p), 0);
	assert_int_equal(held(&p, b), 2);
	assert_true(b[0] == 8 * 64 * 2 && b[1] == 8 * 64 * 2);
}

static struct gm_plan plan_of(const struct gm_spec *s)
{
	static struct gm_plan p;
	struct gm_diag d;

	assert_int_equal(gm_plan(s, &h200, NULL, &p, &d), 0);
	return p;
}

/* A Llama whose peak is the loss's backward (logits-heavy), autocast. */
static struct gm_spec small_llama(void)
{
	struct gm_spec s = spec_llama(4, 512, 1408, 8, 4, 32000);

	s.training.micro_batch_size = 4;
	s.training.sequence_length = 1024;
	s.training.use_cache = GM_CACHE_FALSE;
	return s;
}

/*
 * keep-outputs: the step's peak (the loss's backward) also holds the
 * forward's outputs: its 16-bit logits (tok x vocab x 2 bytes, as the
 * H200 runs show: native-keep-llama-1.1b-nocache peaks 0.488 GiB above
 * native-drop-llama-1.1b-bf16mixed, 4 x 2048 x 32000 x 2 bytes) and,
 * with the cache, every layer's fp32 K and V (a further 22 x 16 MiB for
 * native-keep-llama-1.1b-bf16mixed). The trainer loop's cache dies with
 * the forward: the same peak as without it here.
 */
static void keep_outputs_peak(void **state)
{
	struct gm_spec s = small_llama();
	double tok = 4.0 * 1024, kv = 512.0 / 8 * 4;
	double base, logits, cache, trainer_cache;

	(void)state;
	base = plan_of(&s).per_gpu.peak_requested;
	s.training.use_cache = GM_CACHE_AUTO;
	trainer_cache = plan_of(&s).per_gpu.peak_requested;
	assert_true(plan_of(&s).per_gpu.kv_cache == 4 * 2 * tok * kv * 4);
	s.training.loop = GM_LOOP_KEEP_OUTPUTS;
	cache = plan_of(&s).per_gpu.peak_requested;
	assert_true(plan_of(&s).per_gpu.at_peak.kv_cache ==
		    4 * 2 * tok * kv * 4);
	/* the closed-form term: the last forward's cache and this one's
	 * while it runs; the kept logits on top of the loss's 12 B */
	assert_true(plan_of(&s).per_gpu.kv_cache == 2 * 4 * 2 * tok * kv * 4);
	assert_true(plan_of(&s).per_gpu.logits == tok * 32000 * (12 + 2));
	s.training.use_cache = GM_CACHE_FALSE;
	logits = plan_of(&s).per_gpu.peak_requested;
	assert_true(fabs(trainer_cache - base) < 1);
	assert_true(fabs(logits - base - tok * 32000 * 2) < 1);
	assert_true(fabs(cache - logits - 4 * 2 * tok * kv * 4) < 1);
	/* checkpointing turns the cache off: only the logits stay */
	s.training.use_cache = GM_CACHE_TRUE;
	s.training.activation_checkpointing = GM_CKPT_FULL;
	logits = plan_of(&s).per_gpu.peak_requested;
	s.training.loop = GM_LOOP_TRAINER;
	base = plan_of(&s).per_gpu.peak_requested;
	assert_true(fabs(logits - base - tok * 32000 * 2) < 1);
}

/* 16-bit weights: the cache's K and V are the tensors sdpa saved (no
 * copies), so the trainer loop's cache costs nothing at all, and kept
 * outputs hold them only past each block's backward: not at the peak
 * (the loss's backward, before any block's), but through the optimizer
 * step (its phase's peak: + the 16-bit K and V of every layer). */
static void keep_outputs_true16(void **state)
{
	struct gm_spec s = small_llama();
	double tok = 4.0 * 1024, kv = 512.0 / 8 * 4;
	struct gm_terms base, cache, keep, keep_cache;

	(void)state;
	s.training.precision = GM_PREC_BF16_TRUE;
	base = plan_of(&s).per_gpu;
	s.training.use_cache = GM_CACHE_TRUE;
	cache = plan_of(&s).per_gpu;
	s.training.loop = GM_LOOP_KEEP_OUTPUTS;
	keep_cache = plan_of(&s).per_gpu;
	s.training.use_cache = GM_CACHE_FALSE;
	keep = plan_of(&s).per_gpu;
	assert_true(fabs(cache.peak_requested - base.peak_requested) < 1);
	assert_true(fabs(cache.phase_allocated[1] -
			 base.phase_allocated[1]) < 1);
	assert_true(fabs(keep_cache.peak_requested -
			 keep.peak_requested) < 1);
	assert_true(fabs(keep_cache.phase_allocated[1] -
			 keep.phase_allocated[1] - 4 * 2 * tok * kv * 2) < 1);
	assert_true(fabs(keep.phase_allocated[1] - base.phase_allocated[1] -
			 tok * 32000 * 2) < 1);
}

/* A family without a block program (Mixtral's analytic block): the
 * cache is kv_block bytes per K and V per layer, kept the same way. */
static void keep_outputs_analytic(void **state)
{
	struct gm_spec s = small_llama();
	double tok = 4.0 * 1024, kv = 512.0 / 8 * 4;
	double keep, keep_cache;

	(void)state;
	s.model.architecture = GM_ARCH_MIXTRAL;
	s.model.experts = 4;
	s.model.experts_per_token = 2;
	s.model.moe_ffn_hidden_size = 1408;
	s.training.loop = GM_LOOP_KEEP_OUTPUTS;
	keep = plan_of(&s).per_gpu.peak_requested;
	s.training.use_cache = GM_CACHE_AUTO;
	keep_cache = plan_of(&s).per_gpu.peak_requested;
	assert_true(fabs(keep_cache - keep - 4 * 2 * tok * kv * 4) < 1);
}

/* Every allocation of a sequence is freed once (a sink that checks). */
struct chk {
	unsigned char live[1 << 16];
	double bytes[1 << 16];
	double now, fwd_peak;
	int bad;
	enum gm_step_phase ph;
	unsigned step;
};

static int k_alloc(void *ctx, uint32_t id, uint64_t bytes,
		   enum gm_step_kind kind)
{
	struct chk *c = ctx;

	(void)kind;
	if (id >= (1u << 16) || c->live[id]) {
		c->bad++;
		return GM_EINVAL;
	}
	c->live[id] = 1;
	c->bytes[id] = (double)bytes;
	c->now += (double)bytes;
	if (c->ph == GM_SP_FORWARD && c->step == 2 && c->now > c->fwd_peak)
		c->fwd_peak = c->now;
	return 0;
}

static int k_free(void *ctx, uint32_t id)
{
	struct chk *c = ctx;

	if (id >= (1u << 16) || !c->live[id]) {
		c->bad++;
		return GM_ENOTFOUND;
	}
	c->live[id] = 0;
	c->now -= c->bytes[id];
	return 0;
}

static void k_phase(void *ctx, enum gm_step_phase ph)
{
	((struct chk *)ctx)->ph = ph;
}

static void k_step(void *ctx, unsigned s)
{
	((struct chk *)ctx)->step = s;
}

static struct gm_step tiny_step(void)
{
	struct gm_step st = {
		.training = true, .steps = 3, .layers = 3, .ga = 1,
		.in_flight = 1, .micro_max = 1, .n_act = 2,
		.act = {1000, 3000}, .emb_saved = 100, .head_saved = 200,
		.trans = 5000, .logits_held = 700, .logits_piece = 1400,
		.workspace = 4096};

	st.n_param = 3;
	st.p[0] = (struct gm_step_param){.where = GM_STEP_EMBED,
		.weight = 400, .grad = 400, .opt_tmp = 400, .n_state = 2,
		.state = {400, 400}};
	st.p[1] = (struct gm_step_param){.where = GM_STEP_LAYER,
		.weight = 800, .grad = 800, .opt_tmp = 800, .n_state = 2,
		.state = {800, 800}};
	st.p[2] = (struct gm_step_param){.where = GM_STEP_HEAD,
		.grad_at_loss = true, .weight = 400, .grad = 400,
		.opt_tmp = 400, .n_state = 2, .state = {400, 400}};
	return st;
}

static double fwd_peak(const struct gm_step *st)
{
	static struct chk c;
	struct gm_step_sink sk = {.ctx = &c, .alloc = k_alloc,
				  .free = k_free, .phase = k_phase,
				  .step = k_step};

	memset(&c, 0, sizeof(c));
	assert_int_equal(gm_step_emit(st, &sk), 0);
	assert_int_equal(c.bad, 0);
	assert_true(c.now == 0); /* all freed, once */
	return c.fwd_peak;
}

/* Lightning's closure (training_step, zero_grad, backward): the last
 * step's gradients (400 + 3 x 800 + 400 bytes here) are live through the
 * next forward; the analytic cache without copies (16-bit weights) adds
 * its K and V only past the backward, under keep_outputs. */
static void step_lightning_and_analytic(void **state)
{
	struct gm_step st = tiny_step();
	double base = fwd_peak(&st);

	(void)state;
	st.grads_to_next_forward = true;
	assert_true(fwd_peak(&st) == base + 400 + 3 * 800 + 400);
	st = tiny_step();
	st.kv_cache = true;
	st.kv_block = 64;
	assert_true(fwd_peak(&st) == base);           /* trainer, aliases */
	st.kv_copies = true;
	assert_true(fwd_peak(&st) == base + 3 * 2 * 64);
	st.keep_outputs = true;
	st.kv_copies = false;               /* the last forward's K and V */
	assert_true(fwd_peak(&st) == base + 3 * 2 * 64);
}

/* training.loop lightning through the plan, TinyLlama-1.1B at 4 x 2048
 * tokens (lightning-llama-1.1b-bf16mixed's shape): the step's fp32
 * gradients (4 B per parameter) live through the next forward and are
 * all live at the peak, which the trainer loop's plan has without them;
 * the recipe names the loop. */
static void lightning_plan(void **state)
{
	struct gm_spec s = spec_llama(22, 2048, 5632, 32, 4, 32000);
	struct gm_plan p;
	double base;

	(void)state;
	s.training.micro_batch_size = 4;
	s.training.sequence_length = 2048;
	s.training.use_cache = GM_CACHE_FALSE;
	p = plan_of(&s);
	base = p.per_gpu.peak_allocated;
	assert_true(p.per_gpu.at_peak.gradients == 0);
	s.training.loop = GM_LOOP_LIGHTNING;
	p = plan_of(&s);
	assert_true(p.per_gpu.gradients == 4.0 * 1100048384);
	assert_true(p.per_gpu.at_peak.gradients == p.per_gpu.gradients);
	assert_true(p.per_gpu.peak_allocated > base);
	assert_true(p.per_gpu.peak_allocated <= base + p.per_gpu.gradients);
	assert_non_null(strstr(p.recipe, "-lightning"));
}

/*
 * DeepSpeed's engine calls the model as it is (engine(**batch).loss: the
 * outputs die with the forward, as the trainer loop's), so with the
 * config's use_cache=True the forward builds past_key_values: in a bf16
 * GPT-2 the attention saves the two cache copies while the fused c_attn
 * output stays (the query is a view of it), so the peak grows by every
 * layer's K and V, 2 x 2 x tok x hidden x 2 B, as the H200 trace of
 * ds-zero3-gpt2-355m-bf16 shows (48 more 16 MiB tensors, allocated
 * -3.3% -> -0.02% once planned).
 */
static void deepspeed_engine_cache(void **state)
{
	char dir[] = "/tmp/gm-loop-XXXXXX", path[96];
	const double kv = 2 * 2 * 512.0 * 256 * 2;
	double peak[2];
	struct gm_spec s;
	struct gm_diag d;
	FILE *f;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(path, sizeof(path), "%s/ds.json", dir);
	assert_non_null(f = fopen(path, "w"));
	fputs("{\"bf16\": {\"enabled\": true}, \"zero_optimization\": "
	      "{\"stage\": 3}}\n", f);
	fclose(f);
	for (int u = 0; u < 2; u++) {
		snprintf(path, sizeof(path), "%s/g.yaml", dir);
		assert_non_null(f = fopen(path, "w"));
		fprintf(f, "model:\n  architecture: gpt2\n  layers: 2\n"
			"  hidden_size: 256\n  attention_heads: 4\n"
			"  vocab_size: 1000\n  max_position_embeddings: 256\n"
			"training:\n  deepspeed_config: ds.json\n"
			"  micro_batch_size: 2\n  sequence_length: 256\n"
			"  use_cache: %s\nparallelism:\n  built_whole: true\n",
			u ? "auto" : "false");
		fclose(f);
		assert_int_equal(gm_spec_load(&s, path, NULL, 0, &d), 0);
		assert_int_equal(s.training.framework, GM_FW_DEEPSPEED);
		assert_int_equal(gm_spec_check_modelled(&s, &d), 0);
		peak[u] = plan_of(&s).per_gpu.peak_allocated;
		assert_true(plan_of(&s).per_gpu.at_peak.kv_cache == u * kv);
	}
	assert_true(peak[1] - peak[0] == kv);
	remove(path);
	snprintf(path, sizeof(path), "%s/ds.json", dir);
	remove(path);
	rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(use_cache_rules),
		cmocka_unit_test(loop_table),
		cmocka_unit_test(block_holds_cache),
		cmocka_unit_test(keep_outputs_peak),
		cmocka_unit_test(keep_outputs_true16),
		cmocka_unit_test(keep_outputs_analytic),
		cmocka_unit_test(step_lightning_and_analytic),
		cmocka_unit_test(lightning_plan),
		cmocka_unit_test(deepspeed_engine_cache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
