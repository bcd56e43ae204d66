/*
 * pl_plug_torch.cpp - loads libgpumem-torch.so the way
 * torch.cuda.memory.CUDAPluggableAllocator does (dlopen, dlsym, no
 * LD_PRELOAD) and calls its pair with PyTorch's signatures. Run with
 * GPUMEM_LIMIT=64MiB and the fake driver: 40 MiB works, a second 40 MiB
 * must throw std::bad_alloc whose what() names the cap, zero bytes give
 * NULL without throwing, and after a free 40 MiB works again.
 * Usage: pl_plug_torch PATH_TO_LIBGPUMEM_TORCH
 */
#include <dlfcn.h>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <new>

typedef void *(*gm_alloc_fn)(size_t, int, void *);
typedef void (*gm_free_fn)(void *, size_t, int, void *);

int main(int argc, char **argv)
{
	const size_t mib40 = 40u << 20;
	gm_alloc_fn alloc;
	gm_free_fn release;
	void *lib, *a, *b = nullptr, *c, *z;
	bool threw = false, named = false;

	if (argc != 2)
		return 2;
	lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		fprintf(stderr, "%s\n", dlerror());
		return 1;
	}
	alloc = reinterpret_cast<gm_alloc_fn>(dlsym(lib,
						    "gpumem_torch_malloc"));
	release = reinterpret_cast<gm_free_fn>(dlsym(lib,
						     "gpumem_torch_free"));
	if (!alloc || !release)
		return 1;
	a = alloc(mib40, 0, nullptr);
	try {
		b = alloc(mib40, 0, nullptr);
	} catch (const std::bad_alloc &e) {
		threw = true;
		named = strstr(e.what(), "gpumem: CUDA out of memory") &&
			strstr(e.what(), "over the gpumem cap of 64.00 MiB");
		fprintf(stderr, "caught std::bad_alloc: %s\n", e.what());
	}
	z = alloc(0, 0, nullptr);
	release(a, mib40, 0, nullptr);
	c = alloc(mib40, 0, nullptr);
	release(c, mib40, 0, nullptr);
	fprintf(stderr, "a %p b %p c %p z %p threw %d named %d\n", a, b, c,
		z, threw, named);
	return !(a && !b && threw && named && c && !z);
}
