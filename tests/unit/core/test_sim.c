/* Unit tests for core/sim.c's segment placement (sim.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "error.h"
#include "sim.h"
#include "units.h"

static struct gm_backend *make(enum gm_sim_placement p)
{
	struct gm_sim_options so = {.total_bytes = 141 * GM_GB,
				    .placement = p};
	struct gm_backend *be;

	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	return be;
}

static uint64_t seg(struct gm_backend *be, uint64_t size)
{
	uint64_t a = 0;

	assert_int_equal(be->ops->seg_alloc(be, size, &a), 0);
	return a;
}

/* Rising: each segment above the previous one, 2 MiB aligned. */
static void rising(void **state)
{
	struct gm_backend *be = make(GM_SIM_PLACE_RISING);
	uint64_t a = seg(be, 20 * GM_MiB), b = seg(be, 3 * GM_MiB),
		 c = seg(be, 2 * GM_MiB);

	(void)state;
	assert_int_equal(b, a + 20 * GM_MiB);
	assert_int_equal(c, b + 4 * GM_MiB);
	be->ops->destroy(be);
}

/*
 * Driver: the start of bert-base-infer-forward's segments
 * (tools/measure/vaddr.py): 48 MiB takes a 64 MiB chunk at the top,
 * the next 48 MiB the chunk below it, a 2 MiB segment the lower
 * chunk's 16 MiB tail, 192 MiB an exact chunk further down. Then: holes
 * are filled lowest first in 2 MiB granules, a freed segment's range is
 * a hole, and holes merge with free neighbours (chunk tails included).
 */
static void driver(void **state)
{
	struct gm_backend *be = make(GM_SIM_PLACE_DRIVER);
	const uint64_t top = GM_SIM_DRIVER_TOP, M = GM_MiB;
	uint64_t a, b, d, e, f;

	(void)state;
	assert_int_equal(a = seg(be, 48 * M), top - 64 * M);
	assert_int_equal(b = seg(be, 48 * M), top - 128 * M);
	assert_int_equal(seg(be, 2 * M), b + 48 * M);
	assert_int_equal(d = seg(be, 192 * M), top - 320 * M);
	assert_int_equal(seg(be, 14 * M), b + 50 * M); /* b's tail, full */
	assert_int_equal(seg(be, 1), a + 48 * M);      /* a 2 MiB granule */
	assert_int_equal(be->ops->seg_free(be, b, 48 * M), 0);
	assert_int_equal(e = seg(be, 32 * M), b);      /* b's range, lowest */
	/* d's range [top-320, top-128) is free; 200 MiB fits no hole, so
	 * takes a 224 MiB chunk below, whose 24 MiB tail joins d's hole */
	assert_int_equal(be->ops->seg_free(be, d, 192 * M), 0);
	assert_int_equal(f = seg(be, 200 * M), top - 544 * M);
	assert_int_equal(seg(be, 100 * M), f + 200 * M);
	/* freeing e joins [top-244, top-128), e's range and b's free
	 * [b+32, b+48): one 164 MiB hole */
	assert_int_equal(be->ops->seg_free(be, e, 32 * M), 0);
	assert_int_equal(seg(be, 164 * M), top - 244 * M);
	assert_int_equal(seg(be, 4 * M), a + 50 * M);
	assert_int_equal(gm_sim_used(be), (48 + 2 + 14 + 200 + 100 + 164 +
					   4) * M + 1);
	be->ops->destroy(be);
}

/* Reset: refused while a segment is out; then the first segment lands
 * where a fresh backend's would, not in the hole the last one left. */
static void reset(void **state)
{
	struct gm_backend *be = make(GM_SIM_PLACE_DRIVER);
	uint64_t a = seg(be, 100 * GM_MiB), b = seg(be, 30 * GM_MiB);

	(void)state;
	assert_int_equal(gm_sim_reset(be), GM_EBUSY);
	assert_int_equal(be->ops->seg_free(be, a, 100 * GM_MiB), 0);
	assert_int_equal(be->ops->seg_free(be, b, 30 * GM_MiB), 0);
	assert_int_equal(seg(be, 30 * GM_MiB), b); /* the lowest hole */
	assert_int_equal(be->ops->seg_free(be, b, 30 * GM_MiB), 0);
	assert_int_equal(gm_sim_reset(be), 0);
	assert_int_equal(seg(be, 30 * GM_MiB),
			 GM_SIM_DRIVER_TOP - 32 * GM_MiB); /* a fresh top */
	be->ops->destroy(be);
}

static void parse(void **state)
{
	enum gm_sim_placement p;
	struct gm_sim_options so = {.total_bytes = GM_GiB, .placement = 7};
	struct gm_backend *be;

	(void)state;
	assert_int_equal(gm_sim_placement_parse("driver", &p), 0);
	assert_int_equal(p, GM_SIM_PLACE_DRIVER);
	assert_int_equal(gm_sim_placement_parse("rising", &p), 0);
	assert_int_equal(p, GM_SIM_PLACE_RISING);
	assert_int_equal(gm_sim_placement_parse("Driver", &p), GM_EINVAL);
	assert_int_equal(gm_sim_backend_create(&be, &so), GM_EINVAL);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rising),
		cmocka_unit_test(driver),
		cmocka_unit_test(reset),
		cmocka_unit_test(parse),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
