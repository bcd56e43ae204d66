/*
 * nvml.h - the seam to NVML, the NVIDIA Management Library (nvml.c).
 *
 * Like cu.h for the driver API: a table of NVML function pointers from
 * the X-macro GM_NVML_FUNCS, filled by gm_nvml_open() with
 * dlopen("libnvidia-ml.so.1" or $GPUMEM_LIBNVML) + dlsym. Nothing links
 * NVML and nothing needs nvml.h: the few types used are declared here with
 * nvml.h's ABI (checked against the public nvml.h of driver R5xx).
 * Tests fill a struct gm_nvml with their own functions (a fake card).
 *
 * NVML reads need no CUDA context. Its absence is not an error for the
 * callers: gm_nvml_open() returns GM_ENODEV and they carry on without.
 *
 * Errors: NVML calls return gm_nvml_return (0 = NVML_SUCCESS);
 * gm_nvml_open() returns 0 or GM_ENODEV with a diag message.
 */
#ifndef GM_NVML_H
#define GM_NVML_H

#include <stddef.h>

struct gm_diag;

typedef int gm_nvml_return;                      /* nvmlReturn_t */
typedef struct gm_nvml_device_s *gm_nvml_device; /* nvmlDevice_t */

enum {
	GM_NVML_SUCCESS = 0,
	GM_NVML_ERROR_NOT_SUPPORTED = 3,
	GM_NVML_ERROR_NOT_FOUND = 6,
	GM_NVML_ERROR_INSUFFICIENT_SIZE = 7,
	GM_NVML_NAME_LEN = 96,    /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
	GM_NVML_VERSION_LEN = 80, /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */
	/* nvmlPageRetirementCause_t */
	GM_NVML_RETIRE_MULTIPLE_SBE = 0,
	GM_NVML_RETIRE_DBE = 1,
};

/* nvmlPciInfo_t */
struct gm_nvml_pci {
	char bus_id_legacy[16];
	unsigned domain;
	unsigned bus;
	unsigned device;
	unsigned pci_device_id;    /* device id << 16 | vendor id */
	unsigned pci_subsystem_id; /* subsystem device << 16 | vendor */
	char bus_id[32];
};

/* nvmlMemory_v2_t; set version to GM_NVML_MEMORY_V2 before the call. */
struct gm_nvml_memory_v2 {
	unsigned version;
	unsigned long long total;
	unsigned long long reserved;
	unsigned long long free;
	unsigned long long used;
};
#define GM_NVML_MEMORY_V2                                                   \
	((unsigned)(sizeof(struct gm_nvml_memory_v2) | (2u << 24)))

/* XX(return type, field, exported symbol, parameter list) */
#define GM_NVML_FUNCS(XX)                                                    \
	XX(gm_nvml_return, init, "nvmlInit_v2", (void))                     \
	XX(gm_nvml_return, shutdown, "nvmlShutdown", (void))                \
	XX(const char *, error_string, "nvmlErrorString", (gm_nvml_return r)) \
	XX(gm_nvml_return, driver_version, "nvmlSystemGetDriverVersion",    \
	   (char *version, unsigned len))                                   \
	XX(gm_nvml_return, handle_by_bus_id, "nvmlDeviceGetHandleByPciBusId_v2", \
	   (const char *bus_id, gm_nvml_device *dev))                       \
	XX(gm_nvml_return, name, "nvmlDeviceGetName",                       \
	   (gm_nvml_device dev, char *name, unsigned len))                  \
	XX(gm_nvml_return, pci_info, "nvmlDeviceGetPciInfo_v3",             \
	   (gm_nvml_device dev, struct gm_nvml_pci *pci))                   \
	XX(gm_nvml_return, memory_info_v2, "nvmlDeviceGetMemoryInfo_v2",    \
	   (gm_nvml_device dev, struct gm_nvml_memory_v2 *mem))             \
	XX(gm_nvml_return, ecc_mode, "nvmlDeviceGetEccMode",                \
	   (gm_nvml_device dev, int *current, int *pending))                \
	XX(gm_nvml_return, mig_mode, "nvmlDeviceGetMigMode",                \
	   (gm_nvml_device dev, unsigned *current, unsigned *pending))      \
	XX(gm_nvml_return, retired_pages, "nvmlDeviceGetRetiredPages",      \
	   (gm_nvml_device dev, int cause, unsigned *count,                 \
	    unsigned long long *addresses))                                 \
	XX(gm_nvml_return, retired_pending,                                 \
	   "nvmlDeviceGetRetiredPagesPendingStatus",                        \
	   (gm_nvml_device dev, int *pending))                              \
	XX(gm_nvml_return, remapped_rows, "nvmlDeviceGetRemappedRows",      \
	   (gm_nvml_device dev, unsigned *corrected, unsigned *uncorrected, \
	    unsigned *pending, unsigned *failed))

struct gm_nvml {
	void *lib; /* dlopen handle; NULL for a table filled by hand */
#define GM__NVML_FIELD(ret, field, sym, args) ret(*field) args;
	GM_NVML_FUNCS(GM__NVML_FIELD)
#undef GM__NVML_FIELD
};

/*
 * Open NVML and resolve GM_NVML_FUNCS, then call nvmlInit_v2.
 * path: NULL means $GPUMEM_LIBNVML ("none" disables NVML), else the
 * search of gm__nvml_candidates(): "libnvidia-ml.so.1", the usual driver
 * directories, the loaded libcuda.so.1's directory. Functions the
 * library lacks stay NULL (callers check). Returns 0, or GM_ENODEV
 * (library absent, or nvmlInit failed) with diag holding dlerror()'s
 * text (or nvmlErrorString's).
 */
int gm_nvml_open(struct gm_nvml *nvml, const char *path,
		 struct gm_diag *diag);

/* Internal, for the unit tests (tests/unit/seam/test_nvml.c). */
#define GM__NVML_PATH 512

/* The libraries gm_nvml_open() tries without a path, in order, written
 * to out[0..max): "libnvidia-ml.so.1" (the loader's search), the driver
 * directories, then cuda_dir (with its trailing '/'; NULL or "" for
 * none) unless already listed. Returns how many. */
int gm__nvml_candidates(const char *cuda_dir, char (*out)[GM__NVML_PATH],
			int max);

/* The directory, with a trailing '/', of the shared object that holds
 * sym (dladdr). Returns 1, or 0 when unknown. */
int gm__lib_dir(const void *sym, char *dir, size_t n);

/* nvmlShutdown and close what gm_nvml_open() opened; clears the table. */
void gm_nvml_close(struct gm_nvml *nvml);

#endif
