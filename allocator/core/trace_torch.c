/*
 * trace_torch.c - PyTorch memory-history recordings (trace.h): one JSON
 * value a line, read with libyaml (JSON is YAML 1.1 flow), so a message
 * points at the line and column.
 */
#include "trace_torch.h"

#include "error.h"
#include "trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <yaml.h>

/* A parser over one line, and the event it stands on. */
struct jp {
	yaml_parser_t p;
	yaml_event_t ev;
	bool have;
	const char *name;
	unsigned long line;      /* of a single line */
	const uint32_t *lines;   /* a batch: file line of each document */
	size_t nlines;
	size_t prefix;           /* bytes before each line ("--- ") */
	struct gm_diag *diag;
};

/* The file line of a mark's line in the parsed text. */
static unsigned long jp_line(const struct jp *j, size_t mark_line)
{
	if (!j->lines)
		return j->line;
	return j->lines[mark_line < j->nlines ? mark_line : j->nlines - 1];
}

static int jp_err(struct jp *j, size_t column, const char *what)
{
	return gm_diag_set(j->diag, GM_EINVAL, "%s:%lu:%zu: %s", j->name,
			   jp_line(j, j->ev.start_mark.line),
			   column - (column >= j->prefix ? j->prefix : 0) + 1,
			   what);
}

/* Step to the next event; a YAML error is reported where libyaml saw
 * it. */
static int jp_next(struct jp *j)
{
	if (j->have)
		yaml_event_delete(&j->ev);
	j->have = false;
	if (!yaml_parser_parse(&j->p, &j->ev)) {
		size_t c = j->p.problem_mark.column;

		return gm_diag_set(j->diag, GM_EINVAL, "%s:%lu:%zu: not "
				   "JSON: %s", j->name,
				   jp_line(j, j->p.problem_mark.line),
				   c - (c >= j->prefix ? j->prefix : 0) + 1,
				   j->p.problem ? j->p.problem : "syntax");
	}
	j->have = true;
	return 0;
}

static size_t jp_col(const struct jp *j)
{
	return j->ev.start_mark.column;
}

/* Open a parser over text (one line, or a batch b of documents
 * "--- LINE"); it stands on the first document's value. */
static int jp_open(struct jp *j, const char *text, size_t len,
		   const char *name, unsigned long line,
		   const struct gm__torch_batch *b, struct gm_diag *d)
{
	memset(j, 0, sizeof(*j));
	j->name = name;
	j->line = line;
	j->diag = d;
	if (b) {
		j->lines = b->line;
		j->nlines = b->n;
		j->prefix = 4;
	}
	if (!yaml_parser_initialize(&j->p))
		return gm_diag_set(d, GM_ENOMEM, "%s: out of memory", name);
	yaml_parser_set_input_string(&j->p, (const unsigned char *)text, len);
	/* stream start, document start */
	for (int i = 0; i < 2; i++) {
		int err = jp_next(j);

		if (err)
			return err;
	}
	return jp_next(j);
}

static void jp_close(struct jp *j)
{
	if (j->have)
		yaml_event_delete(&j->ev);
	yaml_parser_delete(&j->p);
}

/* The current event is a JSON integer (a plain scalar of digits, '-'
 * allowed where negative): its value, two's complement when negative. */
static int jp_int(struct jp *j, bool negative_ok, uint64_t *v,
		  const char *what)
{
	const char *s = (const char *)j->ev.data.scalar.value;
	size_t n = j->ev.data.scalar.length, i = 0;
	bool neg = false;
	uint64_t x = 0;
	char msg[96];

	snprintf(msg, sizeof(msg), "%s is not an integer%s", what,
		 negative_ok ? "" : " of 0 or more");
	if (j->ev.type != YAML_SCALAR_EVENT ||
	    j->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE)
		return jp_err(j, jp_col(j), msg);
	if (n && s[0] == '-' && negative_ok) {
		neg = true;
		i = 1;
	}
	if (i == n)
		return jp_err(j, jp_col(j), msg);
	for (; i < n; i++) {
		if (s[i] < '0' || s[i] > '9' ||
		    x > (UINT64_MAX - (uint64_t)(s[i] - '0')) / 10)
			return jp_err(j, jp_col(j), msg);
		x = x * 10 + (uint64_t)(s[i] - '0');
	}
	*v = neg ? (uint64_t)0 - x : x;
	return 0;
}

/* Skip the value the current event starts (nesting bounded). */
static int jp_skip(struct jp *j)
{
	int depth = 0, err;

	do {
		if (j->ev.type == YAML_SEQUENCE_START_EVENT ||
		    j->ev.type == YAML_MAPPING_START_EVENT) {
			if (++depth > 64)
				return jp_err(j, jp_col(j), "nested too "
					      "deeply");
		} else if (j->ev.type == YAML_SEQUENCE_END_EVENT ||
			   j->ev.type == YAML_MAPPING_END_EVENT) {
			depth--;
		} else if (j->ev.type != YAML_SCALAR_EVENT) {
			return jp_err(j, jp_col(j), "not JSON");
		}
		if ((err = jp_next(j)))
			return err;
	} while (depth > 0);
	return 0;
}

/* After the line's one value: nothing more. */
static int jp_end(struct jp *j)
{
	int err = jp_next(j);

	while (!err && j->ev.type == YAML_DOCUMENT_END_EVENT)
		err = jp_next(j);
	if (!err && j->ev.type != YAML_STREAM_END_EVENT)
		return jp_err(j, jp_col(j), "more than one JSON value on "
			      "the line");
	return err;
}

/* "initial": [[address, size], ...] as allocations. */
static int initial_blocks(struct jp *j, struct gm_trace *t)
{
	int err;

	if (j->ev.type != YAML_SEQUENCE_START_EVENT)
		return jp_err(j, jp_col(j), "'initial' is not a list of "
			      "[address, size]");
	if ((err = jp_next(j)))
		return err;
	while (j->ev.type != YAML_SEQUENCE_END_EVENT) {
		struct gm_trace_event e = {.action = GM_TRACE_ALLOC,
					   .time_ns = t->n};
		size_t col = jp_col(j);

		if (j->ev.type != YAML_SEQUENCE_START_EVENT)
			return jp_err(j, col, "an 'initial' block is not "
				      "[address, size]");
		if ((err = jp_next(j)) ||
		    (err = jp_int(j, false, &e.ptr, "the address")) ||
		    (err = jp_next(j)) ||
		    (err = jp_int(j, false, &e.size, "the size")) ||
		    (err = jp_next(j)))
			return err;
		if (j->ev.type != YAML_SEQUENCE_END_EVENT)
			return jp_err(j, jp_col(j), "an 'initial' block has "
				      "more than [address, size]");
		if (!e.ptr || !e.size)
			return jp_err(j, col, "an initial block needs an "
				      "address and a size above 0");
		if ((err = gm__trace_push(t, &e, j->name, j->line, j->diag)) ||
		    (err = jp_next(j)))
			return err;
	}
	return 0;
}

int gm__trace_torch_header(struct gm_trace *t, const char *text, size_t len,
			   const char *name, unsigned long line,
			   struct gm_diag *diag)
{
	struct jp j;
	bool initial = false;
	int err = jp_open(&j, text, len, name, line, NULL, diag);

	if (!err && j.ev.type != YAML_MAPPING_START_EVENT)
		err = jp_err(&j, jp_col(&j), "not a JSON object");
	if (!err)
		err = jp_next(&j);
	while (!err && j.ev.type != YAML_MAPPING_END_EVENT) {
		bool is_initial = j.ev.type == YAML_SCALAR_EVENT &&
			!strcmp((const char *)j.ev.data.scalar.value,
				"initial");

		if (j.ev.type != YAML_SCALAR_EVENT) {
			err = jp_err(&j, jp_col(&j), "a key is not a string");
			break;
		}
		if (is_initial && initial) {
			err = jp_err(&j, jp_col(&j), "'initial' twice");
			break;
		}
		if ((err = jp_next(&j)))
			break;
		if (is_initial) {
			initial = true;
			if (!(err = initial_blocks(&j, t)))
				err = jp_next(&j);
		} else {
			err = jp_skip(&j);
		}
	}
	if (!err && !initial)
		err = jp_err(&j, 0, "a PyTorch memory-history trace starts "
			     "with an object that has 'initial' (the blocks "
			     "live when recording began)");
	if (!err)
		err = jp_end(&j);
	jp_close(&j);
	return err;
}

/* PyTorch's trace actions (c10/cuda/CUDACachingAllocator.h,
 * TraceEntry::Action): what each is in the replay; -1 read, not
 * replayed; -2 a segment given back. */
static const struct {
	const char *name;
	int action;
} actions[] = {
	{"alloc", GM_TRACE_ALLOC},
	{"free_completed", GM_TRACE_FREE},
	{"segment_alloc", GM_TRACE_SEGMENT},
	{"free_requested", -1},
	{"segment_map", -1},
	{"snapshot", -1},
	{"oom", -1},
	{"segment_free", -2},
	{"segment_unmap", -2},
};

/* One document of a batch, the parser on its value: the entry, then
 * the document's end. */
static int entry(struct jp *j, struct gm__torch_batch *b, struct gm_trace *t)
{
	struct gm_trace_event e = {.time_ns = t->n};
	unsigned long line = jp_line(j, j->ev.start_mark.line);
	int action = -3, err = 0;
	size_t col = 0;

	if (j->ev.type != YAML_SEQUENCE_START_EVENT)
		return jp_err(j, jp_col(j), "not a JSON list [action, address, "
			      "size, stream, frames]");
	if ((err = jp_next(j)))
		return err;
	if (j->ev.type != YAML_SCALAR_EVENT ||
	    j->ev.data.scalar.style != YAML_DOUBLE_QUOTED_SCALAR_STYLE)
		return jp_err(j, jp_col(j), "the action is not a string");
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (!strcmp((const char *)j->ev.data.scalar.value,
			    actions[i].name))
			action = actions[i].action;
	if (action == -3) {
		char msg[160];

		snprintf(msg, sizeof(msg), "unknown action '%.40s' (PyTorch's"
			 " alloc, free_requested, free_completed, "
			 "segment_alloc, ...)", j->ev.data.scalar.value);
		return jp_err(j, jp_col(j), msg);
	}
	if (!(err = jp_next(j))) {
		col = jp_col(j);
		err = jp_int(j, false, &e.ptr, "the address");
	}
	if (!err && !(err = jp_next(j)))
		err = jp_int(j, false, &e.size, "the size");
	if (!err && !(err = jp_next(j)))
		err = jp_int(j, true, &e.stream, "the stream");
	if (!err)
		err = jp_next(j);
	if (!err && j->ev.type == YAML_SCALAR_EVENT) /* the frames */
		err = jp_next(j);
	if (!err && j->ev.type != YAML_SEQUENCE_END_EVENT)
		err = jp_err(j, jp_col(j), "more than [action, address, "
			     "size, stream, frames]");
	if (!err && !(err = jp_next(j)) &&
	    j->ev.type != YAML_DOCUMENT_END_EVENT)
		err = jp_err(j, jp_col(j), "more than one JSON value on the "
			     "line");
	if (err || action == -1)
		return err;
	if (action == -2) {
		b->segment_free = true;
		return 0;
	}
	e.action = (enum gm_trace_action)action;
	if (action != GM_TRACE_FREE && (!e.ptr || !e.size))
		return gm_diag_set(j->diag, GM_EINVAL, "%s:%lu:%zu: an %s "
				   "needs an address and a size above 0",
				   j->name, line, col - j->prefix + 1,
				   action == GM_TRACE_SEGMENT ?
				   "segment_alloc" : "alloc");
	return gm__trace_push(t, &e, j->name, line, j->diag);
}

int gm__trace_torch_flush(struct gm__torch_batch *b, struct gm_trace *t,
			  const char *name, struct gm_diag *diag)
{
	struct jp j;
	int err;

	if (!b->n)
		return 0;
	err = jp_open(&j, b->text, b->len, name, 0, b, diag);
	while (!err) {
		err = entry(&j, b, t);
		if (!err)
			err = jp_next(&j);
		if (!err && j.ev.type == YAML_STREAM_END_EVENT)
			break;
		if (!err && j.ev.type != YAML_DOCUMENT_START_EVENT)
			err = jp_err(&j, jp_col(&j), "not JSON");
		if (!err)
			err = jp_next(&j);
	}
	jp_close(&j);
	b->len = 0;
	b->n = 0;
	return err;
}

/* A batch is parsed when it holds this much text. */
#define BATCH_BYTES (1u << 20)

/* Digits of [*p, end) as a number, then ", " (or the end of the list
 * when last). */
static bool canon_uint(const char **p, const char *end, bool last,
		       uint64_t *v)
{
	const char *s = *p;
	uint64_t x = 0;

	if (s == end || *s < '0' || *s > '9' || (*s == '0' && s + 1 < end &&
						 s[1] >= '0' && s[1] <= '9'))
		return false;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		if (x > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
			return false;
		x = x * 10 + (uint64_t)(*s - '0');
	}
	if (last ? (s == end || *s != ']') :
		   (end - s < 2 || s[0] != ',' || s[1] != ' '))
		return false;
	*p = last ? s : s + 2;
	*v = x;
	return true;
}

/*
 * The line exactly as tracefile.py's json.dumps writes it: ["ACTION",
 * ADDRESS, SIZE, STREAM, "FRAMES"] with one space after each comma, the
 * numbers in plain decimal (the stream may be negative) and the action
 * of letters and '_'. Such a line is read here; any other goes to
 * libyaml, which has the last word and the messages. Returns false when
 * the line is not of that form.
 */
static bool canonical(const char *s, size_t len, int *action,
		      struct gm_trace_event *e)
{
	const char *p = s, *end = s + len, *a;
	bool neg = false;

	if (len < 2 || p[0] != '[' || p[1] != '"')
		return false;
	a = p += 2;
	while (p < end && ((*p >= 'a' && *p <= 'z') || *p == '_'))
		p++;
	if (end - p < 3 || p[0] != '"' || p[1] != ',' || p[2] != ' ')
		return false;
	*action = -3;
	for (size_t i = 0; i < sizeof(actions) / sizeof(actions[0]); i++)
		if (strlen(actions[i].name) == (size_t)(p - a) &&
		    !memcmp(actions[i].name, a, (size_t)(p - a)))
			*action = actions[i].action;
	if (*action == -3)
		return false;
	p += 3;
	if (!canon_uint(&p, end, false, &e->ptr) ||
	    !canon_uint(&p, end, false, &e->size))
		return false;
	if (p < end && *p == '-') {
		neg = true;
		p++;
	}
	if (!canon_uint(&p, end, false, &e->stream))
		return false;
	if (neg)
		e->stream = (uint64_t)0 - e->stream;
	if (p == end || *p != '"')
		return false;
	for (p++; p < end && *p != '"'; p++)
		if (*p == '\\' || (unsigned char)*p < 0x20)
			return false;
	return end - p == 2 && p[0] == '"' && p[1] == ']';
}

int gm__trace_torch_entry(struct gm__torch_batch *b, struct gm_trace *t,
			  const char *text, size_t len, const char *name,
			  unsigned long line, struct gm_diag *diag)
{
	struct gm_trace_event e = {.time_ns = t->n};
	int action;

	/* the common line, read directly (libyaml takes ten times as
	 * long as the replay); after a line that was not, keep the order */
	if (!b->n && canonical(text, len, &action, &e)) {
		if (action == -1)
			return 0;
		if (action == -2) {
			b->segment_free = true;
			return 0;
		}
		if (action != GM_TRACE_FREE && (!e.ptr || !e.size))
			return gm_diag_set(diag, GM_EINVAL, "%s:%lu:%zu: an %s "
					   "needs an address and a size above "
					   "0", name, line,
					   (size_t)(strchr(text, ',') - text) + 3,
					   action == GM_TRACE_SEGMENT ?
					   "segment_alloc" : "alloc");
		e.action = (enum gm_trace_action)action;
		return gm__trace_push(t, &e, name, line, diag);
	}
	if (b->len + len + 5 > b->cap) {
		size_t cap = b->cap ? b->cap : BATCH_BYTES + 4096;
		char *x;

		while (cap < b->len + len + 5)
			cap *= 2;
		x = realloc(b->text, cap);
		if (!x)
			return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory",
					   name);
		b->text = x;
		b->cap = cap;
	}
	if (b->n == b->lcap) {
		size_t n = b->lcap ? 2 * b->lcap : 4096;
		uint32_t *x = realloc(b->line, n * sizeof(*x));

		if (!x)
			return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory",
					   name);
		b->line = x;
		b->lcap = n;
	}
	memcpy(b->text + b->len, "--- ", 4);
	memcpy(b->text + b->len + 4, text, len);
	b->text[b->len + 4 + len] = '\n';
	b->len += len + 5;
	b->line[b->n++] = (uint32_t)line;
	return b->len >= BATCH_BYTES ? gm__trace_torch_flush(b, t, name, diag)
				     : 0;
}

void gm__trace_torch_batch_free(struct gm__torch_batch *b)
{
	free(b->text);
	free(b->line);
	memset(b, 0, sizeof(*b));
}
