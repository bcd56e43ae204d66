/* Unit tests of the preload library's pure parts (no driver needed). */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "account.h"
#include "error.h"
#include "hooks.h"
#include "options.h"
#include "ptrmap.h"

static void test_variants(void **state)
{
	(void)state;
	assert_string_equal(gm_pl_proc_variant("cuMemAlloc", 12000, 0),
			    "cuMemAlloc_v2");
	assert_null(gm_pl_proc_variant("cuMemAlloc", 3010, 0));
	assert_string_equal(gm_pl_proc_variant("cuMemGetInfo", 13000, 0),
			    "cuMemGetInfo_v2");
	assert_string_equal(gm_pl_proc_variant("cuMemAllocAsync", 13000, 2),
			    "cuMemAllocAsync_ptsz");
	assert_string_equal(gm_pl_proc_variant("cuMemFreeAsync", 13000, 1),
			    "cuMemFreeAsync");
	assert_string_equal(gm_pl_proc_variant("cuGetProcAddress", 12000, 0),
			    "cuGetProcAddress_v2");
	assert_string_equal(gm_pl_proc_variant("cuGetProcAddress", 11080, 0),
			    "cuGetProcAddress");
	assert_null(gm_pl_proc_variant("cuLaunchKernel", 13000, 0));
	assert_int_equal(gm_pl_hook_find("cuMemCreate"), GM_PL_HOOK_MEM_CREATE);
	assert_int_equal(gm_pl_hook_find("cuMemAlloc"), -1);
}

static void test_path(void **state)
{
	char out[64];

	(void)state;
	assert_int_equal(gm_pl_path_expand(out, sizeof(out), "r-%p-%r.json",
					   42, 3), 0);
	assert_string_equal(out, "r-42-3.json");
	assert_int_equal(gm_pl_path_expand(out, sizeof(out), "%r%%", 1, -1),
			 0);
	assert_string_equal(out, "none-1%");
	assert_int_equal(gm_pl_path_expand(out, sizeof(out), "r-%r", 77, 0),
			 0);
	assert_string_equal(out, "r-0");
	assert_int_equal(gm_pl_path_expand(out, 4, "abcd", 1, 1), GM_ERANGE);
}

static void test_opts(void **state)
{
	char *env[] = {"GPUMEM_FRACTION=1.5", "GPUMEM_LIMIT=2GiB",
		       "GPUMEM_ON_UNDERSIZED=fail", "SLURM_PROCID=7",
		       "GPUMEM_REPORT=/tmp/x-%r", NULL};
	struct gm_pl_opts o;

	(void)state;
	gm_pl_opts_parse(env, &o);
	assert_int_equal(o.frac_den, 0); /* 1.5 refused, and said so */
	assert_non_null(strstr(o.bad, "GPUMEM_FRACTION=1.5"));
	assert_int_equal(o.limit, 2ULL << 30);
	assert_true(o.fail_undersized);
	assert_int_equal(o.rank, 7);
	assert_string_equal(o.report, "/tmp/x-%r");
	gm_pl_opts_parse(NULL, &o);
	assert_string_equal(o.bad, "");
	assert_int_equal(o.mode, GM_PL_MODE_LIMIT);
	assert_int_equal(o.rank, -1);
}

/* GPUMEM_CLAIMED is a claimed capacity: "80GB" is 80 GiB. */
static void test_opts_claimed(void **state)
{
	char *env[] = {"GPUMEM_CLAIMED=80GB", NULL};
	char *bin[] = {"GPUMEM_CLAIMED=76GiB", NULL};
	struct gm_pl_opts o;

	(void)state;
	gm_pl_opts_parse(env, &o);
	assert_int_equal(o.claimed, 80ULL << 30);
	gm_pl_opts_parse(bin, &o);
	assert_int_equal(o.claimed, 76ULL << 30);
}

/* Cap settings that cannot be read fail closed; fractions are exact. */
static void test_opts_bad(void **state)
{
	static const char *const bad[] = {
		"GPUMEM_FRACTION=0.5 ", "GPUMEM_FRACTION=50%",
		"GPUMEM_FRACTION=0,5", "GPUMEM_FRACTION= 0.5",
		"GPUMEM_FRACTION=0", "GPUMEM_FRACTION=1.0000001",
		"GPUMEM_FRACTION=inf", "GPUMEM_FRACTION=0x1p-1",
		"GPUMEM_FRACTION=5e -1", "GPUMEM_FRACTION=0.5e",
		"GPUMEM_LIMIT=50%", "GPUMEM_LIMIT=40 GiB ", "GPUMEM_LIMIT=0",
	};
	struct gm_pl_opts o;
	uint64_t n, d;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		char *env[] = {(char *)bad[i], NULL};
		size_t name = strchr(bad[i], '=') - bad[i];

		gm_pl_opts_caps(env, &o);
		assert_int_equal(strncmp(o.bad, bad[i], name), 0);
	}
	/* the reason names the unit whose case is wrong */
	{
		char *env[] = {(char *)"GPUMEM_LIMIT=80gb", NULL};

		gm_pl_opts_caps(env, &o);
		assert_non_null(strstr(o.bad, "GPUMEM_LIMIT=80gb is not a "
				       "size: unknown unit 'gb' (units: B,"));
	}
	assert_int_equal(gm_pl_fraction_parse("0.29", &n, &d), 0);
	assert_int_equal(n, 29);
	assert_int_equal(d, 100);
	assert_int_equal(gm_pl_fraction_parse(".5", &n, &d), 0);
	assert_true(n * 2 == d);
	assert_int_equal(gm_pl_fraction_parse("25e-2", &n, &d), 0);
	assert_true(n * 4 == d);
	assert_int_equal(gm_pl_fraction_parse("1", &n, &d), 0);
	assert_true(n == d);
	assert_int_equal(gm_pl_fraction_parse("1.000", &n, &d), 0);
	assert_true(n == d);
	assert_int_equal(gm_pl_fraction_parse("00.0001", &n, &d), 0);
	assert_true(n == 1 && d == 10000);
}

/* PyTorch's allocator setting, read as PyTorch's ConfigTokenizer and
 * parseArgs read it: only expandable_segments matters to the pool. */
static void test_alloc_conf(void **state)
{
	static const struct {
		const char *v;
		bool on;
	} ok[] = {
		{"expandable_segments:True", true},
		{" expandable_segments : True ", true},
		{"expandable_ segments:Tr ue", true}, /* spaces dropped */
		{"max_split_size_mb:128,expandable_segments:True", true},
		{"roundup_power2_divisions:[256:1,512:2,>:4],"
		 "expandable_segments:True,garbage_collection_threshold:0.6",
		 true},
		{"expandable_segments:True,expandable_segments:False", false},
		{"expandable_segments:False", false},
		{"max_split_size_mb:128", false},
		{"", false},
		{"backend:cudaMallocAsync", false},
	};
	static const struct {
		const char *v, *why;
	} bad[] = {
		{"expandable_segments:true", "expandable_segments:true is not "
		 "True or False (PyTorch's spelling)"},
		{"expandable_segments:TRUE", "is not True or False"},
		{"expandable_segments:1", "is not True or False"},
		{"expandable_segments:[True]", "expandable_segments:[...] is"},
		{"expandable_segments", "expandable_segments has no ':'"},
		{"expandable_segments:", "expandable_segments has no value"},
		{"expandable_segments:,x:1", "has no value"},
		{"expandable_segments=True", "has no ':'"},
		{"expandable_segments:True;x:1", "is not True or False"},
		{"expandable_segments:True x:1", "is not True or False"},
		{"expandable_segments:True:x", "':' after the value of "
		 "expandable_segments"},
		{",expandable_segments:True", "',' where a key"},
		{"expandable_segments:True,,", "',' where a key"},
		{"roundup_power2_divisions:[256:1,expandable_segments:True",
		 "no closing ']'"},
	};
	char why[256], longv[300];
	bool on;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		on = !ok[i].on;
		assert_int_equal(gm_pl_alloc_conf_parse(ok[i].v, &on, why,
							sizeof(why)), 0);
		assert_int_equal(on, ok[i].on);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		on = true;
		why[0] = '\0';
		assert_int_equal(gm_pl_alloc_conf_parse(bad[i].v, &on, why,
							sizeof(why)),
				 GM_EINVAL);
		assert_false(on);
		if (!strstr(why, bad[i].why))
			fail_msg("%s: '%s' lacks '%s'", bad[i].v, why,
				 bad[i].why);
	}
	/* a token longer than the lexer keeps matches nothing */
	memset(longv, 'x', sizeof(longv));
	memcpy(longv, "expandable_segments:True", 24);
	longv[sizeof(longv) - 1] = '\0';
	assert_int_equal(gm_pl_alloc_conf_parse(longv, &on, why, sizeof(why)),
			 GM_EINVAL);
	assert_false(on);
	assert_int_equal(gm_pl_alloc_conf_parse(NULL, &on, why, sizeof(why)),
			 0);
	assert_false(on);
}

/* Cache mode reads PYTORCH_CUDA_ALLOC_CONF, else PYTORCH_ALLOC_CONF;
 * limit mode neither. */
static void test_opts_alloc_conf(void **state)
{
	char *cache[] = {"GPUMEM_MODE=cache",
			 "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
			 NULL};
	char *limit[] = {"PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
			 NULL};
	char *generic[] = {"GPUMEM_MODE=cache",
			   "PYTORCH_ALLOC_CONF=expandable_segments:True", NULL};
	char *both[] = {"GPUMEM_MODE=cache",
			"PYTORCH_CUDA_ALLOC_CONF=max_split_size_mb:64",
			"PYTORCH_ALLOC_CONF=expandable_segments:True", NULL};
	char *bad[] = {"GPUMEM_MODE=cache",
		       "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:yes", NULL};
	struct gm_pl_opts o;

	(void)state;
	gm_pl_opts_parse(cache, &o);
	assert_true(o.virtual_segments);
	gm_pl_opts_parse(limit, &o);
	assert_false(o.virtual_segments);
	gm_pl_opts_parse(generic, &o);
	assert_true(o.virtual_segments);
	gm_pl_opts_parse(both, &o);
	assert_false(o.virtual_segments);
	gm_pl_opts_parse(bad, &o);
	assert_false(o.virtual_segments);
	assert_string_equal(o.bad, ""); /* not a cap setting */
}

static void test_ptrmap(void **state)
{
	static struct gm_ptrmap m;
	struct gm_ptrmap_entry e;

	(void)state;
	gm_ptrmap_init(&m);
	for (uint64_t i = 1; i <= 20000; i++)
		assert_int_equal(gm_ptrmap_put(&m, i << 9, i, 0, 1), 0);
	assert_int_equal(gm_ptrmap_count(&m), 20000);
	for (uint64_t i = 1; i <= 20000; i += 2) {
		assert_true(gm_ptrmap_take(&m, i << 9, &e));
		assert_int_equal(e.size, i);
	}
	assert_false(gm_ptrmap_take(&m, 1 << 9, &e));
	assert_int_equal(gm_ptrmap_count(&m), 10000);
	gm_ptrmap_reset(&m);
	assert_int_equal(gm_ptrmap_count(&m), 0);
}

static void test_cap_and_clamp(void **state)
{
	struct gm_pl_opts o = {.frac_num = 25, .frac_den = 100,
			       .limit = 30ULL << 30};
	static struct gm_pl_dev d;
	uint64_t f = 70ULL << 30, t = 80ULL << 30;

	(void)state;
	gm_pl_dev_setup(&d, &o, 0, "Fake", 0, 80ULL << 30);
	assert_int_equal(d.cap, 20ULL << 30); /* min(limit, 0.25 x 80) */
	assert_int_equal(gm_pl_charge(&d, 15ULL << 30, GM_PL_KIND_DEVICE), 0);
	assert_int_equal(gm_pl_charge(&d, 6ULL << 30, GM_PL_KIND_DEVICE),
			 GM_ELIMIT);
	gm_pl_clamp_info(&d, &f, &t);
	assert_int_equal(t, 20ULL << 30);
	assert_int_equal(f, 5ULL << 30);
	assert_string_equal(gm_pl_oom_verdict(&d), "cap");
	assert_int_equal(atomic_load(&d.peak_reserved), 15ULL << 30);
}

/* The fraction cap is floor(F x total) with F as written: 0.29 of
 * 100 MiB is exactly 30408704 bytes (0.29 * 104857600 in binary floating
 * point is 30408703.999...); a setting that cannot be read refuses. */
static void test_fraction_cap(void **state)
{
	struct gm_pl_opts o = {0};
	static struct gm_pl_dev d, e;

	(void)state;
	assert_int_equal(gm_pl_fraction_parse("0.29", &o.frac_num,
					      &o.frac_den), 0);
	gm_pl_dev_setup(&d, &o, 0, "Fake", 0, 100ULL << 20);
	assert_int_equal(d.cap, 30408704);
	assert_int_equal(gm_pl_charge(&d, 30408704, GM_PL_KIND_DEVICE), 0);
	gm_pl_opts_caps((char *[]){"GPUMEM_LIMIT=lots", NULL}, &o);
	gm_pl_dev_setup(&e, &o, 0, "Fake", 0, 100ULL << 20);
	assert_int_equal(gm_pl_charge(&e, 1, GM_PL_KIND_DEVICE), GM_ELIMIT);
	assert_int_equal(gm_pl_reserve(&e, 1), GM_ELIMIT);
}

/* Cache mode's accounting: pool segments are reserved only, its blocks
 * allocated only, and both share the cap with pass-through memory. */
static uint64_t released;

static bool fake_release(struct gm_pl_dev *d)
{
	/* Stands for the pool giving back a cached 8 GiB segment. */
	if (atomic_load(&d->by_kind[GM_PL_KIND_POOL]) < (8ULL << 30))
		return false;
	gm_pl_unreserve(d, 8ULL << 30);
	released += 8ULL << 30;
	return true;
}

static void test_cache_accounting(void **state)
{
	struct gm_pl_opts o = {.limit = 20ULL << 30};
	static struct gm_pl_dev d;

	(void)state;
	gm_pl_dev_setup(&d, &o, 0, "Fake", 0, 80ULL << 30);
	assert_int_equal(gm_pl_reserve(&d, 8ULL << 30), 0);
	gm_pl_use(&d, 1ULL << 30, 1000);
	assert_int_equal(atomic_load(&d.reserved), 8ULL << 30);
	assert_int_equal(atomic_load(&d.allocated), 1ULL << 30);
	gm_pl_unuse(&d, 1ULL << 30);
	/* Pass-through: 8 + 10 fits, 8 + 10 + 4 does not... */
	assert_int_equal(gm_pl_charge(&d, 10ULL << 30, GM_PL_KIND_VMM), 0);
	assert_int_equal(gm_pl_reserve(&d, 4ULL << 30), GM_ELIMIT);
	assert_int_equal(atomic_load(&d.oom_cap), 0); /* the pool counts */
	/* ...unless the cache is given back first (then one retry). */
	gm__pl.release_cached = fake_release;
	assert_int_equal(gm_pl_charge(&d, 4ULL << 30, GM_PL_KIND_VMM), 0);
	assert_int_equal(released, 8ULL << 30);
	assert_int_equal(atomic_load(&d.reserved), 14ULL << 30);
	assert_int_equal(gm_pl_charge(&d, 7ULL << 30, GM_PL_KIND_VMM),
			 GM_ELIMIT);
	assert_int_equal(atomic_load(&d.oom_cap), 1);
	assert_int_equal(atomic_load(&d.peak_reserved), 18ULL << 30);
	gm__pl.release_cached = NULL;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_variants),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_opts),
		cmocka_unit_test(test_opts_claimed),
		cmocka_unit_test(test_opts_bad),
		cmocka_unit_test(test_alloc_conf),
		cmocka_unit_test(test_opts_alloc_conf),
		cmocka_unit_test(test_fraction_cap),
		cmocka_unit_test(test_ptrmap),
		cmocka_unit_test(test_cap_and_clamp),
		cmocka_unit_test(test_cache_accounting),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
