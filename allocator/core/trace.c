/* trace.c - RMM CSV trace reader and replayer (see trace.h). */
#include "trace.h"

#include "backend.h"
#include "error.h"
#include "pool.h"
#include "sim.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

enum { C_THREAD, C_TIME, C_ACTION, C_POINTER, C_SIZE, C_STREAM, NCOL };

static const char *const col_names[NCOL] = {
	"Thread", "Time", "Action", "Pointer", "Size", "Stream",
};

void gm_trace_free(struct gm_trace *t)
{
	free(t->ev);
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

int gm_trace_parse(const char *text, size_t len, const char *name,
		   struct gm_trace *t, struct gm_diag *diag)
{
	int col_of[NCOL], ncols = 0, err;
	const char *p = text, *end = text + len;
	unsigned long line = 0;
	bool header = false;

	memset(t, 0, sizeof(*t));
	for (int i = 0; i < NCOL; i++)
		col_of[i] = -1;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *f = p;
		struct gm_trace_event ev = {0};
		bool fail = false, is_free = false, is_seg = false;
		unsigned long size_col = 1, ptr_col = 1;
		int col = 0;

		line++;
		if (memchr(p, '\0', (size_t)(le - p))) {
			err = gm_diag_set(diag, GM_EINVAL,
					  "%s:%lu:1: NUL byte in a text line",
					  name, line);
			goto fail;
		}
		{
			const char *a = p, *b = le;

			trim(&a, &b);
			if (a == b || *a == '#') {
				p = nl ? nl + 1 : end;
				continue;
			}
		}
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
				if (which >= 0 && col_of[which] >= 0) {
					err = gm_diag_set(diag, GM_EINVAL,
						"%s:%lu:%lu: the header names "
						"'%s' twice", name, line,
						colno, col_names[which]);
					goto fail;
				}
				if (which >= 0)
					col_of[which] = col;
			} else {
				for (int i = 0; i < NCOL; i++)
					if (col_of[i] == col)
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
					else if (field_is(s, fe,
							  "allocate failure"))
						fail = true;
					else if (field_is(s, fe, "segment"))
						is_seg = true;
					else
						bad = 1;
					break;
				case C_POINTER:
					ptr_col = colno;
					if (field_is(s, fe, "(nil)") ||
					    field_is(s, fe, "nullptr"))
						ev.ptr = 0;
					else
						bad = parse_u64(s, fe, true,
								&ev.ptr);
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
					bad = s != fe &&
					      parse_time(s, fe, &ev.time_ns);
					break;
				}
				if (bad) {
					err = gm_diag_set(diag, GM_EINVAL,
						"%s:%lu:%lu: bad %s value "
						"'%.*s'", name, line, colno,
						col_names[which],
						(int)(fe - s < 40 ? fe - s : 40),
						s);
					goto fail;
				}
			}
			col++;
			if (!c)
				break;
			f = c + 1;
		}
		if (!header) {
			for (int i = C_ACTION; i <= C_SIZE; i++)
				if (col_of[i] < 0) {
					err = gm_diag_set(diag, GM_EINVAL,
						"%s:%lu:1: the header has no "
						"'%s' column (expected "
						"Thread,Time,Action,Pointer,"
						"Size,Stream)", name, line,
						col_names[i]);
					goto fail;
				}
			header = true;
			ncols = col;
		} else {
			if (col != ncols) {
				err = gm_diag_set(diag, GM_EINVAL,
					"%s:%lu:%lu: %d fields, the header "
					"has %d", name, line,
					(unsigned long)(le - p) + 1, col,
					ncols);
				goto fail;
			}
			if (fail)
				ev.action = GM_TRACE_ALLOC_FAILURE;
			else if (is_seg)
				ev.action = GM_TRACE_SEGMENT;
			else if (is_free)
				ev.action = GM_TRACE_FREE;
			if ((ev.action == GM_TRACE_ALLOC ||
			     ev.action == GM_TRACE_SEGMENT) &&
			    (!ev.ptr || !ev.size)) {
				err = gm_diag_set(diag, GM_EINVAL,
					"%s:%lu:%lu: an %s needs a "
					"pointer and a size above 0",
					name, line, ev.ptr ? size_col : ptr_col,
					ev.action == GM_TRACE_SEGMENT ?
					"segment" : "allocation");
				goto fail;
			}
			err = push(t, &ev);
			if (err) {
				gm_diag_set(diag, err, "%s: out of memory",
					    name);
				goto fail;
			}
		}
		p = nl ? nl + 1 : end;
	}
	if (!header)
		return gm_diag_set(diag, GM_EINVAL, "%s:1:1: empty trace "
				   "(no header line)", name);
	return 0;
fail:
	gm_trace_free(t);
	return err;
}

/*
 * Read and parse a trace file (plain or gzip). Every message is
 * formatted while the stream that owns its text (gzerror's string) is
 * still open. Errors: GM_EIO (cannot open or read, truncated gzip),
 * GM_ENOMEM, or gm_trace_parse's.
 */
int gm_trace_read(const char *path, struct gm_trace *t, struct gm_diag *diag)
{
	struct stat st;
	gzFile f;
	char *buf = NULL;
	size_t len = 0, cap = 0;
	int fd, n, err = 0;

	memset(t, 0, sizeof(*t));
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
	for (;;) {
		if (cap - len < 65536) {
			char *b;

			cap = cap ? cap * 2 : 1 << 20;
			b = realloc(buf, cap);
			if (!b) {
				err = gm_diag_set(diag, GM_ENOMEM,
						  "%s: out of memory", path);
				break;
			}
			buf = b;
		}
		n = gzread(f, buf + len, 65536);
		if (n <= 0) {
			int zerr = Z_OK;
			const char *msg = gzerror(f, &zerr);

			/* A truncated gzip stream ends with Z_BUF_ERROR. */
			if (n < 0 || zerr != Z_OK)
				err = gm_diag_set(diag, GM_EIO,
					"%s: cannot read: %s", path,
					zerr == Z_ERRNO ? strerror(errno) :
					zerr == Z_BUF_ERROR ?
					"unexpected end of compressed data" :
					msg);
			break;
		}
		len += (size_t)n;
	}
	gzclose(f);
	if (!err)
		err = gm_trace_parse(buf, len, path, t, diag);
	free(buf);
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
		r->events++;
		s = e->ptr ? pm_slot(&m, e->ptr) : 0;
		if (e->action == GM_TRACE_FREE) {
			if (!e->ptr || !m.k[s]) {
				size_t f = e->ptr ? pm_slot(&failed, e->ptr)
						  : 0;

				if (e->ptr && failed.k[f]) {
					pm_del(&failed, f);
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

				/* GM_ENOMEM: no arena for one more stream
				 * (the pool's 1,024) or no host memory. */
				if (aerr == GM_ENOMEM)
					r->stream_limit_allocations++;
				else
					r->failed_allocations++;
				if (!failed.k[f]) {
					failed.k[f] = e->ptr;
					failed.n++;
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
	return 0;
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
