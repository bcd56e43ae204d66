/* cache.c - cache mode: the allocator core's pool per device (cache.h). */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "cache.h"

#include "backend.h"
#include "cuda.h"
#include "error.h"
#include "hooks.h"
#include "log.h"
#include "pool.h"

#include <pthread.h>
#include <stdlib.h>

/* The core's driver backend, with every segment charged to the cap
 * here and every granule of a virtual segment charged by the backend
 * itself (granule_charge, the hook of gm_cuda_options). */
struct capbe {
	struct gm_backend be;
	struct gm_backend *inner;
	struct gm_pl_dev *d;
};

static pthread_mutex_t make_lock = PTHREAD_MUTEX_INITIALIZER;
/* The seam table the pools' backends use: the real driver functions. */
static struct gm_cu pool_cu;
static bool pool_cu_ready;
static bool warned;
static bool warned_plain; /* virtual segments asked, device lacks VMM */

static struct capbe *cbe(struct gm_backend *be)
{
	return (struct capbe *)be;
}

static int b_seg_alloc(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	struct capbe *c = cbe(be);
	int err;

	if (gm_pl_reserve(c->d, size))
		return GM_ELIMIT;
	err = c->inner->ops->seg_alloc(c->inner, size, addr);
	if (err)
		gm_pl_unreserve(c->d, size);
	return err;
}

static int b_seg_free(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct capbe *c = cbe(be);
	int err = c->inner->ops->seg_free(c->inner, addr, size);

	/* A failed cuMemFree leaves the memory where it was: then it stays
	 * charged, so the cap never undercounts. */
	if (!err)
		gm_pl_unreserve(c->d, size);
	return err;
}

/* Virtual segments: the address range costs nothing; the granules
 * mapped into it are charged one by one inside the inner backend. */
static int b_va_reserve(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->va_reserve(in, size, addr);
}

/* A map that cannot fit under the cap now is refused before any granule
 * is made (the exact check is each granule's charge). */
static int b_va_map(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct capbe *c = cbe(be);
	uint64_t used = atomic_load(&c->d->reserved);

	if (used > c->d->cap || size > c->d->cap - used)
		return GM_ELIMIT;
	return c->inner->ops->va_map(c->inner, addr, size);
}

static int b_va_unmap(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->va_unmap(in, addr, size);
}

static int b_va_release(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->va_release(in, addr, size);
}

/* The inner backend's charge hook: one granule against the cap, before
 * its cuMemCreate; given back after its cuMemRelease returned. */
static int granule_charge(void *arg, uint64_t bytes)
{
	return gm_pl_reserve(arg, bytes);
}

static void granule_uncharge(void *arg, uint64_t bytes)
{
	gm_pl_unreserve(arg, bytes);
}

static int b_event_record(struct gm_backend *be, uintptr_t stream,
			  uint64_t *event)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->event_record(in, stream, event);
}

static int b_event_query(struct gm_backend *be, uint64_t event)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->event_query(in, event);
}

static int b_event_sync(struct gm_backend *be, uint64_t event)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->event_sync(in, event);
}

static void b_event_destroy(struct gm_backend *be, uint64_t event)
{
	struct gm_backend *in = cbe(be)->inner;

	in->ops->event_destroy(in, event);
}

static int b_synchronize(struct gm_backend *be)
{
	struct gm_backend *in = cbe(be)->inner;

	return in->ops->synchronize(in);
}

/* What could still be had: the device's free bytes, at most the room
 * left under the cap (so the pool's OOM report weighs the real cap). */
static int b_mem_free(struct gm_backend *be, uint64_t *free_bytes)
{
	struct capbe *c = cbe(be);
	uint64_t used = atomic_load(&c->d->reserved), room;
	int err = c->inner->ops->mem_free ?
			  c->inner->ops->mem_free(c->inner, free_bytes) :
			  GM_ENOTSUP;

	room = used >= c->d->cap ? 0 : c->d->cap - used;
	if (err || *free_bytes > room)
		*free_bytes = room;
	return 0;
}

static void b_destroy(struct gm_backend *be)
{
	struct capbe *c = cbe(be);

	c->inner->ops->destroy(c->inner);
	free(c);
}

static const struct gm_backend_ops capbe_ops = {
	.seg_alloc = b_seg_alloc,
	.seg_free = b_seg_free,
	.event_record = b_event_record,
	.event_query = b_event_query,
	.event_sync = b_event_sync,
	.event_destroy = b_event_destroy,
	.synchronize = b_synchronize,
	.mem_free = b_mem_free,
	.destroy = b_destroy,
};

static const struct gm_backend_ops capbe_ops_va = {
	.seg_alloc = b_seg_alloc,
	.seg_free = b_seg_free,
	.va_reserve = b_va_reserve,
	.va_map = b_va_map,
	.va_unmap = b_va_unmap,
	.va_release = b_va_release,
	.event_record = b_event_record,
	.event_query = b_event_query,
	.event_sync = b_event_sync,
	.event_destroy = b_event_destroy,
	.synchronize = b_synchronize,
	.mem_free = b_mem_free,
	.destroy = b_destroy,
};

/*
 * The seam table for the pools: gm__pl_cu, which gm_cu_open() filled
 * with dlsym on the driver's own handle (the real functions). A driver
 * whose exports were replaced by ours (a table pointing back at the
 * interposed symbols) is corrected from gm__pl_real[]; a pool never
 * calls a wrapper of this library.
 */
static void pool_cu_make(void)
{
	pool_cu = gm__pl_cu;
	if ((void *)pool_cu.mem_alloc ==
	    gm__pl_hook_fn[GM_PL_HOOK_MEM_ALLOC])
		*(void **)&pool_cu.mem_alloc =
			gm__pl_real[GM_PL_HOOK_MEM_ALLOC];
	if ((void *)pool_cu.mem_free == gm__pl_hook_fn[GM_PL_HOOK_MEM_FREE])
		*(void **)&pool_cu.mem_free = gm__pl_real[GM_PL_HOOK_MEM_FREE];
	if ((void *)pool_cu.mem_get_info ==
	    gm__pl_hook_fn[GM_PL_HOOK_MEM_GET_INFO])
		*(void **)&pool_cu.mem_get_info =
			gm__pl_real[GM_PL_HOOK_MEM_GET_INFO];
	if ((void *)pool_cu.mem_create == gm__pl_hook_fn[GM_PL_HOOK_MEM_CREATE])
		*(void **)&pool_cu.mem_create =
			gm__pl_real[GM_PL_HOOK_MEM_CREATE];
	if ((void *)pool_cu.mem_release ==
	    gm__pl_hook_fn[GM_PL_HOOK_MEM_RELEASE])
		*(void **)&pool_cu.mem_release =
			gm__pl_real[GM_PL_HOOK_MEM_RELEASE];
	pool_cu_ready = true;
}

/* gm__pl.release_cached: the cap is reached; give the cache back. */
static bool release_cached(struct gm_pl_dev *d)
{
	struct gm_pool *p = atomic_load(&d->pool);
	uint64_t before;

	if (!p)
		return false;
	before = gm_pool_reserved(p);
	gm__pl_guard_enter();
	gm_pool_release_cached(p);
	gm__pl_guard_leave();
	return gm_pool_reserved(p) < before;
}

bool gm_pl_cache_on(void)
{
	return gm__pl.opts.mode == GM_PL_MODE_CACHE;
}

/*
 * The driver backend of d: with virtual segments when asked
 * (gm__pl.opts.virtual_segments) and the device has virtual memory
 * management, else plain segments, warned once. Caller holds the guard.
 */
static int backend_make(struct gm_pl_dev *d, struct gm_backend **inner,
			struct gm_diag *diag)
{
	struct gm_cuda_options co = {
		.device = d->ordinal,
		.virtual_segments = gm__pl.opts.virtual_segments,
		.make_current = false, /* the caller's context is current */
		.charge = granule_charge,
		.uncharge = granule_uncharge,
		.charge_arg = d,
	};
	int err = gm_cuda_backend_create(inner, &pool_cu, &co, diag);

	if (err != GM_ENOTSUP || !co.virtual_segments)
		return err;
	if (!warned_plain)
		gm_warn("expandable_segments:True: %s; the pool uses plain "
			"segments", diag->msg);
	warned_plain = true;
	co.virtual_segments = false;
	return gm_cuda_backend_create(inner, &pool_cu, &co, diag);
}

/* Make d's pool (under make_lock). NULL, warned once, on failure. */
static struct gm_pool *pool_make(struct gm_pl_dev *d)
{
	struct gm_pool_options po = {0};
	struct gm_backend *inner = NULL;
	struct gm_pool *pool = NULL;
	struct capbe *c = NULL;
	struct gm_diag diag;
	int err;

	if (!pool_cu_ready)
		pool_cu_make();
	gm__pl_guard_enter();
	err = backend_make(d, &inner, &diag);
	if (!err && !pool_cu.ctx_synchronize)
		err = gm_diag_set(&diag, GM_ENODEV, "the driver lacks "
				  "cuCtxSynchronize");
	if (!err) {
		c = calloc(1, sizeof(*c));
		err = c ? 0 : gm_diag_set(&diag, GM_ENOMEM, "out of host "
					  "memory");
	}
	if (!err) {
		c->be = *inner;
		po.virtual_segments = inner->ops->va_map != NULL;
		c->be.ops = po.virtual_segments ? &capbe_ops_va : &capbe_ops;
		c->inner = inner;
		c->d = d;
		/* The pool sees the capped device; the cap itself is
		 * enforced by b_seg_alloc (the pool has none). */
		po.device_total_bytes = d->cap < d->total ? d->cap : d->total;
		err = gm_pool_create(&pool, &c->be, &po, &diag);
	}
	gm__pl_guard_leave();
	if (err) {
		if (c)
			free(c);
		if (inner)
			inner->ops->destroy(inner);
		if (!warned)
			gm_warn("GPUMEM_MODE=cache: device %d: %s; passing "
				"allocations through", d->ordinal, diag.msg);
		warned = true;
		return NULL;
	}
	gm__pl.release_cached = release_cached;
	return pool;
}

struct gm_pool *gm_pl_cache_pool(struct gm_pl_dev *d)
{
	struct gm_pool *p = atomic_load_explicit(&d->pool,
						 memory_order_acquire);

	if (p || !gm_pl_cache_on())
		return p;
	pthread_mutex_lock(&make_lock);
	p = atomic_load_explicit(&d->pool, memory_order_relaxed);
	if (!p && !warned) {
		p = pool_make(d);
		atomic_store_explicit(&d->pool, p, memory_order_release);
	}
	pthread_mutex_unlock(&make_lock);
	return p;
}

uint64_t gm_pl_cache_servable(struct gm_pl_dev *d, uint64_t free_bytes)
{
	struct gm_pool *p = gm_pl_cache_pool(d);

	return p ? gm_pool_servable(p, free_bytes) : free_bytes;
}

uintptr_t gm_pl_cache_key(uintptr_t stream, bool per_thread)
{
	if (stream == GM_PL_STREAM_PER_THREAD || (per_thread && !stream))
		return GM_PL_STREAM_PER_THREAD;
	if (stream == GM_PL_SYNC_KEY) /* CU_STREAM_LEGACY */
		return 0;
	return stream;
}

int gm_pl_cache_alloc(struct gm_pl_dev *d, uint64_t size, uintptr_t key,
		      uint64_t *addr)
{
	struct gm_pool *p = gm_pl_cache_pool(d);
	uint64_t base, bsize = 0;
	int err;

	*addr = 0;
	if (!p)
		return GM_ENODEV;
	/* Per-thread default streams differ per thread, so no arena can
	 * stand for them: their blocks come from the idle-only arena and
	 * their frees wait for the freeing thread's stream (cache.h). */
	if (key == GM_PL_STREAM_PER_THREAD)
		key = GM_PL_SYNC_KEY;
	gm__pl_guard_enter();
	err = gm_pool_alloc(p, size, key, addr);
	if (!err)
		err = gm_pool_lookup(p, *addr, &base, &bsize);
	gm__pl_guard_leave();
	if (!err) {
		gm_pl_use(d, bsize, size);
		return 0;
	}
	if (err == GM_ELIMIT)
		gm_pl_note_cap_oom(d, size);
	else if (err == GM_EDEVNOMEM)
		gm_pl_note_device_oom(d, size);
	return err;
}

/* The pool and device that own addr; NULL if none. */
static struct gm_pool *owner(uint64_t addr, struct gm_pl_dev **dev,
			     uint64_t *base, uint64_t *size)
{
	for (int i = 0; i < GM_PL_MAX_DEVICES; i++) {
		struct gm_pl_dev *d = &gm__pl.dev[i];
		struct gm_pool *p;

		if (!atomic_load_explicit(&d->ready, memory_order_acquire))
			continue;
		p = atomic_load_explicit(&d->pool, memory_order_acquire);
		if (p && gm_pool_lookup(p, addr, base, size) == 0) {
			*dev = d;
			return p;
		}
	}
	return NULL;
}

int gm_pl_cache_free(uint64_t addr, bool sync, uintptr_t key)
{
	struct gm_pl_dev *d = NULL;
	uint64_t base = 0, size = 0;
	struct gm_pool *p;
	int err;

	if (!addr || !gm_pl_cache_on())
		return GM_ENOTFOUND;
	gm__pl_guard_enter();
	p = owner(addr, &d, &base, &size);
	if (!p) {
		gm__pl_guard_leave();
		return GM_ENOTFOUND;
	}
	if (base != addr) {
		gm__pl_guard_leave();
		return GM_EINVAL;
	}
	if (sync) {
		/* cuMemFree is synchronizing: any stream may still use the
		 * block, so wait for the device before it can be reused. */
		pool_cu.ctx_synchronize();
	} else {
		/* A stream-ordered free on another stream than the block's:
		 * not reused before that stream's work is done (the pool
		 * ignores a use on the block's own stream). */
		err = gm_pool_record_stream(p, addr, key);
		if (err)
			pool_cu.ctx_synchronize();
	}
	err = gm_pool_free(p, addr);
	gm__pl_guard_leave();
	if (!err)
		gm_pl_unuse(d, size);
	return err;
}
