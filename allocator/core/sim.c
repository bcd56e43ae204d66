/* sim.c - the simulated backend: address arithmetic only (see sim.h). */
#include "sim.h"

#include "error.h"
#include "units.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define SIM_STREAMS 64 /* streams tracked for launch/finish; others hash */

struct sim_stream {
	uintptr_t key;      /* stream + 1; 0 = free slot */
	uint64_t submitted; /* launches so far */
	uint64_t finished;  /* launches done */
};

/* One va_reserve range and which of its granules are mapped (one bit
 * each), so mapped bytes are counted exactly as the driver backend's
 * per-granule handles (cuda.c) count them. */
struct sim_resv {
	uint64_t addr, size;
	uint64_t *bits;
};

/* A free range [start, end) of the driver placement's heap. */
struct sim_hole {
	uint64_t start, end;
};

struct sim {
	struct gm_backend be;
	enum gm_sim_placement placement;
	uint64_t low;              /* driver heap: bottom of the lowest chunk */
	struct sim_hole *holes;    /* driver heap: sorted, disjoint, merged */
	unsigned nholes, capholes;
	struct sim_resv *resv;
	unsigned nresv, capresv;
	pthread_mutex_t lock;
	uint64_t next_addr; /* bump pointer of the address space */
	uint64_t hint_addr, hint_size; /* gm_sim_place_next; size 0 = none */
	uint64_t used;      /* bytes handed out */
	uint64_t short_by;  /* the last refused charge's shortfall */
	unsigned fail_after;
	struct sim_stream streams[SIM_STREAMS];
};

static struct sim *sim_of(struct gm_backend *be)
{
	return (struct sim *)be;
}

/* Count down the injected failure; true when this call must fail. */
static bool inject(struct sim *s)
{
	if (!s->fail_after)
		return false;
	return --s->fail_after == 0;
}

/*
 * Cut a fresh range of size bytes from the address space, 2 MiB aligned
 * (cuMemAlloc returns at least 256 B alignment; 2 MiB keeps simulated
 * addresses readable). Ranges are never reused: 2^64 - 2^40 bytes of
 * address space last long. Caller holds the lock.
 */
static int take_range(struct sim *s, uint64_t size, uint64_t *addr)
{
	uint64_t a = (s->next_addr + 2 * GM_MiB - 1) & ~(2 * GM_MiB - 1);

	if (a < s->next_addr || size > UINT64_MAX - a)
		return GM_EDEVNOMEM;
	*addr = a;
	s->next_addr = a + size;
	return 0;
}

/*
 * GM_SIM_PLACE_DRIVER (sim.h; evidence in tools/measure/vaddr.py and
 * tools/bench/results/alloc-emulation.md): the lowest hole with room
 * for size (rounded up to 2 MiB, from a 2 MiB-aligned start), else a
 * new chunk of size rounded up to 32 MiB below the lowest one, the
 * segment at its bottom and the rest a hole. Caller holds the lock.
 * GM_ENOMEM when the hole list cannot grow, GM_EDEVNOMEM when the heap
 * would run into the rising range (never in practice: 2^47 bytes).
 */
static int hole_insert(struct sim *s, unsigned i, uint64_t a, uint64_t b)
{
	if (s->nholes == s->capholes) {
		unsigned cap = s->capholes ? s->capholes * 2 : 16;
		struct sim_hole *n = realloc(s->holes, cap * sizeof(*n));

		if (!n)
			return GM_ENOMEM;
		s->holes = n;
		s->capholes = cap;
	}
	memmove(&s->holes[i + 1], &s->holes[i],
		(s->nholes - i) * sizeof(*s->holes));
	s->holes[i] = (struct sim_hole){a, b};
	s->nholes++;
	return 0;
}

static void hole_remove(struct sim *s, unsigned i)
{
	memmove(&s->holes[i], &s->holes[i + 1],
		(s->nholes - i - 1) * sizeof(*s->holes));
	s->nholes--;
}

/* Give [a, b) back to the driver heap, merging with its neighbours. */
static int hole_give(struct sim *s, uint64_t a, uint64_t b)
{
	unsigned i = 0;

	while (i < s->nholes && s->holes[i].end < a)
		i++;
	if (i < s->nholes && s->holes[i].start <= b) {
		/* touches hole i (holes never overlap live segments) */
		if (a < s->holes[i].start)
			s->holes[i].start = a;
		if (b > s->holes[i].end)
			s->holes[i].end = b;
		if (i + 1 < s->nholes &&
		    s->holes[i + 1].start <= s->holes[i].end) {
			s->holes[i].end = s->holes[i + 1].end;
			hole_remove(s, i + 1);
		}
		return 0;
	}
	return hole_insert(s, i, a, b);
}

static int driver_take(struct sim *s, uint64_t size, uint64_t *addr)
{
	const uint64_t g = 2 * GM_MiB, c = GM_SIM_DRIVER_CHUNK;
	uint64_t n, chunk;

	if (size > GM_SIM_DRIVER_TOP / 2)
		return GM_EDEVNOMEM;
	n = (size + g - 1) & ~(g - 1);
	for (unsigned i = 0; i < s->nholes; i++) {
		struct sim_hole *h = &s->holes[i];
		uint64_t a = (h->start + g - 1) & ~(g - 1);

		if (a > h->end || h->end - a < n)
			continue;
		*addr = a;
		if (a + n == h->end && a == h->start)
			hole_remove(s, i);
		else if (a + n == h->end)
			h->end = a;
		else if (a == h->start)
			h->start = a + n;
		else {
			uint64_t e = h->end;

			if (hole_insert(s, i + 1, a + n, e))
				return GM_ENOMEM;
			s->holes[i].end = a;
		}
		return 0;
	}
	chunk = (n + c - 1) & ~(c - 1);
	if (s->low - GM_SIM_DRIVER_TOP / 2 < chunk)
		return GM_EDEVNOMEM;
	if (chunk > n && hole_give(s, s->low - chunk + n, s->low))
		return GM_ENOMEM;
	s->low -= chunk;
	*addr = s->low;
	return 0;
}

/* Charge size bytes of device memory, exactly against the capacity. */
static int charge(struct sim *s, uint64_t size)
{
	if (inject(s))
		return GM_EDEVNOMEM;
	if (size > s->be.total_bytes - s->used) {
		s->short_by = size - (s->be.total_bytes - s->used);
		return GM_EDEVNOMEM;
	}
	s->used += size;
	return 0;
}

static int sim_seg_alloc(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	struct sim *s = sim_of(be);
	int err;

	if (!size)
		return GM_EINVAL;
	pthread_mutex_lock(&s->lock);
	err = charge(s, size);
	if (!err && s->hint_size == size) {
		*addr = s->hint_addr;
	} else if (!err && s->placement == GM_SIM_PLACE_DRIVER) {
		err = driver_take(s, size, addr);
		if (err)
			s->used -= size;
	} else if (!err) {
		err = take_range(s, size, addr);
		if (err)
			s->used -= size;
	}
	s->hint_size = 0;
	pthread_mutex_unlock(&s->lock);
	return err;
}

void gm_sim_place_next(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);

	pthread_mutex_lock(&s->lock);
	s->hint_addr = addr;
	s->hint_size = addr ? size : 0;
	pthread_mutex_unlock(&s->lock);
}

static int sim_seg_free(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (size > s->used)
		err = GM_EINVAL;
	else
		s->used -= size;
	/* the driver heap gets its own segments' ranges back (hinted
	 * ones lie below it and are not reused) */
	if (!err && s->placement == GM_SIM_PLACE_DRIVER && addr >= s->low &&
	    addr < GM_SIM_DRIVER_TOP)
		err = hole_give(s, addr, addr + ((size + 2 * GM_MiB - 1) &
						 ~(2 * GM_MiB - 1)));
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* The reservation holding addr, or NULL. Caller holds the lock. */
static struct sim_resv *resv_of(struct sim *s, uint64_t addr)
{
	for (unsigned i = 0; i < s->nresv; i++) {
		struct sim_resv *r = &s->resv[i];

		if (addr >= r->addr && addr - r->addr < r->size)
			return r;
	}
	return NULL;
}

static bool bit_get(const struct sim_resv *r, uint64_t i)
{
	return r->bits[i / 64] >> (i % 64) & 1;
}

static void bit_put(struct sim_resv *r, uint64_t i, bool on)
{
	if (on)
		r->bits[i / 64] |= 1ULL << (i % 64);
	else
		r->bits[i / 64] &= ~(1ULL << (i % 64));
}

static int sim_va_reserve(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	struct sim *s = sim_of(be);
	uint64_t *bits;
	int err;

	if (!size || size % be->granule_bytes)
		return GM_EINVAL;
	bits = calloc((size / be->granule_bytes + 63) / 64, sizeof(*bits));
	if (!bits)
		return GM_ENOMEM;
	pthread_mutex_lock(&s->lock);
	if (s->nresv == s->capresv) {
		unsigned cap = s->capresv ? s->capresv * 2 : 8;
		struct sim_resv *n = realloc(s->resv, cap * sizeof(*n));

		if (!n) {
			pthread_mutex_unlock(&s->lock);
			free(bits);
			return GM_ENOMEM;
		}
		s->resv = n;
		s->capresv = cap;
	}
	err = inject(s) ? GM_EDEVNOMEM : take_range(s, size, addr);
	if (!err)
		s->resv[s->nresv++] = (struct sim_resv){*addr, size, bits};
	pthread_mutex_unlock(&s->lock);
	if (err)
		free(bits);
	return err;
}

/*
 * Map granules [addr, addr + size): GM_EINVAL outside a reservation or
 * when one is mapped already (cuda.c refuses the same), GM_EDEVNOMEM
 * past the capacity; nothing changes on failure.
 */
static int sim_va_map(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);
	uint64_t g = be->granule_bytes, first, n;
	struct sim_resv *r;
	int err = 0;

	if (!size || size % g || addr % g)
		return GM_EINVAL;
	pthread_mutex_lock(&s->lock);
	r = resv_of(s, addr);
	if (!r || size > r->size - (addr - r->addr)) {
		err = GM_EINVAL;
		goto out;
	}
	first = (addr - r->addr) / g;
	n = size / g;
	for (uint64_t i = 0; i < n; i++)
		if (bit_get(r, first + i)) {
			err = GM_EINVAL;
			goto out;
		}
	err = charge(s, size);
	for (uint64_t i = 0; !err && i < n; i++)
		bit_put(r, first + i, true);
out:
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* Unmap [from, to) granules of r, skipping unmapped ones (as cuda.c's
 * unmap_range). Caller holds the lock. */
static void unmap_granules(struct sim *s, struct sim_resv *r, uint64_t from,
			   uint64_t to)
{
	for (uint64_t i = from; i < to; i++) {
		if (!bit_get(r, i))
			continue;
		bit_put(r, i, false);
		s->used -= s->be.granule_bytes;
	}
}

static int sim_va_unmap(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);
	uint64_t g = be->granule_bytes;
	struct sim_resv *r;

	if (size % g || addr % g)
		return GM_EINVAL;
	pthread_mutex_lock(&s->lock);
	r = resv_of(s, addr);
	if (r && size <= r->size - (addr - r->addr))
		unmap_granules(s, r, (addr - r->addr) / g,
			       (addr - r->addr + size) / g);
	pthread_mutex_unlock(&s->lock);
	return r ? 0 : GM_EINVAL;
}

static int sim_va_release(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);
	struct sim_resv *r;
	int err = GM_EINVAL;

	pthread_mutex_lock(&s->lock);
	r = resv_of(s, addr);
	if (r && r->addr == addr) {
		unmap_granules(s, r, 0, r->size / be->granule_bytes);
		free(r->bits);
		*r = s->resv[--s->nresv];
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

/* The slot of a stream (hashing beyond SIM_STREAMS). Caller locks. */
static struct sim_stream *stream_slot(struct sim *s, uintptr_t id)
{
	unsigned h = (unsigned)((id * 0x9e3779b97f4a7c15ULL) >> 58);

	for (unsigned i = 0; i < SIM_STREAMS; i++) {
		struct sim_stream *t = &s->streams[(h + i) % SIM_STREAMS];

		if (t->key == id + 1 || !t->key) {
			t->key = id + 1;
			return t;
		}
	}
	return &s->streams[h % SIM_STREAMS];
}

/* An event is (stream slot << 48 | launches submitted at record) + 1. */
static int sim_event_record(struct gm_backend *be, uintptr_t stream,
			    uint64_t *event)
{
	struct sim *s = sim_of(be);
	struct sim_stream *t;

	pthread_mutex_lock(&s->lock);
	t = stream_slot(s, stream);
	*event = ((uint64_t)(t - s->streams) << 48 | t->submitted) + 1;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int sim_event_query(struct gm_backend *be, uint64_t event)
{
	struct sim *s = sim_of(be);
	uint64_t e = event - 1;
	struct sim_stream *t = &s->streams[(e >> 48) % SIM_STREAMS];
	int err;

	pthread_mutex_lock(&s->lock);
	err = t->finished >= (e & ((1ULL << 48) - 1)) ? 0 : GM_EBUSY;
	pthread_mutex_unlock(&s->lock);
	return err;
}

static int sim_event_sync(struct gm_backend *be, uint64_t event)
{
	struct sim *s = sim_of(be);
	uint64_t e = event - 1;
	struct sim_stream *t = &s->streams[(e >> 48) % SIM_STREAMS];

	/* Waiting on the simulated device finishes the work. */
	pthread_mutex_lock(&s->lock);
	if (t->finished < (e & ((1ULL << 48) - 1)))
		t->finished = e & ((1ULL << 48) - 1);
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void sim_event_destroy(struct gm_backend *be, uint64_t event)
{
}

static int sim_synchronize(struct gm_backend *be)
{
	struct sim *s = sim_of(be);

	pthread_mutex_lock(&s->lock);
	for (unsigned i = 0; i < SIM_STREAMS; i++)
		s->streams[i].finished = s->streams[i].submitted;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static int sim_mem_free(struct gm_backend *be, uint64_t *free_bytes)
{
	struct sim *s = sim_of(be);

	pthread_mutex_lock(&s->lock);
	*free_bytes = be->total_bytes - s->used;
	pthread_mutex_unlock(&s->lock);
	return 0;
}

static void sim_destroy(struct gm_backend *be)
{
	struct sim *s = sim_of(be);

	for (unsigned i = 0; i < s->nresv; i++)
		free(s->resv[i].bits);
	free(s->resv);
	free(s->holes);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

static const struct gm_backend_ops sim_ops = {
	.seg_alloc = sim_seg_alloc,
	.seg_free = sim_seg_free,
	.event_record = sim_event_record,
	.event_query = sim_event_query,
	.event_sync = sim_event_sync,
	.event_destroy = sim_event_destroy,
	.synchronize = sim_synchronize,
	.mem_free = sim_mem_free,
	.destroy = sim_destroy,
};

static const struct gm_backend_ops sim_ops_va = {
	.seg_alloc = sim_seg_alloc,
	.seg_free = sim_seg_free,
	.va_reserve = sim_va_reserve,
	.va_map = sim_va_map,
	.va_unmap = sim_va_unmap,
	.va_release = sim_va_release,
	.event_record = sim_event_record,
	.event_query = sim_event_query,
	.event_sync = sim_event_sync,
	.event_destroy = sim_event_destroy,
	.synchronize = sim_synchronize,
	.mem_free = sim_mem_free,
	.destroy = sim_destroy,
};

int gm_sim_backend_create(struct gm_backend **out,
			  const struct gm_sim_options *opt)
{
	struct sim *s;
	uint64_t g;

	*out = NULL;
	if (!opt || !opt->total_bytes)
		return GM_EINVAL;
	g = opt->granule_bytes ? opt->granule_bytes : 2 * GM_MiB;
	if (g & (g - 1))
		return GM_EINVAL;
	if (opt->placement != GM_SIM_PLACE_RISING &&
	    opt->placement != GM_SIM_PLACE_DRIVER)
		return GM_EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return GM_ENOMEM;
	pthread_mutex_init(&s->lock, NULL);
	s->be.ops = opt->virtual_segments ? &sim_ops_va : &sim_ops;
	s->be.name = "sim";
	s->be.total_bytes = opt->total_bytes;
	s->be.granule_bytes = g;
	s->next_addr = GM_SIM_BASE;
	s->placement = opt->placement;
	s->low = GM_SIM_DRIVER_TOP;
	*out = &s->be;
	return 0;
}

int gm_sim_placement_parse(const char *str, enum gm_sim_placement *out)
{
	if (!strcmp(str, "rising"))
		*out = GM_SIM_PLACE_RISING;
	else if (!strcmp(str, "driver"))
		*out = GM_SIM_PLACE_DRIVER;
	else
		return GM_EINVAL;
	return 0;
}

void gm_sim_launch(struct gm_backend *be, uintptr_t stream)
{
	struct sim *s = sim_of(be);

	pthread_mutex_lock(&s->lock);
	stream_slot(s, stream)->submitted++;
	pthread_mutex_unlock(&s->lock);
}

void gm_sim_finish(struct gm_backend *be, uintptr_t stream)
{
	struct sim *s = sim_of(be);
	struct sim_stream *t;

	pthread_mutex_lock(&s->lock);
	t = stream_slot(s, stream);
	t->finished = t->submitted;
	pthread_mutex_unlock(&s->lock);
}

void gm_sim_fail_after(struct gm_backend *be, unsigned n)
{
	struct sim *s = sim_of(be);

	pthread_mutex_lock(&s->lock);
	s->fail_after = n;
	pthread_mutex_unlock(&s->lock);
}

int gm_sim_reset(struct gm_backend *be)
{
	struct sim *s = sim_of(be);
	int err = GM_EBUSY;

	pthread_mutex_lock(&s->lock);
	if (!s->used && !s->nresv) {
		s->next_addr = GM_SIM_BASE;
		s->low = GM_SIM_DRIVER_TOP;
		s->nholes = 0;
		s->hint_size = 0;
		err = 0;
	}
	pthread_mutex_unlock(&s->lock);
	return err;
}

uint64_t gm_sim_used(struct gm_backend *be)
{
	struct sim *s = sim_of(be);
	uint64_t u;

	pthread_mutex_lock(&s->lock);
	u = s->used;
	pthread_mutex_unlock(&s->lock);
	return u;
}

size_t gm_sim_state(struct gm_backend *be, uint64_t *buf, size_t cap)
{
	struct sim *s = sim_of(be);
	size_t n = 0;

#define PUT(v) do { if (n < cap) buf[n] = (v); n++; } while (0)
	pthread_mutex_lock(&s->lock);
	PUT(be->total_bytes);
	PUT(s->used);
	PUT(s->low);
	PUT(s->next_addr);
	PUT(s->hint_addr);
	PUT(s->hint_size);
	PUT(s->fail_after);
	PUT(s->nholes);
	for (unsigned i = 0; i < s->nholes; i++) {
		PUT(s->holes[i].start);
		PUT(s->holes[i].end);
	}
	PUT(s->nresv);
	for (unsigned i = 0; i < s->nresv; i++) {
		uint64_t g = be->granule_bytes ? be->granule_bytes : 1;
		size_t nw = (s->resv[i].size / g + 63) / 64;

		PUT(s->resv[i].addr);
		PUT(s->resv[i].size);
		for (size_t w = 0; w < nw; w++)
			PUT(s->resv[i].bits[w]);
	}
	for (unsigned i = 0; i < SIM_STREAMS; i++) {
		PUT(s->streams[i].key);
		PUT(s->streams[i].submitted - s->streams[i].finished);
	}
	pthread_mutex_unlock(&s->lock);
#undef PUT
	return n;
}

uint64_t gm_sim_short_by(struct gm_backend *be)
{
	struct sim *s = sim_of(be);
	uint64_t n;

	pthread_mutex_lock(&s->lock);
	n = s->short_by;
	pthread_mutex_unlock(&s->lock);
	return n;
}

int gm_sim_grow(struct gm_backend *be, uint64_t bytes)
{
	struct sim *s = sim_of(be);
	int err = 0;

	pthread_mutex_lock(&s->lock);
	if (!bytes || bytes > UINT64_MAX - be->total_bytes)
		err = GM_EINVAL;
	else
		be->total_bytes += bytes;
	s->short_by = 0;
	pthread_mutex_unlock(&s->lock);
	return err;
}

uint64_t gm_sim_mapped(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct sim *s = sim_of(be);
	uint64_t g = be->granule_bytes, n = 0, end;
	struct sim_resv *r;

	if (!size)
		return 0;
	pthread_mutex_lock(&s->lock);
	r = resv_of(s, addr);
	if (r) {
		end = addr + size - r->addr;
		if (end > r->size)
			end = r->size;
		for (uint64_t i = (addr - r->addr) / g; i < (end + g - 1) / g;
		     i++)
			n += bit_get(r, i);
	}
	pthread_mutex_unlock(&s->lock);
	return n * g;
}
