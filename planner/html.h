/*
 * html.h - the `--html FILE` page of gpumem plan and gpumem fit
 * (html.c): one self-contained HTML file, inline CSS and the SVG charts
 * of chart.h, no script and nothing fetched, built from the same plans
 * and fits the other reports print.
 *
 * The page has a headline verdict (device used against usable memory,
 * gm_plan_gpu_usable, beside the card's capacity; peak reserved against
 * a binding cap); for a plan that does not fit, why (how far over, the
 * peak's phase and largest parts, the simulated out-of-memory point)
 * and changes[0], the smallest change that fits as plan's hint prints
 * it; the chart (plan: a bar per pipeline
 * stage, or one for every GPU alike, each part's GiB beside it; fit: a
 * row per GPU at its largest micro-batch); the figures as a table; how
 * the run is built (model, recipe, precision, batch, parallelism) and
 * the assumptions behind the figures (reserve model, memory outside the
 * allocator, the cap) in words. GiB are 2^30 bytes.
 *
 * gm_plan_html(): fits NULL and n == 1 for gpumem plan (changes: the
 * plan's search, fit_search.h, or NULL: none shown); else plans[i] is
 * fits[i]'s GPU at its largest micro-batch and changes (NULL: none)
 * fits[i]'s search for the smallest change that fits. Errors: 0 or
 * GM_EIO.
 */
#ifndef GM_PLANNER_HTML_H
#define GM_PLANNER_HTML_H

#include <stddef.h>
#include <stdio.h>

#include "fit.h"
#include "fit_search.h"
#include "model.h"
#include "spec.h"

int gm_plan_html(FILE *out, const struct gm_spec *spec,
		 const struct gm_model_opts *opts, const struct gm_plan *plans,
		 const struct gm_fit *fits, const struct gm_fit_change *changes,
		 size_t n);

#endif
