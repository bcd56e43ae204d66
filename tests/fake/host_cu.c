/* host_cu.c - fake pinned host memory driver calls (see host_cu.h). */
#include "host_cu.h"

#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

struct gm_fake_host gm_fake_host;

struct fake_alloc {
	uintptr_t p;
	size_t size;
	unsigned flags;
};

/* A fixed table: the fake never calls malloc, so a test can check that
 * pinned allocations leave the program's heap alone. */
#define FAKE_MAX 16384
static pthread_mutex_t fake_mtx = PTHREAD_MUTEX_INITIALIZER;
static struct fake_alloc fake_tab[FAKE_MAX];
static size_t fake_n;

/* Contiguous mode: one reserved region handed out from the bottom up. */
#define FAKE_REGION ((size_t)4 << 30)
static uintptr_t fake_region, fake_next;

static void *fake_bump(size_t bytes)
{
	void *r;

	if (!fake_region) {
		r = mmap(NULL, FAKE_REGION, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (r == MAP_FAILED)
			return NULL;
		fake_region = fake_next = (uintptr_t)r;
	}
	bytes = (bytes + 4095) & ~(size_t)4095;
	if (fake_next + bytes > fake_region + FAKE_REGION)
		return NULL;
	r = (void *)fake_next;
	fake_next += bytes;
	return r;
}

static void fake_unmap(void *p, size_t bytes)
{
	uintptr_t u = (uintptr_t)p;

	if (fake_region && u - fake_region < FAKE_REGION)
		madvise(p, bytes, MADV_DONTNEED); /* never handed out again */
	else
		munmap(p, bytes);
}

static long fake_find(uintptr_t p)
{
	for (size_t i = 0; i < fake_n; i++)
		if (p - fake_tab[i].p < fake_tab[i].size)
			return (long)i;
	return -1;
}

static gm_cu_result fake_host_alloc(void **pp, size_t bytes, unsigned flags)
{
	int mf = MAP_PRIVATE | MAP_ANONYMOUS;
	void *p;

	if (!pp || !bytes)
		return GM_CU_ERROR_INVALID_VALUE;
	if (atomic_load(&gm_fake_host.fail_next) > 0 &&
	    atomic_fetch_sub(&gm_fake_host.fail_next, 1) > 0)
		return GM_CU_ERROR_OUT_OF_MEMORY;
	if (gm_fake_host.populate)
		mf |= MAP_POPULATE;
	pthread_mutex_lock(&fake_mtx);
	if (gm_fake_host.contiguous) {
		p = fake_bump(bytes);
	} else {
		p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, mf, -1, 0);
		if (p == MAP_FAILED)
			p = NULL;
	}
	if (!p) {
		pthread_mutex_unlock(&fake_mtx);
		return GM_CU_ERROR_OUT_OF_MEMORY;
	}
	if (fake_n == FAKE_MAX) {
		pthread_mutex_unlock(&fake_mtx);
		fake_unmap(p, bytes);
		return GM_CU_ERROR_OUT_OF_MEMORY;
	}
	fake_tab[fake_n++] = (struct fake_alloc){ (uintptr_t)p, bytes, flags };
	pthread_mutex_unlock(&fake_mtx);
	atomic_fetch_add(&gm_fake_host.allocs, 1);
	atomic_fetch_add(&gm_fake_host.live, 1);
	atomic_fetch_add(&gm_fake_host.live_bytes, bytes);
	*pp = p;
	return GM_CU_SUCCESS;
}

static gm_cu_result fake_free_host(void *p)
{
	struct fake_alloc a;
	long i;

	pthread_mutex_lock(&fake_mtx);
	i = fake_find((uintptr_t)p);
	if (i < 0 || fake_tab[i].p != (uintptr_t)p) {
		pthread_mutex_unlock(&fake_mtx);
		atomic_fetch_add(&gm_fake_host.bad_frees, 1);
		return GM_CU_ERROR_INVALID_VALUE;
	}
	a = fake_tab[i];
	fake_tab[i] = fake_tab[--fake_n];
	pthread_mutex_unlock(&fake_mtx);
	fake_unmap((void *)a.p, a.size);
	atomic_fetch_add(&gm_fake_host.frees, 1);
	atomic_fetch_sub(&gm_fake_host.live, 1);
	atomic_fetch_sub(&gm_fake_host.live_bytes, a.size);
	return GM_CU_SUCCESS;
}

static gm_cu_result fake_get_dptr(gm_cu_ptr *d, void *p, unsigned flags)
{
	gm_cu_result r = GM_CU_ERROR_INVALID_VALUE;
	long i;

	pthread_mutex_lock(&fake_mtx);
	i = fake_find((uintptr_t)p);
	if (i >= 0 && (fake_tab[i].flags & GM_CU_MEMHOSTALLOC_DEVICEMAP)) {
		*d = (gm_cu_ptr)(uintptr_t)p + GM_FAKE_DEVICE_OFFSET;
		r = GM_CU_SUCCESS;
	}
	pthread_mutex_unlock(&fake_mtx);
	return r;
}

int gm_fake_host_flags(const void *p)
{
	int f = -1;
	long i;

	pthread_mutex_lock(&fake_mtx);
	i = fake_find((uintptr_t)p);
	if (i >= 0)
		f = (int)fake_tab[i].flags;
	pthread_mutex_unlock(&fake_mtx);
	return f;
}

static gm_cu_result fake_get_flags(unsigned *flags, void *p)
{
	int f = gm_fake_host_flags(p);

	if (f < 0)
		return GM_CU_ERROR_INVALID_VALUE;
	*flags = (unsigned)f;
	return GM_CU_SUCCESS;
}

static gm_cu_result fake_init(unsigned flags)
{
	return GM_CU_SUCCESS;
}

static gm_cu_result fake_error_name(gm_cu_result r, const char **name)
{
	*name = r == GM_CU_ERROR_OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" :
		r == GM_CU_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE" :
						 "CUDA_ERROR_UNKNOWN";
	return GM_CU_SUCCESS;
}

bool gm_fake_host_within_one(const void *p, size_t size)
{
	uintptr_t u = (uintptr_t)p;
	bool ok;
	long i;

	pthread_mutex_lock(&fake_mtx);
	i = fake_find(u);
	ok = i >= 0 && u + size - fake_tab[i].p <= fake_tab[i].size;
	pthread_mutex_unlock(&fake_mtx);
	return ok;
}

void gm_fake_host_cu_fill(struct gm_cu *cu, bool populate, bool contiguous)
{
	memset(cu, 0, sizeof(*cu));
	cu->init = fake_init;
	cu->error_name = fake_error_name;
	cu->mem_host_alloc = fake_host_alloc;
	cu->mem_free_host = fake_free_host;
	cu->mem_host_get_device_pointer = fake_get_dptr;
	cu->mem_host_get_flags = fake_get_flags;
	atomic_store(&gm_fake_host.allocs, 0);
	atomic_store(&gm_fake_host.frees, 0);
	atomic_store(&gm_fake_host.bad_frees, 0);
	atomic_store(&gm_fake_host.fail_next, 0);
	gm_fake_host.populate = populate;
	gm_fake_host.contiguous = contiguous;
}
