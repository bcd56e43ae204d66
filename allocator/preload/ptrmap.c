/* ptrmap.c - sharded pointer map over mmap'd storage (see ptrmap.h). */
#include "ptrmap.h"

#include "error.h"

#include <string.h>
#include <sys/mman.h>

/* splitmix64's finalizer: spreads 256-byte aligned pointers evenly. */
static uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ULL;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebULL;
	x ^= x >> 31;
	return x;
}

static struct gm_ptrmap_entry *slots_new(size_t cap)
{
	void *p = mmap(NULL, cap * sizeof(struct gm_ptrmap_entry),
		       PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		       -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static void slots_free(struct gm_ptrmap_entry *s, size_t cap)
{
	if (s)
		munmap(s, cap * sizeof(*s));
}

void gm_ptrmap_init(struct gm_ptrmap *m)
{
	memset(m, 0, sizeof(*m));
	for (int i = 0; i < GM_PTRMAP_SHARDS; i++)
		pthread_mutex_init(&m->shard[i].lock, NULL);
}

void gm_ptrmap_reset(struct gm_ptrmap *m)
{
	for (int i = 0; i < GM_PTRMAP_SHARDS; i++)
		slots_free(m->shard[i].slots, m->shard[i].cap);
	gm_ptrmap_init(m);
}

/* Slot for key in s (the used one, or the first free one). */
static struct gm_ptrmap_entry *probe(struct gm_ptrmap_shard *s, uint64_t h,
				     uint64_t key, bool for_insert)
{
	struct gm_ptrmap_entry *grave = NULL;
	size_t mask = s->cap - 1;

	for (size_t i = h & mask;; i = (i + 1) & mask) {
		struct gm_ptrmap_entry *e = &s->slots[i];

		if (e->state == 0)
			return for_insert && grave ? grave : e;
		if (e->state == 2) {
			if (!grave)
				grave = e;
		} else if (e->key == key) {
			return e;
		}
	}
}

/* Rehash s into a table of cap slots (cap > used). */
static int rehash(struct gm_ptrmap_shard *s, size_t cap)
{
	struct gm_ptrmap_entry *old = s->slots;
	size_t old_cap = s->cap;

	s->slots = slots_new(cap);
	if (!s->slots) {
		s->slots = old;
		return GM_ENOMEM;
	}
	s->cap = cap;
	s->dead = 0;
	for (size_t i = 0; i < old_cap; i++) {
		if (old[i].state != 1)
			continue;
		*probe(s, mix64(old[i].key), old[i].key, true) = old[i];
	}
	slots_free(old, old_cap);
	return 0;
}

int gm_ptrmap_put(struct gm_ptrmap *m, uint64_t key, uint64_t size,
		  uint32_t device, uint8_t kind)
{
	uint64_t h = mix64(key);
	struct gm_ptrmap_shard *s = &m->shard[h >> 58];
	struct gm_ptrmap_entry *e;
	int rc = 0;

	pthread_mutex_lock(&s->lock);
	/* Keep the load (live + deleted) under 3/4. */
	if ((s->used + s->dead + 1) * 4 > s->cap * 3) {
		size_t cap = s->cap ? s->cap : 256;
		while ((s->used + 1) * 2 > cap)
			cap *= 2;
		rc = rehash(s, cap);
		if (rc)
			goto out;
	}
	e = probe(s, h, key, true);
	if (e->state != 1)
		s->used++;
	if (e->state == 2)
		s->dead--;
	*e = (struct gm_ptrmap_entry){key, size, device, kind, 1};
out:
	pthread_mutex_unlock(&s->lock);
	return rc;
}

bool gm_ptrmap_take(struct gm_ptrmap *m, uint64_t key,
		    struct gm_ptrmap_entry *out)
{
	uint64_t h = mix64(key);
	struct gm_ptrmap_shard *s = &m->shard[h >> 58];
	struct gm_ptrmap_entry *e;
	bool found = false;

	pthread_mutex_lock(&s->lock);
	if (s->cap) {
		e = probe(s, h, key, false);
		if (e->state == 1) {
			*out = *e;
			e->state = 2;
			s->used--;
			s->dead++;
			found = true;
		}
	}
	pthread_mutex_unlock(&s->lock);
	return found;
}

size_t gm_ptrmap_count(struct gm_ptrmap *m)
{
	size_t n = 0;

	for (int i = 0; i < GM_PTRMAP_SHARDS; i++) {
		pthread_mutex_lock(&m->shard[i].lock);
		n += m->shard[i].used;
		pthread_mutex_unlock(&m->shard[i].lock);
	}
	return n;
}

void gm_ptrmap_lock_all(struct gm_ptrmap *m)
{
	for (int i = 0; i < GM_PTRMAP_SHARDS; i++)
		pthread_mutex_lock(&m->shard[i].lock);
}

void gm_ptrmap_unlock_all(struct gm_ptrmap *m)
{
	for (int i = GM_PTRMAP_SHARDS - 1; i >= 0; i--)
		pthread_mutex_unlock(&m->shard[i].lock);
}
