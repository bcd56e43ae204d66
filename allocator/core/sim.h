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

/*
 * Where plain segments (seg_alloc) land in the simulated address space.
 * PyTorch's best fit breaks ties between equal free blocks by address,
 * so the order of segments changes which block is reused, and with it
 * peak reserved (tools/bench/results/alloc-emulation.md).
 *
 * GM_SIM_PLACE_RISING: a bump pointer, each segment above the previous
 *   one, 2 MiB aligned; addresses are never reused.
 * GM_SIM_PLACE_DRIVER: what cuMemAlloc was seen doing on an H200 with
 *   driver 580 (tools/measure/vaddr.py over the 53 calibration traces):
 *   a virtual-address heap that grows DOWNWARDS in chunks of the
 *   request rounded up to 32 MiB, the segment at a chunk's bottom; the
 *   rest of a chunk and the ranges of freed segments are holes, which
 *   later requests fill first, lowest address first, 2 MiB aligned.
 */
enum gm_sim_placement {
	GM_SIM_PLACE_RISING = 0,
	GM_SIM_PLACE_DRIVER,
};

#define GM_SIM_DRIVER_TOP ((uint64_t)1 << 48) /* driver heap's first top */
#define GM_SIM_DRIVER_CHUNK (32 * (uint64_t)1 << 20)

struct gm_sim_options {
	uint64_t total_bytes;   /* capacity of the simulated card */
	uint64_t granule_bytes; /* virtual-segment granule; 0 = 2 MiB */
	bool virtual_segments;  /* offer va_* ops */
	enum gm_sim_placement placement; /* plain segments; 0 = rising */
};

/* "rising" / "driver" to a placement: 0, or GM_EINVAL. */
int gm_sim_placement_parse(const char *s, enum gm_sim_placement *out);

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

/*
 * Start the address space afresh, as a new process would see it: the
 * rising pointer and the driver heap back to their first values. Only
 * when nothing is handed out and nothing reserved: GM_EBUSY otherwise.
 * Replays use it between passes over one trace.
 */
int gm_sim_reset(struct gm_backend *be);

/* Bytes the simulated device has handed out (segments + mapped). */
uint64_t gm_sim_used(struct gm_backend *be);

/*
 * What the last refused device call lacked: its size less the free
 * capacity then, bytes (0: none refused since the last gm_sim_grow;
 * an injected failure sets nothing).
 */
uint64_t gm_sim_short_by(struct gm_backend *be);

/*
 * The simulated device as words into buf[0 .. cap): capacity, bytes
 * handed out, the address space (rising pointer, the driver heap's free
 * ranges, the placement hint), reservations and their mapped granules,
 * streams with work pending. Two equal states answer the same device
 * calls with the same addresses (see gm_pool_state). Returns the number
 * of words (more than cap: buf holds the first cap).
 */
size_t gm_sim_state(struct gm_backend *be, uint64_t *buf, size_t cap);

/*
 * Add bytes to the card's capacity (total_bytes): the planner's replay
 * finds the smallest card a step gets through on by growing it only
 * when a request still fails after the caching allocator has freed its
 * cache. Returns 0, or GM_EINVAL for 0 bytes or an overflow.
 */
int gm_sim_grow(struct gm_backend *be, uint64_t bytes);

/*
 * Bytes of mapped granules among those that [addr, addr + size) touches
 * inside a virtual reservation (0 outside one), for tests: a live block
 * of a virtual segment must have all its granules mapped.
 */
uint64_t gm_sim_mapped(struct gm_backend *be, uint64_t addr, uint64_t size);

#endif
