/*
 * resolve_dl.c - find the C library's real dlsym and dlvsym (hooks.h).
 *
 * Why read the symbol table: the library exports dlsym and dlvsym, so a
 * call to either by name from inside it reaches its own override, and
 * dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.x") needs a guessed version. The
 * dynamic symbol table of libc.so.6 (libdl.so.2 before glibc 2.34) names
 * the default version of each directly (versym without the hidden bit).
 *
 * This runs inside the first dlsym call of the process, which may come
 * before any constructor: AddressSanitizer's start-up looks its
 * interceptors up with dlsym(RTLD_NEXT, ...) before its shadow memory
 * exists. So this file (and hooks_dl.c) is built without sanitizer
 * instrumentation (meson.build) and calls no function a sanitizer
 * intercepts: the loaded objects are read from the dynamic linker's
 * r_debug list (<link.h>), not dl_iterate_phdr, and names are compared
 * here, not with strcmp.
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "hooks.h"

#include "error.h"

#include <elf.h>
#include <link.h>
#include <stdbool.h>
#include <stddef.h>

void *(*gm__pl_real_dlsym)(void *, const char *);
void *(*gm__pl_real_dlvsym)(void *, const char *, const char *);

struct dl_find {
	void *dlsym;
	void *dlvsym;
};

static bool same(const char *a, const char *b)
{
	while (*a && *a == *b) {
		a++;
		b++;
	}
	return *a == *b;
}

static bool starts(const char *s, const char *prefix)
{
	while (*prefix && *s == *prefix) {
		s++;
		prefix++;
	}
	return !*prefix;
}

/* The file name of path (after its last '/'). */
static const char *base_name(const char *path)
{
	const char *b = path;

	for (; *path; path++)
		if (*path == '/')
			b = path + 1;
	return b;
}

/* Dynamic-section pointers are relocated by ld.so on most targets but
 * not all; a value below the load address is still an offset. */
static uintptr_t dyn_addr(const struct link_map *m, ElfW(Addr) p)
{
	return p < m->l_addr ? m->l_addr + p : p;
}

/* Number of dynamic symbols, from DT_HASH or DT_GNU_HASH. */
static size_t sym_count(const uint32_t *hash, const uint32_t *gnu)
{
	const uint32_t *buckets, *chain;
	uint32_t nbuckets, offset, last = 0;

	if (hash)
		return hash[1];
	if (!gnu)
		return 0;
	nbuckets = gnu[0];
	offset = gnu[1];
	buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + gnu[2]);
	chain = buckets + nbuckets;
	for (uint32_t b = 0; b < nbuckets; b++)
		if (buckets[b] > last)
			last = buckets[b];
	if (last < offset)
		return offset;
	while (!(chain[last - offset] & 1))
		last++;
	return (size_t)last + 1;
}

/* Look dlsym and dlvsym up in m when it is the C library (or libdl). */
static void find_in_object(const struct link_map *m, struct dl_find *f)
{
	const ElfW(Dyn) *dyn = m->l_ld;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL, *base;
	const ElfW(Half) *versym = NULL;
	const uint32_t *hash = NULL, *gnu = NULL;
	size_t n;

	if (!m->l_name || !*m->l_name)
		return;
	base = base_name(m->l_name);
	if (!starts(base, "libc.so") && !starts(base, "libdl.so"))
		return;
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = dyn_addr(m, dyn->d_un.d_ptr);
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_VERSYM: versym = (const ElfW(Half) *)p; break;
		case DT_HASH: hash = (const uint32_t *)p; break;
		case DT_GNU_HASH: gnu = (const uint32_t *)p; break;
		}
	}
	if (!symtab || !strtab)
		return;
	n = sym_count(hash, gnu);
	for (size_t i = 0; i < n; i++) {
		const ElfW(Sym) *s = &symtab[i];
		const char *sn = strtab + s->st_name;
		void *addr;

		if (s->st_shndx == SHN_UNDEF ||
		    ELF64_ST_TYPE(s->st_info) != STT_FUNC)
			continue;
		if (versym && (versym[i] & 0x8000)) /* not the default */
			continue;
		addr = (void *)(m->l_addr + s->st_value);
		if (!f->dlsym && same(sn, "dlsym"))
			f->dlsym = addr;
		else if (!f->dlvsym && same(sn, "dlvsym"))
			f->dlvsym = addr;
	}
}

int gm__pl_resolve_dl(void)
{
	struct dl_find f = {0};

	if (__atomic_load_n(&gm__pl_real_dlsym, __ATOMIC_ACQUIRE))
		return 0;
	for (const struct link_map *m = _r_debug.r_map;
	     m && !(f.dlsym && f.dlvsym); m = m->l_next)
		find_in_object(m, &f);
	if (!f.dlsym || !f.dlvsym)
		return GM_ENOTFOUND;
	__atomic_store_n(&gm__pl_real_dlvsym,
			 (void *(*)(void *, const char *, const char *))f.dlvsym,
			 __ATOMIC_RELEASE);
	__atomic_store_n(&gm__pl_real_dlsym,
			 (void *(*)(void *, const char *))f.dlsym,
			 __ATOMIC_RELEASE);
	return 0;
}
