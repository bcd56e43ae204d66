/* report.c - JSON and Prometheus reports (see report.h). */
#include "report.h"
#include "hooks.h"

#include "account.h"
#include "emit.h"
#include "error.h"
#include "log.h"
#include "oom_say.h"
#include "pool.h"

#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* How often the Prometheus file is refreshed when something changed. */
#define GM_PL_PROM_PERIOD_MS 1000

static pthread_mutex_t write_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_t thread;
static bool thread_running;
static sem_t wake;
static atomic_bool signalled, stopping;

/* A device is reported once an allocation was asked for on it; one
 * that was only queried (cuDeviceTotalMem, cuMemGetInfo) is not. */
static bool reported(struct gm_pl_dev *d)
{
	return atomic_load(&d->ready) && atomic_load(&d->active);
}

static uint64_t ld(_Atomic uint64_t *v)
{
	return atomic_load_explicit(v, memory_order_relaxed);
}

static const char *mode_name(void)
{
	return gm__pl.opts.mode == GM_PL_MODE_CACHE ? "cache" : "limit";
}

/*
 * Cache mode: free space, fragmentation and the OOM verdict from the
 * pool's statistics and its last OOM report; the pool's own statistics
 * (PyTorch memory_stats names) under "pool", its last OOM under
 * "pool_oom".
 */
static void pool_keys(struct gm_val *o, struct gm_pl_dev *d,
		      struct gm_pool *pool)
{
	struct gm_pool_stats st;
	struct gm_pool_oom oom;
	const char *verdict = gm_pl_oom_verdict(d);

	gm_pool_get_stats(pool, &st);
	gm_pool_last_oom(pool, &oom);
	/* The pool's OOM tells a real shortage from a fragmented cache. */
	if (oom.kind == GM_OOM_FRAGMENTATION && !d->refuse)
		verdict = "fragmentation";
	gm_obj_set_str(o, "oom_verdict", verdict);
	gm_obj_set_real(o, "fragmentation", st.fragmentation);
	gm_obj_set_uint(o, "largest_free_block_bytes",
			gm_pl_largest_free_block(d, st.largest_free_bytes));
	gm_obj_set_uint(o, "pool_reserved_bytes", st.reserved_bytes.current);
	gm_obj_set_uint(o, "pool_allocated_bytes",
			st.allocated_bytes.current);
	gm_obj_set_uint(o, "pool_free_bytes", st.free_bytes);
	gm_obj_set_bool(o, "pool_virtual_segments", gm_pool_virtual(pool));
	gm_obj_set(o, "pool", gm_pool_stats_val(&st));
	if (oom.kind != GM_OOM_NONE)
		gm_obj_set(o, "pool_oom", gm_pool_oom_val(&oom));
}

static struct gm_val *device_val(struct gm_pl_dev *d)
{
	struct gm_pool *pool = atomic_load(&d->pool);
	struct gm_val *o = gm_val_obj();
	uint64_t cap = d->cap < d->total ? d->cap : d->total;
	uint64_t ooms = ld(&d->oom_cap) + ld(&d->oom_device) +
			ld(&d->oom_undersized);

	gm_obj_set_int(o, "device", d->ordinal);
	gm_obj_set_str(o, "name", d->name);
	if (d->pci_device_id) {
		char id[16];
		snprintf(id, sizeof(id), "0x%04x", d->pci_device_id);
		gm_obj_set_str(o, "pci_device_id", id);
	}
	gm_obj_set_uint(o, "total_bytes", d->total);
	gm_obj_set_uint(o, "cap_bytes", cap);
	gm_obj_set_uint(o, "claimed_bytes", d->claimed);
	gm_obj_set_bool(o, "undersized", d->undersized);
	gm_obj_set_uint(o, "allocated_bytes", ld(&d->allocated));
	gm_obj_set_uint(o, "reserved_bytes", ld(&d->reserved));
	gm_obj_set_uint(o, "peak_allocated_bytes", ld(&d->peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", ld(&d->peak_reserved));
	gm_obj_set_uint(o, "device_alloc_bytes",
			ld(&d->by_kind[GM_PL_KIND_DEVICE]));
	gm_obj_set_uint(o, "managed_bytes", ld(&d->by_kind[GM_PL_KIND_MANAGED]));
	gm_obj_set_uint(o, "async_bytes", ld(&d->by_kind[GM_PL_KIND_ASYNC]));
	gm_obj_set_uint(o, "vmm_bytes", ld(&d->by_kind[GM_PL_KIND_VMM]));
	gm_obj_set_uint(o, "largest_request_bytes", ld(&d->peak_request));
	gm_obj_set_uint(o, "alloc_count", ld(&d->n_alloc));
	gm_obj_set_uint(o, "free_count", ld(&d->n_free));
	gm_obj_set_uint(o, "oom_count", ooms);
	gm_obj_set_uint(o, "oom_cap_count", ld(&d->oom_cap));
	gm_obj_set_uint(o, "oom_device_count", ld(&d->oom_device));
	gm_obj_set_uint(o, "last_refused_bytes", ld(&d->last_refused));
	if (pool) {
		pool_keys(o, d, pool);
		return o;
	}
	gm_obj_set_str(o, "oom_verdict", gm_pl_oom_verdict(d));
	/* Limit mode keeps no cached memory: nothing is free inside it. */
	gm_obj_set_real(o, "fragmentation", 0.0);
	gm_obj_set_uint(o, "largest_free_block_bytes",
			gm_pl_largest_free_block(d, 0));
	return o;
}

struct gm_val *gm_pl_report_build(const char *reason)
{
	struct gm_val *r = gm_val_obj(), *devs = gm_val_arr();
	char host[256] = "";

	gethostname(host, sizeof(host) - 1);
	gm_obj_set_str(r, "kind", "gpumem-report");
	gm_obj_set_int(r, "version", 1);
	gm_obj_set_str(r, "host", host);
	gm_obj_set_int(r, "pid", getpid());
	if (gm__pl.opts.rank >= 0)
		gm_obj_set_int(r, "rank", gm__pl.opts.rank);
	else
		gm_obj_set(r, "rank", gm_val_null());
	gm_obj_set_str(r, "program", program_invocation_short_name);
	gm_obj_set_str(r, "mode", mode_name());
	gm_obj_set_str(r, "reason", reason);
	for (int i = 0; i < GM_PL_MAX_DEVICES; i++)
		if (reported(&gm__pl.dev[i]))
			gm_arr_push(devs, device_val(&gm__pl.dev[i]));
	gm_obj_set(r, "devices", devs);
	gm__pl_pinned_report(r);
	return r;
}

static int expand(char *out, size_t len, const char *tmpl)
{
	return gm_pl_path_expand(out, (unsigned)len, tmpl, (long)getpid(),
				 gm__pl.opts.rank);
}

int gm_pl_report_write(const char *reason)
{
	char path[GM_PL_PATH_MAX];
	struct gm_diag diag;
	struct gm_file f;
	struct gm_val *v;
	int rc;

	if (!gm__pl.opts.report[0] || !atomic_load(&gm__pl.used))
		return 0;
	if (expand(path, sizeof(path), gm__pl.opts.report)) {
		gm_warn("GPUMEM_REPORT: the expanded path is too long");
		return GM_ERANGE;
	}
	v = gm_pl_report_build(reason);
	pthread_mutex_lock(&write_lock);
	rc = gm_file_begin(&f, path, &diag);
	if (rc == 0) {
		rc = gm_emit(f.fp, v, GM_FORMAT_JSON);
		int end = gm_file_end(&f, rc == 0, &diag);
		rc = rc ? rc : end;
	}
	pthread_mutex_unlock(&write_lock);
	gm_val_free(v);
	if (rc)
		gm_warn("GPUMEM_REPORT: %s", rc == GM_EIO ? diag.msg :
			gm_strerror(rc));
	return rc;
}

/* The Prometheus rank label: the rank, or "none" without one. */
static void rank_label(char *out, size_t len)
{
	if (gm__pl.opts.rank < 0)
		snprintf(out, len, "none");
	else
		snprintf(out, len, "%ld", gm__pl.opts.rank);
}

/* One Prometheus metric family over the reported devices. */
static void prom_family(FILE *out, const char *name, const char *type,
			const char *help, size_t offset, bool counter_sum)
{
	char rank[24];

	rank_label(rank, sizeof(rank));
	fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
	for (int i = 0; i < GM_PL_MAX_DEVICES; i++) {
		struct gm_pl_dev *d = &gm__pl.dev[i];
		uint64_t v;

		if (!reported(d))
			continue;
		if (counter_sum)
			v = ld(&d->oom_cap) + ld(&d->oom_device) +
			    ld(&d->oom_undersized);
		else if (offset == offsetof(struct gm_pl_dev, cap))
			v = d->cap < d->total ? d->cap : d->total;
		else
			v = ld((_Atomic uint64_t *)((char *)d + offset));
		fprintf(out, "%s{device=\"%d\",rank=\"%s\"} %llu\n", name,
			d->ordinal, rank, (unsigned long long)v);
	}
}

/* Cache mode: the pool's free cached bytes and largest free block. */
static void prom_pool(FILE *out, const char *rank)
{
	static const char *const name[2] = {
		"gpumem_pool_free_bytes", "gpumem_largest_free_block_bytes",
	};
	static const char *const help[2] = {
		"Cached device memory free for reuse (cache mode).",
		"Largest free block in the cache (cache mode).",
	};

	for (int k = 0; k < 2; k++) {
		bool head = false;

		for (int i = 0; i < GM_PL_MAX_DEVICES; i++) {
			struct gm_pl_dev *d = &gm__pl.dev[i];
			struct gm_pool *p;
			struct gm_pool_stats st;

			if (!reported(d) || !(p = atomic_load(&d->pool)))
				continue;
			if (!head)
				fprintf(out, "# HELP %s %s\n# TYPE %s gauge\n",
					name[k], help[k], name[k]);
			head = true;
			gm_pool_get_stats(p, &st);
			fprintf(out, "%s{device=\"%d\",rank=\"%s\"} %llu\n",
				name[k], d->ordinal, rank,
				(unsigned long long)(k ? st.largest_free_bytes :
						     st.free_bytes));
		}
	}
}

void gm_pl_prom_print(FILE *out)
{
#define F(field) offsetof(struct gm_pl_dev, field)
	prom_family(out, "gpumem_allocated_bytes", "gauge",
		    "Device memory allocated now.", F(allocated), false);
	prom_family(out, "gpumem_reserved_bytes", "gauge",
		    "Device memory obtained from the driver now.",
		    F(reserved), false);
	prom_family(out, "gpumem_peak_allocated_bytes", "gauge",
		    "Most device memory allocated at once.",
		    F(peak_allocated), false);
	prom_family(out, "gpumem_peak_reserved_bytes", "gauge",
		    "Most device memory obtained from the driver at once.",
		    F(peak_reserved), false);
	prom_family(out, "gpumem_cap_bytes", "gauge",
		    "The cap (GPUMEM_FRACTION, GPUMEM_LIMIT) or the total.",
		    F(cap), false);
	prom_family(out, "gpumem_allocations_total", "counter",
		    "Device allocations served.", F(n_alloc), false);
	prom_family(out, "gpumem_frees_total", "counter",
		    "Device allocations freed.", F(n_free), false);
	prom_family(out, "gpumem_oom_total", "counter",
		    "Allocations answered out of memory.", 0, true);
#undef F
	{
		char rank[24];

		rank_label(rank, sizeof(rank));
		prom_pool(out, rank);
		gm__pl_pinned_prom(out, rank);
	}
}

int gm_pl_prom_write(void)
{
	char path[GM_PL_PATH_MAX];
	struct gm_diag diag;
	struct gm_file f;
	int rc;

	if (!gm__pl.opts.prometheus[0] || !atomic_load(&gm__pl.used))
		return 0;
	if (expand(path, sizeof(path), gm__pl.opts.prometheus)) {
		gm_warn("GPUMEM_PROMETHEUS: the expanded path is too long");
		return GM_ERANGE;
	}
	pthread_mutex_lock(&write_lock);
	rc = gm_file_begin(&f, path, &diag);
	if (rc == 0) {
		gm_pl_prom_print(f.fp);
		rc = gm_file_end(&f, !ferror(f.fp), &diag);
	}
	pthread_mutex_unlock(&write_lock);
	if (rc)
		gm_warn("GPUMEM_PROMETHEUS: %s", diag.msg);
	return rc;
}

/* SIGUSR1: only async-signal-safe work; the thread writes. */
static void on_usr1(int sig)
{
	int saved = errno;

	(void)sig;
	atomic_store(&signalled, true);
	sem_post(&wake);
	errno = saved;
}

static void *reporter(void *arg)
{
	uint64_t seen = UINT64_MAX;
	sigset_t all;

	(void)arg;
	/* Signals go to the application's threads, not this one. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	while (!atomic_load(&stopping)) {
		struct timespec ts;
		uint64_t now;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += GM_PL_PROM_PERIOD_MS % 1000 * 1000000L;
		ts.tv_sec += GM_PL_PROM_PERIOD_MS / 1000 +
			     ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		while (sem_timedwait(&wake, &ts) != 0 && errno == EINTR)
			;
		if (atomic_load(&stopping))
			break;
		if (atomic_exchange(&signalled, false))
			gm_pl_report_write("signal");
		now = atomic_load(&gm__pl.changes);
		if (now != seen && gm_pl_prom_write() == 0)
			seen = now;
	}
	return NULL;
}

static void start(void)
{
	struct sigaction sa, old;
	sigset_t all, prev;

	if (!gm__pl.opts.report[0] && !gm__pl.opts.prometheus[0])
		return;
	sem_init(&wake, 0, 0);
	/* SIGUSR1 would end the process by default; take it only then. */
	if (gm__pl.opts.report[0] && sigaction(SIGUSR1, NULL, &old) == 0 &&
	    old.sa_handler == SIG_DFL && !(old.sa_flags & SA_SIGINFO)) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_usr1;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGUSR1, &sa, NULL);
	}
	/* Created with every signal blocked, so none lands on it early. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &prev);
	thread_running = pthread_create(&thread, NULL, reporter, NULL) == 0;
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
	if (!thread_running)
		gm_warn("cannot start the report thread; reports are written "
			"at exit only");
}

void gm_pl_reporter_start(void)
{
	pthread_once(&start_once, start);
}

/*
 * A report or a Prometheus file was asked for, but the process never
 * allocated device memory (no CUDA driver, or a program that does not
 * use the GPU), so neither is written: a process that used no device has
 * nothing to report, and the processes a job starts besides the program
 * (shells, launchers, compilers) write none. The program `gpumem run`
 * started (its pid in GPUMEM_RUN_PID) says so once on stderr, naming
 * each file not written, so that a missing file is not taken for a lost
 * node.
 */
static void no_report_note(void)
{
	const char *run = getenv("GPUMEM_RUN_PID");
	char rep[GM_PL_PATH_MAX], prom[GM_PL_PATH_MAX];
	const char *what;

	if ((!gm__pl.opts.report[0] && !gm__pl.opts.prometheus[0]) || !run ||
	    atol(run) != (long)getpid())
		return;
	if (expand(rep, sizeof(rep), gm__pl.opts.report))
		snprintf(rep, sizeof(rep), "%s", gm__pl.opts.report);
	if (expand(prom, sizeof(prom), gm__pl.opts.prometheus))
		snprintf(prom, sizeof(prom), "%s", gm__pl.opts.prometheus);
	what = gm__pl.opts.report[0] && gm__pl.opts.prometheus[0] ?
	       " and no Prometheus file to " : !gm__pl.opts.report[0] ?
	       "no Prometheus file written to " : "";
	gm_warn("%s%s%s%s: the program allocated no device memory through "
		"the CUDA driver (it did not use the GPU, or libcuda.so.1 "
		"could not be loaded)", gm__pl.opts.report[0] ?
		"no report written to " : "", gm__pl.opts.report[0] ? rep : "",
		what, gm__pl.opts.prometheus[0] ? prom : "");
}

void gm_pl_reporter_exit(void)
{
	if (!atomic_load(&gm__pl.used)) {
		no_report_note();
		return;
	}
	if (thread_running) {
		atomic_store(&stopping, true);
		sem_post(&wake);
		pthread_join(thread, NULL);
		thread_running = false;
	}
	gm_pl_report_write("exit");
	gm_pl_prom_write();
}

void gm_pl_reporter_child(void)
{
	start_once = (pthread_once_t)PTHREAD_ONCE_INIT;
	thread_running = false;
	atomic_store(&signalled, false);
	atomic_store(&stopping, false);
	pthread_mutex_init(&write_lock, NULL);
}
