/* nvml.c - resolve the NVML seam (see nvml.h). */
#include "nvml.h"

#include "error.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

int gm_nvml_open(struct gm_nvml *nvml, const char *path,
		 struct gm_diag *diag)
{
	gm_nvml_return r;

	memset(nvml, 0, sizeof(*nvml));
	if (!path)
		path = getenv("GPUMEM_LIBNVML");
	if (!path || !*path)
		path = "libnvidia-ml.so.1";
	if (strcmp(path, "none") == 0)
		return gm_diag_set(diag, GM_ENODEV, "NVML disabled");
	nvml->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!nvml->lib)
		return gm_diag_set(diag, GM_ENODEV, "cannot load NVML %s: %s",
				   path, dlerror());
#define GM__NVML_RESOLVE(ret, field, sym, args)                              \
	*(void **)&nvml->field = dlsym(nvml->lib, sym);
	GM_NVML_FUNCS(GM__NVML_RESOLVE)
#undef GM__NVML_RESOLVE
	if (!nvml->init || !nvml->shutdown) {
		dlclose(nvml->lib);
		memset(nvml, 0, sizeof(*nvml));
		return gm_diag_set(diag, GM_ENODEV,
				   "%s is not NVML (no nvmlInit_v2)", path);
	}
	r = nvml->init();
	if (r != GM_NVML_SUCCESS) {
		dlclose(nvml->lib);
		memset(nvml, 0, sizeof(*nvml));
		return gm_diag_set(diag, GM_ENODEV,
				   "nvmlInit_v2 failed (nvmlReturn %d)", r);
	}
	return 0;
}

void gm_nvml_close(struct gm_nvml *nvml)
{
	if (nvml->lib) {
		nvml->shutdown();
		dlclose(nvml->lib);
	}
	memset(nvml, 0, sizeof(*nvml));
}
