/*
 * Unit tests for catalog/catalog.c and the built-in table generated from
 * models/gpus.yaml: lookups, aliases, normalized names, suggestions,
 * the undersized floor, and the completeness and uniqueness of entries.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>
#include <strings.h>

#include "catalog_internal.h"
#include "units.h"

static const struct gm_gpu *find(const char *name)
{
	return gm_catalog_find(NULL, name);
}

static void exact_names(void **state)
{
	(void)state;
	assert_string_equal(find("NVIDIA H200")->name, "NVIDIA H200");
	assert_string_equal(find("Tesla V100-SXM2-32GB")->name,
			    "Tesla V100-SXM2-32GB");
	assert_string_equal(find("NVIDIA A100-SXM4-80GB")->name,
			    "NVIDIA A100-SXM4-80GB");
	assert_string_equal(find("NVIDIA H100 80GB HBM3")->name,
			    "NVIDIA H100 80GB HBM3");
	assert_null(find(""));
	assert_null(find(NULL));
	assert_null(find("NVIDIA H300"));
}

static void aliases(void **state)
{
	(void)state;
	assert_string_equal(find("h200")->name, "NVIDIA H200");
	assert_string_equal(find("H200")->name, "NVIDIA H200");
	assert_string_equal(find("a100-80gb")->name, "NVIDIA A100-SXM4-80GB");
	assert_string_equal(find("v100-sxm2-32gb")->name,
			    "Tesla V100-SXM2-32GB");
	assert_string_equal(find("h100-sxm")->name, "NVIDIA H100 80GB HBM3");
	assert_string_equal(find("nvidia h200")->name, "NVIDIA H200");
	/* The planner's scenarios name these. */
	assert_non_null(find("Tesla V100-PCIE-32GB"));
	assert_non_null(find("NVIDIA A100-SXM4-40GB"));
}

static void normalized(void **state)
{
	char buf[GM__CATALOG_NORM_MAX];

	(void)state;
	assert_string_equal(gm__catalog_normalize(buf, sizeof(buf),
				"NVIDIA GeForce RTX 3090"), "rtx3090");
	assert_string_equal(gm__catalog_normalize(buf, sizeof(buf),
				"Tesla V100-SXM2-32GB"), "v100sxm232gb");
	assert_string_equal(gm__catalog_normalize(buf, sizeof(buf),
				"nvidia"), "");
	gm__catalog_normalize(buf, 4, "abcdef");
	assert_string_equal(buf, "abc");
	/* Spelled without the vendor words, other separators, any case. */
	assert_string_equal(find("A100 SXM4 80GB")->name,
			    "NVIDIA A100-SXM4-80GB");
	assert_string_equal(find("v100_sxm2_32gb")->name,
			    "Tesla V100-SXM2-32GB");
	assert_string_equal(find("h100 80gb hbm3")->name,
			    "NVIDIA H100 80GB HBM3");
	assert_string_equal(find("RTX 4090")->name,
			    "NVIDIA GeForce RTX 4090");
	assert_string_equal(find("NVIDIA RTX-6000-Ada")->name,
			    "NVIDIA RTX 6000 Ada Generation");
}

static void pci(void **state)
{
	(void)state;
	assert_string_equal(gm_catalog_find_pci(NULL, 0x2335)->name,
			    "NVIDIA H200");
	assert_string_equal(gm_catalog_find_pci(NULL, 0x20b2)->name,
			    "NVIDIA A100-SXM4-80GB");
	assert_null(gm_catalog_find_pci(NULL, 0));
	assert_null(gm_catalog_find_pci(NULL, 0xffff));
}

static bool listed(const char **out, size_t n, const char *want)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(out[i], want) == 0)
			return true;
	return false;
}

static void suggestions(void **state)
{
	const char *out[8];
	size_t n;

	(void)state;
	/* A typo: the closest GPU first, each written as its short name
	 * (the first alias) whichever name matched: one spelling. */
	n = gm_catalog_suggest(NULL, "h2000", out, 8);
	assert_true(n >= 2);
	assert_string_equal(out[0], "h200");
	assert_true(listed(out, n, "h20"));
	n = gm_catalog_suggest(NULL, "a100-80gb-sxm", out, 8);
	assert_true(n >= 1);
	assert_string_equal(out[0], "a100-sxm4-80gb");
	n = gm_catalog_suggest(NULL, "Tesla V100-SXM2-32G", out, 8);
	assert_true(n >= 1);
	assert_string_equal(out[0], "v100-sxm2-32gb");
	/* Ambiguous: every A100 contains it; one name per GPU, all short
	 * names (the alias a100-40gb and the nvidia-smi name "NVIDIA
	 * A100-PCIE-40GB" matched best before; neither is shown). */
	n = gm_catalog_suggest(NULL, "a100", out, 8);
	assert_int_equal(n, 4);
	assert_true(listed(out, n, "a100-sxm4-40gb"));
	assert_true(listed(out, n, "a100-sxm4-80gb"));
	assert_true(listed(out, n, "a100-pcie-40gb"));
	assert_true(listed(out, n, "a100-pcie-80gb"));
	for (size_t i = 0; i < n; i++)
		assert_non_null(gm_catalog_find(NULL, out[i]));
	/* Close but not containing: the neighbours in name. */
	n = gm_catalog_suggest(NULL, "rtx3080", out, 8);
	assert_int_equal(n, 3);
	assert_string_equal(out[0], "rtx-3090");
	/* A slice asked as CARD:PROFILE with the card's name short: the
	 * slices of that profile on a card of that name, not the closest
	 * spelling of another card's (h100:3g.40gb) */
	n = gm_catalog_suggest(NULL, "a100:3g.40gb", out, 8);
	assert_int_equal(n, 1);
	assert_string_equal(out[0], "a100-80gb:3g.40gb");
	n = gm_catalog_suggest(NULL, "a100:1g.5gb", out, 8);
	assert_true(n >= 1);
	assert_string_equal(out[0], "a100-40gb:1g.5gb");
	/* max is respected, and the best stay. */
	n = gm_catalog_suggest(NULL, "a100", out, 2);
	assert_int_equal(n, 2);
	/* Nothing close. */
	assert_int_equal(gm_catalog_suggest(NULL, "banana-split-9000", out, 8),
			 0);
	assert_int_equal(gm_catalog_suggest(NULL, "---", out, 8), 0);
	assert_int_equal(gm_catalog_suggest(NULL, "h200", out, 0), 0);
}

static void device_probe_h200(void **state)
{
	const struct gm_gpu *g = find("NVIDIA H200");

	(void)state;
	/* tools/bench/results/catalog-h200.md: nvidia-smi 143771 MiB,
	 * CUDA total 143155 MiB,
	 * outside the allocator, the medians of the calibration run (one
	 * process per configuration, tests/data/calibration): training
	 * (tuning set, 751-767 MiB) 767 MiB, inference 696 MiB. */
	assert_int_equal(g->total_bytes, 143771 * GM_MiB);
	assert_int_equal(g->cuda_total_bytes, 143155 * GM_MiB);
	assert_int_equal(g->cuda_context_bytes, 767 * GM_MiB);
	assert_int_equal(g->cuda_context_inference_bytes, 696 * GM_MiB);
	assert_false(g->cuda_context_estimate);
	assert_int_equal(g->cc_major, 9);
	assert_int_equal(g->cc_minor, 0);
	assert_string_equal(g->memory_type, "HBM3e");
	/* Same generation, not measured: flagged as an estimate. */
	assert_true(find("NVIDIA H100 PCIe")->cuda_context_estimate);
	assert_true(find("NVIDIA A100-SXM4-80GB")->cuda_context_estimate);
}

/*
 * SM counts: the A100 whitepaper's 108 SMs; H200 as the H100 SXM (132,
 * also torch.cuda.get_device_properties on an H200 in a public log).
 */
static void multiprocessors(void **state)
{
	(void)state;
	assert_int_equal(find("NVIDIA H200")->multiprocessors, 132);
	assert_int_equal(find("NVIDIA A100-SXM4-80GB")->multiprocessors,
			 108);
	assert_int_equal(find("h100-pcie")->multiprocessors, 114);
	assert_int_equal(find("l4")->multiprocessors, 58);
}

/* One GPU of this compute capability, for gm_gpu_threads_per_sm(). */
static unsigned threads(unsigned major, unsigned minor)
{
	struct gm_gpu g = {.cc_major = major, .cc_minor = minor};

	return gm_gpu_threads_per_sm(&g);
}

/*
 * CUDA C++ Programming Guide, "Technical Specifications per Compute
 * Capability": maximum resident threads per SM.
 */
static void threads_per_sm(void **state)
{
	(void)state;
	assert_int_equal(threads(8, 0), 2048);
	assert_int_equal(threads(8, 6), 1536);
	assert_int_equal(threads(9, 0), 2048);
	assert_int_equal(threads(7, 5), 1024);
	assert_int_equal(threads(7, 0), 2048);
	assert_int_equal(threads(8, 7), 2048);
	assert_int_equal(threads(8, 9), 1536);
	assert_int_equal(threads(10, 0), 2048);
	assert_int_equal(threads(10, 3), 2048);
	assert_int_equal(threads(12, 0), 1536);
	assert_int_equal(threads(12, 1), 1536);
	/* Not in the table: not known. */
	assert_int_equal(threads(6, 0), 2048);
	assert_int_equal(threads(6, 1), 2048);
	assert_int_equal(threads(5, 2), 0);
	assert_int_equal(threads(8, 1), 0);
	assert_int_equal(threads(11, 0), 0);
	assert_int_equal(threads(0, 0), 0);
	/* The catalog's entries: H200 132 x 2048, RTX 4090 128 x 1536. */
	assert_int_equal(gm_gpu_threads_per_sm(find("h200")), 2048);
	assert_int_equal(gm_gpu_threads_per_sm(find("rtx-4090")), 1536);
	assert_int_equal(gm_gpu_threads_per_sm(find("t4")), 1024);
}

static void min_total(void **state)
{
	const struct gm_gpu *h200 = find("h200");
	const struct gm_gpu *a100 = find("a100-80gb");
	const struct gm_gpu *l40s = find("l40s");

	(void)state;
	/* Genuine readings (NVML and CUDA totals) pass ... */
	assert_true(143771 * GM_MiB >= gm_gpu_min_total(h200));
	assert_true(143155 * GM_MiB >= gm_gpu_min_total(h200));
	/* PyTorch's OOM message on another stack: 139.72 GiB. */
	assert_true((uint64_t)(139.72 * GM_GiB) >= gm_gpu_min_total(h200));
	assert_true(81251 * GM_MiB >= gm_gpu_min_total(a100));
	assert_true(45589 * GM_MiB >= gm_gpu_min_total(l40s));
	/* ... a 76 GB "A100 80GB" and a 128 GiB "H200" do not. */
	assert_true(76 * GM_GB < gm_gpu_min_total(a100));
	assert_true(128 * GM_GiB < gm_gpu_min_total(h200));
}

/* Every entry complete and sourced; names and aliases unambiguous. */
static void entries_complete(void **state)
{
	const struct gm_catalog *cat = gm_catalog_builtin();

	(void)state;
	assert_true(cat->n >= 25);
	for (size_t i = 0; i < cat->n; i++) {
		const struct gm_gpu *g = &cat->gpus[i];

		assert_true(g->name[0] != '\0');
		assert_true(g->n_aliases >= 1);
		assert_null(g->aliases[g->n_aliases]);
		assert_true(g->marketed[0] != '\0');
		assert_true(g->marketed_bytes > 0);
		assert_true(g->total_bytes > 0);
		/* Reported totals stay within 12% of the marketed size
		 * (GDDR with ECC on loses 1/16; GB vs GiB ~7%). */
		assert_true(g->total_bytes > g->marketed_bytes * 88 / 100);
		assert_true(g->total_bytes < g->marketed_bytes * 112 / 100);
		assert_true(g->cuda_total_bytes <= g->total_bytes);
		assert_true(g->memory_type[0] != '\0');
		assert_true(g->bandwidth_gbps > 0);
		assert_true(g->architecture[0] != '\0');
		assert_true(g->cc_major >= 6);
		/* SMs known for every built-in card (the generator requires
		 * it), and the capability in the threads-per-SM table. */
		assert_true(g->multiprocessors >= (gm_gpu_is_mig(g) ? 14 : 20) &&
			    g->multiprocessors <= 188);
		assert_true(gm_gpu_threads_per_sm(g) > 0);
		assert_true(g->cuda_context_bytes > 0);
		assert_true(g->cuda_context_inference_bytes > 0);
		assert_true(g->cuda_context_inference_bytes <=
			    g->cuda_context_bytes);
		assert_true(g->cuda_context_source[0] != '\0');
		assert_true(g->tolerance > 0 && g->tolerance <= 0.05);
		assert_true(g->source[0] != '\0');
		/* slices have no PCI id of their own */
		assert_true(gm_gpu_is_mig(g) == (g->pci_device_id == 0));
		/* Each finds itself by its names. */
		assert_ptr_equal(gm_catalog_find(cat, g->name), g);
		for (size_t j = 0; j < g->n_aliases; j++)
			assert_ptr_equal(gm_catalog_find(cat, g->aliases[j]),
					 g);
		if (g->pci_device_id)
			assert_ptr_equal(gm_catalog_find_pci(
						 cat, g->pci_device_id), g);
	}
}

static void names_unique(void **state)
{
	const struct gm_catalog *cat = gm_catalog_builtin();
	char a[GM__CATALOG_NORM_MAX], b[GM__CATALOG_NORM_MAX];

	(void)state;
	for (size_t i = 0; i < cat->n; i++) {
		const struct gm_gpu *g = &cat->gpus[i];
		for (size_t j = 0; j <= g->n_aliases; j++) {
			const char *x = j ? g->aliases[j - 1] : g->name;
			gm__catalog_normalize(a, sizeof(a), x);
			for (size_t k = i + 1; k < cat->n; k++) {
				const struct gm_gpu *h = &cat->gpus[k];
				for (size_t l = 0; l <= h->n_aliases; l++) {
					const char *y =
						l ? h->aliases[l - 1] : h->name;
					gm__catalog_normalize(b, sizeof(b), y);
					if (strcmp(a, b) == 0)
						fail_msg("'%s' and '%s'", x, y);
				}
			}
		}
	}
}

/* The GPUs users ask for and the bundled scenarios name are there. */
static void required_skus(void **state)
{
	static const char *const want[] = {
		"v100-sxm2-16gb", "v100-sxm2-32gb", "v100-pcie-16gb",
		"v100-pcie-32gb", "a100-sxm4-40gb", "a100-pcie-40gb",
		"a100-sxm4-80gb", "a100-pcie-80gb", "a800", "h100-pcie",
		"h100-sxm", "h100-nvl", "h800", "h200", "h200-nvl", "h20",
		"b200", "l4", "l40s", "a10", "a40", "t4", "rtx-3090",
		"rtx-4090", "rtx-5090", "rtx-a6000", "rtx-6000-ada", "gh200",
		"gtx-1080-ti", "titan-xp", "p100-pcie-12gb", "p100-pcie-16gb",
		"p100-sxm2-16gb", "p40", "p4", "rtx-2080-ti", "l20",
		"a800-pcie", "h800-pcie",
		"NVIDIA A100-SXM4-40GB MIG 1g.5gb", "a100-40gb:7g.40gb",
		"NVIDIA A100-SXM4-80GB MIG 3g.40gb", "a100-80gb:1g.10gb",
		"NVIDIA H100 80GB HBM3 MIG 3g.40gb", "h100:7g.80gb",
		"NVIDIA H200 MIG 3g.71gb", "h200:1g.18gb"};

	(void)state;
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		if (!find(want[i]))
			fail_msg("missing %s", want[i]);
}

/* What a process can get: CUDA's total where measured; else nvidia-smi's
 * total less the largest reserved part measured on the generation (any
 * generation when none), at most the R4xx total; a slice's own size;
 * estimates say so. */
static void usable(void **state)
{
	const struct gm_catalog *cat = gm_catalog_builtin();
	bool est = true;

	(void)state;
	assert_int_equal(gm_gpu_usable_bytes(cat, find("a100-40gb"), &est),
			 40339 * GM_MiB);
	assert_false(est);
	assert_int_equal(gm_gpu_usable_bytes(NULL, find("h200"), &est),
			 143155 * GM_MiB);
	assert_false(est);
	/* A100 PCIe 40GB: not measured; Ampere's largest reserved part is
	 * the A100 80GB's 81920 - 81158 MiB */
	assert_int_equal(gm_gpu_usable_bytes(cat, find("a100-pcie-40gb"),
					     &est),
			 (40960 - (81920 - 81158)) * GM_MiB);
	assert_true(est);
	/* Hopper: H200's 143771 - 143155 MiB is the largest */
	assert_int_equal(gm_gpu_usable_bytes(cat, find("h100-pcie"), &est),
			 (81559 - (143771 - 143155)) * GM_MiB);
	assert_true(est);
	/* V100: no Volta card measured, the catalog's largest (A100 80GB),
	 * below the R4xx total 32510 MiB */
	assert_int_equal(gm_gpu_usable_bytes(cat, find("v100-32gb"), &est),
			 (32768 - (81920 - 81158)) * GM_MiB);
	assert_true(est);
	assert_int_equal(gm_gpu_usable_bytes(cat, find("a100-40gb:1g.5gb"),
					     &est), 4864 * GM_MiB);
	assert_true(est);
	assert_true(gm_gpu_usable_bytes(cat, find("a100-pcie-40gb"), NULL) <
		    40960 * GM_MiB);
}

/* A MIG slice is its own entry: NVML's name, a short alias, the memory
 * the slice reports, the parent's generation; never the parent card. */
static void mig_slices(void **state)
{
	const struct gm_gpu *s = find("NVIDIA A100-SXM4-80GB MIG 3g.40gb");
	const struct gm_gpu *card = find("a100-80gb");

	(void)state;
	assert_non_null(s);
	assert_ptr_equal(find("a100-80gb:3g.40gb"), s);
	assert_ptr_equal(find("A100 SXM4 80GB MIG 3g.40gb"), s);
	assert_true(gm_gpu_is_mig(s));
	assert_false(gm_gpu_is_mig(card));
	assert_int_equal(s->total_bytes, 40192 * GM_MiB);
	assert_int_equal(s->multiprocessors, 42);
	assert_string_equal(s->architecture, card->architecture);
	assert_int_equal(s->cc_major, 8);
	/* half of the memory slices, half the bandwidth */
	assert_true(s->bandwidth_gbps * 2 > card->bandwidth_gbps - 2 &&
		    s->bandwidth_gbps * 2 < card->bandwidth_gbps + 2);
	assert_true(gm_gpu_min_total(s) < gm_gpu_min_total(card) / 2);
	/* each profile of the four cards */
	assert_int_equal(find("a100-40gb:1g.5gb")->total_bytes, 4864 * GM_MiB);
	assert_int_equal(find("h100:1g.10gb")->total_bytes, 9984 * GM_MiB);
	assert_int_equal(find("h100:7g.80gb")->total_bytes, 81024 * GM_MiB);
	/* H200's are estimates (not public), below the whole card */
	assert_true(find("h200:7g.141gb")->total_estimate);
	assert_true(find("h200:7g.141gb")->total_bytes <
		    find("h200")->total_bytes);
	/* "a100" suggests cards, not slices; "a100:" slices too */
	{
		const char *out[8];
		size_t n = gm_catalog_suggest(NULL, "a100-80gb:3g.40", out, 8);

		assert_true(n >= 1);
		assert_string_equal(out[0], "a100-80gb:3g.40gb");
	}
}

/* Pascal: no tensor cores; the figure is fp16 and marked so. */
static void pascal(void **state)
{
	const struct gm_gpu *g = find("gtx-1080-ti");

	(void)state;
	assert_non_null(g);
	assert_string_equal(g->name, "NVIDIA GeForce GTX 1080 Ti");
	assert_string_equal(g->architecture, "pascal");
	assert_int_equal(g->cc_major, 6);
	assert_int_equal(g->total_bytes, 11264 * GM_MiB);
	assert_true(g->bf16_is_fp16);
	assert_int_equal(gm_gpu_threads_per_sm(g), 2048);
	/* the name older drivers print finds it too */
	assert_ptr_equal(find("GeForce GTX 1080 Ti"), g);
	assert_ptr_equal(find("TITAN Xp"), find("NVIDIA TITAN Xp"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exact_names),
		cmocka_unit_test(aliases),
		cmocka_unit_test(normalized),
		cmocka_unit_test(pci),
		cmocka_unit_test(suggestions),
		cmocka_unit_test(device_probe_h200),
		cmocka_unit_test(multiprocessors),
		cmocka_unit_test(threads_per_sm),
		cmocka_unit_test(mig_slices),
		cmocka_unit_test(usable),
		cmocka_unit_test(pascal),
		cmocka_unit_test(min_total),
		cmocka_unit_test(entries_complete),
		cmocka_unit_test(names_unique),
		cmocka_unit_test(required_skus),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
