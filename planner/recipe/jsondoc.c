/*
 * jsondoc.c - JSON files through libyaml (see jsondoc.h).
 */
#include "jsondoc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

static int read_all(const char *path, char **out, size_t *n,
		    struct gm_diag *diag)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t got;

	if (!f)
		return gm_diag_set(diag, GM_EIO, "%s: cannot open: %s", path,
				   strerror(errno));
	buf = malloc(GM_JSONDOC_MAX_FILE + 1);
	if (!buf) {
		fclose(f);
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory", path);
	}
	got = fread(buf, 1, GM_JSONDOC_MAX_FILE + 1, f);
	if (ferror(f)) {
		fclose(f);
		free(buf);
		return gm_diag_set(diag, GM_EIO, "%s: read error", path);
	}
	fclose(f);
	if (got > GM_JSONDOC_MAX_FILE) {
		free(buf);
		return gm_diag_set(diag, GM_EINVAL, "%s:1:1: larger than %u "
				   "MiB; not a configuration file", path,
				   GM_JSONDOC_MAX_FILE >> 20);
	}
	buf[got] = '\0';
	*out = buf;
	*n = got;
	return 0;
}

/*
 * The YAML that is not JSON, found in the event stream: block
 * collections (JSON is all flow), anchors, aliases and tags, plain
 * scalars other than numbers, true, false and null (JSON strings are
 * quoted), and single quotes. Returns 0 or GM_EINVAL at the event.
 */
static bool json_plain(const char *s)
{
	char *end;

	if (!strcmp(s, "true") || !strcmp(s, "false") || !strcmp(s, "null"))
		return true;
	if (!*s || strspn(s, "0123456789+-.eE") != strlen(s))
		return false;
	(void)strtod(s, &end);
	return *end == '\0';
}

static int not_json(const char *path, const yaml_event_t *ev,
		    struct gm_diag *diag)
{
	const char *what = "YAML syntax that JSON does not have";
	unsigned line = (unsigned)ev->start_mark.line + 1;
	unsigned col = (unsigned)ev->start_mark.column + 1;

	if (ev->type == YAML_ALIAS_EVENT)
		what = "an alias ('*')";
	else if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.anchor)
		what = "an anchor ('&')";
	else if (ev->type == YAML_SCALAR_EVENT && ev->data.scalar.tag)
		what = "a tag ('!')";
	else if (ev->type == YAML_SCALAR_EVENT &&
		 ev->data.scalar.style == YAML_SINGLE_QUOTED_SCALAR_STYLE)
		what = "a single-quoted string (JSON quotes with \")";
	else if (ev->type == YAML_SCALAR_EVENT)
		return gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: JSON syntax "
				   "error: '%s' is not a JSON value (a string "
				   "needs double quotes)", path, line, col,
				   (const char *)ev->data.scalar.value);
	else if (ev->type == YAML_MAPPING_START_EVENT ||
		 ev->type == YAML_SEQUENCE_START_EVENT)
		what = "a YAML block collection (JSON objects use { } and "
		       "arrays [ ])";
	return gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: JSON syntax error: %s",
			   path, line, col, what);
}

static int syntax(const char *path, const yaml_parser_t *p,
		  struct gm_diag *diag)
{
	const yaml_mark_t *m = &p->problem_mark;

	if (p->error == YAML_MEMORY_ERROR)
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory", path);
	if (p->context)
		return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: JSON syntax "
				   "error: %s (%s at line %zu)", path,
				   m->line + 1, m->column + 1,
				   p->problem ? p->problem : "unreadable",
				   p->context, p->context_mark.line + 1);
	return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: JSON syntax error: %s",
			   path, m->line + 1, m->column + 1,
			   p->problem ? p->problem : "unreadable");
}

/* YAML allows "[1, 2,]" and "{"a": 1,}"; JSON does not. */
static int trailing_comma(const char *path, const char *buf,
			  const yaml_event_t *ev, struct gm_diag *diag)
{
	size_t i = ev->start_mark.index;

	while (i > 0 && strchr(" \t\r\n", buf[i - 1]))
		i--;
	if (i == 0 || buf[i - 1] != ',')
		return 0;
	return gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: JSON syntax error: "
			   "a ',' before '%c'", path, ev->start_mark.line + 1,
			   ev->start_mark.column + 1, buf[ev->start_mark.index]);
}

static int check_events(const char *path, const char *buf, size_t n,
			struct gm_diag *diag)
{
	yaml_parser_t p;
	yaml_event_t ev;
	int rc = 0;
	bool done = false;
	unsigned depth = 0, docs = 0;

	if (!yaml_parser_initialize(&p))
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, n);
	while (!done && !rc && yaml_parser_parse(&p, &ev)) {
		switch (ev.type) {
		case YAML_ALIAS_EVENT:
			rc = not_json(path, &ev, diag);
			break;
		case YAML_SCALAR_EVENT:
			if (ev.data.scalar.anchor || ev.data.scalar.tag ||
			    ev.data.scalar.style ==
				    YAML_SINGLE_QUOTED_SCALAR_STYLE ||
			    (ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE &&
			     !json_plain((const char *)ev.data.scalar.value)))
				rc = not_json(path, &ev, diag);
			break;
		case YAML_MAPPING_START_EVENT:
			if (ev.data.mapping_start.style !=
				    YAML_FLOW_MAPPING_STYLE ||
			    ev.data.mapping_start.anchor ||
			    ev.data.mapping_start.tag)
				rc = not_json(path, &ev, diag);
			else if (++depth > 64)
				rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: "
						 "nesting too deep",
						 path, ev.start_mark.line + 1,
						 ev.start_mark.column + 1);
			break;
		case YAML_SEQUENCE_START_EVENT:
			if (ev.data.sequence_start.style !=
				    YAML_FLOW_SEQUENCE_STYLE ||
			    ev.data.sequence_start.anchor ||
			    ev.data.sequence_start.tag)
				rc = not_json(path, &ev, diag);
			else if (++depth > 64)
				rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: "
						 "nesting too deep",
						 path, ev.start_mark.line + 1,
						 ev.start_mark.column + 1);
			break;
		case YAML_MAPPING_END_EVENT:
		case YAML_SEQUENCE_END_EVENT:
			depth--;
			rc = trailing_comma(path, buf, &ev, diag);
			break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1)
				rc = gm_diag_set(diag, GM_EINVAL, "%s:%zu:%zu: "
						 "JSON syntax error: text after "
						 "the object", path,
						 ev.start_mark.line + 1,
						 ev.start_mark.column + 1);
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	if (!rc && !done)
		rc = syntax(path, &p, diag);
	yaml_parser_delete(&p);
	return rc;
}

int gm_jsondoc_load(const char *path, yaml_document_t *doc,
		 struct gm_diag *diag)
{
	yaml_parser_t p;
	yaml_node_t *root;
	char *buf = NULL;
	size_t n = 0;
	int rc = read_all(path, &buf, &n, diag);

	if (rc)
		return rc;
	if (!yaml_parser_initialize(&p)) {
		free(buf);
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)buf, n);
	if (!yaml_parser_load(&p, doc)) {
		rc = syntax(path, &p, diag);
		goto out;
	}
	root = yaml_document_get_root_node(doc);
	if (!root || root->type != YAML_MAPPING_NODE) {
		rc = gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: expected a JSON "
				 "object ({ ... })", path,
				 root ? gm_jsondoc_line(root) : 1,
				 root ? gm_jsondoc_column(root) : 1);
		yaml_document_delete(doc);
		goto out;
	}
	rc = check_events(path, buf, n, diag);
	if (rc)
		yaml_document_delete(doc);
out:
	yaml_parser_delete(&p);
	free(buf);
	return rc;
}

unsigned gm_jsondoc_line(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.line + 1;
}

unsigned gm_jsondoc_column(const yaml_node_t *n)
{
	return (unsigned)n->start_mark.column + 1;
}

bool gm_jsondoc_is_string(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE &&
	       n->data.scalar.style == YAML_DOUBLE_QUOTED_SCALAR_STYLE;
}

const char *gm_jsondoc_text(const yaml_node_t *n)
{
	return n->type == YAML_SCALAR_NODE ? (const char *)n->data.scalar.value
					   : NULL;
}
