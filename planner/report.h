/*
 * report.h - plans and fits as output-layer trees and as SVG (report.c).
 *
 * gm_plan_report() builds the `gpumem plan` object with the JSON keys of
 * planner/README.md (bytes as integers); gm_fit_report() one row per
 * GPU. gm_plan_svg() draws the charts of chart.h. Returns NULL /
 * GM_ENOMEM / GM_EIO.
 */
#ifndef GM_REPORT_H
#define GM_REPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "fit.h"
#include "fit_search.h"
#include "model.h"
#include "emit.h"

struct gm_val;

struct gm_val *gm_plan_report(const struct gm_plan *p);
/* The same for a table: the per-GPU rows as held at the peak (they add
 * up to peak allocated), then each term's closed form at its own
 * largest, headed as not at the peak. */
struct gm_val *gm_plan_report_table(const struct gm_plan *p);
/* The plan as CSV rows with a fixed column set (planner/README.md,
 * "Output schema"): first the most loaded rank ("row" per_gpu), then
 * with pipeline stages one row per stage ("row" stage). */
struct gm_val *gm_plan_report_csv(const struct gm_plan *p);

/* What a fit document says beside its rows (planner/README.md). */
struct gm_fit_doc {
	const char *spec;          /* the spec file as given */
	const char *name;          /* the spec's name */
	const char *task;          /* train | inference */
	uint64_t global_batch;     /* --global-batch or the spec's; 0: none */
	const char *reserve_model; /* simulated | analytic */
	double fraction;           /* --fraction, 0: none */
	uint64_t limit_bytes;      /* --limit, 0: none */
};

/*
 * gpumem fit's output in fmt: table = one row per GPU (bf16 TFLOP/s of
 * a card without bf16 as "125 (fp16)", bandwidth headed GB/s); json and
 * yaml = {kind "gpumem-fit", version, spec, name, task, global_batch,
 * reserve_model, fraction, limit_bytes, gpus: [rows with
 * gm_fit_change_set()'s keys]} (a bare array of rows where d is NULL);
 * csv = one row per GPU with fixed columns (the change's --set strings
 * joined by spaces). ch NULL: no search.
 */
struct gm_val *gm_fit_report(const struct gm_fit_doc *d,
			     const struct gm_fit *f,
			     const struct gm_fit_change *ch, size_t n,
			     enum gm_format fmt);

/* gpumem fit's search (fit_search.h) into a row of gm_fit_report():
 * "fits_as_given", and "smallest_change" (null where it fits as given
 * or nothing searched fits): {set: ["KEY=VALUE", ...], gpus,
 * micro_batch, gradient_accumulation_steps, peak_allocated_bytes,
 * peak_reserved_bytes, device_used_bytes, headroom_bytes}; where
 * nothing fits, "widest_change" (the same keys) is the widest change
 * searched; where the search was refused, both null and
 * "search_refused" says why. */
void gm_fit_change_set(struct gm_val *row, const struct gm_fit_change *c);

/* A fit row's bf16 TFLOP/s and bandwidth (GB/s) as its table prints
 * them (the output layer's 4 significant digits; "125 (fp16)" for a
 * card without bf16, "-" where not known): the HTML page's cells too. */
char *gm_fit_tflops_text(const struct gm_fit *f, char *buf, size_t len);
char *gm_fit_bandwidth_text(const struct gm_fit *f, char *buf, size_t len);

/* The same as one line of words into buf ("--set KEY=VALUE ... (N
 * GPUs, ...)", or why nothing fits); returns buf. */
char *gm_fit_change_text(const struct gm_fit_change *c, char *buf,
			 size_t len);

/* gpumem plan (fits NULL, one plan): a bar per stage; gpumem fit: a
 * row per GPU, plans[i] at fits[i]'s micro-batch. */
int gm_plan_svg(FILE *out, const struct gm_plan *plans,
		const struct gm_fit *fits, size_t n);

#endif
