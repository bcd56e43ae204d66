/*
 * cmd_report.c - gpumem report [--format table|json|yaml|csv] FILE ...
 *
 * Prints the reports the preload library wrote (GPUMEM_REPORT), merged
 * across ranks, and `gpumem verify --format json` outputs of several
 * nodes, as one table (or JSON/YAML/CSV). Logic: allocator/preload/
 * merge.c.
 */
#include "cmd.h"

#include "emit.h"
#include "error.h"
#include "merge.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: gpumem report [--format table|json|yaml|csv] FILE...\n\n"
		"Print and merge reports written by the preload allocator "
		"(GPUMEM_REPORT,\ngpumem run --report) across ranks, and "
		"`gpumem verify --format json` outputs\nacross nodes. Byte "
		"columns are GiB in the table.\n\n"
		"  --format F   table (default), json, yaml or csv\n"
		"  -h, --help   this help\n");
}

int gm_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum gm_format format = GM_FORMAT_TABLE;
	struct gm_val **docs = NULL, *merged = NULL;
	struct gm_diag diag;
	int c, n, rc = 0;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (gm_format_parse(optarg, &format, &diag))
				return gm_cmd_usage_error("report", "%s",
							  diag.msg);
			break;
		case 'h':
			usage(stdout);
			return GM_EXIT_OK;
		case ':':
		default:
			return gm_cmd_option_error("report", c, argv);
		}
	}
	n = argc - optind;
	if (n <= 0)
		return gm_cmd_usage_error("report", "no report FILE given");
	docs = calloc((size_t)n, sizeof(*docs));
	if (!docs)
		return GM_EXIT_USAGE;
	for (int i = 0; i < n && !rc; i++)
		rc = gm_json_load(argv[optind + i], &docs[i], &diag);
	if (!rc)
		rc = gm_report_merge(docs, (const char *const *)argv + optind,
				     (size_t)n, &merged, &diag);
	if (rc) {
		fprintf(stderr, "gpumem report: %s\n", diag.msg);
	} else if (gm_emit(stdout, merged, format)) {
		fprintf(stderr, "gpumem report: cannot print the report\n");
		rc = GM_EIO;
	}
	for (int i = 0; i < n; i++)
		gm_val_free(docs[i]);
	free(docs);
	gm_val_free(merged);
	return rc ? (rc == GM_ENOMEM ? GM_EXIT_USAGE : gm_exit_code(rc))
		  : GM_EXIT_OK;
}
