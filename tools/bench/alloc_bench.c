/*
 * alloc_bench.c - host time of one allocate + free pair in the allocator
 * core, on the simulated backend (no device time in it).
 *
 * For each live count N (1, 1,000, 10,000, 100,000) and thread count T
 * (1 and 8, or as given): the pool is filled with N live allocations
 * (N/T per thread, each thread on its own stream, plus a run where all
 * threads share stream 0), then each thread runs batches of 1,000 pairs; the figure
 * is the median over batches of the mean ns per pair. Sizes are
 * log-uniform over 512 B .. 32 MiB, as the PyTorch measurement in
 * tools/bench/results/device-probe-h200.md. Two patterns per row:
 *  - pair: allocate then free the same block while N others stay live
 *    (the pattern of that PyTorch measurement: c10 raw_alloc then
 *    raw_delete);
 *  - churn: free a random one of the N live blocks, allocate a new one
 *    in its place (every pair touches cold memory; harsher).
 * Prints a markdown table.
 *
 * Usage: alloc_bench [pairs-per-thread [threads]]
 *   pairs-per-thread: default 200000; threads: the thread count of the
 *   multi-thread rows (2..64, default 8); 1 runs only the single-thread
 *   rows (for profiling, e.g. under callgrind).
 */
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "units.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 1000
#define MAX_THREADS 64

struct job {
	struct gm_pool *pool;
	uintptr_t stream;
	size_t live, pairs;
	uint64_t seed;
	uint64_t *addrs;
	double *batch_ns;
	size_t nbatch;
	bool churn;
	pthread_barrier_t *bar;
	int err;
};

static uint64_t xs(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint64_t rand_size(uint64_t *s)
{
	unsigned bits = 9 + (unsigned)(xs(s) % 16); /* 512 B .. 32 MiB */
	uint64_t base = (uint64_t)1 << bits;

	return base + xs(s) % base;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/*
 * One thread's run. Everything it writes while timed is its own: the
 * job (own cache lines, see run()), its sizes and batch times (own
 * allocations), err in a register until the end; threads share only
 * the pool.
 */
static void *work(void *arg)
{
	struct job *j = arg;
	struct gm_pool *pool = j->pool;
	uintptr_t stream = j->stream;
	uint64_t s = j->seed;
	size_t n = j->live ? j->live : 1;
	uint64_t *sizes = malloc(8192 * sizeof(*sizes));
	uint64_t *addrs = j->addrs;
	int err = 0;

	if (!sizes) {
		j->err = GM_ENOMEM;
		pthread_barrier_wait(j->bar);
		return NULL;
	}
	for (size_t i = 0; i < 8192; i++)
		sizes[i] = rand_size(&s);
	for (size_t i = 0; i < n && !err; i++)
		err = gm_pool_alloc(pool, sizes[i % 8192], stream, &addrs[i]);
	pthread_barrier_wait(j->bar);
	for (size_t b = 0; b < j->nbatch && !err; b++) {
		uint64_t t0 = now_ns();

		for (size_t k = 0; k < BATCH && j->churn; k++) {
			size_t i = (size_t)(xs(&s) % n);

			gm_pool_free(pool, addrs[i]);
			err |= gm_pool_alloc(pool, sizes[(b * BATCH + k) &
					     8191], stream, &addrs[i]);
		}
		for (size_t k = 0; k < BATCH && !j->churn; k++) {
			uint64_t a;

			err |= gm_pool_alloc(pool, sizes[(b * BATCH + k) &
					     8191], stream, &a);
			gm_pool_free(pool, a);
		}
		j->batch_ns[b] = (double)(now_ns() - t0) / BATCH;
	}
	for (size_t i = 0; i < n; i++)
		gm_pool_free(pool, addrs[i]);
	free(sizes);
	j->err = err;
	return NULL;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* calloc on cache lines of its own (no false sharing between threads) */
static void *own_lines(size_t n)
{
	size_t sz = (n + 63) / 64 * 64;
	void *p = aligned_alloc(64, sz ? sz : 64);

	if (p)
		memset(p, 0, sz);
	return p;
}

static int run(size_t live, unsigned threads, bool shared, bool churn,
	       size_t pairs, double *median, double *p90)
{
	struct gm_sim_options so = {.total_bytes = 16 * GM_TiB};
	struct gm_backend *be;
	struct gm_pool *pool;
	struct gm_diag d;
	struct job *jobs[MAX_THREADS];
	pthread_t th[MAX_THREADS];
	pthread_barrier_t bar;
	size_t nb = pairs / BATCH, all = 0;
	double *v;
	int err = 0;

	if (gm_sim_backend_create(&be, &so) ||
	    gm_pool_create(&pool, be, NULL, &d))
		return GM_ENOMEM;
	v = calloc(nb * threads, sizeof(*v));
	if (!v)
		return GM_ENOMEM;
	pthread_barrier_init(&bar, NULL, threads);
	for (unsigned t = 0; t < threads; t++) {
		size_t nl = live / threads ? live / threads : 1;

		jobs[t] = own_lines(sizeof(struct job));
		if (!jobs[t])
			return GM_ENOMEM;
		*jobs[t] = (struct job){
			.pool = pool, .stream = shared ? 0 : t + 1,
			.live = nl, .pairs = pairs,
			.seed = 0x9e3779b97f4a7c15ULL * (t + 1),
			.nbatch = nb, .bar = &bar, .churn = churn,
			.addrs = own_lines(nl * sizeof(uint64_t)),
			.batch_ns = own_lines(nb * sizeof(double))};
		if (!jobs[t]->addrs || !jobs[t]->batch_ns)
			return GM_ENOMEM;
		pthread_create(&th[t], NULL, work, jobs[t]);
	}
	for (unsigned t = 0; t < threads; t++) {
		pthread_join(th[t], NULL);
		err |= jobs[t]->err;
		memcpy(v + all, jobs[t]->batch_ns, nb * sizeof(*v));
		all += nb;
		free(jobs[t]->addrs);
		free(jobs[t]->batch_ns);
		free(jobs[t]);
	}
	qsort(v, all, sizeof(*v), cmp_d);
	*median = v[all / 2];
	*p90 = v[all * 9 / 10];
	free(v);
	pthread_barrier_destroy(&bar);
	gm_pool_destroy(pool);
	be->ops->destroy(be);
	return err;
}

int main(int argc, char **argv)
{
	static const size_t lives[] = {1, 1000, 10000, 100000};
	size_t pairs = argc > 1 ? strtoul(argv[1], NULL, 10) : 200000;
	unsigned long nt = argc > 2 ? strtoul(argv[2], NULL, 10) : 8;
	unsigned rows = nt == 1 ? 1 : 3;

	if (nt < 1 || nt > MAX_THREADS) {
		fprintf(stderr, "alloc_bench: threads must be 1..%d\n",
			MAX_THREADS);
		return 2;
	}

	if (pairs < BATCH)
		pairs = BATCH;
	printf("| live allocations | threads | streams | pair median ns | "
	       "pair p90 ns | churn median ns | churn p90 ns |\n"
	       "|---:|---:|---|---:|---:|---:|---:|\n");
	for (unsigned ti = 0; ti < rows; ti++) {
		unsigned threads = ti == 0 ? 1 : (unsigned)nt;
		bool shared = ti == 2;

		for (size_t li = 0; li < 4; li++) {
			double med, p90, cmed, cp90;

			if (run(lives[li], threads, shared, false, pairs, &med,
				&p90) ||
			    run(lives[li], threads, shared, true, pairs, &cmed,
				&cp90)) {
				fprintf(stderr, "alloc_bench: a run failed\n");
				return 1;
			}
			printf("| %zu | %u | %s | %.0f | %.0f | %.0f | %.0f |\n",
			       lives[li], threads, shared ? "one shared" :
			       "one per thread", med, p90, cmed, cp90);
			fflush(stdout);
		}
	}
	return 0;
}
