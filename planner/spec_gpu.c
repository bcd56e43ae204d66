/*
 * spec_gpu.c - hardware.gpu checked against a GPU catalog (catalog.h):
 * found by gm_catalog_find() (names, aliases, normalized spellings), or
 * reported with the closest names by gm_catalog_suggest().
 *
 * Errors: 0 or GM_EINVAL, diag "file:line:column: hardware.gpu: unknown
 * GPU 'X'; closest: A, B, C" (or "--set hardware.gpu: ...").
 */
#include "spec.h"
#include "spec_int.h"

#include "catalog.h"
#include "error.h"

int gm_spec_check_gpu_catalog(const struct gm_spec *spec,
			      const struct gm_catalog *cat,
			      struct gm_diag *diag)
{
	struct gm__spec_ctx c = {.spec = (struct gm_spec *)spec,
				 .diag = diag, .path = spec->path,
				 .root_line = 1, .root_col = 1};
	const char *near[3];
	size_t n;

	if (!cat)
		cat = gm_catalog_builtin();
	if (!spec->gpu[0] || gm_catalog_find(cat, spec->gpu))
		return 0;
	n = gm_catalog_suggest(cat, spec->gpu, near, 3);
	if (!n)
		return gm__spec_blame(&c, GM_K_GPU, "unknown GPU '%s'; see "
				      "`gpumem gpus`", spec->gpu);
	return gm__spec_blame(&c, GM_K_GPU, "unknown GPU '%s'; closest: %s%s%s"
			      "%s%s", spec->gpu, near[0], n > 1 ? ", " : "",
			      n > 1 ? near[1] : "", n > 2 ? ", " : "",
			      n > 2 ? near[2] : "");
}
