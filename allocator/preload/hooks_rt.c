/*
 * hooks_rt.c - the exported CUDA runtime entry points, for programs
 * linked to the shared libcudart.
 *
 * The runtime reaches the driver through cuGetProcAddress, so its
 * allocations normally arrive at the driver wrappers (hooks_cu.c), which
 * charge them. These wrappers only make sure nothing slips past: each
 * calls the real runtime function and, if no driver wrapper saw the call
 * on this thread (gm__pl_tls.seen_*), accounts it here after the fact
 * (over the cap: free it again and answer cudaErrorMemoryAllocation). So
 * a call is never counted twice. Programs with the static cudart never
 * reach these (their runtime is inside the executable).
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "account.h"
#include "cache.h"
#include "hooks.h"

#include <dlfcn.h>
#include <stddef.h>
#include <stdint.h>

#define GM_EXPORT __attribute__((visibility("default")))

/* The entry points are declared by cuda_runtime.h, never included. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

enum {
	GM_RT_SUCCESS = 0,
	GM_RT_ERROR_MEMORY_ALLOCATION = 2, /* cudaErrorMemoryAllocation */
	GM_RT_ERROR_INITIALIZATION = 3,    /* cudaErrorInitializationError */
};

typedef int gm_rt_error; /* cudaError_t */

#define GM_PL_RT(XX)                                   \
	XX(MALLOC, cudaMalloc)                         \
	XX(FREE, cudaFree)                             \
	XX(MALLOC_MANAGED, cudaMallocManaged)          \
	XX(MALLOC_PITCH, cudaMallocPitch)              \
	XX(MALLOC_ASYNC, cudaMallocAsync)              \
	XX(MALLOC_ASYNC_PTSZ, cudaMallocAsync_ptsz)    \
	XX(MALLOC_POOL, cudaMallocFromPoolAsync)       \
	XX(MALLOC_POOL_PTSZ, cudaMallocFromPoolAsync_ptsz) \
	XX(FREE_ASYNC, cudaFreeAsync)                  \
	XX(FREE_ASYNC_PTSZ, cudaFreeAsync_ptsz)        \
	XX(MEM_GET_INFO, cudaMemGetInfo)

enum {
#define GM__RT_ENUM(id, sym) RT_##id,
	GM_PL_RT(GM__RT_ENUM)
#undef GM__RT_ENUM
	RT_N
};

static const char *const rt_names[RT_N] = {
#define GM__RT_NAME(id, sym) #sym,
	GM_PL_RT(GM__RT_NAME)
#undef GM__RT_NAME
};

static void *rt_real_fn[RT_N];

/* The next definition of runtime function id after this library. */
static void *rt_real(int id)
{
	void *fn;

	gm__pl_start(); /* this call may come before our constructor */
	fn = __atomic_load_n(&rt_real_fn[id], __ATOMIC_ACQUIRE);
	if (fn)
		return fn;
	if (gm__pl_resolve_dl() != 0)
		return NULL;
	gm__pl_guard_enter();
	fn = gm__pl_real_dlsym(RTLD_NEXT, rt_names[id]);
	gm__pl_guard_leave();
	__atomic_store_n(&rt_real_fn[id], fn, __ATOMIC_RELEASE);
	return fn;
}

static struct gm_pl_dev *current_dev(void)
{
	gm_cu_device d;

	if (gm__pl_init() != 0 || !gm__pl_cu.ctx_get_device ||
	    gm__pl_cu.ctx_get_device(&d) != GM_CU_SUCCESS)
		return NULL;
	return gm_pl_dev_get(d);
}

/*
 * Account an allocation no driver wrapper saw. Returns false when it
 * goes over the cap (the caller frees it and answers out of memory).
 */
static bool late_charge(void *p, uint64_t size, enum gm_pl_kind kind)
{
	struct gm_pl_dev *d = current_dev();

	if (!d || !p)
		return true;
	if (gm_pl_charge(d, size, kind))
		return false;
	gm_pl_track(&gm__pl.ptrs, (uint64_t)(uintptr_t)p, d, size, kind);
	return true;
}

static void late_free(void *p)
{
	struct gm_ptrmap_entry e;

	/* Called after the runtime's free returned: release at once. */
	if (p && gm_pl_untrack(&gm__pl.ptrs, (uint64_t)(uintptr_t)p, &e))
		gm_pl_release(&e);
}

/* Call fn; account afterwards unless a driver wrapper did. */
#define GM__RT_ALLOC(id, type, pp, size, kind, freecall, ...)              \
	do {                                                               \
		type fn_ = (type)rt_real(id);                              \
		unsigned seen_ = gm__pl_tls.seen_alloc;                    \
		gm_rt_error r_;                                            \
		if (!fn_)                                                  \
			return GM_RT_ERROR_INITIALIZATION;                 \
		r_ = fn_(__VA_ARGS__);                                     \
		if (r_ != GM_RT_SUCCESS || gm__pl_tls.guard ||             \
		    seen_ != gm__pl_tls.seen_alloc || !(pp))               \
			return r_;                                         \
		if (late_charge(*(pp), (size), (kind)))                    \
			return r_;                                         \
		freecall;                                                  \
		*(pp) = NULL;                                              \
		return GM_RT_ERROR_MEMORY_ALLOCATION;                      \
	} while (0)

#define GM__RT_FREE(id, type, p, ...)                                      \
	do {                                                               \
		type fn_ = (type)rt_real(id);                              \
		unsigned seen_ = gm__pl_tls.seen_free;                     \
		gm_rt_error r_;                                            \
		if (!fn_)                                                  \
			return GM_RT_ERROR_INITIALIZATION;                 \
		r_ = fn_(__VA_ARGS__);                                     \
		if (r_ == GM_RT_SUCCESS && !gm__pl_tls.guard &&            \
		    seen_ == gm__pl_tls.seen_free)                         \
			late_free(p);                                      \
		return r_;                                                 \
	} while (0)

typedef gm_rt_error (*rt_free_fn)(void *);
typedef gm_rt_error (*rt_malloc_fn)(void **, size_t);
typedef gm_rt_error (*rt_managed_fn)(void **, size_t, unsigned);
typedef gm_rt_error (*rt_pitch_fn)(void **, size_t *, size_t, size_t);
typedef gm_rt_error (*rt_async_fn)(void **, size_t, void *);
typedef gm_rt_error (*rt_pool_fn)(void **, size_t, void *, void *);
typedef gm_rt_error (*rt_free_async_fn)(void *, void *);

static void free_now(void *p)
{
	rt_free_fn f = (rt_free_fn)rt_real(RT_FREE);

	if (f)
		f(p);
}

GM_EXPORT gm_rt_error cudaMalloc(void **p, size_t size)
{
	GM__RT_ALLOC(RT_MALLOC, rt_malloc_fn, p, size,
		     GM_PL_KIND_DEVICE, free_now(*p), p, size);
}

GM_EXPORT gm_rt_error cudaMallocManaged(void **p, size_t size,
					unsigned flags)
{
	GM__RT_ALLOC(RT_MALLOC_MANAGED,
		     rt_managed_fn, p, size,
		     GM_PL_KIND_MANAGED, free_now(*p), p, size, flags);
}

GM_EXPORT gm_rt_error cudaMallocPitch(void **p, size_t *pitch, size_t width,
				      size_t height)
{
	GM__RT_ALLOC(RT_MALLOC_PITCH,
		     rt_pitch_fn, p,
		     (uint64_t)*pitch * height, GM_PL_KIND_DEVICE,
		     free_now(*p), p, pitch, width, height);
}

GM_EXPORT gm_rt_error cudaMallocAsync(void **p, size_t size, void *stream)
{
	GM__RT_ALLOC(RT_MALLOC_ASYNC,
		     rt_async_fn, p, size,
		     GM_PL_KIND_ASYNC, free_now(*p), p, size, stream);
}

GM_EXPORT gm_rt_error cudaMallocAsync_ptsz(void **p, size_t size,
					   void *stream)
{
	GM__RT_ALLOC(RT_MALLOC_ASYNC_PTSZ,
		     rt_async_fn, p, size,
		     GM_PL_KIND_ASYNC, free_now(*p), p, size, stream);
}

GM_EXPORT gm_rt_error cudaMallocFromPoolAsync(void **p, size_t size,
					      void *pool, void *stream)
{
	GM__RT_ALLOC(RT_MALLOC_POOL,
		     rt_pool_fn, p, size,
		     GM_PL_KIND_ASYNC, free_now(*p), p, size, pool, stream);
}

GM_EXPORT gm_rt_error cudaMallocFromPoolAsync_ptsz(void **p, size_t size,
						   void *pool, void *stream)
{
	GM__RT_ALLOC(RT_MALLOC_POOL_PTSZ,
		     rt_pool_fn, p, size,
		     GM_PL_KIND_ASYNC, free_now(*p), p, size, pool, stream);
}

GM_EXPORT gm_rt_error cudaFree(void *p)
{
	GM__RT_FREE(RT_FREE, rt_free_fn, p, p);
}

GM_EXPORT gm_rt_error cudaFreeAsync(void *p, void *stream)
{
	GM__RT_FREE(RT_FREE_ASYNC, rt_free_async_fn, p, p, stream);
}

GM_EXPORT gm_rt_error cudaFreeAsync_ptsz(void *p, void *stream)
{
	GM__RT_FREE(RT_FREE_ASYNC_PTSZ, rt_free_async_fn, p, p, stream);
}

GM_EXPORT gm_rt_error cudaMemGetInfo(size_t *free_bytes, size_t *total_bytes)
{
	gm_rt_error (*fn)(size_t *, size_t *) =
		(gm_rt_error(*)(size_t *, size_t *))rt_real(RT_MEM_GET_INFO);
	unsigned seen = gm__pl_tls.seen_info;
	struct gm_pl_dev *d;
	gm_rt_error r;

	if (!fn)
		return GM_RT_ERROR_INITIALIZATION;
	r = fn(free_bytes, total_bytes);
	if (r != GM_RT_SUCCESS || gm__pl_tls.guard ||
	    seen != gm__pl_tls.seen_info || !free_bytes || !total_bytes ||
	    !(d = current_dev()))
		return r;
	uint64_t f = *free_bytes, t = *total_bytes;
	gm_pl_clamp_info(d, &f, &t);
	f = gm_pl_cache_servable(d, f);
	*free_bytes = (size_t)f;
	*total_bytes = (size_t)t;
	return r;
}
