/* Unit tests for planner/cap.c: the cap --fraction / --limit set, and
 * plans and fits under it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <string.h>

#include "cap.h"
#include "error.h"
#include "fit.h"
#include "model.h"
#include "specs.h"
#include "units.h"

/* An H200 as the catalog has it: nvidia-smi and CUDA totals. */
static struct gm_plan_gpu h200(void)
{
	struct gm_plan_gpu g = {
		.name = "NVIDIA H200", .capacity_bytes = 143771 * GM_MiB,
		.cuda_total_bytes = 143155 * GM_MiB,
		.context_bytes = 767 * GM_MiB, .sm_major = 9};
	return g;
}

static struct gm_spec l7b(void)
{
	return spec_llama(32, 4096, 11008, 32, 32, 32000);
}

static void cap_from_options(void **state)
{
	struct gm_plan_gpu g = h200();

	(void)state;
	gm_plan_gpu_cap(&g, 0, 1, 0);
	assert_int_equal(g.cap_bytes, 0);
	/* a fraction of what CUDA reports, as both caps take it */
	gm_plan_gpu_cap(&g, 1, 2, 0);
	assert_int_equal(g.cap_bytes, 143155 * GM_MiB / 2);
	gm_plan_gpu_cap(&g, 1, 1, 0);
	assert_int_equal(g.cap_bytes, 143155 * GM_MiB);
	/* the smaller of the two */
	gm_plan_gpu_cap(&g, 1, 2, 40 * GM_GiB);
	assert_int_equal(g.cap_bytes, 40 * GM_GiB);
	gm_plan_gpu_cap(&g, 1, 10, 40 * GM_GiB);
	assert_int_equal(g.cap_bytes, (uint64_t)(0.1 * 143155 * GM_MiB));
	gm_plan_gpu_cap(&g, 0, 1, 40 * GM_GiB);
	assert_int_equal(g.cap_bytes, 40 * GM_GiB);
	/* the exact decimal, as the preload library: 0.29 of 100 MiB is
	 * 30408704 bytes (a double's 0.29 x 104857600 floors to 30408703) */
	g.cuda_total_bytes = 100 * GM_MiB;
	gm_plan_gpu_cap(&g, 29, 100, 0);
	assert_int_equal(g.cap_bytes, 30408704);
	/* CUDA's total not known: nvidia-smi's */
	g.cuda_total_bytes = 0;
	gm_plan_gpu_cap(&g, 1, 2, 0);
	assert_int_equal(g.cap_bytes, 143771 * GM_MiB / 2);
}

static struct gm_plan capped(struct gm_spec s, const struct gm_plan_gpu *g)
{
	struct gm_plan p;
	struct gm_diag d;

	assert_int_equal(gm_plan_capped(&s, g, NULL, &p, &d), 0);
	return p;
}

/* Fits exactly when peak reserved is under the cap; headroom is to the
 * cap; the card's capacity and the cap are reported as given. */
static void plan_under_cap(void **state)
{
	struct gm_plan_gpu g = h200();
	struct gm_plan free_ = capped(l7b(), &g), p;
	uint64_t r = (uint64_t)free_.per_gpu.peak_reserved;

	(void)state;
	assert_true(free_.fits);
	/* a cap just above what the plan reserves: fits, headroom to it */
	g.cap_bytes = r + 64 * GM_MiB;
	p = capped(l7b(), &g);
	assert_true(p.fits);
	assert_int_equal(p.gpu.capacity_bytes, 143771 * GM_MiB);
	assert_int_equal(p.gpu.cap_bytes, r + 64 * GM_MiB);
	assert_true(p.headroom_bytes <= (int64_t)(64 * GM_MiB) &&
		    p.headroom_bytes >= 0);
	/* a cap below it: does not fit, headroom negative */
	g.cap_bytes = r / 2;
	p = capped(l7b(), &g);
	assert_false(p.fits);
	assert_true(p.headroom_bytes < 0);
	/* a cap that cannot bind (all of CUDA's total): the plan as without */
	g.cap_bytes = 143155 * GM_MiB;
	p = capped(l7b(), &g);
	assert_true(p.fits);
	assert_int_equal(p.headroom_bytes, free_.headroom_bytes);
	assert_true(p.per_gpu.peak_reserved == free_.per_gpu.peak_reserved);
}

/* The verdict is against what a process can get (CUDA's total, or the
 * plan's usable memory), not nvidia-smi's total: a plan whose device used
 * lies between the two does not fit, and headroom is to CUDA's total. */
static void verdict_against_cuda_total(void **state)
{
	struct gm_plan_gpu g = h200();
	struct gm_plan free_ = capped(l7b(), &g), p;
	uint64_t d = (uint64_t)free_.per_gpu.device_used;

	(void)state;
	assert_true(free_.fits);
	assert_int_equal(free_.headroom_bytes,
			 (int64_t)(143155 * GM_MiB) -
				 llround(free_.per_gpu.device_used));
	/* nvidia-smi's total above device used, CUDA's total far below */
	g.capacity_bytes = d + GM_GiB;
	g.cuda_total_bytes = d / 4;
	p = capped(l7b(), &g);
	assert_false(p.fits);
	assert_true(p.headroom_bytes < 0);
	/* an estimate (usable_bytes) binds over both */
	g = h200();
	g.usable_bytes = d / 4;
	g.usable_estimated = true;
	p = capped(l7b(), &g);
	assert_false(p.fits);
	assert_true(p.gpu.usable_estimated);
	assert_int_equal(gm_plan_gpu_usable(&p.gpu), d / 4);
}

/* fit under a cap: the largest micro-batch whose reserve is under it. */
static void fit_under_cap(void **state)
{
	struct gm_plan_gpu g = h200();
	struct gm_spec s = spec_gpt2();
	struct gm_fit whole, half;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_fit(&s, &g, NULL, 0, &whole, &d), 0);
	gm_plan_gpu_cap(&g, 1, 2, 0);
	assert_int_equal(gm_fit(&s, &g, NULL, 0, &half, &d), 0);
	assert_true(half.max_micro_batch >= 1);
	assert_true(half.max_micro_batch < whole.max_micro_batch);
	s.training.micro_batch_size = half.max_micro_batch;
	assert_true(capped(s, &g).fits);
	assert_true(capped(s, &g).per_gpu.peak_reserved <=
		    (double)g.cap_bytes);
	s.training.micro_batch_size = half.max_micro_batch + 1;
	assert_false(capped(s, &g).fits);
	assert_true(capped(s, &g).per_gpu.peak_reserved >
		    (double)g.cap_bytes);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cap_from_options),
		cmocka_unit_test(plan_under_cap),
		cmocka_unit_test(verdict_against_cuda_total),
		cmocka_unit_test(fit_under_cap),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
