/*
 * fakecudart.c - a tiny stand-in for the shared libcudart: it reaches the
 * driver the way the real runtime does (dlopen libcuda.so.1, dlsym
 * cuGetProcAddress_v2, then every function through it), so a test
 * program linked to it exercises the runtime-level wrappers and checks
 * that nothing is counted twice. With FAKECUDART_BYPASS=1 it reaches the
 * allocation functions by a route gpumem cannot see (dlsym under a name
 * that is not the driver's), to exercise the runtime-level fallback.
 */
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wpedantic"

typedef int (*getproc_fn)(const char *, void **, int, unsigned long long,
			  int *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*info_fn)(size_t *, size_t *);

static alloc_fn d_alloc;
static free_fn d_free;
static info_fn d_info;

static int init(void)
{
	void *h;
	getproc_fn gp;

	if (d_alloc)
		return 0;
	h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (!h)
		return 3;
	if (getenv("FAKECUDART_BYPASS")) {
		/* Unseen: a private alias (the fake's own symbol under a
		 * name gpumem does not wrap), like an export table. */
		d_alloc = (alloc_fn)dlsym(h, "fakecuda_raw_alloc");
		d_free = (free_fn)dlsym(h, "fakecuda_raw_free");
		d_info = (info_fn)dlsym(h, "fakecuda_raw_info");
		return d_alloc && d_free && d_info ? 0 : 3;
	}
	gp = (getproc_fn)dlsym(h, "cuGetProcAddress_v2");
	if (!gp)
		return 3;
	gp("cuMemAlloc", (void **)&d_alloc, 13000, 0, NULL);
	gp("cuMemFree", (void **)&d_free, 13000, 0, NULL);
	gp("cuMemGetInfo", (void **)&d_info, 13000, 0, NULL);
	return d_alloc && d_free && d_info ? 0 : 3;
}

/* cudaError_t values: 0 success, 2 cudaErrorMemoryAllocation. */
static int map(int cu) { return cu == 2 ? 2 : cu ? 1 : 0; }

EXPORT int cudaMalloc(void **p, size_t size)
{
	unsigned long long d = 0;
	int r = init();
	if (r)
		return r;
	r = map(d_alloc(&d, size));
	*p = r ? NULL : (void *)(size_t)d;
	return r;
}

EXPORT int cudaFree(void *p)
{
	int r = init();
	return r ? r : map(d_free((unsigned long long)(size_t)p));
}

EXPORT int cudaMemGetInfo(size_t *f, size_t *t)
{
	int r = init();
	return r ? r : map(d_info(f, t));
}
