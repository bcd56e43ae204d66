/*
 * pl_plug.c - loads libgpumem-preload.so the way
 * torch.cuda.memory.CUDAPluggableAllocator does (dlopen, no LD_PRELOAD)
 * and calls its allocator pair with PyTorch's signatures. Run with
 * GPUMEM_LIMIT=64MiB and the fake driver.
 * Usage: pl_plug PATH_TO_LIBGPUMEM_PRELOAD
 */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/types.h>

#pragma GCC diagnostic ignored "-Wpedantic"

int main(int argc, char **argv)
{
	void *(*alloc)(ssize_t, int, void *);
	void (*release)(void *, ssize_t, int, void *);
	void *lib, *a, *b, *c;
	int ok;

	if (argc != 2)
		return 2;
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	*(void **)&alloc = dlsym(lib, "gpumem_malloc");
	*(void **)&release = dlsym(lib, "gpumem_free");
	if (!alloc || !release)
		return 1;
	a = alloc(40 << 20, 0, NULL);
	b = alloc(40 << 20, 0, NULL);
	release(a, 40 << 20, 0, NULL);
	c = alloc(40 << 20, 0, NULL);
	ok = a && !b && c;
	release(c, 40 << 20, 0, NULL);
	fprintf(stderr, "a %p b %p c %p\n", a, b, c);
	return !ok;
}
