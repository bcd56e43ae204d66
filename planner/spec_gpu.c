/*
 * spec_gpu.c - hardware.gpu checked against a GPU catalog (catalog.h):
 * found by gm_catalog_find() (names, aliases, normalized spellings), or
 * reported with the closest names by gm_catalog_suggest() (up to
 * GM_SPEC_GPU_SUGGEST: every GPU whose name contains the word first).
 *
 * Errors: 0 or GM_EINVAL, diag "file:line:column: hardware.gpu: unknown
 * GPU 'X'; closest: A, B, C" (or "--set hardware.gpu: ...").
 */
#include "spec.h"
#include "spec_int.h"

#include "catalog.h"
#include "error.h"

#include <stdio.h>

void gm_spec_gpu_suggest(const struct gm_catalog *cat, const char *name,
			 char *buf, size_t len)
{
	const char *near[GM_SPEC_GPU_SUGGEST];
	size_t n, used;

	if (!cat)
		cat = gm_catalog_builtin();
	n = gm_catalog_suggest(cat, name, near, GM_SPEC_GPU_SUGGEST);
	if (!n) {
		snprintf(buf, len, "; see `gpumem gpus` for the names");
		return;
	}
	used = (size_t)snprintf(buf, len, "; closest: ");
	for (size_t i = 0; i < n && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 i ? ", " : "", near[i]);
}

int gm_spec_check_gpu_catalog(const struct gm_spec *spec,
			      const struct gm_catalog *cat,
			      struct gm_diag *diag)
{
	struct gm__spec_ctx c = {.spec = (struct gm_spec *)spec,
				 .diag = diag, .path = spec->path,
				 .root_line = 1, .root_col = 1};
	char near[512];

	if (!cat)
		cat = gm_catalog_builtin();
	if (!spec->gpu[0] || gm_catalog_find(cat, spec->gpu))
		return 0;
	gm_spec_gpu_suggest(cat, spec->gpu, near, sizeof(near));
	return gm__spec_blame(&c, GM_K_GPU, "unknown GPU '%s'%s", spec->gpu,
			      near);
}
