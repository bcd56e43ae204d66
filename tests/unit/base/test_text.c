/* Unit tests for base/text.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "text.h"

static void distance(void **state)
{
	(void)state;
	assert_int_equal(gm_text_distance("kitten", "sitting"), 3);
	assert_int_equal(gm_text_distance("", "abc"), 3);
	assert_int_equal(gm_text_distance("ABC", "abc"), 0);
}

static void suggest(void **state)
{
	const char *keys[] = {"hidden_size", "layers", "vocab_size"};

	(void)state;
	assert_string_equal(gm_text_suggest("hiden_size", keys, 3),
			    "hidden_size");
	assert_string_equal(gm_text_suggest("layer", keys, 3), "layers");
	assert_null(gm_text_suggest("optimizer", keys, 3));
}

static void copy(void **state)
{
	char buf[4];

	(void)state;
	gm_text_copy(buf, sizeof(buf), "abcdef");
	assert_string_equal(buf, "abc");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(distance),
		cmocka_unit_test(suggest),
		cmocka_unit_test(copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
