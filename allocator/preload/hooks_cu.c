/*
 * hooks_cu.c - the exported driver entry points (see hooks.h).
 *
 * Each wrapper: find the device, charge the request against the cap
 * (account.h) before the driver sees it, call the real function, then
 * record the pointer or give the charge back. Over the cap the answer is
 * CUDA_ERROR_OUT_OF_MEMORY, the driver's own code, so the runtime and the
 * frameworks raise their usual out-of-memory errors. Frees are untracked
 * before the real free, their charge released after it (see
 * gm_pl_untrack). No logging, no host malloc.
 *
 * In cache mode (cache.h) the device allocations (cuMemAlloc,
 * cuMemAllocPitch, cuMemAllocAsync, cuMemAllocFromPoolAsync) are served
 * from gpumem's pool instead and their frees return to it (the pool's
 * bookkeeping does use the C library's malloc); a free of an address
 * the pool does not own goes on to the driver as above. cuMemCreate and
 * cuMemAllocManaged pass through in both modes.
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "account.h"
#include "cache.h"
#include "error.h"
#include "hooks.h"

#include <stddef.h>
#include <stdint.h>

#define GM_EXPORT __attribute__((visibility("default")))

/* The entry points are declared by cuda.h, which gpumem never includes. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

typedef struct gm_cu_pool_s *gm_cu_pool; /* CUmemoryPool */

void *gm__pl_real[GM_PL_N_HOOKS];

/* The real function of hook id (resolving the driver on first use). */
static void *real(enum gm_pl_hook id)
{
	void *fn;

	gm__pl_start(); /* this call may come before our constructor */
	fn = __atomic_load_n(&gm__pl_real[id], __ATOMIC_ACQUIRE);
	if (fn)
		return fn;
	gm__pl_init();
	return __atomic_load_n(&gm__pl_real[id], __ATOMIC_ACQUIRE);
}

/* The device of the calling thread's context, set up; NULL if none. */
static struct gm_pl_dev *current_dev(void)
{
	gm_cu_device d;

	if (gm__pl_init() != 0 || !gm__pl_cu.ctx_get_device ||
	    gm__pl_cu.ctx_get_device(&d) != GM_CU_SUCCESS)
		return NULL;
	return gm_pl_dev_get(d);
}

/* After the driver answered an allocation that was charged. */
static gm_cu_result settle(struct gm_pl_dev *d, struct gm_ptrmap *m,
			   gm_cu_result r, uint64_t key, uint64_t size,
			   enum gm_pl_kind kind)
{
	gm__pl_tls.seen_alloc++;
	if (r == GM_CU_SUCCESS) {
		gm_pl_track(m, key, d, size, kind);
		return r;
	}
	gm_pl_uncharge(d, size, kind);
	if (r == GM_CU_ERROR_OUT_OF_MEMORY)
		gm_pl_note_device_oom(d, size);
	return r;
}

/*
 * Cache mode: serve an allocation of size bytes on d from the pool (arena
 * key, cache.h). Returns true with *r the answer when the pool took the
 * call, false when it must pass through (no pool could be made).
 */
static bool cache_alloc(struct gm_pl_dev *d, gm_cu_ptr *p, size_t size,
			uintptr_t key, gm_cu_result *r)
{
	uint64_t addr = 0;
	int err;

	if (!gm_pl_cache_on())
		return false;
	if (!p || !size) {
		*r = GM_CU_ERROR_INVALID_VALUE;
		return true;
	}
	err = gm_pl_cache_alloc(d, size, key, &addr);
	if (err == GM_ENODEV)
		return false;
	gm__pl_tls.seen_alloc++;
	switch (err) {
	case 0:
		*p = addr;
		*r = GM_CU_SUCCESS;
		break;
	case GM_EINVAL:
		*r = GM_CU_ERROR_INVALID_VALUE;
		break;
	case GM_ELIMIT:
	case GM_EDEVNOMEM:
	case GM_ENOMEM:
		*r = GM_CU_ERROR_OUT_OF_MEMORY;
		break;
	default:
		*r = GM_CU_ERROR_UNKNOWN;
	}
	return true;
}

/*
 * Cache mode: free p if the pool owns it (sync: cuMemFree; else the
 * stream-ordered free's arena key). True with *r set when it did.
 */
static bool cache_free(gm_cu_ptr p, bool sync, uintptr_t key,
		       gm_cu_result *r)
{
	int err;

	if (gm__pl_tls.guard || !gm_pl_cache_on())
		return false;
	err = gm_pl_cache_free(p, sync, key);
	if (err == GM_ENOTFOUND)
		return false;
	gm__pl_tls.seen_free++;
	*r = err ? GM_CU_ERROR_INVALID_VALUE : GM_CU_SUCCESS;
	return true;
}

/* Untrack key, free it with the real function, then release its charge
 * (the driver no longer holds it), or put it back when the free failed. */
#define GM__FREE(map, key, call)                                           \
	do {                                                               \
		struct gm_ptrmap_entry e_;                                 \
		bool had_ = false;                                         \
		gm_cu_result r_;                                           \
		if (!gm__pl_tls.guard) {                                   \
			gm__pl_tls.seen_free++;                            \
			had_ = gm_pl_untrack((map), (key), &e_);           \
		}                                                          \
		r_ = (call);                                               \
		if (had_ && r_ == GM_CU_SUCCESS)                           \
			gm_pl_release(&e_);                                \
		else if (had_)                                             \
			gm_pl_restore((map), &e_);                         \
		return r_;                                                 \
	} while (0)

typedef gm_cu_result (*alloc_fn)(gm_cu_ptr *, size_t);

GM_EXPORT gm_cu_result cuMemAlloc_v2(gm_cu_ptr *p, size_t size)
{
	alloc_fn fn = (alloc_fn)real(GM_PL_HOOK_MEM_ALLOC);
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (gm__pl_tls.guard || !(d = current_dev()))
		return fn(p, size);
	if (cache_alloc(d, p, size, GM_PL_SYNC_KEY, &r))
		return r;
	if (gm_pl_charge(d, size, GM_PL_KIND_DEVICE))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(p, size);
	return settle(d, &gm__pl.ptrs, r, p ? *p : 0, size, GM_PL_KIND_DEVICE);
}

GM_EXPORT gm_cu_result cuMemAllocManaged(gm_cu_ptr *p, size_t size,
					 unsigned flags)
{
	gm_cu_result (*fn)(gm_cu_ptr *, size_t, unsigned) =
		(gm_cu_result(*)(gm_cu_ptr *, size_t, unsigned))real(
			GM_PL_HOOK_MEM_ALLOC_MANAGED);
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (gm__pl_tls.guard || !(d = current_dev()))
		return fn(p, size, flags);
	if (gm_pl_charge(d, size, GM_PL_KIND_MANAGED))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(p, size, flags);
	return settle(d, &gm__pl.ptrs, r, p ? *p : 0, size, GM_PL_KIND_MANAGED);
}

/*
 * The pitch is chosen by the driver, so the size is known only after the
 * call. The width rounded up to 512 B (an estimate of the pitch; its
 * alignment is the driver's) is charged before the call, so that what the
 * driver holds stays under the cap, then the charge is corrected to the
 * pitch the driver chose (freed again if a larger pitch does not fit).
 */
GM_EXPORT gm_cu_result cuMemAllocPitch_v2(gm_cu_ptr *p, size_t *pitch,
					  size_t width, size_t height,
					  unsigned elem)
{
	gm_cu_result (*fn)(gm_cu_ptr *, size_t *, size_t, size_t, unsigned) =
		(gm_cu_result(*)(gm_cu_ptr *, size_t *, size_t, size_t,
				 unsigned))real(GM_PL_HOOK_MEM_ALLOC_PITCH);
	gm_cu_result (*rfree)(gm_cu_ptr) =
		(gm_cu_result(*)(gm_cu_ptr))real(GM_PL_HOOK_MEM_FREE);
	struct gm_pl_dev *d;
	gm_cu_result r;
	uint64_t guess, size;
	size_t w = (width + 511) & ~(size_t)511;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (gm__pl_tls.guard || !(d = current_dev()))
		return fn(p, pitch, width, height, elem);
	if (!p || !pitch || !width || !height || w < width ||
	    height > SIZE_MAX / w)
		return GM_CU_ERROR_INVALID_VALUE;
	if (gm_pl_cache_on()) {
		/* The pool picks the pitch: the width rounded up to 512 B,
		 * the pool's block alignment. Element sizes as the driver
		 * accepts them (4, 8 or 16 bytes). */
		if (elem != 4 && elem != 8 && elem != 16)
			return GM_CU_ERROR_INVALID_VALUE;
		if (cache_alloc(d, p, w * height, GM_PL_SYNC_KEY, &r)) {
			if (r == GM_CU_SUCCESS)
				*pitch = w;
			return r;
		}
	}
	guess = (uint64_t)w * height;
	if (gm_pl_charge(d, guess, GM_PL_KIND_DEVICE))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(p, pitch, width, height, elem);
	if (r != GM_CU_SUCCESS)
		return settle(d, &gm__pl.ptrs, r, 0, guess, GM_PL_KIND_DEVICE);
	gm__pl_tls.seen_alloc++;
	size = (uint64_t)*pitch * height;
	if (gm_pl_recharge(d, guess, size, GM_PL_KIND_DEVICE)) {
		gm_pl_uncharge(d, guess, GM_PL_KIND_DEVICE);
		gm_pl_note_cap_oom(d, size);
		if (rfree)
			rfree(*p);
		*p = 0;
		return GM_CU_ERROR_OUT_OF_MEMORY;
	}
	gm_pl_track(&gm__pl.ptrs, *p, d, size, GM_PL_KIND_DEVICE);
	return r;
}

GM_EXPORT gm_cu_result cuMemFree_v2(gm_cu_ptr p)
{
	gm_cu_result (*fn)(gm_cu_ptr) =
		(gm_cu_result(*)(gm_cu_ptr))real(GM_PL_HOOK_MEM_FREE);

	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (cache_free(p, true, 0, &r))
		return r;
	GM__FREE(&gm__pl.ptrs, p, fn(p));
}

/* ==== Virtual memory management: charged by physical handle ==== */

GM_EXPORT gm_cu_result cuMemCreate(gm_cu_handle *h, size_t size,
				   const struct gm_cu_alloc_prop *prop,
				   unsigned long long flags)
{
	gm_cu_result (*fn)(gm_cu_handle *, size_t,
			   const struct gm_cu_alloc_prop *, unsigned long long) =
		(gm_cu_result(*)(gm_cu_handle *, size_t,
				 const struct gm_cu_alloc_prop *,
				 unsigned long long))real(GM_PL_HOOK_MEM_CREATE);
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	/* Only device memory counts; host and NUMA locations pass. */
	if (gm__pl_tls.guard || !prop ||
	    prop->location.type != GM_CU_MEM_LOCATION_DEVICE ||
	    gm__pl_init() != 0 || !(d = gm_pl_dev_get(prop->location.id)))
		return fn(h, size, prop, flags);
	if (gm_pl_charge(d, size, GM_PL_KIND_VMM))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(h, size, prop, flags);
	/* The card is full but the pool caches memory: give it back and
	 * try once more (cache mode; PyTorch's expandable segments). */
	if (r == GM_CU_ERROR_OUT_OF_MEMORY && gm__pl.release_cached &&
	    gm__pl.release_cached(d))
		r = fn(h, size, prop, flags);
	return settle(d, &gm__pl.handles, r, h ? *h : 0, size, GM_PL_KIND_VMM);
}

GM_EXPORT gm_cu_result cuMemRelease(gm_cu_handle h)
{
	gm_cu_result (*fn)(gm_cu_handle) =
		(gm_cu_result(*)(gm_cu_handle))real(GM_PL_HOOK_MEM_RELEASE);

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	GM__FREE(&gm__pl.handles, h, fn(h));
}

/* ==== Stream-ordered allocation ==== */

typedef gm_cu_result (*async_fn)(gm_cu_ptr *, size_t, gm_cu_stream);
typedef gm_cu_result (*pool_fn)(gm_cu_ptr *, size_t, gm_cu_pool,
				gm_cu_stream);
typedef gm_cu_result (*free_async_fn)(gm_cu_ptr, gm_cu_stream);

static gm_cu_result alloc_async(async_fn fn, gm_cu_ptr *p, size_t size,
				gm_cu_stream s, bool ptsz)
{
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (gm__pl_tls.guard || !(d = current_dev()))
		return fn(p, size, s);
	if (cache_alloc(d, p, size, gm_pl_cache_key((uintptr_t)s, ptsz), &r))
		return r;
	if (gm_pl_charge(d, size, GM_PL_KIND_ASYNC))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(p, size, s);
	return settle(d, &gm__pl.ptrs, r, p ? *p : 0, size, GM_PL_KIND_ASYNC);
}

static gm_cu_result alloc_pool(pool_fn fn, gm_cu_ptr *p, size_t size,
			       gm_cu_pool pool, gm_cu_stream s, bool ptsz)
{
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (gm__pl_tls.guard || !(d = current_dev()))
		return fn(p, size, pool, s);
	/* Cache mode serves these from gpumem's pool too: the driver
	 * pool's attributes (IPC export, release threshold) do not apply. */
	if (cache_alloc(d, p, size, gm_pl_cache_key((uintptr_t)s, ptsz), &r))
		return r;
	if (gm_pl_charge(d, size, GM_PL_KIND_ASYNC))
		return GM_CU_ERROR_OUT_OF_MEMORY;
	r = fn(p, size, pool, s);
	return settle(d, &gm__pl.ptrs, r, p ? *p : 0, size, GM_PL_KIND_ASYNC);
}

static gm_cu_result free_async(free_async_fn fn, gm_cu_ptr p, gm_cu_stream s,
				bool ptsz)
{
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	if (cache_free(p, false, gm_pl_cache_key((uintptr_t)s, ptsz), &r))
		return r;
	GM__FREE(&gm__pl.ptrs, p, fn(p, s));
}

GM_EXPORT gm_cu_result cuMemAllocAsync(gm_cu_ptr *p, size_t size,
				       gm_cu_stream s)
{
	return alloc_async((async_fn)real(GM_PL_HOOK_MEM_ALLOC_ASYNC), p,
			   size, s, false);
}

GM_EXPORT gm_cu_result cuMemAllocAsync_ptsz(gm_cu_ptr *p, size_t size,
					    gm_cu_stream s)
{
	return alloc_async((async_fn)real(GM_PL_HOOK_MEM_ALLOC_ASYNC_PTSZ), p,
			   size, s, true);
}

GM_EXPORT gm_cu_result cuMemAllocFromPoolAsync(gm_cu_ptr *p, size_t size,
					       gm_cu_pool pool,
					       gm_cu_stream s)
{
	return alloc_pool((pool_fn)real(GM_PL_HOOK_MEM_ALLOC_POOL), p, size,
			  pool, s, false);
}

GM_EXPORT gm_cu_result cuMemAllocFromPoolAsync_ptsz(gm_cu_ptr *p,
						    size_t size,
						    gm_cu_pool pool,
						    gm_cu_stream s)
{
	return alloc_pool((pool_fn)real(GM_PL_HOOK_MEM_ALLOC_POOL_PTSZ), p,
			  size, pool, s, true);
}

GM_EXPORT gm_cu_result cuMemFreeAsync(gm_cu_ptr p, gm_cu_stream s)
{
	return free_async((free_async_fn)real(GM_PL_HOOK_MEM_FREE_ASYNC), p,
			  s, false);
}

GM_EXPORT gm_cu_result cuMemFreeAsync_ptsz(gm_cu_ptr p, gm_cu_stream s)
{
	return free_async(
		(free_async_fn)real(GM_PL_HOOK_MEM_FREE_ASYNC_PTSZ), p, s, true);
}

/* ==== What the device looks like: total = min(cap, physical) ==== */

GM_EXPORT gm_cu_result cuMemGetInfo_v2(size_t *free_bytes,
				       size_t *total_bytes)
{
	gm_cu_result (*fn)(size_t *, size_t *) =
		(gm_cu_result(*)(size_t *, size_t *))real(
			GM_PL_HOOK_MEM_GET_INFO);
	size_t f = 0, t = 0;
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	/* Callers pass NULL for what they do not want (OptiX does). */
	r = fn(&f, &t);
	if (r == GM_CU_SUCCESS && !gm__pl_tls.guard && (d = current_dev())) {
		uint64_t f64 = f, t64 = t;
		gm_pl_clamp_info(d, &f64, &t64);
		f64 = gm_pl_cache_servable(d, f64);
		f = (size_t)f64;
		t = (size_t)t64;
		gm__pl_tls.seen_info++;
	}
	if (free_bytes)
		*free_bytes = f;
	if (total_bytes)
		*total_bytes = t;
	return r;
}

GM_EXPORT gm_cu_result cuDeviceTotalMem_v2(size_t *bytes, gm_cu_device dev)
{
	gm_cu_result (*fn)(size_t *, gm_cu_device) =
		(gm_cu_result(*)(size_t *, gm_cu_device))real(
			GM_PL_HOOK_DEVICE_TOTAL_MEM);
	struct gm_pl_dev *d;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	r = fn(bytes, dev);
	if (r == GM_CU_SUCCESS && bytes && !gm__pl_tls.guard &&
	    gm__pl_init() == 0 && (d = gm_pl_dev_get(dev)) && *bytes > d->cap)
		*bytes = d->cap;
	return r;
}

/* ==== cuGetProcAddress: hand back the wrapper of the right variant ==== */

static void substitute(const char *symbol, void **pfn, int version,
		       uint64_t flags)
{
	const char *variant;
	int id;

	if (!pfn || !*pfn || gm__pl_tls.guard)
		return;
	variant = gm_pl_proc_variant(symbol, version, flags);
	id = variant ? gm_pl_hook_find(variant) : -1;
	if (id < 0)
		return;
	/* A driver whose table points at its exported symbols would hand
	 * back our own wrapper (we interpose them): never call that the
	 * real function. */
	if (*pfn != gm__pl_hook_fn[id] &&
	    !__atomic_load_n(&gm__pl_real[id], __ATOMIC_ACQUIRE))
		__atomic_store_n(&gm__pl_real[id], *pfn, __ATOMIC_RELEASE);
	*pfn = gm__pl_hook_fn[id];
}

GM_EXPORT gm_cu_result cuGetProcAddress(const char *symbol, void **pfn,
					int version, unsigned long long flags)
{
	gm_cu_result (*fn)(const char *, void **, int, unsigned long long) =
		(gm_cu_result(*)(const char *, void **, int,
				 unsigned long long))real(GM_PL_HOOK_GET_PROC);
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	r = fn(symbol, pfn, version, flags);
	if (r == GM_CU_SUCCESS)
		substitute(symbol, pfn, version, flags);
	return r;
}

GM_EXPORT gm_cu_result cuGetProcAddress_v2(const char *symbol, void **pfn,
					   int version,
					   unsigned long long flags,
					   int *status)
{
	gm_cu_result (*fn)(const char *, void **, int, unsigned long long,
			   int *) =
		(gm_cu_result(*)(const char *, void **, int,
				 unsigned long long,
				 int *))real(GM_PL_HOOK_GET_PROC_V2);
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	r = fn(symbol, pfn, version, flags, status);
	if (r == GM_CU_SUCCESS)
		substitute(symbol, pfn, version, flags);
	return r;
}

/* The pinned host memory entry points (hooks_host.c). */
gm_cu_result cuMemHostAlloc(void **pp, size_t size, unsigned flags);
gm_cu_result cuMemAllocHost_v2(void **pp, size_t size);
gm_cu_result cuMemFreeHost(void *p);
gm_cu_result cuMemHostGetDevicePointer_v2(gm_cu_ptr *d, void *p,
					  unsigned flags);
gm_cu_result cuMemHostGetFlags(unsigned *flags, void *p);

#define GM__PL_HOOK_FN(id, sym) (void *)sym,
void *const gm__pl_hook_fn[GM_PL_N_HOOKS] = {GM_PL_HOOKS(GM__PL_HOOK_FN)};
#undef GM__PL_HOOK_FN
