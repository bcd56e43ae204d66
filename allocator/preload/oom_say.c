/* oom_say.c - the out-of-memory line on stderr (see oom_say.h). */
#include "oom_say.h"

#include "account.h"
#include "log.h"
#include "pool.h"
#include "units.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* Per device: when the last refusal was, and how many went unsaid. */
static _Atomic uint64_t last_ns[GM_PL_MAX_DEVICES];
static _Atomic uint64_t unsaid[GM_PL_MAX_DEVICES];

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec + 1;
}

/* A new burst starts when the previous refusal is GM_PL_OOM_BURST_NS
 * old (or there was none): only its first refusal is said. */
static bool first_of_burst(int dev, uint64_t *skipped)
{
	uint64_t now = now_ns();
	uint64_t prev = atomic_exchange(&last_ns[dev], now);

	if (prev && now - prev < GM_PL_OOM_BURST_NS) {
		atomic_fetch_add(&unsaid[dev], 1);
		return false;
	}
	*skipped = atomic_exchange(&unsaid[dev], 0);
	return true;
}

uint64_t gm_pl_largest_free_block(const struct gm_pl_dev *d,
				  uint64_t pool_largest)
{
	return atomic_load(&d->pool) ? pool_largest : 0;
}

/* The bytes the process could still obtain from the driver: the room
 * under the cap, within the device's free bytes (both modes). */
static uint64_t room_under_cap(struct gm_pl_dev *d)
{
	uint64_t reserved = atomic_load(&d->reserved);
	uint64_t room = d->cap == UINT64_MAX ? UINT64_MAX :
			reserved >= d->cap ? 0 : d->cap - reserved;
	size_t f = 0, t = 0;

	if (gm__pl_cu.mem_get_info) {
		gm__pl_guard_enter();
		if (gm__pl_cu.mem_get_info(&f, &t) != GM_CU_SUCCESS)
			f = 0;
		gm__pl_guard_leave();
	}
	return (uint64_t)f < room ? (uint64_t)f : room;
}

void gm_pl_oom_say(struct gm_pl_dev *d, uint64_t size, enum gm_pl_oom_why why)
{
	struct gm_pool *pool = atomic_load(&d->pool);
	struct gm_pool_oom o = {0};
	char req[32], cap[32], alloc[32], res[32], big[32], room[32];
	char blk[64] = "", more[64] = "";
	const char *verdict;
	uint64_t skipped = 0;

	if (d->ordinal < 0 || d->ordinal >= GM_PL_MAX_DEVICES ||
	    !first_of_burst(d->ordinal, &skipped))
		return;
	if (skipped)
		snprintf(more, sizeof(more), "; %llu more refused since the "
			 "last message", (unsigned long long)skipped);
	if (why == GM_PL_OOM_UNREADABLE) {
		/* no cap is in force, so no cap or room under it is told:
		 * "GPUMEM_LIMIT=abc" of "GPUMEM_LIMIT=abc is not a size..." */
		const char *bad = gm__pl.opts.bad, *end = strstr(bad, " is not");

		gm_error("out of memory on device %d: tried to allocate %s; "
			 "refused because %.*s cannot be read (every device "
			 "allocation is refused until it is fixed)%s",
			 d->ordinal, gm_size_format(req, sizeof(req), size),
			 (int)(end ? end - bad : (ptrdiff_t)strlen(bad)), bad,
			 more);
		return;
	}
	if (pool)
		gm_pool_last_oom(pool, &o);
	if (why == GM_PL_OOM_UNDERSIZED)
		verdict = "undersized card (it reports less than it is sold "
			  "as, and GPUMEM_ON_UNDERSIZED=fail refuses every "
			  "allocation)";
	else if (pool && o.kind == GM_OOM_FRAGMENTATION)
		verdict = "fragmentation (enough is free in the cache, but "
			  "no block that large)";
	else if (why == GM_PL_OOM_CAP)
		verdict = "cap (the request does not fit under the "
			  "process's cap)";
	else
		verdict = "card full (the driver has no more memory on the "
			  "card)";
	if (d->cap == UINT64_MAX)
		snprintf(cap, sizeof(cap), "none");
	else
		gm_size_format(cap, sizeof(cap), d->cap);
	/* a free block is the cache's (cache mode, as the report's
	 * largest_free_block_bytes); limit mode caches nothing */
	if (pool)
		snprintf(blk, sizeof(blk), ", largest free block %s",
			 gm_size_format(big, sizeof(big),
					gm_pl_largest_free_block(
						d, o.kind != GM_OOM_NONE ?
						o.largest_free_bytes : 0)));
	gm_error("out of memory on device %d: tried to allocate %s; cap %s, "
		 "%s allocated, %s reserved%s, %s free under the cap: %s%s",
		 d->ordinal, gm_size_format(req, sizeof(req), size), cap,
		 gm_size_format(alloc, sizeof(alloc),
				atomic_load(&d->allocated)),
		 gm_size_format(res, sizeof(res), atomic_load(&d->reserved)),
		 blk, gm_size_format(room, sizeof(room), room_under_cap(d)),
		 verdict, more);
}
