/*
 * fuzz_trace.c - libFuzzer target over the trace reader and the engine:
 * any bytes are parsed as an RMM CSV log; what parses is replayed on a
 * small simulated card (plain and virtual segments, with a cap taken
 * from the input) and the pool's invariants are checked at the end.
 * Build: clang -fsanitize=fuzzer,address,undefined (see .ci/run).
 */
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "trace.h"
#include "units.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
	struct gm_trace t;
	struct gm_diag d;

	if (gm_trace_parse((const char *)data, size, "fuzz", &t, &d))
		return 0;
	for (int va = 0; va < 2; va++) {
		struct gm_sim_options so = {.total_bytes = GM_GiB,
					    .virtual_segments = va};
		struct gm_pool_options po = {
			.virtual_segments = va,
			.cap_bytes = size ? (uint64_t)data[0] * 4 * GM_MiB : 0,
		};
		struct gm_replay_result r;
		struct gm_backend *be;

		if (gm_sim_backend_create(&be, &so))
			break;
		if (!gm_replay(&t, be, &po, &r, &d)) {
			if (r.peak_reserved_bytes > so.total_bytes ||
			    (po.cap_bytes && r.peak_reserved_bytes >
			     po.cap_bytes) ||
			    r.peak_allocated_bytes > r.peak_reserved_bytes)
				abort();
		}
		if (gm_sim_used(be) != 0) /* the pool gave everything back */
			abort();
		be->ops->destroy(be);
	}
	gm_trace_free(&t);
	return 0;
}
