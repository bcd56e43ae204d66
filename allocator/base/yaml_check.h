/*
 * yaml_check.h - the checks every YAML/JSON reader of gpumem makes on
 * libyaml's events before it trusts a value (yaml_check.c): the spec,
 * the GPU catalog (--catalog) and the report reader.
 *
 * libyaml hands a scalar over as bytes with a length: a NUL byte inside
 * ("evil\0...") would end the C string every reader then uses, hiding
 * what follows from the control-character and key checks. A tag
 * (!!str 6738415616, !custom 5) changes what a value is without
 * changing its text; no gpumem input has one. Both are refused.
 *
 * Nesting, anchors and aliases are bounded before a document is built:
 * libyaml's scanner does work per open collection for every token, and
 * its composer looks every alias and anchor up among all earlier
 * anchors, so unbounded input costs quadratic time (a 400 KB file of
 * '[' took minutes; a 1 MiB file of anchors and aliases seconds).
 */
#ifndef GM_YAML_CHECK_H
#define GM_YAML_CHECK_H

#include <stddef.h>

#include <yaml.h>

/* What one input allows. */
struct gm_yaml_limits {
	unsigned max_depth;   /* collections open at once */
	size_t max_anchors;   /* &name marks */
	size_t max_aliases;   /* *name references */
	const char *depth_hint; /* appended to the nesting message, or NULL */
};

/* Where and why an input was refused (1-based line and column). */
struct gm_yaml_fault {
	unsigned line, col;
	char msg[256];
};

/*
 * Why event ev cannot stand in a gpumem input, written into f: an
 * explicit tag on a scalar or collection, a NUL byte in a scalar.
 * Returns 1 when refused, 0 when fine.
 */
int gm_yaml_event_fault(const yaml_event_t *ev, struct gm_yaml_fault *f);

/*
 * One event pass over buf[0..n): the first event that breaks lim or
 * that gm_yaml_event_fault() refuses. Returns 1 with f filled, 0 when
 * the input passes or has a syntax error (left to the caller's own
 * parse, which reports it in its words), GM_ENOMEM.
 */
int gm_yaml_scan(const char *buf, size_t n, const struct gm_yaml_limits *lim,
		 struct gm_yaml_fault *f);

#endif
