/*
 * jsondoc.h - a JSON file read as a libyaml document (jsondoc.c).
 *
 * JSON is YAML 1.1 flow syntax, so libyaml's document API reads it and
 * keeps each node's start mark for "file:line:column" messages. This
 * module only loads and checks the shape of the file; its readers
 * (dsconfig.c) walk the nodes.
 *
 * Errors: 0, GM_EIO (unreadable), GM_EINVAL (not one JSON object; diag
 * "PATH:LINE:COLUMN: JSON syntax error: ..."), GM_ENOMEM.
 */
#ifndef GM_JSONDOC_H
#define GM_JSONDOC_H

#include <stdbool.h>
#include <stdint.h>

#include <yaml.h>

struct gm_diag;

/* A JSON file is a page of text; anything larger is not a config. */
#define GM_JSONDOC_MAX_FILE (4u << 20)

/*
 * Load path into doc (initialised here; yaml_document_delete() it when
 * the call returned 0). The root must be an object; YAML-only syntax
 * outside JSON (anchors, tags, block collections, comments) is refused,
 * so a file that loads here is one json.loads() accepts too.
 */
int gm_jsondoc_load(const char *path, yaml_document_t *doc,
		 struct gm_diag *diag);

/* 1-based line and column of a node, for messages. */
unsigned gm_jsondoc_line(const yaml_node_t *n);
unsigned gm_jsondoc_column(const yaml_node_t *n);

/* Whether a scalar node was written as a JSON string ("..."). */
bool gm_jsondoc_is_string(const yaml_node_t *n);

/* The text of a scalar node (NUL-terminated), or NULL for others. */
const char *gm_jsondoc_text(const yaml_node_t *n);

#endif
