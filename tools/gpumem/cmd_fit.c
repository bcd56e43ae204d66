/*
 * cmd_fit.c - `gpumem fit SPEC.yaml`: per GPU (the catalog, or --gpu
 * ...), the largest micro-batch that fits, gradient-accumulation steps
 * for the global batch, and the fewest data-parallel GPUs that fit.
 * Exit: 0 when at least one GPU fits, 1 when none does, 2 bad input.
 */
#include "cmd.h"

#include "emit.h"
#include "error.h"
#include "fit.h"
#include "gpu.h"
#include "log.h"
#include "report.h"
#include "spec.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_GPUS 256

int gm__write_svg(const char *path, const struct gm_plan *plans, size_t n,
		  struct gm_diag *diag);

static void help(void)
{
	printf("Usage: gpumem fit SPEC.yaml [--gpu NAME ...] "
	       "[--global-batch N] [--set KEY=VALUE ...]\n"
	       "                  [--format table|json|yaml|csv] "
	       "[--svg FILE]\n"
	       "                  [--reserve-model simulated|analytic] "
	       "[--catalog FILE]\n\n"
	       "For each GPU of the catalog (or each --gpu): the largest "
	       "micro-batch that fits\none GPU, the gradient-accumulation "
	       "steps that reach the global batch with it\n(exactly: micro x "
	       "accumulation x data_parallel = global, the micro-batch a\n"
	       "divisor of global / data_parallel), and the fewest "
	       "GPUs (data parallel with the spec's ZeRO stage, times tensor "
	       "and\npipeline parallel) that fit at the spec's micro-batch "
	       "(0: none). A table to\ncompare cards for a purchase.\n\n"
	       "  --gpu NAME        a catalog GPU; may repeat\n"
	       "  --catalog FILE    read this GPU catalog instead of the "
	       "built-in one\n"
	       "  --global-batch N  sequences per optimizer step (default: "
	       "the spec's); a\n                    multiple of "
	       "parallelism.data_parallel, at most 2^30\n"
	       "  --set KEY=VALUE   override a spec key, may repeat\n"
	       "  --format FMT      table (default), json, yaml or csv\n"
	       "  --svg FILE        bars of each GPU at its largest "
	       "micro-batch\n"
	       "  --reserve-model M analytic (default) or simulated: how "
	       "peak reserved is\n                    predicted for the "
	       "figures (the search itself runs on the\n"
	       "                    analytic model, then checks its answer "
	       "with M)\n"
	       "  --help            this text\n\n"
	       "Exit status: 0 some GPU fits, 1 none fits, 2 bad input.\n");
}

/* Whether GPU name is among the first m rows already. */
static bool seen(const struct gm_fit *fits, size_t m, const char *name)
{
	for (size_t j = 0; j < m; j++)
		if (!strcmp(fits[j].gpu.name, name))
			return true;
	return false;
}

/*
 * --global-batch against the spec's data-parallel degree: only exact
 * micro-batch x accumulation x data-parallel products are reported, so
 * it must be a multiple of (and so at least) data_parallel. 0 or -1
 * (after the usage message).
 */
static int check_global_batch(const struct gm_spec *spec,
			      unsigned long long gb)
{
	unsigned long long dp = spec->parallelism.data_parallel ?
				spec->parallelism.data_parallel : 1;

	if (spec->task != GM_TASK_TRAIN) {
		gm_cmd_usage_error("fit", "--global-batch: applies to "
				   "training specs only (task is %s)",
				   gm_task_name(spec->task));
		return -1;
	}
	if (gb < dp) {
		gm_cmd_usage_error("fit", "--global-batch: %llu is smaller "
				   "than parallelism.data_parallel %llu", gb,
				   dp);
		return -1;
	}
	if (gb % dp) {
		gm_cmd_usage_error("fit", "--global-batch: %llu is not a "
				   "multiple of parallelism.data_parallel "
				   "%llu", gb, dp);
		return -1;
	}
	return 0;
}

int gm_cmd_fit(int argc, char **argv)
{
	static const struct option opts[] = {
		{"gpu", required_argument, NULL, 'g'},
		{"global-batch", required_argument, NULL, 'b'},
		{"set", required_argument, NULL, 's'},
		{"format", required_argument, NULL, 'f'},
		{"svg", required_argument, NULL, 'v'},
		{"reserve-model", required_argument, NULL, 'r'},
		{"catalog", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *names[MAX_GPUS], *sets[64], *svg = NULL;
	const struct gm_catalog *cat = gm_catalog_builtin();
	struct gm_catalog catalog = {0};
	const char *paths[2] = {NULL, NULL};
	enum gm_format fmt = GM_FORMAT_TABLE;
	struct gm_diag diag = {{0}};
	struct gm_model_opts mopts;
	struct gm_spec *spec = calloc(1, sizeof(*spec));
	struct gm_fit *fits = calloc(MAX_GPUS, sizeof(*fits));
	struct gm_plan *plans = NULL;
	struct gm_val *v = NULL;
	unsigned long long gb = 0;
	size_t n = 0, m = 0;
	int n_sets = 0, c, rc, code = GM_EXIT_USAGE, any = 0;
	bool named;
	char *end;

	if (!spec || !fits) {
		gm_error("out of memory");
		goto out;
	}
	gm_model_opts_default(&mopts);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'g':
			if (n == MAX_GPUS) {
				code = gm_cmd_usage_error("fit", "--gpu: at "
							  "most %d", MAX_GPUS);
				goto out;
			}
			names[n++] = optarg;
			break;
		case 'b':
			errno = 0;
			gb = strtoull(optarg, &end, 10);
			if (*optarg == '-' || *optarg == '+' || end == optarg ||
			    *end || (!gb && errno != ERANGE)) {
				code = gm_cmd_usage_error("fit", "--global-"
					"batch: '%s' is not a positive "
					"integer", optarg);
				goto out;
			}
			if (errno == ERANGE || gb > GM_FIT_MAX_GLOBAL) {
				code = gm_cmd_usage_error("fit", "--global-"
					"batch: '%s' is too large (at most "
					"%llu)", optarg, GM_FIT_MAX_GLOBAL);
				goto out;
			}
			break;
		case 's':
			if (n_sets == 64) {
				code = gm_cmd_usage_error("fit", "--set: at "
							  "most 64");
				goto out;
			}
			sets[n_sets++] = optarg;
			break;
		case 'f':
			if (gm_format_parse(optarg, &fmt, &diag)) {
				code = gm_cmd_usage_error("fit", "%s",
							  diag.msg);
				goto out;
			}
			break;
		case 'v':
			svg = optarg;
			break;
		case 'c':
			paths[1] = optarg;
			break;
		case 'r':
			if (gm_reserve_model_parse(optarg, &mopts.reserve))
				return gm_cmd_usage_error("fit", "--reserve-model: "
					"'%s' is not simulated or analytic",
					optarg);
			break;
		case 'h':
			help();
			code = GM_EXIT_OK;
			goto out;
		case ':':
			code = gm_cmd_usage_error("fit", "%s needs a value",
						  argv[optind - 1]);
			goto out;
		default:
			code = gm_cmd_usage_error("fit", "unknown option "
						  "'%s'", argv[optind - 1]);
			goto out;
		}
	}
	if (optind + 1 != argc) {
		code = gm_cmd_usage_error("fit", optind == argc ?
					  "a spec file is needed" :
					  "one spec file only");
		goto out;
	}
	paths[0] = argv[optind];
	if (paths[1]) {
		rc = gm_catalog_load(&catalog, paths[1], &diag);
		if (rc) {
			gm_cmd_file_error("fit", diag.msg, paths, 2);
			code = gm_exit_code(rc);
			goto out;
		}
		cat = &catalog;
	}
	rc = gm_spec_load(spec, argv[optind], sets, n_sets, &diag);
	if (rc) {
		gm_cmd_file_error("fit", diag.msg, paths, 2);
		code = gm_exit_code(rc);
		goto out;
	}
	if (gb && check_global_batch(spec, gb)) {
		code = GM_EXIT_USAGE;
		goto out;
	}
	named = n > 0;
	if (!n)
		for (size_t i = 0; i < cat->n && n < MAX_GPUS; i++)
			names[n++] = cat->gpus[i].name;
	plans = calloc(n, sizeof(*plans));
	if (!plans) {
		gm_error("out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct gm_plan_gpu g;
		struct gm_spec s = *spec;

		rc = gm_plan_gpu_resolve(&g, spec, cat, names[i], "--gpu",
					 &diag);
		if (!rc && seen(fits, m, g.name))
			continue; /* a repeated --gpu (or alias of one) */
		if (!rc && named)
			gm_plan_gpu_warn(spec, &g);
		if (!rc)
			rc = gm_fit(spec, &g, &mopts, gb, &fits[m], &diag);
		if (!rc && fits[m].max_micro_batch) {
			s.training.micro_batch_size = fits[m].max_micro_batch;
			s.inference.batch_size = fits[m].max_micro_batch;
		}
		if (!rc && gb)
			s.training.global_batch_size = gb;
		if (!rc)
			rc = gm_plan(&s, &g, &mopts, &plans[m], &diag);
		if (rc) {
			gm_cmd_file_error("fit", diag.msg, paths, 2);
			code = gm_exit_code(rc);
			goto out;
		}
		any |= fits[m].max_micro_batch > 0;
		m++;
	}
	if (svg && gm__write_svg(svg, plans, m, &diag)) {
		fprintf(stderr, "gpumem fit: --svg: %s\n", diag.msg);
		goto out;
	}
	v = gm_fit_report(spec->name, fits, m);
	if (!v || gm_emit(stdout, v, fmt)) {
		gm_error("cannot print the report");
		goto out;
	}
	code = any ? GM_EXIT_OK : GM_EXIT_NO;
out:
	gm_catalog_free(&catalog);
	gm_val_free(v);
	free(plans);
	free(fits);
	free(spec);
	return code;
}
