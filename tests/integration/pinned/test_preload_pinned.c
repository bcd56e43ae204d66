/*
 * The preload library's pinned entry points, reached the way CuPy or the
 * runtime reach the driver (dlopen + dlsym), over fake_libcuda.c.
 * argv[1] = "cached": libgpumem-pinned.so is preloaded too, so 1000
 * allocate+free pairs take one driver allocation and the pointer queries
 * are answered from the cache; "pass": only the preload library, every
 * call reaches the driver.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
	int (*host_alloc)(void **, size_t, unsigned);
	int (*free_host)(void *);
	int (*get_dptr)(unsigned long long *, void *, unsigned);
	int (*get_flags)(unsigned *, void *);
	void (*counts)(int *, int *);
	bool cached = argc > 1 && strcmp(argv[1], "cached") == 0;
	void *h = dlopen(getenv("GPUMEM_LIBCUDA"), RTLD_NOW);
	unsigned long long d = 0;
	unsigned flags = 0;
	int a, f, bad = 0;
	void *p;

	if (!h)
		return 1;
	*(void **)&host_alloc = dlsym(h, "cuMemHostAlloc");
	*(void **)&free_host = dlsym(h, "cuMemFreeHost");
	*(void **)&get_dptr = dlsym(h, "cuMemHostGetDevicePointer_v2");
	*(void **)&get_flags = dlsym(h, "cuMemHostGetFlags");
	*(void **)&counts = dlsym(h, "fake_counts");
	for (int i = 0; i < 1000; i++) {
		if (host_alloc(&p, 1 << 20, 2) != 0)
			return 1;
		memset(p, i, 1 << 20);
		if (i == 0) {
			/* Inside the buffer: device pointer of the chunk + offset. */
			bad |= get_dptr(&d, (char *)p + 10, 0) != 0 ||
			       d != (unsigned long long)(size_t)p + 10 + 1;
			bad |= get_flags(&flags, p) != 0 ||
			       flags != (cached ? 2u : 99u);
		}
		bad |= free_host(p) != 0;
	}
	counts(&a, &f);
	printf("%s: %d driver allocations, %d frees for 1000 pairs; "
	       "flags %u\n", cached ? "cached" : "pass", a, f, flags);
	if (cached ? a > 2 || f != 0 : a != 1000 || f != 1000)
		bad = 1;
	return bad;
}
