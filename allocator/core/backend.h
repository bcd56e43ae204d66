/*
 * backend.h - where the allocator core gets device memory (one narrow
 * interface, two implementations: sim.c and cuda.c).
 *
 * A backend hands out address ranges ("segments") and stream events. The
 * core never touches the memory itself, so a backend that only does
 * address arithmetic (gm_sim_backend) simulates any card on any host.
 *
 * Units: bytes; device addresses are uint64_t; streams are opaque
 * uintptr_t values (a CUstream / cudaStream_t cast to an integer; 0 is the
 * legacy default stream); events are opaque uint64_t handles.
 *
 * Errors: every op returns 0 or a negative GM_E* code: GM_EDEVNOMEM when
 * the device has no room, GM_ENOTSUP for an op the backend lacks,
 * GM_EDEVICE for any other driver failure, GM_EBUSY from event_query for
 * an event that has not completed yet. A failed op leaves nothing
 * behind (no half-mapped range, no leaked handle).
 */
#ifndef GM_BACKEND_H
#define GM_BACKEND_H

#include <stddef.h>
#include <stdint.h>

struct gm_backend;

struct gm_backend_ops {
	/* Plain segments: like cuMemAlloc / cuMemFree. */
	int (*seg_alloc)(struct gm_backend *be, uint64_t size, uint64_t *addr);
	int (*seg_free)(struct gm_backend *be, uint64_t addr, uint64_t size);

	/*
	 * Virtual segments (optional: NULL when unsupported). va_reserve
	 * reserves an address range with no memory behind it; va_map backs
	 * [addr, addr + size) with physical memory (size and addr multiples
	 * of the granule), va_unmap gives it back; va_release frees the
	 * whole reservation (everything must be unmapped first).
	 */
	int (*va_reserve)(struct gm_backend *be, uint64_t size, uint64_t *addr);
	int (*va_map)(struct gm_backend *be, uint64_t addr, uint64_t size);
	int (*va_unmap)(struct gm_backend *be, uint64_t addr, uint64_t size);
	int (*va_release)(struct gm_backend *be, uint64_t addr, uint64_t size);

	/*
	 * Events (stream safety). event_record captures all work submitted
	 * to stream so far; event_query returns 0 once that work is done,
	 * GM_EBUSY before; event_sync waits for it; event_destroy returns
	 * the handle to the backend.
	 */
	int (*event_record)(struct gm_backend *be, uintptr_t stream,
			    uint64_t *event);
	int (*event_query)(struct gm_backend *be, uint64_t event);
	int (*event_sync)(struct gm_backend *be, uint64_t event);
	void (*event_destroy)(struct gm_backend *be, uint64_t event);

	/* Wait for all work on the device (before unmapping or freeing). */
	int (*synchronize)(struct gm_backend *be);

	/* Free bytes the device still has (for OOM reports); may be NULL. */
	int (*mem_free)(struct gm_backend *be, uint64_t *free_bytes);

	/* Free the backend itself. */
	void (*destroy)(struct gm_backend *be);
};

struct gm_backend {
	const struct gm_backend_ops *ops;
	const char *name;        /* "sim", "cuda" */
	uint64_t total_bytes;    /* the device's total memory */
	uint64_t granule_bytes;  /* mapping granularity of virtual segments */
};

#endif
