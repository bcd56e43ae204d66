/*
 * plan_args.c - the options `gpumem plan` and `gpumem fit` share (see
 * cmd.h): --set, --format, --svg, --catalog, --reserve-model, and their
 * missing-value / unknown-option messages.
 */
#include "cmd.h"

#include "error.h"

#include <getopt.h>
#include <string.h>

void gm_plan_args_init(struct gm_plan_args *a)
{
	memset(a, 0, sizeof(*a));
	a->format = GM_FORMAT_TABLE;
	gm_model_opts_default(&a->model);
}

int gm_plan_args_option(struct gm_plan_args *a, const char *name, int c,
			char **argv)
{
	struct gm_diag diag = {{0}};

	switch (c) {
	case 's':
		if (a->n_sets == GM_PLAN_MAX_SETS)
			return gm_cmd_usage_error(name, "--set: at most %d",
						  GM_PLAN_MAX_SETS);
		a->sets[a->n_sets++] = optarg;
		return 0;
	case 'f':
		if (gm_format_parse(optarg, &a->format, &diag))
			return gm_cmd_usage_error(name, "%s", diag.msg);
		return 0;
	case 'v':
		a->svg = optarg;
		return 0;
	case 'c':
		a->catalog = optarg;
		return 0;
	case 'r':
		if (gm_reserve_model_parse(optarg, &a->model.reserve))
			return gm_cmd_usage_error(name, "--reserve-model: "
						  "'%s' is not simulated or "
						  "analytic", optarg);
		return 0;
	case ':':
		return gm_cmd_usage_error(name, "%s needs a value",
					  argv[optind - 1]);
	case '?':
		return gm_cmd_usage_error(name, "unknown option '%s'",
					  argv[optind - 1]);
	}
	return -1;
}
