/* emit.c - value trees and their table/JSON/YAML/CSV emitters (emit.h). */
#include "emit.h"

#include "error.h"
#include "text.h"
#include "units.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct gm_val {
	enum gm_val_kind kind;
	bool failed; /* a child could not be created (out of memory) */
	union {
		bool b;
		int64_t i;
		uint64_t u;
		double d;
		char *s;
	} as;
	size_t len, cap;
	char **keys;          /* GM_VAL_OBJ */
	struct gm_val **kids; /* GM_VAL_OBJ, GM_VAL_ARR */
	/* GM_VAL_OBJ with more than INDEX_MIN keys: an open-addressing
	 * hash of the keys (slot = member index + 1, 0 = empty; nslots a
	 * power of two, at least twice len), so lookups stay O(1) for
	 * objects of any size. */
	size_t *slots, nslots;
};

#define INDEX_MIN 8

/* ==== Construction ==== */

static struct gm_val *val_new(enum gm_val_kind kind)
{
	struct gm_val *v = calloc(1, sizeof(*v));

	if (v)
		v->kind = kind;
	return v;
}

struct gm_val *gm_val_null(void) { return val_new(GM_VAL_NULL); }
struct gm_val *gm_val_obj(void) { return val_new(GM_VAL_OBJ); }
struct gm_val *gm_val_arr(void) { return val_new(GM_VAL_ARR); }

struct gm_val *gm_val_bool(bool b)
{
	struct gm_val *v = val_new(GM_VAL_BOOL);

	if (v)
		v->as.b = b;
	return v;
}

struct gm_val *gm_val_int(int64_t i)
{
	struct gm_val *v = val_new(GM_VAL_INT);

	if (v)
		v->as.i = i;
	return v;
}

struct gm_val *gm_val_uint(uint64_t u)
{
	struct gm_val *v = val_new(GM_VAL_UINT);

	if (v)
		v->as.u = u;
	return v;
}

struct gm_val *gm_val_real(double d)
{
	struct gm_val *v = val_new(GM_VAL_REAL);

	if (v)
		v->as.d = d;
	return v;
}

struct gm_val *gm_val_str(const char *s)
{
	struct gm_val *v;

	if (!s)
		return gm_val_null();
	v = val_new(GM_VAL_STR);
	if (!v)
		return NULL;
	v->as.s = strdup(s);
	if (!v->as.s) {
		free(v);
		return NULL;
	}
	return v;
}

void gm_val_free(struct gm_val *v)
{
	if (!v)
		return;
	for (size_t i = 0; i < v->len; i++) {
		gm_val_free(v->kids[i]);
		if (v->keys)
			free(v->keys[i]);
	}
	free(v->kids);
	free(v->keys);
	free(v->slots);
	if (v->kind == GM_VAL_STR)
		free(v->as.s);
	free(v);
}

static bool grow(struct gm_val *v)
{
	size_t cap = v->cap ? v->cap * 2 : 8;
	struct gm_val **kids = realloc(v->kids, cap * sizeof(*kids));

	if (!kids)
		return false;
	v->kids = kids;
	if (v->kind == GM_VAL_OBJ) {
		char **keys = realloc(v->keys, cap * sizeof(*keys));
		if (!keys)
			return false;
		v->keys = keys;
	}
	v->cap = cap;
	return true;
}

/* FNV-1a over the key's bytes. */
static size_t key_hash(const char *key)
{
	uint64_t h = 14695981039346656037ULL;

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)h;
}

/* Put member i into obj's hash slots (a free slot exists: nslots > len). */
static void index_put(struct gm_val *obj, size_t i)
{
	size_t mask = obj->nslots - 1, at = key_hash(obj->keys[i]) & mask;

	while (obj->slots[at])
		at = (at + 1) & mask;
	obj->slots[at] = i + 1;
}

/*
 * Index member obj->len - 1 (just appended): into the free slots, or by
 * rebuilding the hash at twice the size. Out of memory drops the hash:
 * lookups fall back to a linear search, still correct.
 */
static void index_add(struct gm_val *obj)
{
	size_t want = obj->nslots ? obj->nslots : 32;
	size_t *slots;

	if (obj->len <= INDEX_MIN)
		return;
	if (obj->slots && obj->len * 2 <= obj->nslots) {
		index_put(obj, obj->len - 1);
		return;
	}
	while (obj->len * 2 > want)
		want *= 2;
	slots = calloc(want, sizeof(*slots));
	free(obj->slots);
	obj->slots = slots;
	obj->nslots = slots ? want : 0;
	for (size_t i = 0; slots && i < obj->len; i++)
		index_put(obj, i);
}

/* The member index of key in obj, or obj->len when absent. */
static size_t obj_find(const struct gm_val *obj, const char *key)
{
	size_t mask, at;

	if (!obj->slots) {
		for (size_t i = 0; i < obj->len; i++)
			if (strcmp(obj->keys[i], key) == 0)
				return i;
		return obj->len;
	}
	mask = obj->nslots - 1;
	for (at = key_hash(key) & mask; obj->slots[at]; at = (at + 1) & mask)
		if (strcmp(obj->keys[obj->slots[at] - 1], key) == 0)
			return obj->slots[at] - 1;
	return obj->len;
}

void gm_obj_set(struct gm_val *obj, const char *key, struct gm_val *child)
{
	size_t i;
	char *k;

	if (!obj)
		return;
	if (!child) {
		obj->failed = true;
		return;
	}
	i = obj_find(obj, key);
	if (i < obj->len) {
		gm_val_free(obj->kids[i]);
		obj->kids[i] = child;
		return;
	}
	k = strdup(key);
	if (!k || (obj->len == obj->cap && !grow(obj))) {
		free(k);
		gm_val_free(child);
		obj->failed = true;
		return;
	}
	obj->keys[obj->len] = k;
	obj->kids[obj->len++] = child;
	index_add(obj);
}

void gm_arr_push(struct gm_val *arr, struct gm_val *child)
{
	if (!arr)
		return;
	if (!child || (arr->len == arr->cap && !grow(arr))) {
		gm_val_free(child);
		arr->failed = true;
		return;
	}
	arr->kids[arr->len++] = child;
}

void gm_obj_set_str(struct gm_val *o, const char *k, const char *s)
{
	gm_obj_set(o, k, gm_val_str(s));
}

void gm_obj_set_uint(struct gm_val *o, const char *k, uint64_t u)
{
	gm_obj_set(o, k, gm_val_uint(u));
}

void gm_obj_set_int(struct gm_val *o, const char *k, int64_t i)
{
	gm_obj_set(o, k, gm_val_int(i));
}

void gm_obj_set_real(struct gm_val *o, const char *k, double d)
{
	gm_obj_set(o, k, gm_val_real(d));
}

void gm_obj_set_bool(struct gm_val *o, const char *k, bool b)
{
	gm_obj_set(o, k, gm_val_bool(b));
}

/* ==== Inspection ==== */

enum gm_val_kind gm_val_kind(const struct gm_val *v)
{
	return v ? v->kind : GM_VAL_NULL;
}

const struct gm_val *gm_obj_get(const struct gm_val *obj, const char *key)
{
	size_t i;

	if (!obj || obj->kind != GM_VAL_OBJ)
		return NULL;
	i = obj_find(obj, key);
	return i < obj->len ? obj->kids[i] : NULL;
}

size_t gm_val_len(const struct gm_val *v)
{
	return v ? v->len : 0;
}

const struct gm_val *gm_arr_at(const struct gm_val *arr, size_t i)
{
	return arr && i < arr->len ? arr->kids[i] : NULL;
}

const char *gm_obj_key_at(const struct gm_val *obj, size_t i)
{
	return obj && obj->keys && i < obj->len ? obj->keys[i] : NULL;
}

const struct gm_val *gm_obj_val_at(const struct gm_val *obj, size_t i)
{
	return obj && obj->kind == GM_VAL_OBJ && i < obj->len ? obj->kids[i]
							      : NULL;
}

uint64_t gm_val_as_uint(const struct gm_val *v)
{
	if (!v)
		return 0;
	switch (v->kind) {
	case GM_VAL_UINT:
		return v->as.u;
	case GM_VAL_INT:
		return v->as.i < 0 ? 0 : (uint64_t)v->as.i;
	case GM_VAL_REAL:
		return v->as.d < 0 ? 0 : (uint64_t)v->as.d;
	default:
		return 0;
	}
}

double gm_val_as_real(const struct gm_val *v)
{
	if (!v)
		return 0;
	switch (v->kind) {
	case GM_VAL_UINT:
		return (double)v->as.u;
	case GM_VAL_INT:
		return (double)v->as.i;
	case GM_VAL_REAL:
		return v->as.d;
	default:
		return 0;
	}
}

const char *gm_val_as_str(const struct gm_val *v)
{
	return v && v->kind == GM_VAL_STR ? v->as.s : NULL;
}

bool gm_val_as_bool(const struct gm_val *v)
{
	return v && v->kind == GM_VAL_BOOL && v->as.b;
}

static bool tree_failed(const struct gm_val *v)
{
	if (!v || v->failed)
		return true;
	for (size_t i = 0; i < v->len; i++)
		if (tree_failed(v->kids[i]))
			return true;
	return false;
}

/* ==== Scalars as text ==== */

static bool is_bytes_key(const char *key)
{
	size_t n = key ? strlen(key) : 0;

	return n >= 6 && strcmp(key + n - 6, "_bytes") == 0;
}

/* s for a table or CSV cell: control characters escaped (text.h). */
static void cell_text(char *buf, size_t len, const char *s)
{
	gm_text_escape(buf, len, s);
}

/* Plain text of a scalar (JSON number syntax for numbers). */
static void scalar_text(char *buf, size_t len, const struct gm_val *v)
{
	switch (v->kind) {
	case GM_VAL_NULL:
		snprintf(buf, len, "null");
		break;
	case GM_VAL_BOOL:
		snprintf(buf, len, "%s", v->as.b ? "true" : "false");
		break;
	case GM_VAL_INT:
		snprintf(buf, len, "%lld", (long long)v->as.i);
		break;
	case GM_VAL_UINT:
		snprintf(buf, len, "%llu", (unsigned long long)v->as.u);
		break;
	case GM_VAL_REAL:
		if (!isfinite(v->as.d))
			snprintf(buf, len, "null");
		else
			snprintf(buf, len, "%.10g", v->as.d);
		break;
	case GM_VAL_STR:
		cell_text(buf, len, v->as.s);
		break;
	default:
		snprintf(buf, len, "%s", v->kind == GM_VAL_OBJ ? "{}" : "[]");
	}
}

/* gm_emit_sized(): a table's sizes in gm_size_format()'s unit (set for
 * the one call, on its thread). */
static _Thread_local bool sizes_auto;

/* Text of a scalar as a person reads it in a table. */
static void table_text(char *buf, size_t len, const char *key,
		       const struct gm_val *v)
{
	if (sizes_auto && is_bytes_key(key) && v->kind == GM_VAL_UINT) {
		gm_size_format(buf, len, v->as.u);
		return;
	}
	if (is_bytes_key(key) &&
	    (v->kind == GM_VAL_UINT || v->kind == GM_VAL_INT)) {
		double gib = v->kind == GM_VAL_INT ? (double)v->as.i / GM_GiB
						   : gm_gib(v->as.u);
		/* GiB with two decimals, as the column says (the CLI contract:
		 * tables print GiB); a size that is not 0 but would print
		 * as 0.00 says so */
		if (gib != 0 && gib > -0.005 && gib < 0.005)
			snprintf(buf, len, "%s0.01 GiB", gib < 0 ? ">-" : "<");
		else
			snprintf(buf, len, "%.2f GiB", gib);
		return;
	}
	if (v->kind == GM_VAL_REAL && isfinite(v->as.d)) {
		snprintf(buf, len, "%.4g", v->as.d);
		return;
	}
	if (v->kind == GM_VAL_BOOL) {
		snprintf(buf, len, "%s", v->as.b ? "yes" : "no");
		return;
	}
	if (v->kind == GM_VAL_NULL) {
		snprintf(buf, len, "-");
		return;
	}
	scalar_text(buf, len, v);
}

/* A key's unit suffix and what a table heading says instead: bytes are
 * printed in GiB by the cell; _gbps are GB/s (10^9 bytes a second, not
 * gigabits), _tflops TFLOP/s. */
static const struct {
	const char *suffix, *label;
} units[] = {
	{"_bytes", ""},
	{"_gbps", " GB/s"},
	{"_tflops", " TFLOP/s"},
};

/* "peak_reserved_bytes" -> "peak reserved", "bandwidth_gbps" ->
 * "bandwidth GB/s" for table labels. */
static void label_text(char *buf, size_t len, const char *key)
{
	const char *unit = "";
	size_t n;

	cell_text(buf, len, key);
	n = strlen(buf);
	for (size_t u = 0; u < sizeof(units) / sizeof(units[0]); u++) {
		size_t k = strlen(units[u].suffix);

		if (n > k && strcmp(buf + n - k, units[u].suffix) == 0) {
			n -= k;
			unit = units[u].label;
			break;
		}
	}
	for (size_t i = 0; i < n; i++)
		if (buf[i] == '_')
			buf[i] = ' ';
	snprintf(buf + n, len - n, "%s", unit);
}

static bool is_scalar(const struct gm_val *v)
{
	return v->kind != GM_VAL_OBJ && v->kind != GM_VAL_ARR;
}

/* ==== JSON ==== */

static void json_string(FILE *out, const char *s)
{
	fputc('"', out);
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		switch (*p) {
		case '"':
			fputs("\\\"", out);
			break;
		case '\\':
			fputs("\\\\", out);
			break;
		case '\n':
			fputs("\\n", out);
			break;
		case '\t':
			fputs("\\t", out);
			break;
		case '\r':
			fputs("\\r", out);
			break;
		default: {
			uint32_t cp;
			size_t n = gm_text_utf8((const char *)p, &cp);

			/* DEL and C1 controls too, which JSON allows raw but
			 * a terminal may act on. */
			if (n && gm_text_is_control(cp)) {
				fprintf(out, "\\u%04x", (unsigned)cp);
				p += n - 1;
			} else {
				fputc(*p, out);
			}
		}
		}
	}
	fputc('"', out);
}

static void json_indent(FILE *out, int depth)
{
	fputc('\n', out);
	for (int i = 0; i < depth; i++)
		fputs("  ", out);
}

static void json_value(FILE *out, const struct gm_val *v, int depth)
{
	char buf[64];
	bool obj = v->kind == GM_VAL_OBJ;

	if (v->kind == GM_VAL_STR) {
		json_string(out, v->as.s);
		return;
	}
	if (is_scalar(v)) {
		scalar_text(buf, sizeof(buf), v);
		fputs(buf, out);
		return;
	}
	fputc(obj ? '{' : '[', out);
	for (size_t i = 0; i < v->len; i++) {
		json_indent(out, depth + 1);
		if (obj) {
			json_string(out, v->keys[i]);
			fputs(": ", out);
		}
		json_value(out, v->kids[i], depth + 1);
		if (i + 1 < v->len)
			fputc(',', out);
	}
	if (v->len)
		json_indent(out, depth);
	fputc(obj ? '}' : ']', out);
}

/* ==== YAML (block style; strings double-quoted, JSON escapes) ==== */

static void yaml_pad(FILE *out, int depth)
{
	for (int i = 0; i < depth; i++)
		fputs("  ", out);
}

static void yaml_scalar(FILE *out, const struct gm_val *v)
{
	char buf[64];

	if (v->kind == GM_VAL_STR) {
		json_string(out, v->as.s);
		return;
	}
	scalar_text(buf, sizeof(buf), v);
	fputs(buf, out);
}

static void yaml_value(FILE *out, const struct gm_val *v, int depth);

/* A key as it is when it is a plain word, else double-quoted. */
static void yaml_key(FILE *out, const char *key)
{
	size_t n = strspn(key, "abcdefghijklmnopqrstuvwxyz"
			  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.");

	if (n && !key[n])
		fputs(key, out);
	else
		json_string(out, key);
}

static void yaml_child(FILE *out, const struct gm_val *kid, int depth)
{
	if (is_scalar(kid) || kid->len == 0) {
		fputc(' ', out);
		if (is_scalar(kid))
			yaml_scalar(out, kid);
		else
			fputs(kid->kind == GM_VAL_OBJ ? "{}" : "[]", out);
		fputc('\n', out);
		return;
	}
	fputc('\n', out);
	yaml_value(out, kid, depth + 1);
}

static void yaml_value(FILE *out, const struct gm_val *v, int depth)
{
	for (size_t i = 0; i < v->len; i++) {
		yaml_pad(out, depth);
		if (v->kind == GM_VAL_OBJ) {
			yaml_key(out, v->keys[i]);
			fputc(':', out);
		} else {
			fputc('-', out);
		}
		yaml_child(out, v->kids[i], depth);
	}
}

static void yaml_emit(FILE *out, const struct gm_val *v)
{
	if (is_scalar(v) || v->len == 0) {
		yaml_child(out, v, 0);
		return;
	}
	yaml_value(out, v, 0);
}

/* ==== CSV (RFC 4180) ==== */

struct columns {
	char **names;
	size_t len, cap;
};

static int columns_add(struct columns *c, const char *name)
{
	for (size_t i = 0; i < c->len; i++)
		if (strcmp(c->names[i], name) == 0)
			return 0;
	if (c->len == c->cap) {
		size_t cap = c->cap ? c->cap * 2 : 16;
		char **n = realloc(c->names, cap * sizeof(*n));
		if (!n)
			return GM_ENOMEM;
		c->names = n;
		c->cap = cap;
	}
	c->names[c->len] = strdup(name);
	if (!c->names[c->len])
		return GM_ENOMEM;
	c->len++;
	return 0;
}

static void columns_free(struct columns *c)
{
	for (size_t i = 0; i < c->len; i++)
		free(c->names[i]);
	free(c->names);
}

/* Collect dotted leaf paths under v into c. */
static int csv_paths(struct columns *c, const struct gm_val *v,
		     const char *prefix)
{
	char path[512];
	int rc;

	if (is_scalar(v))
		return columns_add(c, prefix);
	for (size_t i = 0; i < v->len; i++) {
		if (v->kind == GM_VAL_OBJ)
			snprintf(path, sizeof(path), "%s%s%s", prefix,
				 *prefix ? "." : "", v->keys[i]);
		else
			snprintf(path, sizeof(path), "%s%s%zu", prefix,
				 *prefix ? "." : "", i);
		rc = csv_paths(c, v->kids[i], path);
		if (rc)
			return rc;
	}
	return 0;
}

/* The leaf at dotted path under v, or NULL. */
static const struct gm_val *csv_lookup(const struct gm_val *v,
				       const char *path)
{
	const char *dot;
	char part[256];
	size_t n;

	while (*path) {
		dot = strchr(path, '.');
		n = dot ? (size_t)(dot - path) : strlen(path);
		if (n >= sizeof(part))
			return NULL;
		memcpy(part, path, n);
		part[n] = '\0';
		if (v->kind == GM_VAL_OBJ)
			v = gm_obj_get(v, part);
		else if (v->kind == GM_VAL_ARR)
			v = gm_arr_at(v, strtoul(part, NULL, 10));
		else
			return NULL;
		if (!v)
			return NULL;
		path += n + (dot ? 1 : 0);
	}
	return v;
}

static void csv_field(FILE *out, const char *text)
{
	if (strpbrk(text, ",\"\n\r") == NULL) {
		fputs(text, out);
		return;
	}
	fputc('"', out);
	for (const char *p = text; *p; p++) {
		if (*p == '"')
			fputc('"', out);
		fputc(*p, out);
	}
	fputc('"', out);
}

static void csv_row(FILE *out, const struct columns *c,
		    const struct gm_val *row)
{
	char buf[512];

	for (size_t i = 0; i < c->len; i++) {
		const struct gm_val *leaf = csv_lookup(row, c->names[i]);
		if (i)
			fputc(',', out);
		if (leaf && is_scalar(leaf) && leaf->kind != GM_VAL_NULL) {
			scalar_text(buf, sizeof(buf), leaf);
			csv_field(out, buf);
		}
	}
	fputc('\n', out);
}

static int csv_emit(FILE *out, const struct gm_val *v)
{
	struct columns c = {0};
	bool rows = v->kind == GM_VAL_ARR;
	size_t n = rows ? v->len : 1;
	int rc = 0;

	for (size_t i = 0; i < n && !rc; i++)
		rc = csv_paths(&c, rows ? v->kids[i] : v, "");
	if (rc) {
		columns_free(&c);
		return rc;
	}
	for (size_t i = 0; i < c.len; i++) {
		char name[1024];

		if (i)
			fputc(',', out);
		cell_text(name, sizeof(name), c.names[i]);
		csv_field(out, name);
	}
	fputc('\n', out);
	for (size_t i = 0; i < n; i++)
		csv_row(out, &c, rows ? v->kids[i] : v);
	columns_free(&c);
	return 0;
}

/* ==== Table ==== */

static bool is_row_array(const struct gm_val *v)
{
	if (v->kind != GM_VAL_ARR || v->len == 0)
		return false;
	for (size_t i = 0; i < v->len; i++)
		if (v->kids[i]->kind != GM_VAL_OBJ)
			return false;
	return true;
}

/* An array of objects as columns; nested values are skipped. */
static int table_rows(FILE *out, const struct gm_val *v, int depth)
{
	struct columns c = {0};
	size_t *width;
	char buf[256];
	int rc = 0;

	for (size_t r = 0; r < v->len && !rc; r++) {
		const struct gm_val *row = v->kids[r];
		for (size_t i = 0; i < row->len && !rc; i++)
			if (is_scalar(row->kids[i]))
				rc = columns_add(&c, row->keys[i]);
	}
	width = rc ? NULL : calloc(c.len ? c.len : 1, sizeof(*width));
	if (!width) {
		columns_free(&c);
		return GM_ENOMEM;
	}
	for (size_t i = 0; i < c.len; i++) {
		label_text(buf, sizeof(buf), c.names[i]);
		width[i] = strlen(buf);
		for (size_t r = 0; r < v->len; r++) {
			const struct gm_val *cell =
				gm_obj_get(v->kids[r], c.names[i]);
			if (!cell)
				continue;
			table_text(buf, sizeof(buf), c.names[i], cell);
			if (strlen(buf) > width[i])
				width[i] = strlen(buf);
		}
	}
	yaml_pad(out, depth);
	for (size_t i = 0; i < c.len; i++) {
		label_text(buf, sizeof(buf), c.names[i]);
		fprintf(out, "%-*s%s", (int)width[i], buf,
			i + 1 < c.len ? "  " : "\n");
	}
	for (size_t r = 0; r < v->len; r++) {
		yaml_pad(out, depth);
		for (size_t i = 0; i < c.len; i++) {
			const struct gm_val *cell =
				gm_obj_get(v->kids[r], c.names[i]);
			buf[0] = '\0';
			if (cell)
				table_text(buf, sizeof(buf), c.names[i], cell);
			/* Numbers right-aligned, text left-aligned. */
			bool num = cell && (cell->kind == GM_VAL_UINT ||
					    cell->kind == GM_VAL_INT ||
					    cell->kind == GM_VAL_REAL);
			fprintf(out, num ? "%*s%s" : "%-*s%s", (int)width[i],
				buf, i + 1 < c.len ? "  " : "\n");
		}
	}
	free(width);
	columns_free(&c);
	return 0;
}

static int table_obj(FILE *out, const struct gm_val *v, int depth)
{
	char label[256], buf[256];
	size_t w = 0;
	int rc;

	for (size_t i = 0; i < v->len; i++) {
		label_text(label, sizeof(label), v->keys[i]);
		if (is_scalar(v->kids[i]) && strlen(label) > w)
			w = strlen(label);
	}
	for (size_t i = 0; i < v->len; i++) {
		const struct gm_val *kid = v->kids[i];
		label_text(label, sizeof(label), v->keys[i]);
		if (is_scalar(kid)) {
			table_text(buf, sizeof(buf), v->keys[i], kid);
			yaml_pad(out, depth);
			fprintf(out, "%-*s  %s\n", (int)w, label, buf);
			continue;
		}
		if (kid->len == 0)
			continue;
		fputc('\n', out);
		yaml_pad(out, depth);
		fprintf(out, "%s:\n", label);
		rc = is_row_array(kid) ? table_rows(out, kid, depth + 1)
		     : kid->kind == GM_VAL_OBJ ? table_obj(out, kid, depth + 1)
					       : 0;
		if (kid->kind == GM_VAL_ARR && !is_row_array(kid)) {
			for (size_t j = 0; j < kid->len; j++) {
				if (!is_scalar(kid->kids[j]))
					continue;
				table_text(buf, sizeof(buf), "",
					   kid->kids[j]);
				yaml_pad(out, depth + 1);
				fprintf(out, "%s\n", buf);
			}
		}
		if (rc)
			return rc;
	}
	return 0;
}

static int table_emit(FILE *out, const struct gm_val *v)
{
	char buf[256];

	if (is_row_array(v))
		return table_rows(out, v, 0);
	if (v->kind == GM_VAL_OBJ)
		return table_obj(out, v, 0);
	if (v->kind == GM_VAL_ARR) {
		for (size_t i = 0; i < v->len; i++) {
			table_text(buf, sizeof(buf), "", v->kids[i]);
			fprintf(out, "%s\n", buf);
		}
		return 0;
	}
	table_text(buf, sizeof(buf), "", v);
	fprintf(out, "%s\n", buf);
	return 0;
}

/* ==== Entry points ==== */

int gm_format_parse(const char *text, enum gm_format *format,
		    struct gm_diag *diag)
{
	static const char *const names[] = {"table", "json", "yaml", "csv"};

	for (int i = 0; i < 4; i++) {
		if (text && strcasecmp(text, names[i]) == 0) {
			*format = (enum gm_format)i;
			return 0;
		}
	}
	return gm_diag_set(diag, GM_EINVAL,
			   "--format: '%s' is not one of table, json, yaml, "
			   "csv",
			   text ? text : "");
}

int gm_emit(FILE *out, const struct gm_val *v, enum gm_format format)
{
	int rc = 0;

	if (tree_failed(v))
		return GM_ENOMEM;
	switch (format) {
	case GM_FORMAT_JSON:
		json_value(out, v, 0);
		fputc('\n', out);
		break;
	case GM_FORMAT_YAML:
		yaml_emit(out, v);
		break;
	case GM_FORMAT_CSV:
		rc = csv_emit(out, v);
		break;
	case GM_FORMAT_TABLE:
		rc = table_emit(out, v);
		break;
	}
	if (rc)
		return rc;
	return ferror(out) ? GM_EIO : 0;
}

int gm_emit_sized(FILE *out, const struct gm_val *v, enum gm_format format)
{
	int rc;

	sizes_auto = true;
	rc = gm_emit(out, v, format);
	sizes_auto = false;
	return rc;
}

/* ==== Atomic files ==== */

/*
 * Create a new file beside f->path (f->tmp) with O_EXCL and O_NOFOLLOW
 * (never through a link planted at the temporary's name) and mode (the
 * kernel applies the umask, as for any created file). Returns an fd or
 * -1 with errno set.
 */
static int create_tmp(struct gm_file *f, mode_t mode)
{
	static unsigned long seq;
	struct timespec ts;

	for (int tries = 0; tries < 100; tries++) {
		int fd, n;

		clock_gettime(CLOCK_REALTIME, &ts);
		n = snprintf(f->tmp, sizeof(f->tmp), "%s.tmp.%ld.%lx%lx", f->path,
			 (long)getpid(), (unsigned long)ts.tv_nsec,
			 __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
		if (n < 0 || (size_t)n >= sizeof(f->tmp)) {
			errno = ENAMETOOLONG;
			return -1;
		}
		fd = open(f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW |
			  O_CLOEXEC, mode);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

/*
 * Whether the directory holding path lets other users plant or replace
 * names in it (sticky or world-writable, as /tmp). Fills *uid with the
 * directory's owner. A directory that cannot be read counts as shared.
 */
static bool dir_shared(const char *path, uid_t *uid)
{
	char dir[4096];
	const char *slash = strrchr(path, '/');
	struct stat st;
	size_t n;

	if (!slash) {
		snprintf(dir, sizeof(dir), ".");
	} else {
		n = slash == path ? 1 : (size_t)(slash - path);
		if (n >= sizeof(dir))
			n = sizeof(dir) - 1;
		memcpy(dir, path, n);
		dir[n] = '\0';
	}
	*uid = 0;
	if (stat(dir, &st) != 0)
		return true;
	*uid = st.st_uid;
	return (st.st_mode & (S_ISVTX | S_IWOTH)) != 0;
}

/* Open a FIFO, device or socket for writing, never creating a file. */
static int open_direct(struct gm_file *f, const char *path,
		       struct gm_diag *diag)
{
	struct stat st;
	int fd = open(path, O_WRONLY | O_NOCTTY | O_CLOEXEC);

	if (fd < 0)
		return gm_diag_set(diag, GM_EIO, "%s: %s", path,
				   strerror(errno));
	if (fstat(fd, &st) != 0 || S_ISREG(st.st_mode) ||
	    S_ISDIR(st.st_mode)) {
		close(fd);
		return gm_diag_set(diag, GM_EIO, "%s: changed while being "
				   "opened; not written", path);
	}
	f->direct = true;
	f->fp = fdopen(fd, "w");
	if (!f->fp) {
		int e = errno;

		close(fd);
		return gm_diag_set(diag, GM_EIO, "%s: %s", path, strerror(e));
	}
	return 0;
}

/*
 * Follow the symlinks at f->path one link at a time, leaving in f->path
 * the name that will be written: a missing name or a regular file.
 * In a sticky or world-writable directory a link is followed only when
 * it belongs to us or to the directory's owner (the rule of the Linux
 * fs.protected_symlinks setting, which root does not bypass here either),
 * and a regular file there is replaced only when it is ours: otherwise
 * another user could make us write onto a file of their choosing. Sets
 * *special when the name is a FIFO, device or socket (opened directly).
 */
static int resolve_target(struct gm_file *f, const char *given,
			  bool *special, mode_t *mode, struct gm_diag *diag)
{
	uid_t me = geteuid(), owner;
	struct stat st;

	*special = false;
	for (int hop = 0;; hop++) {
		char target[4096];
		ssize_t n;

		if (lstat(f->path, &st) != 0) {
			if (errno == ENOENT)
				return 0; /* a new file */
			return gm_diag_set(diag, GM_EIO, "%s: %s", given,
					   strerror(errno));
		}
		if (S_ISDIR(st.st_mode))
			return gm_diag_set(diag, GM_EIO, "%s: %s", given,
					   strerror(EISDIR));
		if (S_ISREG(st.st_mode)) {
			if (st.st_uid != me && dir_shared(f->path, &owner))
				return gm_diag_set(
					diag, GM_EIO,
					"%s: %s belongs to uid %lu in a shared "
					"(sticky or world-writable) directory; "
					"not replaced",
					given, f->path,
					(unsigned long)st.st_uid);
			*mode = st.st_mode & 07777;
			return 0;
		}
		if (!S_ISLNK(st.st_mode)) {
			*special = true;
			return 0;
		}
		if (dir_shared(f->path, &owner) && st.st_uid != me &&
		    st.st_uid != owner)
			return gm_diag_set(diag, GM_EIO,
					   "%s: a symlink of uid %lu in a shared "
					   "(sticky or world-writable) directory; "
					   "not followed",
					   given, (unsigned long)st.st_uid);
		if (hop >= 40)
			return gm_diag_set(diag, GM_EIO, "%s: %s", given,
					   strerror(ELOOP));
		/* A link to a FIFO or device (/dev/stdout, whose /proc
		 * target names no file) is opened through the link. */
		if (stat(f->path, &st) == 0 && !S_ISREG(st.st_mode)) {
			if (S_ISDIR(st.st_mode))
				return gm_diag_set(diag, GM_EIO, "%s: %s",
						   given, strerror(EISDIR));
			*special = true;
			return 0;
		}
		n = readlink(f->path, target, sizeof(target) - 1);
		if (n <= 0)
			return gm_diag_set(diag, GM_EIO, "%s: %s", given,
					   strerror(n < 0 ? errno : EINVAL));
		target[n] = '\0';
		if (target[0] != '/') {
			char *slash = strrchr(f->path, '/');
			size_t keep = slash ? (size_t)(slash - f->path) + 1 : 0;

			if (keep + (size_t)n + 80 >= sizeof(f->path))
				return gm_diag_set(diag, GM_EINVAL,
						   "%s: path too long", given);
			memmove(f->path + keep, target, (size_t)n + 1);
		} else {
			if ((size_t)n + 80 >= sizeof(f->path))
				return gm_diag_set(diag, GM_EINVAL,
						   "%s: path too long", given);
			memcpy(f->path, target, (size_t)n + 1);
		}
	}
}

/*
 * Open path for writing. A missing path or a regular file (also through
 * symlinks, followed so the target is replaced and the link kept) is
 * written atomically through a temporary file in the same directory
 * (created with O_EXCL | O_NOFOLLOW) renamed over it; a replaced file
 * keeps its mode, a new one gets 0666 & ~umask. In a sticky or
 * world-writable directory, another user's symlink is not followed and
 * another user's file not replaced (resolve_target). Anything else (a
 * FIFO, a character device such as /dev/stdout or /dev/null, a socket)
 * is opened and written directly, never created or replaced. A
 * directory is refused.
 */
int gm_file_begin(struct gm_file *f, const char *path, struct gm_diag *diag)
{
	mode_t mode = 0666;
	bool special;
	int fd, rc;

	memset(f, 0, sizeof(*f));
	if (strlen(path) + 80 >= sizeof(f->tmp))
		return gm_diag_set(diag, GM_EINVAL, "%s: path too long", path);
	snprintf(f->path, sizeof(f->path), "%s", path);
	rc = resolve_target(f, path, &special, &mode, diag);
	if (rc)
		return rc;
	if (special)
		return open_direct(f, f->path, diag);
	fd = create_tmp(f, mode);
	if (fd < 0)
		return gm_diag_set(diag, GM_EIO, "%s: cannot create a file "
				   "there: %s", path, strerror(errno));
	/* A replaced file keeps its mode even if the umask is stricter. */
	if (mode != 0666)
		(void)fchmod(fd, mode);
	f->fp = fdopen(fd, "w");
	if (!f->fp) {
		int e = errno;

		close(fd);
		unlink(f->tmp);
		return gm_diag_set(diag, GM_EIO, "%s: %s", path, strerror(e));
	}
	return 0;
}

int gm_file_end(struct gm_file *f, bool ok, struct gm_diag *diag)
{
	int err = 0;

	if (!f->fp)
		return 0;
	errno = 0;
	if (ferror(f->fp) || fflush(f->fp) != 0)
		err = errno ? errno : EIO;
	if (fclose(f->fp) != 0 && !err)
		err = errno ? errno : EIO;
	f->fp = NULL;
	if (f->direct) {
		if (err && ok)
			return gm_diag_set(diag, GM_EIO, "%s: %s", f->path,
					   strerror(err));
		return 0;
	}
	if (!ok || err || rename(f->tmp, f->path) != 0) {
		if (!err && ok)
			err = errno;
		unlink(f->tmp);
		if (!ok)
			return 0;
		return gm_diag_set(diag, GM_EIO, "%s: %s", f->path,
				   strerror(err));
	}
	return 0;
}
