/*
 * plan_args.c - the options `gpumem plan` and `gpumem fit` share (see
 * cmd.h): --set, --format, --svg, --catalog, --reserve-model, --fraction,
 * --limit, and their missing-value / unknown-option messages.
 */
#include "cmd.h"

#include "error.h"
#include "html.h"
#include "options.h"
#include "report.h"
#include "units.h"

#include <stdio.h>

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A fraction in (0, 1], read as the preload library reads GPUMEM_FRACTION
 * (an exact decimal, options.h), so that the planned cap is its cap to
 * the byte. */
static bool fraction_parse(const char *s, struct gm_plan_args *a)
{
	uint64_t num, den;

	if (gm_pl_fraction_parse(s, &num, &den) != 0)
		return false;
	a->frac_num = num;
	a->frac_den = den;
	a->fraction = (double)num / (double)den;
	return true;
}

int gm_plan_write_svg(const char *path, const struct gm_plan *plans,
		      const struct gm_fit *fits, size_t n, struct gm_diag *diag)
{
	struct gm_file f;
	int rc = gm_file_begin(&f, path, diag);

	if (rc)
		return rc;
	rc = gm_plan_svg(f.fp, plans, fits, n);
	return gm_file_end(&f, rc == 0, diag) ? GM_EIO : rc;
}

int gm_plan_write_html(const char *path, const struct gm_spec *spec,
		       const struct gm_model_opts *opts,
		       const struct gm_plan *plans, const struct gm_fit *fits,
		       const struct gm_fit_change *changes, size_t n,
		       struct gm_diag *diag)
{
	struct gm_file f;
	int rc = gm_file_begin(&f, path, diag);

	if (rc)
		return rc;
	rc = gm_plan_html(f.fp, spec, opts, plans, fits, changes, n);
	return gm_file_end(&f, rc == 0, diag) ? GM_EIO : rc;
}

void gm_plan_args_init(struct gm_plan_args *a)
{
	memset(a, 0, sizeof(*a));
	a->format = GM_FORMAT_TABLE;
	gm_model_opts_default(&a->model);
}

/* Whether a --set names key ("hardware.gpu=..."). */
bool gm_plan_args_sets(const struct gm_plan_args *a, const char *key)
{
	size_t n = strlen(key);

	for (int i = 0; i < a->n_sets; i++)
		if (!strncmp(a->sets[i], key, n) && a->sets[i][n] == '=')
			return true;
	return false;
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
	case 'H':
		a->html = optarg;
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
	case 'F':
		if (!fraction_parse(optarg, a))
			return gm_cmd_usage_error(name, "--fraction: '%s' is "
						  "not a number in (0, 1]",
						  optarg);
		return 0;
	case 'L':
		if (gm_size_parse(optarg, &a->limit)) {
			char why[256];

			gm_size_error(optarg, why, sizeof(why));
			return gm_cmd_usage_error(name, "--limit: '%s' is not "
						  "a size: %s", optarg, why);
		}
		if (a->limit == 0)
			return gm_cmd_usage_error(name, "--limit: '%s' is not "
						  "a size above 0 (e.g. 40GiB, "
						  "80GB)", optarg);
		if (gm_size_bare_small(optarg))
			fprintf(stderr, "gpumem %s: warning: --limit %s has "
				"no unit and is read as %s bytes (write e.g. "
				"%sGiB)\n", name, optarg, optarg, optarg);
		return 0;
	case ':':
		return gm_cmd_usage_error(name, "%s needs a value",
					  argv[optind - 1]);
	}
	return -1;
}

void gm_plan_spec_warn(const char *name, const struct gm_spec *spec)
{
	char where[1200];

	/* the DeepSpeed JSON's "auto"s that took an assumed value */
	for (unsigned i = 0; i < spec->deepspeed.n_assumed; i++)
		fprintf(stderr, "gpumem %s: note: %s\n", name,
			gm_spec_ds_assumed(spec, i, where, sizeof(where)));
	if (spec->task != GM_TASK_INFERENCE || !gm_spec_given(spec, "training"))
		return;
	fprintf(stderr, "gpumem %s: %s: training: ignored for task "
		"inference\n", name, gm_spec_where(spec, "training", where,
						    sizeof(where)));
}
