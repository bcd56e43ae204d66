/*
 * pluggable.c - the allocator pair for torch.cuda.memory.
 * CUDAPluggableAllocator, so PyTorch can use gpumem without LD_PRELOAD:
 *
 *   a = torch.cuda.memory.CUDAPluggableAllocator(
 *           "libgpumem-preload.so", "gpumem_malloc", "gpumem_free")
 *   torch.cuda.memory.change_current_allocator(a)
 *
 * PyTorch calls gpumem_malloc for every tensor (it caches nothing on
 * top) and gpumem_free with the same size, device and stream. Memory
 * comes from the driver's stream-ordered allocator on that stream, so a
 * block freed on a stream is reused only after the work queued on it
 * (stream safety as in PyTorch's own allocator), charged against the cap
 * and reported like every other allocation. Over the cap gpumem_malloc
 * returns NULL. PyTorch (2.11, torch/csrc/cuda/CUDAPluggableAllocator.cpp)
 * does not check that NULL: the tensor is made with no memory behind it.
 * libgpumem-torch.so (pluggable_torch.cpp) wraps this pair and throws
 * instead; gpumem_describe_oom() gives it the reason, in words.
 *
 * With GPUMEM_MODE=cache the pair is served from gpumem's pool instead
 * (cache.h), on the stream PyTorch passes, with the same stream rules.
 */
#include "account.h"
#include "cache.h"
#include "hooks.h"

#include "error.h"
#include "units.h"

#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define GM_EXPORT __attribute__((visibility("default")))

GM_EXPORT void *gpumem_malloc(ssize_t size, int device, void *stream);
GM_EXPORT void gpumem_free(void *ptr, ssize_t size, int device, void *stream);
GM_EXPORT char *gpumem_describe_oom(ssize_t size, int device, char *buf,
				    size_t len);

GM_EXPORT void *gpumem_malloc(ssize_t size, int device, void *stream)
{
	struct gm_pl_dev *d;
	gm_cu_ptr p = 0;
	gm_cu_result r;
	enum gm_pl_kind kind = GM_PL_KIND_ASYNC;

	if (size <= 0 || gm__pl_init() != 0 || !(d = gm_pl_dev_get(device)))
		return NULL;
	if (gm_pl_cache_on()) {
		uint64_t addr = 0;
		int err = gm_pl_cache_alloc(d, (uint64_t)size,
					    gm_pl_cache_key((uintptr_t)stream,
							    false), &addr);

		if (err != GM_ENODEV)
			return err ? NULL : (void *)(uintptr_t)addr;
	}
	if (gm_pl_charge(d, (uint64_t)size, kind))
		return NULL;
	gm__pl_guard_enter();
	r = gm__pl_cu.mem_alloc_async ?
		    gm__pl_cu.mem_alloc_async(&p, (size_t)size,
						  (gm_cu_stream)stream) :
		    GM_CU_ERROR_NOT_SUPPORTED;
	if (r == GM_CU_ERROR_NOT_SUPPORTED && gm__pl_cu.mem_alloc) {
		kind = GM_PL_KIND_DEVICE;
		r = gm__pl_cu.mem_alloc(&p, (size_t)size);
	}
	gm__pl_guard_leave();
	if (r != GM_CU_SUCCESS) {
		gm_pl_uncharge(d, (uint64_t)size, GM_PL_KIND_ASYNC);
		if (r == GM_CU_ERROR_OUT_OF_MEMORY)
			gm_pl_note_device_oom(d, (uint64_t)size);
		return NULL;
	}
	if (kind != GM_PL_KIND_ASYNC) {
		/* Move the charge to the kind actually used. */
		atomic_fetch_sub(&d->by_kind[GM_PL_KIND_ASYNC], (uint64_t)size);
		atomic_fetch_add(&d->by_kind[kind], (uint64_t)size);
	}
	gm_pl_track(&gm__pl.ptrs, p, d, (uint64_t)size, kind);
	return (void *)(uintptr_t)p;
}

GM_EXPORT void gpumem_free(void *ptr, ssize_t size, int device, void *stream)
{
	struct gm_ptrmap_entry e = {0};
	gm_cu_ptr p = (gm_cu_ptr)(uintptr_t)ptr;

	(void)size;
	(void)device;
	if (!ptr || gm__pl_init() != 0)
		return;
	if (gm_pl_cache_free(p, false, gm_pl_cache_key((uintptr_t)stream,
							false)) !=
	    GM_ENOTFOUND)
		return;
	bool had = gm_pl_untrack(&gm__pl.ptrs, p, &e);
	gm_cu_result r = GM_CU_ERROR_NOT_INITIALIZED;

	if (!had)
		e.kind = GM_PL_KIND_ASYNC;
	gm__pl_guard_enter();
	if (e.kind == GM_PL_KIND_ASYNC && gm__pl_cu.mem_free_async)
		r = gm__pl_cu.mem_free_async(p, (gm_cu_stream)stream);
	else if (gm__pl_cu.mem_free)
		r = gm__pl_cu.mem_free(p);
	gm__pl_guard_leave();
	/* The charge goes back once the driver no longer holds it. */
	if (had && r == GM_CU_SUCCESS)
		gm_pl_release(&e);
	else if (had)
		gm_pl_restore(&gm__pl.ptrs, &e);
}

/*
 * Why a request of size bytes on device was (most likely) refused, as one
 * line in buf (len bytes, always terminated when len > 0); returns buf.
 * Read from the device's counters right after the refusal: over the cap
 * when what this process holds plus size exceeds it, refused when the
 * card failed the undersized check with GPUMEM_ON_UNDERSIZED=fail, else
 * the driver's own out-of-memory. Another thread may have freed or taken
 * memory in between, so the numbers describe, they do not prove.
 * Allocates nothing (safe to call from the allocation failure path).
 */
GM_EXPORT char *gpumem_describe_oom(ssize_t size, int device, char *buf,
				    size_t len)
{
	struct gm_pl_dev *d = NULL;
	char req[32], held[32], cap[32], total[32];
	uint64_t reserved;

	if (!buf || !len)
		return buf;
	gm_size_format(req, sizeof req, size > 0 ? (uint64_t)size : 0);
	if (size <= 0 || gm__pl_init() != 0 || !(d = gm_pl_dev_get(device))) {
		snprintf(buf, len, "gpumem: cannot allocate %s on device %d: "
			 "%s", req, device, size <= 0 ? "bad size" :
			 "no CUDA driver or no such device");
		return buf;
	}
	reserved = atomic_load_explicit(&d->reserved, memory_order_relaxed);
	gm_size_format(held, sizeof held, reserved);
	gm_size_format(cap, sizeof cap, d->cap);
	gm_size_format(total, sizeof total, d->total);
	if (d->refuse)
		snprintf(buf, len, "gpumem: CUDA out of memory. Tried to "
			 "allocate %s on device %d: the card reports %s, "
			 "less than it is sold as, and "
			 "GPUMEM_ON_UNDERSIZED=fail refuses it", req, device,
			 total);
	else if (d->cap != UINT64_MAX && reserved + (uint64_t)size > d->cap)
		snprintf(buf, len, "gpumem: CUDA out of memory. Tried to "
			 "allocate %s on device %d: over the gpumem cap of %s "
			 "(GPUMEM_LIMIT / GPUMEM_FRACTION), %s already "
			 "reserved by this process", req, device, cap, held);
	else
		snprintf(buf, len, "gpumem: CUDA out of memory. Tried to "
			 "allocate %s on device %d: the driver has no more "
			 "free memory (%s reserved by this process, device "
			 "total %s)", req, device, held, total);
	return buf;
}
