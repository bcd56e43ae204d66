/* Unit tests for the replay's shortcut (planner/step.c, "Serving a
 * repeated run"): a replay that answers repeated runs of small-pool
 * requests from a record must give every figure and every event (address,
 * bytes, reserved after it) of the replay that makes every request on the
 * pool (gm_step_replay_plain), on random inference passes and training
 * steps, on unlimited cards and on cards small enough that the pool
 * frees its cache, retries and runs out; the replay that counts the peak
 * of live bytes as it goes gives both figures. argv[1] "long": one long
 * generation of Llama-2-13B's shape instead (the slow suite). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "arch/family.h"
#include "error.h"
#include "step.h"
#include "units.h"

struct ev {
	uint64_t addr, bytes, reserved;
	unsigned step;
	unsigned char alloc, kind, phase;
};

struct rec {
	struct ev *e;
	size_t n, cap;
};

static int rec_event(void *ctx, bool alloc, uint64_t addr, uint64_t bytes,
		     const struct gm_step_event *info)
{
	struct rec *r = ctx;

	if (r->n == r->cap) {
		size_t c = r->cap ? 2 * r->cap : 4096;
		struct ev *e = realloc(r->e, c * sizeof(*e));

		if (!e)
			return GM_ENOMEM;
		r->e = e;
		r->cap = c;
	}
	memset(&r->e[r->n], 0, sizeof(r->e[r->n]));
	r->e[r->n] = (struct ev){.addr = addr, .bytes = bytes,
				 .reserved = info->reserved,
				 .step = info->step, .alloc = alloc,
				 .kind = (unsigned char)info->kind,
				 .phase = (unsigned char)info->phase};
	r->n++;
	return 0;
}

static uint64_t served_total, cases_oom, cases;

static void same_result(const struct gm_step_result *a,
			const struct gm_step_result *b)
{
	assert_true(a->peak_reserved == b->peak_reserved);
	assert_int_equal(a->peak_reserved_step, b->peak_reserved_step);
	assert_true(a->peak_requested == b->peak_requested);
	assert_true(a->peak_allocated == b->peak_allocated);
	assert_int_equal(a->live_at_peak, b->live_at_peak);
	assert_int_equal(a->allocations, b->allocations);
	assert_int_equal(a->out_of_memory, b->out_of_memory);
	assert_true(a->oom_requested == b->oom_requested);
	assert_true(a->oom_allocated == b->oom_allocated);
	assert_true(a->oom_reserved == b->oom_reserved);
	assert_true(a->card_needed == b->card_needed);
}

/* Both replays of st on a card of cap bytes, with events, and the
 * fits-only ones: the same figures and events. */
static void compare(const struct gm_step *st, uint64_t cap)
{
	struct rec ra = {0}, rb = {0};
	struct gm_step_observer oa = {&ra, NULL, rec_event, NULL};
	struct gm_step_observer ob = {&rb, NULL, rec_event, NULL};
	struct gm_step_result a, b;

	assert_int_equal(gm_step_replay_observed(st, cap, &a, &oa), 0);
	assert_int_equal(gm_step_replay_plain(st, cap, false, &b, &ob), 0);
	same_result(&a, &b);
	assert_int_equal(b.served, 0);
	assert_int_equal(ra.n, rb.n);
	for (size_t i = 0; i < ra.n; i++)
		if (memcmp(&ra.e[i], &rb.e[i], sizeof(ra.e[i]))) {
			fprintf(stderr, "event %zu of %zu differs\n", i, ra.n);
			fail();
		}
	served_total += a.served;
	cases_oom += a.out_of_memory;
	cases++;
	free(ra.e);
	free(rb.e);
	assert_int_equal(gm_step_replay_fits(st, cap, &a), 0);
	assert_int_equal(gm_step_replay_plain(st, cap, true, &b, NULL), 0);
	same_result(&a, &b);
}

/* xorshift64*: reproducible random cases */
static uint64_t rnd_s = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(uint64_t n)
{
	rnd_s ^= rnd_s >> 12;
	rnd_s ^= rnd_s << 25;
	rnd_s ^= rnd_s >> 27;
	return (rnd_s * 2685821657736338717ULL >> 11) % n;
}

/* A random inference pass of family a. */
static struct gm_step infer_case(enum gm_arch a)
{
	static const double hid[] = {64, 256, 512, 1024, 2048, 4096};
	double h = hid[rnd(6)], hd = h >= 1024 ? 128 : 16;
	struct gm_step st = {.training = false, .steps = 1 + rnd(2),
			     .layers = 1 + rnd(12), .ga = 1, .in_flight = 1,
			     .micro_max = 1, .workspace = 8 * GM_MiB};
	const struct gm_family *f = gm_family(a);

	st.n_param = 2;
	st.p[0] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 12 * h * h * 2};
	st.p[1] = (struct gm_step_param){.where = GM_STEP_EMBED,
					 .weight = 32000 * h * 2};
	st.inf = (struct gm_step_infer){
		.fam = f, .first = true, .last = true, .lm_head = !rnd(4) ?
		false : true, .batch = 1 + rnd(8), .prompt = 1 + rnd(700),
		.generate = f->encoder ? 0 : rnd(4) ? rnd(200) : 0,
		.hidden = h, .q = h, .kv = rnd(2) ? h : h / 4,
		.ffn = rnd(2) ? 4 * h : 2.6875 * h, .vocab = 1000 + rnd(50000),
		.head_dim = hd, .c = rnd(3) ? 2 : 4, .kvb = rnd(3) ? 2 : 1};
	st.inf.kv_v = st.inf.kv;
	if (a == GM_ARCH_MIXTRAL) {
		st.inf.experts = 8;
		st.inf.topk = 2;
		st.inf.ffn_expert = st.inf.ffn;
	}
	return st;
}

/* A random small training step (the analytic block, a few layers). */
static struct gm_step train_case(void)
{
	struct gm_step st = {.training = true, .steps = 2,
			     .layers = 1 + rnd(8), .ga = 1 + rnd(4),
			     .in_flight = 1, .workspace = 8 * GM_MiB};
	double h = 64.0 * (1 + rnd(32));

	st.micro_max = st.ga < 3 ? st.ga : 3;
	st.n_param = 3;
	st.p[0] = (struct gm_step_param){.where = GM_STEP_EMBED,
		.weight = 5000 * h * 2, .grad = 5000 * h * 2,
		.state = {5000 * h * 4, 5000 * h * 4}, .n_state = 2};
	st.p[1] = (struct gm_step_param){.where = GM_STEP_LAYER,
		.weight = 12 * h * h * 2, .grad = 12 * h * h * 2,
		.state = {12 * h * h * 4, 12 * h * h * 4}, .n_state = 2,
		.opt_tmp = 12 * h * h * 4};
	st.p[2] = (struct gm_step_param){.where = GM_STEP_LAYER,
		.weight = h * 2, .grad = h * 2, .state = {h * 4, h * 4},
		.n_state = 2};
	st.n_act = 3;
	st.act[0] = (double)(1 + rnd(64)) * h * 2;
	st.act[1] = (double)(1 + rnd(4)) * h * h;
	st.act[2] = 4096 * (double)(1 + rnd(8));
	st.trans = (double)(1 + rnd(16)) * h * 64;
	st.emb_saved = 8192;
	st.head_saved = h * 512;
	st.logits_held = 5000 * 256 * 2;
	st.logits_piece = 5000 * 256 * 4;
	return st;
}

/* The card: unlimited, or a fraction of what the full replay reserves
 * (the pool then frees its cache, retries, runs out). */
static uint64_t card_for(const struct gm_step *st)
{
	struct gm_step_result r;

	if (!rnd(3))
		return 0;
	assert_int_equal(gm_step_replay_plain(st, 0, false, &r, NULL), 0);
	return (uint64_t)(r.peak_reserved * (0.55 + (double)rnd(55) / 100));
}

static void random_inference(void **state)
{
	(void)state;
	served_total = cases_oom = cases = 0;
	for (int i = 0; i < 120; i++) {
		struct gm_step st = infer_case((enum gm_arch)(i % GM_ARCH_N));

		compare(&st, card_for(&st));
	}
	/* the shortcut ran, and so did the retries' paths */
	assert_true(served_total > 0);
	assert_true(cases_oom > 0);
}

static void random_training(void **state)
{
	(void)state;
	for (int i = 0; i < 60; i++) {
		struct gm_step st = train_case();

		compare(&st, card_for(&st));
	}
}

/* Generation long enough for the decode steps to repeat many times, on
 * cards from tight to roomy. */
static void long_generation(void **state)
{
	(void)state;
	served_total = 0;
	for (int i = 0; i < 4; i++) {
		struct gm_step st = infer_case(GM_ARCH_LLAMA);

		st.steps = 1;
		st.layers = 6;
		st.inf.batch = 2 + (uint64_t)i;
		st.inf.prompt = 300;
		st.inf.generate = 600;
		st.inf.hidden = st.inf.q = st.inf.kv = 1024;
		st.inf.ffn = 2816;
		st.inf.head_dim = 128;
		st.inf.c = st.inf.kvb = 2;
		compare(&st, i ? card_for(&st) : 0);
	}
	assert_true(served_total > 0);
}

/* More small blocks live than a checkpoint takes whole (every layer's
 * norm weights in the small pool): cycles are found from fingerprints
 * and proven by a trial on the pool; training steps of as many layers
 * too. */
static void many_small_blocks(void **state)
{
	(void)state;
	served_total = 0;
	for (int i = 0; i < 3; i++) {
		struct gm_step st = infer_case(GM_ARCH_LLAMA);

		st.steps = 1;
		st.layers = 300 + 50 * (uint64_t)i;
		st.n_param = 3;
		st.p[2] = (struct gm_step_param){.where = GM_STEP_LAYER,
						 .weight = 2 * 1024};
		st.inf.batch = 1 + (uint64_t)i;
		st.inf.prompt = 600; /* K and V above 1 MiB: large */
		st.inf.generate = 24;
		st.inf.hidden = st.inf.q = st.inf.kv = 1024;
		st.inf.ffn = 2816;
		st.inf.head_dim = 128;
		st.inf.c = st.inf.kvb = 2;
		compare(&st, i ? card_for(&st) : 0);
	}
	assert_true(served_total > 0);
	for (int i = 0; i < 2; i++) {
		struct gm_step st = train_case();

		st.layers = 300 + 40 * (uint64_t)i;
		compare(&st, card_for(&st));
	}
}

/* A replay kept for another plan of the same step (step.c, "Replays
 * kept"): after a replay on an unlimited card, replays on cards from
 * roomy to tight (kept answers where each charge fits, replays where
 * the pool retries or runs out) give the figures of replays made in
 * full; on each card, one that stops at its out-of-memory error, one
 * that goes on, then both again (answered by those kept on that card:
 * a stopped one answers only one that stops). */
static void kept_across_cards(void **state)
{
	unsigned oom = 0;

	(void)state;
	for (int i = 0; i < 16; i++) {
		struct gm_step st = i % 2 ? train_case() :
				    infer_case((enum gm_arch)(i % GM_ARCH_N));
		struct gm_step_result r, a, b, s;
		static const double f[] = {2.0, 1.05, 1.0, 0.9, 0.7};

		assert_int_equal(gm_step_replay(&st, 0, &r), 0);
		for (int k = 0; k < 5; k++) {
			uint64_t cap = (uint64_t)(r.peak_reserved * f[k]) + 1;

			assert_int_equal(gm_step_replay_plain(&st, cap, true,
							      &s, NULL), 0);
			assert_int_equal(gm_step_replay_plain(&st, cap, false,
							      &b, NULL), 0);
			oom += b.out_of_memory;
			for (int twice = 0; twice < 2; twice++) {
				assert_int_equal(gm_step_replay_fits(&st, cap,
								     &a), 0);
				same_result(&a, &s);
				assert_int_equal(gm_step_replay(&st, cap, &a),
						 0);
				same_result(&a, &b);
			}
		}
	}
	assert_true(oom > 0);
}

/* gm_step_replay_peak() of st on a card of cap bytes: the figures and
 * events of gm_step_replay_observed() and the peak of
 * gm_step_peak(GM_STEP_ALL | GM_STEP_NOGROUP), from one emission. */
static void compare_peak(const struct gm_step *st, uint64_t cap)
{
	struct rec ra = {0}, rb = {0};
	struct gm_step_observer oa = {&ra, NULL, rec_event, NULL};
	struct gm_step_observer ob = {&rb, NULL, rec_event, NULL};
	struct gm_step_result a, b;
	struct gm_step_peak pa, pb;
	int prc = -1;

	assert_int_equal(gm_step_replay_peak(st, cap, &a, &oa, &pa, &prc), 0);
	assert_int_equal(prc, 0);
	assert_int_equal(gm_step_replay_observed(st, cap, &b, &ob), 0);
	assert_int_equal(gm_step_peak(st, GM_STEP_ALL | GM_STEP_NOGROUP, &pb),
			 0);
	same_result(&a, &b);
	assert_int_equal(ra.n, rb.n);
	assert_memory_equal(ra.e, rb.e, ra.n * sizeof(*ra.e));
	assert_true(pa.peak == pb.peak && pa.peak > 0);
	assert_int_equal(pa.phase, pb.phase);
	assert_memory_equal(pa.kind, pb.kind, sizeof(pa.kind));
	assert_memory_equal(pa.phase_peak, pb.phase_peak,
			    sizeof(pa.phase_peak));
	assert_int_equal(pa.n_group, pb.n_group);
	/* without an observer too (a kept replay may answer: the peak is
	 * then counted on its own) */
	assert_int_equal(gm_step_replay_peak(st, cap, &a, NULL, &pa, &prc), 0);
	assert_int_equal(prc, 0);
	same_result(&a, &b);
	assert_true(pa.peak == pb.peak);
	assert_memory_equal(pa.kind, pb.kind, sizeof(pa.kind));
	free(ra.e);
	free(rb.e);
}

static void replay_with_peak(void **state)
{
	(void)state;
	for (int i = 0; i < 24; i++) {
		struct gm_step st = i % 2 ? train_case() :
				    infer_case((enum gm_arch)(i % GM_ARCH_N));

		compare_peak(&st, card_for(&st));
	}
}

/* Llama-2-13B's generation (hidden 5120, ffn 13824, fp16), prompt
 * 2048 + 2048 generated, at batch b. */
static struct gm_step_infer infer_13b(uint64_t b)
{
	return (struct gm_step_infer){
		.fam = gm_family(GM_ARCH_LLAMA), .first = true, .last = true,
		.lm_head = true, .batch = b, .prompt = 2048, .generate = 2048,
		.hidden = 5120, .q = 5120, .kv = 5120, .kv_v = 5120,
		.ffn = 13824,
		.vocab = 32000, .head_dim = 128, .c = 2, .kvb = 2};
}

/* Llama-2-13B's shape (40 layers, hidden 5120, ffn 13824, fp16),
 * batch 4, prompt 2048 + 2048 generated, on an A100 80GB's allocator
 * room and on an unlimited card. */
static void long_13b(void **state)
{
	struct gm_step st = {.training = false, .steps = 1, .layers = 40,
			     .ga = 1, .in_flight = 1, .micro_max = 1,
			     .workspace = 8.125 * GM_MiB};

	(void)state;
	st.n_param = 2;
	st.p[0] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 5120.0 * 5120 * 2};
	st.p[1] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 3 * 5120.0 * 13824 * 2};
	st.inf = infer_13b(4);
	served_total = 0;
	compare(&st, 79.41 * GM_GiB);
	compare(&st, 0);
	assert_true(served_total > 0);
}

/* The same at batch 14 on the A100's room: the card fills in the first
 * pass's last decode steps, where the pool frees its cached segments and
 * retries at nearly every new cache tensor, and a long cycle fails
 * there; the layers' cycles are found again after it, so most requests
 * stay answered from them (a failed cycle's length bounded the search
 * for the rest of the replay before: 37% served). */
static void long_13b_full_card(void **state)
{
	struct gm_step st = {.training = false, .steps = 2, .layers = 40,
			     .ga = 1, .in_flight = 1, .micro_max = 1,
			     .workspace = 8.125 * GM_MiB};
	struct gm_step_result r;

	(void)state;
	/* the model's tensors as built: embeddings, each layer's (its two
	 * norms' weights live in the small pool), the final norm and head */
	st.n_param = 7;
	st.p[0] = (struct gm_step_param){.where = GM_STEP_EMBED,
					 .weight = 32000.0 * 5120 * 2};
	st.p[1] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 5120.0 * 2};
	st.p[2] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 4 * 5120.0 * 5120 * 2};
	st.p[3] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 5120.0 * 2};
	st.p[4] = (struct gm_step_param){.where = GM_STEP_LAYER,
					 .weight = 3 * 5120.0 * 13824 * 2};
	st.p[5] = (struct gm_step_param){.where = GM_STEP_HEAD,
					 .weight = 5120.0 * 2};
	st.p[6] = (struct gm_step_param){.where = GM_STEP_HEAD,
					 .weight = 32000.0 * 5120 * 2};
	st.inf = infer_13b(14);
	served_total = 0;
	compare(&st, 79.41 * GM_GiB);
	assert_int_equal(gm_step_replay(&st, 79.41 * GM_GiB, &r), 0);
	assert_false(r.out_of_memory);
	assert_true(r.peak_reserved > 79 * GM_GiB);
	assert_true((double)r.served > 0.75 * 2 * (double)r.allocations);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest fast[] = {
		cmocka_unit_test(random_inference),
		cmocka_unit_test(random_training),
		cmocka_unit_test(long_generation),
		cmocka_unit_test(many_small_blocks),
		cmocka_unit_test(kept_across_cards),
		cmocka_unit_test(replay_with_peak),
	};
	const struct CMUnitTest slow[] = {
		cmocka_unit_test(long_13b),
		cmocka_unit_test(long_13b_full_card),
	};

	if (argc > 1 && !strcmp(argv[1], "long"))
		return cmocka_run_group_tests(slow, NULL, NULL);
	return cmocka_run_group_tests(fast, NULL, NULL);
}
