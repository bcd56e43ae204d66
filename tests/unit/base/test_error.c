/* Unit tests for base/error.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "error.h"

static void names_and_messages(void **state)
{
	(void)state;
	assert_string_equal(gm_err_name(GM_EINVAL), "GM_EINVAL");
	assert_string_equal(gm_strerror(GM_EDEVNOMEM), "out of device memory");
	assert_string_equal(gm_strerror(0), "success");
	assert_string_equal(gm_strerror(-999), "unknown error");
	assert_true(GM_EINVAL < 0 && GM_EBUSY < 0);
}

static void exit_codes(void **state)
{
	(void)state;
	assert_int_equal(gm_exit_code(0), GM_EXIT_OK);
	assert_int_equal(gm_exit_code(GM_EINVAL), GM_EXIT_USAGE);
	assert_int_equal(gm_exit_code(GM_EDEVICE), GM_EXIT_DEVICE);
	assert_int_equal(gm_exit_code(GM_ENODEV), GM_EXIT_DEVICE);
}

static void diag_formats(void **state)
{
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_diag_set(&d, GM_ERANGE, "%s:%d:%d: bad", "f.yaml",
				     3, 7),
			 GM_ERANGE);
	assert_string_equal(d.msg, "f.yaml:3:7: bad");
	assert_int_equal(gm_diag_set(NULL, GM_EIO, "x"), GM_EIO);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(names_and_messages),
		cmocka_unit_test(exit_codes),
		cmocka_unit_test(diag_formats),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
