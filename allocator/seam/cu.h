/*
 * cu.h - the one seam to the NVIDIA driver (defined in cu.c).
 *
 * Everything in gpumem that touches the GPU calls through a struct gm_cu:
 * a table of libcuda (driver API) function pointers, resolved once with
 * dlopen + dlsym. Nothing links libcuda and nothing needs cuda.h to build:
 * the few driver types used are declared here with gm_cu_ names and the
 * ABI of CUDA's cuda.h (stable since CUDA 10.2; checked against CUDA 13.0).
 *
 * Tests point GPUMEM_LIBCUDA at a fake library (tests/fake/), so CI
 * without a GPU runs the same code paths as a real card.
 *
 * Errors: driver calls return their gm_cu_result (0 = CUDA_SUCCESS);
 * gm_cu_open() returns 0 or GM_ENODEV / GM_EDEVICE with a diag message.
 */
#ifndef GM_CU_H
#define GM_CU_H

#include <stddef.h>

struct gm_diag;

/* ==== Driver types (cuda.h ABI) ==== */

typedef int gm_cu_result;                  /* CUresult */
typedef int gm_cu_device;                  /* CUdevice */
typedef unsigned long long gm_cu_ptr;      /* CUdeviceptr */
typedef unsigned long long gm_cu_handle;   /* CUmemGenericAllocationHandle */
typedef struct gm_cu_ctx_s *gm_cu_ctx;     /* CUcontext */
typedef struct gm_cu_stream_s *gm_cu_stream; /* CUstream */
typedef struct gm_cu_event_s *gm_cu_event; /* CUevent */
typedef struct gm_cu_module_s *gm_cu_module; /* CUmodule */
typedef struct gm_cu_func_s *gm_cu_func;   /* CUfunction */

enum {
	GM_CU_SUCCESS = 0,
	GM_CU_ERROR_INVALID_VALUE = 1,
	GM_CU_ERROR_OUT_OF_MEMORY = 2,
	GM_CU_ERROR_NOT_INITIALIZED = 3,
	GM_CU_ERROR_NO_DEVICE = 100,
	GM_CU_ERROR_INVALID_DEVICE = 101,
	GM_CU_ERROR_INVALID_CONTEXT = 201,
	GM_CU_ERROR_NOT_FOUND = 500,
	GM_CU_ERROR_NOT_READY = 600,
	GM_CU_ERROR_NOT_SUPPORTED = 801,
	GM_CU_ERROR_UNKNOWN = 999,
};

/* CUdevice_attribute values used by gpumem. */
enum {
	GM_CU_ATTR_MULTIPROCESSOR_COUNT = 16,
	GM_CU_ATTR_PCI_BUS_ID = 33,
	GM_CU_ATTR_PCI_DEVICE_ID = 34,
	GM_CU_ATTR_PCI_DOMAIN_ID = 50,
	GM_CU_ATTR_COMPUTE_MAJOR = 75,
	GM_CU_ATTR_COMPUTE_MINOR = 76,
	GM_CU_ATTR_VMM_SUPPORTED = 102,
};

/* CUmemAllocationProp and friends, for the virtual memory API. */
struct gm_cu_mem_location {
	int type; /* 1 = CU_MEM_LOCATION_TYPE_DEVICE */
	int id;
};

struct gm_cu_alloc_prop {
	int type;                 /* 1 = CU_MEM_ALLOCATION_TYPE_PINNED */
	int requested_handle_types; /* 0 = none */
	struct gm_cu_mem_location location;
	void *win32_handle_meta_data;
	struct {
		unsigned char compression_type;
		unsigned char gpu_direct_rdma_capable;
		unsigned short usage;
		unsigned char reserved[4];
	} alloc_flags;
};

struct gm_cu_access_desc {
	struct gm_cu_mem_location location;
	int flags; /* 3 = CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
};

enum {
	GM_CU_MEM_LOCATION_DEVICE = 1,
	GM_CU_MEM_ALLOCATION_PINNED = 1,
	GM_CU_MEM_ACCESS_READWRITE = 3,
	GM_CU_GRANULARITY_MINIMUM = 0,
	GM_CU_GRANULARITY_RECOMMENDED = 1,
	GM_CU_EVENT_DISABLE_TIMING = 2,
};

/* cuMemHostAlloc flags (CU_MEMHOSTALLOC_*, equal to cudaHostAlloc*). */
enum {
	GM_CU_MEMHOSTALLOC_PORTABLE = 0x01,
	GM_CU_MEMHOSTALLOC_DEVICEMAP = 0x02,
	GM_CU_MEMHOSTALLOC_WRITECOMBINED = 0x04,
};

/* CUpointer_attribute and CUmemorytype values used by gpumem. */
enum {
	GM_CU_POINTER_ATTRIBUTE_CONTEXT = 1,
	GM_CU_POINTER_ATTRIBUTE_MEMORY_TYPE = 2,
	GM_CU_POINTER_ATTRIBUTE_DEVICE_POINTER = 3,
	GM_CU_POINTER_ATTRIBUTE_HOST_POINTER = 4,
	GM_CU_MEMORYTYPE_HOST = 1,
	GM_CU_MEMORYTYPE_DEVICE = 2,
};

/*
 * XX(return type, field, exported symbol, parameter list)
 * Add a driver function here and it is resolved by gm_cu_open().
 */
#define GM_CU_FUNCS(XX)                                                      \
	XX(gm_cu_result, init, "cuInit", (unsigned flags))                  \
	XX(gm_cu_result, driver_version, "cuDriverGetVersion", (int *v))    \
	XX(gm_cu_result, device_get, "cuDeviceGet", (gm_cu_device *d, int i)) \
	XX(gm_cu_result, device_count, "cuDeviceGetCount", (int *n))        \
	XX(gm_cu_result, device_name, "cuDeviceGetName",                    \
	   (char *name, int len, gm_cu_device d))                           \
	XX(gm_cu_result, device_total_mem, "cuDeviceTotalMem_v2",           \
	   (size_t *bytes, gm_cu_device d))                                 \
	XX(gm_cu_result, device_attribute, "cuDeviceGetAttribute",          \
	   (int *v, int attr, gm_cu_device d))                              \
	XX(gm_cu_result, primary_ctx_retain, "cuDevicePrimaryCtxRetain",    \
	   (gm_cu_ctx *c, gm_cu_device d))                                  \
	XX(gm_cu_result, primary_ctx_release, "cuDevicePrimaryCtxRelease_v2", \
	   (gm_cu_device d))                                                \
	XX(gm_cu_result, ctx_set_current, "cuCtxSetCurrent", (gm_cu_ctx c)) \
	XX(gm_cu_result, ctx_get_current, "cuCtxGetCurrent", (gm_cu_ctx *c)) \
	XX(gm_cu_result, ctx_get_device, "cuCtxGetDevice", (gm_cu_device *d)) \
	XX(gm_cu_result, ctx_synchronize, "cuCtxSynchronize", (void))       \
	XX(gm_cu_result, mem_get_info, "cuMemGetInfo_v2",                   \
	   (size_t *free_bytes, size_t *total_bytes))                       \
	XX(gm_cu_result, mem_alloc, "cuMemAlloc_v2",                        \
	   (gm_cu_ptr *p, size_t bytes))                                    \
	XX(gm_cu_result, mem_free, "cuMemFree_v2", (gm_cu_ptr p))           \
	XX(gm_cu_result, mem_address_reserve, "cuMemAddressReserve",        \
	   (gm_cu_ptr *p, size_t size, size_t align, gm_cu_ptr addr,        \
	    unsigned long long flags))                                      \
	XX(gm_cu_result, mem_address_free, "cuMemAddressFree",              \
	   (gm_cu_ptr p, size_t size))                                      \
	XX(gm_cu_result, mem_create, "cuMemCreate",                         \
	   (gm_cu_handle *h, size_t size, const struct gm_cu_alloc_prop *prop, \
	    unsigned long long flags))                                      \
	XX(gm_cu_result, mem_release, "cuMemRelease", (gm_cu_handle h))     \
	XX(gm_cu_result, mem_map, "cuMemMap",                               \
	   (gm_cu_ptr p, size_t size, size_t offset, gm_cu_handle h,        \
	    unsigned long long flags))                                      \
	XX(gm_cu_result, mem_unmap, "cuMemUnmap", (gm_cu_ptr p, size_t size)) \
	XX(gm_cu_result, mem_set_access, "cuMemSetAccess",                  \
	   (gm_cu_ptr p, size_t size, const struct gm_cu_access_desc *desc, \
	    size_t count))                                                  \
	XX(gm_cu_result, mem_granularity, "cuMemGetAllocationGranularity",  \
	   (size_t *g, const struct gm_cu_alloc_prop *prop, int option))    \
	XX(gm_cu_result, event_create, "cuEventCreate",                     \
	   (gm_cu_event *e, unsigned flags))                                \
	XX(gm_cu_result, event_record, "cuEventRecord",                     \
	   (gm_cu_event e, gm_cu_stream s))                                 \
	XX(gm_cu_result, event_query, "cuEventQuery", (gm_cu_event e))      \
	XX(gm_cu_result, event_synchronize, "cuEventSynchronize",           \
	   (gm_cu_event e))                                                 \
	XX(gm_cu_result, event_destroy, "cuEventDestroy_v2", (gm_cu_event e)) \
	XX(gm_cu_result, stream_synchronize, "cuStreamSynchronize",         \
	   (gm_cu_stream s))                                                \
	XX(gm_cu_result, error_name, "cuGetErrorName",                      \
	   (gm_cu_result r, const char **name))                             \
	/* kernels (allocator core GPU tests, verify) */                    \
	XX(gm_cu_result, launch_kernel, "cuLaunchKernel",                   \
	   (gm_cu_func f, unsigned gx, unsigned gy, unsigned gz,            \
	    unsigned bx, unsigned by, unsigned bz, unsigned shmem,          \
	    gm_cu_stream s, void **params, void **extra))                   \
	XX(gm_cu_result, memcpy_dtoh, "cuMemcpyDtoH_v2",                    \
	   (void *dst, gm_cu_ptr src, size_t bytes))                        \
	XX(gm_cu_result, device_pci_bus_id, "cuDeviceGetPCIBusId",          \
	   (char *bus_id, int len, gm_cu_device d))                         \
	XX(gm_cu_result, memcpy_htod, "cuMemcpyHtoD_v2",                    \
	   (gm_cu_ptr dst, const void *src, size_t bytes))                  \
	XX(gm_cu_result, module_get_function, "cuModuleGetFunction",        \
	   (gm_cu_func *f, gm_cu_module m, const char *name))               \
	XX(gm_cu_result, module_load_data, "cuModuleLoadData",              \
	   (gm_cu_module *m, const void *image))                            \
	XX(gm_cu_result, module_unload, "cuModuleUnload", (gm_cu_module m)) \
	XX(gm_cu_result, stream_create, "cuStreamCreate",                   \
	   (gm_cu_stream *s, unsigned flags))                               \
	XX(gm_cu_result, stream_destroy, "cuStreamDestroy_v2",              \
	   (gm_cu_stream s))                                                \
	XX(gm_cu_result, stream_query, "cuStreamQuery", (gm_cu_stream s))  \
	XX(gm_cu_result, occupancy_blocks,                                  \
	   "cuOccupancyMaxActiveBlocksPerMultiprocessor",                   \
	   (int *blocks, gm_cu_func f, int block_size, size_t shared_bytes)) \
	/* preload library (pluggable allocator) */                          \
	XX(gm_cu_result, mem_alloc_async, "cuMemAllocAsync",                \
	   (gm_cu_ptr *p, size_t bytes, gm_cu_stream s))                    \
	XX(gm_cu_result, mem_free_async, "cuMemFreeAsync",                  \
	   (gm_cu_ptr p, gm_cu_stream s))                                   \
	/* pinned host memory (allocator/pinned) */                         \
	XX(gm_cu_result, mem_free_host, "cuMemFreeHost", (void *p))         \
	XX(gm_cu_result, mem_host_alloc, "cuMemHostAlloc",                  \
	   (void **p, size_t bytes, unsigned flags))                        \
	XX(gm_cu_result, mem_host_get_device_pointer,                       \
	   "cuMemHostGetDevicePointer_v2",                                  \
	   (gm_cu_ptr *d, void *p, unsigned flags))                         \
	XX(gm_cu_result, mem_host_get_flags, "cuMemHostGetFlags",           \
	   (unsigned *flags, void *p))                                      \
	XX(gm_cu_result, memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2",         \
	   (void *dst, gm_cu_ptr src, size_t bytes, gm_cu_stream s))        \
	XX(gm_cu_result, memcpy_htod_async, "cuMemcpyHtoDAsync_v2",         \
	   (gm_cu_ptr dst, const void *src, size_t bytes, gm_cu_stream s))  \
	XX(gm_cu_result, pointer_get_attribute, "cuPointerGetAttribute",    \
	   (void *data, int attr, gm_cu_ptr p))

struct gm_cu {
	void *lib; /* dlopen handle */
#define GM__CU_FIELD(ret, field, sym, args) ret(*field) args;
	GM_CU_FUNCS(GM__CU_FIELD)
#undef GM__CU_FIELD
};

/*
 * Open the driver library and resolve every function of GM_CU_FUNCS.
 * path: the library to open; NULL means $GPUMEM_LIBCUDA, else
 * "libcuda.so.1". Functions the library lacks stay NULL (callers check
 * before use); cuInit and cuGetErrorName must exist. Does not call cuInit.
 * Returns 0, or GM_ENODEV when the library cannot be opened (no driver).
 */
int gm_cu_open(struct gm_cu *cu, const char *path, struct gm_diag *diag);

/* Close what gm_cu_open() opened and clear the table. */
void gm_cu_close(struct gm_cu *cu);

/*
 * The driver's name for r ("CUDA_ERROR_OUT_OF_MEMORY"), or "CUresult N"
 * when the driver does not know it. Never NULL.
 */
const char *gm_cu_error_name(const struct gm_cu *cu, gm_cu_result r);

#endif
