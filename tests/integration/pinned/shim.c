/*
 * A stand-in for the preload library: a shared library linked with the
 * pinned cache (and so with the private jemalloc) exactly as
 * libgpumem-preload.so is, over the fake host driver. The test program
 * LD_PRELOADs it and calls gm_test_shim_pinned() through dlsym.
 */
#include "error.h"
#include "host_cu.h"
#include "pinned.h"

#include <string.h>

#define GM_EXPORT __attribute__((visibility("default")))

static struct gm_cu shim_cu;

/*
 * rounds pairs of pinned allocate+free of 64 KiB, 1 MiB and 8 MiB, with
 * each flag set. Fills stats; returns 0 or a GM_E* code.
 */
GM_EXPORT int gm_test_shim_pinned(int rounds, struct gm_pinned_stats *stats);

int gm_test_shim_pinned(int rounds, struct gm_pinned_stats *stats)
{
	static const size_t sizes[] = { 64 << 10, 1 << 20, 8 << 20 };
	struct gm_pinned *pc;
	struct gm_diag d;
	int err;

	gm_fake_host_cu_fill(&shim_cu, false, false);
	err = gm_pinned_create(&pc, &shim_cu, NULL, &d);
	if (err)
		return err;
	for (int r = 0; r < rounds && !err; r++)
		for (unsigned f = 0; f < 8 && !err; f++)
			for (int k = 0; k < 3 && !err; k++) {
				void *p;

				err = gm_pinned_alloc(pc, &p, sizes[k], f, NULL);
				if (err)
					break;
				memset(p, r, sizes[k]);
				err = gm_pinned_free(pc, p);
			}
	gm_pinned_stats(pc, stats);
	gm_pinned_destroy(pc);
	if (!err && gm_fake_host.bad_frees)
		err = GM_EINVAL;
	return err;
}
