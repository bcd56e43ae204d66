/* yaml_check.c - event checks shared by the YAML/JSON readers (yaml_check.h). */
#include "yaml_check.h"

#include "error.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

__attribute__((format(printf, 3, 4)))
static int refuse(struct gm_yaml_fault *f, const yaml_mark_t *m,
		  const char *fmt, ...)
{
	va_list ap;

	f->line = (unsigned)m->line + 1;
	f->col = (unsigned)m->column + 1;
	va_start(ap, fmt);
	vsnprintf(f->msg, sizeof(f->msg), fmt, ap);
	va_end(ap);
	return 1;
}

/* The tag libyaml resolved, as written where it can: "!!str" for the
 * YAML core tags, else the tag itself. */
static void tag_text(char *buf, size_t len, const unsigned char *tag)
{
	static const char core[] = "tag:yaml.org,2002:";
	const char *t = (const char *)tag;

	if (strncmp(t, core, sizeof(core) - 1) == 0)
		snprintf(buf, len, "!!%.64s", t + sizeof(core) - 1);
	else
		snprintf(buf, len, "%.64s", t);
	for (char *p = buf; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

int gm_yaml_event_fault(const yaml_event_t *ev, struct gm_yaml_fault *f)
{
	const unsigned char *tag = NULL;
	char text[80];

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		tag = ev->data.scalar.tag;
		if (memchr(ev->data.scalar.value, '\0',
			   ev->data.scalar.length))
			return refuse(f, &ev->start_mark,
				      "a NUL byte (\\0) in a value or key; "
				      "not accepted");
		break;
	case YAML_SEQUENCE_START_EVENT:
		tag = ev->data.sequence_start.tag;
		break;
	case YAML_MAPPING_START_EVENT:
		tag = ev->data.mapping_start.tag;
		break;
	default:
		return 0;
	}
	if (!tag)
		return 0;
	tag_text(text, sizeof(text), tag);
	return refuse(f, &ev->start_mark,
		      "YAML tag '%s' is not accepted; write the value "
		      "without a tag", text);
}

/* The anchor an event defines, or NULL. */
static const unsigned char *anchor_of(const yaml_event_t *ev)
{
	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		return ev->data.scalar.anchor;
	case YAML_SEQUENCE_START_EVENT:
		return ev->data.sequence_start.anchor;
	case YAML_MAPPING_START_EVENT:
		return ev->data.mapping_start.anchor;
	default:
		return NULL;
	}
}

int gm_yaml_scan(const char *buf, size_t n, const struct gm_yaml_limits *lim,
		 struct gm_yaml_fault *f)
{
	yaml_parser_t parser;
	yaml_event_t ev;
	size_t anchors = 0, aliases = 0;
	unsigned depth = 0;
	bool done = false;
	int rc = 0;

	if (!yaml_parser_initialize(&parser))
		return GM_ENOMEM;
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, n);
	while (!done && !rc && yaml_parser_parse(&parser, &ev)) {
		rc = gm_yaml_event_fault(&ev, f);
		if (!rc && anchor_of(&ev) && ++anchors > lim->max_anchors)
			rc = refuse(f, &ev.start_mark,
				    "more than %zu anchors (&name)",
				    lim->max_anchors);
		switch (rc ? YAML_NO_EVENT : ev.type) {
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT:
			if (++depth > lim->max_depth)
				rc = refuse(f, &ev.start_mark,
					    "nesting too deep (more than %u "
					    "levels)%s%s",
					    lim->max_depth,
					    lim->depth_hint ? "; " : "",
					    lim->depth_hint ? lim->depth_hint
							    : "");
			break;
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			depth--;
			break;
		case YAML_ALIAS_EVENT:
			if (++aliases > lim->max_aliases)
				rc = refuse(f, &ev.start_mark,
					    "more than %zu aliases (*name)",
					    lim->max_aliases);
			break;
		case YAML_STREAM_END_EVENT:
			done = true;
			break;
		default:
			break;
		}
		yaml_event_delete(&ev);
	}
	if (!done && !rc && parser.error == YAML_MEMORY_ERROR)
		rc = GM_ENOMEM;
	yaml_parser_delete(&parser);
	return rc;
}
