/*
 * pl_probe.c - reaches the (fake) driver the way the CUDA runtime and the
 * frameworks do: dlopen("libcuda.so.1"), dlsym on that handle for
 * cuGetProcAddress_v2, then every function through cuGetProcAddress with
 * a CUDA version and flags. Run under LD_PRELOAD of the real
 * libgpumem-preload.so by test_preload.py; each scenario checks what it
 * can see from inside and exits 0, or prints why and exits 1.
 *
 * Usage: pl_probe SCENARIO   (see the table at the end)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wpedantic"

#define MiB (1ULL << 20)
#define GiB (1ULL << 30)

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

struct fakecuda_stats {
	unsigned long alloc_calls, free_calls, create_calls, release_calls;
	unsigned long getproc_calls, info_calls, v1_alloc_calls;
	unsigned long long used;
	unsigned long live;
	unsigned long event_records, ctx_syncs, stream_syncs, events_live;
	unsigned long long peak_used;
};

struct prop { int type, handle_types; struct { int type, id; } loc;
	      void *win32; unsigned char flags[8]; };

static int (*getproc)(const char *, void **, int, unsigned long long, int *);
static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static CUresult (*mem_info)(size_t *, size_t *);
static CUresult (*mem_create)(unsigned long long *, size_t,
			      const struct prop *, unsigned long long);
static CUresult (*mem_release)(unsigned long long);
static CUresult (*alloc_async)(CUdeviceptr *, size_t, void *);
static CUresult (*alloc_pool)(CUdeviceptr *, size_t, void *, void *);
static CUresult (*free_async)(CUdeviceptr, void *);
static CUresult (*alloc_async_l)(CUdeviceptr *, size_t, void *);
static CUresult (*free_async_l)(CUdeviceptr, void *);
static void (*hold)(void *, int);
static CUresult (*raw_alloc)(CUdeviceptr *, size_t);
static CUresult (*alloc_managed)(CUdeviceptr *, size_t, unsigned);
static CUresult (*alloc_pitch)(CUdeviceptr *, size_t *, size_t, size_t,
			       unsigned);
static CUresult (*total_mem)(size_t *, int);
static void (*stats)(struct fakecuda_stats *);

struct fakecuda_vmm_stats {
	unsigned long reserves, address_frees, maps, unmaps;
	unsigned long long reserved_bytes, mapped_bytes, peak_mapped_bytes;
};
static void (*vmm_stats)(struct fakecuda_vmm_stats *);
static void *cuda;

static int failures;

#define CHECK(cond, ...)                                                   \
	do {                                                               \
		if (!(cond)) {                                             \
			fprintf(stderr, "pl_probe:%d: %s: ", __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                      \
			fputc('\n', stderr);                               \
			failures++;                                        \
		}                                                          \
	} while (0)

static void *proc(const char *name, int ver, unsigned long long flags)
{
	void *fn = NULL;
	int status = -1;
	CUresult r = getproc(name, &fn, ver, flags, &status);

	if (r != 0 || !fn) {
		fprintf(stderr, "pl_probe: cuGetProcAddress(%s) = %d\n", name,
			r);
		exit(1);
	}
	return fn;
}

static void open_driver(void)
{
	cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!cuda) {
		fprintf(stderr, "pl_probe: %s\n", dlerror());
		exit(1);
	}
	*(void **)&getproc = dlsym(cuda, "cuGetProcAddress_v2");
	*(void **)&stats = dlsym(cuda, "fakecuda_stats");
	*(void **)&vmm_stats = dlsym(cuda, "fakecuda_vmm_stats");
	if (!getproc || !stats || !vmm_stats) {
		fprintf(stderr, "pl_probe: not the fake driver\n");
		exit(1);
	}
	*(void **)&mem_alloc = proc("cuMemAlloc", 13000, 0);
	*(void **)&mem_free = proc("cuMemFree", 13000, 0);
	*(void **)&mem_info = proc("cuMemGetInfo", 13000, 0);
	*(void **)&mem_create = proc("cuMemCreate", 13000, 0);
	*(void **)&mem_release = proc("cuMemRelease", 13000, 0);
	*(void **)&alloc_async = proc("cuMemAllocAsync", 13000, 2);
	*(void **)&alloc_pool = proc("cuMemAllocFromPoolAsync", 13000, 0);
	*(void **)&free_async = proc("cuMemFreeAsync", 13000, 2);
	*(void **)&alloc_async_l = proc("cuMemAllocAsync", 13000, 0);
	*(void **)&free_async_l = proc("cuMemFreeAsync", 13000, 0);
	*(void **)&hold = dlsym(cuda, "fakecuda_hold");
	*(void **)&raw_alloc = dlsym(cuda, "fakecuda_raw_alloc");
	*(void **)&alloc_managed = proc("cuMemAllocManaged", 13000, 0);
	*(void **)&alloc_pitch = proc("cuMemAllocPitch", 13000, 0);
	*(void **)&total_mem = proc("cuDeviceTotalMem", 13000, 0);
}

static struct fakecuda_stats snap(void)
{
	struct fakecuda_stats s;
	stats(&s);
	return s;
}

static struct fakecuda_vmm_stats vsnap(void)
{
	struct fakecuda_vmm_stats s;
	vmm_stats(&s);
	return s;
}

/* GPUMEM_LIMIT=1GiB: under the cap works, over it fails with 2 before
 * the driver sees it, freeing makes room again. */
static void sc_cap(void)
{
	CUdeviceptr a = 0, b = 0;
	unsigned long calls;
	size_t f, t;

	CHECK(mem_alloc(&a, 512 * MiB) == 0, "512 MiB under a 1 GiB cap");
	calls = snap().alloc_calls;
	CHECK(mem_alloc(&b, 600 * MiB) == 2, "600 MiB more must fail with "
	      "CUDA_ERROR_OUT_OF_MEMORY (2)");
	CHECK(snap().alloc_calls == calls, "the refused call reached the "
	      "driver");
	CHECK(mem_info(&f, &t) == 0 && t == GiB && f == 512 * MiB,
	      "meminfo total %zu free %zu", t, f);
	CHECK(mem_free(a) == 0, "free");
	CHECK(mem_alloc(&b, 600 * MiB) == 0, "600 MiB after the free");
	CHECK(mem_free(b) == 0, "free");
	CHECK(snap().used == 0, "driver still holds %llu", snap().used);
}

/* GPUMEM_FRACTION=0.25 of a 76 GiB card, FAKECUDA_OTHERS=75G. */
static void sc_info(void)
{
	size_t f = 1, t = 0, tm = 0;

	CHECK(mem_info(&f, &t) == 0, "meminfo");
	CHECK(t == 19 * GiB, "total %zu != 19 GiB (min(cap, physical))", t);
	CHECK(f == 1 * GiB, "free %zu != 1 GiB (the card's real free)", f);
	CHECK(total_mem(&tm, 0) == 0 && tm == 19 * GiB, "cuDeviceTotalMem "
	      "%zu", tm);
	CHECK(mem_info(NULL, &t) == 0 && t == 19 * GiB, "NULL free pointer");
}

/* GPUMEM_LIMIT=64MiB: free reaches exactly 0 at the cap, never below. */
static void sc_clamp(void)
{
	CUdeviceptr a;
	size_t f = 1, t;

	CHECK(mem_alloc(&a, 64 * MiB) == 0, "exactly the cap");
	CHECK(mem_info(&f, &t) == 0 && f == 0 && t == 64 * MiB,
	      "free %zu total %zu", f, t);
	CHECK(mem_alloc(&a, 1) == 2, "one byte over");
}

/* GPUMEM_LIMIT=64MiB: VMM handles are charged by physical size. */
static void sc_vmm(void)
{
	unsigned long long h[40];
	struct prop dev = {.type = 1, .loc = {1, 0}};
	struct prop host = {.type = 1, .loc = {2, 0}};
	unsigned long long hh;
	size_t f, t;
	int n = 0;

	while (n < 40 && mem_create(&h[n], 2 * MiB, &dev, 0) == 0)
		n++;
	CHECK(n == 32, "%d handles of 2 MiB under 64 MiB", n);
	CHECK(mem_create(&hh, 2 * MiB, &dev, 0) == 2, "33rd handle");
	CHECK(mem_create(&hh, 2 * MiB, &host, 0) == 0, "host handles pass");
	CHECK(mem_release(hh) == 0, "release host");
	for (int i = 0; i < n; i++)
		CHECK(mem_release(h[i]) == 0, "release");
	CHECK(mem_info(&f, &t) == 0 && f == 64 * MiB, "free %zu", f);
}

/* GPUMEM_LIMIT=64MiB: stream-ordered and pool allocations, managed and
 * pitched memory all count. */
static void sc_async(void)
{
	CUdeviceptr a, b, c, d, e;
	size_t pitch = 0, f, t;

	CHECK(alloc_async(&a, 16 * MiB, NULL) == 0, "async");
	CHECK(alloc_pool(&b, 16 * MiB, NULL, NULL) == 0, "pool");
	CHECK(alloc_managed(&c, 16 * MiB, 1) == 0, "managed");
	CHECK(alloc_pitch(&d, &pitch, 1000, 4096, 4) == 0 && pitch == 1024,
	      "pitch %zu", pitch);
	CHECK(mem_info(&f, &t) == 0 && f == 12 * MiB, "free %zu", f);
	CHECK(alloc_async(&e, 13 * MiB, NULL) == 2, "async over the cap");
	CHECK(free_async(a, NULL) == 0 && mem_free(b) == 0 &&
	      mem_free(c) == 0 && mem_free(d) == 0, "frees");
	CHECK(mem_info(&f, &t) == 0 && f == 64 * MiB, "free %zu", f);
}

/* GPUMEM_LIMIT=64MiB: a pitched allocation that does not fit is refused
 * before the driver allocates it (the driver never holds more than the
 * cap), one that fits is charged by the driver's pitch. */
static void sc_pitch_cap(void)
{
	CUdeviceptr a, d = 0;
	size_t pitch = 0, f, t;
	unsigned long calls;

	CHECK(mem_alloc(&a, 60 * MiB) == 0, "60 MiB");
	calls = snap().alloc_calls;
	CHECK(alloc_pitch(&d, &pitch, 1000, 8192, 4) == 2, "8 MiB pitched "
	      "over the cap");
	CHECK(snap().alloc_calls == calls, "the driver allocated a pitched "
	      "block over the cap");
	CHECK(snap().peak_used <= 64 * MiB, "the driver held %llu",
	      snap().peak_used);
	CHECK(alloc_pitch(&d, &pitch, 1000, 2048, 4) == 0 && pitch == 1024,
	      "2 MiB pitched: pitch %zu", pitch);
	CHECK(mem_info(&f, &t) == 0 && f == 2 * MiB, "free %zu", f);
	CHECK(mem_free(d) == 0 && mem_free(a) == 0, "frees");
	CHECK(mem_info(&f, &t) == 0 && f == 64 * MiB, "free %zu", f);
}

/* The variant handed back matches the version asked for. */
static void sc_variants(void)
{
	void *mine = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
	void *self = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
	void *ptsz = dlsym(RTLD_DEFAULT, "cuMemAllocAsync_ptsz");
	void *plain = dlsym(RTLD_DEFAULT, "cuMemAllocAsync");
	void *real_v2 = dlsym(cuda, "cuMemAlloc_v2");
	void *fn;
	unsigned v1;

	CHECK(mine && (void *)mem_alloc == mine, "12000+ gets the wrapper");
	CHECK(real_v2 == mine, "dlsym(libcuda, cuMemAlloc_v2) is wrapped");
	CHECK((void *)getproc == self, "dlsym(libcuda, cuGetProcAddress_v2)");
	CHECK(proc("cuGetProcAddress", 12000, 0) == self, "self lookup");
	CHECK(proc("cuGetProcAddress", 11000, 0) ==
	      dlsym(RTLD_DEFAULT, "cuGetProcAddress"), "v1 self lookup");
	CHECK((void *)alloc_async == ptsz, "per-thread flag gets _ptsz");
	CHECK(proc("cuMemAllocAsync", 13000, 0) == plain, "legacy stream");
	fn = proc("cuMemAlloc", 3010, 0);
	CHECK(fn != mine, "3010 must get the v1 ABI, not the v2 wrapper");
	((CUresult(*)(unsigned *, unsigned))fn)(&v1, 16);
	CHECK(snap().v1_alloc_calls == 1, "v1 reached the driver");
	CHECK(proc("cuInit", 13000, 0) == dlsym(cuda, "cuInit"),
	      "unwrapped functions pass through");
}

/* Error codes are the driver's: its OOM (FAKECUDA_FAIL_ALLOC=2) and its
 * answer for a pointer it does not know. */
static void sc_errors(void)
{
	CUdeviceptr a, b;

	CHECK(mem_alloc(&a, MiB) == 0, "first");
	CHECK(mem_alloc(&b, MiB) == 2, "injected driver OOM");
	CHECK(mem_free(0xdead000) == 1, "unknown pointer: driver's code");
	CHECK(mem_free(a) == 0, "free");
	CHECK(mem_alloc(&b, MiB) == 0, "charge was given back");
	CHECK(mem_free(b) == 0, "free");
}

/* GPUMEM_LIMIT=64MiB, 8 threads: the cap holds, nothing leaks. */
static void *worker(void *arg)
{
	unsigned seed = (unsigned)(size_t)arg;
	CUdeviceptr p[16] = {0};

	for (int i = 0; i < 4000; i++) {
		int k = rand_r(&seed) % 16;
		if (p[k]) {
			if (mem_free(p[k]) != 0)
				return (void *)1;
			p[k] = 0;
		} else {
			CUresult r = mem_alloc(&p[k],
					       (rand_r(&seed) % 1024 + 1) * 1024);
			if (r != 0 && r != 2)
				return (void *)1;
			if (r)
				p[k] = 0;
		}
	}
	for (int k = 0; k < 16; k++)
		if (p[k] && mem_free(p[k]) != 0)
			return (void *)1;
	return NULL;
}

static void sc_threads(void)
{
	pthread_t t[8];
	size_t f, tot;
	void *rc;

	for (size_t i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], &rc);
		CHECK(rc == NULL, "worker %d", i);
	}
	CHECK(mem_info(&f, &tot) == 0 && f == tot && tot == 64 * MiB,
	      "all given back: free %zu of %zu", f, tot);
	CHECK(snap().used == 0, "driver holds %llu", snap().used);
}

/* Random allocations and frees until *stop, counting allocations that
 * the cap refused (arg: a struct churn). */
struct churn {
	unsigned seed;
	int iterations;
	unsigned max_kib;
	int managed; /* cuMemAllocManaged: passes by any pool */
	int bad;
};

static void *churn(void *arg)
{
	struct churn *c = arg;
	CUdeviceptr p[16] = {0};

	for (int i = 0; i < c->iterations; i++) {
		int k = rand_r(&c->seed) % 16;
		if (p[k]) {
			c->bad |= mem_free(p[k]) != 0;
			p[k] = 0;
		} else {
			size_t n = (rand_r(&c->seed) % c->max_kib + 1) * 1024;
			CUresult r = c->managed ? alloc_managed(&p[k], n, 1) :
						  mem_alloc(&p[k], n);
			c->bad |= r != 0 && r != 2;
			if (r)
				p[k] = 0;
		}
	}
	for (int k = 0; k < 16; k++)
		c->bad |= p[k] && mem_free(p[k]) != 0;
	return NULL;
}

/* GPUMEM_LIMIT=64MiB, FAKECUDA_FREE_DELAY_US: 8 threads allocate while
 * frees are slow; what the driver holds never passes the cap (a charge
 * given back before the driver freed lets another thread in). */
static void sc_cap_exact(void)
{
	struct churn c[8];
	pthread_t t[8];
	struct fakecuda_stats s;

	for (int i = 0; i < 8; i++) {
		c[i] = (struct churn){.seed = (unsigned)i + 1,
				      .iterations = 400, .max_kib = 4096};
		pthread_create(&t[i], NULL, churn, &c[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK(!c[i].bad, "worker %d", i);
	}
	s = snap();
	CHECK(s.peak_used <= 64 * MiB, "the driver held %llu bytes at once "
	      "against a cap of %llu", s.peak_used, 64 * MiB);
	CHECK(s.used == 0, "driver holds %llu", s.used);
}

static atomic_int wrap_stop;
static atomic_ulong wrap_ok;

/* Requests near 2^64 bytes, until wrap_stop. */
static void *huge(void *arg)
{
	(void)arg;
	while (!atomic_load(&wrap_stop)) {
		CUdeviceptr p;
		for (unsigned long k = 1; k <= 64; k++)
			if (mem_alloc(&p, (size_t)0 - k * MiB) == 0)
				atomic_fetch_add(&wrap_ok, 1);
	}
	return NULL;
}

/* GPUMEM_LIMIT=64MiB: one thread asks for sizes near 2^64 while four
 * churn: those requests all fail, and no other thread slips through
 * the room a wrapped counter would show. */
static void sc_cap_wrap(void)
{
	struct churn c[4];
	pthread_t t[4], h;
	struct fakecuda_stats s;

	pthread_create(&h, NULL, huge, NULL);
	for (int i = 0; i < 4; i++) {
		c[i] = (struct churn){.seed = (unsigned)i + 7,
				      .iterations = 20000, .max_kib = 8192};
		pthread_create(&t[i], NULL, churn, &c[i]);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(t[i], NULL);
		CHECK(!c[i].bad, "worker %d", i);
	}
	atomic_store(&wrap_stop, 1);
	pthread_join(h, NULL);
	s = snap();
	CHECK(atomic_load(&wrap_ok) == 0, "%lu requests near 2^64 succeeded",
	      atomic_load(&wrap_ok));
	CHECK(s.peak_used <= 64 * MiB, "the driver held %llu bytes at once "
	      "against a cap of %llu", s.peak_used, 64 * MiB);
}

/* A forked child starts from zero and does not disturb the parent. */
static void sc_fork(void)
{
	CUdeviceptr a, b;
	size_t f, t;
	int status;
	pid_t pid;

	CHECK(mem_alloc(&a, 40 * MiB) == 0, "parent 40 MiB");
	pid = fork();
	if (pid == 0) {
		/* The child's own view: nothing of the parent's charged. */
		int bad = mem_alloc(&b, 60 * MiB) != 0 || mem_free(b) != 0;
		_exit(bad);
	}
	CHECK(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
	      WEXITSTATUS(status) == 0, "child could use its own 60 MiB");
	CHECK(mem_info(&f, &t) == 0 && f == 24 * MiB, "parent free %zu", f);
	CHECK(mem_alloc(&b, 25 * MiB) == 2, "parent still capped");
	mem_free(a);
}

static void *first_alloc(void *arg)
{
	CUdeviceptr p;

	(void)arg;
	if (mem_alloc(&p, MiB) != 0 || mem_free(p) != 0)
		return (void *)1;
	return NULL;
}

/* FAKECUDA_SETUP_DELAY_US=300000: a thread's first allocation sets the
 * device up (slowly) while the main thread forks; the child allocates
 * within 5 s (it deadlocked on a lock the set-up thread held). */
static void sc_fork_setup(void)
{
	pthread_t t;
	int status = 0;
	pid_t pid, w = 0;
	void *rc;

	pthread_create(&t, NULL, first_alloc, NULL);
	usleep(100000);
	pid = fork();
	if (pid == 0) {
		CUdeviceptr p;
		alarm(5);
		_exit(mem_alloc(&p, MiB) != 0 || mem_free(p) != 0);
	}
	for (int i = 0; i < 100 && w == 0; i++) {
		w = waitpid(pid, &status, WNOHANG);
		if (w == 0)
			usleep(100000);
	}
	if (w == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	CHECK(w == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
	      "child hung or failed (status %#x)", status);
	pthread_join(t, &rc);
	CHECK(rc == NULL, "first allocation");
}

/* Hold 48 MiB, ask for a report with SIGUSR1, wait for it (test_preload
 * checks the file), then exit holding 16 MiB (the exit report). */
static void sc_report(void)
{
	CUdeviceptr a, b, c;
	const char *ready = getenv("PROBE_REPORT_READY");

	CHECK(mem_alloc(&a, 32 * MiB) == 0, "a");
	CHECK(mem_alloc(&b, 16 * MiB) == 0, "b");
	CHECK(mem_alloc(&c, 32 * MiB) == 2, "refused: counted as an OOM");
	kill(getpid(), SIGUSR1);
	for (int i = 0; ready && i < 100 && access(ready, F_OK) != 0; i++)
		usleep(50000);
	CHECK(!ready || access(ready, F_OK) == 0, "no report after SIGUSR1");
	usleep(1500000); /* one Prometheus period */
	mem_free(a);
}

/* Every allocation fails on a card refused as undersized. */
static void sc_refused(void)
{
	CUdeviceptr a;

	CHECK(mem_alloc(&a, MiB) == 2, "refused");
	CHECK(snap().alloc_calls == 0, "the driver saw it");
}

static void sc_plain(void)
{
	CUdeviceptr a;

	CHECK(mem_alloc(&a, MiB) == 0, "one MiB");
	CHECK(mem_free(a) == 0, "free");
}

/* FAKECUDA_DEVICES=2: look at both devices, allocate nothing (what a
 * launcher such as torchrun does); it must write no report. */
static void sc_query(void)
{
	size_t f, t, tm;

	CHECK(mem_info(&f, &t) == 0, "meminfo");
	CHECK(total_mem(&tm, 0) == 0 && total_mem(&tm, 1) == 0,
	      "cuDeviceTotalMem");
}

/* A launcher without a rank: queries both devices, then starts two
 * workers (pl_probe plain with RANK=0 and RANK=1) and waits for them. */
static void sc_launch(void)
{
	pid_t pid[2];
	int status;

	sc_query();
	for (int r = 0; r < 2; r++) {
		pid[r] = fork();
		if (pid[r] == 0) {
			char rank[2] = {(char)('0' + r), 0};
			setenv("RANK", rank, 1);
			execl("/proc/self/exe", "pl_probe", "plain",
			      (char *)NULL);
			_exit(127);
		}
	}
	for (int r = 0; r < 2; r++)
		CHECK(waitpid(pid[r], &status, 0) == pid[r] &&
		      WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "worker %d failed", r);
}

/* ==== GPUMEM_MODE=cache ==== */

/* GPUMEM_LIMIT=1GiB: alloc/free pairs cost one driver allocation. */
static void sc_cache_reuse(void)
{
	struct fakecuda_stats s0 = snap(), s1;
	CUdeviceptr a = 0, first = 0, d;
	size_t pitch = 0, f, t;

	for (int i = 0; i < 100; i++) {
		CHECK(mem_alloc(&a, 4 * MiB) == 0, "alloc %d", i);
		if (!i)
			first = a;
		CHECK(a == first, "alloc %d not reused: %llx", i, a);
		CHECK(mem_free(a) == 0, "free %d", i);
	}
	CHECK(alloc_pitch(&d, &pitch, 1000, 4096, 4) == 0 && pitch == 1024,
	      "pitch %zu", pitch);
	CHECK(d == first, "pitched block from the cache");
	CHECK(mem_free(d) == 0, "free pitched");
	s1 = snap();
	CHECK(s1.alloc_calls - s0.alloc_calls == 1, "%lu driver allocations",
	      s1.alloc_calls - s0.alloc_calls);
	CHECK(s1.free_calls == s0.free_calls, "the cache gave memory back");
	CHECK(s1.used == 20 * MiB, "one 20 MiB segment: %llu", s1.used);
	CHECK(s1.ctx_syncs - s0.ctx_syncs == 101, "every cuMemFree waits "
	      "for the device: %lu", s1.ctx_syncs - s0.ctx_syncs);
	CHECK(mem_info(&f, &t) == 0 && t == GiB && f == GiB - 20 * MiB,
	      "meminfo free %zu total %zu", f, t);
	CHECK(alloc_pitch(&d, &pitch, 1000, 16, 3) == 1, "element size 3");
}

/* A block freed on stream A goes to stream B only once A's work before
 * the free is done; on A itself at once. */
static void sc_cache_streams(void)
{
	void *A = (void *)0x100, *B = (void *)0x200, *C = (void *)0x300;
	CUdeviceptr p, q, r, x, y, z, m, m2, m3;
	unsigned long calls;

	CHECK(alloc_async_l(&p, 8 * MiB, A) == 0, "p on A");
	calls = snap().alloc_calls;
	hold(A, 1); /* a kernel on A still uses p */
	CHECK(free_async_l(p, A) == 0, "free p on A");
	CHECK(alloc_async_l(&q, 8 * MiB, A) == 0 && q == p,
	      "A reuses its own free at once (stream order)");
	CHECK(free_async_l(q, A) == 0, "free q on A");
	CHECK(alloc_async_l(&r, 8 * MiB, B) == 0, "r on B");
	CHECK(r < p || r >= p + 20 * MiB, "B got A's memory while A's "
	      "work was running: r %llx p %llx", r, p);
	CHECK(snap().alloc_calls == calls + 1, "B needed its own segment");
	hold(A, 0); /* A's work is done */
	CHECK(free_async_l(r, B) == 0, "free r on B");
	CHECK(alloc_async_l(&z, 8 * MiB, C) == 0, "z on C");
	CHECK(snap().alloc_calls == calls + 1, "C took a done segment");
	CHECK(free_async_l(z, C) == 0, "free z");

	/* Freed on another stream than its own: held for that stream. */
	CHECK(alloc_async_l(&x, 8 * MiB, A) == 0, "x on A");
	hold(B, 1);
	CHECK(free_async_l(x, B) == 0, "free x on B");
	CHECK(alloc_async_l(&y, 8 * MiB, A) == 0 && y != x,
	      "x reused on A while B's work may use it");
	CHECK(free_async_l(y, A) == 0, "free y");
	hold(B, 0);
	CHECK(alloc_async_l(&z, 8 * MiB, A) == 0 && z == x,
	      "x not reused after B's work: %llx %llx", z, x);
	CHECK(free_async_l(z, A) == 0, "free z");

	/* cuMemFree waits for the device before the block is reused. */
	CHECK(mem_alloc(&m, 8 * MiB) == 0, "m");
	hold(C, 1);
	calls = snap().ctx_syncs;
	CHECK(mem_free(m) == 0, "free m");
	CHECK(snap().ctx_syncs == calls + 1, "cuMemFree did not wait");

	/* A cuMemAlloc block freed stream-ordered (legacy stream): no
	 * synchronous allocation gets it before the stream's work is done. */
	CHECK(mem_alloc(&m2, 8 * MiB) == 0, "m2");
	hold(NULL, 1);
	CHECK(free_async_l(m2, NULL) == 0, "free m2 on the legacy stream");
	CHECK(mem_alloc(&m3, 8 * MiB) == 0 && m3 != m2,
	      "cuMemAlloc got a block the legacy stream may still use");
	hold(NULL, 0);
	CHECK(mem_free(m3) == 0, "free m3");

	/* The per-thread default stream (_ptsz, stream 0). */
	CHECK(alloc_async(&m2, 8 * MiB, NULL) == 0, "per-thread alloc");
	hold((void *)2, 1);
	CHECK(free_async(m2, NULL) == 0, "per-thread free");
	CHECK(mem_alloc(&m3, 8 * MiB) == 0 && m3 != m2,
	      "reused before the per-thread stream's work was done");
	CHECK(alloc_async_l(&x, 8 * MiB, C) == 0 && x != m2,
	      "C reused it before the per-thread stream's work was done");
	hold((void *)2, 0);
	CHECK(mem_free(m3) == 0 && free_async_l(x, C) == 0, "frees");
}

/* GPUMEM_LIMIT=64MiB: the pool and pass-through allocations share the
 * cap exactly; over it, cached segments are given back and the request
 * tried again. */
static void sc_cache_cap(void)
{
	struct prop dev = {.type = 1, .loc = {1, 0}};
	CUdeviceptr a, b, c, e;
	unsigned long long h;
	unsigned long calls, frees;
	size_t f, t;

	CHECK(mem_alloc(&a, 40 * MiB) == 0, "a 40 MiB");
	calls = snap().alloc_calls;
	CHECK(mem_alloc(&b, 30 * MiB) == 2, "30 MiB more is over the cap");
	CHECK(snap().alloc_calls == calls, "the refused call reached the "
	      "driver");
	CHECK(mem_info(&f, &t) == 0 && f == 24 * MiB && t == 64 * MiB,
	      "meminfo free %zu total %zu", f, t);
	CHECK(mem_free(a) == 0, "free a (cached)");
	CHECK(snap().used == 40 * MiB, "cached segment");
	CHECK(mem_info(&f, &t) == 0 && f == 24 * MiB, "cached memory is "
	      "reserved: free %zu", f);
	frees = snap().free_calls;
	/* A pass-through VMM handle: the cache makes room. */
	CHECK(mem_create(&h, 32 * MiB, &dev, 0) == 0, "VMM 32 MiB after "
	      "releasing the cache");
	CHECK(snap().free_calls == frees + 1, "cache not released");
	CHECK(mem_alloc(&b, 30 * MiB) == 0, "b 30 MiB");
	CHECK(mem_alloc(&c, 4 * MiB) == 2, "over: 32 + 30 + 20");
	CHECK(mem_release(h) == 0 && mem_free(b) == 0, "release, free b");
	frees = snap().free_calls;
	/* The pool's own retry: 30 MiB cached + 50 MiB > 64 MiB. */
	CHECK(mem_alloc(&c, 50 * MiB) == 0, "50 MiB after the pool released "
	      "its cache");
	CHECK(snap().free_calls == frees + 1, "pool did not release");
	CHECK(mem_alloc(&e, 14 * MiB) == 0, "exactly to the cap");
	CHECK(mem_alloc(&a, 512) == 2, "one more block is over");
	CHECK(mem_info(&f, &t) == 0 && f == 0 && t == 64 * MiB,
	      "at the cap: free %zu", f);
	CHECK(mem_free(c) == 0 && mem_free(e) == 0, "frees");
}

/* GPUMEM_LIMIT=20MiB: fragmentation verdict (test_preload checks the
 * report): 4 MiB live in a 20 MiB segment whose 16 MiB free are split
 * in 4 + 12. */
static void sc_cache_frag(void)
{
	CUdeviceptr a, b, c, x;

	CHECK(mem_alloc(&a, 4 * MiB) == 0 && mem_alloc(&b, 4 * MiB) == 0 &&
	      mem_alloc(&c, 4 * MiB) == 0, "three blocks");
	CHECK(mem_free(a) == 0 && mem_free(c) == 0, "frees");
	CHECK(mem_alloc(&x, 14 * MiB) == 2, "14 MiB: no block, no room");
}

/* Cache mode: the free memory reported can be allocated in one request
 * ($PROBE_FREE bytes expected), before and after other allocations. */
static void sc_cache_info(void)
{
	size_t want = strtoull(getenv("PROBE_FREE"), NULL, 10);
	CUdeviceptr p, q;
	size_t f, t;

	CHECK(mem_info(&f, &t) == 0 && f == want, "free %zu, expected %zu",
	      f, want);
	CHECK(mem_alloc(&p, f) == 0, "the %zu bytes reported free", f);
	CHECK(mem_free(p) == 0, "free");
	CHECK(mem_alloc(&p, 512) == 0, "a small block");
	CHECK(mem_info(&f, &t) == 0 && f > 0, "free %zu", f);
	CHECK(mem_alloc(&q, f) == 0, "the %zu bytes reported free beside "
	      "a small block", f);
	CHECK(mem_free(q) == 0 && mem_free(p) == 0, "frees");
}

/* Frees of memory the pool does not own go to the driver. */
static void sc_cache_foreign(void)
{
	CUdeviceptr p = 0, a;
	unsigned long frees;

	CHECK(raw_alloc && raw_alloc(&p, MiB) == 0, "driver allocation");
	frees = snap().free_calls;
	CHECK(mem_free(p) == 0, "foreign free forwarded");
	CHECK(snap().free_calls == frees + 1, "driver did not free it");
	CHECK(mem_free(0xdead000) == 1, "unknown pointer: driver's code");
	CHECK(mem_alloc(&a, 4 * MiB) == 0, "pool block");
	CHECK(mem_free(a + 512) == 1, "inside a block: invalid value");
	CHECK(mem_free(a) == 0, "free");
	CHECK(snap().used == 20 * MiB, "used %llu", snap().used);
}

/* GPUMEM_LIMIT=64MiB, 8 threads in cache mode. */
static void sc_cache_threads(void)
{
	CUdeviceptr p;
	pthread_t t[8];
	size_t f, tot;
	void *rc;

	for (size_t i = 0; i < 8; i++)
		pthread_create(&t[i], NULL, worker, (void *)(i + 1));
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], &rc);
		CHECK(rc == NULL, "worker %d", i);
	}
	CHECK(snap().used <= 64 * MiB, "driver holds %llu", snap().used);
	/* free: the largest one request the cache serves (segment sizes
	 * of pool.c: with 8 MiB of room and no cached block that serves
	 * more, a 2 MiB small segment's 1 MiB), never above the cap */
	CHECK(mem_info(&f, &tot) == 0 && tot == 64 * MiB && f <= tot &&
	      (64 * MiB - snap().used < 2 * MiB || f >= MiB),
	      "free %zu, driver holds %llu", f, snap().used);
	CHECK(f == 0 || (mem_alloc(&p, f) == 0 && mem_free(p) == 0),
	      "the %zu bytes reported free", f);
}

/* GPUMEM_LIMIT=64MiB, expandable_segments:True: the pool maps 2 MiB
 * granules instead of allocating segments, and shares the cap exactly
 * with what passes through (here cuMemAllocManaged and a cuMemCreate
 * handle of the program's own). */
static void sc_cache_vseg(void)
{
	struct prop dev = {.type = 1, .loc = {1, 0}};
	CUdeviceptr a, b, c, m;
	unsigned long long h;
	unsigned long creates;
	size_t f, t;

	CHECK(mem_alloc(&a, 4 * MiB) == 0, "a 4 MiB");
	CHECK(snap().alloc_calls == 0, "a plain segment was allocated");
	CHECK(snap().used == 4 * MiB && vsnap().mapped_bytes == 4 * MiB &&
	      snap().create_calls == 2, "4 MiB in two granules: used %llu "
	      "mapped %llu creates %lu", snap().used, vsnap().mapped_bytes,
	      snap().create_calls);
	CHECK(mem_free(a) == 0, "free a (cached)");
	CHECK(vsnap().mapped_bytes == 4 * MiB, "the cache unmapped a");
	/* 40 MiB pass-through + 4 MiB cached: 30 MiB more fits the pool's
	 * own view of the cap (64) but not the shared cap; the refusal
	 * comes before the driver is asked for the granule that would
	 * pass it, and the cache is given back first. */
	CHECK(alloc_managed(&m, 40 * MiB, 1) == 0, "40 MiB managed");
	creates = snap().create_calls;
	CHECK(mem_alloc(&b, 30 * MiB) == 2, "44 + 30 MiB is over the cap");
	CHECK(snap().peak_used <= 64 * MiB, "the driver held %llu bytes",
	      snap().peak_used);
	CHECK(snap().used == 40 * MiB && vsnap().mapped_bytes == 0,
	      "left mapped: used %llu mapped %llu", snap().used,
	      vsnap().mapped_bytes);
	CHECK(snap().create_calls == creates, "%lu granules created for "
	      "a refusal", snap().create_calls - creates);
	CHECK(mem_alloc(&b, 24 * MiB) == 0, "24 MiB: exactly to the cap");
	CHECK(mem_alloc(&c, 512) == 2, "one granule more is over");
	CHECK(mem_info(&f, &t) == 0 && f == 0 && t == 64 * MiB,
	      "at the cap: free %zu total %zu", f, t);
	CHECK(mem_free(m) == 0 && mem_free(b) == 0, "frees (b cached)");
	CHECK(snap().used == 24 * MiB, "used %llu", snap().used);
	/* The program's own handle: the cached granules make room. */
	CHECK(mem_create(&h, 48 * MiB, &dev, 0) == 0, "48 MiB handle after "
	      "the cache was given back");
	CHECK(vsnap().mapped_bytes == 0 && snap().used == 48 * MiB,
	      "cache not released: mapped %llu", vsnap().mapped_bytes);
	CHECK(mem_release(h) == 0, "release");
	CHECK(mem_info(&f, &t) == 0 && f == 64 * MiB, "free %zu", f);
	CHECK(mem_alloc(&a, f) == 0, "the %zu bytes reported free", f);
	CHECK(mem_free(a) == 0, "free");
	CHECK(snap().peak_used <= 64 * MiB, "the driver held %llu bytes",
	      snap().peak_used);
	CHECK(snap().alloc_calls == 1, "%lu cuMemAlloc calls: only the "
	      "managed one", snap().alloc_calls);
}

/* GPUMEM_LIMIT=64MiB, expandable_segments:True, slow frees: four
 * threads churn the pool (granules mapped and unmapped as the cap
 * forces the cache back) while four churn pass-through allocations; the
 * driver never holds more than the cap (a granule's charge given back
 * before its cuMemRelease returned would let another thread in). The
 * pass-through threads hold at most 4 x 16 x 512 KiB = 32 MiB, so they
 * cannot starve the pool of granules however the threads are scheduled;
 * the pool's own demand (up to 512 MiB) still overruns the rest. */
static void sc_cache_vseg_threads(void)
{
	struct churn c[8];
	pthread_t t[8];
	struct fakecuda_vmm_stats v;

	for (int i = 0; i < 8; i++) {
		c[i] = (struct churn){.seed = (unsigned)i + 1,
				      .iterations = 300,
				      .max_kib = i >= 4 ? 512 : 8192,
				      .managed = i >= 4};
		pthread_create(&t[i], NULL, churn, &c[i]);
	}
	for (int i = 0; i < 8; i++) {
		pthread_join(t[i], NULL);
		CHECK(!c[i].bad, "worker %d", i);
	}
	v = vsnap();
	CHECK(snap().peak_used <= 64 * MiB, "the driver held %llu bytes at "
	      "once against a cap of %llu", snap().peak_used, 64 * MiB);
	CHECK(v.unmaps > 0, "no granule was given back under the cap: %lu "
	      "maps, %lu unmaps", v.maps, v.unmaps);
	CHECK(snap().used == v.mapped_bytes, "driver holds %llu, mapped "
	      "%llu", snap().used, v.mapped_bytes);
}

/* One cuMemAlloc of $PROBE_BYTES: answers $PROBE_EXPECT (0 or 2). */
static void sc_alloc(void)
{
	size_t n = strtoull(getenv("PROBE_BYTES"), NULL, 10);
	int want = atoi(getenv("PROBE_EXPECT"));
	CUdeviceptr p = 0;
	CUresult r = mem_alloc(&p, n);

	CHECK(r == want, "cuMemAlloc(%zu) = %d, expected %d", n, r, want);
	if (r == 0)
		CHECK(mem_free(p) == 0, "free");
}

static const struct {
	const char *name;
	void (*run)(void);
} scenarios[] = {
	{"alloc", sc_alloc},             {"fork_setup", sc_fork_setup},
	{"cap", sc_cap},         {"info", sc_info},
	{"clamp", sc_clamp},     {"vmm", sc_vmm},
	{"async", sc_async},     {"variants", sc_variants},
	{"errors", sc_errors},   {"threads", sc_threads},
	{"fork", sc_fork},       {"report", sc_report},
	{"refused", sc_refused}, {"plain", sc_plain},
	{"query", sc_query},     {"launch", sc_launch},
	{"cache_reuse", sc_cache_reuse}, {"cache_streams", sc_cache_streams},
	{"cache_cap", sc_cache_cap},     {"cache_frag", sc_cache_frag},
	{"cache_foreign", sc_cache_foreign},
	{"cache_threads", sc_cache_threads},
	{"cache_info", sc_cache_info},
	{"cache_vseg", sc_cache_vseg},
	{"cache_vseg_threads", sc_cache_vseg_threads},
	{"pitch_cap", sc_pitch_cap},
	{"cap_exact", sc_cap_exact},     {"cap_wrap", sc_cap_wrap},
};

int main(int argc, char **argv)
{
	for (size_t i = 0; argc == 2 && i < sizeof(scenarios) /
					     sizeof(scenarios[0]); i++) {
		if (strcmp(argv[1], scenarios[i].name) == 0) {
			open_driver();
			scenarios[i].run();
			return failures ? 1 : 0;
		}
	}
	fprintf(stderr, "usage: pl_probe SCENARIO\n");
	return 2;
}
