/* Unit tests for verify/pattern.h: the values and the classification the
 * kernels and the emulation share. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "pattern.h"

static const uint64_t seed = 0x8000000012345678ULL;

static void mix_is_a_bijection(void **state)
{
	uint64_t x = 1;

	(void)state;
	for (int i = 0; i < 100000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		assert_true(gm_vp_unmix(gm_vp_mix(x)) == x);
	}
	assert_true(gm_vp_inverse(GM_VP_M1) * GM_VP_M1 == 1);
	assert_true(gm_vp_inverse(GM_VP_M2) * GM_VP_M2 == 1);
	/* neighbouring words get unrelated values */
	for (uint64_t i = 0; i < 1000; i++) {
		uint64_t a = gm_vp_value(GM_VP_UNIQUE, seed, 0, i);
		uint64_t b = gm_vp_value(GM_VP_UNIQUE, seed, 0, i + 1);
		assert_true(gm_vp_popcount(a ^ b) > GM_VE_FLIP_MAX);
	}
}

static void values_decode_to_their_index(void **state)
{
	(void)state;
	for (uint64_t i = 0; i < 1ULL << 40; i = i * 3 + 1) {
		assert_true(gm_vp_decode(GM_VP_UNIQUE, seed,
			gm_vp_value(GM_VP_UNIQUE, seed, 0, i)) == i);
		assert_true(gm_vp_decode(GM_VP_UNIQUE_INV, seed,
			gm_vp_value(GM_VP_UNIQUE_INV, seed, 0, i)) == i);
	}
	/* zeros and ones decode far outside any range (seed's top bit) */
	assert_true(gm_vp_decode(GM_VP_UNIQUE, seed, 0) >= 1ULL << 63);
	assert_true(gm_vp_decode(GM_VP_UNIQUE_INV, seed, ~0ULL) >= 1ULL << 63);
	assert_true(gm_vp_value(GM_VP_CONST, seed, 42, 7) == 42);
	assert_true(gm_vp_decode(GM_VP_CONST, seed, 42) == UINT64_MAX);
}

static void classify(uint64_t idx, uint64_t expected, uint64_t actual,
		     int kind, struct gm_ve *e)
{
	struct gm_ve_acc a;

	gm_ve_acc_init(&a);
	gm_ve_classify(&a, e, idx, expected, actual, kind, seed, 1 << 20);
	gm_ve_flush(e, &a);
}

static void classes(void **state)
{
	struct gm_ve e;
	uint64_t v = gm_vp_value(GM_VP_UNIQUE, seed, 0, 100);

	(void)state;
	gm_ve_init(&e);
	classify(100, v, v ^ (1ULL << 7) ^ (1ULL << 40), GM_VP_UNIQUE, &e);
	assert_int_equal(e.flip, 1);
	assert_true(e.flip_bits == ((1ULL << 7) | (1ULL << 40)));
	assert_int_equal(e.bit_hist[7], 1);
	assert_int_equal(e.bit_hist[40], 1);

	/* word 100 holds word 100 + 4096's value: aliasing 4096 words away */
	classify(100, v, gm_vp_value(GM_VP_UNIQUE, seed, 0, 4196),
		 GM_VP_UNIQUE, &e);
	assert_int_equal(e.alias, 1);
	assert_int_equal(e.alias_min_dist, 4096);
	assert_true(e.alias_xor == (100ULL ^ 4196ULL));

	/* a value from beyond the tested range is garbage, and so is 0 */
	classify(100, v, gm_vp_value(GM_VP_UNIQUE, seed, 0, 5 << 20),
		 GM_VP_UNIQUE, &e);
	classify(101, v, 0, GM_VP_UNIQUE, &e);
	assert_int_equal(e.garbage, 2);
	/* a constant pattern cannot alias */
	classify(102, 0, 0x00ff00ff00ff00ffULL, GM_VP_CONST, &e);
	assert_int_equal(e.garbage, 3);
	assert_int_equal(e.bad, 5);
	assert_int_equal(e.first_bad, 100);
	assert_int_equal(e.last_bad, 102);
	assert_int_equal(e.nrec, 5);
	assert_true(e.rec[4].index == 102);
}

static void walk_positions(void **state)
{
	(void)state;
	assert_int_equal(gm_vp_walk_count(0), 0);
	assert_int_equal(gm_vp_walk_count(1), 1);     /* word 0 */
	assert_int_equal(gm_vp_walk_count(2), 2);     /* 0, 1 */
	assert_int_equal(gm_vp_walk_count(1024), 11); /* 0, 1 .. 512 */
	assert_int_equal(gm_vp_walk_count(1025), 12);
	assert_true(gm_vp_walk_index(0) == 0);
	assert_true(gm_vp_walk_index(1) == 1);
	assert_true(gm_vp_walk_index(11) == 1024);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(mix_is_a_bijection),
		cmocka_unit_test(values_decode_to_their_index),
		cmocka_unit_test(classes),
		cmocka_unit_test(walk_positions),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
