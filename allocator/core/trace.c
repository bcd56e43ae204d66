/* trace.c - RMM CSV trace reader and replayer (see trace.h). */
#include "trace.h"

#include "backend.h"
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "trace_torch.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

enum { C_THREAD, C_TIME, C_ACTION, C_POINTER, C_SIZE, C_STREAM, NCOL };

static const struct gm_trace_limits default_limits = GM_TRACE_LIMITS;
static struct gm_trace_limits lim = GM_TRACE_LIMITS;

void gm_trace_set_limits(const struct gm_trace_limits *l)
{
	lim = l ? *l : default_limits;
}

static const char *const col_names[NCOL] = {
	"Thread", "Time", "Action", "Pointer", "Size", "Stream",
};

void gm_trace_free(struct gm_trace *t)
{
	free(t->ev);
	free(t->options);
	memset(t, 0, sizeof(*t));
}

static int push(struct gm_trace *t, const struct gm_trace_event *e)
{
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		struct gm_trace_event *ev = realloc(t->ev, cap * sizeof(*ev));

		if (!ev)
			return GM_ENOMEM;
		t->ev = ev;
		t->cap = cap;
	}
	t->ev[t->n++] = *e;
	return 0;
}

/* Parse an unsigned integer of [s, end): decimal, or hex with 0x or when
 * hex is true. Returns 0 or GM_EINVAL (also for overflow). */
static int parse_u64(const char *s, const char *end, bool hex, uint64_t *v)
{
	unsigned base = hex ? 16 : 10;
	uint64_t x = 0;

	if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
	}
	if (s == end)
		return GM_EINVAL;
	for (; s < end; s++) {
		unsigned d;

		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (base == 16 && *s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (base == 16 && *s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			return GM_EINVAL;
		if (x > (UINT64_MAX - d) / base)
			return GM_EINVAL;
		x = x * base + d;
	}
	*v = x;
	return 0;
}

/* Microseconds ("12.5") or "HH:MM:SS.ffffff", to nanoseconds. */
static int parse_time(const char *s, const char *end, uint64_t *ns)
{
	uint64_t whole = 0, frac = 0, scale = 1000000000ULL, part;
	const char *dot = memchr(s, '.', (size_t)(end - s));
	const char *wend = dot ? dot : end;
	bool clock = memchr(s, ':', (size_t)(end - s)) != NULL;
	unsigned digits = 0;

	if (clock) {
		const char *p = s;

		while (p < wend) {
			const char *c = memchr(p, ':', (size_t)(wend - p));
			const char *e = c ? c : wend;

			if (parse_u64(p, e, false, &part) || part > 1000000)
				return GM_EINVAL;
			whole = whole * 60 + part;
			p = c ? c + 1 : wend;
			if (c && p == wend)
				return GM_EINVAL;
		}
	} else {
		scale = 1000; /* microseconds */
		if (parse_u64(s, wend, false, &whole) && wend != s)
			return GM_EINVAL;
	}
	if (dot) {
		uint64_t unit = scale;

		for (const char *p = dot + 1; p < end; p++) {
			if (!isdigit((unsigned char)*p))
				return GM_EINVAL;
			if (unit >= 10) {
				unit /= 10;
				frac += (uint64_t)(*p - '0') * unit;
			}
			digits++;
		}
		if (!digits && wend == s)
			return GM_EINVAL;
	}
	if (whole > UINT64_MAX / scale || whole * scale > UINT64_MAX - frac)
		return GM_EINVAL;
	*ns = whole * scale + frac;
	return 0;
}

/* Trim spaces and a trailing \r from a field. */
static void trim(const char **s, const char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && ((*e)[-1] == ' ' || (*e)[-1] == '\t' ||
			   (*e)[-1] == '\r'))
		(*e)--;
}

static bool field_is(const char *s, const char *e, const char *word)
{
	size_t n = strlen(word);

	return (size_t)(e - s) == n && strncmp(s, word, n) == 0;
}

/* ==== Reader ==== */

/* Reader state of one trace: which format, the CSV header's columns,
 * where the line count is. */
struct reader {
	const char *name;
	struct gm_trace *t;
	unsigned long line;
	enum { F_UNKNOWN, F_CSV, F_TORCH } fmt;
	int col_of[NCOL], ncols;
	struct gm__torch_batch torch; /* entry lines not yet parsed */
};

static void reader_init(struct reader *r, const char *name,
			struct gm_trace *t)
{
	memset(r, 0, sizeof(*r));
	memset(t, 0, sizeof(*t));
	r->name = name;
	r->t = t;
	for (int i = 0; i < NCOL; i++)
		r->col_of[i] = -1;
}

int gm__trace_push(struct gm_trace *t, const struct gm_trace_event *e,
		   const char *name, unsigned long line, struct gm_diag *diag)
{
	if (t->n >= lim.max_events)
		return gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: more than %zu "
				   "events (the replay's bound)", name, line,
				   lim.max_events);
	if (push(t, e))
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory", name);
	t->ev[t->n - 1].line = (uint32_t)line;
	return 0;
}

/* "# gpumem-replay: OPTIONS": kept for the replay (cmd_replay.c). */
static int options_line(struct reader *r, const char *a, const char *b,
			struct gm_diag *diag)
{
	static const char key[] = "# gpumem-replay:";
	size_t n = sizeof(key) - 1;

	if ((size_t)(b - a) < n || strncmp(a, key, n) != 0)
		return 0;
	if (r->t->options)
		return gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: a second "
				   "'%s' line (line %u has the first)",
				   r->name, r->line, key,
				   r->t->options_line);
	r->t->options = strndup(a + n, (size_t)(b - a) - n);
	if (!r->t->options)
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory",
				   r->name);
	r->t->options_line = (uint32_t)r->line;
	return 0;
}

/* One line of CSV, without its '\n'. */
static int csv_line(struct reader *r, const char *p, const char *le,
		    struct gm_diag *diag)
{
	const char *name = r->name, *f = p;
	unsigned long line = r->line;
	struct gm_trace_event ev = {0};
	bool fail = false, is_free = false, is_seg = false, empty = false;
	unsigned long size_col = 1, ptr_col = 1;
	int col = 0;
	bool header = r->fmt == F_CSV;

	while (f <= le) {
		const char *c = memchr(f, ',', (size_t)(le - f));
		const char *fe = c ? c : le, *s = f;
		unsigned long colno = (unsigned long)(f - p) + 1;
		int which = -1;

		trim(&s, &fe);
		if (!header) {
			for (int i = 0; i < NCOL; i++)
				if (field_is(s, fe, col_names[i]))
					which = i;
			if (which >= 0 && r->col_of[which] >= 0)
				return gm_diag_set(diag, GM_EINVAL,
					"%s:%lu:%lu: the header names "
					"'%s' twice", name, line,
					colno, col_names[which]);
			if (which >= 0)
				r->col_of[which] = col;
		} else {
			for (int i = 0; i < NCOL; i++)
				if (r->col_of[i] == col)
					which = i;
		}
		if (header && which >= 0) {
			int bad = 0;

			switch (which) {
			case C_ACTION:
				if (field_is(s, fe, "allocate"))
					ev.action = GM_TRACE_ALLOC;
				else if (field_is(s, fe, "free"))
					is_free = true;
				else if (field_is(s, fe, "allocate failure"))
					fail = true;
				else if (field_is(s, fe, "segment"))
					is_seg = true;
				else if (field_is(s, fe, "empty_cache"))
					empty = true;
				else
					bad = 1;
				break;
			case C_POINTER:
				ptr_col = colno;
				if (field_is(s, fe, "(nil)") ||
				    field_is(s, fe, "nullptr"))
					ev.ptr = 0;
				else
					bad = parse_u64(s, fe, true, &ev.ptr);
				break;
			case C_SIZE:
				size_col = colno;
				bad = parse_u64(s, fe, false, &ev.size);
				break;
			case C_STREAM:
				bad = s != fe &&
				      parse_u64(s, fe, true, &ev.stream);
				break;
			case C_THREAD:
				bad = s != fe &&
				      parse_u64(s, fe, false, &ev.thread);
				break;
			case C_TIME:
				bad = s != fe && parse_time(s, fe, &ev.time_ns);
				break;
			}
			if (bad)
				return gm_diag_set(diag, GM_EINVAL,
					"%s:%lu:%lu: bad %s value '%.*s'",
					name, line, colno, col_names[which],
					(int)(fe - s < 40 ? fe - s : 40), s);
		}
		col++;
		if (!c)
			break;
		f = c + 1;
	}
	if (!header) {
		for (int i = C_ACTION; i <= C_SIZE; i++)
			if (r->col_of[i] < 0)
				return gm_diag_set(diag, GM_EINVAL,
					"%s:%lu:1: the header has no '%s' "
					"column (expected Thread,Time,Action,"
					"Pointer,Size,Stream, or a PyTorch "
					"memory-history trace)", name, line,
					col_names[i]);
		r->fmt = F_CSV;
		r->ncols = col;
		return 0;
	}
	if (col != r->ncols)
		return gm_diag_set(diag, GM_EINVAL,
			"%s:%lu:%lu: %d fields, the header has %d", name, line,
			(unsigned long)(le - p) + 1, col, r->ncols);
	if (fail)
		ev.action = GM_TRACE_ALLOC_FAILURE;
	else if (empty)
		ev.action = GM_TRACE_EMPTY_CACHE;
	else if (is_seg)
		ev.action = GM_TRACE_SEGMENT;
	else if (is_free)
		ev.action = GM_TRACE_FREE;
	if ((ev.action == GM_TRACE_ALLOC || ev.action == GM_TRACE_SEGMENT) &&
	    (!ev.ptr || !ev.size))
		return gm_diag_set(diag, GM_EINVAL,
			"%s:%lu:%lu: an %s needs a pointer and a size above 0",
			name, line, ev.ptr ? size_col : ptr_col,
			ev.action == GM_TRACE_SEGMENT ? "segment" :
			"allocation");
	return gm__trace_push(r->t, &ev, name, line, diag);
}

/* One line of text (without its '\n', a trailing '\r' allowed). */
static int reader_line(struct reader *r, const char *p, size_t len,
		       struct gm_diag *diag)
{
	const char *le = p + len, *a = p, *b = le, *cr;

	r->line++;
	if (r->line > lim.max_lines)
		return gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: more than %lu "
				   "lines (the replay's bound)", r->name,
				   r->line, lim.max_lines);
	if (memchr(p, '\0', len))
		return gm_diag_set(diag, GM_EINVAL,
				   "%s:%lu:%lu: NUL byte in a text line",
				   r->name, r->line, (unsigned long)
				   ((const char *)memchr(p, '\0', len) - p) + 1);
	cr = memchr(p, '\r', len);
	if (cr && cr != le - 1)
		return gm_diag_set(diag, GM_EINVAL, "%s:%lu:%lu: a carriage "
				   "return inside a line: lines must end in "
				   "LF or CR LF, not CR alone (convert with "
				   "tr '\\r' '\\n')", r->name, r->line,
				   (unsigned long)(cr - p) + 1);
	trim(&a, &b);
	if (a == b)
		return 0;
	if (*a == '#')
		return r->fmt == F_UNKNOWN ? options_line(r, a, b, diag) : 0;
	if (r->fmt == F_UNKNOWN && *a == '{') {
		r->fmt = F_TORCH;
		return gm__trace_torch_header(r->t, a, (size_t)(b - a),
					      r->name, r->line, diag);
	}
	if (r->fmt == F_TORCH)
		return gm__trace_torch_entry(&r->torch, r->t, a,
					     (size_t)(b - a), r->name, r->line,
					     diag);
	return csv_line(r, p, le, diag);
}

/* After the last line: parse what is gathered, check, free the batch. */
static int reader_end(struct reader *r, struct gm_diag *diag)
{
	bool segment_free;
	int err;

	if (r->fmt == F_UNKNOWN)
		return gm_diag_set(diag, GM_EINVAL, "%s:1:1: empty trace "
				   "(no header line)", r->name);
	err = gm__trace_torch_flush(&r->torch, r->t, r->name, diag);
	segment_free = r->torch.segment_free;
	gm__trace_torch_batch_free(&r->torch);
	if (err)
		return err;
	/* a trace that gave segments back reuses their addresses: the
	 * hints would place new segments on live ones (tracefile.py) */
	if (segment_free) {
		size_t n = 0;

		for (size_t i = 0; i < r->t->n; i++)
			if (r->t->ev[i].action != GM_TRACE_SEGMENT)
				r->t->ev[n++] = r->t->ev[i];
		r->t->n = n;
	}
	return 0;
}

int gm_trace_parse(const char *text, size_t len, const char *name,
		   struct gm_trace *t, struct gm_diag *diag)
{
	const char *p = text, *end = text + len;
	struct reader r;
	int err = 0;

	reader_init(&r, name, t);
	while (!err && p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;

		if ((size_t)(le - p) > lim.max_line)
			err = gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: a line "
					  "longer than %zu bytes", name,
					  r.line + 1, lim.max_line);
		else
			err = reader_line(&r, p, (size_t)(le - p), diag);
		p = nl ? nl + 1 : end;
	}
	if (!err)
		err = reader_end(&r, diag);
	if (err) {
		gm__trace_torch_batch_free(&r.torch);
		gm_trace_free(t);
	}
	return err;
}

/* A read error of f, as a message; formatted while f is open (gzerror's
 * string belongs to it). */
static int read_error(gzFile f, int n, const char *path,
		      struct gm_diag *diag)
{
	int zerr = Z_OK;
	const char *msg = gzerror(f, &zerr);

	/* A truncated gzip stream ends with Z_BUF_ERROR. */
	if (n >= 0 && zerr == Z_OK)
		return 0;
	return gm_diag_set(diag, GM_EIO, "%s: cannot read: %s", path,
			   zerr == Z_ERRNO ? strerror(errno) :
			   zerr == Z_BUF_ERROR ?
			   "unexpected end of compressed data" : msg);
}

/*
 * Read and parse a trace file (plain or gzip) line by line: host memory
 * holds one line (at most the bound's bytes) and the events.
 * Errors: GM_EIO (cannot open or read, truncated gzip), GM_ENOMEM,
 * GM_EINVAL (the parse's, a bound, a compressed stream that expands
 * past the bound's ratio).
 */
int gm_trace_read(const char *path, struct gm_trace *t, struct gm_diag *diag)
{
	enum { CHUNK = 1 << 16 };
	struct reader r;
	struct stat st;
	gzFile f;
	char *buf = NULL;
	size_t len = 0, cap = 0, scan = 0;
	uint64_t total = 0;
	int fd, n = 0, err = 0;

	reader_init(&r, path, t);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return gm_diag_set(diag, GM_EIO, "%s: cannot open: %s", path,
				   strerror(errno));
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return gm_diag_set(diag, GM_EIO, "%s: cannot read: %s", path,
				   strerror(EISDIR));
	}
	f = gzdopen(fd, "rb");
	if (!f) {
		close(fd);
		return gm_diag_set(diag, GM_ENOMEM, "%s: out of memory", path);
	}
	gzbuffer(f, CHUNK);
	while (!err) {
		char *nl;

		if (cap - len < CHUNK) {
			size_t c = cap ? cap * 2 : 4 * CHUNK;
			char *b = realloc(buf, c);

			if (!b) {
				err = gm_diag_set(diag, GM_ENOMEM,
						  "%s: out of memory", path);
				break;
			}
			buf = b;
			cap = c;
		}
		n = gzread(f, buf + len, CHUNK);
		if (n <= 0) {
			err = read_error(f, n, path, diag);
			break;
		}
		len += (size_t)n;
		total += (uint64_t)n;
		if (!gzdirect(f) && total > lim.ratio_after &&
		    total / lim.max_ratio > (uint64_t)gzoffset(f) + 1) {
			err = gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: the "
				"compressed stream expands more than %u "
				"times past %" PRIu64 " MiB (not a trace)",
				path, r.line + 1, lim.max_ratio,
				lim.ratio_after >> 20);
			break;
		}
		/* every whole line in buf; the rest moves to its front */
		{
			size_t start = 0;

			while (!err && (nl = memchr(buf + scan, '\n',
						    len - scan))) {
				size_t e = (size_t)(nl - buf);

				err = reader_line(&r, buf + start, e - start,
						  diag);
				start = scan = e + 1;
			}
			memmove(buf, buf + start, len - start);
			len -= start;
			scan = len;
		}
		if (!err && len > lim.max_line) {
			const char *cr = memchr(buf, '\r', len);
			const char *nul = memchr(buf, '\0', len);

			if (nul)
				err = gm_diag_set(diag, GM_EINVAL, "%s:%lu:"
					"%zu: NUL byte in a text line", path,
					r.line + 1, (size_t)(nul - buf) + 1);
			else
				err = gm_diag_set(diag, GM_EINVAL, "%s:%lu:1: a line "
				"longer than %zu bytes%s", path, r.line + 1,
				lim.max_line, cr ?
				" (it holds carriage returns: CR-only line "
				"endings? lines must end in LF or CR LF)" : "");
		}
	}
	if (!err && len)
		err = reader_line(&r, buf, len, diag);
	gzclose(f);
	free(buf);
	if (!err)
		err = reader_end(&r, diag);
	if (err) {
		gm__trace_torch_batch_free(&r.torch);
		gm_trace_free(t);
	}
	return err;
}

/* ==== Replay ==== */

/* Old pointer -> new address, open addressing (keys never 0). */
struct ptrmap {
	uint64_t *k, *v;
	size_t cap, n;
};

static size_t pm_slot(const struct ptrmap *m, uint64_t key)
{
	uint64_t h = key * 0x9e3779b97f4a7c15ULL;
	size_t i = (size_t)(h >> 20) & (m->cap - 1);

	while (m->k[i] && m->k[i] != key)
		i = (i + 1) & (m->cap - 1);
	return i;
}

static int pm_init(struct ptrmap *m, size_t n)
{
	m->cap = 1024;
	while (m->cap < n * 2 + 2)
		m->cap *= 2;
	m->n = 0;
	m->k = calloc(m->cap, sizeof(*m->k));
	m->v = calloc(m->cap, sizeof(*m->v));
	return m->k && m->v ? 0 : GM_ENOMEM;
}

static void pm_free(struct ptrmap *m)
{
	free(m->k);
	free(m->v);
}

static void pm_del(struct ptrmap *m, size_t i)
{
	size_t j, mask = m->cap - 1;

	m->n--;
	for (j = (i + 1) & mask; m->k[j]; j = (j + 1) & mask) {
		uint64_t h = m->k[j] * 0x9e3779b97f4a7c15ULL;
		size_t home = (size_t)(h >> 20) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->k[i] = m->k[j];
			m->v[i] = m->v[j];
			i = j;
		}
	}
	m->k[i] = 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Growths of reserved bytes, collected by an untimed pass. */
struct growths {
	struct gm_replay_growth *v;
	size_t n, cap;
	int err;
};

static void growth_push(struct growths *g, size_t event, uint64_t size,
			uint64_t before, uint64_t after)
{
	if (g->err)
		return;
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 256;
		struct gm_replay_growth *v = realloc(g->v, cap * sizeof(*v));

		if (!v) {
			g->err = GM_ENOMEM;
			return;
		}
		g->v = v;
		g->cap = cap;
	}
	g->v[g->n++] = (struct gm_replay_growth){
		.event = event, .size = size, .bytes = after - before,
		.reserved_bytes = after,
	};
}

/* One pass; with measure, read fragmentation at each new reserved peak;
 * with g, list the growths of reserved bytes. */
static int replay_pass(const struct gm_trace *t, struct gm_backend *be,
		       const struct gm_pool_options *opt, bool measure,
		       struct growths *g, struct gm_replay_result *r,
		       uint64_t *elapsed, struct gm_diag *diag)
{
	struct gm_pool *pool = NULL;
	struct gm_pool_stats st;
	struct ptrmap m;
	struct ptrmap failed; /* trace pointers whose allocation failed */
	uint64_t t0, ops = 0, peak_seen = 0, live = 0;
	int err;

	/* each pass starts on a fresh simulated address space: with the
	 * driver placement, the holes an earlier pass left would change
	 * where segments go, and so the ties best fit breaks */
	if (be->name && !strcmp(be->name, "sim"))
		gm_sim_reset(be);
	err = gm_pool_create(&pool, be, opt, diag);
	if (err)
		return err;
	err = pm_init(&m, t->n);
	if (!err)
		err = pm_init(&failed, t->n);
	else
		memset(&failed, 0, sizeof(failed));
	if (err) {
		pm_free(&m);
		pm_free(&failed);
		gm_pool_destroy(pool);
		return gm_diag_set(diag, err, "out of memory");
	}
	memset(r, 0, sizeof(*r));
	t0 = now_ns();
	for (size_t i = 0; i < t->n; i++) {
		const struct gm_trace_event *e = &t->ev[i];
		size_t s;

		if (e->action == GM_TRACE_ALLOC_FAILURE)
			continue;
		if (e->action == GM_TRACE_SEGMENT) {
			if (be->name && !strcmp(be->name, "sim"))
				gm_sim_place_next(be, e->ptr, e->size);
			continue;
		}
		if (e->action == GM_TRACE_EMPTY_CACHE) {
			if (gm_pool_release_cached(pool)) {
				err = gm_diag_set(diag, GM_EDEVICE, "line %u: "
						  "empty_cache failed",
						  e->line);
				break;
			}
			continue;
		}
		r->events++;
		s = e->ptr ? pm_slot(&m, e->ptr) : 0;
		if (e->action == GM_TRACE_FREE) {
			if (!e->ptr || !m.k[s]) {
				size_t f = e->ptr ? pm_slot(&failed, e->ptr)
						  : 0;

				if (e->ptr && failed.k[f]) {
					pm_del(&failed, f);
					live -= e->size <= live ? e->size : live;
					r->failed_frees++;
				} else {
					r->unmatched_frees++;
				}
				continue;
			}
			gm_pool_free(pool, m.v[s]);
			live -= e->size <= live ? e->size : live;
			pm_del(&m, s);
			r->frees++;
			ops++;
			continue;
		}
		if (m.k[s]) {
			r->duplicate_allocations++;
			continue;
		}
		{
			uint64_t addr, before = g ? gm_pool_reserved(pool) : 0;
			int aerr;

			ops++;
			aerr = gm_pool_alloc(pool, e->size,
					     (uintptr_t)e->stream, &addr);
			if (g && gm_pool_reserved(pool) > before)
				growth_push(g, i, e->size, before,
					    gm_pool_reserved(pool));
			if (aerr) {
				size_t f = pm_slot(&failed, e->ptr);

				if (!r->first_failure.line) {
					gm_pool_get_stats(pool, &st);
					r->first_failure = (struct
						gm_replay_failure){
						.line = e->line, .err = aerr,
						.size = e->size,
						.allocated_bytes =
						    st.allocated_bytes.current,
						.reserved_bytes =
						    st.reserved_bytes.current,
					};
				}

				/* GM_ENOMEM: no arena for one more stream
				 * (the pool's 1,024) or no host memory. */
				if (aerr == GM_ENOMEM)
					r->stream_limit_allocations++;
				else
					r->failed_allocations++;
				if (!failed.k[f]) {
					failed.k[f] = e->ptr;
					failed.n++;
					live += e->size;
					if (live >
					    r->trace_peak_allocated_bytes)
						r->trace_peak_allocated_bytes =
							live;
				}
				continue;
			}
			m.k[s] = e->ptr;
			m.v[s] = addr;
			m.n++;
			r->allocations++;
			live += e->size;
			if (live > r->trace_peak_allocated_bytes)
				r->trace_peak_allocated_bytes = live;
		}
		if (measure && gm_pool_reserved(pool) > peak_seen) {
			peak_seen = gm_pool_reserved(pool);
			gm_pool_get_stats(pool, &st);
			r->fragmentation = st.fragmentation;
		}
	}
	*elapsed = now_ns() - t0;
	gm_pool_get_stats(pool, &st);
	r->peak_allocated_bytes = st.allocated_bytes.peak;
	r->peak_reserved_bytes = st.reserved_bytes.peak;
	r->num_device_alloc = st.num_device_alloc;
	r->num_device_free = st.num_device_free;
	r->num_alloc_retries = st.num_alloc_retries;
	r->ns_per_op = ops ? (double)*elapsed / (double)ops : 0;
	pm_free(&m);
	pm_free(&failed);
	gm_pool_destroy(pool);
	return err;
}

int gm_replay(const struct gm_trace *t, struct gm_backend *be,
	      const struct gm_pool_options *opt, struct gm_replay_result *r,
	      struct gm_diag *diag)
{
	struct gm_replay_result timed;
	uint64_t el;
	int err;

	err = replay_pass(t, be, opt, false, NULL, &timed, &el, diag);
	if (!err)
		err = replay_pass(t, be, opt, true, NULL, r, &el, diag);
	if (!err)
		r->ns_per_op = timed.ns_per_op;
	return err;
}

int gm_replay_growths(const struct gm_trace *t, struct gm_backend *be,
		      const struct gm_pool_options *opt,
		      struct gm_replay_growth **out, size_t *n,
		      struct gm_diag *diag)
{
	struct growths g = {0};
	struct gm_replay_result r;
	uint64_t el;
	int err;

	*out = NULL;
	*n = 0;
	err = replay_pass(t, be, opt, false, &g, &r, &el, diag);
	if (!err && g.err)
		err = gm_diag_set(diag, g.err, "out of memory");
	if (err) {
		free(g.v);
		return err;
	}
	*out = g.v;
	*n = g.n;
	return 0;
}
