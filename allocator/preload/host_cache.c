/*
 * host_cache.c - the preload library's pinned host memory cache: made on
 * first use over the real driver when libgpumem-pinned.so is loaded too
 * (its functions are weak references here) and GPUMEM_PINNED is not
 * "off"; its report keys and Prometheus metrics. See hooks_host.c.
 */
#include "account.h"
#include "emit.h"
#include "error.h"
#include "hooks.h"
#include "pinned.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma weak gm_pinned_create
#pragma weak gm_pinned_stats
/* Defined by preload.c in the shared library; absent in the static
 * library the unit tests link, where no cache is made. */
#pragma weak gm__pl_init

static pthread_once_t cache_once = PTHREAD_ONCE_INIT;
static struct gm_pinned *cache_pc;

static void cache_make(void)
{
	const char *e = getenv("GPUMEM_PINNED");
	struct gm_diag d;

	if (!gm_pinned_create || (e && strcmp(e, "off") == 0) ||
	    !gm__pl_init || gm__pl_init() != 0)
		return;
	if (gm_pinned_create(&cache_pc, &gm__pl_cu, NULL, &d) != 0)
		cache_pc = NULL;
}

struct gm_pinned *gm__pl_pinned(void)
{
	if (gm__pl_tls.guard)
		return NULL;
	pthread_once(&cache_once, cache_make);
	return cache_pc;
}

void gm__pl_pinned_report(struct gm_val *root)
{
	struct gm_pinned_stats s;

	if (!cache_pc || !gm_pinned_stats)
		return;
	gm_pinned_stats(cache_pc, &s);
	gm_pinned_stats_set(root, &s);
}

void gm__pl_pinned_prom(FILE *out, const char *rank)
{
	struct gm_pinned_stats s;

	if (!cache_pc || !gm_pinned_stats)
		return;
	gm_pinned_stats(cache_pc, &s);
	fprintf(out, "# HELP gpumem_pinned_in_use_bytes Pinned host memory "
		"in live buffers.\n# TYPE gpumem_pinned_in_use_bytes gauge\n"
		"gpumem_pinned_in_use_bytes{rank=\"%s\"} %llu\n", rank,
		(unsigned long long)s.in_use_bytes);
	fprintf(out, "# HELP gpumem_pinned_cached_bytes Pinned host memory "
		"held for reuse.\n# TYPE gpumem_pinned_cached_bytes gauge\n"
		"gpumem_pinned_cached_bytes{rank=\"%s\"} %llu\n", rank,
		(unsigned long long)s.cached_bytes);
	fprintf(out, "# HELP gpumem_pinned_allocs_total Pinned buffers "
		"served.\n# TYPE gpumem_pinned_allocs_total counter\n"
		"gpumem_pinned_allocs_total{rank=\"%s\"} %llu\n", rank,
		(unsigned long long)s.allocs);
	fprintf(out, "# HELP gpumem_pinned_driver_allocs_total Pinned chunks "
		"taken from the driver.\n"
		"# TYPE gpumem_pinned_driver_allocs_total counter\n"
		"gpumem_pinned_driver_allocs_total{rank=\"%s\"} %llu\n", rank,
		(unsigned long long)s.driver_allocs);
}
