/*
 * cap_stress - is the preload library's cap exact under threads? Over the
 * fake driver (tests/fake), 16 threads allocate random sizes (512 B to
 * 16 MiB, about log-uniform) and free them, half the threads through a driver
 * whose frees take 0-1 ms, for a fixed time, against GPUMEM_LIMIT. One
 * request in 1000 is a size near 2^64 (a buggy caller), which must
 * always be refused.
 *
 * Measured:
 *  - held_peak_bytes: the most device memory the driver ever held at
 *    once (the fake driver's high-water mark); must be <= the cap;
 *  - report_peak_reserved_bytes: the library's own peak, from its report;
 *  - wrongly_refused: refusals that were provably wrong. An allocation
 *    is charged only inside its call and its charge released only
 *    before its free returns, so the library's reserved bytes never
 *    exceed U = (bytes of requests started) - (bytes of requests that
 *    failed or whose free returned), counted by the threads themselves;
 *    U's maximum over a call is at most ups(after) - downs(before). A
 *    refusal of n bytes when that bound (less n itself, plus n) is
 *    <= cap is wrong. Requests above the cap are never counted in U
 *    (a correct cap never charges them).
 *
 * The program runs itself again as a child under LD_PRELOAD of the
 * build's libgpumem-preload.so with the fake libcuda.so.1 (both found
 * from this program's place in the build tree), and writes one JSON
 * object to --out (and stdout).
 *
 * Usage: cap_stress [--seconds S] [--cap-mib M] [--out FILE]
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wpedantic"

#define MiB (1ULL << 20)
#define THREADS 16
#define SLOTS 16

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

static CUresult (*mem_alloc)(CUdeviceptr *, size_t);
static CUresult (*mem_free)(CUdeviceptr);
static void (*stats)(struct fakecuda_stats *);
static void (*set_delay)(unsigned);

static uint64_t cap;
static atomic_int stop;
static _Atomic uint64_t ups, downs;

struct worker {
	uint64_t seed;
	int slow; /* frees through a slow driver */
	uint64_t allocs, frees, refused, wrong, huge, huge_served, errors;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* 512 B .. 16 MiB: a power of two from 2^9 to 2^23 (equally likely),
 * plus up to as much again, 512 B aligned. */
static size_t rand_size(uint64_t *s)
{
	size_t base = (size_t)512 << (rnd(s) % 15);
	size_t n = base + (size_t)(rnd(s) % base);

	return (n + 511) & ~(size_t)511;
}

static void alloc_one(struct worker *w, CUdeviceptr *slot, size_t *sz)
{
	bool huge = rnd(&w->seed) % 1000 == 0;
	size_t n = huge ? (size_t)0 - (rnd(&w->seed) % 64 + 1) * MiB
			: rand_size(&w->seed);
	bool counted = n <= cap;
	uint64_t d1, u2;
	CUresult r;

	if (counted)
		atomic_fetch_add(&ups, n);
	d1 = atomic_load(&downs);
	r = mem_alloc(slot, n);
	u2 = atomic_load(&ups);
	w->huge += huge;
	if (r == 0) {
		w->allocs++;
		*sz = n;
		if (huge) {
			w->huge_served++;
			mem_free(*slot);
			*slot = 0;
		}
		return;
	}
	*slot = 0;
	if (counted)
		atomic_fetch_add(&downs, n);
	if (r != 2) {
		w->errors++;
		return;
	}
	w->refused++;
	/* U <= u2 - d1 over the call, n itself included. */
	if (counted && u2 - d1 <= cap)
		w->wrong++;
}

static void *work(void *arg)
{
	struct worker *w = arg;
	CUdeviceptr p[SLOTS] = {0};
	size_t sz[SLOTS] = {0};

	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		int k = (int)(rnd(&w->seed) % SLOTS);

		if (!p[k]) {
			alloc_one(w, &p[k], &sz[k]);
			continue;
		}
		set_delay(w->slow ? (unsigned)(rnd(&w->seed) % 1001) : 0);
		if (mem_free(p[k]) != 0)
			w->errors++;
		w->frees++;
		atomic_fetch_add(&downs, sz[k]);
		p[k] = 0;
	}
	set_delay(0);
	for (int k = 0; k < SLOTS; k++) {
		if (!p[k])
			continue;
		w->errors += mem_free(p[k]) != 0;
		w->frees++;
		atomic_fetch_add(&downs, sz[k]);
	}
	return NULL;
}

/* The child: run the threads, write "key value" lines to path. */
static int child(double seconds, const char *path)
{
	struct worker w[THREADS];
	pthread_t t[THREADS];
	struct fakecuda_stats st;
	struct timespec ts = {(time_t)seconds,
			      (long)((seconds - (double)(time_t)seconds) * 1e9)};
	uint64_t sum[7] = {0};
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	FILE *f;

	if (!cuda)
		return fprintf(stderr, "cap_stress: %s\n", dlerror()), 1;
	*(void **)&mem_alloc = dlsym(cuda, "cuMemAlloc_v2");
	*(void **)&mem_free = dlsym(cuda, "cuMemFree_v2");
	*(void **)&stats = dlsym(cuda, "fakecuda_stats");
	*(void **)&set_delay = dlsym(cuda, "fakecuda_set_free_delay_us");
	if (!mem_alloc || !mem_free || !stats || !set_delay)
		return fprintf(stderr, "cap_stress: not the fake driver\n"), 1;
	for (int i = 0; i < THREADS; i++) {
		w[i] = (struct worker){.seed = 0x9e3779b97f4a7c15ULL * (i + 1),
				       .slow = i % 2};
		pthread_create(&t[i], NULL, work, &w[i]);
	}
	nanosleep(&ts, NULL);
	atomic_store(&stop, 1);
	for (int i = 0; i < THREADS; i++) {
		pthread_join(t[i], NULL);
		sum[0] += w[i].allocs;
		sum[1] += w[i].frees;
		sum[2] += w[i].refused;
		sum[3] += w[i].wrong;
		sum[4] += w[i].huge;
		sum[5] += w[i].huge_served;
		sum[6] += w[i].errors;
	}
	stats(&st);
	f = fopen(path, "w");
	if (!f)
		return 1;
	fprintf(f, "allocations %llu\nfrees %llu\nrefused %llu\n"
		"wrongly_refused %llu\nhuge_requests %llu\nhuge_served %llu\n"
		"errors %llu\nheld_peak_bytes %llu\nheld_at_end_bytes %llu\n",
		(unsigned long long)sum[0], (unsigned long long)sum[1],
		(unsigned long long)sum[2], (unsigned long long)sum[3],
		(unsigned long long)sum[4], (unsigned long long)sum[5],
		(unsigned long long)sum[6], st.peak_used, st.used);
	return fclose(f) != 0;
}

/* The number after "key": in a JSON text; -1 if absent. */
static long long json_number(const char *text, const char *key)
{
	char pat[128];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(text, pat);
	return p ? strtoll(p + strlen(pat), NULL, 10) : -1;
}

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *buf;
	long n;

	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	rewind(f);
	buf = calloc(1, (size_t)n + 1);
	if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
		free(buf);
		buf = NULL;
	}
	fclose(f);
	return buf;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seconds", required_argument, NULL, 's'},
		{"cap-mib", required_argument, NULL, 'c'},
		{"out", required_argument, NULL, 'o'},
		{NULL, 0, NULL, 0},
	};
	const char *out = NULL, *role = getenv("CAP_STRESS_RESULT");
	char exe[PATH_MAX], root[PATH_MAX], lib[PATH_MAX * 2],
		fake[PATH_MAX * 2], res[64], rep[64], lim[32], *text, *rtext;
	double seconds = 60;
	unsigned long cap_mib = 128;
	struct utsname un;
	int c, status;
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	ssize_t n;
	pid_t pid;
	FILE *f;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		if (c == 's')
			seconds = atof(optarg);
		else if (c == 'c')
			cap_mib = strtoul(optarg, NULL, 10);
		else if (c == 'o')
			out = optarg;
		else
			return fprintf(stderr, "usage: cap_stress [--seconds S] "
				       "[--cap-mib M] [--out FILE]\n"), 2;
	}
	if (seconds <= 0 || !cap_mib)
		return fprintf(stderr, "cap_stress: bad --seconds or "
			       "--cap-mib\n"), 2;
	cap = cap_mib * MiB;
	if (role)
		return child(seconds, role);

	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 1;
	exe[n] = '\0';
	snprintf(root, sizeof(root), "%s/../..", dirname(exe));
	snprintf(lib, sizeof(lib), "%s/allocator/preload/libgpumem-preload.so",
		 root);
	snprintf(fake, sizeof(fake), "%s/tests/fake", root);
	if (access(lib, R_OK) != 0)
		return fprintf(stderr, "cap_stress: no %s\n", lib), 1;
	snprintf(res, sizeof(res), "/tmp/cap-stress-%ld.txt", (long)getpid());
	snprintf(rep, sizeof(rep), "/tmp/cap-stress-%ld.json", (long)getpid());
	snprintf(lim, sizeof(lim), "%luMiB", cap_mib);
	pid = fork();
	if (pid == 0) {
		setenv("LD_PRELOAD", lib, 1);
		setenv("LD_LIBRARY_PATH", fake, 1);
		setenv("GPUMEM_LIMIT", lim, 1);
		setenv("GPUMEM_REPORT", rep, 1);
		setenv("CAP_STRESS_RESULT", res, 1);
		unsetenv("GPUMEM_FRACTION");
		unsetenv("GPUMEM_MODE");
		execv("/proc/self/exe", argv);
		_exit(127);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return fprintf(stderr, "cap_stress: the run failed\n"), 1;
	text = slurp(res);
	rtext = slurp(rep);
	unlink(res);
	unlink(rep);
	if (!text || !rtext)
		return fprintf(stderr, "cap_stress: no result\n"), 1;
	uname(&un);
	f = out ? fopen(out, "w") : NULL;
	for (int pass = 0; pass < (f ? 2 : 1); pass++) {
		FILE *o = pass ? f : stdout;
		char key[64];
		unsigned long long v;
		const char *p = text;
		int used;

		fprintf(o, "{\n  \"kind\": \"gpumem-cap-stress\",\n"
			"  \"machine\": \"%s %s, %ld CPUs online\",\n"
			"  \"driver\": \"fake (tests/fake/fakecuda.c)\",\n"
			"  \"threads\": %d,\n  \"slow_free_threads\": %d,\n"
			"  \"slow_free_us\": [0, 1000],\n"
			"  \"sizes_bytes\": [512, %llu],\n"
			"  \"seconds\": %g,\n  \"cap_bytes\": %llu,\n",
			un.sysname, un.machine, ncpu, THREADS, THREADS / 2,
			16 * MiB, seconds, (unsigned long long)cap);
		while (sscanf(p, "%63s %llu%n", key, &v, &used) == 2) {
			fprintf(o, "  \"%s\": %llu,\n", key, v);
			p += used;
		}
		fprintf(o, "  \"report_peak_reserved_bytes\": %lld,\n"
			"  \"report_oom_cap_count\": %lld\n}\n",
			json_number(rtext, "peak_reserved_bytes"),
			json_number(rtext, "oom_cap_count"));
	}
	if (f && fclose(f) != 0)
		return fprintf(stderr, "cap_stress: %s: %s\n", out,
			       strerror(errno)), 1;
	free(text);
	free(rtext);
	return 0;
}
