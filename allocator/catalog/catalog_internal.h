/*
 * catalog_internal.h - shared between catalog.c, the YAML loader
 * (catalog_yaml.c) and the build-time generator (gen_catalog.c). Not for
 * other components: use catalog.h.
 */
#ifndef GM_CATALOG_INTERNAL_H
#define GM_CATALOG_INTERNAL_H

#include "catalog.h"

#include <stdbool.h>
#include <stddef.h>

/* Longest normalized name kept (longer names are cut). */
#define GM__CATALOG_NORM_MAX 128

/*
 * Normalized form of a GPU name: the words "nvidia", "tesla", "geforce"
 * dropped, then only letters (lowercased) and digits kept, so
 * "NVIDIA GeForce RTX 3090" and "rtx-3090" both give "rtx3090".
 * Writes at most len bytes, NUL-terminated. Returns out.
 */
char *gm__catalog_normalize(char *out, size_t len, const char *name);

/*
 * Record ptr as storage owned by cat (freed by gm_catalog_free()).
 * Returns 0 or GM_ENOMEM (then ptr is freed here).
 */
int gm__catalog_keep(struct gm_catalog *cat, void *ptr);

/*
 * gm_catalog_load() with builtin true for the build-time generator: the
 * built-in catalog must also give every GPU's 'multiprocessors' (a
 * missing one is a "path:line:column" GM_EINVAL like any other fault),
 * where a user's --catalog file may leave it out (0, not known).
 */
int gm__catalog_load(struct gm_catalog *cat, const char *path, bool builtin,
		     struct gm_diag *diag);

#endif
