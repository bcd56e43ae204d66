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
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: gpumem report [--format table|json|yaml|csv] FILE...\n\n"
		"Print and merge reports written by the preload allocator "
		"(GPUMEM_REPORT,\ngpumem run --report) across ranks, and "
		"`gpumem verify --format json` outputs\nacross nodes. The table "
		"prints byte columns in B, MiB or GiB, as fits;\nthe other "
		"formats in bytes.\n\n"
		"  --format F   table (default), json, yaml or csv (csv: one "
		"row per device)\n"
		"  -h, --help   this help\n\n"
		"Exit status: 0 ok, 1 a card failed (a verify verdict other "
		"than ok, or a\npreload report that found its card "
		"undersized), 2 bad input.\n");
}

/*
 * For --format csv: one row per device, preload ranks first ("source"
 * preload), then verified devices ("source" verify); the columns are the
 * union, empty where a row has no such field. Returns a new array.
 */
static struct gm_val *csv_rows(const struct gm_val *merged)
{
	static const char *const parts[] = {"ranks", "verify"};
	static const char *const source[] = {"preload", "verify"};
	struct gm_val *rows = gm_val_arr();

	for (size_t p = 0; p < 2; p++) {
		const struct gm_val *arr = gm_obj_get(merged, parts[p]);

		for (size_t i = 0; i < gm_val_len(arr); i++) {
			const struct gm_val *r = gm_arr_at(arr, i);
			struct gm_val *row = gm_val_obj();

			gm_obj_set_str(row, "source", source[p]);
			for (size_t k = 0; k < gm_val_len(r); k++) {
				const struct gm_val *v = gm_obj_val_at(r, k);
				const char *key = gm_obj_key_at(r, k);

				switch (gm_val_kind(v)) {
				case GM_VAL_STR:
					gm_obj_set_str(row, key,
						       gm_val_as_str(v));
					break;
				case GM_VAL_UINT:
					gm_obj_set_uint(row, key,
							gm_val_as_uint(v));
					break;
				case GM_VAL_REAL:
					gm_obj_set_real(row, key,
							gm_val_as_real(v));
					break;
				case GM_VAL_BOOL:
					gm_obj_set_bool(row, key,
							gm_val_as_bool(v));
					break;
				default:
					gm_obj_set(row, key, gm_val_null());
					break;
				}
			}
			gm_arr_push(rows, row);
		}
	}
	return rows;
}

/* True when a merged card failed: a verify verdict other than ok, or a
 * preload report that found its card undersized. */
static bool any_card_failed(const struct gm_val *merged)
{
	const struct gm_val *ranks = gm_obj_get(merged, "ranks"),
			    *verify = gm_obj_get(merged, "verify");

	for (size_t i = 0; i < gm_val_len(verify); i++) {
		const char *v = gm_val_as_str(gm_obj_get(gm_arr_at(verify, i),
							 "verdict"));

		if (v && strcmp(v, "ok"))
			return true;
	}
	for (size_t i = 0; i < gm_val_len(ranks); i++)
		if (gm_val_as_bool(gm_obj_get(gm_arr_at(ranks, i),
					      "undersized")))
			return true;
	return false;
}

int gm_cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum gm_format format = GM_FORMAT_TABLE;
	struct gm_val **docs = NULL, *merged = NULL, *rows = NULL;
	struct gm_json_marks **marks = NULL;
	struct gm_diag diag;
	uint64_t seen = 0;
	int c, n, rc = 0, erc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if ((rc = gm_cmd_once("report", &seen, c, opts, NULL)))
			return rc;
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
			return gm_cmd_option_error("report", c, argv, opts);
		}
	}
	n = argc - optind;
	if (n <= 0)
		return gm_cmd_usage_error("report", "no report FILE given");
	docs = calloc((size_t)n, sizeof(*docs));
	marks = calloc((size_t)n, sizeof(*marks));
	if (!docs || !marks) {
		free(docs);
		free(marks);
		fprintf(stderr, "gpumem report: out of memory\n");
		return GM_EXIT_USAGE;
	}
	for (int i = 0; i < n && !rc; i++)
		rc = gm_json_load(argv[optind + i], &docs[i], &marks[i],
				  &diag);
	if (!rc)
		rc = gm_report_merge(docs, (const char *const *)argv + optind,
				     marks, (size_t)n, &merged, &diag);
	if (!rc && format == GM_FORMAT_CSV)
		rows = csv_rows(merged);
	if (rc) {
		fprintf(stderr, "gpumem report: %s\n", diag.msg);
	} else if ((erc = gm_emit_sized(stdout, rows ? rows : merged,
					 format))) {
		/* a write error: main() says why, once */
		if (erc != GM_EIO)
			fprintf(stderr, "gpumem report: cannot print the "
				"report\n");
		rc = GM_EIO;
	}
	for (int i = 0; i < n; i++) {
		gm_val_free(docs[i]);
		gm_json_marks_free(marks[i]);
	}
	free(docs);
	free(marks);
	gm_val_free(rows);
	if (rc) {
		gm_val_free(merged);
		return rc == GM_ENOMEM ? GM_EXIT_USAGE : gm_exit_code(rc);
	}
	rc = any_card_failed(merged) ? GM_EXIT_NO : GM_EXIT_OK;
	gm_val_free(merged);
	return rc;
}
