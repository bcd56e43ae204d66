/* Unit tests for planner/optstep.c and its use by the step emitter and
 * the plan: the temporaries one torch.optim step makes under each
 * implementation (training.optimizer_implementation), from PyTorch
 * 2.11.0 torch/optim/adam.py: foreach one state-sized list, the for-loop
 * the last tensor's quotient and this one's sqrt and quotient, fused
 * none. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "error.h"
#include "model.h"
#include "optstep.h"
#include "specs.h"
#include "step.h"

static const struct gm_plan_gpu h200 = {
	.name = "NVIDIA H200", .capacity_bytes = 143771ULL * 1024 * 1024,
	.context_bytes = 760ULL * 1024 * 1024, .sm_major = 9};

/* TinyLlama-1.1B's trainable tensors in named_parameters() order, fp32
 * (4 B per element), into b; their count. */
static size_t tinyllama(double *b)
{
	static const double layer[] = {
		2048.0 * 2048, 256.0 * 2048, 256.0 * 2048, 2048.0 * 2048,
		5632.0 * 2048, 5632.0 * 2048, 2048.0 * 5632, 2048, 2048};
	size_t n = 0;

	b[n++] = 4 * 32000.0 * 2048;                 /* embed_tokens */
	for (int l = 0; l < 22; l++)
		for (size_t i = 0; i < sizeof(layer) / sizeof(layer[0]); i++)
			b[n++] = 4 * layer[i];
	b[n++] = 4 * 2048.0;                          /* model.norm */
	b[n++] = 4 * 32000.0 * 2048;                 /* lm_head */
	return n;
}

/* The rules' peaks over TinyLlama-1.1B (1,100,048,384 parameters):
 * foreach their sum; the for-loop's largest at lm_head, two 262 MB
 * tensors after model.norm's 8 KiB (4 x (2 x 65,536,000 + 2,048) B);
 * fused 0. */
static void rule_peaks(void **state)
{
	double b[256];
	size_t n = tinyllama(b);
	const struct gm_optstep_rule *fe = gm_optstep_rule(GM_OPT_IMPL_FOREACH);
	const struct gm_optstep_rule *fu = gm_optstep_rule(GM_OPT_IMPL_FUSED);
	const struct gm_optstep_rule *fl =
		gm_optstep_rule(GM_OPT_IMPL_FOR_LOOP);

	(void)state;
	assert_true(fe->peak(b, n) == 4.0 * 1100048384);
	assert_true(fl->peak(b, n) == 4.0 * (2 * 65536000.0 + 2048));
	assert_true(fu->peak(b, n) == 0);
	assert_string_equal(fe->name, gm_opt_impl_name(GM_OPT_IMPL_FOREACH));
	assert_string_equal(fu->name, gm_opt_impl_name(GM_OPT_IMPL_FUSED));
	assert_string_equal(fl->name, gm_opt_impl_name(GM_OPT_IMPL_FOR_LOOP));
	assert_string_equal(fl->name, "for-loop");
	assert_non_null(fe->source);
	assert_non_null(fu->source);
	assert_non_null(fl->source);
}

/* The walk: tensors without a temporary are not visited; the peak is
 * where the tensor before and two of this one meet. */
static void walk(void **state)
{
	struct gm_optstep_walk w = {0, 0, 0};

	(void)state;
	gm_optstep_walk_add(&w, 10);  /* 20 */
	gm_optstep_walk_add(&w, 0);   /* skipped: prev stays 10 */
	gm_optstep_walk_add(&w, 30);  /* 10 + 60 */
	gm_optstep_walk_add(&w, 5);   /* 30 + 10 */
	assert_true(w.peak == 70);
	assert_true(w.at == 30);
	assert_true(w.prev == 5);
}

/* A sink that counts live bytes of the optimizer's temporaries and the
 * requests made. */
struct cnt {
	double live, peak, bytes[4096];
	unsigned char tmp[4096];
	unsigned allocs;
	double size;        /* count the temporaries of this size too */
	unsigned of_size;
	int bad;
};

static int c_alloc(void *ctx, uint32_t id, uint64_t bytes,
		   enum gm_step_kind k)
{
	struct cnt *c = ctx;

	if (id >= 4096 || c->bytes[id] > 0) {
		c->bad = 1;
		return 0;
	}
	c->bytes[id] = (double)bytes;
	c->tmp[id] = k == GM_SK_OPT_TMP;
	if (k == GM_SK_OPT_TMP) {
		c->live += (double)bytes;
		c->allocs++;
		c->of_size += (double)bytes == c->size;
		if (c->live > c->peak)
			c->peak = c->live;
	}
	return 0;
}

static int c_free(void *ctx, uint32_t id)
{
	struct cnt *c = ctx;

	if (id >= 4096 || !(c->bytes[id] > 0)) {
		c->bad = 1;
		return 0;
	}
	if (c->tmp[id])
		c->live -= c->bytes[id];
	c->bytes[id] = 0;
	return 0;
}

static void c_phase(void *ctx, enum gm_step_phase p)
{
	(void)ctx;
	(void)p;
}

static void c_step(void *ctx, unsigned s)
{
	(void)ctx;
	(void)s;
}

/* Three blocks, an embedding and a head, each with Adam's states. */
static struct gm_step tiny_step(enum gm_opt_impl im)
{
	struct gm_step st = {
		.training = true, .steps = 1, .layers = 3, .ga = 1,
		.in_flight = 1, .micro_max = 1, .n_act = 2,
		.act = {1000, 3000}, .emb_saved = 100, .head_saved = 200,
		.trans = 5000, .logits_held = 700, .logits_piece = 1400,
		.workspace = 4096, .opt_impl = im};

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

/* The optimizer's temporaries' peak of live bytes in one step, by
 * gm_step_peak (kind GM_SK_OPT_TMP alone). */
static double tmp_peak(const struct gm_step *st)
{
	struct gm_step_peak pk;

	assert_int_equal(gm_step_peak(st, (1u << GM_SK_OPT_TMP) |
					  GM_STEP_NOGROUP, &pk), 0);
	return pk.peak;
}

/* The emitter: foreach all five tensors' temporaries at once (400 +
 * 3 x 800 + 400); the for-loop in named_parameters() order (embedding,
 * blocks 0-2, head): the block after a block, 800 + 2 x 800; fused
 * none. */
static void emitter(void **state)
{
	struct gm_step fe = tiny_step(GM_OPT_IMPL_FOREACH);
	struct gm_step fl = tiny_step(GM_OPT_IMPL_FOR_LOOP);
	struct gm_step fu = tiny_step(GM_OPT_IMPL_FUSED);
	static struct cnt c;
	struct gm_step_sink sk = {.ctx = &c, .alloc = c_alloc,
				  .free = c_free, .phase = c_phase,
				  .step = c_step};

	(void)state;
	assert_true(tmp_peak(&fe) == 400 + 3 * 800 + 400);
	assert_true(tmp_peak(&fl) == 800 + 2 * 800);
	assert_true(tmp_peak(&fu) == 0);
	/* two requests per tensor in the for-loop, none fused */
	memset(&c, 0, sizeof(c));
	assert_int_equal(gm_step_emit(&fl, &sk), 0);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.allocs, 2 * 5);
	assert_true(c.peak == 800 + 2 * 800);
	assert_true(c.live == 0);
	memset(&c, 0, sizeof(c));
	assert_int_equal(gm_step_emit(&fu, &sk), 0);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.allocs, 0);
}

static struct gm_plan plan_of(const struct gm_spec *s)
{
	static struct gm_plan p;
	struct gm_diag d;

	assert_int_equal(gm_plan(s, &h200, NULL, &p, &d), 0);
	return p;
}

/* TinyLlama-1.1B in fp32 at 128 tokens, where the step's temporary is
 * the optimizer's: the plan's temporary_bytes is rule_peaks' figure
 * under foreach and for-loop; fused leaves one block's transient, below
 * both. The optimizer step's phase peak falls by the same bytes. */
static void plan_terms(void **state)
{
	struct gm_spec s = spec_llama(22, 2048, 5632, 32, 4, 32000);
	struct gm_terms fe, fl, fu;

	(void)state;
	s.training.precision = GM_PREC_FP32;
	s.training.micro_batch_size = 1;
	s.training.sequence_length = 128;
	s.training.use_cache = GM_CACHE_FALSE;
	fe = plan_of(&s).per_gpu;
	s.training.optimizer_implementation = GM_OPT_IMPL_FOR_LOOP;
	fl = plan_of(&s).per_gpu;
	s.training.optimizer_implementation = GM_OPT_IMPL_FUSED;
	fu = plan_of(&s).per_gpu;
	assert_true(fe.parameters == 1100048384);
	assert_true(fe.temporary == 4.0 * 1100048384);
	assert_true(fl.temporary == 4.0 * (2 * 65536000.0 + 2048));
	assert_true(fu.temporary < fl.temporary);
	assert_true(fe.optimizer_states == fu.optimizer_states);
	assert_true(fe.peak_phase == GM_PHASE_OPTIMIZER);
	assert_true(fe.peak_allocated > fl.peak_allocated);
	assert_true(fl.peak_allocated > fu.peak_allocated);
}

/* DeepSpeed ZeRO-2 on one GPU with torch.optim AdamW as the client
 * optimizer (step_ds.c): the client steps over the fp32 flat partition,
 * foreach's temporary is one fp32 copy of it (4 B x every element at
 * d = 1), fused has none. Two blocks of a 4 MiB and a 1 MiB bf16 tensor,
 * a 2 MiB embedding and head. */
static struct gm_step ds_step(enum gm_opt_impl im)
{
	static const double mib = 1024.0 * 1024;
	struct gm_step st;
	static const struct {
		enum gm_step_where w;
		double bytes;
	} t[] = {{GM_STEP_EMBED, 2 * mib}, {GM_STEP_LAYER, 4 * mib},
		 {GM_STEP_LAYER, 1 * mib}, {GM_STEP_HEAD, 2 * mib}};

	memset(&st, 0, sizeof(st));
	st.training = true;
	st.steps = 2;
	st.layers = 2;
	st.ga = st.in_flight = st.micro_max = 1;
	st.n_param = 4;
	st.opt_impl = im;
	for (int i = 0; i < 4; i++) {
		st.p[i].where = t[i].w;
		st.p[i].weight = st.p[i].grad = t[i].bytes;
		st.p[i].grad_at_loss = t[i].w == GM_STEP_HEAD;
	}
	st.n_act = 1;
	st.act[0] = mib;
	st.ds = (struct gm_step_ds){
		.on = true, .stage = 2, .d = 1, .b = 2, .master = true,
		.states = 2, .adam_tmp = true, .bucket = 5 * mib,
		.contiguous = true, .sub_group = 1e9, .max_live = 1e9,
		.max_reuse = 1e9, .persist = 1e5};
	return st;
}

static unsigned of_size(const struct gm_step *st, double size)
{
	static struct cnt c;
	struct gm_step_sink sk = {.ctx = &c, .alloc = c_alloc,
				  .free = c_free, .phase = c_phase,
				  .step = c_step};

	memset(&c, 0, sizeof(c));
	c.size = size;
	assert_int_equal(gm_step_emit(st, &sk), 0);
	assert_int_equal(c.bad, 0);
	assert_true(c.live == 0);
	return c.of_size;
}

/* Per step, foreach makes one more fp32 tensor of the partition's size
 * (4 B x every element at d = 1) than fused does (the fp32 gradient
 * partition is both's); the optimizer's other transients are the
 * engine's own, the same in both. */
static void deepspeed_client(void **state)
{
	struct gm_step fe = ds_step(GM_OPT_IMPL_FOREACH);
	struct gm_step fu = ds_step(GM_OPT_IMPL_FUSED);
	/* elements: (2 + 2 x (4 + 1) + 2) MiB of bf16 / 2 B */
	double part = 4 * (2.0 + 2 * 5 + 2) * 1024 * 1024 / 2;

	(void)state;
	assert_int_equal(of_size(&fe, part) - of_size(&fu, part), fe.steps);
	assert_true(of_size(&fu, part) > 0);
	assert_true(tmp_peak(&fu) < tmp_peak(&fe));
}

/* SGD (with or without momentum) has no temporary in any
 * implementation: the plans are the same. */
static void sgd_same(void **state)
{
	static const enum gm_optimizer o[] = {GM_OPT_SGD,
					      GM_OPT_SGD_MOMENTUM};
	struct gm_spec s = spec_llama(4, 512, 1408, 8, 4, 32000);

	(void)state;
	s.training.use_cache = GM_CACHE_FALSE;
	for (int i = 0; i < 2; i++) {
		struct gm_terms a, b, c;
		s.training.optimizer = o[i];
		s.training.optimizer_implementation = GM_OPT_IMPL_FOREACH;
		a = plan_of(&s).per_gpu;
		s.training.optimizer_implementation = GM_OPT_IMPL_FUSED;
		b = plan_of(&s).per_gpu;
		s.training.optimizer_implementation = GM_OPT_IMPL_FOR_LOOP;
		c = plan_of(&s).per_gpu;
		assert_true(a.peak_allocated == b.peak_allocated);
		assert_true(a.peak_allocated == c.peak_allocated);
		assert_true(a.peak_reserved == b.peak_reserved);
		assert_true(a.peak_reserved == c.peak_reserved);
		assert_true(a.temporary == c.temporary);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rule_peaks),
		cmocka_unit_test(walk),
		cmocka_unit_test(emitter),
		cmocka_unit_test(plan_terms),
		cmocka_unit_test(deepspeed_client),
		cmocka_unit_test(sgd_same),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
