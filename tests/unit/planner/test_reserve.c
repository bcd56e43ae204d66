/* Unit tests for planner/reserve.c: PyTorch's rounding and segments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>

#include "reserve.h"
#include "units.h"

static void rounding(void **state)
{
	(void)state;
	assert_true(gm_alloc_round(1) == 512);
	assert_true(gm_alloc_round(512) == 512);
	assert_true(gm_alloc_round(513) == 1024);
}

static void segments(void **state)
{
	struct gm_blocks b = {0};

	(void)state;
	/* 3 x 700 KiB small blocks: 2 per 2 MiB segment -> 4 MiB */
	gm_blocks_add(&b, 700 * 1024, 3, false);
	assert_true(gm_reserved_from_allocated(&b) == 4.0 * GM_MiB);
	/* 3 MiB blocks: 6 per 20 MiB segment; 7 need 40 MiB */
	b = (struct gm_blocks){0};
	gm_blocks_add(&b, 3.0 * GM_MiB, 7, false);
	assert_true(gm_reserved_from_allocated(&b) == 40.0 * GM_MiB);
	/* 11 MiB + 1 B: its own segment, 2 MiB multiple -> 12 MiB */
	b = (struct gm_blocks){0};
	gm_blocks_add(&b, 11.0 * GM_MiB + 1, 1, false);
	assert_true(gm_reserved_from_allocated(&b) == 12.0 * GM_MiB);
	/* churning bytes pay the fragmentation share */
	b = (struct gm_blocks){0};
	gm_blocks_add(&b, 100.0 * GM_MiB, 1, true);
	assert_true(fabs(gm_reserved_from_allocated(&b) -
			 100.0 * GM_MiB * (1 + GM_FRAGMENTATION)) < 1);
	assert_true(b.allocated == 100.0 * GM_MiB);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rounding),
		cmocka_unit_test(segments),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
