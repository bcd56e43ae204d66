/*
 * merge.h - read and merge report files for `gpumem report` (merge.c).
 *
 * Reads JSON written by the preload library ({"kind": "gpumem-report"})
 * and by `gpumem verify --format json` ({"kind": "gpumem-verify"}, an
 * array of device objects, or one device object), with libyaml (JSON is
 * YAML), into gm_val trees, and merges any number of them into one tree:
 * a row per rank and device, totals, and a row per verified device. Not
 * part of the preload library (no libyaml in the target process).
 * Errors: 0, GM_EIO (cannot read), GM_EINVAL (not JSON, or not a report;
 * diag "path:line:column: message"), GM_ENOMEM.
 */
#ifndef GM_PL_MERGE_H
#define GM_PL_MERGE_H

#include <stddef.h>

struct gm_diag;
struct gm_val;

int gm_json_load(const char *path, struct gm_val **out,
		 struct gm_diag *diag);

/*
 * Merge docs[0..n) (loaded from paths[i], named in messages) into *out:
 * {"kind": "gpumem-report-merged", "ranks": [...], "totals": {...},
 *  "verify": [...]}.
 */
int gm_report_merge(struct gm_val *const *docs, const char *const *paths,
		    size_t n, struct gm_val **out, struct gm_diag *diag);

#endif
