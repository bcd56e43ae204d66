/*
 * chart.h - plans drawn as SVG (chart.c), for `--svg FILE` and inside the
 * `--html FILE` page (html.h).
 *
 * Both charts stack the same parts of a GPU's memory at its peak: the
 * live tensors by kind (at_peak), then what the caching allocator holds
 * beyond them (reserved - allocated), then what lies outside the
 * allocator (CUDA context, libraries, NCCL), against the card's capacity
 * and, under --fraction / --limit, the allocator's cap.
 *
 *  - gm_chart_stages(): one vertical bar per pipeline stage (one bar when
 *    every GPU is alike), every part's name and GiB printed beside its
 *    segment, the total above the bar, the verdict under it.
 *  - gm_chart_fit(): one horizontal bar per GPU (`gpumem fit`: each at
 *    its largest micro-batch), names in a column sized to the longest,
 *    the micro-batch, accumulation steps and GiB used printed after the
 *    bar; fits may be NULL (then only the GiB).
 *
 * Each writes one complete <svg> element (with its xmlns, so it stands
 * alone as a file and inline in HTML) sized to its content, the title
 * inside it. Errors: 0 or GM_EIO (the stream failed).
 */
#ifndef GM_PLANNER_CHART_H
#define GM_PLANNER_CHART_H

#include <stddef.h>
#include <stdio.h>

#include "fit.h"
#include "model.h"

/* The parts in stacking order, bottom first, and their colours. */
#define GM_CHART_PARTS 11
extern const char *const gm_chart_part_label[GM_CHART_PARTS];
extern const char *const gm_chart_part_color[GM_CHART_PARTS];

/* The parts of t in bytes, in gm_chart_part_label's order. */
void gm_chart_parts(const struct gm_terms *t, double v[GM_CHART_PARTS]);

int gm_chart_stages(FILE *out, const struct gm_plan *p);
int gm_chart_fit(FILE *out, const struct gm_plan *plans,
		 const struct gm_fit *fits, size_t n);

/* s with &, <, >, " escaped for XML and HTML text and attributes. */
void gm_chart_text(FILE *out, const char *s);

#endif
