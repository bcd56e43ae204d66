/*
 * pl_linked.c - programs that call the driver or the runtime by symbol:
 *   pl_linked_cu: linked to the fake libcuda.so.1, calls cuMemAlloc_v2;
 *   pl_linked_rt: linked to the fake shared runtime, calls cudaMalloc
 *     (whose driver calls go through cuGetProcAddress: counted once).
 * Both run with GPUMEM_LIMIT=64MiB and print the free memory they see.
 */
#include <stdio.h>
#include <stddef.h>

#ifdef PL_RUNTIME
int cudaMalloc(void **p, size_t size);
int cudaFree(void *p);
int cudaMemGetInfo(size_t *f, size_t *t);
#define ALLOC(p, n) cudaMalloc((void **)(p), (n))
#define FREE(p) cudaFree((void *)(p))
#define INFO(f, t) cudaMemGetInfo((f), (t))
typedef void *ptr_t;
#else
int cuMemAlloc_v2(unsigned long long *p, size_t size);
int cuMemFree_v2(unsigned long long p);
int cuMemGetInfo_v2(size_t *f, size_t *t);
#define ALLOC(p, n) cuMemAlloc_v2((p), (n))
#define FREE(p) cuMemFree_v2(p)
#define INFO(f, t) cuMemGetInfo_v2((f), (t))
typedef unsigned long long ptr_t;
#endif

int main(void)
{
	ptr_t a = 0, b = 0;
	size_t f = 0, t = 0;
	int r1, r2, r3, r4;

	r1 = ALLOC(&a, (size_t)40 << 20);
	r2 = ALLOC(&b, (size_t)40 << 20);
	r3 = INFO(&f, &t);
	r4 = FREE(a);
	fprintf(stderr, "alloc %d, over %d, info %d free %zu total %zu, "
		"free %d\n", r1, r2, r3, f, t, r4);
	/* Expected: 0, 2 (cudaErrorMemoryAllocation / CUDA_ERROR_OUT_OF_
	 * MEMORY are both 2), 24 MiB free of 64 MiB. */
	return !(r1 == 0 && r2 == 2 && r3 == 0 && f == (size_t)24 << 20 &&
		 t == (size_t)64 << 20 && r4 == 0);
}
