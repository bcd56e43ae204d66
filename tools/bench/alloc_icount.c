/*
 * alloc_icount.c - the single-thread loop of alloc_bench, bracketed for
 * callgrind, so instructions per allocate + free pair can be counted
 * reproducibly (wall clock on a shared machine cannot show 10%).
 *
 * Usage: valgrind --tool=callgrind --instr-atstart=no \
 *            alloc_icount LIVE pair|churn [OPS]
 * then divide the "Collected" Ir by OPS (default 100,000). The pool is
 * filled with LIVE allocations first (outside the count); sizes and
 * patterns are alloc_bench's (log-uniform 512 B .. 32 MiB, stream 1).
 * Without valgrind's header the markers are no-ops.
 */
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#endif
#endif
#ifndef CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_START_INSTRUMENTATION
#define CALLGRIND_STOP_INSTRUMENTATION
#endif

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

int main(int argc, char **argv)
{
	struct gm_sim_options so = {.total_bytes = 16 * GM_TiB};
	struct gm_backend *be;
	struct gm_pool *pool;
	struct gm_diag d;
	uint64_t s = 0x9e3779b97f4a7c15ULL, *sizes, *addrs;
	size_t live, ops, n;
	bool churn;
	int err = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: alloc_icount LIVE pair|churn [OPS]\n");
		return 2;
	}
	live = strtoul(argv[1], NULL, 10);
	churn = !strcmp(argv[2], "churn");
	ops = argc > 3 ? strtoul(argv[3], NULL, 10) : 100000;
	n = live ? live : 1;
	sizes = malloc(8192 * sizeof(*sizes));
	addrs = calloc(n, sizeof(*addrs));
	if (!sizes || !addrs || gm_sim_backend_create(&be, &so) ||
	    gm_pool_create(&pool, be, NULL, &d))
		return 1;
	for (size_t i = 0; i < 8192; i++) {
		unsigned bits = 9 + (unsigned)(xs(&s) % 16);
		uint64_t base = (uint64_t)1 << bits;

		sizes[i] = base + xs(&s) % base;
	}
	for (size_t i = 0; i < n && !err; i++)
		err = gm_pool_alloc(pool, sizes[i % 8192], 1, &addrs[i]);
	CALLGRIND_START_INSTRUMENTATION;
	for (size_t k = 0; k < ops && churn; k++) {
		size_t i = (size_t)(xs(&s) % n);

		gm_pool_free(pool, addrs[i]);
		err |= gm_pool_alloc(pool, sizes[k & 8191], 1, &addrs[i]);
	}
	for (size_t k = 0; k < ops && !churn; k++) {
		uint64_t a;

		err |= gm_pool_alloc(pool, sizes[k & 8191], 1, &a);
		gm_pool_free(pool, a);
	}
	CALLGRIND_STOP_INSTRUMENTATION;
	for (size_t i = 0; i < n; i++)
		gm_pool_free(pool, addrs[i]);
	gm_pool_destroy(pool);
	be->ops->destroy(be);
	free(sizes);
	free(addrs);
	return err ? 1 : 0;
}
