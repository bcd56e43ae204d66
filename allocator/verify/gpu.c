/*
 * gpu.c - verify real GPUs: the kernels of kernels.cu, embedded as a
 * fatbin, loaded and launched through the driver seam (cu.h); all the
 * memory that can be allocated, in chunks; a thread per device. Also the
 * VMM fake: a few physical allocations mapped again and again over a
 * larger virtual range, so aliasing happens on real hardware.
 *
 * Errors: driver failures become GM_EDEVICE (GM_EDEVNOMEM when nothing
 * can be allocated) with the driver's error name in diag.
 */
#include "verify.h"

#include "cu.h"
#include "error.h"
#include "nvml.h"
#include "units.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

extern const unsigned char gm_verify_fatbin[];
extern const unsigned long gm_verify_fatbin_len;

#define GM_GPU_MAX_CHUNKS 512
#define GM_GPU_GRAIN (2ULL << 20) /* chunk sizes: multiples of 2 MiB */
#define GM_GPU_THREADS 256

bool gm_verify_have_kernels(void)
{
	return gm_verify_fatbin_len > 0;
}

struct gpu {
	const struct gm_cu *cu;
	gm_cu_device dev;
	gm_cu_ctx ctx;
	gm_cu_module mod;
	gm_cu_func f_write, f_verify, f_walk;
	unsigned grid_write, grid_verify;
	gm_cu_ptr errs; /* struct gm_ve on the device */
	struct gm_vchunk chunks[GM_GPU_MAX_CHUNKS];
	unsigned nchunks;
};

static int cu_fail(const struct gpu *g, struct gm_diag *d, const char *what,
		   gm_cu_result r)
{
	return gm_diag_set(d, r == GM_CU_ERROR_OUT_OF_MEMORY ? GM_EDEVNOMEM
							     : GM_EDEVICE,
			   "%s: %s", what, gm_cu_error_name(g->cu, r));
}

/* ==== Backend operations ==== */

static int gpu_begin(void *ctx, struct gm_diag *d)
{
	struct gpu *g = ctx;
	struct gm_ve e;
	gm_cu_result r;

	gm_ve_init(&e);
	r = g->cu->memcpy_htod(g->errs, &e, sizeof(e));
	return r ? cu_fail(g, d, "clearing the error record", r) : 0;
}

static int launch(struct gpu *g, gm_cu_func f, unsigned grid,
		  unsigned threads, void **args, struct gm_diag *d)
{
	gm_cu_result r = g->cu->launch_kernel(f, grid, 1, 1, threads, 1, 1, 0,
					      NULL, args, NULL);

	return r ? cu_fail(g, d, "launching a verify kernel", r) : 0;
}

static int gpu_write(void *ctx, const struct gm_vchunk *c, int kind,
		     uint64_t seed, uint64_t konst, struct gm_diag *d)
{
	struct gpu *g = ctx;
	unsigned long long p = c->addr, n = c->words, base = c->base;
	unsigned long long s = seed, k = konst;
	void *args[] = {&p, &n, &base, &kind, &s, &k};

	return launch(g, g->f_write, g->grid_write, GM_GPU_THREADS, args, d);
}

static int gpu_verify(void *ctx, const struct gm_vchunk *c, int kind,
		      uint64_t seed, uint64_t konst, int next_kind,
		      uint64_t next_konst, uint64_t total, struct gm_diag *d)
{
	struct gpu *g = ctx;
	unsigned long long p = c->addr, n = c->words, base = c->base;
	unsigned long long s = seed, k = konst, nk = next_konst, t = total;
	unsigned long long e = g->errs;
	void *args[] = {&p, &n, &base, &kind, &s, &k, &next_kind, &nk, &e, &t};

	return launch(g, g->f_verify, g->grid_verify, GM_GPU_THREADS, args,
		      d);
}

static int gpu_walk(void *ctx, const struct gm_vchunk *c, int verify,
		    uint64_t seed, uint64_t total, struct gm_diag *d)
{
	struct gpu *g = ctx;
	unsigned long long p = c->addr, n = c->words, base = c->base;
	unsigned long long s = seed, t = total, e = g->errs;
	void *args[] = {&p, &n, &base, &verify, &s, &e, &t};

	return launch(g, g->f_walk, 1, 32, args, d);
}

static int gpu_sync(void *ctx, struct gm_ve *out, struct gm_diag *d)
{
	struct gpu *g = ctx;
	gm_cu_result r = g->cu->ctx_synchronize();

	if (r)
		return cu_fail(g, d, "running the verify kernels", r);
	if (out) {
		r = g->cu->memcpy_dtoh(out, g->errs, sizeof(*out));
		if (r)
			return cu_fail(g, d, "reading the error record", r);
	}
	return 0;
}

/* ==== Setup ==== */

static bool has_funcs(const struct gm_cu *cu)
{
	return cu->module_load_data && cu->module_get_function &&
	       cu->launch_kernel && cu->memcpy_dtoh && cu->memcpy_htod &&
	       cu->primary_ctx_retain && cu->ctx_set_current &&
	       cu->mem_alloc && cu->mem_free && cu->mem_get_info;
}

/* Blocks for a grid-stride kernel: as many as fit on all SMs at once. */
static unsigned grid_for(const struct gpu *g, gm_cu_func f, int sms)
{
	int per_sm = 0;

	if (!g->cu->occupancy_blocks ||
	    g->cu->occupancy_blocks(&per_sm, f, GM_GPU_THREADS, 0) ||
	    per_sm <= 0)
		per_sm = 4;
	return (unsigned)(sms > 0 ? sms : 16) * (unsigned)per_sm;
}

/*
 * Launch each kernel once over nothing before memory is taken: with lazy
 * module loading the driver loads kernels, and sets up launch resources,
 * at the first launch, which needs device memory of its own.
 */
static int gpu_warm_up(struct gpu *g, struct gm_diag *d)
{
	struct gm_vchunk none = {g->errs, 0, 0};
	int rc = gpu_begin(g, d);

	if (!rc)
		rc = gpu_write(g, &none, GM_VP_UNIQUE, 1ULL << 63, 0, d);
	if (!rc)
		rc = gpu_verify(g, &none, GM_VP_UNIQUE, 1ULL << 63, 0,
				GM_VP_NONE, 0, 0, d);
	if (!rc)
		rc = gpu_walk(g, &none, 1, 1ULL << 63, 0, d);
	if (!rc)
		rc = gpu_sync(g, NULL, d);
	return rc;
}

static int gpu_open(struct gpu *g, const struct gm_cu *cu, int index,
		    int sms, struct gm_diag *d)
{
	gm_cu_result r;

	memset(g, 0, sizeof(*g));
	g->cu = cu;
	if (!gm_verify_have_kernels())
		return gm_diag_set(d, GM_ENOTSUP,
				   "gpumem was built without nvcc: no verify "
				   "kernels (rebuild with the CUDA Toolkit)");
	if (!has_funcs(cu))
		return gm_diag_set(d, GM_EDEVICE,
				   "the driver lacks functions verify needs");
	r = cu->device_get(&g->dev, index);
	if (!r)
		r = cu->primary_ctx_retain(&g->ctx, g->dev);
	if (r)
		return cu_fail(g, d, "creating a context", r);
	r = cu->ctx_set_current(g->ctx);
	if (!r)
		r = cu->module_load_data(&g->mod, gm_verify_fatbin);
	if (!r)
		r = cu->module_get_function(&g->f_write, g->mod, "gm_k_write");
	if (!r)
		r = cu->module_get_function(&g->f_verify, g->mod,
					    "gm_k_verify");
	if (!r)
		r = cu->module_get_function(&g->f_walk, g->mod, "gm_k_walk");
	if (!r)
		r = cu->mem_alloc(&g->errs, sizeof(struct gm_ve));
	if (r)
		return cu_fail(g, d, "loading the verify kernels", r);
	g->grid_write = grid_for(g, g->f_write, sms);
	g->grid_verify = grid_for(g, g->f_verify, sms);
	return gpu_warm_up(g, d);
}

static void gpu_close(struct gpu *g)
{
	const struct gm_cu *cu = g->cu;

	if (!cu || !g->ctx)
		return;
	cu->ctx_set_current(g->ctx);
	for (unsigned i = 0; i < g->nchunks; i++)
		cu->mem_free(g->chunks[i].addr);
	if (g->errs)
		cu->mem_free(g->errs);
	if (g->mod && cu->module_unload)
		cu->module_unload(g->mod);
	if (cu->primary_ctx_release)
		cu->primary_ctx_release(g->dev);
	g->ctx = NULL;
}

/*
 * Allocate all that can be allocated, at most max bytes: the largest
 * chunk the driver gives (starting from all that is free, shrinking by
 * 1/16 on each refusal, down to 2 MiB), repeated until it gives none.
 */
static int gpu_alloc_all(struct gpu *g, uint64_t max, struct gm_verify_result *r,
			 struct gm_diag *d)
{
	size_t free_b = 0, total_b = 0;
	uint64_t want, got = 0, base = 0;
	gm_cu_result rc = g->cu->mem_get_info(&free_b, &total_b);

	if (rc)
		return cu_fail(g, d, "reading free memory", rc);
	r->free_bytes = free_b;
	want = free_b / GM_GPU_GRAIN * GM_GPU_GRAIN;
	if (max && want > max)
		want = max / GM_GPU_GRAIN * GM_GPU_GRAIN;
	while (want >= GM_GPU_GRAIN && g->nchunks < GM_GPU_MAX_CHUNKS &&
	       (!max || got < max)) {
		gm_cu_ptr p;

		if (max && want > max - got)
			want = (max - got) / GM_GPU_GRAIN * GM_GPU_GRAIN;
		if (want < GM_GPU_GRAIN)
			break;
		rc = g->cu->mem_alloc(&p, want);
		if (rc == GM_CU_ERROR_OUT_OF_MEMORY) {
			uint64_t step = want / 16 / GM_GPU_GRAIN * GM_GPU_GRAIN;

			want -= step ? step : GM_GPU_GRAIN;
			continue;
		}
		if (rc)
			return cu_fail(g, d, "allocating memory to test", rc);
		g->chunks[g->nchunks].addr = p;
		g->chunks[g->nchunks].words = want / 8;
		g->chunks[g->nchunks].base = base;
		g->nchunks++;
		base += want / 8;
		got += want;
	}
	r->allocated_bytes = got;
	r->unallocated_bytes = free_b > got ? free_b - got : 0;
	r->chunks = g->nchunks;
	if (!got)
		return gm_diag_set(d, GM_EDEVNOMEM,
				   "could not allocate any device memory "
				   "(%zu bytes free)",
				   free_b);
	if (!max && got < free_b * 0.9) {
		char a[32], b[32];

		gm_size_format(a, sizeof(a), got);
		gm_size_format(b, sizeof(b), free_b);
		gm_verify_note(r, "could allocate only %s of %s free: "
				  "another process, or a driver that "
				  "reports memory it cannot give",
			       a, b);
	}
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void result_error(struct gm_verify_result *r, int err,
			 const struct gm_diag *d)
{
	r->err = err;
	snprintf(r->errmsg, sizeof(r->errmsg), "%s", d->msg);
	gm_verify_judge(r);
}

/* ==== One device per thread ==== */

struct job {
	const struct gm_cu *cu;
	const struct gm_nvml *nvml;
	int index;
	const struct gm_verify_opts *o;
	struct gm_verify_result *r;
};

static void verify_one(const struct job *j)
{
	struct gm_verify_result *r = j->r;
	struct gpu g;
	struct gm_diag d = {{0}};
	struct gm_vbackend be = {
		.ctx = &g, .begin = gpu_begin, .write = gpu_write,
		.verify = gpu_verify, .walk = gpu_walk, .sync = gpu_sync,
	};
	double t0;
	int rc;

	memset(r, 0, sizeof(*r));
	r->device = j->index;
	snprintf(r->kind, sizeof(r->kind), "gpu");
	rc = gm_verify_identify(j->cu, j->nvml, j->index, &r->id, &d);
	if (rc) {
		result_error(r, rc, &d);
		return;
	}
	gm_verify_claims(r, j->o->claimed_bytes);
	memset(&g, 0, sizeof(g));
	rc = gpu_open(&g, j->cu, j->index, r->id.sm_count, &d);
	t0 = now_s();
	if (!rc)
		rc = gpu_alloc_all(&g, j->o->max_bytes, r, &d);
	if (!rc)
		rc = gm_verify_run(&be, g.chunks, g.nchunks, j->o, r, &d);
	r->wall_seconds = now_s() - t0;
	gpu_close(&g);
	if (rc) {
		result_error(r, rc, &d);
		return;
	}
	gm_verify_judge(r);
}

static void *verify_thread(void *arg)
{
	verify_one(arg);
	return NULL;
}

int gm_verify_device_count(const struct gm_cu *cu, int *count,
			   struct gm_diag *d)
{
	gm_cu_result r = cu->init(0);

	*count = 0;
	if (r == GM_CU_ERROR_NO_DEVICE)
		return gm_diag_set(d, GM_ENODEV, "no CUDA device");
	if (!r)
		r = cu->device_count(count);
	if (r)
		return gm_diag_set(d, GM_EDEVICE, "cuInit: %s",
				   gm_cu_error_name(cu, r));
	if (*count == 0)
		return gm_diag_set(d, GM_ENODEV, "no CUDA device");
	return 0;
}

int gm_verify_devices(const struct gm_cu *cu, const int *devs, size_t n,
		      const struct gm_verify_opts *o,
		      struct gm_verify_result *r, struct gm_diag *d)
{
	struct gm_nvml nvml;
	struct gm_diag nd = {{0}};
	struct job *jobs = calloc(n ? n : 1, sizeof(*jobs));
	pthread_t *th = calloc(n ? n : 1, sizeof(*th));
	bool *started = calloc(n ? n : 1, sizeof(*started));
	int count, rc;

	if (!jobs || !th || !started) {
		rc = gm_diag_set(d, GM_ENOMEM, "out of host memory");
		goto out;
	}
	rc = gm_verify_device_count(cu, &count, d);
	if (rc)
		goto out;
	for (size_t i = 0; i < n; i++)
		if (devs[i] < 0 || devs[i] >= count) {
			rc = gm_diag_set(d, GM_ENODEV,
					 "--device %d: there are %d devices "
					 "(0..%d)",
					 devs[i], count, count - 1);
			goto out;
		}
	if (gm_nvml_open(&nvml, NULL, &nd))
		memset(&nvml, 0, sizeof(nvml));
	for (size_t i = 0; i < n; i++) {
		jobs[i] = (struct job){cu, &nvml, devs[i], o, &r[i]};
		started[i] = n > 1 &&
			     pthread_create(&th[i], NULL, verify_thread,
					    &jobs[i]) == 0;
		if (!started[i])
			verify_one(&jobs[i]);
	}
	for (size_t i = 0; i < n; i++)
		if (started[i])
			pthread_join(th[i], NULL);
	if (!nvml.lib)
		for (size_t i = 0; i < n; i++)
			snprintf(r[i].id.nvml_error, sizeof(r[i].id.nvml_error),
				 "%.500s", nd.msg);
	gm_nvml_close(&nvml);
out:
	free(jobs);
	free(th);
	free(started);
	return rc;
}

/* ==== The VMM fake ==== */

static uint64_t gcd_u64(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

uint64_t gm__vmm_chunk(uint64_t claimed, uint64_t real, uint64_t gran)
{
	if (!gran || claimed % gran || real % gran || !real)
		return 0;
	return gran * gcd_u64(claimed / gran, real / gran);
}

/* The fake's mappings: virtual chunk i of `chunk` bytes shows handle
 * h[i mod nh]; nmapped chunks are mapped so far. */
struct vmm {
	gm_cu_ptr va;
	uint64_t claimed, real, chunk;
	gm_cu_handle *h;
	uint64_t nh, ncreated, nmapped;
};

static int vmm_fail(const struct gm_cu *cu, struct gm_diag *d,
		    const char *what, gm_cu_result r)
{
	return gm_diag_set(d, r == GM_CU_ERROR_OUT_OF_MEMORY ? GM_EDEVNOMEM
							     : GM_EDEVICE,
			   "%s: %s", what, gm_cu_error_name(cu, r));
}

/*
 * Build the fake: real/chunk physical allocations (cuMemCreate) of chunk
 * bytes each, claimed bytes of addresses (cuMemAddressReserve), and
 * virtual chunk i mapped to allocation i mod (real/chunk). Virtual
 * address a then shows physical byte a mod real, as a card whose high
 * address bits are not decoded. Each map covers a whole allocation: the
 * driver (580, H200, measured) answers CUDA_ERROR_NOT_SUPPORTED to
 * mapping part of one, though its documentation allows it.
 */
static int vmm_map(const struct gm_cu *cu, gm_cu_device dev, struct vmm *m,
		   struct gm_diag *d)
{
	struct gm_cu_alloc_prop prop;
	struct gm_cu_access_desc acc;
	gm_cu_result cr = 0;

	memset(&prop, 0, sizeof(prop));
	prop.type = GM_CU_MEM_ALLOCATION_PINNED;
	prop.location.type = GM_CU_MEM_LOCATION_DEVICE;
	prop.location.id = dev;
	m->nh = m->real / m->chunk;
	m->h = calloc(m->nh, sizeof(*m->h));
	if (!m->h)
		return gm_diag_set(d, GM_ENOMEM, "out of host memory");
	while (m->ncreated < m->nh) {
		cr = cu->mem_create(&m->h[m->ncreated], m->chunk, &prop, 0);
		if (cr)
			return vmm_fail(cu, d,
					"allocating the VMM fake's memory", cr);
		m->ncreated++;
	}
	cr = cu->mem_address_reserve(&m->va, m->claimed, 0, 0, 0);
	if (cr) {
		m->va = 0;
		return vmm_fail(cu, d, "reserving the VMM fake's addresses",
				cr);
	}
	while (m->nmapped < m->claimed / m->chunk) {
		cr = cu->mem_map(m->va + m->nmapped * m->chunk, m->chunk, 0,
				 m->h[m->nmapped % m->nh], 0);
		if (cr)
			return vmm_fail(cu, d, "mapping the VMM fake", cr);
		m->nmapped++;
	}
	acc.location = prop.location;
	acc.flags = GM_CU_MEM_ACCESS_READWRITE;
	cr = cu->mem_set_access(m->va, m->claimed, &acc, 1);
	return cr ? vmm_fail(cu, d, "mapping the VMM fake (access)", cr) : 0;
}

static void vmm_unmap(const struct gm_cu *cu, struct vmm *m)
{
	for (uint64_t i = 0; i < m->nmapped; i++)
		cu->mem_unmap(m->va + i * m->chunk, m->chunk);
	if (m->va)
		cu->mem_address_free(m->va, m->claimed);
	for (uint64_t i = 0; i < m->ncreated; i++)
		cu->mem_release(m->h[i]);
	free(m->h);
	memset(m, 0, sizeof(*m));
}

/* The sizes against the device's granularity: GM_EINVAL naming the
 * option when one is not a multiple of it (rounding would change the
 * real size the run is meant to find). */
static int vmm_sizes(struct vmm *m, uint64_t gran, struct gm_diag *d)
{
	char g[32];

	gm_size_format(g, sizeof(g), gran);
	if (m->claimed % gran || m->real % gran)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate-vmm: %s=%llu bytes is not a "
				   "multiple of the device's allocation "
				   "granularity (%s)",
				   m->claimed % gran ? "claimed" : "real",
				   (unsigned long long)(m->claimed % gran
								? m->claimed
								: m->real),
				   g);
	if (m->real > m->claimed)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate-vmm: real exceeds claimed");
	m->chunk = gm__vmm_chunk(m->claimed, m->real, gran);
	return 0;
}

static bool has_vmm_funcs(const struct gm_cu *cu)
{
	return cu->mem_create && cu->mem_release && cu->mem_map &&
	       cu->mem_unmap && cu->mem_address_reserve &&
	       cu->mem_address_free && cu->mem_set_access &&
	       cu->mem_granularity && cu->device_attribute && cu->device_get;
}

/* Identity with NVML opened for it (its absence noted, not fatal). */
static int vmm_identify(const struct gm_cu *cu, int index,
			struct gm_verify_ident *id, struct gm_diag *d)
{
	struct gm_nvml nvml;
	struct gm_diag nd = {{0}};
	int rc;

	if (gm_nvml_open(&nvml, NULL, &nd))
		memset(&nvml, 0, sizeof(nvml));
	rc = gm_verify_identify(cu, &nvml, index, id, d);
	if (!nvml.lib)
		snprintf(id->nvml_error, sizeof(id->nvml_error), "%.500s",
			 nd.msg);
	gm_nvml_close(&nvml);
	return rc;
}

int gm__verify_vmm_fake_on(const struct gm_cu *cu, int index,
			   uint64_t claimed, uint64_t real,
			   const struct gm_verify_opts *o,
			   const struct gm_vbackend *test_be,
			   struct gm_verify_result *r, struct gm_diag *d)
{
	struct gpu g;
	struct gm_vbackend be = {
		.ctx = &g, .begin = gpu_begin, .write = gpu_write,
		.verify = gpu_verify, .walk = gpu_walk, .sync = gpu_sync,
	};
	struct gm_cu_alloc_prop prop;
	struct vmm m = {.claimed = claimed, .real = real};
	struct gm_vchunk chunk;
	gm_cu_device dev = 0;
	size_t gran = 0;
	double t0;
	int count, rc, vmm = 0;
	char a[32], b[32], c[32];

	memset(r, 0, sizeof(*r));
	memset(&g, 0, sizeof(g));
	r->device = index;
	snprintf(r->kind, sizeof(r->kind), "vmm-fake");
	rc = gm_verify_device_count(cu, &count, d);
	if (!rc && (index < 0 || index >= count))
		rc = gm_diag_set(d, GM_ENODEV, "--device %d: no such device",
				 index);
	if (!rc)
		rc = vmm_identify(cu, index, &r->id, d);
	if (rc)
		return rc;
	if (!has_vmm_funcs(cu))
		return gm_diag_set(d, GM_ENOTSUP,
				   "the driver lacks the VMM API");
	if (cu->device_get(&dev, index))
		return gm_diag_set(d, GM_EDEVICE, "device %d: no handle",
				   index);
	cu->device_attribute(&vmm, GM_CU_ATTR_VMM_SUPPORTED, dev);
	memset(&prop, 0, sizeof(prop));
	prop.type = GM_CU_MEM_ALLOCATION_PINNED;
	prop.location.type = GM_CU_MEM_LOCATION_DEVICE;
	prop.location.id = dev;
	if (!vmm || cu->mem_granularity(&gran, &prop,
					GM_CU_GRANULARITY_MINIMUM) || !gran)
		return gm_diag_set(d, GM_ENOTSUP,
				   "device %d does not support the VMM API",
				   index);
	rc = vmm_sizes(&m, gran, d);
	if (rc)
		return rc;
	if (test_be) {
		be = *test_be;
	} else {
		rc = gpu_open(&g, cu, index, r->id.sm_count, d);
		if (rc)
			goto out;
	}
	rc = vmm_map(cu, dev, &m, d);
	if (rc)
		goto out;
	r->claimed_bytes = claimed;
	r->reported_bytes = claimed;
	snprintf(r->claimed_source, sizeof(r->claimed_source),
		 "emulate-vmm");
	r->free_bytes = claimed;
	r->allocated_bytes = claimed;
	r->chunks = 1;
	chunk = (struct gm_vchunk){m.va, claimed / 8, 0};
	gm_size_format(a, sizeof(a), real);
	gm_size_format(b, sizeof(b), claimed);
	gm_size_format(c, sizeof(c), m.chunk);
	gm_verify_note(r, "VMM fake: %s of physical memory (%llu "
			  "allocations of %s) mapped over %s of addresses",
		       a, (unsigned long long)m.nh, c, b);
	t0 = now_s();
	rc = gm_verify_run(&be, &chunk, 1, o, r, d);
	r->wall_seconds = now_s() - t0;
	if (rc) {
		r->err = rc;
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", d->msg);
	}
	gm_verify_judge(r);
	rc = 0; /* a failed run is in the verdict */
out:
	vmm_unmap(cu, &m);
	if (!test_be)
		gpu_close(&g);
	return rc;
}

int gm_verify_vmm_fake(const struct gm_cu *cu, int index, uint64_t claimed,
		       uint64_t real, const struct gm_verify_opts *o,
		       struct gm_verify_result *r, struct gm_diag *d)
{
	return gm__verify_vmm_fake_on(cu, index, claimed, real, o, NULL, r,
				      d);
}
