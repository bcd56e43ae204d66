/* Unit tests for planner/chart.c and html.c: what the charts print and
 * where, so labels do not collide and names are not clipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chart.h"
#include "error.h"
#include "html.h"
#include "model.h"
#include "report.h"
#include "specs.h"
#include "units.h"

static const struct gm_plan_gpu h200 = {
	.name = "NVIDIA H200", .capacity_bytes = 143771ULL * 1024 * 1024,
	.context_bytes = 760ULL * 1024 * 1024, .sm_major = 9};

static struct gm_plan plan(struct gm_spec s)
{
	struct gm_plan p;
	struct gm_diag d;

	assert_int_equal(gm_plan(&s, &h200, NULL, &p, &d), 0);
	return p;
}

/* What fn writes, as a string (free it). */
static char *drawn(int (*fn)(FILE *, const struct gm_plan *,
			     const struct gm_fit *, size_t),
		   const struct gm_plan *p, const struct gm_fit *f, size_t n)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(fn(out, p, f, n), 0);
	fclose(out);
	return buf;
}

/* The bar's parts add up to what the card shows: the rows at the peak
 * (the requests), what reserved holds beyond them (the blocks' rounding
 * included: peak allocated exceeds the requests), the context. */
static void parts_sum_to_device_used(void **state)
{
	struct gm_terms t = {
		.at_peak = {.weights = 3 * GM_GiB, .activations = GM_GiB},
		.peak_requested = 4 * GM_GiB,
		.peak_allocated = 4 * GM_GiB + 50 * GM_MiB,
		.peak_reserved = 6 * GM_GiB, .cuda_context = GM_GiB};
	double v[GM_CHART_PARTS], sum = 0;

	(void)state;
	t.device_used = t.peak_reserved + t.cuda_context;
	gm_chart_parts(&t, v);
	for (int k = 0; k < GM_CHART_PARTS; k++)
		sum += v[k];
	assert_true(sum == t.device_used);
}

/* Every part's name and GiB beside its segment, at least 14 px apart
 * however thin the segments; capacity labelled in the same column. */
static void stage_labels(void **state)
{
	struct gm_plan p = plan(spec_llama(32, 4096, 11008, 32, 32, 32000));
	double v[GM_CHART_PARTS], ys[GM_CHART_PARTS + 2];
	char *svg = drawn(gm_plan_svg, &p, NULL, 1), want[64];
	const char *at = svg;
	int n = 0;

	(void)state;
	gm_chart_parts(&p.per_gpu, v);
	for (int k = 0; k < GM_CHART_PARTS; k++) {
		if (v[k] <= 0)
			continue;
		snprintf(want, sizeof(want), ">%s %.2f</text>",
			 gm_chart_part_label[k], v[k] / (double)GM_GiB);
		assert_non_null(strstr(svg, want));
	}
	snprintf(want, sizeof(want), ">capacity %.2f</text>",
		 143771.0 / 1024);
	assert_non_null(strstr(svg, want));
	/* label texts sit at x = bar + 16: collect their y */
	while ((at = strstr(at, "<text x=\"")) && n < GM_CHART_PARTS + 2) {
		double x, y;

		if (sscanf(at, "<text x=\"%lf\" y=\"%lf\"", &x, &y) == 2 &&
		    x > 150 && x < 200)
			ys[n++] = y;
		at++;
	}
	assert_true(n >= 6);
	for (int i = 0; i < n; i++)
		for (int j = i + 1; j < n; j++)
			assert_true(ys[i] - ys[j] >= 13.9 ||
				    ys[j] - ys[i] >= 13.9);
	/* a standalone file */
	assert_true(strncmp(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\"",
			    39) == 0);
	free(svg);
}

/* Pipeline: one bar per stage, each named. */
static void stage_bars(void **state)
{
	struct gm_spec s = spec_llama(32, 4096, 11008, 32, 32, 32000);
	struct gm_plan p;
	char *svg;

	(void)state;
	s.parallelism.pipeline_parallel = 4;
	p = plan(s);
	svg = drawn(gm_plan_svg, &p, NULL, 1);
	assert_non_null(strstr(svg, ">stage 0 (8 layers)</text>"));
	assert_non_null(strstr(svg, ">stage 3 (8 layers)</text>"));
	free(svg);
}

/* fit: one row per GPU, the name column as wide as the longest name, so
 * it is neither wrapped nor cut; the figures after each bar. */
static void fit_rows(void **state)
{
	struct gm_plan p[2];
	struct gm_fit f[2];
	char *svg, want[96];
	double bx;
	const char *r;

	(void)state;
	p[0] = plan(spec_gpt2());
	p[1] = p[0];
	snprintf(p[1].gpu.name, sizeof(p[1].gpu.name), "%s",
		 "NVIDIA RTX PRO 6000 Blackwell Workstation Edition");
	memset(f, 0, sizeof(f));
	f[0].max_micro_batch = 8;
	f[0].gradient_accumulation_steps = 4;
	svg = drawn(gm_plan_svg, p, f, 2);
	assert_non_null(strstr(svg, ">NVIDIA RTX PRO 6000 Blackwell "
			       "Workstation Edition</text>"));
	snprintf(want, sizeof(want), ">8 \xc3\x97 4: %.2f / %.2f</text>",
		 p[0].per_gpu.device_used / (double)GM_GiB,
		 143771.0 / 1024);
	assert_non_null(strstr(svg, want));
	assert_non_null(strstr(svg, ">none (at 1): "));
	/* the names end where the bars begin: right-aligned at bx - 12 */
	r = strstr(svg, "text-anchor=\"end\">NVIDIA RTX PRO");
	assert_non_null(r);
	while (r > svg && strncmp(r, "<text x=\"", 9) != 0)
		r--;
	assert_int_equal(sscanf(r, "<text x=\"%lf\"", &bx), 1);
	assert_true(bx >= 7.0 * 49);
	free(svg);
}

/* The page: self-contained, the verdict and the words. */
static void html_page(void **state)
{
	struct gm_spec s = spec_gpt2();
	struct gm_plan p = plan(s);
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	(void)state;
	assert_int_equal(gm_plan_html(out, &s, NULL, &p, NULL, NULL, 1), 0);
	fclose(out);
	assert_true(strncmp(buf, "<!DOCTYPE html>", 15) == 0);
	assert_non_null(strstr(buf, "<svg"));
	assert_non_null(strstr(buf, ": <span class=\"yes\">fits</span>"));
	assert_non_null(strstr(buf, "How the run is built"));
	assert_non_null(strstr(buf, "Assumptions"));
	assert_null(strstr(buf, "<script"));
	assert_null(strstr(buf, "href="));
	assert_null(strstr(buf, "src="));
	assert_non_null(strstr(buf, "</html>\n"));
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parts_sum_to_device_used),
		cmocka_unit_test(stage_labels),
		cmocka_unit_test(stage_bars),
		cmocka_unit_test(fit_rows),
		cmocka_unit_test(html_page),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
