/*
 * resolve.c - the hook table and the mapping of cuGetProcAddress
 * requests to ABI variants (see hooks.h); the real dlsym/dlvsym are found
 * in resolve_dl.c.
 */
/* POSIX (dlsym) guarantees data and function pointers convert. */
#pragma GCC diagnostic ignored "-Wpedantic"

#include "hooks.h"

#include "error.h"

#include <string.h>

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
