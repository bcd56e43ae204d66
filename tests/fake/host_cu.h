/*
 * host_cu.h - the driver's pinned host memory calls over plain host
 * memory (mmap), for tests and benchmarks without a GPU (host_cu.c).
 *
 * gm_fake_host_cu_fill() puts cuMemHostAlloc, cuMemFreeHost,
 * cuMemHostGetDevicePointer_v2, cuMemHostGetFlags (and cuInit,
 * cuGetErrorName stubs) into a struct gm_cu. The fake keeps every
 * allocation in a table, so it can say whether a free names the exact
 * start of one (else CUDA_ERROR_INVALID_VALUE, counted in bad_frees),
 * and counts calls. The device pointer of a mapped allocation is its
 * host address plus GM_FAKE_DEVICE_OFFSET, so a caller that returns the
 * host address instead of computing it is caught.
 */
#ifndef GM_FAKE_HOST_CU_H
#define GM_FAKE_HOST_CU_H

#include "cu.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define GM_FAKE_DEVICE_OFFSET 0x100000000000ULL

struct gm_fake_host {
	atomic_ulong allocs;     /* successful cuMemHostAlloc calls */
	atomic_ulong frees;      /* successful cuMemFreeHost calls */
	atomic_ulong bad_frees;  /* frees of addresses not allocated */
	atomic_ulong live_bytes; /* allocated and not freed */
	atomic_ulong live;       /* allocations not freed */
	atomic_long fail_next;   /* > 0: fail this many allocs from now */
	bool populate;           /* touch pages at allocation, like pinning */
	bool contiguous;         /* hand out adjacent addresses, ascending */
};

extern struct gm_fake_host gm_fake_host;

/*
 * Fill cu with the fake (other fields NULL) and reset the counters.
 * contiguous: allocations come one after the other from one reserved
 * region (never reused), so neighbouring chunks are adjacent in memory
 * and an allocator that merges across them is caught.
 */
void gm_fake_host_cu_fill(struct gm_cu *cu, bool populate, bool contiguous);

/* Whether [p, p + size) lies inside a single live allocation. */
bool gm_fake_host_within_one(const void *p, size_t size);

/* Flags the fake recorded for the allocation holding p, or -1. */
int gm_fake_host_flags(const void *p);

#endif
