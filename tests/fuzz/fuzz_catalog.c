/*
 * fuzz_catalog.c - libFuzzer target over the GPU catalog reader
 * (`--catalog FILE`: gm_catalog_load, and gm_catalog_load_over over the
 * built-in one): any bytes are loaded as a catalog; one that loads is
 * looked up by every name and alias of its entries and printed as
 * `gpumem gpus` does. Every refusal has a
 * message; every name finds its own entry; nothing crashes, leaks or
 * overflows (ASan, UBSan).
 * Build and run: tests/fuzz/run.sh SECONDS BUILD_DIR catalog.
 */
#include "catalog.h"
#include "emit.h"
#include "error.h"

#include "fuzz_input.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct gm_catalog cat;
	struct gm_diag d;
	struct gm_val *v;
	FILE *null;

	/* Inputs whose first byte is even (the seed overlay.yaml starts
	 * with a newline) add to the built-in catalog, the others stand on
	 * their own. */
	bool over = size && !(data[0] & 1);
	const char *path = fuzz_input_path(data, size);

	d.msg[0] = '\0';
	if (over ? gm_catalog_load_over(&cat, path, gm_catalog_builtin(), &d)
		 : gm_catalog_load(&cat, path, &d)) {
		if (!d.msg[0])
			abort();
		return 0;
	}
	v = gm_catalog_report(&cat, false);
	null = fopen("/dev/null", "w");
	if (!v || !null)
		abort();
	for (int f = GM_FORMAT_TABLE; f <= GM_FORMAT_CSV; f++)
		if (gm_emit(null, v, (enum gm_format)f))
			abort();
	fclose(null);
	gm_val_free(v);
	for (size_t i = 0; i < cat.n; i++) {
		const struct gm_gpu *g = &cat.gpus[i];

		if (gm_catalog_find(&cat, g->name) != g)
			abort();
		for (size_t j = 0; j < g->n_aliases; j++)
			if (gm_catalog_find(&cat, g->aliases[j]) != g)
				abort();
	}
	gm_catalog_free(&cat);
	return 0;
}
