/*
 * cmd_gpus.c - `gpumem gpus`: print the GPU catalog (built in, plus the
 * file given with --catalog) through the output layer.
 */
#include "cmd.h"

#include "catalog.h"
#include "emit.h"
#include "error.h"
#include "spec.h"

#include <getopt.h>
#include <stdio.h>

static void gpus_usage(FILE *out)
{
	fprintf(out,
		"Usage: gpumem gpus [--format table|json|yaml|csv] "
		"[--catalog FILE] [NAME...]\n\n"
		"Print the GPU catalog, or the entries NAME... names (as --gpu "
		"finds them:\na name or an alias; exit 2 for one it does not "
		"know, with the closest):\nnvidia-smi names, capacities (GiB "
		"in tables, bytes elsewhere), memory\nbandwidth, dense bf16 "
		"TFLOP/s (\"(fp16)\": a card without bf16, its fp16\nfigure), "
		"architecture and the CUDA context of a training process. The "
		"table\nshows the main columns, among them a short name to type "
		"after --gpu; json,\nyaml and csv add every alias (a list; one "
		"comma-separated string in csv),\ncompute capability, SM count "
		"(multiprocessors), PCI ids, ECC and driver-era\ntotals, the "
		"undersized-check floor (min_total_bytes) and sources.\n\n"
		"Options:\n"
		"  --format FORMAT  table (default), json, yaml or csv\n"
		"  --catalog FILE   add this file's GPUs to the built-in "
		"catalog (same name:\n                   replaces; schema of "
		"models/gpus.yaml)\n"
		"  --help           show this help\n");
}

int gm_cmd_gpus(int argc, char **argv)
{
	static const struct option opts[] = {
		{"format", required_argument, NULL, 'f'},
		{"catalog", required_argument, NULL, 'c'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum gm_format format = GM_FORMAT_TABLE;
	const char *path = NULL;
	struct gm_catalog loaded = {0};
	const struct gm_catalog *cat;
	struct gm_diag diag = {{0}};
	struct gm_val *report;
	uint64_t seen = 0;
	unsigned flags;
	int opt, rc;

	optind = 1;
	opterr = 0;
	while ((opt = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if ((rc = gm_cmd_once("gpus", &seen, opt, opts, NULL)))
			return rc;
		switch (opt) {
		case 'f':
			if (gm_format_parse(optarg, &format, &diag) != 0)
				return gm_cmd_usage_error("gpus", "%s",
							  diag.msg);
			break;
		case 'c':
			path = optarg;
			break;
		case 'h':
			gpus_usage(stdout);
			return GM_EXIT_OK;
		case ':':
		default:
			return gm_cmd_option_error("gpus", opt, argv, opts);
		}
	}
	cat = gm_catalog_builtin();
	if (path) {
		rc = gm_catalog_load_over(&loaded, path, NULL, &diag);
		if (rc) {
			const char *paths[] = {path};

			/* with the line's excerpt, as plan's --catalog */
			gm_cmd_file_error("gpus", diag.msg, paths, 1);
			return gm_exit_code(rc);
		}
		cat = &loaded;
	}
	flags = format == GM_FORMAT_TABLE ? GM_GPU_REPORT_BRIEF :
		format == GM_FORMAT_CSV ? GM_GPU_REPORT_FLAT : 0;
	if (optind == argc) {
		report = gm_catalog_report(cat, flags);
	} else {
		/* NAME...: those entries, by name or alias, as --gpu finds
		 * them */
		report = gm_val_arr();
		for (int i = optind; report && i < argc; i++) {
			const struct gm_gpu *g = gm_catalog_find(cat, argv[i]);
			char near[512];

			if (!g) {
				gm_spec_gpu_suggest(cat, argv[i], near,
						    sizeof(near));
				gm_val_free(report);
				gm_catalog_free(&loaded);
				return gm_cmd_usage_error("gpus", "unknown GPU "
							  "'%s'%s", argv[i],
							  near);
			}
			gm_arr_push(report, gm_gpu_report(g, flags));
		}
	}
	rc = report ? gm_emit(stdout, report, format) : GM_ENOMEM;
	gm_val_free(report);
	gm_catalog_free(&loaded);
	if (rc == GM_EIO)
		return GM_EXIT_USAGE; /* main() says why, once */
	if (rc) {
		fprintf(stderr, "gpumem gpus: %s\n", gm_strerror(rc));
		return gm_exit_code(rc);
	}
	return GM_EXIT_OK;
}
