/* merge.c - reading and merging report files (see merge.h). */
#include "merge.h"

#include "emit.h"
#include "error.h"
#include "text.h"
#include "yaml_check.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <yaml.h>

/* ==== JSON (as YAML) -> gm_val ==== */

/* Where each value of a loaded document starts (1-based), for messages
 * about its content; slots hash the values' addresses (slot = entry + 1,
 * 0 = empty; nslots a power of two, at least twice n) so that finding a
 * value's mark does not scan them all. */
struct gm_json_marks {
	const struct gm_val **val;
	size_t *line, *col;
	size_t n, cap;
	size_t *slots, nslots;
};

static size_t ptr_hash(const void *p)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 17);
}

static void slot_put(struct gm_json_marks *m, size_t i)
{
	size_t mask = m->nslots - 1, at = ptr_hash(m->val[i]) & mask;

	while (m->slots[at])
		at = (at + 1) & mask;
	m->slots[at] = i + 1;
}

/* Hash entry m->n - 1 (just added), growing the slots as needed; out of
 * memory leaves that entry unhashed (its value's mark reads as 1:1). */
static void slot_add(struct gm_json_marks *m)
{
	size_t want = m->nslots ? m->nslots : 128, *slots;

	if (m->slots && m->n * 2 <= m->nslots) {
		slot_put(m, m->n - 1);
		return;
	}
	while (m->n * 2 > want)
		want *= 2;
	slots = calloc(want, sizeof(*slots));
	if (!slots)
		return;
	free(m->slots);
	m->slots = slots;
	m->nslots = want;
	for (size_t i = 0; i < m->n; i++)
		slot_put(m, i);
}

static void mark(struct gm_json_marks *m, const struct gm_val *v,
		 const yaml_event_t *ev)
{
	if (!m || !v)
		return;
	if (m->n == m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 64;
		const struct gm_val **val = realloc(m->val,
						    cap * sizeof(*val));
		size_t *line, *col;

		if (!val)
			return;
		m->val = val;
		line = realloc(m->line, cap * sizeof(*line));
		if (!line)
			return;
		m->line = line;
		col = realloc(m->col, cap * sizeof(*col));
		if (!col)
			return;
		m->col = col;
		m->cap = cap;
	}
	m->val[m->n] = v;
	m->line[m->n] = ev->start_mark.line + 1;
	m->col[m->n++] = ev->start_mark.column + 1;
	slot_add(m);
}

void gm_json_marks_free(struct gm_json_marks *m)
{
	if (!m)
		return;
	free(m->val);
	free(m->line);
	free(m->col);
	free(m->slots);
	free(m);
}

/* "line:col" of v, or "1:1" when unknown (out of memory while loading). */
static void where(const struct gm_json_marks *m, const struct gm_val *v,
		  size_t *line, size_t *col)
{
	size_t mask, at;

	*line = *col = 1;
	if (!m || !m->slots)
		return;
	mask = m->nslots - 1;
	for (at = ptr_hash(v) & mask; m->slots[at]; at = (at + 1) & mask) {
		size_t i = m->slots[at] - 1;

		if (m->val[i] == v) {
			*line = m->line[i];
			*col = m->col[i];
			return;
		}
	}
}

static struct gm_val *scalar(const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	char *end;

	if (ev->data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return gm_val_str(s);
	if (!strcmp(s, "null") || !strcmp(s, "~") || !*s)
		return gm_val_null();
	if (!strcmp(s, "true"))
		return gm_val_bool(true);
	if (!strcmp(s, "false"))
		return gm_val_bool(false);
	errno = 0;
	if (*s == '-') {
		long long i = strtoll(s, &end, 10);
		if (!*end && !errno)
			return gm_val_int(i);
	} else {
		unsigned long long u = strtoull(s, &end, 10);
		if (!*end && !errno)
			return gm_val_uint(u);
	}
	double d = strtod(s, &end);
	if (!*end)
		return gm_val_real(d);
	return gm_val_str(s);
}

/* A key of object v: no tag or NUL byte, not given before (a repeated
 * key would replace a value silently). */
static int key_check(const struct gm_val *v, const yaml_event_t *e,
		     const char *path, struct gm_diag *diag)
{
	struct gm_yaml_fault f;
	char text[200];

	if (gm_yaml_event_fault(e, &f))
		return gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: %s", path,
				   f.line, f.col, f.msg);

	if (gm_obj_get(v, (const char *)e->data.scalar.value)) {
		gm_text_escape(text, sizeof(text),
			       (const char *)e->data.scalar.value);
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: duplicate "
				   "key \"%s\"", path,
				   e->start_mark.line + 1,
				   e->start_mark.column + 1, text);
	}
	return 0;
}

/* Reports nest a few levels; deeper input is refused before the
 * recursion below can exhaust the stack. */
#define GM_JSON_MAX_DEPTH 64

/* Parse one node whose first event is ev (already taken), at depth
 * levels of nesting (the root is 1). */
static int node(yaml_parser_t *p, yaml_event_t *ev, struct gm_val **out,
		int depth, struct gm_json_marks *marks, const char *path,
		struct gm_diag *diag)
{
	struct gm_yaml_fault f;
	yaml_event_t e;
	struct gm_val *v;
	int rc = 0;

	if (gm_yaml_event_fault(ev, &f))
		return gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: %s", path,
				   f.line, f.col, f.msg);
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		*out = scalar(ev);
		mark(marks, *out, ev);
		return *out ? 0 : GM_ENOMEM;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		break;
	case YAML_ALIAS_EVENT:
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: a YAML alias "
				   "(*name); a report is JSON, which has none",
				   path, ev->start_mark.line + 1,
				   ev->start_mark.column + 1);
	default:
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: unexpected "
				   "content", path, ev->start_mark.line + 1,
				   ev->start_mark.column + 1);
	}
	if (depth > GM_JSON_MAX_DEPTH)
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: nesting too "
				   "deep (more than %d levels)", path,
				   ev->start_mark.line + 1,
				   ev->start_mark.column + 1,
				   GM_JSON_MAX_DEPTH);
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	v = map ? gm_val_obj() : gm_val_arr();
	mark(marks, v, ev);
	for (;;) {
		char *key = NULL;
		struct gm_val *kid = NULL;

		if (!yaml_parser_parse(p, &e))
			goto bad;
		if (e.type == YAML_SEQUENCE_END_EVENT ||
		    e.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&e);
			break;
		}
		if (map) {
			if (e.type != YAML_SCALAR_EVENT) {
				rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: "
						 "a key must be a string",
						 path, e.start_mark.line + 1,
						 e.start_mark.column + 1);
				yaml_event_delete(&e);
				break;
			}
			rc = key_check(v, &e, path, diag);
			key = rc ? NULL
				 : strdup((const char *)e.data.scalar.value);
			yaml_event_delete(&e);
			if (rc)
				break;
			if (!yaml_parser_parse(p, &e)) {
				free(key);
				goto bad;
			}
		}
		rc = node(p, &e, &kid, depth + 1, marks, path, diag);
		yaml_event_delete(&e);
		if (rc == 0 && map)
			gm_obj_set(v, key ? key : "", kid);
		else if (rc == 0)
			gm_arr_push(v, kid);
		free(key);
		if (rc)
			break;
	}
	if (rc) {
		gm_val_free(v);
		return rc;
	}
	*out = v;
	return 0;
bad:
	gm_val_free(v);
	return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: %s", path,
			   p->problem_mark.line + 1, p->problem_mark.column + 1,
			   p->problem ? p->problem : "not valid JSON");
}

/* A report file is read up to this size (a preload report of 8,192
 * devices is 2.5 MB); larger input is refused, not buffered. */
#define GM_JSON_MAX_FILE (64u << 20)

struct reader {
	FILE *f;
	size_t got;
	bool too_large;
};

/* libyaml's read handler: fread, stopping past GM_JSON_MAX_FILE. */
static int read_some(void *data, unsigned char *buf, size_t size,
		     size_t *n)
{
	struct reader *r = data;

	*n = fread(buf, 1, size, r->f);
	r->got += *n;
	if (r->got > GM_JSON_MAX_FILE) {
		r->too_large = true;
		return 0;
	}
	return !ferror(r->f);
}

int gm_json_load(const char *path, struct gm_val **out,
		 struct gm_json_marks **marksp, struct gm_diag *diag)
{
	struct reader r = {0};
	struct gm_json_marks *marks = NULL;
	yaml_parser_t p;
	yaml_event_t e;
	struct stat st;
	FILE *f = fopen(path, "r");
	int rc = GM_EINVAL;

	*out = NULL;
	if (marksp)
		*marksp = NULL;
	if (!f)
		return gm_diag_set(diag, GM_EIO, "%s: %s", path,
				   strerror(errno));
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		return gm_diag_set(diag, GM_EIO, "%s: %s", path,
				   strerror(EISDIR));
	}
	if (marksp) {
		marks = calloc(1, sizeof(*marks));
		if (!marks) {
			fclose(f);
			return gm_diag_set(diag, GM_ENOMEM, "out of memory");
		}
	}
	yaml_parser_initialize(&p);
	r.f = f;
	yaml_parser_set_input(&p, read_some, &r);
	/* Stream start, document start, then the root node. */
	for (;;) {
		if (!yaml_parser_parse(&p, &e)) {
			rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: %s",
					 path, p.problem_mark.line + 1,
					 p.problem_mark.column + 1,
					 p.problem ? p.problem : "not JSON");
			break;
		}
		if (e.type == YAML_STREAM_START_EVENT ||
		    e.type == YAML_DOCUMENT_START_EVENT) {
			yaml_event_delete(&e);
			continue;
		}
		if (e.type == YAML_STREAM_END_EVENT) {
			rc = gm_diag_set(diag, GM_EINVAL, "%s: empty file",
					 path);
			yaml_event_delete(&e);
			break;
		}
		rc = node(&p, &e, out, 1, marks, path, diag);
		yaml_event_delete(&e);
		break;
	}
	/* Anything after the root (a second document) is an error too. */
	while (rc == 0) {
		if (!yaml_parser_parse(&p, &e)) {
			rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: %s",
					 path, p.problem_mark.line + 1,
					 p.problem_mark.column + 1,
					 p.problem ? p.problem : "not JSON");
			break;
		}
		bool end = e.type == YAML_STREAM_END_EVENT;
		bool doc_end = e.type == YAML_DOCUMENT_END_EVENT;
		yaml_event_delete(&e);
		if (end)
			break;
		if (!doc_end)
			rc = gm_diag_set(diag, GM_EINVAL, "%s: more than one "
					 "document", path);
	}
	if (rc && r.too_large)
		rc = gm_diag_set(diag, GM_EINVAL, "%s: larger than %u bytes; "
				 "not a gpumem report", path,
				 GM_JSON_MAX_FILE);
	else if (rc && ferror(f))
		rc = gm_diag_set(diag, GM_EIO, "%s: cannot read: %s", path,
				 strerror(errno));
	if (rc) {
		gm_val_free(*out);
		*out = NULL;
		gm_json_marks_free(marks);
	} else if (marksp) {
		*marksp = marks;
	}
	yaml_parser_delete(&p);
	fclose(f);
	return rc;
}

/* ==== Merging ==== */

static void copy(struct gm_val *dst, const struct gm_val *src,
		 const char *key)
{
	const struct gm_val *v = gm_obj_get(src, key);

	if (!v)
		return;
	switch (gm_val_kind(v)) {
	case GM_VAL_STR: gm_obj_set_str(dst, key, gm_val_as_str(v)); break;
	case GM_VAL_UINT: gm_obj_set_uint(dst, key, gm_val_as_uint(v)); break;
	case GM_VAL_INT: gm_obj_set_int(dst, key, (int64_t)gm_val_as_real(v));
		break;
	case GM_VAL_REAL: gm_obj_set_real(dst, key, gm_val_as_real(v)); break;
	case GM_VAL_BOOL: gm_obj_set_bool(dst, key, gm_val_as_bool(v)); break;
	default: gm_obj_set(dst, key, gm_val_null()); break;
	}
}

/*
 * What a document is: "gpumem-report", "gpumem-verify" (a verify output,
 * an array of its devices, or one device object), another "kind", or
 * NULL. A device object of `gpumem verify` has a "kind" of its own (the
 * card's: "cuda", "emulated"), so it is known by "device" and "verdict"
 * without "devices".
 */
static const char *kind_of(const struct gm_val *doc)
{
	const char *k = gm_val_as_str(gm_obj_get(doc, "kind"));

	if (gm_val_kind(doc) == GM_VAL_ARR)
		return "gpumem-verify";
	if (k && (!strcmp(k, "gpumem-report") || !strcmp(k, "gpumem-verify")))
		return k;
	if (gm_val_kind(doc) == GM_VAL_OBJ && !gm_obj_get(doc, "devices") &&
	    gm_obj_get(doc, "device") &&
	    (gm_obj_get(doc, "verdict") || gm_obj_get(doc, "verified_bytes")))
		return "gpumem-verify";
	return k;
}

/* The file being merged: its name and marks, for messages. */
struct src {
	const char *path;
	const struct gm_json_marks *marks;
	struct gm_diag *diag;
};

/* What a field must hold. */
enum want { W_UINT, W_INT, W_STR, W_BOOL, W_NUM, W_UINT_OR_NULL, W_OBJ, W_ARR };

static const char *const want_text[] = {
	[W_UINT] = "an integer from 0 to 18446744073709551615",
	[W_INT] = "an integer",
	[W_STR] = "a string",
	[W_BOOL] = "true or false",
	[W_NUM] = "a number",
	[W_UINT_OR_NULL] = "an integer from 0 to 18446744073709551615 or null",
	[W_OBJ] = "an object",
	[W_ARR] = "an array",
};

static bool is(const struct gm_val *v, enum want w)
{
	enum gm_val_kind k = gm_val_kind(v);

	switch (w) {
	case W_UINT: return k == GM_VAL_UINT;
	case W_INT: return k == GM_VAL_UINT || k == GM_VAL_INT;
	case W_STR: return k == GM_VAL_STR;
	case W_BOOL: return k == GM_VAL_BOOL;
	case W_NUM: return k == GM_VAL_UINT || k == GM_VAL_INT ||
			   (k == GM_VAL_REAL && isfinite(gm_val_as_real(v)));
	case W_UINT_OR_NULL: return k == GM_VAL_UINT || k == GM_VAL_NULL;
	case W_OBJ: return k == GM_VAL_OBJ;
	case W_ARR: return k == GM_VAL_ARR;
	}
	return false;
}

/*
 * Check that obj's key (named what in messages, e.g. "devices[0]") holds
 * w; an absent key is an error when required. Returns 0 or GM_EINVAL
 * with "path:line:column: what.key: must be ..." in diag.
 */
static int field(const struct src *s, const struct gm_val *obj,
		 const char *what, const char *key, enum want w,
		 bool required)
{
	const struct gm_val *v = gm_obj_get(obj, key);
	size_t line, col;

	if (!v && !required)
		return 0;
	where(s->marks, v ? v : obj, &line, &col);
	if (!v)
		return gm_diag_set(s->diag, GM_EINVAL, "%s:%zu:%zu: %s has no "
				   "\"%s\"", s->path, line, col, what, key);
	if (is(v, w))
		return 0;
	return gm_diag_set(s->diag, GM_EINVAL, "%s:%zu:%zu: %s%s%s: must be "
			   "%s", s->path, line, col, what, *what ? "." : "",
			   key, want_text[w]);
}

/* The fields of a preload report's device that the merge reads. */
static const char *const report_keys[] = {
	"name", "cap_bytes", "allocated_bytes", "reserved_bytes",
	"peak_allocated_bytes", "peak_reserved_bytes", "oom_count",
	"oom_verdict", "undersized",
};
static const enum want report_want[] = {
	W_STR, W_UINT, W_UINT, W_UINT, W_UINT, W_UINT, W_UINT, W_STR, W_BOOL,
};

static int check_report(const struct src *s, const struct gm_val *doc)
{
	const struct gm_val *devs = gm_obj_get(doc, "devices");
	char what[48];
	int rc;

	if ((rc = field(s, doc, "", "devices", W_ARR, true)) ||
	    (rc = field(s, doc, "", "host", W_STR, false)) ||
	    (rc = field(s, doc, "", "rank", W_UINT_OR_NULL, false)) ||
	    (rc = field(s, doc, "", "pid", W_UINT, false)))
		return rc;
	for (size_t i = 0; i < gm_val_len(devs); i++) {
		const struct gm_val *d = gm_arr_at(devs, i);

		snprintf(what, sizeof(what), "devices[%zu]", i);
		if (!is(d, W_OBJ)) {
			size_t line, col;

			where(s->marks, d, &line, &col);
			return gm_diag_set(s->diag, GM_EINVAL, "%s:%zu:%zu: "
					   "%s: must be an object", s->path,
					   line, col, what);
		}
		if ((rc = field(s, d, what, "device", W_INT, true)))
			return rc;
		/* name, oom_verdict and undersized are optional; the
		 * byte counters are what the merge adds up. */
		for (size_t k = 0; k < sizeof(report_keys) /
				       sizeof(report_keys[0]); k++)
			if ((rc = field(s, d, what, report_keys[k],
					report_want[k],
					report_want[k] == W_UINT)))
				return rc;
	}
	return 0;
}

static const char *const verify_keys[] = {
	"device", "name", "claimed_bytes", "reported_bytes",
	"verified_bytes", "errors", "verdict", "bandwidth_gbps",
};
static const enum want verify_want[] = {
	W_INT, W_STR, W_UINT, W_UINT, W_UINT, W_UINT, W_STR, W_NUM,
};

static int check_verify_dev(const struct src *s, const struct gm_val *d,
			    const char *what)
{
	const char *verdict;
	size_t line, col;
	int rc;

	if (!is(d, W_OBJ)) {
		where(s->marks, d, &line, &col);
		return gm_diag_set(s->diag, GM_EINVAL, "%s:%zu:%zu: %s: must "
				   "be an object", s->path, line, col,
				   *what ? what : "the document");
	}
	for (size_t k = 0; k < sizeof(verify_keys) / sizeof(verify_keys[0]);
	     k++) {
		bool required = !strcmp(verify_keys[k], "device") ||
				!strcmp(verify_keys[k], "verdict");

		if ((rc = field(s, d, what, verify_keys[k], verify_want[k],
				required)))
			return rc;
	}
	verdict = gm_val_as_str(gm_obj_get(d, "verdict"));
	if (strcmp(verdict, "ok") && strcmp(verdict, "undersized") &&
	    strcmp(verdict, "faulty") && strcmp(verdict, "error")) {
		char text[200];

		gm_text_escape(text, sizeof(text), verdict);
		where(s->marks, gm_obj_get(d, "verdict"), &line, &col);
		return gm_diag_set(s->diag, GM_EINVAL, "%s:%zu:%zu: %s%sverdict:"
				   " '%s' is not ok, undersized, faulty or "
				   "error", s->path, line, col, what,
				   *what ? "." : "", text);
	}
	return 0;
}

static int add_report(struct gm_val *ranks, struct gm_val *totals,
		      const struct gm_val *doc, const struct src *s)
{
	const struct gm_val *devs = gm_obj_get(doc, "devices");
	int rc = check_report(s, doc);

	if (rc)
		return rc;
	for (size_t i = 0; i < gm_val_len(devs); i++) {
		const struct gm_val *d = gm_arr_at(devs, i);
		struct gm_val *row = gm_val_obj();

		copy(row, doc, "host");
		copy(row, doc, "rank");
		copy(row, doc, "pid");
		copy(row, d, "device");
		for (size_t k = 0; k < sizeof(report_keys) /
				       sizeof(report_keys[0]); k++)
			copy(row, d, report_keys[k]);
		gm_arr_push(ranks, row);
		for (size_t k = 1; k < 7; k++) {
			const struct gm_val *t = gm_obj_get(totals,
							    report_keys[k]);
			uint64_t a = gm_val_as_uint(t),
				 b = gm_val_as_uint(gm_obj_get(d,
							report_keys[k]));

			/* Saturate: a sum past 2^64 - 1 is not a count. */
			gm_obj_set_uint(totals, report_keys[k],
					a > UINT64_MAX - b ? UINT64_MAX : a + b);
		}
	}
	return 0;
}

static void add_verify_row(struct gm_val *out, const struct gm_val *d,
			   const struct gm_val *host)
{
	struct gm_val *row = gm_val_obj();

	if (host)
		gm_obj_set_str(row, "host", gm_val_as_str(host));
	else
		copy(row, d, "host");
	for (size_t k = 0; k < sizeof(verify_keys) / sizeof(verify_keys[0]);
	     k++)
		copy(row, d, verify_keys[k]);
	gm_arr_push(out, row);
}

static int add_verify(struct gm_val *out, const struct gm_val *doc,
		      const struct src *s)
{
	const struct gm_val *devs = doc, *host = NULL;
	char what[48];
	int rc;

	if (gm_val_kind(doc) == GM_VAL_OBJ) {
		if (!gm_obj_get(doc, "devices")) {
			if ((rc = field(s, doc, "", "host", W_STR, false)) ||
			    (rc = check_verify_dev(s, doc, "")))
				return rc;
			add_verify_row(out, doc, NULL);
			return 0;
		}
		if ((rc = field(s, doc, "", "devices", W_ARR, true)) ||
		    (rc = field(s, doc, "", "host", W_STR, false)))
			return rc;
		devs = gm_obj_get(doc, "devices");
		host = gm_obj_get(doc, "host");
	}
	for (size_t i = 0; i < gm_val_len(devs); i++) {
		snprintf(what, sizeof(what), "devices[%zu]", i);
		if (gm_val_kind(doc) == GM_VAL_ARR)
			snprintf(what, sizeof(what), "[%zu]", i);
		if ((rc = check_verify_dev(s, gm_arr_at(devs, i), what)))
			return rc;
		add_verify_row(out, gm_arr_at(devs, i), host);
	}
	return 0;
}

int gm_report_merge(struct gm_val *const *docs, const char *const *paths,
		    struct gm_json_marks *const *marks, size_t n,
		    struct gm_val **out, struct gm_diag *diag)
{
	struct gm_val *m = gm_val_obj(), *ranks = gm_val_arr(),
		      *totals = gm_val_obj(), *verify = gm_val_arr();
	int rc = 0;

	gm_obj_set_uint(totals, "reports", 0);
	gm_obj_set_uint(totals, "verify_reports", 0);
	for (size_t i = 0; i < n && !rc; i++) {
		const char *kind = kind_of(docs[i]);
		struct src s = {paths[i], marks ? marks[i] : NULL, diag};

		if (kind && !strcmp(kind, "gpumem-report")) {
			rc = add_report(ranks, totals, docs[i], &s);
			gm_obj_set_uint(totals, "reports", gm_val_as_uint(
				gm_obj_get(totals, "reports")) + 1);
		} else if (kind && !strcmp(kind, "gpumem-verify")) {
			rc = add_verify(verify, docs[i], &s);
			gm_obj_set_uint(totals, "verify_reports", gm_val_as_uint(
				gm_obj_get(totals, "verify_reports")) + 1);
		} else {
			rc = gm_diag_set(diag, GM_EINVAL, "%s: not a gpumem "
					 "report (\"kind\" is neither "
					 "gpumem-report nor gpumem-verify)",
					 paths[i]);
		}
	}
	gm_obj_set_str(m, "kind", "gpumem-report-merged");
	gm_obj_set(m, "ranks", ranks);
	gm_obj_set(m, "totals", totals);
	gm_obj_set(m, "verify", verify);
	if (rc) {
		gm_val_free(m);
		return rc;
	}
	*out = m;
	return 0;
}
