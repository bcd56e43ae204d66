/*
 * json.h - a JSON file as a tree of nodes with their positions (json.c).
 *
 * For the JSON files the planner reads beside a spec (a Hugging Face
 * config.json, a DeepSpeed config). libyaml does the parsing (JSON is
 * YAML flow syntax); json.c builds the tree from its events and refuses
 * what is YAML but not JSON (block style, unquoted words, single quotes,
 * anchors, tags, duplicate member names, comments, trailing commas), so
 * every node keeps a 1-based line:column for messages
 * "file:line:column: ...". A reader whose program takes more than JSON
 * names what it takes in flags (GM_JSON_COMMENTS, GM_JSON_TRAILING_COMMAS:
 * what DeepSpeed's hjson reader takes beyond JSON).
 *
 * Errors: 0, or GM_EINVAL (not JSON; diag "file:line:column: message"),
 * GM_EIO (unreadable; diag "file: cannot open: ..."), GM_ENOMEM.
 */
#ifndef GM_JSON_H
#define GM_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_diag;

enum gm_json_type {
	GM_JSON_NULL,
	GM_JSON_BOOL,
	GM_JSON_NUMBER,
	GM_JSON_STRING,
	GM_JSON_ARRAY,
	GM_JSON_OBJECT,
};

struct gm_json_node {
	enum gm_json_type type;
	unsigned line, column;        /* where the value starts, 1-based */
	const char *key;              /* member name inside an object, else NULL */
	unsigned key_line, key_column;
	const char *text;             /* scalars: the string, or the literal
				       * as written ("4096", "1e-05", "true") */
	bool boolean;                 /* GM_JSON_BOOL */
	double number;                /* GM_JSON_NUMBER */
	struct gm_json_node *kids;    /* arrays and objects: n children */
	size_t n;
};

struct gm_json {
	char path[1024];              /* as given to gm_json_tree_load() */
	struct gm_json_node *root;
};

/* What a reader accepts beyond RFC 8259 (flags of gm_json_tree_load()). */
enum {
	GM_JSON_STRICT = 0,
	GM_JSON_COMMENTS = 1u << 0,        /* '#' and '//' to the end of the
					    * line, and '/' '*' ... '*' '/' */
	GM_JSON_TRAILING_COMMAS = 1u << 1, /* "[1, 2,]", "{"a": 1,}" */
};

/*
 * Read and parse path (at most 16 MiB; nesting at most 64 deep) into
 * *out, refusing what flags do not allow (GM_JSON_STRICT: RFC 8259
 * JSON only). The caller frees it with gm_json_tree_free(). Returns 0
 * or GM_EINVAL / GM_EIO / GM_ENOMEM with diag set.
 */
int gm_json_tree_load(const char *path, unsigned flags, struct gm_json **out,
		      struct gm_diag *diag);

void gm_json_tree_free(struct gm_json *j);

/* The member name of object obj, or NULL (also when obj is no object). */
const struct gm_json_node *gm_json_get(const struct gm_json_node *obj,
				       const char *name);

/*
 * A number that is a whole non-negative integer below 2^63 without
 * fraction or exponent ("4096"); false otherwise.
 */
bool gm_json_uint(const struct gm_json_node *n, uint64_t *out);

/* The name of a node's type for messages ("a string", "an object", ...). */
const char *gm_json_type_name(enum gm_json_type t);

/*
 * Format "PATH:LINE:COLUMN: message" about node n (its value; at_key:
 * its member name) into diag and return GM_EINVAL.
 */
int gm_json_fail(const struct gm_json *j, const struct gm_json_node *n,
		 bool at_key, struct gm_diag *diag, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

#endif
