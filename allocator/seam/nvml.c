/*
 * nvml.c - resolve the NVML seam (see nvml.h).
 *
 * Where NVML is looked for, when no path is given: the loader's own
 * search first (LD_LIBRARY_PATH, ld.so.cache), then the directories
 * drivers install it in (distribution packages, the CUDA container
 * runtime, WSL), then the directory of the driver library already
 * loaded (libcuda.so.1 and libnvidia-ml.so.1 ship together). Each
 * failure's dlerror() text goes into the diag, so a report says why.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr, RTLD_NOLOAD */
#endif
#include "nvml.h"

#include "error.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GM__NVML_SONAME "libnvidia-ml.so.1"

static const char *const nvml_dirs[] = {
	"/usr/lib/x86_64-linux-gnu/", /* Debian, Ubuntu */
	"/usr/lib64/",                /* RHEL, SUSE */
	"/usr/local/nvidia/lib64/",   /* NVIDIA container runtime */
	"/usr/lib/wsl/lib/",          /* WSL 2 */
};

int gm__lib_dir(const void *sym, char *dir, size_t n)
{
	Dl_info info;
	const char *slash;

	if (!sym || !dladdr(sym, &info) || !info.dli_fname ||
	    !(slash = strrchr(info.dli_fname, '/')) ||
	    (size_t)(slash - info.dli_fname) + 2 > n)
		return 0;
	memcpy(dir, info.dli_fname, (size_t)(slash - info.dli_fname) + 1);
	dir[slash - info.dli_fname + 1] = '\0';
	return 1;
}

/* The directory of the driver library this process loaded (its cuInit),
 * by soname or by $GPUMEM_LIBCUDA; 0 when none is loaded. */
static int cuda_dir(char *dir, size_t n)
{
	const char *names[] = {"libcuda.so.1", getenv("GPUMEM_LIBCUDA")};
	int found = 0;

	for (size_t i = 0; i < 2 && !found; i++) {
		void *h;

		if (!names[i] || !*names[i])
			continue;
		h = dlopen(names[i], RTLD_NOW | RTLD_NOLOAD);
		if (!h)
			continue;
		found = gm__lib_dir(dlsym(h, "cuInit"), dir, n);
		dlclose(h);
	}
	dlerror(); /* the misses above are not news */
	return found;
}

int gm__nvml_candidates(const char *cuda_dir, char (*out)[GM__NVML_PATH],
			int max)
{
	int k = 0;

	if (k < max)
		snprintf(out[k++], GM__NVML_PATH, "%s", GM__NVML_SONAME);
	for (size_t i = 0; i < sizeof(nvml_dirs) / sizeof(*nvml_dirs); i++)
		if (k < max)
			snprintf(out[k++], GM__NVML_PATH, "%s%s", nvml_dirs[i],
				 GM__NVML_SONAME);
	if (!cuda_dir || !*cuda_dir || k >= max)
		return k;
	for (int i = 1; i < k; i++)
		if (strncmp(out[i], cuda_dir, strlen(cuda_dir)) == 0 &&
		    strcmp(out[i] + strlen(cuda_dir), GM__NVML_SONAME) == 0)
			return k; /* already in the list */
	snprintf(out[k++], GM__NVML_PATH, "%s%s", cuda_dir, GM__NVML_SONAME);
	return k;
}

/* dlopen the candidates in order; on failure the diag holds the first
 * one's dlerror(), and that of any other that exists but did not load. */
static void *load(const char *path, struct gm_diag *diag)
{
	char cand[8][GM__NVML_PATH], dir[GM__NVML_PATH], why[1024] = "";
	size_t used = 0;
	int n;

	if (path) {
		void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);

		if (!h)
			gm_diag_set(diag, GM_ENODEV, "cannot load NVML %s: %s",
				    path, dlerror());
		return h;
	}
	n = gm__nvml_candidates(cuda_dir(dir, sizeof(dir)) ? dir : NULL,
				cand, 8);
	for (int i = 0; i < n; i++) {
		void *h = dlopen(cand[i], RTLD_NOW | RTLD_LOCAL);
		const char *e;

		if (h)
			return h;
		e = dlerror();
		if (used < sizeof(why) &&
		    (i == 0 || access(cand[i], F_OK) == 0))
			used += (size_t)snprintf(why + used, sizeof(why) - used,
						 "%s%s", used ? "; " : "",
						 e ? e : cand[i]);
	}
	for (int i = 1; i < n && used < sizeof(why); i++) {
		size_t len = strlen(cand[i]) - strlen(GM__NVML_SONAME);

		used += (size_t)snprintf(why + used, sizeof(why) - used,
					 "%s%.*s", i == 1 ? "; also tried " : ", ",
					 (int)len, cand[i]);
	}
	gm_diag_set(diag, GM_ENODEV, "cannot load NVML: %s", why);
	return NULL;
}

int gm_nvml_open(struct gm_nvml *nvml, const char *path,
		 struct gm_diag *diag)
{
	gm_nvml_return r;

	memset(nvml, 0, sizeof(*nvml));
	if (!path)
		path = getenv("GPUMEM_LIBNVML");
	if (path && !*path)
		path = NULL;
	if (path && strcmp(path, "none") == 0)
		return gm_diag_set(diag, GM_ENODEV, "NVML disabled");
	nvml->lib = load(path, diag);
	if (!nvml->lib)
		return GM_ENODEV;
#define GM__NVML_RESOLVE(ret, field, sym, args)                              \
	*(void **)&nvml->field = dlsym(nvml->lib, sym);
	GM_NVML_FUNCS(GM__NVML_RESOLVE)
#undef GM__NVML_RESOLVE
	if (!nvml->init || !nvml->shutdown) {
		dlclose(nvml->lib);
		memset(nvml, 0, sizeof(*nvml));
		return gm_diag_set(diag, GM_ENODEV,
				   "%s is not NVML (no nvmlInit_v2)",
				   path ? path : GM__NVML_SONAME);
	}
	r = nvml->init();
	if (r != GM_NVML_SUCCESS) {
		const char *s = nvml->error_string ? nvml->error_string(r)
						   : NULL;

		dlclose(nvml->lib);
		memset(nvml, 0, sizeof(*nvml));
		return gm_diag_set(diag, GM_ENODEV,
				   "nvmlInit_v2 failed: %s (nvmlReturn %d)",
				   s ? s : "?", r);
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
