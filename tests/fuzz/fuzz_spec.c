/*
 * fuzz_spec.c - libFuzzer target over the spec reader and the planner:
 * any bytes are loaded as a model spec (gm_spec_load); a spec that
 * loads is planned on its hardware.gpu or an H100 (gm_plan), and the
 * report tree is built and printed in every format. The replay (the
 * default reserve model) costs time per layer and decode step (1000
 * layers x 4096 generated tokens: over 100 s), so specs above
 * REPLAY_MAX of layers x (1 + generate_length) are planned with the
 * analytic model, which reads the same spec. Every refusal has
 * a message; a plan that fits has no negative headroom; nothing
 * crashes, leaks or overflows (ASan, UBSan).
 * Build and run: tests/fuzz/run.sh SECONDS BUILD_DIR spec.
 */
#include "emit.h"
#include "error.h"
#include "gpu.h"
#include "model.h"
#include "report.h"
#include "spec.h"

#include "fuzz_input.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

#define REPLAY_MAX 4096

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	static struct gm_spec spec;
	static struct gm_plan plan;
	struct gm_model_opts opts;
	struct gm_plan_gpu g;
	struct gm_diag d;
	struct gm_val *v;
	FILE *null;

	memset(&spec, 0, sizeof(spec));
	d.msg[0] = '\0';
	if (gm_spec_load(&spec, fuzz_input_path(data, size), NULL, 0, &d)) {
		if (!d.msg[0])
			abort(); /* refused without saying why */
		return 0;
	}
	if (gm_plan_gpu_resolve(&g, &spec, NULL, spec.gpu[0] ? NULL : "h100",
				"--gpu", &d))
		return 0;
	gm_model_opts_default(&opts);
	if (spec.model.layers * (1 + spec.inference.generate_length) >
	    REPLAY_MAX)
		opts.reserve = GM_RESERVE_ANALYTIC;
	memset(&plan, 0, sizeof(plan));
	d.msg[0] = '\0';
	if (gm_plan(&spec, &g, &opts, &plan, &d)) {
		if (!d.msg[0])
			abort();
		return 0;
	}
	if (plan.fits && plan.headroom_bytes < 0)
		abort();
	v = gm_plan_report(&plan);
	null = fopen("/dev/null", "w");
	if (!v || !null)
		abort();
	for (int f = GM_FORMAT_TABLE; f <= GM_FORMAT_CSV; f++)
		if (gm_emit(null, v, (enum gm_format)f))
			abort();
	fclose(null);
	gm_val_free(v);
	return 0;
}
