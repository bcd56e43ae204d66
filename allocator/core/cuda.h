/*
 * cuda.h - the CUDA driver backend (cuda.c), through the seam cu.h only.
 *
 * Plain segments are cuMemAlloc / cuMemFree. Virtual segments reserve an
 * address range with cuMemAddressReserve and back it granule by granule
 * with cuMemCreate + cuMemMap + cuMemSetAccess; a failure part-way
 * unmaps and releases what that call mapped (nothing is left behind).
 * A caller that accounts device memory (the preload library's cap) gives
 * a charge hook: every physical granule is charged before its cuMemCreate
 * and released only after its cuMemRelease returned success.
 * Events come from a pool of cuEventCreate(DISABLE_TIMING) events
 * (PyTorch's EventPool: creating events concurrently is expensive).
 *
 * The caller has made a context current (the backend retains the
 * device's primary context and makes it current when asked to).
 * Errors: GM_ENODEV (no driver / device), GM_EDEVNOMEM, GM_EDEVICE.
 */
#ifndef GM_CORE_CUDA_H
#define GM_CORE_CUDA_H

#include "backend.h"

#include <stdbool.h>
#include <stdint.h>

struct gm_cu;
struct gm_diag;

struct gm_cuda_options {
	int device;            /* ordinal */
	bool virtual_segments; /* offer va_* ops (needs VMM support) */
	bool make_current;     /* retain + make the primary context current */
	/*
	 * Optional (both or neither): charge(arg, bytes) before each
	 * cuMemCreate of a virtual segment's granule, nonzero to refuse it
	 * (the map then fails with GM_ELIMIT, nothing left mapped);
	 * uncharge(arg, bytes) after a cuMemCreate that failed and after
	 * each cuMemRelease that succeeded (a failed release stays charged:
	 * the driver may still hold it). Called with the backend's lock
	 * held, from any thread; must not call the backend.
	 */
	int (*charge)(void *arg, uint64_t bytes);
	void (*uncharge)(void *arg, uint64_t bytes);
	void *charge_arg;
};

/*
 * Create a driver backend over an opened seam (gm_cu_open + cuInit done
 * by the caller; cu must outlive the backend). Fills total_bytes
 * (cuDeviceTotalMem) and granule_bytes (recommended granularity).
 */
int gm_cuda_backend_create(struct gm_backend **out, const struct gm_cu *cu,
			   const struct gm_cuda_options *opt,
			   struct gm_diag *diag);

#endif
