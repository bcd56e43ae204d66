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
struct gm_json_marks;
struct gm_val;

/*
 * Load the JSON file path into *out. Nesting deeper than 64 levels is
 * refused (GM_EINVAL, "path:line:column: nesting too deep"). With marks
 * non-NULL, *marks gets where each value starts, for the merge's
 * messages; free it with gm_json_marks_free().
 */
int gm_json_load(const char *path, struct gm_val **out,
		 struct gm_json_marks **marks, struct gm_diag *diag);
void gm_json_marks_free(struct gm_json_marks *marks);

/*
 * Merge docs[0..n) (loaded from paths[i], named in messages; marks[i]
 * from gm_json_load, or marks NULL) into *out, after checking the type
 * of every field the merge reads (GM_EINVAL, "path:line:column: devices[0]
 * .peak_allocated_bytes: must be an integer ..."):
 * {"kind": "gpumem-report-merged", "ranks": [...], "totals": {...},
 *  "verify": [...]}.
 */
int gm_report_merge(struct gm_val *const *docs, const char *const *paths,
		    struct gm_json_marks *const *marks, size_t n,
		    struct gm_val **out, struct gm_diag *diag);

#endif
