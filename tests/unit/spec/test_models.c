/*
 * test_models.c - every bundled spec (models' *.yaml files except the GPU
 * catalog, gpus.yaml) loads and validates, names a GPU of the built-in
 * catalog by its exact nvidia-smi name, and its name is its file name. Prints TAP. Usage: test-models MODELS_DIR MIN_SPECS
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "error.h"
#include "spec.h"

/* Load one spec; prints a TAP line; returns 1 if it passed. */
static int check(int no, const char *dir, const char *file)
{
	static struct gm_spec spec;
	struct gm_diag diag = {{0}};
	char path[1024], base[256];
	int rc;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	snprintf(base, sizeof(base), "%.*s", (int)(strlen(file) - 5), file);
	rc = gm_spec_load(&spec, path, NULL, 0, &diag);
	if (!rc)
		rc = gm_spec_check_gpu_catalog(&spec, NULL, &diag);
	if (rc) {
		printf("not ok %d - %s\n# %s\n", no, file, diag.msg);
		return 0;
	}
	if (spec.gpu[0] && strcmp(gm_catalog_find(NULL, spec.gpu)->name,
				  spec.gpu)) {
		printf("not ok %d - %s\n# hardware.gpu '%s' is not the "
		       "catalog's exact name\n", no, file, spec.gpu);
		return 0;
	}
	if (strcmp(spec.name, base)) {
		printf("not ok %d - %s\n# name '%s' is not the file name\n", no,
		       file, spec.name);
		return 0;
	}
	printf("ok %d - %s\n", no, file);
	return 1;
}

int main(int argc, char **argv)
{
	int n = 0, passed = 0, min = argc > 2 ? atoi(argv[2]) : 1;
	struct dirent **list;
	int count;

	if (argc < 2)
		return 1;
	count = scandir(argv[1], &list, NULL, alphasort);
	if (count < 0) {
		printf("Bail out! cannot read %s\n", argv[1]);
		return 1;
	}
	for (int i = 0; i < count; i++) {
		const char *f = list[i]->d_name;
		size_t len = strlen(f);
		if (len > 5 && !strcmp(f + len - 5, ".yaml") &&
		    strcmp(f, "gpus.yaml")) {
			n++;
			passed += check(n, argv[1], f);
		}
		free(list[i]);
	}
	free(list);
	printf("%s %d - at least %d specs (found %d)\n",
	       n >= min ? "ok" : "not ok", n + 1, min, n);
	printf("1..%d\n", n + 1); /* TAP allows the plan last */
	return passed == n && n >= min ? 0 : 1;
}
