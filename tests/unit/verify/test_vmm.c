/*
 * Unit tests for the VMM fake (verify/gpu.c) without a GPU: a fake
 * driver table whose virtual memory API keeps the real driver's rules
 * and models physical memory. cuMemCreate makes a memfd (the handle's
 * physical memory), cuMemAddressReserve an inaccessible host range,
 * cuMemMap maps the memfd there (MAP_SHARED|MAP_FIXED), so two virtual
 * chunks mapped to one handle really share storage. Like the driver
 * (580 on an H200, measured: tools/bench/results/verify-h200.md) it
 * refuses with CUDA_ERROR_NOT_SUPPORTED to map part of an allocation.
 * The passes run on the CPU over those host addresses (a small backend
 * here, the kernels' loops over pattern.h), so the whole fake - sizes,
 * handles, maps, the verdict, teardown - runs end to end at MiB scale.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cu.h"
#include "error.h"
#include "units.h"
#include "verify.h"

#define GRAN (2 * GM_MiB)
#define MAX_H 64
#define MAX_MAPS 256

/* ==== The fake driver ==== */

static struct {
	int fd[MAX_H + 1]; /* handle h is fd[h]; -1 when released */
	uint64_t size[MAX_H + 1];
	int nh;
	struct { uint64_t va, size; } res;
	struct { uint64_t va, size; int h; } map[MAX_MAPS];
	int nmap;
	int live_handles, live_maps, reserved;
	int refused_partial; /* partial maps refused */
} drv;

static void drv_reset(void)
{
	memset(&drv, 0, sizeof(drv));
}

static gm_cu_result f_init(unsigned flags) { return 0; }
static gm_cu_result f_count(int *n)
{
	*n = 1;
	return 0;
}
static gm_cu_result f_device_get(gm_cu_device *d, int i)
{
	*d = i;
	return i == 0 ? 0 : GM_CU_ERROR_INVALID_DEVICE;
}
static gm_cu_result f_name(char *name, int len, gm_cu_device d)
{
	snprintf(name, (size_t)len, "NVIDIA H200");
	return 0;
}
static gm_cu_result f_total(size_t *b, gm_cu_device d)
{
	*b = 143155 * GM_MiB;
	return 0;
}
static gm_cu_result f_attr(int *v, int attr, gm_cu_device d)
{
	*v = attr == GM_CU_ATTR_VMM_SUPPORTED ? 1
	     : attr == GM_CU_ATTR_MULTIPROCESSOR_COUNT ? 132 : 0;
	return 0;
}
static gm_cu_result f_err(gm_cu_result r, const char **name)
{
	*name = r == GM_CU_ERROR_NOT_SUPPORTED ? "CUDA_ERROR_NOT_SUPPORTED"
					       : "CUDA_ERROR_OTHER";
	return 0;
}
static gm_cu_result f_gran(size_t *g, const struct gm_cu_alloc_prop *p,
			   int option)
{
	*g = GRAN;
	return 0;
}

static gm_cu_result f_create(gm_cu_handle *h, size_t size,
			     const struct gm_cu_alloc_prop *p,
			     unsigned long long flags)
{
	int fd;

	if (!size || size % GRAN || drv.nh == MAX_H)
		return 1; /* CUDA_ERROR_INVALID_VALUE */
	fd = memfd_create("gm-fake-vram", 0);
	if (fd < 0 || ftruncate(fd, (off_t)size)) {
		if (fd >= 0)
			close(fd);
		return GM_CU_ERROR_OUT_OF_MEMORY;
	}
	drv.nh++;
	drv.fd[drv.nh] = fd;
	drv.size[drv.nh] = size;
	drv.live_handles++;
	*h = (gm_cu_handle)drv.nh;
	return 0;
}

static gm_cu_result f_release(gm_cu_handle h)
{
	if (h < 1 || h > (gm_cu_handle)drv.nh || drv.fd[h] < 0)
		return 1;
	close(drv.fd[h]); /* mappings keep the memory, as in the driver */
	drv.fd[h] = -1;
	drv.live_handles--;
	return 0;
}

static gm_cu_result f_reserve(gm_cu_ptr *p, size_t size, size_t align,
			      gm_cu_ptr addr, unsigned long long flags)
{
	void *m;

	if (!size || size % GRAN || drv.reserved)
		return 1;
	m = mmap(NULL, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return GM_CU_ERROR_OUT_OF_MEMORY;
	drv.res.va = (uint64_t)(uintptr_t)m;
	drv.res.size = size;
	drv.reserved = 1;
	*p = drv.res.va;
	return 0;
}

static gm_cu_result f_addr_free(gm_cu_ptr p, size_t size)
{
	if (!drv.reserved || p != drv.res.va || size != drv.res.size ||
	    drv.live_maps)
		return 1;
	munmap((void *)(uintptr_t)p, size);
	drv.reserved = 0;
	return 0;
}

static int map_at(uint64_t va)
{
	for (int i = 0; i < drv.nmap; i++)
		if (drv.map[i].size && drv.map[i].va == va)
			return i;
	return -1;
}

/* The rules: inside the reservation, aligned, not over another map, and
 * the whole allocation (the driver refuses part of one). */
static gm_cu_result f_map(gm_cu_ptr p, size_t size, size_t offset,
			  gm_cu_handle h, unsigned long long flags)
{
	void *m;

	if (h < 1 || h > (gm_cu_handle)drv.nh || drv.fd[h] < 0 ||
	    p % GRAN || size % GRAN || !drv.reserved || p < drv.res.va ||
	    p + size > drv.res.va + drv.res.size || drv.nmap == MAX_MAPS)
		return 1;
	for (int i = 0; i < drv.nmap; i++)
		if (drv.map[i].size && p < drv.map[i].va + drv.map[i].size &&
		    drv.map[i].va < p + size)
			return 1;
	if (offset != 0 || size != drv.size[h]) {
		drv.refused_partial++;
		return GM_CU_ERROR_NOT_SUPPORTED;
	}
	m = mmap((void *)(uintptr_t)p, size, PROT_NONE, MAP_SHARED | MAP_FIXED,
		 drv.fd[h], 0);
	if (m == MAP_FAILED)
		return GM_CU_ERROR_OUT_OF_MEMORY;
	drv.map[drv.nmap].va = p;
	drv.map[drv.nmap].size = size;
	drv.map[drv.nmap].h = (int)h;
	drv.nmap++;
	drv.live_maps++;
	return 0;
}

/* Whole mappings only, as the driver. */
static gm_cu_result f_unmap(gm_cu_ptr p, size_t size)
{
	uint64_t end = p + size;

	while (p < end) {
		int i = map_at(p);

		if (i < 0 || p + drv.map[i].size > end)
			return 1;
		mmap((void *)(uintptr_t)p, drv.map[i].size, PROT_NONE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
		     -1, 0);
		p += drv.map[i].size;
		drv.map[i].size = 0;
		drv.live_maps--;
	}
	return 0;
}

/* Every byte of the range must be mapped. */
static gm_cu_result f_access(gm_cu_ptr p, size_t size,
			     const struct gm_cu_access_desc *desc, size_t n)
{
	uint64_t end = p + size;

	if (n != 1 || desc->flags != GM_CU_MEM_ACCESS_READWRITE)
		return 1;
	while (p < end) {
		int i = map_at(p);

		if (i < 0)
			return 1;
		if (mprotect((void *)(uintptr_t)p, drv.map[i].size,
			     PROT_READ | PROT_WRITE))
			return 1;
		p += drv.map[i].size;
	}
	return 0;
}

static struct gm_cu fake_cu(void)
{
	struct gm_cu cu = {0};

	cu.init = f_init;
	cu.device_count = f_count;
	cu.device_get = f_device_get;
	cu.device_name = f_name;
	cu.device_total_mem = f_total;
	cu.device_attribute = f_attr;
	cu.error_name = f_err;
	cu.mem_granularity = f_gran;
	cu.mem_create = f_create;
	cu.mem_release = f_release;
	cu.mem_address_reserve = f_reserve;
	cu.mem_address_free = f_addr_free;
	cu.mem_map = f_map;
	cu.mem_unmap = f_unmap;
	cu.mem_set_access = f_access;
	return cu;
}

/* ==== The passes on the CPU, through the fake's host addresses ==== */

static struct gm_ve host_e;

static int h_begin(void *ctx, struct gm_diag *d)
{
	gm_ve_init(&host_e);
	return 0;
}

static int h_write(void *ctx, const struct gm_vchunk *c, int kind,
		   uint64_t seed, uint64_t konst, struct gm_diag *d)
{
	uint64_t *p = (uint64_t *)(uintptr_t)c->addr;

	for (uint64_t w = 0; w < c->words; w++)
		p[w] = gm_vp_value(kind, seed, konst, c->base + w);
	return 0;
}

static int h_verify(void *ctx, const struct gm_vchunk *c, int kind,
		    uint64_t seed, uint64_t konst, int next_kind,
		    uint64_t next_konst, uint64_t total, struct gm_diag *d)
{
	uint64_t *p = (uint64_t *)(uintptr_t)c->addr;
	struct gm_ve_acc a;

	gm_ve_acc_init(&a);
	for (uint64_t w = 0; w < c->words; w++) {
		uint64_t i = c->base + w;
		uint64_t x = gm_vp_value(kind, seed, konst, i);

		if (p[w] != x)
			gm_ve_classify(&a, &host_e, i, x, p[w], kind, seed,
				       total);
		if (next_kind >= 0)
			p[w] = gm_vp_value(next_kind, seed, next_konst, i);
	}
	gm_ve_flush(&host_e, &a);
	return 0;
}

static int h_walk(void *ctx, const struct gm_vchunk *c, int verify,
		  uint64_t seed, uint64_t total, struct gm_diag *d)
{
	uint64_t *p = (uint64_t *)(uintptr_t)c->addr;
	struct gm_ve_acc a;

	gm_ve_acc_init(&a);
	for (int pos = 0; pos < gm_vp_walk_count(total); pos++) {
		uint64_t i = gm_vp_walk_index(pos);
		uint64_t x = gm_vp_value(GM_VP_UNIQUE, seed, 0, i);

		if (i < c->base || i >= c->base + c->words)
			continue;
		if (!verify)
			p[i - c->base] = x;
		else if (p[i - c->base] != x)
			gm_ve_classify(&a, &host_e, i, x, p[i - c->base],
				       GM_VP_UNIQUE, seed, total);
	}
	gm_ve_flush(&host_e, &a);
	return 0;
}

static int h_sync(void *ctx, struct gm_ve *out, struct gm_diag *d)
{
	if (out)
		*out = host_e;
	return 0;
}

static const struct gm_vbackend host_be = {
	.begin = h_begin, .write = h_write, .verify = h_verify,
	.walk = h_walk, .sync = h_sync,
};

/* ==== Tests ==== */

static int run_fake(uint64_t claimed, uint64_t real,
		    enum gm_verify_level level, struct gm_verify_result *r,
		    struct gm_diag *d)
{
	struct gm_cu cu = fake_cu();
	struct gm_verify_opts o = {.level = level, .seed = 12345};

	drv_reset();
	return gm__verify_vmm_fake_on(&cu, 0, claimed, real, &o, &host_be, r,
				      d);
}

static void assert_torn_down(void)
{
	assert_int_equal(drv.live_maps, 0);
	assert_int_equal(drv.live_handles, 0);
	assert_int_equal(drv.reserved, 0);
}

/* The chunk: the largest multiple of the granularity dividing both. */
static void chunk_size(void **state)
{
	(void)state;
	assert_true(gm__vmm_chunk(100 * GM_GiB, 34 * GM_GiB, GRAN) ==
		    2 * GM_GiB);
	assert_true(gm__vmm_chunk(40 * GM_GiB, 12 * GM_GiB, GRAN) ==
		    4 * GM_GiB);
	assert_true(gm__vmm_chunk(48 * GM_GiB, 16 * GM_GiB, GRAN) ==
		    16 * GM_GiB);
	assert_true(gm__vmm_chunk(14 * GM_MiB, 6 * GM_MiB, GRAN) == GRAN);
	assert_true(gm__vmm_chunk(3 * GM_MiB, 2 * GM_MiB, GRAN) == 0);
}

/* 40 MiB over 12 MiB (chunk 4 MiB, 3 handles, 10 maps): the last map
 * would be part of an allocation with one 12 MiB handle. Caught as
 * undersized with exactly 12 MiB real, in both plans. */
static void fake_40_over_12(void **state)
{
	struct gm_verify_result r;
	struct gm_diag d = {{0}};

	(void)state;
	for (int full = 0; full < 2; full++) {
		assert_int_equal(run_fake(40 * GM_MiB, 12 * GM_MiB,
					  full ? GM_VERIFY_FULL
					       : GM_VERIFY_QUICK,
					  &r, &d),
				 0);
		assert_int_equal(drv.refused_partial, 0);
		assert_int_equal(drv.nh, 3);
		assert_int_equal(drv.nmap, 10);
		assert_string_equal(gm_verify_verdict_name(r.verdict),
				    "undersized");
		assert_true(r.real_bytes == 12 * GM_MiB);
		assert_true(r.tested_bytes == 40 * GM_MiB);
		assert_true(r.alias_errors > 0);
		assert_true(r.alias_stride_bytes == 12 * GM_MiB);
		assert_torn_down();
	}
}

/* Non-powers of two with a gcd of one granule: 34 MiB real under 100
 * MiB (17 handles of 2 MiB, 50 maps). */
static void fake_100_over_34(void **state)
{
	struct gm_verify_result r;
	struct gm_diag d = {{0}};

	(void)state;
	assert_int_equal(run_fake(100 * GM_MiB, 34 * GM_MiB, GM_VERIFY_QUICK,
				  &r, &d),
			 0);
	assert_int_equal(drv.nh, 17);
	assert_int_equal(drv.nmap, 50);
	assert_int_equal(r.verdict, GM_VERDICT_UNDERSIZED);
	assert_true(r.real_bytes == 34 * GM_MiB);
	assert_torn_down();
}

/* real == claimed: a genuine card, no false alarm. */
static void fake_genuine(void **state)
{
	struct gm_verify_result r;
	struct gm_diag d = {{0}};

	(void)state;
	assert_int_equal(run_fake(16 * GM_MiB, 16 * GM_MiB, GM_VERIFY_FULL,
				  &r, &d),
			 0);
	assert_int_equal(r.verdict, GM_VERDICT_OK);
	assert_true(r.errors == 0 && r.real_bytes == 0);
	assert_true(r.verified_bytes == 16 * GM_MiB);
	assert_torn_down();
}

/* Sizes off the granularity: refused naming the option (exit 2), with
 * nothing allocated. */
static void off_granularity(void **state)
{
	struct gm_verify_result r;
	struct gm_diag d = {{0}};

	(void)state;
	assert_int_equal(run_fake(40 * GM_MiB, 13 * GM_MiB, GM_VERIFY_QUICK,
				  &r, &d),
			 GM_EINVAL);
	assert_non_null(strstr(d.msg, "--emulate-vmm"));
	assert_non_null(strstr(d.msg, "real="));
	assert_non_null(strstr(d.msg, "granularity"));
	assert_int_equal(gm_exit_code(GM_EINVAL), GM_EXIT_USAGE);
	assert_int_equal(drv.nh, 0);
	assert_int_equal(run_fake(41 * GM_MiB, 12 * GM_MiB, GM_VERIFY_QUICK,
				  &r, &d),
			 GM_EINVAL);
	assert_non_null(strstr(d.msg, "claimed="));
	assert_int_equal(run_fake(12 * GM_MiB, 40 * GM_MiB, GM_VERIFY_QUICK,
				  &r, &d),
			 GM_EINVAL);
	assert_int_equal(drv.nh, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(chunk_size),
		cmocka_unit_test(fake_40_over_12),
		cmocka_unit_test(fake_100_over_34),
		cmocka_unit_test(fake_genuine),
		cmocka_unit_test(off_granularity),
	};

	setenv("GPUMEM_LIBNVML", "none", 1);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
