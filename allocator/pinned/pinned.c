/* pinned.c - the pinned host memory cache (see pinned.h). */
#include "pinned.h"

#include "emit.h"
#include "error.h"
#include "jemalloc_private.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#define GM__PINNED_NARENAS 8 /* one per combination of the 3 flag bits */
#define GM__PINNED_PAGE ((size_t)4096)

/* One driver allocation, as the hooks handed it to jemalloc. */
struct gm__chunk {
	uintptr_t base;  /* start of the extent given to jemalloc */
	size_t size;     /* its size */
	void *drv;       /* what cuMemHostAlloc returned (<= base) */
	size_t drv_size; /* what was asked of it (>= size) */
	gm_cu_ptr dptr;  /* device pointer of drv; 0 unless mapped */
	struct gm__arena *arena;
};

/*
 * One jemalloc arena and the flags of its chunks. The hooks are the
 * first member: jemalloc passes &hooks back to every hook.
 */
struct gm__arena {
	extent_hooks_t hooks;
	struct gm_pinned *pc;
	unsigned flags;
	unsigned ind;
	atomic_uint_fast64_t live; /* live buffers */
};

struct gm_pinned {
	const struct gm_cu *cu;
	size_t grow_limit;

	/* Arenas: created under arena_mtx, destroyed under arena_lock
	 * (write); allocations hold arena_lock (read). */
	pthread_rwlock_t arena_lock;
	pthread_mutex_t arena_mtx;
	struct gm__arena *_Atomic arena[GM__PINNED_NARENAS];

	/* Range map, sorted by base. Readers hold map_lock (read); writers
	 * hold map_write, and map_lock (write) only to change the array. */
	pthread_rwlock_t map_lock;
	pthread_mutex_t map_write;
	struct gm__chunk *map;
	size_t map_n, map_cap;

	atomic_uint_fast64_t in_use, reserved, peak_reserved, peak_in_use;
	atomic_uint_fast64_t buffers, chunks, allocs, frees;
	atomic_uint_fast64_t driver_allocs, driver_frees, driver_failures;
	atomic_uint_fast64_t merges_refused;
};

/* The driver's answer to the last failed chunk allocation of a thread. */
static _Thread_local gm_cu_result gm__pinned_err;

static void gm__peak(atomic_uint_fast64_t *peak, uint64_t v)
{
	uint64_t cur = atomic_load(peak);

	while (v > cur && !atomic_compare_exchange_weak(peak, &cur, v))
		;
}

/* ==== Range map ==== */

/* Index of the last chunk with base <= p, or -1. Caller holds map_lock. */
static long gm__map_find(const struct gm_pinned *pc, uintptr_t p)
{
	size_t lo = 0, hi = pc->map_n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (pc->map[mid].base <= p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (long)lo - 1;
}

/* The chunk containing p, copied to *c. Returns false when none does. */
static bool gm__map_lookup(struct gm_pinned *pc, uintptr_t p,
			   struct gm__chunk *c)
{
	bool found = false;
	long i;

	pthread_rwlock_rdlock(&pc->map_lock);
	i = gm__map_find(pc, p);
	if (i >= 0 && p - pc->map[i].base < pc->map[i].size) {
		*c = pc->map[i];
		found = true;
	}
	pthread_rwlock_unlock(&pc->map_lock);
	return found;
}

/*
 * Record a chunk. The array grows outside map_lock (from the private
 * metadata arena), so map_lock is a leaf: nothing is called under it.
 * Returns 0 or GM_ENOMEM.
 */
static int gm__map_insert(struct gm_pinned *pc, const struct gm__chunk *c)
{
	struct gm__chunk *grown = NULL, *old = NULL;
	long i;

	pthread_mutex_lock(&pc->map_write);
	if (pc->map_n == pc->map_cap) {
		size_t cap = pc->map_cap ? pc->map_cap * 2 : 64;

		grown = gm__meta_alloc(cap * sizeof(*grown));
		if (!grown) {
			pthread_mutex_unlock(&pc->map_write);
			return GM_ENOMEM;
		}
		if (pc->map_n)
			memcpy(grown, pc->map, pc->map_n * sizeof(*grown));
		pthread_rwlock_wrlock(&pc->map_lock);
		old = pc->map;
		pc->map = grown;
		pc->map_cap = cap;
		pthread_rwlock_unlock(&pc->map_lock);
	}
	pthread_rwlock_wrlock(&pc->map_lock);
	i = gm__map_find(pc, c->base) + 1;
	memmove(&pc->map[i + 1], &pc->map[i],
		(pc->map_n - (size_t)i) * sizeof(*c));
	pc->map[i] = *c;
	pc->map_n++;
	pthread_rwlock_unlock(&pc->map_lock);
	pthread_mutex_unlock(&pc->map_write);
	gm__meta_free(old);
	return 0;
}

/*
 * Remove the chunk matching the filter and copy it to *out: the chunk
 * that is exactly [base, base + size) when arena is NULL, else any chunk
 * of arena. Returns false when there is none.
 */
static bool gm__map_take(struct gm_pinned *pc, uintptr_t base, size_t size,
			 const struct gm__arena *arena, struct gm__chunk *out)
{
	bool found = false;
	size_t i = 0;

	pthread_mutex_lock(&pc->map_write);
	pthread_rwlock_wrlock(&pc->map_lock);
	if (arena) {
		while (i < pc->map_n && pc->map[i].arena != arena)
			i++;
		found = i < pc->map_n;
	} else {
		long j = gm__map_find(pc, base);

		found = j >= 0 && pc->map[j].base == base &&
			pc->map[j].size == size;
		i = (size_t)j;
	}
	if (found) {
		*out = pc->map[i];
		memmove(&pc->map[i], &pc->map[i + 1],
			(pc->map_n - i - 1) * sizeof(*out));
		pc->map_n--;
	}
	pthread_rwlock_unlock(&pc->map_lock);
	pthread_mutex_unlock(&pc->map_write);
	return found;
}

/* Unpin a chunk already taken out of the map. */
static void gm__chunk_release(struct gm_pinned *pc, const struct gm__chunk *c)
{
	pc->cu->mem_free_host(c->drv);
	atomic_fetch_add(&pc->driver_frees, 1);
	atomic_fetch_sub(&pc->chunks, 1);
	atomic_fetch_sub(&pc->reserved, c->drv_size);
}

/* ==== Extent hooks (jemalloc 5.3 extent_hooks_t) ==== */

static struct gm__arena *gm__arena_of(extent_hooks_t *h)
{
	return (struct gm__arena *)h;
}

/*
 * A new extent of size bytes aligned to alignment, pinned by the driver.
 * Pinned memory cannot be placed at an address, so new_addr requests
 * (in-place growth) are declined. Alignments above a page are met by
 * asking the driver for alignment - 4 KiB more. The memory is committed;
 * zeroed only when jemalloc asks.
 */
static void *gm__hook_alloc(extent_hooks_t *h, void *new_addr, size_t size,
			    size_t alignment, bool *zero, bool *commit,
			    unsigned ind)
{
	struct gm__arena *a = gm__arena_of(h);
	struct gm_pinned *pc = a->pc;
	struct gm__chunk c = { .size = size, .arena = a };
	size_t extra = alignment > GM__PINNED_PAGE ?
			       alignment - GM__PINNED_PAGE : 0;
	gm_cu_result r;

	if (new_addr)
		return NULL;
	c.drv_size = size + extra;
	r = pc->cu->mem_host_alloc(&c.drv, c.drv_size, a->flags);
	if (r != GM_CU_SUCCESS || !c.drv) {
		gm__pinned_err = r ? r : GM_CU_ERROR_OUT_OF_MEMORY;
		atomic_fetch_add(&pc->driver_failures, 1);
		return NULL;
	}
	c.base = ((uintptr_t)c.drv + alignment - 1) & ~(uintptr_t)(alignment - 1);
	if ((a->flags & GM_CU_MEMHOSTALLOC_DEVICEMAP) &&
	    pc->cu->mem_host_get_device_pointer &&
	    pc->cu->mem_host_get_device_pointer(&c.dptr, c.drv, 0) != 0)
		c.dptr = 0;
	if (gm__map_insert(pc, &c) != 0) {
		pc->cu->mem_free_host(c.drv);
		gm__pinned_err = GM_CU_ERROR_OUT_OF_MEMORY;
		return NULL;
	}
	atomic_fetch_add(&pc->driver_allocs, 1);
	atomic_fetch_add(&pc->chunks, 1);
	gm__peak(&pc->peak_reserved,
		 atomic_fetch_add(&pc->reserved, c.drv_size) + c.drv_size);
	if (*zero)
		memset((void *)c.base, 0, size);
	*commit = true;
	return (void *)c.base;
}

/*
 * Give an extent back: only a whole chunk can be unpinned. Returns false
 * when it was; true (opt out: jemalloc retains the range) otherwise.
 */
static bool gm__hook_dalloc(extent_hooks_t *h, void *addr, size_t size,
			    bool committed, unsigned ind)
{
	struct gm_pinned *pc = gm__arena_of(h)->pc;
	struct gm__chunk c;

	if (!gm__map_take(pc, (uintptr_t)addr, size, NULL, &c))
		return true;
	gm__chunk_release(pc, &c);
	return false;
}

/*
 * Arena destruction: unpin whole chunks now; parts are swept by
 * gm__arena_retire() once jemalloc is done with the arena.
 */
static void gm__hook_destroy(extent_hooks_t *h, void *addr, size_t size,
			     bool committed, unsigned ind)
{
	gm__hook_dalloc(h, addr, size, committed, ind);
}

/* Pinned memory is always committed: committing succeeds at once. */
static bool gm__hook_commit(extent_hooks_t *h, void *addr, size_t size,
			    size_t offset, size_t length, unsigned ind)
{
	return false;
}

/* Decommit and purge would unmap pages the device may still reach
 * through the pinning: always declined. */
static bool gm__hook_decommit(extent_hooks_t *h, void *addr, size_t size,
			      size_t offset, size_t length, unsigned ind)
{
	return true;
}

static bool gm__hook_purge(extent_hooks_t *h, void *addr, size_t size,
			   size_t offset, size_t length, unsigned ind)
{
	return true;
}

/* Splitting is bookkeeping inside jemalloc; the chunk stays whole. */
static bool gm__hook_split(extent_hooks_t *h, void *addr, size_t size,
			   size_t size_a, size_t size_b, bool committed,
			   unsigned ind)
{
	return false;
}

bool gm__pinned_merge_ok(struct gm_pinned *pc, const void *a, size_t sa,
			 const void *b, size_t sb)
{
	struct gm__chunk ca, cb;
	uintptr_t ua = (uintptr_t)a, ub = (uintptr_t)b;

	return gm__map_lookup(pc, ua, &ca) && gm__map_lookup(pc, ub, &cb) &&
	       ca.base == cb.base && ua + sa <= ca.base + ca.size &&
	       ub + sb <= ca.base + ca.size;
}

/*
 * Merge two adjacent ranges only when one driver allocation holds both;
 * ranges of separate cuMemHostAlloc calls stay apart (returns true).
 */
static bool gm__hook_merge(extent_hooks_t *h, void *addr_a, size_t size_a,
			   void *addr_b, size_t size_b, bool committed,
			   unsigned ind)
{
	struct gm_pinned *pc = gm__arena_of(h)->pc;

	if (gm__pinned_merge_ok(pc, addr_a, size_a, addr_b, size_b))
		return false;
	atomic_fetch_add(&pc->merges_refused, 1);
	return true;
}

static const extent_hooks_t gm__pinned_hooks = {
	.alloc = gm__hook_alloc,
	.dalloc = gm__hook_dalloc,
	.destroy = gm__hook_destroy,
	.commit = gm__hook_commit,
	.decommit = gm__hook_decommit,
	.purge_lazy = gm__hook_purge,
	.purge_forced = gm__hook_purge,
	.split = gm__hook_split,
	.merge = gm__hook_merge,
};

/* ==== Arenas ==== */

/* jemalloc 5.3's arena_config_t for "experimental.arenas_create_ext". */
struct gm__je_arena_config {
	extent_hooks_t *extent_hooks;
	bool metadata_use_hooks;
};

static int gm__arena_ctl(unsigned ind, const char *what, void *newp,
			 size_t newlen)
{
	char name[64];

	snprintf(name, sizeof(name), "arena.%u.%s", ind, what);
	return gm_je_mallctl(name, NULL, NULL, newp, newlen);
}

/*
 * Decay: dirty_decay_ms and muzzy_decay_ms -1, jemalloc never purges on
 * its own. Re-pinning costs milliseconds, so freed memory is kept until
 * gm_pinned_trim(). A finite time would buy little anyway: the hooks can
 * give back only whole chunks, and a freed buffer rarely is one (the
 * rest of its chunk sits in jemalloc's retained set, which is released
 * only when the arena is destroyed); a finite muzzy time would also make
 * jemalloc try to purge every freed extent above oversize_threshold
 * (8 MiB) at once. The purge hooks refuse anyway: pinned pages cannot be
 * given back in part.
 */
static int gm__arena_new(struct gm_pinned *pc, unsigned flags,
			 struct gm__arena **out)
{
	struct gm__arena *a = gm__meta_alloc(sizeof(*a));
	struct gm__je_arena_config cfg;
	extent_hooks_t *hp;
	size_t len = sizeof(unsigned);
	ssize_t never = -1;
	size_t grow = pc->grow_limit;

	if (!a)
		return GM_ENOMEM;
	a->hooks = gm__pinned_hooks;
	a->pc = pc;
	a->flags = flags;
	hp = &a->hooks;
	/* Keep jemalloc's own metadata for the arena out of pinned memory
	 * (write-combined memory is very slow to read). */
	cfg.extent_hooks = hp;
	cfg.metadata_use_hooks = false;
	if (gm_je_mallctl("experimental.arenas_create_ext", &a->ind, &len,
			  &cfg, sizeof(cfg)) != 0 &&
	    gm_je_mallctl("arenas.create", &a->ind, &len, &hp,
			  sizeof(hp)) != 0) {
		gm__meta_free(a);
		return GM_ENOMEM;
	}
	gm__arena_ctl(a->ind, "dirty_decay_ms", &never, sizeof(never));
	gm__arena_ctl(a->ind, "muzzy_decay_ms", &never, sizeof(never));
	gm__arena_ctl(a->ind, "retain_grow_limit", &grow, sizeof(grow));
	*out = a;
	return 0;
}

/* Destroy an arena without live buffers and unpin all its chunks. */
static void gm__arena_retire(struct gm_pinned *pc, struct gm__arena *a)
{
	struct gm__chunk c;

	gm__arena_ctl(a->ind, "destroy", NULL, 0);
	while (gm__map_take(pc, 0, 0, a, &c))
		gm__chunk_release(pc, &c);
	gm__meta_free(a);
}

/* The arena for flags, made on first use. Caller holds arena_lock. */
static int gm__arena_get(struct gm_pinned *pc, unsigned flags,
			 struct gm__arena **out)
{
	int err = 0;

	*out = atomic_load(&pc->arena[flags]);
	if (*out)
		return 0;
	pthread_mutex_lock(&pc->arena_mtx);
	*out = atomic_load(&pc->arena[flags]);
	if (!*out) {
		err = gm__arena_new(pc, flags, out);
		if (!err)
			atomic_store(&pc->arena[flags], *out);
	}
	pthread_mutex_unlock(&pc->arena_mtx);
	return err;
}

/*
 * mallocx alignment for a request: a page from 4 KiB up, as the driver
 * gives. jemalloc 5.3 otherwise starts large buffers at a random
 * multiple of 64 bytes inside their first page ("cache oblivious"; the
 * option is compile-time in 5.3) and pads their extent by a page, which
 * would also push a 64 MiB request into the next size class (80 MiB).
 */
static int gm__align_flag(size_t size)
{
	return MALLOCX_ALIGN(size >= GM__PINNED_PAGE ? GM__PINNED_PAGE :
						     GM_PINNED_ALIGN);
}

/* ==== Public ==== */

int gm_pinned_create(struct gm_pinned **out, const struct gm_cu *cu,
		     const struct gm_pinned_opts *opts, struct gm_diag *diag)
{
	struct gm_pinned *pc;

	*out = NULL;
	if (!cu || !cu->mem_host_alloc || !cu->mem_free_host)
		return gm_diag_set(diag, GM_ENOTSUP,
				   "the driver has no cuMemHostAlloc / "
				   "cuMemFreeHost");
	pc = gm__meta_alloc(sizeof(*pc));
	if (!pc)
		return gm_diag_set(diag, GM_ENOMEM,
				   "no memory for the pinned cache");
	pc->cu = cu;
	pc->grow_limit = opts && opts->grow_limit ? opts->grow_limit :
						    (size_t)64 << 20;
	pthread_rwlock_init(&pc->arena_lock, NULL);
	pthread_mutex_init(&pc->arena_mtx, NULL);
	pthread_rwlock_init(&pc->map_lock, NULL);
	pthread_mutex_init(&pc->map_write, NULL);
	*out = pc;
	return 0;
}

void gm_pinned_destroy(struct gm_pinned *pc)
{
	if (!pc)
		return;
	for (unsigned f = 0; f < GM__PINNED_NARENAS; f++) {
		struct gm__arena *a = atomic_load(&pc->arena[f]);

		if (a)
			gm__arena_retire(pc, a);
	}
	pthread_rwlock_destroy(&pc->arena_lock);
	pthread_mutex_destroy(&pc->arena_mtx);
	pthread_rwlock_destroy(&pc->map_lock);
	pthread_mutex_destroy(&pc->map_write);
	gm__meta_free(pc->map);
	gm__meta_free(pc);
}

int gm_pinned_alloc(struct gm_pinned *pc, void **p, size_t size,
		    unsigned flags, gm_cu_result *res)
{
	struct gm__arena *a;
	size_t usize;
	int err;

	if (res)
		*res = GM_CU_SUCCESS;
	*p = NULL;
	if (!size || (flags & ~(unsigned)GM_PINNED_FLAGS_ALL))
		return GM_ENOTSUP;
	pthread_rwlock_rdlock(&pc->arena_lock);
	err = gm__arena_get(pc, flags, &a);
	if (err) {
		pthread_rwlock_unlock(&pc->arena_lock);
		if (res)
			*res = GM_CU_ERROR_OUT_OF_MEMORY;
		return err;
	}
	gm__pinned_err = GM_CU_SUCCESS;
	*p = gm_je_mallocx(size, MALLOCX_ARENA(a->ind) | MALLOCX_TCACHE_NONE |
				 gm__align_flag(size));
	if (!*p) {
		gm_cu_result r = gm__pinned_err ? gm__pinned_err :
						  GM_CU_ERROR_OUT_OF_MEMORY;

		pthread_rwlock_unlock(&pc->arena_lock);
		if (res)
			*res = r;
		return r == GM_CU_ERROR_OUT_OF_MEMORY ? GM_ENOMEM : GM_EDEVICE;
	}
	usize = gm_je_sallocx(*p, 0);
	atomic_fetch_add(&a->live, 1);
	pthread_rwlock_unlock(&pc->arena_lock);
	gm__peak(&pc->peak_in_use,
		 atomic_fetch_add(&pc->in_use, usize) + usize);
	atomic_fetch_add(&pc->buffers, 1);
	atomic_fetch_add(&pc->allocs, 1);
	return 0;
}

int gm_pinned_free(struct gm_pinned *pc, void *p)
{
	struct gm__chunk c;
	size_t usize;

	if (!p || !gm__map_lookup(pc, (uintptr_t)p, &c))
		return GM_ENOTFOUND;
	usize = gm_je_sallocx(p, 0);
	gm_je_dallocx(p, MALLOCX_TCACHE_NONE);
	atomic_fetch_sub(&pc->in_use, usize);
	atomic_fetch_sub(&pc->buffers, 1);
	atomic_fetch_add(&pc->frees, 1);
	/* Last: once live reaches 0 the arena may be destroyed. */
	atomic_fetch_sub(&c.arena->live, 1);
	return 0;
}

int gm_pinned_query(struct gm_pinned *pc, const void *p,
		    struct gm_pinned_info *info)
{
	struct gm__chunk c;
	uintptr_t off;

	if (!gm__map_lookup(pc, (uintptr_t)p, &c))
		return GM_ENOTFOUND;
	off = (uintptr_t)p - (uintptr_t)c.drv;
	info->chunk = c.drv;
	info->chunk_size = c.drv_size;
	info->flags = c.arena->flags;
	info->device_ptr = c.dptr ? c.dptr + off : 0;
	return 0;
}

int gm_pinned_device_pointer(struct gm_pinned *pc, const void *p,
			     gm_cu_ptr *d)
{
	struct gm_pinned_info info;
	int err = gm_pinned_query(pc, p, &info);

	if (err)
		return err;
	if (!info.device_ptr)
		return GM_EINVAL;
	*d = info.device_ptr;
	return 0;
}

size_t gm_pinned_trim(struct gm_pinned *pc)
{
	uint64_t before = atomic_load(&pc->reserved), after;

	pthread_rwlock_wrlock(&pc->arena_lock);
	for (unsigned f = 0; f < GM__PINNED_NARENAS; f++) {
		struct gm__arena *a = atomic_load(&pc->arena[f]);

		if (!a)
			continue;
		gm__arena_ctl(a->ind, "purge", NULL, 0);
		if (atomic_load(&a->live) == 0) {
			atomic_store(&pc->arena[f], NULL);
			gm__arena_retire(pc, a);
		}
	}
	pthread_rwlock_unlock(&pc->arena_lock);
	after = atomic_load(&pc->reserved);
	return before > after ? (size_t)(before - after) : 0;
}

void gm_pinned_stats(struct gm_pinned *pc, struct gm_pinned_stats *s)
{
	memset(s, 0, sizeof(*s));
	s->in_use_bytes = atomic_load(&pc->in_use);
	s->reserved_bytes = atomic_load(&pc->reserved);
	s->cached_bytes = s->reserved_bytes > s->in_use_bytes ?
				  s->reserved_bytes - s->in_use_bytes : 0;
	s->peak_reserved_bytes = atomic_load(&pc->peak_reserved);
	s->peak_in_use_bytes = atomic_load(&pc->peak_in_use);
	s->buffers = atomic_load(&pc->buffers);
	s->chunks = atomic_load(&pc->chunks);
	s->allocs = atomic_load(&pc->allocs);
	s->frees = atomic_load(&pc->frees);
	s->driver_allocs = atomic_load(&pc->driver_allocs);
	s->driver_frees = atomic_load(&pc->driver_frees);
	s->driver_failures = atomic_load(&pc->driver_failures);
	s->merges_refused = atomic_load(&pc->merges_refused);
}
