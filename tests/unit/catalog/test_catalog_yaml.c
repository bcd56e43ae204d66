/*
 * Unit tests for catalog/catalog_yaml.c (gm_catalog_load): models/gpus.yaml
 * loads to exactly the built-in table, a small catalog file overrides it,
 * per-entry context overrides, 'multiprocessors' optional there but
 * required in the built-in catalog, and files that cannot be read. Malformed
 * files with their messages are in suite badinput (check_bad.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog_internal.h"
#include "error.h"
#include "units.h"

#ifndef GM_GPUS_YAML
#error "GM_GPUS_YAML (path of models/gpus.yaml) must be defined"
#endif

static void same_gpu(const struct gm_gpu *a, const struct gm_gpu *b)
{
	assert_string_equal(a->name, b->name);
	assert_int_equal(a->n_aliases, b->n_aliases);
	for (size_t j = 0; j < a->n_aliases; j++)
		assert_string_equal(a->aliases[j], b->aliases[j]);
	assert_string_equal(a->marketed, b->marketed);
	assert_int_equal(a->marketed_bytes, b->marketed_bytes);
	assert_int_equal(a->total_bytes, b->total_bytes);
	assert_int_equal(a->total_other_ecc_bytes, b->total_other_ecc_bytes);
	assert_int_equal(a->total_legacy_bytes, b->total_legacy_bytes);
	assert_int_equal(a->cuda_total_bytes, b->cuda_total_bytes);
	assert_int_equal(a->total_estimate, b->total_estimate);
	assert_int_equal(a->ecc_default_on, b->ecc_default_on);
	assert_string_equal(a->memory_type, b->memory_type);
	assert_true(a->bandwidth_gbps == b->bandwidth_gbps);
	assert_true(a->bf16_tflops == b->bf16_tflops);
	assert_int_equal(a->bf16_is_fp16, b->bf16_is_fp16);
	assert_string_equal(a->architecture, b->architecture);
	assert_int_equal(a->cc_major, b->cc_major);
	assert_int_equal(a->cc_minor, b->cc_minor);
	assert_int_equal(a->multiprocessors, b->multiprocessors);
	assert_int_equal(a->pci_device_id, b->pci_device_id);
	assert_string_equal(a->form_factor, b->form_factor);
	assert_int_equal(a->cuda_context_bytes, b->cuda_context_bytes);
	assert_int_equal(a->cuda_context_inference_bytes,
			 b->cuda_context_inference_bytes);
	assert_int_equal(a->cuda_context_estimate, b->cuda_context_estimate);
	assert_string_equal(a->cuda_context_source, b->cuda_context_source);
	assert_true(a->tolerance == b->tolerance);
	assert_string_equal(a->source, b->source);
	assert_string_equal(a->notes, b->notes);
}

/* The generated table is what the loader reads from the same file. */
static void builtin_matches_yaml(void **state)
{
	const struct gm_catalog *builtin = gm_catalog_builtin();
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};

	(void)state;
	assert_int_equal(gm_catalog_load(&cat, GM_GPUS_YAML, &diag), 0);
	assert_int_equal(cat.n, builtin->n);
	assert_int_equal(cat.n_archs, builtin->n_archs);
	for (size_t i = 0; i < cat.n_archs; i++) {
		assert_string_equal(cat.archs[i].name, builtin->archs[i].name);
		assert_int_equal(cat.archs[i].cuda_context_bytes,
				 builtin->archs[i].cuda_context_bytes);
		assert_string_equal(cat.archs[i].source,
				    builtin->archs[i].source);
	}
	for (size_t i = 0; i < cat.n; i++)
		same_gpu(&cat.gpus[i], &builtin->gpus[i]);
	gm_catalog_free(&cat);
	assert_null(cat.owned);
	gm_catalog_free(&cat); /* twice is harmless */
	gm_catalog_free(NULL);
}

/* Write text to a temporary file; returns its path (static buffer). */
static const char *temp_file(const char *text)
{
	static char path[64];
	FILE *fp;
	int fd;

	strcpy(path, "/tmp/gm-catalog-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
	return path;
}

static const char small[] =
	"architectures:\n"
	"  - name: future\n"
	"    cuda_context_mib: 1000\n"
	"    cuda_context_inference_mib: 900\n"
	"    measured_on: Example X1\n"
	"    source: a test\n"
	"gpus:\n"
	"  - name: Example X1\n"
	"    aliases: [x1]\n"
	"    architecture: future\n"
	"    compute_capability: \"11.2\"\n"
	"    marketed: 100 GB\n"
	"    total_mib: 95000\n"
	"    ecc_default_on: false\n"
	"    memory_type: HBM3e\n"
	"    bandwidth_gbps: 1234.5\n"
	"    bf16_tflops: 0\n"
	"    tolerance: 0\n"
	"    source: a test\n"
	"  - name: Example X2\n"
	"    aliases: []\n"
	"    architecture: future\n"
	"    compute_capability: \"11.2\"\n"
	"    multiprocessors: 1024\n"
	"    marketed: 50GiB\n"
	"    total_mib: 51200\n"
	"    ecc_default_on: true\n"
	"    memory_type: GDDR7\n"
	"    bandwidth_gbps: 1000\n"
	"    bf16_tflops: 10\n"
	"    tolerance: 0.02\n"
	"    cuda_context_mib: 300\n"
	"    cuda_context_inference_mib: 200\n"
	"    source: a test\n"
	"    notes: own context\n";

static void small_catalog(void **state)
{
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};
	const struct gm_gpu *g;
	const char *path = temp_file(small);

	(void)state;
	assert_int_equal(gm_catalog_load(&cat, path, &diag), 0);
	unlink(path);
	assert_int_equal(cat.n, 2);
	g = gm_catalog_find(&cat, "X1");
	assert_non_null(g);
	assert_string_equal(g->name, "Example X1");
	assert_int_equal(g->cc_major, 11);
	assert_int_equal(g->cc_minor, 2);
	/* 'multiprocessors' is optional in a user's file: 0, not known;
	 * so is the threads per SM of a capability not in the table. */
	assert_int_equal(g->multiprocessors, 0);
	assert_int_equal(gm_gpu_threads_per_sm(g), 0);
	assert_int_equal(g->marketed_bytes, 100 * GM_GB);
	assert_int_equal(g->total_bytes, 95000 * GM_MiB);
	assert_true(g->bandwidth_gbps == 1234.5);
	assert_int_equal(g->pci_device_id, 0);
	assert_string_equal(g->form_factor, "");
	assert_string_equal(g->notes, "");
	assert_int_equal(g->cuda_context_bytes, 1000 * GM_MiB);
	assert_false(g->cuda_context_estimate); /* measured_on matches */
	assert_int_equal(gm_gpu_min_total(g), 95000 * GM_MiB);
	/* Not in the built-in catalog, and the built-in not in this. */
	assert_null(gm_catalog_find(NULL, "x1"));
	assert_null(gm_catalog_find(&cat, "h200"));
	g = gm_catalog_find(&cat, "example-x2");
	assert_non_null(g);
	assert_int_equal(g->n_aliases, 0);
	assert_null(g->aliases[0]);
	assert_int_equal(g->multiprocessors, 1024); /* the most accepted */
	assert_int_equal(g->marketed_bytes, 50 * GM_GiB);
	assert_int_equal(g->cuda_context_bytes, 300 * GM_MiB);
	assert_int_equal(g->cuda_context_inference_bytes, 200 * GM_MiB);
	assert_true(g->cuda_context_estimate);
	assert_string_equal(g->cuda_context_source, "a test");
	gm_catalog_free(&cat);
}

/*
 * The build-time generator loads models/gpus.yaml with builtin true: there
 * every GPU must give 'multiprocessors' (X1 above does not).
 */
static void builtin_requires_sms(void **state)
{
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};
	char want[256];
	const char *path = temp_file(small);

	(void)state;
	assert_int_equal(gm__catalog_load(&cat, path, true, &diag),
			 GM_EINVAL);
	snprintf(want, sizeof(want), "%s:8:5: GPU entry is missing "
		 "'multiprocessors' (required in the built-in catalog)",
		 path);
	assert_string_equal(diag.msg, want);
	assert_int_equal(cat.n, 0);
	assert_int_equal(gm__catalog_load(&cat, GM_GPUS_YAML, true, &diag),
			 0);
	gm_catalog_free(&cat);
	assert_int_equal(gm_catalog_load(&cat, path, &diag), 0);
	gm_catalog_free(&cat);
	unlink(path);
}

/* A new card that names a built-in architecture, and a replaced one. */
static const char over[] =
	"gpus:\n"
	"  - name: Test GPU 12GB\n"
	"    aliases: [test-12gb]\n"
	"    architecture: hopper\n"
	"    compute_capability: \"9.0\"\n"
	"    marketed: 12 GB\n"
	"    total_mib: 12288\n"
	"    ecc_default_on: true\n"
	"    memory_type: HBM3e\n"
	"    bandwidth_gbps: 4800\n"
	"    bf16_tflops: 989\n"
	"    tolerance: 0.01\n"
	"    source: test data\n"
	"  - name: nvidia h200\n"
	"    aliases: [h200]\n"
	"    architecture: hopper\n"
	"    compute_capability: \"9.0\"\n"
	"    marketed: 141 GB\n"
	"    total_mib: 143000\n"
	"    ecc_default_on: true\n"
	"    memory_type: HBM3e\n"
	"    bandwidth_gbps: 4800\n"
	"    bf16_tflops: 989\n"
	"    tolerance: 0.01\n"
	"    source: test data\n";

static void load_over_adds_and_replaces(void **state)
{
	const struct gm_catalog *b = gm_catalog_builtin();
	const char *path = temp_file(over);
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};
	const struct gm_gpu *t, *h, *v;

	(void)state;
	assert_int_equal(gm_catalog_load_over(&cat, path, NULL, &diag), 0);
	/* every built-in GPU, one replaced, one added */
	assert_int_equal(cat.n, b->n + 1);
	assert_int_equal(cat.n_archs, b->n_archs);
	t = gm_catalog_find(&cat, "test-12gb");
	assert_non_null(t);
	assert_int_equal(t->total_bytes, 12288 * GM_MiB);
	/* the built-in architecture's context */
	assert_int_equal(t->cuda_context_bytes,
			 gm_catalog_find(NULL, "h200")->cuda_context_bytes);
	h = gm_catalog_find(&cat, "NVIDIA H200");
	assert_non_null(h);
	assert_int_equal(h->total_bytes, 143000 * GM_MiB);
	/* in the built-in's place, not appended */
	assert_ptr_equal(h, &cat.gpus[gm_catalog_find(NULL, "h200") -
					b->gpus]);
	v = gm_catalog_find(&cat, "v100-sxm2-32gb");
	assert_non_null(v);
	assert_string_equal(v->source,
			    gm_catalog_find(NULL, "v100-sxm2-32gb")->source);
	gm_catalog_free(&cat);
	unlink(path);
}

/* An alias or PCI id of another built-in GPU: the file's line:column. */
static void load_over_conflicts(void **state)
{
	static const char alias[] =
		"gpus:\n"
		"  - name: Test GPU\n"
		"    aliases: [test, h100]\n"
		"    architecture: hopper\n"
		"    compute_capability: \"9.0\"\n"
		"    marketed: 12 GB\n"
		"    total_mib: 12288\n"
		"    ecc_default_on: true\n"
		"    memory_type: HBM3e\n"
		"    bandwidth_gbps: 4800\n"
		"    bf16_tflops: 989\n"
		"    tolerance: 0.01\n"
		"    source: test data\n";
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};
	char want[512];
	const char *path = temp_file(alias);

	(void)state;
	assert_int_equal(gm_catalog_load_over(&cat, path, NULL, &diag),
			 GM_EINVAL);
	snprintf(want, sizeof(want), "%s:3:21: 'h100' also names 'NVIDIA "
		 "H100 80GB HBM3' (built-in catalog)", path);
	assert_string_equal(diag.msg, want);
	assert_int_equal(cat.n, 0);
	unlink(path);

	path = temp_file("gpus:\n"
			 "  - name: Test GPU\n"
			 "    aliases: [test]\n"
			 "    architecture: hopper\n"
			 "    compute_capability: \"9.0\"\n"
			 "    pci_device_id: 0x2335\n"
			 "    marketed: 12 GB\n"
			 "    total_mib: 12288\n"
			 "    ecc_default_on: true\n"
			 "    memory_type: HBM3e\n"
			 "    bandwidth_gbps: 4800\n"
			 "    bf16_tflops: 989\n"
			 "    tolerance: 0.01\n"
			 "    source: test data\n");
	assert_int_equal(gm_catalog_load_over(&cat, path, NULL, &diag),
			 GM_EINVAL);
	snprintf(want, sizeof(want), "%s:2:5: pci_device_id 0x2335 is also "
		 "'NVIDIA H200' (built-in catalog)", path);
	assert_string_equal(diag.msg, want);
	unlink(path);

	/* an architecture neither the file nor the built-in has */
	path = temp_file("gpus:\n"
			 "  - name: Test GPU\n"
			 "    aliases: [test]\n"
			 "    architecture: hoper\n"
			 "    compute_capability: \"9.0\"\n"
			 "    marketed: 12 GB\n"
			 "    total_mib: 12288\n"
			 "    ecc_default_on: true\n"
			 "    memory_type: HBM3e\n"
			 "    bandwidth_gbps: 4800\n"
			 "    bf16_tflops: 989\n"
			 "    tolerance: 0.01\n"
			 "    source: test data\n");
	assert_int_equal(gm_catalog_load_over(&cat, path, NULL, &diag),
			 GM_EINVAL);
	snprintf(want, sizeof(want), "%s:4:19: unknown architecture 'hoper' "
		 "(did you mean 'hopper'?); list it under 'architectures'",
		 path);
	assert_string_equal(diag.msg, want);
	unlink(path);
	/* without a base 'architectures' stays required */
	path = temp_file(over);
	assert_int_equal(gm_catalog_load(&cat, path, &diag), GM_EINVAL);
	unlink(path);
}

static void unreadable(void **state)
{
	struct gm_catalog cat;
	struct gm_diag diag = {{0}};

	(void)state;
	assert_int_equal(gm_catalog_load(&cat, "/nonexistent/gpus.yaml",
					 &diag), GM_EIO);
	assert_string_equal(diag.msg, "/nonexistent/gpus.yaml: No such file "
			    "or directory");
	assert_int_equal(cat.n, 0);
	assert_null(cat.gpus);
	/* A directory opens but cannot be read as YAML. */
	assert_int_not_equal(gm_catalog_load(&cat, "/", &diag), 0);
	assert_int_equal(cat.n, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(builtin_matches_yaml),
		cmocka_unit_test(small_catalog),
		cmocka_unit_test(builtin_requires_sms),
		cmocka_unit_test(load_over_adds_and_replaces),
		cmocka_unit_test(load_over_conflicts),
		cmocka_unit_test(unreadable),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
