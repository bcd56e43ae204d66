/* Unit tests for core/pool.c on the simulated backend. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "units.h"

struct fx {
	struct gm_backend *be;
	struct gm_pool *pool;
};

static void make(struct fx *f, uint64_t total, bool va,
		 const struct gm_pool_options *opt)
{
	struct gm_sim_options so = {.total_bytes = total,
				    .virtual_segments = va};
	struct gm_diag d;

	assert_int_equal(gm_sim_backend_create(&f->be, &so), 0);
	assert_int_equal(gm_pool_create(&f->pool, f->be, opt, &d), 0);
}

static void done(struct fx *f)
{
	gm_pool_destroy(f->pool);
	assert_int_equal(gm_sim_used(f->be), 0);
	f->be->ops->destroy(f->be);
}

static struct gm_pool_stats stats(struct fx *f)
{
	struct gm_pool_stats st;

	gm_pool_get_stats(f->pool, &st);
	return st;
}

/*
 * Exact peaks across threads on their own streams (pool.c
 * allocated_up: arenas spend credit from their own frees and touch the
 * pool-wide bound only now and then). Each round every thread frees
 * and allocates small blocks (building credit), then holds a big block
 * while all threads wait at a barrier: at that moment the sum of the
 * big blocks is live, so the allocated peak must reach it in every
 * round; it may pass it only by the small blocks in flight (and by at
 * most 1 MiB a block handed out whole, PyTorch's should_split).
 */
#define PK_THREADS 4
#define PK_ROUNDS 60

struct pk_job {
	struct gm_pool *pool;
	pthread_barrier_t *bar;
	uintptr_t stream;
	uint64_t seed;
	uint64_t big[PK_ROUNDS];
	int err;
};

static uint64_t pk_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void *pk_work(void *arg)
{
	struct pk_job *j = arg;
	uint64_t s = j->seed;

	for (int r = 0; r < PK_ROUNDS; r++) {
		uint64_t a, big;

		for (int k = 0; k < 50; k++) {
			j->err |= gm_pool_alloc(j->pool, 512 + pk_rand(&s) %
						(4 * GM_MiB), j->stream, &a);
			j->err |= gm_pool_free(j->pool, a);
		}
		j->err |= gm_pool_alloc(j->pool, j->big[r], j->stream, &big);
		pthread_barrier_wait(j->bar); /* every big block live */
		pthread_barrier_wait(j->bar);
		j->err |= gm_pool_free(j->pool, big);
		pthread_barrier_wait(j->bar); /* no round overlaps the next */
	}
	return NULL;
}

static void peaks_across_threads(void **state)
{
	struct pk_job jobs[PK_THREADS];
	pthread_t th[PK_THREADS];
	pthread_barrier_t bar;
	struct gm_pool_stats st;
	uint64_t s = 12345, want = 0;
	struct fx f;

	(void)state;
	make(&f, 1024 * GM_GiB, false, NULL);
	pthread_barrier_init(&bar, NULL, PK_THREADS);
	for (int t = 0; t < PK_THREADS; t++)
		jobs[t] = (struct pk_job){.pool = f.pool, .bar = &bar,
					  .stream = (uintptr_t)t + 1,
					  .seed = 777 + (uint64_t)t};
	for (int r = 0; r < PK_ROUNDS; r++) {
		uint64_t sum = 0;

		for (int t = 0; t < PK_THREADS; t++) {
			/* 20 .. 418 MiB, multiples of 2 MiB */
			jobs[t].big[r] = (10 + pk_rand(&s) % 200) * 2 * GM_MiB;
			sum += jobs[t].big[r];
		}
		if (sum > want)
			want = sum;
	}
	for (int t = 0; t < PK_THREADS; t++)
		pthread_create(&th[t], NULL, pk_work, &jobs[t]);
	for (int t = 0; t < PK_THREADS; t++) {
		pthread_join(th[t], NULL);
		assert_int_equal(jobs[t].err, 0);
	}
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 0);
	assert_true(st.allocated_bytes.peak >= want);
	assert_true(st.allocated_bytes.peak <= want + PK_THREADS * 6 * GM_MiB);
	assert_int_equal(st.active_bytes.peak, st.allocated_bytes.peak);
	pthread_barrier_destroy(&bar);
	done(&f);
}

static void rounding_and_pools(void **state)
{
	struct fx f;
	uint64_t a, b, c;
	struct gm_pool_stats st;

	(void)state;
	make(&f, 80 * GM_GiB, false, NULL);
	assert_int_equal(gm_pool_round_size(f.pool, 1), 512);
	assert_int_equal(gm_pool_round_size(f.pool, 513), 1024);
	assert_int_equal(gm_pool_alloc(f.pool, 100, 0, &a), 0);
	assert_int_equal(a % 512, 0);
	st = stats(&f);
	/* small request: a 2 MiB segment */
	assert_int_equal(st.reserved_bytes.current, 2 * GM_MiB);
	assert_int_equal(st.allocated_bytes.current, 512);
	assert_int_equal(st.requested_bytes.current, 100);
	assert_int_equal(st.inactive_split_bytes.current, 2 * GM_MiB - 512);
	/* 1-10 MiB: a shared 20 MiB segment */
	assert_int_equal(gm_pool_alloc(f.pool, 3 * GM_MiB, 0, &b), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 5 * GM_MiB, 0, &c), 0);
	st = stats(&f);
	assert_int_equal(st.reserved_bytes.current, 22 * GM_MiB);
	assert_int_equal(c, b + 3 * GM_MiB);
	/* free + coalesce: the large segment becomes whole again */
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	assert_int_equal(gm_pool_free(f.pool, c), 0);
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 512);
	assert_int_equal(st.largest_free_bytes, 20 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, b), GM_ENOTFOUND);
	assert_int_equal(gm_pool_free(f.pool, 12345), GM_ENOTFOUND);
	/* reuse: the same large request lands at the same address */
	assert_int_equal(gm_pool_alloc(f.pool, 3 * GM_MiB, 0, &c), 0);
	assert_int_equal(c, b);
	assert_int_equal(stats(&f).num_device_alloc, 2);
	/* >= 10 MiB: own segment rounded to 2 MiB */
	assert_int_equal(gm_pool_alloc(f.pool, 30 * GM_MiB + 1, 0, &b), 0);
	assert_int_equal(stats(&f).reserved_bytes.current, 54 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 0, 0, &b), GM_EINVAL);
	done(&f);
}

static void divisions(void **state)
{
	struct gm_pool_options o = {.roundup_power2_divisions = 4};
	struct gm_diag d;
	struct fx f;

	(void)state;
	make(&f, GM_GiB, false, &o);
	/* 1200 KiB in [1, 2) MiB with 4 divisions rounds to 1.25 MiB. */
	assert_int_equal(gm_pool_round_size(f.pool, 1200 * GM_KiB),
			 1280 * GM_KiB);
	assert_int_equal(gm_pool_round_size(f.pool, 4 * GM_MiB), 4 * GM_MiB);
	done(&f);
	o.roundup_power2_divisions = 3;
	make(&f, GM_GiB, false, NULL);
	gm_pool_destroy(f.pool);
	assert_int_equal(gm_pool_create(&f.pool, f.be, &o, &d), GM_EINVAL);
	f.be->ops->destroy(f.be);
}

static void cap_exact(void **state)
{
	struct gm_pool_options o = {.cap_bytes = 40 * GM_MiB};
	struct fx f;
	uint64_t a, b;
	struct gm_pool_oom oom;
	char buf[512];

	(void)state;
	make(&f, 80 * GM_GiB, false, &o);
	assert_int_equal(gm_pool_cap(f.pool), 40 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 40 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 40 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 1, 0, &b), GM_ELIMIT);
	assert_int_equal(b, 0);
	gm_pool_last_oom(f.pool, &oom);
	assert_int_equal(oom.err, GM_ELIMIT);
	assert_int_equal(oom.kind, GM_OOM_SHORTAGE);
	assert_int_equal(stats(&f).num_ooms, 1);
	/* After the free the cached segment is released and retried. */
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 0, &b), 0);
	assert_true(gm_pool_reserved(f.pool) <= 40 * GM_MiB);
	assert_true(stats(&f).num_alloc_retries >= 1);
	gm_pool_oom_format(&oom, buf, sizeof(buf));
	assert_non_null(strstr(buf, "shortage"));
	done(&f);
}

/* gm_pool_servable(room): a pool capped at room bytes serves a request
 * of that size from empty, with or without power-of-two divisions; and
 * nothing is left on the table at the edges of the segment sizes. */
static void servable_fits(void **state)
{
	static const unsigned divs[] = {0, 4};

	(void)state;
	for (int k = 0; k < 2; k++) {
		for (uint64_t room = 512; room <= 96 * GM_MiB;
		     room += room < 24 * GM_MiB ? 256 * 1024 + 512 :
						  3 * GM_MiB + 4096) {
			struct gm_pool_options o = {
				.cap_bytes = room,
				.roundup_power2_divisions = divs[k]};
			struct fx f;
			uint64_t a, n;

			make(&f, 80 * GM_GiB, false, &o);
			n = gm_pool_servable(f.pool, room);
			assert_true(n <= room);
			if (room >= 2 * GM_MiB)
				assert_true(n >= GM_MiB);
			if (n) {
				assert_int_equal(gm_pool_alloc(f.pool, n, 0, &a),
						 0);
				assert_int_equal(gm_pool_free(f.pool, a), 0);
			}
			done(&f);
		}
	}
	{
		struct gm_pool_options o = {.cap_bytes = 65 * GM_MiB};
		struct fx f;

		make(&f, 80 * GM_GiB, false, &o);
		assert_int_equal(gm_pool_servable(f.pool, 65 * GM_MiB),
				 64 * GM_MiB);
		assert_int_equal(gm_pool_servable(f.pool, 20 * GM_MiB),
				 20 * GM_MiB);
		assert_int_equal(gm_pool_servable(f.pool, 2 * GM_MiB - 1), 0);
		done(&f);
	}
}

static void cap_fraction_and_bad(void **state)
{
	struct gm_pool_options o = {.cap_fraction = 0.5};
	struct gm_sim_options so = {.total_bytes = GM_GiB};
	struct gm_backend *be;
	struct gm_pool *p;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_pool_create(&p, be, &o, &d), 0);
	assert_int_equal(gm_pool_cap(p), GM_GiB / 2);
	gm_pool_destroy(p);
	o.cap_bytes = 100 * GM_MiB; /* the smaller wins */
	assert_int_equal(gm_pool_create(&p, be, &o, &d), 0);
	assert_int_equal(gm_pool_cap(p), 100 * GM_MiB);
	gm_pool_destroy(p);
	o.cap_bytes = 0;
	o.cap_fraction = 1.5;
	assert_int_equal(gm_pool_create(&p, be, &o, &d), GM_EINVAL);
	o.cap_fraction = -0.1;
	assert_int_equal(gm_pool_create(&p, be, &o, &d), GM_EINVAL);
	o.cap_fraction = 1e-12; /* rounds to 0 bytes */
	assert_int_equal(gm_pool_create(&p, be, &o, &d), GM_EINVAL);
	o.cap_fraction = 0;
	o.virtual_segments = true; /* backend without va ops */
	assert_int_equal(gm_pool_create(&p, be, &o, &d), GM_ENOTSUP);
	be->ops->destroy(be);
}

static void oom_fragmentation(void **state)
{
	struct gm_pool_options o = {.cap_bytes = 60 * GM_MiB};
	struct fx f;
	uint64_t a[3], x;
	struct gm_pool_oom oom;

	(void)state;
	make(&f, 80 * GM_GiB, false, &o);
	/* Three 20 MiB segments under a 60 MiB cap. */
	for (int i = 0; i < 3; i++)
		assert_int_equal(gm_pool_alloc(f.pool, 20 * GM_MiB, 0, &a[i]),
				 0);
	assert_int_equal(gm_pool_free(f.pool, a[1]), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 0, &x), 0);
	/* 8 MiB free in the middle segment, cap reached */
	assert_int_equal(gm_pool_alloc(f.pool, 10 * GM_MiB, 0, &x),
			 GM_ELIMIT);
	gm_pool_last_oom(f.pool, &oom);
	assert_int_equal(oom.kind, GM_OOM_SHORTAGE);
	assert_int_equal(gm_pool_alloc(f.pool, 6 * GM_MiB, 0, &x), 0);
	assert_int_equal(gm_pool_free(f.pool, a[0]), 0);
	/* 21 MiB: a[0]'s cached 20 MiB segment is released, but a 22 MiB
	 * segment on top of 40 MiB is over the cap, while 2 MiB free in
	 * the pool + 20 MiB headroom would cover 21 MiB: fragmentation. */
	assert_int_equal(gm_pool_alloc(f.pool, 21 * GM_MiB, 0, &x), GM_ELIMIT);
	gm_pool_last_oom(f.pool, &oom);
	assert_int_equal(oom.reserved_bytes, 40 * GM_MiB);
	assert_int_equal(oom.kind, GM_OOM_FRAGMENTATION);
	/* the released segment's room is usable again */
	assert_int_equal(gm_pool_alloc(f.pool, 20 * GM_MiB, 0, &a[0]), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 60 * GM_MiB);
	done(&f);
}

static void oom_fragmentation_kind(void **state)
{
	struct gm_pool_options o = {.cap_bytes = 40 * GM_MiB};
	struct fx f;
	uint64_t a, b, c, x;
	struct gm_pool_oom oom;

	(void)state;
	make(&f, 80 * GM_GiB, false, &o);
	/* One 20 MiB segment holding 3 blocks: 6 + 6 + 8. Free the two
	 * 6 MiB ones that are not neighbours... they are; so hold the
	 * middle: free 6 (first) and 8 (last): 14 MiB free, largest 8. */
	assert_int_equal(gm_pool_alloc(f.pool, 6 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 6 * GM_MiB, 0, &b), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 8 * GM_MiB, 0, &c), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 20 * GM_MiB, 0, &x), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 40 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	assert_int_equal(gm_pool_free(f.pool, c), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 0, &a), GM_ELIMIT);
	gm_pool_last_oom(f.pool, &oom);
	assert_int_equal(oom.kind, GM_OOM_FRAGMENTATION);
	assert_int_equal(oom.free_cached_bytes, 14 * GM_MiB);
	assert_int_equal(oom.largest_free_bytes, 8 * GM_MiB);
	{
		struct gm_pool_stats st = stats(&f);
		double want = 1.0 - 8.0 / 14.0;

		assert_true(st.fragmentation > want - 1e-9 &&
			    st.fragmentation < want + 1e-9);
		assert_int_equal(st.inactive_split_bytes.current, 14 * GM_MiB);
		assert_int_equal(st.inactive_split.current, 2);
	}
	done(&f);
}

static void device_oom_and_rollback(void **state)
{
	struct fx f;
	uint64_t a, b;

	(void)state;
	make(&f, 64 * GM_MiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 40 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 30 * GM_MiB, 0, &b),
			 GM_EDEVNOMEM);
	assert_int_equal(gm_pool_reserved(f.pool), 40 * GM_MiB);
	gm_sim_fail_after(f.be, 1);
	assert_int_equal(gm_pool_alloc(f.pool, 10 * GM_MiB, 0, &b), 0);
	/* the injected failure was retried after releasing the cache */
	assert_int_equal(gm_pool_reserved(f.pool), 50 * GM_MiB);
	assert_int_equal(gm_sim_used(f.be), 50 * GM_MiB);
	done(&f);
}

static void streams_and_events(void **state)
{
	struct fx f;
	uint64_t a, b;

	(void)state;
	make(&f, 80 * GM_GiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 1, &a), 0);
	gm_sim_launch(f.be, 1); /* a kernel still writes a on stream 1 */
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	/* same stream: reused at once */
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 1, &b), 0);
	assert_int_equal(b, a);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	/* another stream: not while the kernel runs */
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 2, &b), 0);
	assert_true(b != a);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	gm_sim_finish(f.be, 1);
	assert_int_equal(gm_pool_alloc(f.pool, 12 * GM_MiB, 3, &b), 0);
	assert_true(b == a || stats(&f).num_cross_stream_reuse == 1);
	assert_int_equal(stats(&f).num_cross_stream_reuse, 1);
	assert_int_equal(stats(&f).reserved_bytes.current, 24 * GM_MiB);
	done(&f);
}

/*
 * With one stream the allocated and active counts live only in its
 * arena; a second stream folds them into the pool-wide counters. The
 * stats must read the same on both sides of that switch, peaks included
 * (also after a reset while there was one stream).
 */
static void stats_across_second_stream(void **state)
{
	struct fx f;
	uint64_t a, b, c, d;
	struct gm_pool_stats st;

	(void)state;
	make(&f, 80 * GM_GiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 8 * GM_MiB, 1, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 4 * GM_MiB, 1, &b), 0);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 4 * GM_MiB);
	assert_int_equal(st.allocated_bytes.peak, 12 * GM_MiB);
	assert_int_equal(st.active_bytes.peak, 12 * GM_MiB);
	gm_pool_reset_peaks(f.pool);
	assert_int_equal(stats(&f).allocated_bytes.peak, 4 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 2 * GM_MiB, 1, &c), 0);
	assert_int_equal(gm_pool_alloc(f.pool, GM_MiB, 2, &d), 0);
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 7 * GM_MiB);
	assert_int_equal(st.allocated_bytes.peak, 7 * GM_MiB);
	assert_int_equal(st.active_bytes.current, 7 * GM_MiB);
	assert_int_equal(st.active_bytes.peak, 7 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, c), 0);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	assert_int_equal(gm_pool_free(f.pool, d), 0);
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 0);
	assert_int_equal(st.active_bytes.current, 0);
	assert_int_equal(st.allocated_bytes.peak, 7 * GM_MiB);
	/* historical totals (PyTorch's "allocated" and "freed") */
	assert_int_equal(st.allocations.allocated, 4);
	assert_int_equal(st.allocations.freed, 4);
	assert_int_equal(st.requested_bytes.allocated, 15 * GM_MiB);
	assert_int_equal(st.requested_bytes.freed, 15 * GM_MiB);
	done(&f);
}

static void record_stream_defers(void **state)
{
	struct fx f;
	uint64_t a, b;
	struct gm_pool_stats st;

	(void)state;
	make(&f, 80 * GM_GiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &a), 0);
	assert_int_equal(gm_pool_record_stream(f.pool, a, 7), 0);
	assert_int_equal(gm_pool_record_stream(f.pool, 999, 7), GM_ENOTFOUND);
	gm_sim_launch(f.be, 7);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	st = stats(&f);
	assert_int_equal(st.allocated_bytes.current, 0);
	assert_int_equal(st.active_bytes.current, 4096);
	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &b), 0);
	assert_true(b != a);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	gm_sim_finish(f.be, 7);
	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &b), 0);
	assert_int_equal(b, a);
	st = stats(&f);
	assert_int_equal(st.active_bytes.current, 4096);
	/* The reused block starts without the old block's stream uses: its
	 * free, with no record_stream this time, is not held for stream 7
	 * (a stale use kept it pending and leaked its events array). */
	gm_sim_launch(f.be, 7);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	st = stats(&f);
	assert_int_equal(st.active_bytes.current, 0);
	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &b), 0);
	assert_int_equal(b, a);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	gm_sim_finish(f.be, 7);
	done(&f);
}

static void virtual_segments_grow_shrink(void **state)
{
	struct gm_pool_options o = {.virtual_segments = true};
	struct fx f;
	uint64_t a, b, c;
	struct gm_pool_stats st;

	(void)state;
	make(&f, 8 * GM_GiB, true, &o);
	assert_int_equal(gm_pool_alloc(f.pool, 3 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 4 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 3 * GM_MiB, 0, &b), 0);
	/* grows in place: contiguous, 6 MiB mapped */
	assert_int_equal(b, a + 3 * GM_MiB);
	assert_int_equal(gm_pool_reserved(f.pool), 6 * GM_MiB);
	assert_int_equal(gm_pool_alloc(f.pool, 100 * GM_MiB + 7, 0, &c), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 106 * GM_MiB + 2 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, c), 0);
	assert_int_equal(gm_pool_release_cached(f.pool), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 6 * GM_MiB);
	assert_int_equal(gm_sim_used(f.be), 6 * GM_MiB);
	st = stats(&f);
	assert_int_equal(st.segments.current, 1);
	/* failure part-way leaves nothing mapped */
	gm_sim_fail_after(f.be, 1);
	gm_sim_fail_after(f.be, 1);
	assert_int_equal(gm_pool_alloc(f.pool, 64 * GM_MiB, 0, &c), 0);
	assert_int_equal(gm_pool_reserved(f.pool), gm_sim_used(f.be));
	done(&f);
}

/*
 * Interior unmapping (pool.c, virtual segments policy): a free block in
 * the middle of the segment gives its whole granules back before the
 * segment grows past the slack, so the peak stays at the live bytes;
 * the hole is mapped again (lowest address first) for a request it fits.
 */
static void virtual_segments_interior_unmap(void **state)
{
	struct gm_pool_options o = {.virtual_segments = true};
	struct fx f;
	uint64_t a, b, c, d, e;
	struct gm_pool_stats st;
	struct gm_val *v;
	const struct gm_val *bl;

	(void)state;
	make(&f, 8 * GM_GiB, true, &o);
	assert_int_equal(gm_pool_alloc(f.pool, 10 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 10 * GM_MiB, 0, &b), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 10 * GM_MiB, 0, &c), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 30 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 30 * GM_MiB);
	/* 40 MiB does not fit: b's 5 granules go back first */
	assert_int_equal(gm_pool_alloc(f.pool, 40 * GM_MiB, 0, &d), 0);
	assert_int_equal(d, c + 10 * GM_MiB);
	assert_int_equal(gm_sim_mapped(f.be, b, 10 * GM_MiB), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 60 * GM_MiB);
	assert_int_equal(gm_sim_used(f.be), 60 * GM_MiB);
	st = stats(&f);
	assert_int_equal(st.reserved_bytes.peak, 60 * GM_MiB);
	assert_int_equal(st.num_device_free, 1);
	assert_int_equal(st.free_bytes, 0);
	/* the snapshot shows the hole; total_size_bytes is what is mapped */
	v = gm_pool_snapshot(f.pool);
	bl = gm_obj_get(gm_arr_at(gm_obj_get(v, "segments"), 0), "blocks");
	assert_int_equal(gm_val_len(bl), 4);
	assert_string_equal(gm_val_as_str(gm_obj_get(gm_arr_at(bl, 1),
						     "state")), "unmapped");
	assert_int_equal(gm_val_as_uint(gm_obj_get(gm_arr_at(gm_obj_get(v,
			 "segments"), 0), "total_size_bytes")), 60 * GM_MiB);
	gm_val_free(v);
	/* a 6 MiB request maps 3 granules of the hole, at its start */
	assert_int_equal(gm_pool_alloc(f.pool, 6 * GM_MiB, 0, &e), 0);
	assert_int_equal(e, b);
	assert_int_equal(gm_pool_reserved(f.pool), 66 * GM_MiB);
	assert_int_equal(gm_sim_mapped(f.be, b, 10 * GM_MiB), 6 * GM_MiB);
	/* a failed map into the hole leaves it as it was, then the retry
	 * after releasing the cache succeeds */
	assert_int_equal(gm_pool_free(f.pool, e), 0);
	assert_int_equal(gm_pool_release_cached(f.pool), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 60 * GM_MiB);
	gm_sim_fail_after(f.be, 1);
	assert_int_equal(gm_pool_alloc(f.pool, 4 * GM_MiB, 0, &e), 0);
	assert_int_equal(e, b);
	assert_int_equal(gm_pool_reserved(f.pool), 64 * GM_MiB);
	assert_int_equal(gm_pool_reserved(f.pool), gm_sim_used(f.be));
	/* freeing everything and releasing unmaps all */
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	assert_int_equal(gm_pool_free(f.pool, c), 0);
	assert_int_equal(gm_pool_free(f.pool, d), 0);
	assert_int_equal(gm_pool_free(f.pool, e), 0);
	assert_int_equal(gm_pool_release_cached(f.pool), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 0);
	assert_int_equal(gm_sim_used(f.be), 0);
	done(&f);
}

static void no_cache_mode(void **state)
{
	struct gm_pool_options o = {.no_cache = true, .cap_bytes = GM_MiB};
	struct fx f;
	uint64_t a;

	(void)state;
	make(&f, GM_GiB, false, &o);
	assert_int_equal(gm_pool_alloc(f.pool, 1000, 0, &a), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 1024);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	assert_int_equal(gm_pool_reserved(f.pool), 0);
	assert_int_equal(gm_pool_alloc(f.pool, GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 1, 0, &a), GM_ELIMIT);
	done(&f);
}

static void lookup_and_snapshot(void **state)
{
	struct fx f;
	uint64_t a, base = 0, size = 0;
	struct gm_val *v;
	const struct gm_val *segs, *blocks;

	(void)state;
	make(&f, GM_GiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 1000, 0, &a), 0);
	assert_int_equal(gm_pool_lookup(f.pool, a + 999, &base, &size), 0);
	assert_int_equal(base, a);
	assert_int_equal(size, 1024);
	assert_int_equal(gm_pool_lookup(f.pool, a + 1024, NULL, NULL),
			 GM_ENOTFOUND);
	v = gm_pool_snapshot(f.pool);
	segs = gm_obj_get(v, "segments");
	assert_int_equal(gm_val_len(segs), 1);
	blocks = gm_obj_get(gm_arr_at(segs, 0), "blocks");
	assert_int_equal(gm_val_len(blocks), 2);
	assert_string_equal(gm_val_as_str(gm_obj_get(gm_arr_at(blocks, 0),
						     "state")),
			    "active_allocated");
	assert_int_equal(gm_val_as_uint(gm_obj_get(gm_arr_at(blocks, 0),
						   "requested_size_bytes")),
			 1000);
	gm_val_free(v);
	{
		struct gm_pool_stats st = stats(&f);

		v = gm_pool_stats_val(&st);
		assert_int_equal(gm_val_as_uint(gm_obj_get(v,
				 "peak_reserved_bytes")), 2 * GM_MiB);
		assert_int_equal(st.histogram[10], 1);
		gm_val_free(v);
	}
	done(&f);
}


/* gm_pool_alloc_try: where the allocation would release cached segments
 * it refuses with nothing released, recorded or charged; gm_pool_alloc
 * then releases and succeeds. gm_pool_small_state: equal after a run of
 * small requests that brings the small pool back, different while a
 * block is live; gm_pool_is_small follows the 1 MiB rounding. */
static void try_alloc_and_small_state(void **state)
{
	struct fx f;
	uint64_t a, b, s1[64], s2[64], s3[64], dc;
	size_t n1, n2, n3;
	struct gm_pool_stats st;

	(void)state;
	make(&f, 100 * GM_MiB, false, NULL);
	assert_true(gm_pool_is_small(f.pool, GM_MiB));
	assert_false(gm_pool_is_small(f.pool, GM_MiB + 1));
	assert_false(gm_pool_is_small(f.pool, 0));
	assert_int_equal(gm_pool_alloc(f.pool, 60 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_free(f.pool, a), 0); /* cached */
	dc = gm_pool_device_calls(f.pool);
	assert_int_equal(gm_pool_alloc_try(f.pool, 70 * GM_MiB, 0, &b),
			 GM_EDEVNOMEM);
	st = stats(&f);
	assert_int_equal(st.reserved_bytes.current, 60 * GM_MiB);
	assert_int_equal(st.num_alloc_retries, 0);
	assert_int_equal(st.num_ooms, 0);
	assert_int_equal(gm_pool_releases(f.pool), 0);
	assert_int_equal(gm_pool_device_calls(f.pool), dc);
	assert_int_equal(gm_pool_alloc(f.pool, 70 * GM_MiB, 0, &b), 0);
	assert_true(gm_pool_releases(f.pool) > 0);
	assert_int_equal(stats(&f).reserved_bytes.current, 70 * GM_MiB);
	/* a cached block serves the try as gm_pool_alloc would */
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	assert_int_equal(gm_pool_alloc_try(f.pool, 70 * GM_MiB, 0, &a), 0);
	assert_int_equal(a, b);
	assert_int_equal(gm_pool_free(f.pool, a), 0);

	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &a), 0);
	n1 = gm_pool_small_state(f.pool, 0, s1, 64);
	assert_int_equal(n1, 3 + 3 * 2); /* one segment: a and the rest */
	dc = gm_pool_device_calls(f.pool);
	assert_int_equal(gm_pool_alloc(f.pool, 1000, 0, &b), 0);
	n2 = gm_pool_small_state(f.pool, 0, s2, 64);
	assert_true(n2 != n1 || memcmp(s1, s2, n1 * sizeof(*s1)));
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	n3 = gm_pool_small_state(f.pool, 0, s3, 64);
	assert_int_equal(n3, n1);
	assert_memory_equal(s1, s3, n1 * sizeof(*s1));
	assert_int_equal(gm_pool_device_calls(f.pool), dc);
	assert_int_equal(gm_pool_small_state(f.pool, 0, s3, 2), n1);
	assert_int_equal(gm_pool_small_state(f.pool, 7, s3, 64), 0);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	done(&f);
}

/* gm_pool_state and gm_sim_state: the same words after calls that
 * bring the pool and the card back (a free into a cached segment), other
 * words while a block is live, after a release of the cache (the segment
 * back with the card) and on a card of another size. */
static void whole_state(void **state)
{
	struct fx f, g;
	uint64_t a, b, p0[256], p1[256], s0[256], s1[256];
	size_t np0, np1, ns0, ns1;

	(void)state;
	make(&f, 100 * GM_MiB, false, NULL);
	make(&g, 200 * GM_MiB, false, NULL);
	assert_int_equal(gm_pool_alloc(f.pool, 30 * GM_MiB, 0, &a), 0);
	assert_int_equal(gm_pool_alloc(f.pool, 4096, 0, &b), 0);
	np0 = gm_pool_state(f.pool, p0, 256);
	ns0 = gm_sim_state(f.be, s0, 256);
	assert_true(np0 > 0 && np0 <= 256 && ns0 > 0 && ns0 <= 256);
	/* a short buffer: the count, the first words */
	assert_int_equal(gm_pool_state(f.pool, p1, 3), np0);
	assert_int_equal(gm_sim_state(f.be, s1, 1), ns0);
	assert_int_equal(s1[0], 100 * GM_MiB);
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	np1 = gm_pool_state(f.pool, p1, 256);
	assert_true(np1 != np0 || memcmp(p0, p1, np0 * sizeof(*p0)));
	assert_int_equal(gm_pool_alloc(f.pool, 30 * GM_MiB, 0, &a), 0);
	np1 = gm_pool_state(f.pool, p1, 256);
	ns1 = gm_sim_state(f.be, s1, 256);
	assert_int_equal(np1, np0);
	assert_memory_equal(p0, p1, np0 * sizeof(*p0));
	assert_int_equal(ns1, ns0);
	assert_memory_equal(s0, s1, ns0 * sizeof(*s0));
	/* released and made again: the pool's words may come back, the
	 * card's say where the segment went */
	assert_int_equal(gm_pool_free(f.pool, a), 0);
	assert_int_equal(gm_pool_release_cached(f.pool), 0);
	ns1 = gm_sim_state(f.be, s1, 256);
	assert_true(ns1 != ns0 || memcmp(s0, s1, ns0 * sizeof(*s0)));
	/* the same calls on a larger card */
	assert_int_equal(gm_pool_alloc(g.pool, 30 * GM_MiB, 0, &a), 0);
	ns1 = gm_sim_state(g.be, s1, 256);
	assert_true(ns1 != ns0 || memcmp(s0, s1, ns0 * sizeof(*s0)));
	assert_int_equal(gm_pool_free(g.pool, a), 0);
	assert_int_equal(gm_pool_free(f.pool, b), 0);
	done(&f);
	done(&g);
}

/*
 * A single_thread pool (the planner's replay) makes the same decisions
 * and keeps the same statistics as a thread-safe one: one random
 * sequence of allocations (also gm_pool_alloc_try), frees,
 * record_stream() uses, releases and peak resets on three streams, under
 * a cap (so allocations fail, release the cache and retry) and with a
 * second stream appearing mid-way, on both pools; every answer and the
 * whole statistics after every call must be equal.
 */
static uint64_t st_xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void st_same_stats(struct fx *a, struct fx *b)
{
	struct gm_pool_stats x = stats(a), y = stats(b);

	assert_memory_equal(&x, &y, sizeof(x));
	assert_int_equal(gm_pool_reserved(a->pool), gm_pool_reserved(b->pool));
}

static void st_run(const struct gm_pool_options *base, bool va,
		   uint64_t seed)
{
	struct gm_pool_options o1 = *base, o2 = *base;
	struct fx f[2];
	uint64_t live[2][64] = {{0}}, s = seed;
	int n = 0;

	o2.single_thread = true;
	make(&f[0], 2 * GM_GiB, va, &o1);
	make(&f[1], 2 * GM_GiB, va, &o2);
	for (int step = 0; step < 4000; step++) {
		unsigned r = (unsigned)(st_xs(&s) % 100);
		/* stream 0 alone for the first 500 calls: the pool-wide
		 * count starts when stream 1 and 2 appear */
		uintptr_t stream = step < 500 ? 0 : (uintptr_t)(st_xs(&s) % 3);

		if (n && (r < 45 || n == 64)) {
			int i = (int)(st_xs(&s) % (uint64_t)n);

			assert_int_equal(gm_pool_free(f[0].pool, live[0][i]),
					 gm_pool_free(f[1].pool, live[1][i]));
			n--;
			live[0][i] = live[0][n];
			live[1][i] = live[1][n];
		} else if (r < 90) {
			unsigned bits = 9 + (unsigned)(st_xs(&s) % 18);
			uint64_t size = ((uint64_t)1 << bits) +
					st_xs(&s) % ((uint64_t)1 << bits);
			int (*fn)(struct gm_pool *, uint64_t, uintptr_t,
				  uint64_t *) = r < 85 ? gm_pool_alloc :
							 gm_pool_alloc_try;
			int e0 = fn(f[0].pool, size, stream, &live[0][n]);
			int e1 = fn(f[1].pool, size, stream, &live[1][n]);

			assert_int_equal(e0, e1);
			assert_int_equal(live[0][n], live[1][n]);
			if (!e0)
				n++;
		} else if (r < 94 && n) {
			int i = (int)(st_xs(&s) % (uint64_t)n);
			uintptr_t other = (stream + 1) % 3;

			assert_int_equal(
				gm_pool_record_stream(f[0].pool, live[0][i],
						      other),
				gm_pool_record_stream(f[1].pool, live[1][i],
						      other));
		} else if (r < 97) {
			assert_int_equal(gm_pool_release_cached(f[0].pool),
					 gm_pool_release_cached(f[1].pool));
		} else if (r < 98) {
			gm_pool_reset_peaks(f[0].pool);
			gm_pool_reset_peaks(f[1].pool);
		}
		st_same_stats(&f[0], &f[1]);
	}
	for (int i = 0; i < n; i++) {
		assert_int_equal(gm_pool_free(f[0].pool, live[0][i]), 0);
		assert_int_equal(gm_pool_free(f[1].pool, live[1][i]), 0);
	}
	st_same_stats(&f[0], &f[1]);
	done(&f[0]);
	done(&f[1]);
}

static void single_thread_same(void **state)
{
	struct gm_pool_options capped = {.cap_bytes = 600 * GM_MiB};
	struct gm_pool_options rules = {.cap_bytes = 900 * GM_MiB,
					.max_split_bytes = 40 * GM_MiB,
					.roundup_power2_divisions = 4,
					.no_cross_stream = true};
	struct gm_pool_options virt = {.cap_bytes = 600 * GM_MiB,
				       .virtual_segments = true};

	(void)state;
	st_run(&capped, false, 0x9e3779b97f4a7c15ULL);
	st_run(&rules, false, 12345);
	st_run(&virt, true, 777);
}

/* gm_pool_small_max() bounds exactly the sizes gm_pool_is_small()
 * accepts, under each rounding rule and pool kind. */
static void small_max_bounds_is_small(void **state)
{
	struct gm_pool_options opts[] = {
		{0},
		{.roundup_power2_divisions = 4},
		{.roundup_power2_divisions = 8, .max_split_bytes = 4 * GM_MiB},
		{.no_cache = true},
		{.virtual_segments = true},
	};
	uint64_t s = 99;

	(void)state;
	for (size_t k = 0; k < sizeof(opts) / sizeof(opts[0]); k++) {
		struct fx f;
		uint64_t m;

		make(&f, 8 * GM_GiB, opts[k].virtual_segments, &opts[k]);
		m = gm_pool_small_max(f.pool);
		assert_int_equal(m, opts[k].no_cache ||
				 opts[k].virtual_segments ? 0 : GM_MiB);
		for (int i = 0; i < 20000; i++) {
			uint64_t size = i < 8 ? (uint64_t[]){0, 1, 511, 512,
				GM_MiB - 1, GM_MiB, GM_MiB + 1,
				2 * GM_MiB}[i] : st_xs(&s) % (4 * GM_MiB);

			assert_int_equal(gm_pool_is_small(f.pool, size),
					 size >= 1 && size <= m);
		}
		done(&f);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rounding_and_pools),
		cmocka_unit_test(divisions),
		cmocka_unit_test(cap_exact),
		cmocka_unit_test(cap_fraction_and_bad),
		cmocka_unit_test(oom_fragmentation),
		cmocka_unit_test(oom_fragmentation_kind),
		cmocka_unit_test(device_oom_and_rollback),
		cmocka_unit_test(streams_and_events),
		cmocka_unit_test(stats_across_second_stream),
		cmocka_unit_test(record_stream_defers),
		cmocka_unit_test(servable_fits),
		cmocka_unit_test(virtual_segments_grow_shrink),
		cmocka_unit_test(virtual_segments_interior_unmap),
		cmocka_unit_test(no_cache_mode),
		cmocka_unit_test(lookup_and_snapshot),
		cmocka_unit_test(peaks_across_threads),
		cmocka_unit_test(try_alloc_and_small_state),
		cmocka_unit_test(whole_state),
		cmocka_unit_test(single_thread_same),
		cmocka_unit_test(small_max_bounds_is_small),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
