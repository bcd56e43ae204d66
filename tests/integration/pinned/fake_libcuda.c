/*
 * A minimal libcuda for the preload + pinned test: host allocations over
 * mmap, counted; device pointer = host address + 1 (so a wrong offset
 * shows); cuMemHostGetFlags answers 99 (so an answer from the cache
 * shows). fake_counts() reports the calls.
 */
#include <stddef.h>
#include <sys/mman.h>

#define EXPORT __attribute__((visibility("default")))

static int n_alloc, n_free;

EXPORT int cuInit(unsigned flags);
EXPORT int cuGetErrorName(int r, const char **name);
EXPORT int cuMemHostAlloc(void **p, size_t n, unsigned flags);
EXPORT int cuMemAllocHost_v2(void **p, size_t n);
EXPORT int cuMemFreeHost(void *p);
EXPORT int cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p,
					unsigned flags);
EXPORT int cuMemHostGetFlags(unsigned *flags, void *p);
EXPORT void fake_counts(int *allocs, int *frees);

int cuInit(unsigned flags) { return 0; }

int cuGetErrorName(int r, const char **name)
{
	*name = "CUDA_ERROR";
	return 0;
}

int cuMemHostAlloc(void **p, size_t n, unsigned flags)
{
	*p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (*p == MAP_FAILED)
		return 2;
	n_alloc++;
	return 0;
}

int cuMemAllocHost_v2(void **p, size_t n) { return cuMemHostAlloc(p, n, 0); }

int cuMemFreeHost(void *p)
{
	n_free++; /* the size is unknown here: leave it mapped */
	return 0;
}

int cuMemHostGetDevicePointer_v2(unsigned long long *d, void *p,
				 unsigned flags)
{
	*d = (unsigned long long)p + 1;
	return 0;
}

int cuMemHostGetFlags(unsigned *flags, void *p)
{
	*flags = 99;
	return 0;
}

void fake_counts(int *allocs, int *frees)
{
	*allocs = n_alloc;
	*frees = n_free;
}
