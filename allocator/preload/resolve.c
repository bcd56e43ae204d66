/*
 * resolve.c - the real dlsym/dlvsym, the hook table and the mapping of
 * cuGetProcAddress requests to ABI variants (see hooks.h).
 *
 * Why read the symbol table: the library exports dlsym and dlvsym, so a
 * call to either by name from inside it reaches its own override, and
 * dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.x") needs a guessed version. The
 * dynamic symbol table of libc.so.6 (libdl.so.2 before glibc 2.34) names
 * the default version of each directly (versym without the hidden bit).
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "hooks.h"

#include "error.h"

#include <elf.h>
#include <link.h>
#include <string.h>

void *(*gm__pl_real_dlsym)(void *, const char *);
void *(*gm__pl_real_dlvsym)(void *, const char *, const char *);

#define GM__PL_HOOK_NAME(id, sym) #sym,
const char *const gm__pl_hook_name[GM_PL_N_HOOKS] = {
	GM_PL_HOOKS(GM__PL_HOOK_NAME)
};
#undef GM__PL_HOOK_NAME

int gm_pl_hook_find(const char *symbol)
{
	if (!symbol || symbol[0] != 'c' || symbol[1] != 'u')
		return -1;
	for (int i = 0; i < GM_PL_N_HOOKS; i++)
		if (strcmp(symbol, gm__pl_hook_name[i]) == 0)
			return i;
	return -1;
}

const char *gm_pl_proc_variant(const char *symbol, int cuda_version,
			       uint64_t flags)
{
	/* Functions whose _v2 ABI (64-bit sizes) came with CUDA 3.2. */
	static const char *const v2_3020[][2] = {
		{"cuMemAlloc", "cuMemAlloc_v2"},
		{"cuMemAllocPitch", "cuMemAllocPitch_v2"},
		{"cuMemFree", "cuMemFree_v2"},
		{"cuMemGetInfo", "cuMemGetInfo_v2"},
		{"cuDeviceTotalMem", "cuDeviceTotalMem_v2"},
		{"cuMemAllocHost", "cuMemAllocHost_v2"},
		{"cuMemHostGetDevicePointer", "cuMemHostGetDevicePointer_v2"},
	};
	/* Stream-ordered functions with a per-thread-stream variant. */
	static const char *const ptsz[][2] = {
		{"cuMemAllocAsync", "cuMemAllocAsync_ptsz"},
		{"cuMemAllocFromPoolAsync", "cuMemAllocFromPoolAsync_ptsz"},
		{"cuMemFreeAsync", "cuMemFreeAsync_ptsz"},
	};
	static const char *const plain[] = {
		"cuMemAllocManaged", "cuMemCreate", "cuMemRelease",
		"cuMemHostAlloc", "cuMemFreeHost", "cuMemHostGetFlags",
	};

	if (!symbol)
		return NULL;
	for (size_t i = 0; i < sizeof(v2_3020) / sizeof(v2_3020[0]); i++)
		if (strcmp(symbol, v2_3020[i][0]) == 0)
			return cuda_version >= 3020 ? v2_3020[i][1] : NULL;
	for (size_t i = 0; i < sizeof(ptsz) / sizeof(ptsz[0]); i++)
		if (strcmp(symbol, ptsz[i][0]) == 0)
			return flags & GM_CU_PROC_PER_THREAD_STREAM ?
				       ptsz[i][1] : ptsz[i][0];
	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
		if (strcmp(symbol, plain[i]) == 0)
			return plain[i];
	if (strcmp(symbol, "cuGetProcAddress") == 0)
		return cuda_version >= 12000 ? "cuGetProcAddress_v2"
					     : "cuGetProcAddress";
	return NULL;
}

/* ==== Reading a loaded object's dynamic symbol table ==== */

struct dl_find {
	void *dlsym;
	void *dlvsym;
};

/* Dynamic-section pointers are relocated by ld.so on most targets but
 * not all; a value below the load address is still an offset. */
static uintptr_t dyn_addr(const struct dl_phdr_info *info, ElfW(Addr) p)
{
	return p < info->dlpi_addr ? info->dlpi_addr + p : p;
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

static int find_in_object(struct dl_phdr_info *info, size_t size, void *arg)
{
	struct dl_find *f = arg;
	const char *name = info->dlpi_name, *base;
	const ElfW(Dyn) *dyn = NULL;
	const ElfW(Sym) *symtab = NULL;
	const char *strtab = NULL;
	const ElfW(Half) *versym = NULL;
	const uint32_t *hash = NULL, *gnu = NULL;
	size_t n;

	(void)size;
	if (!name || !*name)
		return 0;
	base = strrchr(name, '/');
	base = base ? base + 1 : name;
	if (strncmp(base, "libc.so", 7) != 0 &&
	    strncmp(base, "libdl.so", 8) != 0)
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
			dyn = (const ElfW(Dyn) *)(info->dlpi_addr +
						  info->dlpi_phdr[i].p_vaddr);
	for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
		uintptr_t p = dyn_addr(info, dyn->d_un.d_ptr);
		switch (dyn->d_tag) {
		case DT_SYMTAB: symtab = (const ElfW(Sym) *)p; break;
		case DT_STRTAB: strtab = (const char *)p; break;
		case DT_VERSYM: versym = (const ElfW(Half) *)p; break;
		case DT_HASH: hash = (const uint32_t *)p; break;
		case DT_GNU_HASH: gnu = (const uint32_t *)p; break;
		}
	}
	if (!symtab || !strtab)
		return 0;
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
		addr = (void *)(info->dlpi_addr + s->st_value);
		if (!f->dlsym && strcmp(sn, "dlsym") == 0)
			f->dlsym = addr;
		else if (!f->dlvsym && strcmp(sn, "dlvsym") == 0)
			f->dlvsym = addr;
	}
	return f->dlsym && f->dlvsym;
}

int gm__pl_resolve_dl(void)
{
	struct dl_find f = {0};

	if (__atomic_load_n(&gm__pl_real_dlsym, __ATOMIC_ACQUIRE))
		return 0;
	dl_iterate_phdr(find_in_object, &f);
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
