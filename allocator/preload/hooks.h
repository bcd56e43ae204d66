/*
 * hooks.h - the driver entry points the preload library wraps, and how
 * a caller's lookup is mapped to them (hooks_cu.c, resolve.c).
 *
 * A program reaches a driver function in one of three ways, and each
 * returns the same wrapper:
 *  - by linking libcuda: the exported symbols of hooks_cu.c interpose;
 *  - by dlsym()/dlvsym() on a libcuda handle (the CUDA runtime, static or
 *    shared, CuPy, JAX): the dlsym override (hooks_dl.c) returns the
 *    wrapper of that exact symbol;
 *  - by cuGetProcAddress(_v2) (the runtime for every driver call,
 *    cudaGetDriverEntryPoint*, PyTorch's expandable segments): the
 *    wrapper of cuGetProcAddress maps (name, CUDA version, flags) to the
 *    ABI variant the driver gives for them (gm_pl_proc_variant).
 * The real function behind each wrapper is the one libcuda exports under
 * that variant's name.
 */
#ifndef GM_PL_HOOKS_H
#define GM_PL_HOOKS_H

#include <stdint.h>

/* XX(id, exported symbol) */
#define GM_PL_HOOKS(XX)                                  \
	XX(GET_PROC, cuGetProcAddress)                   \
	XX(GET_PROC_V2, cuGetProcAddress_v2)             \
	XX(MEM_ALLOC, cuMemAlloc_v2)                     \
	XX(MEM_ALLOC_PITCH, cuMemAllocPitch_v2)          \
	XX(MEM_ALLOC_MANAGED, cuMemAllocManaged)         \
	XX(MEM_FREE, cuMemFree_v2)                       \
	XX(MEM_CREATE, cuMemCreate)                      \
	XX(MEM_RELEASE, cuMemRelease)                    \
	XX(MEM_ALLOC_ASYNC, cuMemAllocAsync)             \
	XX(MEM_ALLOC_ASYNC_PTSZ, cuMemAllocAsync_ptsz)   \
	XX(MEM_ALLOC_POOL, cuMemAllocFromPoolAsync)      \
	XX(MEM_ALLOC_POOL_PTSZ, cuMemAllocFromPoolAsync_ptsz) \
	XX(MEM_FREE_ASYNC, cuMemFreeAsync)               \
	XX(MEM_FREE_ASYNC_PTSZ, cuMemFreeAsync_ptsz)     \
	XX(MEM_GET_INFO, cuMemGetInfo_v2)                \
	XX(DEVICE_TOTAL_MEM, cuDeviceTotalMem_v2)         \
	XX(MEM_HOST_ALLOC, cuMemHostAlloc)               \
	XX(MEM_ALLOC_HOST, cuMemAllocHost_v2)            \
	XX(MEM_FREE_HOST, cuMemFreeHost)                 \
	XX(MEM_HOST_GET_DPTR, cuMemHostGetDevicePointer_v2) \
	XX(MEM_HOST_GET_FLAGS, cuMemHostGetFlags)

enum gm_pl_hook {
#define GM__PL_HOOK_ENUM(id, sym) GM_PL_HOOK_##id,
	GM_PL_HOOKS(GM__PL_HOOK_ENUM)
#undef GM__PL_HOOK_ENUM
	GM_PL_N_HOOKS
};

/* cuGetProcAddress flags (cuda.h CUdriverProcAddress_flags). */
#define GM_CU_PROC_PER_THREAD_STREAM 2ULL

/* Real libcuda functions behind the wrappers; NULL until resolved. */
extern void *gm__pl_real[GM_PL_N_HOOKS];
/* The wrappers (our exported functions) and their names. */
extern void *const gm__pl_hook_fn[GM_PL_N_HOOKS];
extern const char *const gm__pl_hook_name[GM_PL_N_HOOKS];

/* The hook id of an exported libcuda symbol name, or -1. */
int gm_pl_hook_find(const char *symbol);

/*
 * The exported symbol whose ABI cuGetProcAddress(symbol, cudaVersion,
 * flags) hands back, when gpumem wraps it; NULL otherwise. E.g.
 * ("cuMemAlloc", 12000, 0) -> "cuMemAlloc_v2"; ("cuMemAllocAsync",
 * 12000, per-thread) -> "cuMemAllocAsync_ptsz"; ("cuMemAlloc", 3010, 0)
 * -> NULL (the 32-bit v1 ABI is passed through unwrapped).
 * Versions from cuda.h's #define cuMemAlloc cuMemAlloc_v2 (since 3020),
 * cuGetProcAddress_v2 (12000), and the _ptsz variants (per-thread
 * default stream, cuda.h __CUDA_API_PER_THREAD_DEFAULT_STREAM).
 */
const char *gm_pl_proc_variant(const char *symbol, int cuda_version,
			       uint64_t flags);

/* The dynamic linker's own dlsym/dlvsym (resolve.c); never ours. */
extern void *(*gm__pl_real_dlsym)(void *, const char *);
extern void *(*gm__pl_real_dlvsym)(void *, const char *, const char *);

/*
 * Find the C library's default-version dlsym and dlvsym by reading its
 * dynamic symbol table (no dlsym call, which would reach our own
 * override). Idempotent; returns 0 or GM_ENOTFOUND.
 */
int gm__pl_resolve_dl(void);

/*
 * The library's start-up (options, pointer maps, fork handlers), exactly
 * once, whichever comes first: the constructor or an intercepted call.
 */
void gm__pl_start(void);

/*
 * Start up, then open the real driver (seam) and resolve gm__pl_real[],
 * once. Returns
 * 0, or GM_ENODEV when there is no driver library.
 */
int gm__pl_init(void);

/*
 * The pinned host memory cache (host_cache.c), made on first use; NULL
 * when libgpumem-pinned.so is not loaded, GPUMEM_PINNED=off, no driver,
 * or inside the library's own driver calls: then pass through.
 */
struct gm_pinned;
struct gm_pinned *gm__pl_pinned(void);

/*
 * The pinned cache's report keys (pinned_*_bytes ...) into a JSON
 * report, and its Prometheus metrics (hooks_host.c); nothing when the
 * cache is not in use.
 */
struct gm_val;
void gm__pl_pinned_report(struct gm_val *root);
#include <stdio.h>
void gm__pl_pinned_prom(FILE *out, const char *rank);

#endif
