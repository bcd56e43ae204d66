/*
 * Property tests for core/pool.c: random allocate/free sequences (sizes
 * from 1 byte to 4 GiB, several streams; then several threads) checked
 * against a simple reference model after every step: live blocks never
 * overlap, every address is 512-aligned, the counters equal what the
 * reference and a walk over the snapshot compute, reserved bytes equal
 * what the simulated device handed out and never pass the cap. With
 * virtual segments: every granule a live block touches is mapped (no
 * live block on an unmapped granule), and after a release the mapped
 * bytes are exactly the granules the live blocks touch (the reference
 * computes that union itself).
 */
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

#define MAXLIVE 256

struct live {
	uint64_t addr, size, rounded;
	uintptr_t stream;
};

struct model {
	struct live live[MAXLIVE];
	int n;
	uint64_t alloc_bytes, req_bytes, peak_alloc, peak_reserved;
};

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Log-uniform size in [1, 4 GiB]. */
static uint64_t rand_size(uint64_t *s)
{
	unsigned bits = (unsigned)(xs(s) % 33);
	uint64_t base = (uint64_t)1 << bits;

	return base + xs(s) % base;
}

/* The reference's own rounding (PyTorch: >= 512, multiple of 512). */
static uint64_t ref_round(uint64_t n)
{
	return n < 512 ? 512 : (n + 511) / 512 * 512;
}

/* Walk the snapshot: inactive-split bytes/count, largest free block,
 * allocated bytes; and check segments tile exactly with blocks. */
static void walk_snapshot(struct gm_pool *p, uint64_t *isplit,
			  uint64_t *nsplit, uint64_t *largest,
			  uint64_t *allocated, uint64_t *reserved)
{
	struct gm_val *v = gm_pool_snapshot(p);
	const struct gm_val *segs = gm_obj_get(v, "segments");

	*isplit = *nsplit = *largest = *allocated = *reserved = 0;
	for (size_t i = 0; i < gm_val_len(segs); i++) {
		const struct gm_val *s = gm_arr_at(segs, i);
		const struct gm_val *bl = gm_obj_get(s, "blocks");
		uint64_t at = gm_val_as_uint(gm_obj_get(s, "address"));
		uint64_t total = gm_val_as_uint(gm_obj_get(s,
					"total_size_bytes"));
		uint64_t sum = 0, mapped = 0;

		*reserved += total;
		for (size_t k = 0; k < gm_val_len(bl); k++) {
			const struct gm_val *b = gm_arr_at(bl, k);
			uint64_t sz = gm_val_as_uint(gm_obj_get(b,
						"size_bytes"));
			const char *st = gm_val_as_str(gm_obj_get(b, "state"));

			assert_int_equal(gm_val_as_uint(gm_obj_get(b,
					 "address")), at + sum);
			sum += sz;
			if (strcmp(st, "unmapped") == 0) {
				/* whole granules; holes always merged */
				assert_int_equal(sz % (2 * GM_MiB), 0);
				if (k > 0)
					assert_string_not_equal(
						gm_val_as_str(gm_obj_get(
						gm_arr_at(bl, k - 1), "state")),
						"unmapped");
				continue;
			}
			mapped += sz;
			if (strcmp(st, "inactive") == 0) {
				if (sz > *largest)
					*largest = sz;
				if (gm_val_len(bl) > 1) {
					*isplit += sz;
					(*nsplit)++;
				}
				/* free neighbours are always merged */
				if (k > 0)
					assert_string_not_equal(
						gm_val_as_str(gm_obj_get(
						gm_arr_at(bl, k - 1), "state")),
						"inactive");
			} else {
				*allocated += sz;
			}
		}
		assert_int_equal(mapped, total);
	}
	gm_val_free(v);
}

static void check(struct gm_pool *p, struct gm_backend *be,
		  struct model *m, uint64_t cap)
{
	struct gm_pool_stats st;
	uint64_t isplit, nsplit, largest, allocated, reserved;

	gm_pool_get_stats(p, &st);
	walk_snapshot(p, &isplit, &nsplit, &largest, &allocated, &reserved);
	if (st.reserved_bytes.current > m->peak_reserved)
		m->peak_reserved = st.reserved_bytes.current;
	assert_int_equal(st.allocated_bytes.current, m->alloc_bytes);
	assert_int_equal(st.active_bytes.current, m->alloc_bytes);
	assert_int_equal(st.requested_bytes.current, m->req_bytes);
	assert_int_equal(st.allocations.current, (uint64_t)m->n);
	assert_int_equal(st.active.current, (uint64_t)m->n);
	assert_int_equal(st.allocated_bytes.peak, m->peak_alloc);
	assert_int_equal(st.reserved_bytes.current, gm_sim_used(be));
	assert_int_equal(st.reserved_bytes.current, reserved);
	assert_int_equal(st.reserved_bytes.peak, m->peak_reserved);
	assert_true(st.reserved_bytes.current <= cap);
	assert_int_equal(allocated, m->alloc_bytes);
	assert_int_equal(st.inactive_split_bytes.current, isplit);
	assert_int_equal(st.inactive_split.current, nsplit);
	assert_int_equal(st.largest_free_bytes, largest);
	assert_int_equal(st.free_bytes, reserved - m->alloc_bytes);
	assert_int_equal(st.reserved_bytes.allocated -
			 st.reserved_bytes.freed, st.reserved_bytes.current);
}

static void no_overlap(const struct model *m, uint64_t addr, uint64_t size)
{
	for (int i = 0; i < m->n; i++) {
		const struct live *l = &m->live[i];

		assert_false(addr < l->addr + l->rounded &&
			     l->addr < addr + size);
	}
}

static int cmp_addr(const void *a, const void *b)
{
	const struct live *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/*
 * Virtual segments: each live block's granules are all mapped on the
 * simulated device; returns the bytes of the union of those granules
 * (2 MiB), what the segments must map at the least.
 */
static uint64_t live_granules(struct gm_backend *be, const struct model *m)
{
	const uint64_t g = 2 * GM_MiB;
	struct live *l = malloc(sizeof(m->live));
	uint64_t total = 0, end = 0;

	assert_non_null(l);
	memcpy(l, m->live, sizeof(m->live));
	qsort(l, (size_t)m->n, sizeof(*l), cmp_addr);
	for (int i = 0; i < m->n; i++) {
		uint64_t lo = l[i].addr / g * g;
		uint64_t hi = (l[i].addr + l[i].rounded + g - 1) / g * g;

		assert_int_equal(gm_sim_mapped(be, l[i].addr, l[i].rounded),
				 hi - lo);
		if (lo < end)
			lo = end;
		if (hi > lo)
			total += hi - lo;
		if (hi > end)
			end = hi;
	}
	free(l);
	return total;
}

/*
 * every: check after one step in `every` (1: after each); with more,
 * the state the allocate/free fast paths leave (a deferred carve, undone
 * by the next free of its block) meets the next allocate, free, release
 * or stream without a stats read in between. lifo: one free in four
 * frees the newest block (so that undo happens often).
 */
static void run_mode(uint64_t seed, bool va, uint64_t cap, int steps,
		     int every, bool lifo)
{
	struct gm_sim_options so = {.total_bytes = 141 * GM_GB,
				    .virtual_segments = va};
	struct gm_pool_options o = {.cap_bytes = cap,
				    .virtual_segments = va};
	struct gm_backend *be;
	struct gm_pool *p;
	struct gm_diag d;
	struct model m;
	uint64_t s = seed, limit = cap ? cap : so.total_bytes;

	memset(&m, 0, sizeof(m));
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_pool_create(&p, be, &o, &d), 0);
	for (int step = 0; step < steps; step++) {
		uint64_t r = xs(&s) % 100;

		if (m.n && (r < 40 || m.n == MAXLIVE)) {
			int i = lifo && r % 4 == 0 ? m.n - 1 :
				(int)(xs(&s) % (uint64_t)m.n);

			assert_int_equal(gm_pool_free(p, m.live[i].addr), 0);
			m.alloc_bytes -= m.live[i].rounded;
			m.req_bytes -= m.live[i].size;
			m.live[i] = m.live[--m.n];
		} else if (r < 43) {
			assert_int_equal(gm_pool_release_cached(p), 0);
			if (va)
				assert_int_equal(gm_pool_reserved(p),
						 live_granules(be, &m));
		} else {
			uint64_t size = rand_size(&s), addr;
			uintptr_t stream = (uintptr_t)(xs(&s) % 3);
			int err = gm_pool_alloc(p, size, stream, &addr);

			if (err) {
				assert_true(err == GM_ELIMIT ||
					    err == GM_EDEVNOMEM);
				assert_int_equal(addr, 0);
			} else {
				uint64_t rd = ref_round(size), bs = 0;

				/* A large block is handed out whole when at
				 * most 1 MiB would remain (PyTorch
				 * should_split); allocated counts it all. */
				assert_int_equal(gm_pool_lookup(p, addr, NULL,
								&bs), 0);
				assert_true(bs >= rd);
				assert_true(bs - rd <= (va || rd <= GM_MiB ?
							0 : GM_MiB));
				rd = bs;
				assert_int_equal(addr % 512, 0);
				no_overlap(&m, addr, rd);
				m.live[m.n++] = (struct live){addr, size, rd,
							      stream};
				m.alloc_bytes += rd;
				m.req_bytes += size;
				if (m.alloc_bytes > m.peak_alloc)
					m.peak_alloc = m.alloc_bytes;
			}
		}
		/* (a cheap read that leaves the fast paths' state alone) */
		if (gm_pool_reserved(p) > m.peak_reserved)
			m.peak_reserved = gm_pool_reserved(p);
		if (step % every == every - 1 || step == steps - 1)
			check(p, be, &m, limit);
		if (va)
			assert_true(live_granules(be, &m) <=
				    gm_pool_reserved(p));
	}
	gm_pool_destroy(p);
	assert_int_equal(gm_sim_used(be), 0);
	be->ops->destroy(be);
}

static void run(uint64_t seed, bool va, uint64_t cap, int steps)
{
	run_mode(seed, va, cap, steps, 1, false);
}

static void plain_no_cap(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++)
		run(seed * 7919, false, 0, 1500);
}

static void plain_with_cap(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++)
		run(seed * 104729, false, 20 * GM_GiB + 512 * seed, 1500);
}

static void virtual_with_cap(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++)
		run(seed * 15485863, true, 24 * GM_GiB, 1500);
}

/* Checks every 7th step, newest block freed often (the fast paths'
 * deferred carve meets every other operation). */
static void sparse_checks(void **state)
{
	(void)state;
	for (uint64_t seed = 1; seed <= 4; seed++) {
		run_mode(seed * 31337, false, 0, 3000, 7, true);
		run_mode(seed * 7331, false, 20 * GM_GiB, 3000, 5, true);
		run_mode(seed * 1009, true, 24 * GM_GiB, 3000, 3, true);
	}
}

/* ==== Threads ==== */

#define NTHREADS 8
#define TLIVE 64

struct targ {
	struct gm_pool *p;
	uint64_t cap, seed;
	struct live live[TLIVE];
	int n;
	int failures;
};

static void *worker(void *arg)
{
	struct targ *t = arg;
	uint64_t s = t->seed;

	for (int step = 0; step < 20000; step++) {
		if (t->n && (xs(&s) % 2 || t->n == TLIVE)) {
			int i = (int)(xs(&s) % (uint64_t)t->n);

			if (gm_pool_free(t->p, t->live[i].addr))
				t->failures++;
			t->live[i] = t->live[--t->n];
		} else {
			/* mostly small and medium, sometimes up to 1 GiB */
			uint64_t size = xs(&s) % 16 ? xs(&s) % (4 * GM_MiB) + 1
						    : xs(&s) % GM_GiB + 1;
			/* half the threads share stream 0 */
			uintptr_t stream = t->seed % 2 ? (uintptr_t)t->seed : 0;
			uint64_t addr;

			if (!gm_pool_alloc(t->p, size, stream, &addr)) {
				uint64_t bs = 0;

				if (addr % 512 ||
				    gm_pool_lookup(t->p, addr, NULL, &bs) ||
				    bs < ref_round(size))
					t->failures++;
				t->live[t->n++] = (struct live){
					addr, size, bs, stream};
			}
		}
		if (gm_pool_reserved(t->p) > t->cap)
			t->failures++;
	}
	return NULL;
}

static int cmp_live(const void *a, const void *b)
{
	const struct live *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void threads(void **state)
{
	struct gm_sim_options so = {.total_bytes = 141 * GM_GB};
	struct gm_pool_options o = {.cap_bytes = 6 * GM_GiB};
	static struct targ ta[NTHREADS];
	static struct live all[NTHREADS * TLIVE];
	pthread_t th[NTHREADS];
	struct gm_backend *be;
	struct gm_pool *p;
	struct gm_pool_stats st;
	struct gm_diag d;
	uint64_t bytes = 0, req = 0;
	int n = 0;

	(void)state;
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_pool_create(&p, be, &o, &d), 0);
	for (int i = 0; i < NTHREADS; i++) {
		ta[i] = (struct targ){.p = p, .cap = o.cap_bytes,
				      .seed = (uint64_t)i + 1};
		pthread_create(&th[i], NULL, worker, &ta[i]);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(ta[i].failures, 0);
		for (int k = 0; k < ta[i].n; k++) {
			all[n++] = ta[i].live[k];
			bytes += ta[i].live[k].rounded;
			req += ta[i].live[k].size;
		}
	}
	qsort(all, (size_t)n, sizeof(all[0]), cmp_live);
	for (int i = 1; i < n; i++)
		assert_true(all[i - 1].addr + all[i - 1].rounded <=
			    all[i].addr);
	gm_pool_get_stats(p, &st);
	assert_int_equal(st.allocated_bytes.current, bytes);
	assert_int_equal(st.requested_bytes.current, req);
	assert_int_equal(st.allocations.current, (uint64_t)n);
	assert_int_equal(st.reserved_bytes.current, gm_sim_used(be));
	assert_true(st.reserved_bytes.peak <= o.cap_bytes);
	for (int i = 0; i < n; i++)
		assert_int_equal(gm_pool_free(p, all[i].addr), 0);
	gm_pool_get_stats(p, &st);
	assert_int_equal(st.allocated_bytes.current, 0);
	assert_int_equal(st.inactive_split_bytes.current, 0);
	assert_int_equal(gm_pool_release_cached(p), 0);
	assert_int_equal(gm_pool_reserved(p), 0);
	gm_pool_destroy(p);
	be->ops->destroy(be);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plain_no_cap),
		cmocka_unit_test(plain_with_cap),
		cmocka_unit_test(virtual_with_cap),
		cmocka_unit_test(sparse_checks),
		cmocka_unit_test(threads),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
