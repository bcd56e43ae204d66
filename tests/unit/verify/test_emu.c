/* Unit tests for verify/emu.c and the verdicts of verify.c: every verdict
 * on emulated cards (host memory), through the same engine as a GPU. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "error.h"
#include "units.h"
#include "verify.h"

static struct gm_verify_result res;

static enum gm_verify_verdict run(const char *spec, enum gm_verify_level l,
				  uint64_t claimed)
{
	struct gm_verify_emu emu;
	struct gm_verify_opts o = {.level = l, .claimed_bytes = claimed};
	struct gm_diag d = {{0}};

	assert_int_equal(gm_verify_emu_parse(spec, &emu, &d), 0);
	assert_int_equal(gm_verify_emulated(&emu, &o, &res, &d), 0);
	return res.verdict;
}

static void ok_card(void **state)
{
	(void)state;
	assert_int_equal(run("claimed=32MiB,real=32MiB", GM_VERIFY_FULL, 0),
			 GM_VERDICT_OK);
	assert_true(res.verified_bytes == 32 * GM_MiB);
	assert_true(res.tested_bytes == 32 * GM_MiB);
	assert_int_equal(res.errors, 0);
	assert_int_equal(res.npasses, 12);
	assert_int_equal(res.chunks, 4);
	assert_true(res.id.nvml);
	assert_int_equal(gm_verify_exit_code(&res, 1), GM_EXIT_OK);
	assert_int_equal(run("claimed=32MiB", GM_VERIFY_QUICK, 0),
			 GM_VERDICT_OK);
	assert_int_equal(res.npasses, 2);
}

/* Aliasing (high address bits not decoded, or wrap at a non-power of
 * two): caught, with the real size and the alias stride. */
static void aliasing_sizes(void **state)
{
	static const struct {
		const char *spec;
		uint64_t real;
	} cases[] = {
		{"claimed=32MiB,real=16MiB", 16 * GM_MiB},   /* one address bit */
		{"claimed=32MiB,real=8MiB", 8 * GM_MiB},     /* two */
		{"claimed=32MiB,real=24MiB", 24 * GM_MiB},   /* 3/4 */
		{"claimed=30MiB,real=20MiB", 20 * GM_MiB},   /* neither pow2 */
		{"claimed=17MiB,real=7340048", 7340048},     /* 7 MiB + 16 B */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		for (int l = GM_VERIFY_QUICK; l <= GM_VERIFY_FULL; l++) {
			assert_int_equal(run(cases[i].spec, l, 0),
					 GM_VERDICT_UNDERSIZED);
			assert_true(res.alias_errors > 0);
			assert_true(res.real_bytes == cases[i].real);
			assert_true(res.alias_stride_bytes == cases[i].real);
			assert_true(res.verified_bytes == cases[i].real);
			assert_int_equal(gm_verify_exit_code(&res, 1),
					 GM_EXIT_NO);
		}
	}
	/* a power-of-two wrap names the missing address bit */
	run("claimed=32MiB,real=16MiB", GM_VERIFY_QUICK, 0);
	assert_true(res.alias_bits == 16 * GM_MiB);
}

static void lost_writes(void **state)
{
	(void)state;
	assert_int_equal(run("claimed=32MiB,real=20MiB,mode=drop",
			     GM_VERIFY_QUICK, 0), GM_VERDICT_UNDERSIZED);
	assert_true(res.real_bytes == 20 * GM_MiB);
	assert_true(res.first_bad_offset == 20 * GM_MiB);
	assert_int_equal(res.alias_errors, 0);
	assert_true(res.garbage_errors == 12 * GM_MiB / 8);
	assert_int_equal(run("claimed=32MiB,real=12MiB,mode=garbage",
			     GM_VERIFY_FULL, 0), GM_VERDICT_UNDERSIZED);
	assert_true(res.real_bytes == 12 * GM_MiB);
}

static void stuck_bits(void **state)
{
	(void)state;
	assert_int_equal(run("claimed=32MiB,real=32MiB,bad_bits=4",
			     GM_VERIFY_FULL, 0), GM_VERDICT_FAULTY);
	assert_int_equal(res.alias_errors, 0);
	assert_int_equal(res.garbage_errors, 0);
	assert_true(res.flip_errors > 0);
	/* bits (k*13+5)%64 for k = 0..3 */
	assert_true(res.flip_bits ==
		    ((1ULL << 5) | (1ULL << 18) | (1ULL << 31) | (1ULL << 44)));
	/* the first stuck word: 1/5 of the way */
	assert_true(res.first_bad_offset == (32 * GM_MiB / 8) / 5 * 8);
	assert_true(res.nrec > 0);
	assert_true(res.verified_bytes >= 32 * GM_MiB - 4 * 8);
	assert_int_equal(gm_verify_exit_code(&res, 1), GM_EXIT_NO);
}

static void report_smaller_than_claim(void **state)
{
	(void)state;
	/* emulate: the name promises 40 MiB, the driver reports 32 */
	assert_int_equal(run("claimed=40MiB,reported=32MiB", GM_VERIFY_QUICK,
			     0), GM_VERDICT_UNDERSIZED);
	assert_int_equal(res.errors, 0);
	assert_non_null(strstr(res.reason, "reports"));
	/* --claimed overrides, and 0.5% below is within tolerance */
	assert_int_equal(run("claimed=32MiB", GM_VERIFY_QUICK, 48 * GM_MiB),
			 GM_VERDICT_UNDERSIZED);
	assert_string_equal(res.claimed_source, "--claimed");
	assert_int_equal(run("claimed=32MiB", GM_VERIFY_QUICK,
			     32 * GM_MiB + 32 * GM_MiB / 200),
			 GM_VERDICT_OK);
}

static void legitimate_reductions(void **state)
{
	(void)state;
	/* GDDR with ECC on: 15/16 of the claim is expected */
	assert_int_equal(run("claimed=32MiB,reported=30MiB,ecc=1,gddr=1",
			     GM_VERIFY_QUICK, 0), GM_VERDICT_OK);
	assert_int_equal(res.nnotes, 1);
	assert_non_null(strstr(res.notes[0], "ECC"));
	/* HBM with ECC on: no such excuse */
	assert_int_equal(run("claimed=32MiB,reported=30MiB,ecc=1,gddr=0",
			     GM_VERIFY_QUICK, 0), GM_VERDICT_UNDERSIZED);
	/* MIG: an instance sees part of the card */
	assert_int_equal(run("claimed=32MiB,reported=8MiB,mig=1",
			     GM_VERIFY_QUICK, 0), GM_VERDICT_OK);
	assert_non_null(strstr(res.notes[0], "MIG"));
}

static void no_nvml(void **state)
{
	struct gm_val *rep;
	const struct gm_val *dev, *nv;

	(void)state;
	assert_int_equal(run("claimed=32MiB,nvml=0", GM_VERIFY_QUICK, 0),
			 GM_VERDICT_OK);
	assert_false(res.id.nvml);
	assert_non_null(strstr(res.id.nvml_error, "NVML"));
	rep = gm_verify_report(&res, 1, "node-a");
	dev = gm_arr_at(gm_obj_get(rep, "devices"), 0);
	nv = gm_obj_get(dev, "nvml");
	assert_false(gm_val_as_bool(gm_obj_get(nv, "present")));
	assert_string_equal(gm_val_as_str(gm_obj_get(rep, "kind")),
			    "gpumem-verify");
	assert_string_equal(gm_val_as_str(gm_obj_get(dev, "verdict")), "ok");
	gm_val_free(rep);
	/* without NVML, an aliasing card is still caught */
	assert_int_equal(run("claimed=32MiB,real=16MiB,nvml=0",
			     GM_VERIFY_QUICK, 0), GM_VERDICT_UNDERSIZED);
}

static void report_keys(void **state)
{
	static const char *const keys[] = {
		"device", "name", "claimed_bytes", "reported_bytes",
		"verified_bytes", "errors", "verdict", "bandwidth_gbps",
		"tested_bytes", "real_bytes", "alias_stride_bytes",
		"aliased_address_bits", "passes", "error_records", NULL};
	struct gm_val *rep;
	const struct gm_val *dev;

	(void)state;
	run("claimed=32MiB,real=16MiB", GM_VERIFY_FULL, 0);
	rep = gm_verify_report(&res, 1, "node-a");
	dev = gm_arr_at(gm_obj_get(rep, "devices"), 0);
	for (int i = 0; keys[i]; i++)
		assert_non_null(gm_obj_get(dev, keys[i]));
	assert_string_equal(gm_val_as_str(gm_obj_get(dev, "verdict")),
			    "undersized");
	assert_true(gm_val_as_uint(gm_obj_get(dev, "real_bytes")) ==
		    16 * GM_MiB);
	assert_int_equal(gm_val_len(gm_obj_get(dev, "passes")), 12);
	gm_val_free(rep);
}

static void limit_and_seed(void **state)
{
	struct gm_verify_emu emu;
	struct gm_verify_opts o = {.level = GM_VERIFY_QUICK,
				   .max_bytes = 8 * GM_MiB, .seed = 7};
	struct gm_diag d = {{0}};

	(void)state;
	assert_int_equal(gm_verify_emu_parse("claimed=32MiB", &emu, &d), 0);
	assert_int_equal(gm_verify_emulated(&emu, &o, &res, &d), 0);
	assert_true(res.tested_bytes == 8 * GM_MiB);
	assert_true(res.seed == (7 | 1ULL << 63));
}

static void parse_errors(void **state)
{
	static const char *const bad[] = {
		"", "real=8MiB", "claimed=0", "claimed=abc", "claimed=17",
		"claimed=8MiB,real=16MiB", "claimed=8MiB,mode=loop",
		"claimed=8MiB,bad_bits=-1", "claimed=8MiB,bad_bits=x",
		"claimed=8MiB,colour=red", "claimed=8MiB,nvml=maybe",
		"claimed", "claimed=2048TiB", "claimed=8GiB,real=2048TiB", NULL};
	struct gm_verify_emu emu;
	struct gm_diag d;
	uint64_t c, r;

	(void)state;
	for (int i = 0; bad[i]; i++) {
		d.msg[0] = '\0';
		assert_int_not_equal(gm_verify_emu_parse(bad[i], &emu, &d), 0);
		assert_non_null(strstr(d.msg, "--emulate"));
	}
	/* a size past the bound names its key */
	assert_int_equal(gm_verify_emu_parse("claimed=8GiB,reported=8GiB,"
					     "real=4096TiB", &emu, &d),
			 GM_ERANGE);
	assert_non_null(strstr(d.msg, "real= is above"));
	assert_int_equal(gm_verify_emu_parse("claimed=8GiB,real=9GiB", &emu,
					     &d), GM_EINVAL);
	assert_non_null(strstr(d.msg, "real= must not exceed reported="));
	assert_int_equal(gm_verify_vmm_parse("claimed=8GiB,real=3GiB", &c, &r,
					     &d), 0);
	assert_true(c == 8 * GM_GiB && r == 3 * GM_GiB);
	assert_int_equal(gm_verify_vmm_parse("claimed=1GiB,real=3GiB", &c, &r,
					     &d), GM_EINVAL);
	assert_int_equal(gm_verify_vmm_parse("real=3GiB", &c, &r, &d),
			 GM_EINVAL);
	assert_int_equal(gm_verify_vmm_parse("claimed=4GiB,mode=wrap", &c, &r,
					     &d), GM_EINVAL);
}

/* claimed= is a claimed capacity: an "8 GB" card reporting 7782 MiB
 * is undersized (8 GB read as 10^9 bytes passed it). */
static void claimed_gb_is_gib(void **state)
{
	struct gm_verify_emu emu;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_verify_emu_parse("claimed=8GB,reported=7782MiB",
					     &emu, &d), 0);
	assert_true(emu.claimed_bytes == 8 * GM_GiB);
	assert_int_equal(run("claimed=8GB,reported=7782MiB", GM_VERIFY_QUICK,
			     0), GM_VERDICT_UNDERSIZED);
	assert_true(res.claimed_bytes == 8 * GM_GiB);
}

/* The seed's refurbished card, as written: 80 GB claimed, 76 GiB real;
 * run at a stated scale (1/256) and judged at full size. */
static void large_card_scaled(void **state)
{
	struct gm_val *v;

	(void)state;
	assert_int_equal(run("claimed=80GB,real=76GiB", GM_VERIFY_FULL, 0),
			 GM_VERDICT_UNDERSIZED);
	assert_int_equal(res.emulate_scale, 256);
	assert_true(res.claimed_bytes == 80 * GM_GiB);
	assert_true(res.reported_bytes == 80 * GM_GiB);
	assert_true(res.tested_bytes == 80 * GM_GiB);
	assert_true(res.alias_stride_bytes == 76 * GM_GiB);
	assert_true(res.real_bytes == 76 * GM_GiB);
	assert_non_null(strstr(res.reason, "76.00 GiB apart"));
	v = gm_verify_report(&res, 1, "h");
	assert_non_null(v);
	gm_val_free(v);
	/* a genuine 80 GB card passes at the same scale */
	assert_int_equal(run("claimed=80GB", GM_VERIFY_QUICK, 0),
			 GM_VERDICT_OK);
	assert_int_equal(res.emulate_scale, 256);
	/* a small card runs at full size */
	assert_int_equal(run("claimed=64MiB", GM_VERIFY_QUICK, 0),
			 GM_VERDICT_OK);
	assert_int_equal(res.emulate_scale, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(ok_card),
		cmocka_unit_test(aliasing_sizes),
		cmocka_unit_test(lost_writes),
		cmocka_unit_test(stuck_bits),
		cmocka_unit_test(report_smaller_than_claim),
		cmocka_unit_test(legitimate_reductions),
		cmocka_unit_test(no_nvml),
		cmocka_unit_test(report_keys),
		cmocka_unit_test(limit_and_seed),
		cmocka_unit_test(parse_errors),
		cmocka_unit_test(claimed_gb_is_gib),
		cmocka_unit_test(large_card_scaled),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
