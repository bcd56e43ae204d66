/*
 * jemalloc stays private to the preload library: run with the shim
 * LD_PRELOADed (and with MALLOC_CONF set to something that would abort
 * any jemalloc that read it), this program, which never chose jemalloc,
 * still gets glibc's malloc while pinned allocations go through the
 * library's jemalloc.
 */
#include "pinned.h"

#include <dlfcn.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                     \
	do {                                                                 \
		if (!(cond)) {                                               \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
			fprintf(stderr, __VA_ARGS__);                        \
			fputc('\n', stderr);                                 \
			failures++;                                          \
		}                                                            \
	} while (0)

/* The file name of the object that defines the symbol at addr. */
static const char *owner(void *addr)
{
	Dl_info info;

	if (!addr || !dladdr(addr, &info) || !info.dli_fname)
		return "?";
	return info.dli_fname;
}

int main(void)
{
	int (*shim)(int, struct gm_pinned_stats *);
	struct gm_pinned_stats s;
	struct mallinfo2 before, after;
	void *libc, *p;

#ifdef __SANITIZE_ADDRESS__
	/* AddressSanitizer replaces malloc itself: "glibc's malloc" cannot
	 * be checked in such a build. */
	fprintf(stderr, "skipped: built with AddressSanitizer, whose malloc "
		"replaces glibc's\n");
	return 77;
#endif
	*(void **)&shim = dlsym(RTLD_DEFAULT, "gm_test_shim_pinned");
	if (!shim) {
		fprintf(stderr, "the shim is not preloaded (LD_PRELOAD)\n");
		return 1;
	}

	/* malloc, free and malloc_usable_size are glibc's. */
	libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	CHECK(libc, "libc.so.6 not loaded");
	for (const char *const *n = (const char *const[]){ "malloc", "free",
		"calloc", "realloc", "malloc_usable_size", NULL }; *n; n++) {
		void *def = dlsym(RTLD_DEFAULT, *n);

		CHECK(def && def == dlsym(libc, *n),
		      "%s resolves to %s, not glibc", *n, owner(def));
	}
	CHECK(strstr(owner(dlsym(RTLD_DEFAULT, "malloc")), "libc"),
	      "malloc comes from %s", owner(dlsym(RTLD_DEFAULT, "malloc")));
	/* No jemalloc name of any spelling leaks out of the shim. */
	for (const char *const *n = (const char *const[]){ "mallocx",
		"mallctl", "sdallocx", "gm_je_mallocx", "gm_je_malloc",
		"gm_je_mallctl", "je_malloc_default", "malloc_conf", NULL };
	     *n; n++)
		CHECK(!dlsym(RTLD_DEFAULT, *n), "%s is visible (from %s)", *n,
		      owner(dlsym(RTLD_DEFAULT, *n)));
	/* glibc's size rule: 100 bytes use a 112-byte chunk, 104 usable
	 * (jemalloc would say 112). */
	p = malloc(100);
	CHECK(malloc_usable_size(p) == 104,
	      "malloc_usable_size(malloc(100)) = %zu, glibc gives 104",
	      malloc_usable_size(p));
	free(p);

	/* Pinned allocations go through the private jemalloc and leave
	 * glibc's heap as it was. */
	before = mallinfo2();
	CHECK(shim(20, &s) == 0, "pinned allocations failed");
	after = mallinfo2();
	CHECK(s.allocs == 20 * 8 * 3 && s.frees == s.allocs,
	      "allocs %llu frees %llu", (unsigned long long)s.allocs,
	      (unsigned long long)s.frees);
	CHECK(s.driver_allocs > 0 && s.driver_allocs * 10 < s.allocs,
	      "%llu driver allocations for %llu buffers: not cached",
	      (unsigned long long)s.driver_allocs,
	      (unsigned long long)s.allocs);
	CHECK(after.uordblks == before.uordblks &&
	      after.hblkhd == before.hblkhd && after.arena == before.arena,
	      "glibc heap changed: in use %zu -> %zu, mmapped %zu -> %zu",
	      before.uordblks, after.uordblks, before.hblkhd, after.hblkhd);

	if (libc)
		dlclose(libc);
	if (failures)
		return 1;
	printf("ok: glibc malloc unchanged; %llu pinned buffers from %llu "
	       "driver allocations\n", (unsigned long long)s.allocs,
	       (unsigned long long)s.driver_allocs);
	return 0;
}
