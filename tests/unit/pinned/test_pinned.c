/*
 * The pinned host memory cache over the fake driver (tests/fake/host_cu.c):
 * reuse, big buffers, flag separation, device pointers of sub-allocations,
 * the no-merge rule across driver chunks, trimming, injected driver
 * failures, and threads.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "emit.h"
#include "error.h"
#include "host_cu.h"
#include "pinned.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1 << 10)
#define MiB ((size_t)1 << 20)

static struct gm_cu cu;
static unsigned long live_base; /* fake's live bytes before this test */

/* Bytes the fake driver holds for the current test. */
static unsigned long fake_live(void)
{
	return atomic_load(&gm_fake_host.live_bytes) - live_base;
}

static struct gm_pinned *make(size_t grow_limit, bool contiguous)
{
	struct gm_pinned_opts o = { .grow_limit = grow_limit };
	struct gm_pinned *pc = NULL;
	struct gm_diag d;

	gm_fake_host_cu_fill(&cu, false, contiguous);
	live_base = fake_live();
	assert_int_equal(gm_pinned_create(&pc, &cu, &o, &d), 0);
	return pc;
}

/* Destroy pc and check every chunk went back, each freed exactly. */
static void finish(struct gm_pinned *pc)
{
	gm_pinned_destroy(pc);
	assert_int_equal(atomic_load(&gm_fake_host.bad_frees), 0);
	assert_int_equal(atomic_load(&gm_fake_host.allocs),
			 atomic_load(&gm_fake_host.frees));
}

static void test_reuse(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	void *p, *q;
	unsigned long drv;

	assert_int_equal(gm_pinned_alloc(pc, &p, 64 * KiB, 0, NULL), 0);
	memset(p, 0xab, 64 * KiB);
	assert_true(gm_fake_host_within_one(p, 64 * KiB));
	assert_int_equal((uintptr_t)p % 4096, 0);
	drv = atomic_load(&gm_fake_host.allocs);
	assert_true(drv >= 1);
	assert_int_equal(gm_pinned_free(pc, p), 0);
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &q, 64 * KiB, 0, NULL), 0);
		assert_int_equal(gm_pinned_free(pc, q), 0);
	}
	/* Served from the cache: the driver was not asked again. */
	assert_int_equal(atomic_load(&gm_fake_host.allocs), drv);
	gm_pinned_stats(pc, &s);
	assert_int_equal(s.allocs, 1001);
	assert_int_equal(s.frees, 1001);
	assert_int_equal(s.in_use_bytes, 0);
	assert_int_equal(s.buffers, 0);
	assert_int_equal(s.driver_allocs, drv);
	assert_int_equal(s.reserved_bytes, s.cached_bytes);
	assert_true(s.reserved_bytes >= 64 * KiB);
	assert_int_equal(s.reserved_bytes, fake_live());
	finish(pc);
}

static void test_big(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	void *p, *q;
	unsigned long drv;

	assert_int_equal(gm_pinned_alloc(pc, &p, 64 * MiB, 0, NULL), 0);
	assert_int_equal((uintptr_t)p % 4096, 0);
	assert_true(gm_fake_host_within_one(p, 64 * MiB));
	memset(p, 1, 64 * MiB);
	gm_pinned_stats(pc, &s);
	assert_int_equal(s.in_use_bytes, 64 * MiB);
	/*
	 * One chunk: 64 MiB plus jemalloc 5.3's one-page pad of large
	 * extents, rounded up to the next page size class (80 MiB).
	 */
	assert_int_equal(s.chunks, 1);
	assert_int_equal(s.reserved_bytes, 80 * MiB);
	drv = atomic_load(&gm_fake_host.allocs);
	/* The rest of the chunk serves smaller buffers. */
	assert_int_equal(gm_pinned_alloc(pc, &q, 12 * MiB, 0, NULL), 0);
	assert_true(gm_fake_host_within_one(q, 12 * MiB));
	assert_true(gm_fake_host_within_one(p, (char *)q - (char *)p));
	assert_int_equal(gm_pinned_free(pc, q), 0);
	assert_int_equal(gm_pinned_free(pc, p), 0);
	for (int i = 0; i < 50; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &q, 64 * MiB, 0, NULL), 0);
		assert_ptr_equal(q, p);
		assert_int_equal(gm_pinned_free(pc, q), 0);
	}
	assert_int_equal(atomic_load(&gm_fake_host.allocs), drv);
	finish(pc);
}

static void test_flags_separate(void **state)
{
	struct gm_pinned *pc = make(0, false);
	void *p[8][3];

	for (unsigned f = 0; f < 8; f++)
		for (int k = 0; k < 3; k++) {
			struct gm_pinned_info info;

			assert_int_equal(gm_pinned_alloc(pc, &p[f][k],
					 (k + 1) * 100 * KiB, f, NULL), 0);
			/* The driver chunk under it has exactly these flags. */
			assert_int_equal(gm_fake_host_flags(p[f][k]), (int)f);
			assert_int_equal(gm_pinned_query(pc, p[f][k], &info), 0);
			assert_int_equal(info.flags, f);
		}
	for (unsigned f = 0; f < 8; f++)
		for (int k = 0; k < 3; k++)
			assert_int_equal(gm_pinned_free(pc, p[f][k]), 0);
	finish(pc);
}

static void test_device_pointer(void **state)
{
	struct gm_pinned *pc = make(0, false);
	void *m[16], *plain;
	gm_cu_ptr d, want;
	int x;

	for (int i = 0; i < 16; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &m[i], 4 * KiB + i * 1000,
				 GM_CU_MEMHOSTALLOC_DEVICEMAP, NULL), 0);
		assert_int_equal(gm_pinned_device_pointer(pc, m[i], &d), 0);
		assert_int_equal(cu.mem_host_get_device_pointer(&want, m[i], 0),
				 0);
		assert_int_equal(d, want);
		/* Inside a buffer too. */
		assert_int_equal(gm_pinned_device_pointer(pc,
				 (char *)m[i] + 100, &d), 0);
		assert_int_equal(d, want + 100);
	}
	assert_int_equal(gm_pinned_alloc(pc, &plain, 4 * KiB, 0, NULL), 0);
	assert_int_equal(gm_pinned_device_pointer(pc, plain, &d), GM_EINVAL);
	assert_int_equal(gm_pinned_device_pointer(pc, &x, &d), GM_ENOTFOUND);
	assert_int_equal(gm_pinned_free(pc, &x), GM_ENOTFOUND);
	assert_int_equal(gm_pinned_free(pc, plain), 0);
	for (int i = 0; i < 16; i++)
		assert_int_equal(gm_pinned_free(pc, m[i]), 0);
	finish(pc);
}

/*
 * With adjacent driver chunks (the fake's contiguous mode) and small
 * slabs, free neighbours of different chunks meet in jemalloc's free
 * sets; every buffer must still lie inside one driver allocation, and
 * only exact driver allocations may be freed. (jemalloc 5.3 itself does
 * not offer to merge extents from separate hook calls when it retains;
 * the merge hook's own rule is checked directly below.)
 */
static void test_no_merge(void **state)
{
	struct gm_pinned *pc = make(2 * MiB, true);
	struct gm_pinned_stats s;
	struct gm_pinned_info i0, i1;
	void *p[24], *big[4];
	int other = -1;

	for (int i = 0; i < 24; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &p[i], 700 * KiB, 0, NULL),
				 0);
		assert_true(gm_fake_host_within_one(p[i], 700 * KiB));
	}
	gm_pinned_stats(pc, &s);
	assert_true(s.chunks >= 3);
	/* The merge rule: within one chunk yes, across two adjacent no. */
	assert_int_equal(gm_pinned_query(pc, p[0], &i0), 0);
	for (int i = 1; i < 24 && other < 0; i++) {
		assert_int_equal(gm_pinned_query(pc, p[i], &i1), 0);
		if ((char *)i1.chunk == (char *)i0.chunk + i0.chunk_size)
			other = i;
	}
	assert_true(other > 0);
	assert_true(gm__pinned_merge_ok(pc, i0.chunk, 4096,
					(char *)i0.chunk + 4096, 8192));
	assert_false(gm__pinned_merge_ok(pc,
			(char *)i0.chunk + i0.chunk_size - 4096, 4096,
			i1.chunk, 4096));
	/* Free all but one (so trim keeps the arena), then purge: the free
	 * ranges of neighbouring chunks meet in jemalloc's retained set. */
	for (int i = 1; i < 24; i++)
		assert_int_equal(gm_pinned_free(pc, p[i]), 0);
	gm_pinned_trim(pc);
	/* Bigger than any slab: a merged range would be handed out here. */
	for (int i = 0; i < 4; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &big[i], 5 * MiB, 0, NULL),
				 0);
		assert_true(gm_fake_host_within_one(big[i], 5 * MiB));
		memset(big[i], i, 5 * MiB);
	}
	for (int i = 0; i < 4; i++)
		assert_int_equal(gm_pinned_free(pc, big[i]), 0);
	assert_int_equal(gm_pinned_free(pc, p[0]), 0);
	assert_true(gm_pinned_trim(pc) > 0);
	assert_int_equal(fake_live(), 0);
	finish(pc);
}

static void test_trim(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	void *keep, *p;

	assert_int_equal(gm_pinned_alloc(pc, &keep, 1 * MiB,
			 GM_CU_MEMHOSTALLOC_PORTABLE, NULL), 0);
	for (int i = 0; i < 10; i++) {
		assert_int_equal(gm_pinned_alloc(pc, &p, (size_t)(i + 1) * MiB,
				 0, NULL), 0);
		assert_int_equal(gm_pinned_free(pc, p), 0);
	}
	gm_pinned_stats(pc, &s);
	assert_true(s.cached_bytes > 0);
	assert_true(gm_pinned_trim(pc) > 0);
	gm_pinned_stats(pc, &s);
	/* The idle arena gave everything back; the busy one kept its
	 * buffer, which still works. */
	assert_int_equal(s.in_use_bytes, 1 * MiB);
	assert_true(s.reserved_bytes >= 1 * MiB);
	assert_int_equal(s.reserved_bytes,
			 fake_live());
	memset(keep, 7, 1 * MiB);
	assert_int_equal(gm_pinned_free(pc, keep), 0);
	gm_pinned_trim(pc);
	gm_pinned_stats(pc, &s);
	assert_int_equal(s.reserved_bytes, 0);
	assert_int_equal(atomic_load(&gm_fake_host.live), 0);
	/* Usable again after a trim. */
	assert_int_equal(gm_pinned_alloc(pc, &p, 3 * MiB, 0, NULL), 0);
	assert_int_equal(gm_pinned_free(pc, p), 0);
	finish(pc);
}

static void test_driver_failure(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	gm_cu_result r = 0;
	void *p;

	/* jemalloc retries a failed slab with the exact size: fail both. */
	atomic_store(&gm_fake_host.fail_next, 1000);
	assert_int_equal(gm_pinned_alloc(pc, &p, 1 * MiB, 0, &r), GM_ENOMEM);
	atomic_store(&gm_fake_host.fail_next, 0);
	assert_null(p);
	assert_int_equal(r, GM_CU_ERROR_OUT_OF_MEMORY);
	gm_pinned_stats(pc, &s);
	assert_true(s.driver_failures >= 1);
	assert_int_equal(s.buffers, 0);
	assert_int_equal(gm_pinned_alloc(pc, &p, 1 * MiB, 0, &r), 0);
	assert_int_equal(r, GM_CU_SUCCESS);
	assert_int_equal(gm_pinned_free(pc, p), 0);
	finish(pc);
}

static void test_pass_through(void **state)
{
	struct gm_pinned *pc = make(0, false);
	gm_cu_result r;
	void *p;

	assert_int_equal(gm_pinned_alloc(pc, &p, 0, 0, &r), GM_ENOTSUP);
	assert_int_equal(gm_pinned_alloc(pc, &p, 4096, 0x8, &r), GM_ENOTSUP);
	assert_int_equal(gm_pinned_free(pc, NULL), GM_ENOTFOUND);
	finish(pc);
}

static void test_stats_keys(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	struct gm_val *o = gm_val_obj();
	void *p;

	assert_int_equal(gm_pinned_alloc(pc, &p, 1 * MiB, 0, NULL), 0);
	gm_pinned_stats(pc, &s);
	gm_pinned_stats_set(o, &s);
	assert_int_equal(gm_val_as_uint(gm_obj_get(o, "pinned_in_use_bytes")),
			 1 * MiB);
	assert_int_equal(gm_val_as_uint(gm_obj_get(o, "pinned_cached_bytes")),
			 s.reserved_bytes - 1 * MiB);
	assert_int_equal(gm_val_as_uint(gm_obj_get(o,
			 "pinned_driver_allocs_total")), s.driver_allocs);
	gm_val_free(o);
	assert_int_equal(gm_pinned_free(pc, p), 0);
	finish(pc);
}

/* ==== Threads ==== */

struct worker {
	struct gm_pinned *pc;
	unsigned seed;
	int bad;
};

static void *work(void *arg)
{
	struct worker *w = arg;
	struct { unsigned char *p; size_t n; unsigned char v; } live[16] = {0};

	for (int it = 0; it < 3000; it++) {
		int k = (int)(rand_r(&w->seed) % 16);

		if (live[k].p) {
			for (size_t i = 0; i < live[k].n; i += 509)
				if (live[k].p[i] != live[k].v)
					w->bad++;
			if (gm_pinned_free(w->pc, live[k].p) != 0)
				w->bad++;
			live[k].p = NULL;
			continue;
		}
		size_t n = 1 + rand_r(&w->seed) % (rand_r(&w->seed) % 8 ?
						    256 * KiB : 4 * MiB);
		unsigned f = rand_r(&w->seed) % 3 == 0 ?
				     GM_CU_MEMHOSTALLOC_DEVICEMAP : 0;
		void *p;

		if (gm_pinned_alloc(w->pc, &p, n, f, NULL) != 0 ||
		    !gm_fake_host_within_one(p, n) ||
		    gm_fake_host_flags(p) != (int)f) {
			w->bad++;
			continue;
		}
		live[k].p = p;
		live[k].n = n;
		live[k].v = (unsigned char)rand_r(&w->seed);
		memset(p, live[k].v, n);
	}
	for (int k = 0; k < 16; k++)
		if (live[k].p && gm_pinned_free(w->pc, live[k].p) != 0)
			w->bad++;
	return NULL;
}

static void test_threads(void **state)
{
	struct gm_pinned *pc = make(0, false);
	struct gm_pinned_stats s;
	struct worker w[8];
	pthread_t t[8];

	for (int i = 0; i < 8; i++) {
		w[i] = (struct worker){ .pc = pc, .seed = 1234u + (unsigned)i };
		assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		assert_int_equal(w[i].bad, 0);
	}
	gm_pinned_stats(pc, &s);
	assert_int_equal(s.in_use_bytes, 0);
	assert_int_equal(s.buffers, 0);
	assert_int_equal(s.allocs, s.frees);
	assert_true(s.allocs > 8 * 1000);
	/* Far fewer driver calls than buffers: the point of the cache. */
	assert_true(s.driver_allocs * 20 < s.allocs);
	assert_int_equal(s.reserved_bytes,
			 fake_live());
	finish(pc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_big),
		cmocka_unit_test(test_flags_separate),
		cmocka_unit_test(test_device_pointer),
		cmocka_unit_test(test_no_merge),
		cmocka_unit_test(test_trim),
		cmocka_unit_test(test_driver_failure),
		cmocka_unit_test(test_pass_through),
		cmocka_unit_test(test_stats_keys),
		cmocka_unit_test(test_threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
