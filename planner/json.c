/*
 * json.c - a JSON file into a tree of nodes with marks (see json.h).
 *
 * libyaml parses (JSON text is YAML 1.1 flow syntax, and its events carry
 * line:column marks); the tree is built from the events, refusing every
 * event that JSON cannot produce: block collections, plain words other
 * than true/false/null and numbers of RFC 8259's grammar, single-quoted
 * or block scalars, anchors, aliases, tags, "---" documents, a second
 * value, and a member name given twice. Comments and trailing commas,
 * which libyaml would take ('#') or misread ('//'), are found by a scan
 * of the text before libyaml sees it: refused, or (when the reader's
 * flags allow them) blanked to spaces so that every mark stays where
 * it was.
 */
#include "json.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yaml.h>

#include "error.h"
#include "text.h"

#define GM_JSON_MAX_FILE (16u << 20)
#define GM_JSON_MAX_DEPTH 64

static const char *const type_names[] = {
	[GM_JSON_NULL] = "null",     [GM_JSON_BOOL] = "true or false",
	[GM_JSON_NUMBER] = "a number", [GM_JSON_STRING] = "a string",
	[GM_JSON_ARRAY] = "an array",  [GM_JSON_OBJECT] = "an object",
};

const char *gm_json_type_name(enum gm_json_type t)
{
	return t <= GM_JSON_OBJECT ? type_names[t] : "?";
}

static int vfail_at(struct gm_diag *diag, const char *path, unsigned line,
		    unsigned col, const char *fmt, va_list ap)
{
	char msg[768];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: %s", path, line, col,
			   msg);
}

static int fail_at(struct gm_diag *diag, const char *path, unsigned line,
		   unsigned col, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));
static int fail_at(struct gm_diag *diag, const char *path, unsigned line,
		   unsigned col, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail_at(diag, path, line, col, fmt, ap);
	va_end(ap);
	return rc;
}

int gm_json_fail(const struct gm_json *j, const struct gm_json_node *n,
		 bool at_key, struct gm_diag *diag, const char *fmt, ...)
{
	unsigned line = at_key && n->key ? n->key_line : n->line;
	unsigned col = at_key && n->key ? n->key_column : n->column;
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail_at(diag, j->path, line, col, fmt, ap);
	va_end(ap);
	return rc;
}

/* ==== Nodes ==== */

static void free_node(struct gm_json_node *n)
{
	for (size_t i = 0; i < n->n; i++)
		free_node(&n->kids[i]);
	free(n->kids);
	free((char *)n->key);
	free((char *)n->text);
}

void gm_json_tree_free(struct gm_json *j)
{
	if (!j)
		return;
	if (j->root) {
		free_node(j->root);
		free(j->root);
	}
	free(j);
}

const struct gm_json_node *gm_json_get(const struct gm_json_node *obj,
				       const char *name)
{
	if (!obj || obj->type != GM_JSON_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->n; i++) {
		if (!strcmp(obj->kids[i].key, name))
			return &obj->kids[i];
	}
	return NULL;
}

bool gm_json_uint(const struct gm_json_node *n, uint64_t *out)
{
	const char *s;
	char *end;

	if (!n || n->type != GM_JSON_NUMBER)
		return false;
	s = n->text;
	if (strspn(s, "0123456789") != strlen(s) || strlen(s) > 18)
		return false;
	errno = 0;
	*out = strtoull(s, &end, 10);
	return !errno && !*end;
}

/* RFC 8259 number: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static bool is_number(const char *s)
{
	size_t d;

	if (*s == '-')
		s++;
	if (*s == '0')
		s++;
	else if ((d = strspn(s, "0123456789")) > 0)
		s += d;
	else
		return false;
	if (*s == '.') {
		d = strspn(++s, "0123456789");
		if (!d)
			return false;
		s += d;
	}
	if (*s == 'e' || *s == 'E') {
		s++;
		if (*s == '+' || *s == '-')
			s++;
		d = strspn(s, "0123456789");
		if (!d)
			return false;
		s += d;
	}
	return !*s;
}

/* ==== The event walk ==== */

struct frame {
	struct gm_json_node *node;   /* the open array or object */
	size_t cap;
	char *key;                   /* object: the member name read, or NULL */
	unsigned key_line, key_col;
};

struct builder {
	const char *path;
	struct gm_diag *diag;
	struct frame stack[GM_JSON_MAX_DEPTH];
	int depth;
	struct gm_json_node *root;
	bool done;                   /* the one value is complete */
};

static int oom(struct builder *b)
{
	return gm_diag_set(b->diag, GM_ENOMEM, "%s: out of memory", b->path);
}

static int fail_ev(struct builder *b, const yaml_event_t *ev,
		   const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int fail_ev(struct builder *b, const yaml_event_t *ev,
		   const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail_at(b->diag, b->path, (unsigned)ev->start_mark.line + 1,
		      (unsigned)ev->start_mark.column + 1, fmt, ap);
	va_end(ap);
	return rc;
}

/* 1-based line and column (in characters) of byte offset off in buf. */
static void position(const char *buf, size_t off, unsigned *line,
		     unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && buf[i]; i++) {
		if (buf[i] == '\n')
			++*line, *col = 1;
		else if (((unsigned char)buf[i] & 0xc0) != 0x80)
			++*col;
	}
}

static int fail_off(struct builder *b, const char *buf, size_t off,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_off(struct builder *b, const char *buf, size_t off,
		    const char *fmt, ...)
{
	unsigned line, col;
	va_list ap;
	int rc;

	position(buf, off, &line, &col);
	va_start(ap, fmt);
	rc = vfail_at(b->diag, b->path, line, col, fmt, ap);
	va_end(ap);
	return rc;
}

/* ==== Comments and trailing commas, before libyaml ==== */

/* Bytes of the UTF-8 character at s (left bytes remain), 0 if none. */
static size_t utf8_len(const unsigned char *s, size_t left)
{
	size_t n = s[0] < 0x80 ? 1 : s[0] < 0xc2 ? 0 : s[0] < 0xe0 ? 2
		 : s[0] < 0xf0 ? 3 : s[0] < 0xf5 ? 4 : 0;

	if (!n || n > left)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	}
	return n;
}

static bool is_break(char ch)
{
	return ch == '\n' || ch == '\r';
}

/*
 * Blank the comment at buf[*r] ('#' or '//' to the end of the line, or
 * a block to its closing mark) into buf[*w...]: one space per
 * character, line breaks kept, so the text after it keeps its line and
 * column (w <= r: the buffer only shrinks). 0 or GM_EINVAL.
 */
static int blank_comment(struct builder *b, char *buf, size_t n, size_t *r,
			 size_t *w)
{
	bool block = buf[*r] == '/' && buf[*r + 1] == '*';
	size_t start = *w;

	if (block) {
		buf[(*w)++] = ' ';
		buf[(*w)++] = ' ';
		*r += 2;
	}
	while (*r < n) {
		size_t len;

		if (!block && is_break(buf[*r]))
			return 0;
		if (block && buf[*r] == '*' && *r + 1 < n && buf[*r + 1] == '/') {
			buf[(*w)++] = ' ';
			buf[(*w)++] = ' ';
			*r += 2;
			return 0;
		}
		if (is_break(buf[*r])) {
			buf[(*w)++] = buf[(*r)++];
			continue;
		}
		len = utf8_len((const unsigned char *)buf + *r, n - *r);
		if (!len)
			return fail_off(b, buf, *w, "not UTF-8 text (in a "
					"comment)");
		buf[(*w)++] = ' ';
		*r += len;
	}
	if (block)
		return fail_off(b, buf, start, "JSON syntax error: a comment "
				"'/*' without its closing '*/'");
	return 0;
}

/*
 * Find comments and trailing commas outside strings in buf[0..*n);
 * refuse them (at their first character) unless flags allow them, in
 * which case they are blanked and *n may shrink. 0 or GM_EINVAL.
 */
static int prescan(struct builder *b, char *buf, size_t *n, unsigned flags)
{
	size_t r = 0, w = 0, comma = SIZE_MAX;
	char quote = 0;
	int rc;

	while (r < *n) {
		char ch = buf[r];

		if (quote) {
			buf[w++] = buf[r++];
			if (ch == '\\' && quote == '"' && r < *n)
				buf[w++] = buf[r++];
			else if (ch == quote)
				quote = 0;
			continue;
		}
		if (ch == '#' || (ch == '/' && r + 1 < *n &&
				  (buf[r + 1] == '/' || buf[r + 1] == '*'))) {
			if (!(flags & GM_JSON_COMMENTS))
				return fail_off(b, buf, w, "JSON syntax error: "
						"a comment ('%s'); JSON has "
						"none", ch == '#' ? "#" :
						buf[r + 1] == '/' ? "//" :
						"/*");
			if ((rc = blank_comment(b, buf, *n, &r, &w)))
				return rc;
			continue;
		}
		if ((ch == '}' || ch == ']') && comma != SIZE_MAX) {
			if (!(flags & GM_JSON_TRAILING_COMMAS))
				return fail_off(b, buf, comma, "JSON syntax "
						"error: a ',' before '%c' (JSON "
						"has no trailing commas)", ch);
			buf[comma] = ' ';
		}
		if (ch != ' ' && ch != '\t' && !is_break(ch))
			comma = ch == ',' ? w : SIZE_MAX;
		if (ch == '"' || ch == '\'')
			quote = ch;
		buf[w++] = buf[r++];
	}
	buf[w] = '\0';
	*n = w;
	return 0;
}

/*
 * The dotted name of member s of the innermost open object
 * ("zero_optimization.stage"; an array's element as "[i]") into buf.
 */
static void member_path(const struct builder *b, const char *s, char *buf,
			size_t len)
{
	size_t at = 0;

	for (int i = 1; i < b->depth && at < len; i++) {
		const struct gm_json_node *n = b->stack[i].node;
		const struct gm_json_node *up = b->stack[i - 1].node;
		int k = n->key ? snprintf(buf + at, len - at, "%s%s",
					  at ? "." : "", n->key)
			       : snprintf(buf + at, len - at, "[%zu]",
					  (size_t)(n - up->kids));

		at += k > 0 ? (size_t)k : 0;
	}
	if (at >= len)
		at = len - 1;
	snprintf(buf + at, len - at, "%s%s", at ? "." : "", s);
}

/*
 * A slot for a new value: the root, or the next child of the open
 * collection (with the pending member name of an object). NULL with
 * *rc set on failure.
 */
static struct gm_json_node *new_slot(struct builder *b,
				     const yaml_event_t *ev, int *rc)
{
	struct frame *f;
	struct gm_json_node *n;

	*rc = 0;
	if (b->done) {
		*rc = fail_ev(b, ev, "JSON syntax error: more text after the "
			      "value");
		return NULL;
	}
	if (!b->depth) {
		b->root = calloc(1, sizeof(*b->root));
		if (!b->root)
			*rc = oom(b);
		return b->root;
	}
	f = &b->stack[b->depth - 1];
	if (f->node->n == f->cap) {
		size_t cap = f->cap ? 2 * f->cap : 8;
		void *kids = realloc(f->node->kids, cap * sizeof(*n));
		if (!kids) {
			*rc = oom(b);
			return NULL;
		}
		f->node->kids = kids;
		f->cap = cap;
	}
	n = &f->node->kids[f->node->n++];
	memset(n, 0, sizeof(*n));
	if (f->node->type == GM_JSON_OBJECT) {
		n->key = f->key;
		n->key_line = f->key_line;
		n->key_column = f->key_col;
		f->key = NULL;
	}
	return n;
}

static void set_mark(struct gm_json_node *n, const yaml_event_t *ev)
{
	n->line = (unsigned)ev->start_mark.line + 1;
	n->column = (unsigned)ev->start_mark.column + 1;
}

/* After a value: the root is complete when no collection is open. */
static void value_done(struct builder *b)
{
	if (!b->depth)
		b->done = true;
}

/* An object's member name: a double-quoted string, not seen before. */
static int member_name(struct builder *b, const yaml_event_t *ev)
{
	struct frame *f = &b->stack[b->depth - 1];
	const char *s = (const char *)ev->data.scalar.value;
	const struct gm_json_node *first = gm_json_get(f->node, s);
	char name[256];

	if (ev->data.scalar.style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
		return fail_ev(b, ev, "JSON syntax error: a member name must "
			       "be a double-quoted string");
	if (first) {
		member_path(b, s, name, sizeof(name));
		return fail_ev(b, ev, "duplicate member \"%s\" (first at "
			       "line %u)", name, first->key_line);
	}
	f->key = strdup(s);
	if (!f->key)
		return oom(b);
	f->key_line = (unsigned)ev->start_mark.line + 1;
	f->key_col = (unsigned)ev->start_mark.column + 1;
	return 0;
}

static int scalar(struct builder *b, const yaml_event_t *ev)
{
	const char *s = (const char *)ev->data.scalar.value;
	yaml_scalar_style_t style = ev->data.scalar.style;
	struct gm_json_node *n;
	int rc;

	if (b->depth && b->stack[b->depth - 1].node->type == GM_JSON_OBJECT &&
	    !b->stack[b->depth - 1].key)
		return member_name(b, ev);
	if (style != YAML_DOUBLE_QUOTED_SCALAR_STYLE &&
	    style != YAML_PLAIN_SCALAR_STYLE)
		return fail_ev(b, ev, "JSON syntax error: a string must be in "
			       "double quotes");
	n = new_slot(b, ev, &rc);
	if (!n)
		return rc;
	set_mark(n, ev);
	n->text = strdup(s);
	if (!n->text)
		return oom(b);
	if (style == YAML_DOUBLE_QUOTED_SCALAR_STYLE)
		n->type = GM_JSON_STRING;
	else if (!strcmp(s, "true") || !strcmp(s, "false"))
		n->type = GM_JSON_BOOL, n->boolean = s[0] == 't';
	else if (!strcmp(s, "null"))
		n->type = GM_JSON_NULL;
	else if (is_number(s))
		n->type = GM_JSON_NUMBER, n->number = strtod(s, NULL);
	else if (strcspn(s, " \t\n") < strlen(s))
		return fail_ev(b, ev, "JSON syntax error: a ',' missing after "
			       "'%.*s'", (int)strcspn(s, " \t\n"), s);
	else
		return fail_ev(b, ev, "JSON syntax error: '%s' is not a value "
			       "(strings need double quotes)", s);
	value_done(b);
	return 0;
}

static int open_collection(struct builder *b, const yaml_event_t *ev,
			   enum gm_json_type type)
{
	bool flow = type == GM_JSON_OBJECT
			    ? ev->data.mapping_start.style ==
				      YAML_FLOW_MAPPING_STYLE
			    : ev->data.sequence_start.style ==
				      YAML_FLOW_SEQUENCE_STYLE;
	struct gm_json_node *n;
	int rc;

	if (!flow)
		return fail_ev(b, ev, "JSON syntax error: not JSON (a YAML "
			       "block %s); JSON objects are written {...}",
			       type == GM_JSON_OBJECT ? "mapping" : "list");
	if (b->depth && b->stack[b->depth - 1].node->type == GM_JSON_OBJECT &&
	    !b->stack[b->depth - 1].key)
		return fail_ev(b, ev, "JSON syntax error: a member name must "
			       "be a double-quoted string");
	if (b->depth == GM_JSON_MAX_DEPTH)
		return fail_ev(b, ev, "nesting too deep (more than %d levels)",
			       GM_JSON_MAX_DEPTH);
	n = new_slot(b, ev, &rc);
	if (!n)
		return rc;
	set_mark(n, ev);
	n->type = type;
	b->stack[b->depth++] = (struct frame){.node = n};
	return 0;
}

static void close_collection(struct builder *b)
{
	struct frame *f = &b->stack[--b->depth];

	free(f->key);
	f->key = NULL;
	value_done(b);
}

/* Refuse YAML-only features on an event; 0 when it is JSON. */
static int yaml_only(struct builder *b, const yaml_event_t *ev)
{
	const yaml_char_t *anchor = NULL, *tag = NULL;

	if (ev->type == YAML_ALIAS_EVENT)
		return fail_ev(b, ev, "JSON syntax error: a YAML alias");
	if (ev->type == YAML_SCALAR_EVENT) {
		anchor = ev->data.scalar.anchor;
		tag = ev->data.scalar.tag;
	} else if (ev->type == YAML_MAPPING_START_EVENT) {
		anchor = ev->data.mapping_start.anchor;
		tag = ev->data.mapping_start.tag;
	} else if (ev->type == YAML_SEQUENCE_START_EVENT) {
		anchor = ev->data.sequence_start.anchor;
		tag = ev->data.sequence_start.tag;
	} else if (ev->type == YAML_DOCUMENT_START_EVENT &&
		   (!ev->data.document_start.implicit ||
		    ev->data.document_start.version_directive)) {
		return fail_ev(b, ev, "JSON syntax error: a YAML document "
			       "marker");
	}
	if (anchor || tag)
		return fail_ev(b, ev, "JSON syntax error: a YAML %s",
			       anchor ? "anchor" : "tag");
	return 0;
}

static int on_event(struct builder *b, const yaml_event_t *ev)
{
	int rc = yaml_only(b, ev);

	if (rc)
		return rc;
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return scalar(b, ev);
	case YAML_MAPPING_START_EVENT:
		return open_collection(b, ev, GM_JSON_OBJECT);
	case YAML_SEQUENCE_START_EVENT:
		return open_collection(b, ev, GM_JSON_ARRAY);
	case YAML_MAPPING_END_EVENT:
	case YAML_SEQUENCE_END_EVENT:
		close_collection(b);
		return 0;
	case YAML_DOCUMENT_START_EVENT:
		if (b->done)
			return fail_ev(b, ev, "JSON syntax error: more text "
				       "after the value");
		return 0;
	default:
		return 0;
	}
}

static int syntax_error(struct builder *b, const yaml_parser_t *p,
			const char *buf)
{
	unsigned line, col;

	if (p->error == YAML_MEMORY_ERROR)
		return oom(b);
	if (p->error == YAML_READER_ERROR) {
		position(buf, p->problem_offset, &line, &col);
		return fail_at(b->diag, b->path, line, col,
			       "not UTF-8 text (%s)",
			       p->problem ? p->problem : "unreadable");
	}
	line = (unsigned)p->problem_mark.line + 1;
	col = (unsigned)p->problem_mark.column + 1;
	if (p->context)
		return fail_at(b->diag, b->path, line, col,
			       "JSON syntax error: %s (%s at line %zu)",
			       p->problem, p->context,
			       p->context_mark.line + 1);
	return fail_at(b->diag, b->path, line, col, "JSON syntax error: %s",
		       p->problem ? p->problem : "unreadable");
}

static int parse(struct builder *b, const char *buf, size_t n)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	int rc = 0;
	bool end = false;

	if (!yaml_parser_initialize(&parser))
		return oom(b);
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, n);
	while (!rc && !end) {
		if (!yaml_parser_parse(&parser, &ev)) {
			rc = syntax_error(b, &parser, buf);
			break;
		}
		end = ev.type == YAML_STREAM_END_EVENT;
		rc = on_event(b, &ev);
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&parser);
	while (b->depth)
		close_collection(b);
	if (!rc && !b->root)
		rc = fail_at(b->diag, b->path, 1, 1, "empty file; expected a "
			     "JSON value");
	return rc;
}

static int read_all(const char *path, char **out, size_t *n,
		    struct gm_diag *diag)
{
	FILE *f = fopen(path, "rb");
	char *buf;
	size_t got;

	if (!f)
		return gm_diag_set(diag, GM_EIO, "%s: cannot open: %s", path,
				   strerror(errno));
	buf = malloc(GM_JSON_MAX_FILE + 1);
	if (!buf) {
		fclose(f);
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory", path);
	}
	got = fread(buf, 1, GM_JSON_MAX_FILE + 1, f);
	if (ferror(f)) {
		int e = errno;
		fclose(f);
		free(buf);
		return gm_diag_set(diag, GM_EIO, "%s: cannot read: %s", path,
				   strerror(e));
	}
	fclose(f);
	if (got > GM_JSON_MAX_FILE) {
		free(buf);
		return gm_diag_set(diag, GM_EINVAL, "%s: larger than %u bytes",
				   path, GM_JSON_MAX_FILE);
	}
	buf[got] = '\0';
	*out = buf;
	*n = got;
	return 0;
}

int gm_json_tree_load(const char *path, unsigned flags, struct gm_json **out,
		      struct gm_diag *diag)
{
	struct builder b = {.path = path, .diag = diag};
	struct gm_json *j;
	char *buf = NULL;
	size_t n = 0;
	int rc;

	*out = NULL;
	rc = read_all(path, &buf, &n, diag);
	if (rc)
		return rc;
	rc = prescan(&b, buf, &n, flags);
	if (!rc)
		rc = parse(&b, buf, n);
	free(buf);
	j = rc ? NULL : calloc(1, sizeof(*j));
	if (!rc && !j)
		rc = oom(&b);
	if (rc) {
		if (b.root) {
			free_node(b.root);
			free(b.root);
		}
		return rc;
	}
	gm_text_copy(j->path, sizeof(j->path), path);
	j->root = b.root;
	*out = j;
	return 0;
}
