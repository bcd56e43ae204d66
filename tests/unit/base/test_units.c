/* Unit tests for base/units.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "error.h"
#include "units.h"

static uint64_t parse_ok(const char *text)
{
	uint64_t b = 1;

	assert_int_equal(gm_size_parse(text, &b), 0);
	return b;
}

static void decimal_and_binary(void **state)
{
	(void)state;
	assert_true(parse_ok("80GB") == 80000000000ULL);
	assert_true(parse_ok("74.5GiB") == 79993765888ULL);
	assert_true(parse_ok("81920MiB") == 85899345920ULL);
	assert_true(parse_ok("4096") == 4096);
	assert_true(parse_ok("1K") == 1024);
	assert_true(parse_ok("2 GiB") == 2147483648ULL);
	assert_true(parse_ok("1.5kB") == 1500);
	assert_true(parse_ok("0") == 0);
	assert_true(parse_ok("1TB") == 1000000000000ULL);
}

/* A card's claimed capacity: the maker's "80 GB" is 80 GiB (an A100
 * 80GB reports 81920 MiB); binary spellings and bytes as ever. */
static void claimed_capacity(void **state)
{
	uint64_t b = 0;

	(void)state;
	assert_int_equal(gm_claimed_size_parse("80GB", &b), 0);
	assert_true(b == 80 * GM_GiB);
	assert_int_equal(gm_claimed_size_parse("8 GB", &b), 0);
	assert_true(b == 8 * GM_GiB);
	assert_int_equal(gm_claimed_size_parse("1TB", &b), 0);
	assert_true(b == GM_TiB);
	assert_int_equal(gm_claimed_size_parse("512MB", &b), 0);
	assert_true(b == 512 * GM_MiB);
	assert_int_equal(gm_claimed_size_parse("74.5GiB", &b), 0);
	assert_true(b == 79993765888ULL);
	assert_int_equal(gm_claimed_size_parse("4096", &b), 0);
	assert_true(b == 4096);
	assert_int_equal(gm_claimed_size_parse("80 gigs", &b), GM_EINVAL);
	/* everywhere else GB stays 10^9 */
	assert_true(parse_ok("80GB") == 80000000000ULL);
}

static void rejects(void **state)
{
	uint64_t b;

	(void)state;
	assert_int_equal(gm_size_parse("", &b), GM_EINVAL);
	assert_int_equal(gm_size_parse("GB", &b), GM_EINVAL);
	assert_int_equal(gm_size_parse("12XB", &b), GM_EINVAL);
	assert_int_equal(gm_size_parse("-1GB", &b), GM_ERANGE);
	assert_int_equal(gm_size_parse("nan", &b), GM_EINVAL);
	assert_int_equal(gm_size_parse("inf", &b), GM_EINVAL);
	assert_int_equal(gm_size_parse("99999999TiB", &b), GM_ERANGE);
	assert_int_equal(gm_size_parse(NULL, &b), GM_EINVAL);
}

static void fractions(void **state)
{
	uint64_t b;
	double f;

	(void)state;
	assert_int_equal(gm_size_or_fraction_parse("0.25", &b, &f), 0);
	assert_true(f == 0.25 && b == 0);
	assert_int_equal(gm_size_or_fraction_parse("40GiB", &b, &f), 0);
	assert_true(f == 0 && b == 40 * GM_GiB);
	assert_int_equal(gm_size_or_fraction_parse("1.5", &b, &f), GM_ERANGE);
	assert_int_equal(gm_size_or_fraction_parse("0.0", &b, &f), GM_ERANGE);
}

static void formatting(void **state)
{
	char buf[32];

	(void)state;
	assert_string_equal(gm_size_format(buf, sizeof(buf), 512), "512 B");
	assert_string_equal(gm_size_format(buf, sizeof(buf), 1536), "1.50 KiB");
	assert_string_equal(gm_size_format(buf, sizeof(buf), 80 * GM_GiB),
			    "80.00 GiB");
	assert_true(gm_gib(GM_GiB / 2) == 0.5);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(decimal_and_binary),
		cmocka_unit_test(claimed_capacity),
		cmocka_unit_test(rejects),
		cmocka_unit_test(fractions),
		cmocka_unit_test(formatting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
