/*
 * hooks_host.c - the pinned host memory entry points: cuMemHostAlloc,
 * cuMemAllocHost_v2, cuMemFreeHost, cuMemHostGetDevicePointer_v2 and
 * cuMemHostGetFlags (the runtime's cudaMallocHost, cudaHostAlloc,
 * cudaFreeHost, cudaHostGetDevicePointer and cudaHostGetFlags reach
 * these through cuGetProcAddress).
 *
 * They are served from the pinned cache (allocator/pinned) when
 * libgpumem-pinned.so is loaded as well (LD_PRELOAD of both; gpumem run
 * does that): its functions are weak references here, resolved by the
 * dynamic linker when it is there and NULL when not. The cache is kept
 * out of this library on purpose: it carries a private jemalloc with 2.6
 * KiB of initial-exec TLS, which dlopen() cannot place (so
 * CUDAPluggableAllocator could not load this library any more).
 * GPUMEM_PINNED=off passes every call through. Pointers the cache does
 * not hold (allocated before, or with flags it does not serve) go to the
 * driver. The driver answers cuPointerGetAttribute(s) on sub-allocated
 * buffers itself (they lie inside its allocations), so that stays
 * unwrapped.
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "account.h"
#include "error.h"
#include "hooks.h"
#include "pinned.h"

#include <stdbool.h>

#pragma weak gm_pinned_alloc
#pragma weak gm_pinned_free
#pragma weak gm_pinned_query

#define GM_EXPORT __attribute__((visibility("default")))

/* The entry points are declared by cuda.h, which gpumem never includes. */
#pragma GCC diagnostic ignored "-Wmissing-prototypes"

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

typedef gm_cu_result (*host_alloc_fn)(void **, size_t, unsigned);
typedef gm_cu_result (*alloc_host_fn)(void **, size_t);
typedef gm_cu_result (*free_host_fn)(void *);
typedef gm_cu_result (*dptr_fn)(gm_cu_ptr *, void *, unsigned);
typedef gm_cu_result (*flags_fn)(unsigned *, void *);

/* A buffer from the cache; passed = true when the driver must do it. */
static gm_cu_result cached_alloc(void **pp, size_t size, unsigned flags,
				 bool *passed)
{
	struct gm_pinned *pc = gm__pl_pinned();
	gm_cu_result r = GM_CU_SUCCESS;
	int err;

	*passed = false;
	if (!pc || !pp) {
		*passed = true;
		return GM_CU_SUCCESS;
	}
	err = gm_pinned_alloc(pc, pp, size, flags, &r);
	if (err == GM_ENOTSUP)
		*passed = true;
	return err ? r : GM_CU_SUCCESS;
}

GM_EXPORT gm_cu_result cuMemHostAlloc(void **pp, size_t size, unsigned flags)
{
	host_alloc_fn fn = (host_alloc_fn)real(GM_PL_HOOK_MEM_HOST_ALLOC);
	bool passed;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	r = cached_alloc(pp, size, flags, &passed);
	return passed ? fn(pp, size, flags) : r;
}

GM_EXPORT gm_cu_result cuMemAllocHost_v2(void **pp, size_t size)
{
	alloc_host_fn fn = (alloc_host_fn)real(GM_PL_HOOK_MEM_ALLOC_HOST);
	bool passed;
	gm_cu_result r;

	if (!fn)
		return GM_CU_ERROR_NOT_INITIALIZED;
	r = cached_alloc(pp, size, 0, &passed);
	return passed ? fn(pp, size) : r;
}

GM_EXPORT gm_cu_result cuMemFreeHost(void *p)
{
	free_host_fn fn = (free_host_fn)real(GM_PL_HOOK_MEM_FREE_HOST);
	struct gm_pinned *pc = gm__pl_pinned();

	if (pc && gm_pinned_free(pc, p) == 0)
		return GM_CU_SUCCESS;
	return fn ? fn(p) : GM_CU_ERROR_NOT_INITIALIZED;
}

/* Mapped buffers: the chunk's device pointer plus the offset. */
GM_EXPORT gm_cu_result cuMemHostGetDevicePointer_v2(gm_cu_ptr *d, void *p,
						    unsigned flags)
{
	dptr_fn fn = (dptr_fn)real(GM_PL_HOOK_MEM_HOST_GET_DPTR);
	struct gm_pinned *pc = gm__pl_pinned();
	struct gm_pinned_info info;

	if (pc && d && flags == 0 && gm_pinned_query(pc, p, &info) == 0) {
		if (!info.device_ptr)
			return GM_CU_ERROR_INVALID_VALUE;
		*d = info.device_ptr;
		return GM_CU_SUCCESS;
	}
	return fn ? fn(d, p, flags) : GM_CU_ERROR_NOT_INITIALIZED;
}

/* The flags the buffer was asked with (those of its arena). */
GM_EXPORT gm_cu_result cuMemHostGetFlags(unsigned *flags, void *p)
{
	flags_fn fn = (flags_fn)real(GM_PL_HOOK_MEM_HOST_GET_FLAGS);
	struct gm_pinned *pc = gm__pl_pinned();
	struct gm_pinned_info info;

	if (pc && flags && gm_pinned_query(pc, p, &info) == 0) {
		*flags = info.flags;
		return GM_CU_SUCCESS;
	}
	return fn ? fn(flags, p) : GM_CU_ERROR_NOT_INITIALIZED;
}
