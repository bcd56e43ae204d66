/*
 * test_alloc_gpu.c - the allocator core on a real GPU (suite gpu; exit
 * 77 without a driver or device).
 *
 * 1. plain segments: allocations of 512 B .. 1 GiB are writable on the
 *    device (a fill kernel, read back), reserved equals what the driver
 *    lost from cuMemGetInfo's free (within 2 MiB pages), release gives
 *    it back;
 * 2. virtual segments: growth in granules, contiguous addresses, data
 *    written, shrink on release; interior unmapping: freeing a block in
 *    the middle and releasing raises cuMemGetInfo's free by its granules
 *    (cuMemUnmap + cuMemRelease), the neighbours keep their data, the
 *    hole is mapped again for a request that fits, and growing past the
 *    slack unmaps free granules before mapping new ones;
 * 3. stream safety: a kernel on stream 1 still writing block A (spinning
 *    ~200 ms first) when the host frees A; an allocation on stream 2
 *    must not get A until that kernel finished; stream 2 then writes its
 *    block, and after everything ends the block holds stream 2's data.
 *
 * Usage: test-alloc-gpu KERNELS.fatbin
 */
#include "cu.h"
#include "cuda.h"
#include "error.h"
#include "pool.h"
#include "units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPUMEM_TEST_VERBOSE=1: each check's line on stderr before it runs
 * (where a hang is, on a machine without a debugger). */
static int verbose;
#define STEP() (verbose ? fprintf(stderr, "at line %d\n", __LINE__) : 0)
#define CHECK(c)                                                             \
	do {                                                                 \
		STEP();                                                      \
		if (!(c)) {                                                  \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, \
				__LINE__, #c);                               \
			exit(1);                                             \
		}                                                            \
	} while (0)

static struct gm_cu cu;
static gm_cu_func k_spin, k_fill;

static void fill(uint64_t addr, uint64_t bytes, unsigned tag,
		 gm_cu_stream s)
{
	unsigned long long n = bytes / 4;
	void *args[] = {&addr, &n, &tag};

	CHECK(cu.launch_kernel(k_fill, 1024, 1, 1, 256, 1, 1, 0, s, args,
			       NULL) == 0);
}

/* All words of [addr, addr + bytes) equal tag: copied to the host in
 * 64 MiB chunks and every word compared (one 4-byte copy per sampled
 * word took ~1M driver calls a check: minutes on a busy host). */
static int check_words(uint64_t addr, uint64_t bytes, unsigned tag)
{
	const uint64_t chunk = 64 * GM_MiB;
	unsigned *h = malloc(chunk);
	int ok = 1;

	CHECK(h);
	for (uint64_t off = 0; off < bytes && ok; off += chunk) {
		uint64_t len = bytes - off < chunk ? bytes - off : chunk;

		CHECK(cu.memcpy_dtoh(h, addr + off, len) == 0);
		for (uint64_t i = 0; i < len / 4; i++)
			if (h[i] != tag) {
				ok = 0;
				break;
			}
	}
	free(h);
	return ok;
}

static void plain_segments(struct gm_backend *be)
{
	static const uint64_t sizes[] = {512, 4096, 1000000, 3 * GM_MiB,
					 64 * GM_MiB + 12, GM_GiB};
	uint64_t addr[6];
	struct gm_pool *p;
	struct gm_diag d;
	size_t f0, f1, t;

	CHECK(gm_pool_create(&p, be, NULL, &d) == 0);
	CHECK(cu.mem_get_info(&f0, &t) == 0);
	for (int i = 0; i < 6; i++) {
		CHECK(gm_pool_alloc(p, sizes[i], 0, &addr[i]) == 0);
		fill(addr[i], sizes[i] & ~3ULL, 0x1000u + (unsigned)i, NULL);
	}
	CHECK(cu.ctx_synchronize() == 0);
	for (int i = 0; i < 6; i++)
		CHECK(check_words(addr[i], sizes[i] & ~3ULL,
				  0x1000u + (unsigned)i));
	CHECK(cu.mem_get_info(&f1, &t) == 0);
	printf("plain: reserved %llu B, driver free dropped %llu B\n",
	       (unsigned long long)gm_pool_reserved(p),
	       (unsigned long long)(f0 - f1));
	CHECK(f0 - f1 >= gm_pool_reserved(p));
	CHECK(f0 - f1 <= gm_pool_reserved(p) + 64 * GM_MiB);
	for (int i = 0; i < 6; i++)
		CHECK(gm_pool_free(p, addr[i]) == 0);
	CHECK(gm_pool_release_cached(p) == 0);
	CHECK(gm_pool_reserved(p) == 0);
	STEP();
	gm_pool_destroy(p);
}

static void virtual_segments(struct gm_backend *be)
{
	struct gm_pool_options o = {.virtual_segments = true};
	struct gm_pool *p;
	struct gm_diag d;
	uint64_t a, b, c;
	size_t f0, f1, t;

	CHECK(gm_pool_create(&p, be, &o, &d) == 0);
	CHECK(cu.mem_get_info(&f0, &t) == 0);
	CHECK(gm_pool_alloc(p, 3 * GM_MiB, 0, &a) == 0);
	CHECK(gm_pool_alloc(p, 3 * GM_MiB, 0, &b) == 0);
	CHECK(b == a + 3 * GM_MiB);
	CHECK(gm_pool_alloc(p, 2 * GM_GiB + 5, 0, &c) == 0);
	fill(a, 6 * GM_MiB, 0xa, NULL);
	fill(c, 2 * GM_GiB, 0xc, NULL);
	CHECK(cu.ctx_synchronize() == 0);
	CHECK(check_words(a, 6 * GM_MiB, 0xa));
	CHECK(check_words(c, 2 * GM_GiB, 0xc));
	CHECK(cu.mem_get_info(&f1, &t) == 0);
	printf("virtual: reserved %llu B, driver free dropped %llu B\n",
	       (unsigned long long)gm_pool_reserved(p),
	       (unsigned long long)(f0 - f1));
	CHECK(gm_pool_free(p, c) == 0);
	CHECK(gm_pool_release_cached(p) == 0);
	CHECK(gm_pool_reserved(p) == 6 * GM_MiB);
	CHECK(check_words(a, 6 * GM_MiB, 0xa));
	STEP();
	gm_pool_destroy(p);
}

/* Driver free bytes now. */
static uint64_t dev_free(void)
{
	size_t f = 0, t = 0;

	CHECK(cu.mem_get_info(&f, &t) == 0);
	return f;
}

/* |x - y| <= 4 MiB: cuMemGetInfo counts 2 MiB pages, and the driver may
 * move a page of its own in between. */
static int near(uint64_t x, uint64_t y)
{
	return (x > y ? x - y : y - x) <= 4 * GM_MiB;
}

static void virtual_interior(struct gm_backend *be)
{
	struct gm_pool_options o = {.virtual_segments = true};
	struct gm_pool *p;
	struct gm_diag d;
	uint64_t a, b, c, e, x, f0, f1;

	CHECK(gm_pool_create(&p, be, &o, &d) == 0);
	CHECK(gm_pool_alloc(p, 64 * GM_MiB, 0, &a) == 0);
	CHECK(gm_pool_alloc(p, 512 * GM_MiB, 0, &b) == 0);
	CHECK(gm_pool_alloc(p, 64 * GM_MiB, 0, &c) == 0);
	fill(a, 64 * GM_MiB, 0xa1, NULL);
	fill(b, 512 * GM_MiB, 0xb1, NULL);
	fill(c, 64 * GM_MiB, 0xc1, NULL);
	CHECK(cu.ctx_synchronize() == 0);
	CHECK(gm_pool_free(p, b) == 0);
	f0 = dev_free();
	CHECK(gm_pool_release_cached(p) == 0);
	f1 = dev_free();
	printf("virtual interior: release unmapped %llu B of a freed "
	       "512 MiB block in the middle; reserved %llu B\n",
	       (unsigned long long)(f1 - f0),
	       (unsigned long long)gm_pool_reserved(p));
	CHECK(near(f1 - f0, 512 * GM_MiB));
	CHECK(gm_pool_reserved(p) == 128 * GM_MiB);
	CHECK(check_words(a, 64 * GM_MiB, 0xa1));
	CHECK(check_words(c, 64 * GM_MiB, 0xc1));
	/* the hole takes a request that fits, at its start */
	CHECK(gm_pool_alloc(p, 256 * GM_MiB, 0, &e) == 0);
	CHECK(e == b);
	fill(e, 256 * GM_MiB, 0xe1, NULL);
	CHECK(cu.ctx_synchronize() == 0);
	CHECK(check_words(e, 256 * GM_MiB, 0xe1));
	CHECK(check_words(c, 64 * GM_MiB, 0xc1));
	/* growing by 2 GiB with 256 MiB free in the middle: those granules
	 * go back first, so the driver loses 2 GiB - 256 MiB, not 2 GiB */
	CHECK(gm_pool_free(p, e) == 0);
	f0 = dev_free();
	CHECK(gm_pool_alloc(p, 2 * GM_GiB, 0, &x) == 0);
	f1 = dev_free();
	printf("virtual interior: a 2 GiB growth took %llu B from the "
	       "driver (256 MiB free granules unmapped first)\n",
	       (unsigned long long)(f0 - f1));
	CHECK(near(f0 - f1, 2 * GM_GiB - 256 * GM_MiB));
	CHECK(gm_pool_reserved(p) == 128 * GM_MiB + 2 * GM_GiB);
	fill(x, 2 * GM_GiB, 0xf1, NULL);
	CHECK(cu.ctx_synchronize() == 0);
	CHECK(check_words(x, 2 * GM_GiB, 0xf1));
	CHECK(check_words(a, 64 * GM_MiB, 0xa1));
	CHECK(check_words(c, 64 * GM_MiB, 0xc1));
	STEP();
	gm_pool_destroy(p);
}

static void stream_safety(struct gm_backend *be)
{
	struct gm_pool *p;
	struct gm_diag d;
	gm_cu_stream s1, s2;
	uint64_t a, b, bytes = 64 * GM_MiB;
	unsigned long long n = bytes / 4;
	long long cycles = 400000000LL; /* ~200 ms at ~2 GHz */
	unsigned tag = 1;
	void *args[] = {&a, &n, &cycles, &tag};
	int reused_early = 0, running;

	CHECK(gm_pool_create(&p, be, NULL, &d) == 0);
	CHECK(cu.stream_create(&s1, 1) == 0); /* non-blocking streams */
	CHECK(cu.stream_create(&s2, 1) == 0);
	CHECK(gm_pool_alloc(p, bytes, (uintptr_t)s1, &a) == 0);
	CHECK(cu.launch_kernel(k_spin, 132, 1, 1, 256, 1, 1, 0, s1, args,
			       NULL) == 0);
	CHECK(gm_pool_free(p, a) == 0);
	CHECK(gm_pool_alloc(p, bytes, (uintptr_t)s2, &b) == 0);
	running = cu.stream_query(s1) == GM_CU_ERROR_NOT_READY;
	if (b == a && running)
		reused_early = 1;
	printf("stream safety: A=0x%llx B=0x%llx, kernel on stream 1 %s\n",
	       (unsigned long long)a, (unsigned long long)b,
	       running ? "still running" : "done");
	CHECK(!reused_early);
	fill(b, bytes, 2, s2);
	CHECK(cu.ctx_synchronize() == 0);
	CHECK(check_words(b, bytes, 2));
	/* Once stream 1 is done its segment may move to stream 2. */
	CHECK(gm_pool_free(p, b) == 0);
	CHECK(gm_pool_alloc(p, bytes, (uintptr_t)s2, &b) == 0);
	CHECK(gm_pool_alloc(p, bytes, (uintptr_t)s2, &a) == 0);
	{
		struct gm_pool_stats st;

		gm_pool_get_stats(p, &st);
		printf("stream safety: %llu segment(s) moved between streams\n",
		       (unsigned long long)st.num_cross_stream_reuse);
		CHECK(st.reserved_bytes.current == 2 * bytes);
	}
	STEP();
	gm_pool_destroy(p);
	cu.stream_destroy(s1);
	cu.stream_destroy(s2);
}

int main(int argc, char **argv)
{
	struct gm_cuda_options co = {.device = 0, .make_current = true};
	struct gm_backend *be, *vbe;
	struct gm_diag d;
	gm_cu_module mod;
	int n = 0;
	FILE *f;
	long len;
	char *img;

	verbose = getenv("GPUMEM_TEST_VERBOSE") != NULL;
	if (gm_cu_open(&cu, NULL, &d) || cu.init(0) ||
	    cu.device_count(&n) || n == 0) {
		printf("no CUDA device: skipped\n");
		return 77;
	}
	CHECK(argc > 1);
	CHECK(gm_cuda_backend_create(&be, &cu, &co, &d) == 0);
	f = fopen(argv[1], "rb");
	CHECK(f);
	fseek(f, 0, SEEK_END);
	len = ftell(f);
	rewind(f);
	img = malloc((size_t)len);
	CHECK(img && fread(img, 1, (size_t)len, f) == (size_t)len);
	fclose(f);
	CHECK(cu.module_load_data(&mod, img) == 0);
	CHECK(cu.module_get_function(&k_spin, mod, "spin_write") == 0);
	CHECK(cu.module_get_function(&k_fill, mod, "fill") == 0);
	plain_segments(be);
	stream_safety(be);
	co.virtual_segments = true;
	CHECK(gm_cuda_backend_create(&vbe, &cu, &co, &d) == 0);
	virtual_segments(vbe);
	virtual_interior(vbe);
	vbe->ops->destroy(vbe);
	cu.module_unload(mod);
	be->ops->destroy(be);
	free(img);
	printf("all GPU checks passed\n");
	return 0;
}
