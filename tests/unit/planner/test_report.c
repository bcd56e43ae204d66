/*
 * test_report.c - the plan's report trees (planner/report.c): what a
 * skewed router would add to a mixture-of-experts plan stands beside
 * the peak, never inside the rows at the peak, which sum to peak
 * allocated.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "model.h"
#include "report.h"

#define GiB (1ull << 30)

static struct gm_plan *moe_plan(void)
{
	struct gm_plan *p = calloc(1, sizeof(*p));

	assert_non_null(p);
	strcpy(p->name, "moe");
	strcpy(p->gpu.name, "NVIDIA H200");
	strcpy(p->recipe, "pytorch");
	p->per_gpu.at_peak.weights = 2.0 * GiB;
	p->per_gpu.at_peak.activations = 1.0 * GiB;
	p->per_gpu.peak_allocated = 3.0 * GiB;
	p->per_gpu.moe_skew = 1.0 * GiB;
	return p;
}

/* The table: the at-peak block holds no skew row; a block of its own
 * under the breakdowns does. */
static void table_skew_beside_peak(void **state)
{
	struct gm_plan *p = moe_plan();
	struct gm_val *o = gm_plan_report_table(p);
	const struct gm_val *at = gm_obj_get(o, "per_gpu_at_the_peak");
	const struct gm_val *b = gm_obj_get(o, "beside the peak (not part "
					       "of it)");

	(void)state;
	assert_non_null(at);
	assert_null(gm_obj_get(at, "skewed_router_extra_bytes"));
	assert_non_null(b);
	assert_int_equal(gm_val_as_uint(gm_obj_get(b,
						   "skewed_router_extra_bytes")),
			 GiB);
	gm_val_free(o);
	/* a dense plan shows no such block */
	p->per_gpu.moe_skew = 0;
	o = gm_plan_report_table(p);
	assert_null(gm_obj_get(o, "beside the peak (not part of it)"));
	gm_val_free(o);
	free(p);
}

/* JSON: a key of per_gpu beside peak_allocated_bytes, not in at_peak. */
static void json_skew_beside_peak(void **state)
{
	struct gm_plan *p = moe_plan();
	struct gm_val *o = gm_plan_report(p);
	const struct gm_val *pg = gm_obj_get(o, "per_gpu");

	(void)state;
	assert_non_null(pg);
	assert_int_equal(gm_val_as_uint(gm_obj_get(pg,
						   "skewed_router_extra_bytes")),
			 GiB);
	assert_null(gm_obj_get(gm_obj_get(pg, "at_peak"),
			       "skewed_router_extra_bytes"));
	assert_int_equal(gm_val_as_uint(gm_obj_get(pg,
						   "peak_allocated_bytes")),
			 3 * GiB);
	gm_val_free(o);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(table_skew_beside_peak),
		cmocka_unit_test(json_skew_beside_peak),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
