/* cu.c - resolve the driver seam (see cu.h). */
#include "cu.h"

#include "error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gm_cu_open(struct gm_cu *cu, const char *path, struct gm_diag *diag)
{
	memset(cu, 0, sizeof(*cu));
	if (!path)
		path = getenv("GPUMEM_LIBCUDA");
	if (!path || !*path)
		path = "libcuda.so.1";
	cu->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!cu->lib)
		return gm_diag_set(diag, GM_ENODEV,
				   "cannot load the NVIDIA driver library "
				   "%s: %s",
				   path, dlerror());
#define GM__CU_RESOLVE(ret, field, sym, args)                                \
	*(void **)&cu->field = dlsym(cu->lib, sym);
	GM_CU_FUNCS(GM__CU_RESOLVE)
#undef GM__CU_RESOLVE
	if (!cu->init || !cu->error_name) {
		gm_cu_close(cu);
		return gm_diag_set(diag, GM_ENODEV,
				   "%s is not a CUDA driver library (no cuInit)",
				   path);
	}
	return 0;
}

void gm_cu_close(struct gm_cu *cu)
{
	if (cu->lib)
		dlclose(cu->lib);
	memset(cu, 0, sizeof(*cu));
}

const char *gm_cu_error_name(const struct gm_cu *cu, gm_cu_result r)
{
	static __thread char buf[32];
	const char *name = NULL;

	if (cu && cu->error_name && cu->error_name(r, &name) == 0 && name)
		return name;
	snprintf(buf, sizeof(buf), "CUresult %d", r);
	return buf;
}
