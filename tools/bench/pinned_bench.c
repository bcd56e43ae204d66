/*
 * pinned_bench - pinned host memory: allocate+free pairs through the
 * driver (cuMemHostAlloc + cuMemFreeHost) and through gpumem's cache
 * (allocator/pinned), for 64 KiB, 1 MiB and 64 MiB; then a training-like
 * loop that takes a fresh pinned 64 MiB buffer each step, copies it host
 * to device and frees it, both ways.
 *
 * Uses the real driver (libcuda.so.1 or $GPUMEM_LIBCUDA) when a device is
 * there, else the fake host driver of tests/fake (mmap with
 * MAP_POPULATE, which touches every page as pinning does; the copy is
 * then a memcpy). The first pair of each kind is not timed (context
 * creation, first arena). Prints a report (--format table|json|yaml|csv).
 *
 * Usage: pinned_bench [--format F] [--quick]
 */
#include "emit.h"
#include "error.h"
#include "host_cu.h"
#include "pinned.h"

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MiB ((size_t)1 << 20)

struct bench {
	struct gm_cu cu;
	struct gm_pinned *pc;
	bool real;          /* the real driver, with a device */
	gm_cu_stream stream;
	gm_cu_ptr dev;      /* device buffer for the copy loop */
	void *host_dev;     /* its stand-in over the fake */
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* One allocate+free pair, cached or straight from the driver. */
static int pair(struct bench *b, size_t size, bool cached)
{
	void *p = NULL;

	if (cached) {
		if (gm_pinned_alloc(b->pc, &p, size, 0, NULL) != 0)
			return -1;
		((volatile char *)p)[0] = 1;
		return gm_pinned_free(b->pc, p);
	}
	if (b->cu.mem_host_alloc(&p, size, 0) != GM_CU_SUCCESS)
		return -1;
	((volatile char *)p)[0] = 1;
	return b->cu.mem_free_host(p) == GM_CU_SUCCESS ? 0 : -1;
}

/* Mean seconds per pair over n pairs after one untimed warm-up. */
static double time_pairs(struct bench *b, size_t size, bool cached, int n)
{
	double t0;

	if (pair(b, size, cached) != 0)
		return -1;
	t0 = now_s();
	for (int i = 0; i < n; i++)
		if (pair(b, size, cached) != 0)
			return -1;
	return (now_s() - t0) / n;
}

/* One step: a fresh pinned buffer, filled head, copied to the device. */
static int step(struct bench *b, size_t size, bool cached)
{
	void *p = NULL;
	int err = 0;

	if (cached ? gm_pinned_alloc(b->pc, &p, size, 0, NULL) != 0 :
		     b->cu.mem_host_alloc(&p, size, 0) != GM_CU_SUCCESS)
		return -1;
	memset(p, 0x5a, 4096);
	if (b->real)
		err = b->cu.memcpy_htod_async(b->dev, p, size, b->stream) ||
		      b->cu.stream_synchronize(b->stream);
	else
		memcpy(b->host_dev, p, size);
	if (cached)
		err |= gm_pinned_free(b->pc, p);
	else
		err |= b->cu.mem_free_host(p);
	return err ? -1 : 0;
}

static double time_steps(struct bench *b, size_t size, bool cached, int n)
{
	double t0;

	if (step(b, size, cached) != 0)
		return -1;
	t0 = now_s();
	for (int i = 0; i < n; i++)
		if (step(b, size, cached) != 0)
			return -1;
	return (now_s() - t0) / n;
}

/* Open the real driver and a context, or fall back to the fake. */
static void open_driver(struct bench *b, struct gm_val *root)
{
	struct gm_diag d;
	gm_cu_device dev;
	gm_cu_ctx ctx;
	char name[256] = "";
	int v = 0, n = 0;

	if (gm_cu_open(&b->cu, NULL, &d) == 0 && b->cu.init(0) == 0 &&
	    b->cu.device_count && b->cu.device_count(&n) == 0 && n > 0 &&
	    b->cu.device_get(&dev, 0) == 0 &&
	    b->cu.primary_ctx_retain(&ctx, dev) == 0 &&
	    b->cu.ctx_set_current(ctx) == 0 && b->cu.mem_host_alloc &&
	    b->cu.stream_create(&b->stream, 0) == 0 &&
	    b->cu.mem_alloc(&b->dev, 64 * MiB) == 0) {
		b->real = true;
		b->cu.device_name(name, sizeof(name), dev);
		b->cu.driver_version(&v);
		gm_obj_set_str(root, "driver", "libcuda");
		gm_obj_set_str(root, "device", name);
		gm_obj_set_int(root, "driver_version", v);
		return;
	}
	if (b->cu.lib)
		gm_cu_close(&b->cu);
	gm_fake_host_cu_fill(&b->cu, true, false);
	b->host_dev = malloc(64 * MiB);
	gm_obj_set_str(root, "driver", "fake (mmap with MAP_POPULATE)");
	gm_obj_set_str(root, "device", "none");
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "quick", no_argument, NULL, 'q' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const size_t sizes[] = { 64 << 10, 1 << 20, 64 << 20 };
	enum gm_format fmt = GM_FORMAT_TABLE;
	struct bench b = { 0 };
	struct gm_val *root, *pairs, *loop;
	struct gm_diag d;
	char host[128] = "";
	bool quick = false;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "f:qh", opts, NULL)) != -1) {
		if (c == 'f' && gm_format_parse(optarg, &fmt, &d) == 0)
			continue;
		if (c == 'q') {
			quick = true;
			continue;
		}
		fprintf(c == 'h' ? stdout : stderr,
			"usage: pinned_bench [--format table|json|yaml|csv] "
			"[--quick]\n");
		return c == 'h' ? 0 : 2;
	}
	root = gm_val_obj();
	gethostname(host, sizeof(host) - 1);
	gm_obj_set_str(root, "machine", host);
	open_driver(&b, root);
	if (gm_pinned_create(&b.pc, &b.cu, NULL, &d) != 0) {
		fprintf(stderr, "pinned_bench: %s\n", d.msg);
		return 3;
	}
	pairs = gm_val_arr();
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		int nd = quick ? 5 : sizes[i] >= 64 * MiB ? 20 : 100;
		int nc = quick ? 1000 : 20000;
		double td = time_pairs(&b, sizes[i], false, nd);
		double tc = time_pairs(&b, sizes[i], true, nc);
		struct gm_val *o = gm_val_obj();

		if (td < 0 || tc < 0)
			rc = 3;
		gm_obj_set_uint(o, "size_bytes", sizes[i]);
		gm_obj_set_real(o, "driver_us_per_pair", td * 1e6);
		gm_obj_set_real(o, "cached_us_per_pair", tc * 1e6);
		gm_obj_set_real(o, "speedup", tc > 0 ? td / tc : 0);
		gm_obj_set_int(o, "driver_pairs", nd);
		gm_obj_set_int(o, "cached_pairs", nc);
		gm_arr_push(pairs, o);
	}
	gm_obj_set(root, "pairs", pairs);
	{
		int n = quick ? 5 : 50;
		double td = time_steps(&b, 64 * MiB, false, n);
		double tc = time_steps(&b, 64 * MiB, true, n);

		if (td < 0 || tc < 0)
			rc = 3;
		loop = gm_val_obj();
		gm_obj_set_uint(loop, "buffer_bytes", 64 * MiB);
		gm_obj_set_int(loop, "steps", n);
		gm_obj_set_real(loop, "driver_ms_per_step", td * 1e3);
		gm_obj_set_real(loop, "cached_ms_per_step", tc * 1e3);
		gm_obj_set_real(loop, "driver_gbps",
				td > 0 ? 64.0 * MiB / td / 1e9 : 0);
		gm_obj_set_real(loop, "cached_gbps",
				tc > 0 ? 64.0 * MiB / tc / 1e9 : 0);
		gm_obj_set(root, "h2d_loop", loop);
	}
	{
		struct gm_pinned_stats s;
		struct gm_val *o = gm_val_obj();

		gm_pinned_stats(b.pc, &s);
		gm_pinned_stats_set(o, &s);
		gm_obj_set(root, "cache", o);
	}
	gm_emit(stdout, root, fmt);
	gm_val_free(root);
	gm_pinned_destroy(b.pc);
	if (b.real) {
		b.cu.mem_free(b.dev);
		b.cu.stream_destroy(b.stream);
	}
	free(b.host_dev);
	return rc;
}
