/* merge.c - reading and merging report files (see merge.h). */
#include "merge.h"

#include "emit.h"
#include "error.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* ==== JSON (as YAML) -> gm_val ==== */

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

/* Parse one node whose first event is ev (already taken). */
static int node(yaml_parser_t *p, yaml_event_t *ev, struct gm_val **out,
		const char *path, struct gm_diag *diag)
{
	yaml_event_t e;
	struct gm_val *v;
	int rc = 0;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		*out = scalar(ev);
		return *out ? 0 : GM_ENOMEM;
	case YAML_SEQUENCE_START_EVENT:
	case YAML_MAPPING_START_EVENT:
		break;
	default:
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: unexpected "
				   "content", path, ev->start_mark.line + 1,
				   ev->start_mark.column + 1);
	}
	bool map = ev->type == YAML_MAPPING_START_EVENT;
	v = map ? gm_val_obj() : gm_val_arr();
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
			key = strdup((const char *)e.data.scalar.value);
			yaml_event_delete(&e);
			if (!yaml_parser_parse(p, &e)) {
				free(key);
				goto bad;
			}
		}
		rc = node(p, &e, &kid, path, diag);
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

int gm_json_load(const char *path, struct gm_val **out, struct gm_diag *diag)
{
	yaml_parser_t p;
	yaml_event_t e;
	FILE *f = fopen(path, "r");
	int rc = GM_EINVAL;

	*out = NULL;
	if (!f)
		return gm_diag_set(diag, GM_EIO, "%s: %s", path,
				   strerror(errno));
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
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
		rc = node(&p, &e, out, path, diag);
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
	if (rc) {
		gm_val_free(*out);
		*out = NULL;
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

static const char *kind_of(const struct gm_val *doc)
{
	const struct gm_val *k = gm_obj_get(doc, "kind");

	if (gm_val_kind(doc) == GM_VAL_ARR)
		return "gpumem-verify";
	if (k && gm_val_as_str(k))
		return gm_val_as_str(k);
	if (gm_obj_get(doc, "verified_bytes"))
		return "gpumem-verify";
	return NULL;
}

static int add_report(struct gm_val *ranks, struct gm_val *totals,
		      const struct gm_val *doc, const char *path,
		      struct gm_diag *diag)
{
	static const char *const keys[] = {
		"name", "cap_bytes", "allocated_bytes", "reserved_bytes",
		"peak_allocated_bytes", "peak_reserved_bytes", "oom_count",
		"oom_verdict", "undersized",
	};
	const struct gm_val *devs = gm_obj_get(doc, "devices");

	if (!devs || gm_val_kind(devs) != GM_VAL_ARR)
		return gm_diag_set(diag, GM_EINVAL, "%s: a gpumem-report "
				   "without a \"devices\" array", path);
	for (size_t i = 0; i < gm_val_len(devs); i++) {
		const struct gm_val *d = gm_arr_at(devs, i);
		struct gm_val *row = gm_val_obj();

		copy(row, doc, "host");
		copy(row, doc, "rank");
		copy(row, doc, "pid");
		copy(row, d, "device");
		for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
			copy(row, d, keys[k]);
		gm_arr_push(ranks, row);
		for (size_t k = 1; k < 7; k++) {
			const struct gm_val *t = gm_obj_get(totals, keys[k]);
			gm_obj_set_uint(totals, keys[k],
					gm_val_as_uint(t) +
					gm_val_as_uint(gm_obj_get(d, keys[k])));
		}
	}
	return 0;
}

static void add_verify_row(struct gm_val *out, const struct gm_val *d,
			   const struct gm_val *host)
{
	static const char *const keys[] = {
		"device", "name", "claimed_bytes", "reported_bytes",
		"verified_bytes", "errors", "verdict", "bandwidth_gbps",
	};
	struct gm_val *row = gm_val_obj();

	if (host)
		gm_obj_set_str(row, "host", gm_val_as_str(host));
	else
		copy(row, d, "host");
	for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
		copy(row, d, keys[k]);
	gm_arr_push(out, row);
}

static int add_verify(struct gm_val *out, const struct gm_val *doc,
		      const char *path, struct gm_diag *diag)
{
	const struct gm_val *devs = doc, *host = NULL;

	if (gm_val_kind(doc) == GM_VAL_OBJ) {
		if (!gm_obj_get(doc, "devices")) {
			add_verify_row(out, doc, NULL);
			return 0;
		}
		devs = gm_obj_get(doc, "devices");
		host = gm_obj_get(doc, "host");
	}
	if (gm_val_kind(devs) != GM_VAL_ARR)
		return gm_diag_set(diag, GM_EINVAL, "%s: \"devices\" is not "
				   "an array", path);
	for (size_t i = 0; i < gm_val_len(devs); i++) {
		if (gm_val_kind(gm_arr_at(devs, i)) != GM_VAL_OBJ)
			return gm_diag_set(diag, GM_EINVAL, "%s: device %zu "
					   "is not an object", path, i);
		add_verify_row(out, gm_arr_at(devs, i), host);
	}
	return 0;
}

int gm_report_merge(struct gm_val *const *docs, const char *const *paths,
		    size_t n, struct gm_val **out, struct gm_diag *diag)
{
	struct gm_val *m = gm_val_obj(), *ranks = gm_val_arr(),
		      *totals = gm_val_obj(), *verify = gm_val_arr();
	int rc = 0;

	gm_obj_set_uint(totals, "reports", 0);
	for (size_t i = 0; i < n && !rc; i++) {
		const char *kind = kind_of(docs[i]);

		if (kind && !strcmp(kind, "gpumem-report")) {
			rc = add_report(ranks, totals, docs[i], paths[i], diag);
			gm_obj_set_uint(totals, "reports", gm_val_as_uint(
				gm_obj_get(totals, "reports")) + 1);
		} else if (kind && !strcmp(kind, "gpumem-verify")) {
			rc = add_verify(verify, docs[i], paths[i], diag);
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
