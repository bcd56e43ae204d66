/*
 * sim.h - the simulated backend (sim.c): address arithmetic only.
 *
 * Segments are address ranges cut from a 64-bit space starting at
 * GM_SIM_BASE; nothing is allocated in host memory for them, so a
 * 141 GB card is simulated on a laptop. Capacity is enforced exactly:
 * mapped bytes never exceed total_bytes (GM_EDEVNOMEM otherwise).
 * Virtual reservations keep one bit per granule (8 KiB of host memory
 * per 64 GiB reserved at 2 MiB granules), so mapping and unmapping are
 * counted as the driver backend counts them: mapping a mapped granule
 * is GM_EINVAL, unmapping skips unmapped ones, release unmaps the rest.
 *
 * Streams and events: by default the simulated device finishes work the
 * moment it is submitted (every event is complete). gm_sim_launch()
 * marks a stream busy (as if a kernel were still running on it) until
 * gm_sim_finish(); events recorded while it is busy stay GM_EBUSY until
 * then. Tests use this to check that a block freed under a running
 * kernel is not handed to another stream early.
 *
 * Fault injection for tests: gm_sim_fail_after(be, n) makes the n-th
 * next device call (seg_alloc, va_reserve, va_map) fail with
 * GM_EDEVNOMEM.
 *
 * Thread safety: all ops are safe to call from many threads.
 * Errors: GM_EINVAL, GM_ENOMEM (host), GM_EDEVNOMEM.
 */
#ifndef GM_SIM_H
#define GM_SIM_H

#include "backend.h"

#include <stdbool.h>
#include <stdint.h>

#define GM_SIM_BASE ((uint64_t)1 << 40)

struct gm_sim_options {
	uint64_t total_bytes;   /* capacity of the simulated card */
	uint64_t granule_bytes; /* virtual-segment granule; 0 = 2 MiB */
	bool virtual_segments;  /* offer va_* ops */
};

/* Create a simulated backend. Returns 0, GM_EINVAL or GM_ENOMEM. */
int gm_sim_backend_create(struct gm_backend **out,
			  const struct gm_sim_options *opt);

/* Make stream busy: events recorded from now on stay pending. */
void gm_sim_launch(struct gm_backend *be, uintptr_t stream);

/* Finish all work submitted to stream so far. */
void gm_sim_finish(struct gm_backend *be, uintptr_t stream);

/* Fail the n-th next device call (1 = the next one); 0 disables. */
void gm_sim_fail_after(struct gm_backend *be, unsigned n);

/*
 * Place the next plain segment of exactly size bytes at addr (one use;
 * a segment of another size, or the next hint, drops it). Replays of
 * PyTorch traces use it to give segments the addresses cudaMalloc gave
 * them: PyTorch breaks best-fit ties by address, so the order of
 * segments in the address space decides which of two equal free blocks
 * is reused (tools/bench/results/alloc-emulation.md). The caller must
 * not place two live segments over each other.
 */
void gm_sim_place_next(struct gm_backend *be, uint64_t addr, uint64_t size);

/* Bytes the simulated device has handed out (segments + mapped). */
uint64_t gm_sim_used(struct gm_backend *be);

/*
 * Bytes of mapped granules among those that [addr, addr + size) touches
 * inside a virtual reservation (0 outside one), for tests: a live block
 * of a virtual segment must have all its granules mapped.
 */
uint64_t gm_sim_mapped(struct gm_backend *be, uint64_t addr, uint64_t size);

#endif
