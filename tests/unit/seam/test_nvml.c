/*
 * Unit tests for the NVML seam's loader (seam/nvml.c): where it looks,
 * in which order, and that a failure says why in dlerror()'s words.
 */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "nvml.h"

/* What dlopen says of path, as the loader should report it. */
static void dl_why(const char *path, char *out, size_t n)
{
	void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

	assert_null(h);
	snprintf(out, n, "%s", dlerror());
}

/* $GPUMEM_LIBNVML names one file: only it is tried, and the message
 * carries the path and dlerror()'s text. */
static void explicit_missing_path(void **state)
{
	const char *path = "/nonexistent/gpumem-test/libnvidia-ml.so.1";
	struct gm_nvml nv;
	struct gm_diag d = {{0}};
	char why[512];

	(void)state;
	dl_why(path, why, sizeof(why));
	setenv("GPUMEM_LIBNVML", path, 1);
	assert_int_equal(gm_nvml_open(&nv, NULL, &d), GM_ENODEV);
	unsetenv("GPUMEM_LIBNVML");
	assert_null(nv.lib);
	assert_non_null(strstr(d.msg, path));
	assert_non_null(strstr(d.msg, why));
	assert_null(strstr(d.msg, "/usr/lib64/"));
	/* "none" turns it off */
	setenv("GPUMEM_LIBNVML", "none", 1);
	assert_int_equal(gm_nvml_open(&nv, NULL, &d), GM_ENODEV);
	unsetenv("GPUMEM_LIBNVML");
	assert_non_null(strstr(d.msg, "disabled"));
}

/* The order: the loader's search, the driver directories, then the
 * loaded driver library's directory (once). */
static void search_order(void **state)
{
	char c[8][GM__NVML_PATH];
	const char *want[] = {
		"libnvidia-ml.so.1",
		"/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
		"/usr/lib64/libnvidia-ml.so.1",
		"/usr/local/nvidia/lib64/libnvidia-ml.so.1",
		"/usr/lib/wsl/lib/libnvidia-ml.so.1",
		"/opt/driver/lib/libnvidia-ml.so.1",
	};

	(void)state;
	assert_int_equal(gm__nvml_candidates(NULL, c, 8), 5);
	assert_int_equal(gm__nvml_candidates("/opt/driver/lib/", c, 8), 6);
	for (int i = 0; i < 6; i++)
		assert_string_equal(c[i], want[i]);
	/* a driver in a usual directory is not tried twice */
	assert_int_equal(gm__nvml_candidates("/usr/lib64/", c, 8), 5);
	/* room for fewer: the first ones */
	assert_int_equal(gm__nvml_candidates("/opt/driver/lib/", c, 2), 2);
	assert_string_equal(c[1], want[1]);
}

/* A function's address as data, for dladdr (no pedantic cast). */
static const void *addr_of(int (*f)(const char *, const struct CMUnitTest *,
				    size_t, CMFixtureFunction,
				    CMFixtureFunction))
{
	const void *p;

	memcpy(&p, &f, sizeof(p));
	return p;
}

/* dladdr finds the directory of a loaded library: cmocka's. */
static void lib_dir_of_symbol(void **state)
{
	const void *sym = addr_of(_cmocka_run_group_tests);
	char dir[GM__NVML_PATH], path[GM__NVML_PATH + 32];
	Dl_info info;

	(void)state;
	assert_int_equal(gm__lib_dir(sym, dir, sizeof(dir)),
			 1);
	assert_true(dladdr(sym, &info));
	assert_int_equal(strncmp(dir, info.dli_fname, strlen(dir)), 0);
	assert_null(strchr(info.dli_fname + strlen(dir), '/'));
	snprintf(path, sizeof(path), "%s%s", dir,
		 info.dli_fname + strlen(dir));
	assert_int_equal(access(path, R_OK), 0);
	assert_int_equal(gm__lib_dir(NULL, dir, sizeof(dir)), 0);
	assert_int_equal(gm__lib_dir(sym, dir, 4),
			 0);
}

/* Without a path: either NVML loads (a machine with a driver), or the
 * message gives the soname's dlerror() and the directories tried. */
static void default_search_says_why(void **state)
{
	struct gm_nvml nv;
	struct gm_diag d = {{0}};
	char why[512];
	void *h;

	(void)state;
	unsetenv("GPUMEM_LIBNVML");
	h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (h) {
		dlclose(h);
		skip(); /* a real NVML here: nothing to explain */
	}
	dl_why("libnvidia-ml.so.1", why, sizeof(why));
	if (gm_nvml_open(&nv, NULL, &d) == 0) {
		gm_nvml_close(&nv); /* found in a driver directory */
		return;
	}
	assert_non_null(strstr(d.msg, why));
	assert_non_null(strstr(d.msg, "/usr/lib/x86_64-linux-gnu/"));
	assert_non_null(strstr(d.msg, "/usr/lib/wsl/lib/"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(explicit_missing_path),
		cmocka_unit_test(search_order),
		cmocka_unit_test(lib_dir_of_symbol),
		cmocka_unit_test(default_search_says_why),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
