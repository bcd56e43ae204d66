/*
 * emit.h - the one output layer (emit.c).
 *
 * Every report is built once as a tree of values (struct gm_val) and then
 * printed by one emitter per format, so the table never drifts from JSON.
 *
 * Conventions the emitters rely on:
 *  - keys ending in "_bytes" hold byte counts (integers); the table shows
 *    them in GiB with two decimals, JSON/YAML/CSV print the exact integer;
 *  - a table heads "_gbps" keys "GB/s" (10^9 bytes a second) and
 *    "_tflops" keys "TFLOP/s"; other formats keep the key;
 *  - objects keep keys in insertion order;
 *  - CSV prints one row per element of an array of objects (nested keys
 *    flattened with dots: "per_gpu.weights_bytes"), or a single row for
 *    an object.
 *
 * Ownership: gm_obj_set()/gm_arr_push() take ownership of the child; free
 * the root with gm_val_free(). Constructors return NULL only when out of
 * host memory; setters accept a NULL child (they record nothing and
 * mark the root as failed: gm_emit() then returns GM_ENOMEM).
 */
#ifndef GM_EMIT_H
#define GM_EMIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct gm_diag;

enum gm_format {
	GM_FORMAT_TABLE,
	GM_FORMAT_JSON,
	GM_FORMAT_YAML,
	GM_FORMAT_CSV,
};

enum gm_val_kind {
	GM_VAL_NULL,
	GM_VAL_BOOL,
	GM_VAL_INT,
	GM_VAL_UINT,
	GM_VAL_REAL,
	GM_VAL_STR,
	GM_VAL_OBJ,
	GM_VAL_ARR,
};

struct gm_val;

struct gm_val *gm_val_null(void);
struct gm_val *gm_val_bool(bool b);
struct gm_val *gm_val_int(int64_t i);
struct gm_val *gm_val_uint(uint64_t u);
struct gm_val *gm_val_real(double d);
struct gm_val *gm_val_str(const char *s); /* copies s; NULL gives null */
struct gm_val *gm_val_obj(void);
struct gm_val *gm_val_arr(void);
void gm_val_free(struct gm_val *v);

/* Add key (copied) to obj; a repeated key replaces the old value. */
void gm_obj_set(struct gm_val *obj, const char *key, struct gm_val *child);
void gm_arr_push(struct gm_val *arr, struct gm_val *child);

/* Shorthands for gm_obj_set(obj, key, gm_val_xxx(...)). */
void gm_obj_set_str(struct gm_val *obj, const char *key, const char *s);
void gm_obj_set_uint(struct gm_val *obj, const char *key, uint64_t u);
void gm_obj_set_int(struct gm_val *obj, const char *key, int64_t i);
void gm_obj_set_real(struct gm_val *obj, const char *key, double d);
void gm_obj_set_bool(struct gm_val *obj, const char *key, bool b);

/* Inspection (tests, callers that post-process a tree). */
enum gm_val_kind gm_val_kind(const struct gm_val *v);
const struct gm_val *gm_obj_get(const struct gm_val *obj, const char *key);
size_t gm_val_len(const struct gm_val *v); /* members of an obj or arr */
const struct gm_val *gm_arr_at(const struct gm_val *arr, size_t i);
const char *gm_obj_key_at(const struct gm_val *obj, size_t i);
const struct gm_val *gm_obj_val_at(const struct gm_val *obj, size_t i);
uint64_t gm_val_as_uint(const struct gm_val *v); /* 0 unless a number */
double gm_val_as_real(const struct gm_val *v);
const char *gm_val_as_str(const struct gm_val *v); /* NULL unless a str */
bool gm_val_as_bool(const struct gm_val *v);

/*
 * Parse "table", "json", "yaml" or "csv". Returns 0 or GM_EINVAL (with a
 * message naming the option in diag).
 */
int gm_format_parse(const char *text, enum gm_format *format,
		    struct gm_diag *diag);

/* Print v to out in format. Returns 0, GM_ENOMEM or GM_EIO. */
int gm_emit(FILE *out, const struct gm_val *v, enum gm_format format);
/*
 * The same, but a table shows "_bytes" keys in the largest binary unit
 * that keeps the number at least 1, with two decimals (gm_size_format():
 * "64.00 MiB", "139.28 GiB"), as the allocator's messages do: for the
 * tables of measured and capped sizes (gpumem report, verify), where a
 * 64 MiB cap in GiB with two decimals ("0.06 GiB") loses its value.
 * Other formats print bytes, as gm_emit() does.
 */
int gm_emit_sized(FILE *out, const struct gm_val *v, enum gm_format format);

/*
 * Write a file atomically: gm_file_begin() opens a temporary file beside
 * path; gm_file_end() with ok=true flushes, closes and renames it over
 * path, with ok=false removes it. Nothing half-written is ever left at
 * path. Only a missing path or a regular file is replaced this way (a
 * symlink to one: its target, the link stays); a new file gets mode
 * 0666 & ~umask, a replaced one keeps its mode. A FIFO, a device
 * (/dev/stdout, /dev/null) or a socket is written directly, not atomically
 * and never replaced; a directory is refused. Both return 0 or GM_EIO
 * (diag names the path and errno text).
 */
struct gm_file {
	FILE *fp;
	bool direct; /* writing to path itself (not a regular file) */
	char tmp[4096];
	char path[4096];
};
int gm_file_begin(struct gm_file *f, const char *path, struct gm_diag *diag);
int gm_file_end(struct gm_file *f, bool ok, struct gm_diag *diag);

#endif
