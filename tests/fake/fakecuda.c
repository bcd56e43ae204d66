/*
 * fakecuda.c - a fake libcuda.so.1 over host memory, for tests without a
 * GPU. Device memory is anonymous host mappings (MAP_NORESERVE, so a
 * "76 GiB card" costs nothing until touched). Exports the driver entry
 * points gpumem uses, cuGetProcAddress(_v2) with the driver's versioned
 * variants, and fakecuda_stats() for the tests to read its counters.
 *
 * Environment:
 *   FAKECUDA_NAME        device name (default "Fake GPU")
 *   FAKECUDA_TOTAL       total bytes per device, K/M/G suffix = KiB/MiB/GiB
 *                        (default 16G)
 *   FAKECUDA_OTHERS      bytes "used by other processes" (lowers free)
 *   FAKECUDA_DEVICES     number of devices (default 1)
 *   FAKECUDA_FAIL_ALLOC  N: the Nth allocation call answers out of memory
 *   FAKECUDA_FREE_DELAY_US  a free holds its memory this long before it
 *                        is given back and the call returns (a driver
 *                        that frees slowly)
 *   FAKECUDA_SETUP_DELAY_US  cuDeviceGetName takes this long (a slow
 *                        first device set-up)
 *   FAKECUDA_NO_VMM      1: the device has no virtual memory management
 *                        (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_
 *                        SUPPORTED answers 0)
 *
 * Virtual memory management: cuMemAddressReserve reserves inaccessible
 * host address space, cuMemMap makes [p, p + size) of it read-write for
 * a cuMemCreate handle of exactly that size (the handle is what counts
 * as used; a range is mapped once), cuMemUnmap takes back whole mappings
 * only, cuMemAddressFree refuses a range that still has mappings, and
 * the granularity is 2 MiB. fakecuda_vmm_stats() counts them.
 *
 * fakecuda_set_free_delay_us(us) sets the delay for the calling thread's
 * frees (beside FAKECUDA_FREE_DELAY_US).
 *
 * fakecuda_stats().peak_used is the most memory ever held at once (the
 * high-water mark a cap must keep below itself).
 *
 * Streams and events: any stream handle is accepted. fakecuda_hold(s, 1)
 * stands for a kernel still running on stream s: events recorded on s
 * while it is held answer CUDA_ERROR_NOT_READY until fakecuda_hold(s, 0),
 * or until something waits for them (cuEventSynchronize,
 * cuStreamSynchronize of s, cuCtxSynchronize), which ends the hold.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#pragma GCC diagnostic ignored "-Wmissing-prototypes"
#pragma GCC diagnostic ignored "-Wpedantic"

typedef int CUresult;
typedef unsigned long long CUdeviceptr;

enum {
	OK = 0, INVALID_VALUE = 1, OUT_OF_MEMORY = 2, INVALID_DEVICE = 101,
	NOT_FOUND = 500,
};

struct fakecuda_stats {
	unsigned long alloc_calls, free_calls, create_calls, release_calls;
	unsigned long getproc_calls, info_calls, v1_alloc_calls;
	unsigned long long used;
	unsigned long live;
	/* streams and events */
	unsigned long event_records, ctx_syncs, stream_syncs, events_live;
	unsigned long long peak_used;
};

#define MAX_LIVE 65536
struct block {
	uintptr_t p;
	size_t size;
	int kind; /* 0 memory, 1 VMM handle */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct block live[MAX_LIVE];
static struct fakecuda_stats st;
static atomic_ulong alloc_seq;
static unsigned long long next_handle = 0x1000;
static __thread int cur_dev;
static __thread unsigned free_delay_us;

static unsigned long long env_size(const char *name, unsigned long long dflt)
{
	const char *v = getenv(name);
	char *end;
	unsigned long long n;

	if (!v || !*v)
		return dflt;
	n = strtoull(v, &end, 10);
	switch (*end) {
	case 'G': return n << 30;
	case 'M': return n << 20;
	case 'K': return n << 10;
	default: return n;
	}
}

static unsigned long long total(void) { return env_size("FAKECUDA_TOTAL", 16ULL << 30); }

/* Reserve size bytes (or a handle) and record it. */
static CUresult take(uintptr_t *out, size_t size, int kind)
{
	unsigned long n = atomic_fetch_add(&alloc_seq, 1) + 1;
	CUresult r = OK;
	void *p = NULL;

	if (size == 0)
		return INVALID_VALUE;
	if (env_size("FAKECUDA_FAIL_ALLOC", 0) == n)
		return OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	if (kind == 0) st.alloc_calls++; else st.create_calls++;
	if (st.used + size + env_size("FAKECUDA_OTHERS", 0) > total()) {
		r = OUT_OF_MEMORY;
		goto out;
	}
	if (kind == 0) {
		p = mmap(NULL, size, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (p == MAP_FAILED) { r = OUT_OF_MEMORY; goto out; }
	} else {
		p = (void *)(uintptr_t)(next_handle++);
	}
	for (int i = 0; i < MAX_LIVE; i++) {
		if (!live[i].p) {
			live[i] = (struct block){(uintptr_t)p, size, kind};
			st.used += size;
			if (st.used > st.peak_used)
				st.peak_used = st.used;
			st.live++;
			*out = (uintptr_t)p;
			goto out;
		}
	}
	r = OUT_OF_MEMORY;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

static CUresult give(uintptr_t p, int kind)
{
	unsigned long long delay = env_size("FAKECUDA_FREE_DELAY_US", 0) +
				   free_delay_us;
	CUresult r = INVALID_VALUE;

	/* The memory is still held while the driver works on the free. */
	if (delay)
		usleep((useconds_t)delay);
	pthread_mutex_lock(&lock);
	if (kind == 0) st.free_calls++; else st.release_calls++;
	for (int i = 0; i < MAX_LIVE && p; i++) {
		if (live[i].p == p && live[i].kind == kind) {
			if (kind == 0)
				munmap((void *)p, live[i].size);
			st.used -= live[i].size;
			st.live--;
			live[i].p = 0;
			r = OK;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT void fakecuda_stats(struct fakecuda_stats *out)
{
	pthread_mutex_lock(&lock);
	*out = st;
	pthread_mutex_unlock(&lock);
}

EXPORT void fakecuda_set_device(int d) { cur_dev = d; }

EXPORT void fakecuda_set_free_delay_us(unsigned us) { free_delay_us = us; }

/* Start a new high-water mark from what is held now. */
EXPORT void fakecuda_reset_peak(void)
{
	pthread_mutex_lock(&lock);
	st.peak_used = st.used;
	pthread_mutex_unlock(&lock);
}

EXPORT CUresult cuInit(unsigned flags) { return flags ? INVALID_VALUE : OK; }
EXPORT CUresult cuDriverGetVersion(int *v) { *v = 13000; return OK; }
EXPORT CUresult cuDeviceGetCount(int *n) { *n = (int)env_size("FAKECUDA_DEVICES", 1); return OK; }
EXPORT CUresult cuDeviceGet(int *d, int i)
{
	if (i < 0 || i >= (int)env_size("FAKECUDA_DEVICES", 1))
		return INVALID_DEVICE;
	*d = i;
	return OK;
}
EXPORT CUresult cuDeviceGetName(char *name, int len, int d)
{
	const char *n = getenv("FAKECUDA_NAME");
	unsigned long long delay = env_size("FAKECUDA_SETUP_DELAY_US", 0);

	if (delay)
		usleep((useconds_t)delay);
	snprintf(name, (size_t)len, "%s", n && *n ? n : "Fake GPU");
	return OK;
}
EXPORT CUresult cuDeviceTotalMem_v2(size_t *b, int d) { *b = total(); return OK; }
EXPORT CUresult cuDeviceGetAttribute(int *v, int attr, int d)
{
	/* 102: CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
	*v = attr == 102 && env_size("FAKECUDA_NO_VMM", 0) == 0;
	return OK;
}
EXPORT CUresult cuCtxGetDevice(int *d) { *d = cur_dev; return OK; }
EXPORT CUresult cuGetErrorName(CUresult r, const char **s)
{
	*s = r == OUT_OF_MEMORY ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR";
	return OK;
}

/* ==== Streams and events ==== */

#define MAX_HOLDS 64
struct hold { uintptr_t stream; unsigned gen; int held; };
static struct hold holds[MAX_HOLDS];

struct event { uintptr_t stream; unsigned gen; int waits; };

/* The hold slot of stream s (made when make); NULL if none. Under lock. */
static struct hold *hold_of(uintptr_t s, int make)
{
	struct hold *fr = NULL;

	for (int i = 0; i < MAX_HOLDS; i++) {
		if (holds[i].stream == s && (holds[i].held || holds[i].gen))
			return &holds[i];
		if (!fr && !holds[i].held && !holds[i].gen)
			fr = &holds[i];
	}
	if (make && fr)
		fr->stream = s;
	return make ? fr : NULL;
}

static void release(struct hold *h)
{
	if (h && h->held) {
		h->held = 0;
		h->gen++;
	}
}

EXPORT void fakecuda_hold(void *stream, int on)
{
	struct hold *h;

	pthread_mutex_lock(&lock);
	h = hold_of((uintptr_t)stream, 1);
	if (on && h)
		h->held = 1;
	else
		release(h);
	pthread_mutex_unlock(&lock);
}

EXPORT CUresult cuEventCreate(struct event **e, unsigned flags)
{
	*e = calloc(1, sizeof(**e));
	if (!*e)
		return OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	st.events_live++;
	pthread_mutex_unlock(&lock);
	return OK;
}

EXPORT CUresult cuEventRecord(struct event *e, void *stream)
{
	struct hold *h;

	if (!e)
		return INVALID_VALUE;
	pthread_mutex_lock(&lock);
	st.event_records++;
	h = hold_of((uintptr_t)stream, 0);
	e->stream = (uintptr_t)stream;
	e->waits = h && h->held;
	e->gen = h ? h->gen : 0;
	pthread_mutex_unlock(&lock);
	return OK;
}

EXPORT CUresult cuEventQuery(struct event *e)
{
	struct hold *h;
	int busy;

	pthread_mutex_lock(&lock);
	h = hold_of(e->stream, 0);
	busy = e->waits && h && h->held && h->gen == e->gen;
	pthread_mutex_unlock(&lock);
	return busy ? 600 : OK; /* CUDA_ERROR_NOT_READY */
}

EXPORT CUresult cuEventSynchronize(struct event *e)
{
	pthread_mutex_lock(&lock);
	if (e->waits)
		release(hold_of(e->stream, 0));
	pthread_mutex_unlock(&lock);
	return OK;
}

EXPORT CUresult cuEventDestroy_v2(struct event *e)
{
	pthread_mutex_lock(&lock);
	st.events_live--;
	pthread_mutex_unlock(&lock);
	free(e);
	return OK;
}

EXPORT CUresult cuStreamSynchronize(void *stream)
{
	pthread_mutex_lock(&lock);
	st.stream_syncs++;
	release(hold_of((uintptr_t)stream, 0));
	pthread_mutex_unlock(&lock);
	return OK;
}

EXPORT CUresult cuCtxSynchronize(void)
{
	pthread_mutex_lock(&lock);
	st.ctx_syncs++;
	for (int i = 0; i < MAX_HOLDS; i++)
		release(&holds[i]);
	pthread_mutex_unlock(&lock);
	return OK;
}

EXPORT CUresult cuMemGetInfo_v2(size_t *f, size_t *t)
{
	unsigned long long used, others = env_size("FAKECUDA_OTHERS", 0);

	pthread_mutex_lock(&lock);
	st.info_calls++;
	used = st.used;
	pthread_mutex_unlock(&lock);
	*t = total();
	*f = used + others > *t ? 0 : *t - used - others;
	return OK;
}

EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t size)
{
	uintptr_t u = 0;
	CUresult r = take(&u, size, 0);
	if (r == OK) *p = u;
	return r;
}

/* The 32-bit ABI of CUDA < 3.2; counted apart so a test can tell. */
EXPORT CUresult cuMemAlloc(unsigned *p, unsigned size)
{
	pthread_mutex_lock(&lock);
	st.v1_alloc_calls++;
	pthread_mutex_unlock(&lock);
	*p = 0;
	return OUT_OF_MEMORY;
}

EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *p, size_t *pitch, size_t w,
				   size_t h, unsigned elem)
{
	*pitch = (w + 511) & ~(size_t)511;
	return cuMemAlloc_v2(p, *pitch * h);
}

EXPORT CUresult cuMemAllocManaged(CUdeviceptr *p, size_t size, unsigned f)
{
	return cuMemAlloc_v2(p, size);
}

EXPORT CUresult cuMemFree_v2(CUdeviceptr p) { return give(p, 0); }

EXPORT CUresult cuMemAllocAsync(CUdeviceptr *p, size_t size, void *s) { return cuMemAlloc_v2(p, size); }
EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *p, size_t size, void *s) { return cuMemAlloc_v2(p, size); }
EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *p, size_t size, void *pool, void *s) { return cuMemAlloc_v2(p, size); }
EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *p, size_t size, void *pool, void *s) { return cuMemAlloc_v2(p, size); }
EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, void *s) { return give(p, 0); }
EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr p, void *s) { return give(p, 0); }

struct prop { int type, handle_types; struct { int type, id; } loc; };

EXPORT CUresult cuMemCreate(unsigned long long *h, size_t size,
			    const struct prop *prop, unsigned long long flags)
{
	uintptr_t u = 0;
	CUresult r = take(&u, size, 1);
	if (r == OK) *h = u;
	return r;
}

EXPORT CUresult cuMemRelease(unsigned long long h) { return give(h, 1); }

/* ==== Virtual memory management ==== */

#define MAX_RESV 256
#define MAX_MAPS 8192
#define VMM_GRANULE (2ULL << 20)

struct fakecuda_vmm_stats {
	unsigned long reserves, address_frees, maps, unmaps;
	unsigned long long reserved_bytes, mapped_bytes, peak_mapped_bytes;
};

struct resv { uintptr_t p; size_t size; };
struct map { uintptr_t p; size_t size; unsigned long long h; };

static struct resv resvs[MAX_RESV];
static struct map maps[MAX_MAPS];
static struct fakecuda_vmm_stats vst;

EXPORT void fakecuda_vmm_stats(struct fakecuda_vmm_stats *out)
{
	pthread_mutex_lock(&lock);
	*out = vst;
	pthread_mutex_unlock(&lock);
}

/* The reservation holding [p, p + size), or NULL. Under lock. */
static struct resv *resv_of(uintptr_t p, size_t size)
{
	for (int i = 0; i < MAX_RESV; i++)
		if (resvs[i].p && p >= resvs[i].p &&
		    p - resvs[i].p < resvs[i].size &&
		    size <= resvs[i].size - (p - resvs[i].p))
			return &resvs[i];
	return NULL;
}

/* The live handle h of kind 1, or NULL. Under lock. */
static struct block *handle_of(unsigned long long h)
{
	for (int i = 0; i < MAX_LIVE; i++)
		if (live[i].p == h && live[i].kind == 1)
			return &live[i];
	return NULL;
}

EXPORT CUresult cuMemGetAllocationGranularity(size_t *g, const void *prop,
					      int option)
{
	*g = VMM_GRANULE;
	return OK;
}

EXPORT CUresult cuMemAddressReserve(CUdeviceptr *p, size_t size,
				    size_t align, CUdeviceptr addr,
				    unsigned long long flags)
{
	void *m;
	CUresult r = OUT_OF_MEMORY;

	if (!size || size % VMM_GRANULE)
		return INVALID_VALUE;
	m = mmap(NULL, size, PROT_NONE,
		 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return OUT_OF_MEMORY;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_RESV; i++) {
		if (!resvs[i].p) {
			resvs[i] = (struct resv){(uintptr_t)m, size};
			vst.reserves++;
			vst.reserved_bytes += size;
			*p = (uintptr_t)m;
			r = OK;
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	if (r)
		munmap(m, size);
	return r;
}

EXPORT CUresult cuMemAddressFree(CUdeviceptr p, size_t size)
{
	CUresult r = INVALID_VALUE;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_RESV; i++) {
		if (resvs[i].p != p || resvs[i].size != size)
			continue;
		r = OK;
		for (int k = 0; k < MAX_MAPS; k++)
			if (maps[k].size && maps[k].p - p < size)
				r = INVALID_VALUE; /* still mapped */
		if (r == OK) {
			munmap((void *)p, size);
			resvs[i].p = 0;
			vst.address_frees++;
			vst.reserved_bytes -= size;
		}
		break;
	}
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult cuMemMap(CUdeviceptr p, size_t size, size_t offset,
			 unsigned long long h, unsigned long long flags)
{
	struct block *b;
	CUresult r = INVALID_VALUE;
	int fr = -1;

	if (!size || offset || flags || p % VMM_GRANULE)
		return INVALID_VALUE;
	pthread_mutex_lock(&lock);
	b = handle_of(h);
	if (!b || b->size != size || !resv_of(p, size))
		goto out;
	for (int k = 0; k < MAX_MAPS; k++) {
		if (maps[k].size && maps[k].p < p + size &&
		    p < maps[k].p + maps[k].size)
			goto out; /* already mapped */
		if (fr < 0 && !maps[k].size)
			fr = k;
	}
	if (fr < 0 || mprotect((void *)p, size, PROT_READ | PROT_WRITE))
		goto out;
	maps[fr] = (struct map){p, size, h};
	vst.maps++;
	vst.mapped_bytes += size;
	if (vst.mapped_bytes > vst.peak_mapped_bytes)
		vst.peak_mapped_bytes = vst.mapped_bytes;
	r = OK;
out:
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult cuMemUnmap(CUdeviceptr p, size_t size)
{
	CUresult r = OK;
	size_t covered = 0;

	pthread_mutex_lock(&lock);
	/* whole mappings only, exactly covering the range */
	for (int k = 0; k < MAX_MAPS; k++) {
		if (!maps[k].size || maps[k].p >= p + size ||
		    p >= maps[k].p + maps[k].size)
			continue;
		if (maps[k].p < p || maps[k].p + maps[k].size > p + size)
			r = INVALID_VALUE;
		covered += maps[k].size;
	}
	if (r == OK && covered != size)
		r = INVALID_VALUE;
	for (int k = 0; r == OK && k < MAX_MAPS; k++) {
		if (!maps[k].size || maps[k].p >= p + size ||
		    p >= maps[k].p + maps[k].size)
			continue;
		madvise((void *)maps[k].p, maps[k].size, MADV_DONTNEED);
		mprotect((void *)maps[k].p, maps[k].size, PROT_NONE);
		vst.mapped_bytes -= maps[k].size;
		maps[k].size = 0;
	}
	if (r == OK)
		vst.unmaps++;
	pthread_mutex_unlock(&lock);
	return r;
}

EXPORT CUresult cuMemSetAccess(CUdeviceptr p, size_t size, const void *desc,
			       size_t count)
{
	CUresult r;

	pthread_mutex_lock(&lock);
	r = desc && count && resv_of(p, size) ? OK : INVALID_VALUE;
	pthread_mutex_unlock(&lock);
	return r;
}

/* ==== cuGetProcAddress: name + version + flags -> entry point ==== */

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver,
				 unsigned long long flags);
EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
				    unsigned long long flags, int *status);

static const struct { const char *name; void *fn; } table[] = {
#define E(f) {#f, (void *)f}
	E(cuInit), E(cuDriverGetVersion), E(cuDeviceGetCount), E(cuDeviceGet),
	E(cuDeviceGetName), E(cuDeviceTotalMem_v2), E(cuDeviceGetAttribute),
	E(cuCtxGetDevice), E(cuGetErrorName), E(cuMemGetInfo_v2),
	E(cuMemAlloc_v2), E(cuMemAlloc), E(cuMemAllocPitch_v2),
	E(cuMemAllocManaged), E(cuMemFree_v2), E(cuMemAllocAsync),
	E(cuMemAllocAsync_ptsz), E(cuMemAllocFromPoolAsync),
	E(cuMemAllocFromPoolAsync_ptsz), E(cuMemFreeAsync),
	E(cuMemFreeAsync_ptsz), E(cuMemCreate), E(cuMemRelease),
	E(cuGetProcAddress), E(cuGetProcAddress_v2), E(cuEventCreate),
	E(cuEventRecord), E(cuEventQuery), E(cuEventSynchronize),
	E(cuEventDestroy_v2), E(cuStreamSynchronize), E(cuCtxSynchronize),
	E(cuMemGetAllocationGranularity), E(cuMemAddressReserve),
	E(cuMemAddressFree), E(cuMemMap), E(cuMemUnmap), E(cuMemSetAccess),
#undef E
};

static CUresult lookup(const char *sym, void **pfn, int ver,
		       unsigned long long flags)
{
	static const char *const v2[] = {"cuMemAlloc", "cuMemAllocPitch",
		"cuMemFree", "cuMemGetInfo", "cuDeviceTotalMem"};
	static const char *const ptsz[] = {"cuMemAllocAsync",
		"cuMemAllocFromPoolAsync", "cuMemFreeAsync"};
	char name[128];

	pthread_mutex_lock(&lock);
	st.getproc_calls++;
	pthread_mutex_unlock(&lock);
	snprintf(name, sizeof(name), "%s", sym);
	for (size_t i = 0; i < sizeof(v2) / sizeof(v2[0]); i++)
		if (strcmp(sym, v2[i]) == 0 && ver >= 3020)
			snprintf(name, sizeof(name), "%s_v2", sym);
	for (size_t i = 0; i < sizeof(ptsz) / sizeof(ptsz[0]); i++)
		if (strcmp(sym, ptsz[i]) == 0 && (flags & 2))
			snprintf(name, sizeof(name), "%s_ptsz", sym);
	if (strcmp(sym, "cuGetProcAddress") == 0 && ver >= 12000)
		snprintf(name, sizeof(name), "cuGetProcAddress_v2");
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		if (strcmp(name, table[i].name) == 0) {
			*pfn = table[i].fn;
			return OK;
		}
	}
	*pfn = NULL;
	return NOT_FOUND;
}

EXPORT CUresult cuGetProcAddress(const char *sym, void **pfn, int ver,
				 unsigned long long flags)
{
	return lookup(sym, pfn, ver, flags);
}

EXPORT CUresult cuGetProcAddress_v2(const char *sym, void **pfn, int ver,
				    unsigned long long flags, int *status)
{
	CUresult r = lookup(sym, pfn, ver, flags);
	if (status)
		*status = r == OK ? 0 : 1;
	return r;
}

/* The same functions under names gpumem does not wrap (fakecudart.c). */
EXPORT CUresult fakecuda_raw_alloc(CUdeviceptr *p, size_t size) { return cuMemAlloc_v2(p, size); }
EXPORT CUresult fakecuda_raw_free(CUdeviceptr p) { return give(p, 0); }
EXPORT CUresult fakecuda_raw_info(size_t *f, size_t *t) { return cuMemGetInfo_v2(f, t); }
