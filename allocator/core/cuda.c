/* cuda.c - the CUDA driver backend (see cuda.h). */
#include "cuda.h"

#include "cu.h"
#include "error.h"
#include "units.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define EVENT_POOL 256
#define MAX_RESERVATIONS 64

/* One cuMemAddressReserve range with a handle per mapped granule. */
struct resv {
	uint64_t addr, size;
	gm_cu_handle *handles; /* size / granule entries; 0 = unmapped */
};

struct cudabe {
	struct gm_backend be;
	const struct gm_cu *cu;
	gm_cu_device dev;
	bool retained;
	pthread_mutex_t lock;
	gm_cu_event events[EVENT_POOL];
	unsigned nevents;
	struct resv resv[MAX_RESERVATIONS];
	struct gm_cu_alloc_prop prop;
	int (*charge)(void *arg, uint64_t bytes);
	void (*uncharge)(void *arg, uint64_t bytes);
	void *charge_arg;
};

static struct cudabe *cb(struct gm_backend *be)
{
	return (struct cudabe *)be;
}

/* Map a driver result: out of memory is GM_EDEVNOMEM, the rest
 * GM_EDEVICE. */
static int cuerr(gm_cu_result r)
{
	if (r == GM_CU_SUCCESS)
		return 0;
	return r == GM_CU_ERROR_OUT_OF_MEMORY ? GM_EDEVNOMEM : GM_EDEVICE;
}

static int c_seg_alloc(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	gm_cu_ptr p = 0;
	int err = cuerr(cb(be)->cu->mem_alloc(&p, size));

	*addr = err ? 0 : p;
	return err;
}

static int c_seg_free(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	return cuerr(cb(be)->cu->mem_free(addr));
}

/* Give back one granule's handle; its charge once the driver let go. */
static void granule_release(struct cudabe *c, gm_cu_handle h)
{
	if (c->cu->mem_release(h) == GM_CU_SUCCESS && c->uncharge)
		c->uncharge(c->charge_arg, c->be.granule_bytes);
}

static struct resv *resv_of(struct cudabe *c, uint64_t addr)
{
	for (unsigned i = 0; i < MAX_RESERVATIONS; i++) {
		struct resv *r = &c->resv[i];

		if (r->size && addr >= r->addr && addr - r->addr < r->size)
			return r;
	}
	return NULL;
}

static int c_va_reserve(struct gm_backend *be, uint64_t size, uint64_t *addr)
{
	struct cudabe *c = cb(be);
	struct resv *r = NULL;
	gm_cu_ptr p = 0;
	int err;

	if (size % be->granule_bytes)
		return GM_EINVAL;
	pthread_mutex_lock(&c->lock);
	for (unsigned i = 0; i < MAX_RESERVATIONS && !r; i++)
		if (!c->resv[i].size)
			r = &c->resv[i];
	err = r ? 0 : GM_ENOMEM;
	if (!err) {
		r->handles = calloc(size / be->granule_bytes,
				    sizeof(*r->handles));
		err = r->handles ? 0 : GM_ENOMEM;
	}
	if (!err) {
		err = cuerr(c->cu->mem_address_reserve(&p, size, 0, 0, 0));
		if (err) {
			free(r->handles);
			r->handles = NULL;
		} else {
			r->addr = p;
			r->size = size;
			*addr = p;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

/*
 * Unmap and release granules [from, to) of r, skipping unmapped ones.
 * A granule whose cuMemUnmap fails keeps its handle (still mapped, still
 * counted); the first failure is returned (GM_EDEVICE), the rest go on.
 * Caller holds the lock.
 */
static int unmap_range(struct cudabe *c, struct resv *r, uint64_t from,
		       uint64_t to)
{
	uint64_t g = c->be.granule_bytes;
	int err = 0;

	for (uint64_t i = from; i < to; i++) {
		if (!r->handles[i])
			continue;
		if (c->cu->mem_unmap(r->addr + i * g, g) != GM_CU_SUCCESS) {
			err = err ? err : GM_EDEVICE;
			continue;
		}
		granule_release(c, r->handles[i]);
		r->handles[i] = 0;
	}
	return err;
}

/*
 * Back [addr, addr + size) with one cuMemCreate granule at a time, then
 * grant read-write access to the range. Any failure unmaps and releases
 * what this call did, so the range is as before.
 */
static int c_va_map(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct cudabe *c = cb(be);
	uint64_t g = be->granule_bytes, first, n, i;
	struct gm_cu_access_desc acc = {
		.location = {GM_CU_MEM_LOCATION_DEVICE, c->dev},
		.flags = GM_CU_MEM_ACCESS_READWRITE,
	};
	struct resv *r;
	int err = 0;

	if (!size || size % g || addr % g)
		return GM_EINVAL;
	pthread_mutex_lock(&c->lock);
	r = resv_of(c, addr);
	if (!r || size > r->size - (addr - r->addr)) {
		pthread_mutex_unlock(&c->lock);
		return GM_EINVAL;
	}
	first = (addr - r->addr) / g;
	n = size / g;
	for (i = 0; i < n && !err; i++) {
		gm_cu_handle h = 0;

		if (r->handles[first + i]) {
			err = GM_EINVAL; /* already mapped */
			break;
		}
		if (c->charge && c->charge(c->charge_arg, g)) {
			err = GM_ELIMIT;
			break;
		}
		err = cuerr(c->cu->mem_create(&h, g, &c->prop, 0));
		if (err) {
			if (c->uncharge)
				c->uncharge(c->charge_arg, g);
			break;
		}
		err = cuerr(c->cu->mem_map(addr + i * g, g, 0, h, 0));
		if (err) {
			granule_release(c, h);
			break;
		}
		r->handles[first + i] = h;
	}
	if (!err)
		err = cuerr(c->cu->mem_set_access(addr, size, &acc, 1));
	if (err)
		unmap_range(c, r, first, first + i);
	pthread_mutex_unlock(&c->lock);
	return err;
}

static int c_va_unmap(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct cudabe *c = cb(be);
	uint64_t g = be->granule_bytes;
	struct resv *r;
	int err = 0;

	if (size % g || addr % g)
		return GM_EINVAL;
	pthread_mutex_lock(&c->lock);
	r = resv_of(c, addr);
	if (r && size <= r->size - (addr - r->addr))
		err = unmap_range(c, r, (addr - r->addr) / g,
				  (addr - r->addr + size) / g);
	pthread_mutex_unlock(&c->lock);
	return r ? err : GM_EINVAL;
}

static int c_va_release(struct gm_backend *be, uint64_t addr, uint64_t size)
{
	struct cudabe *c = cb(be);
	struct resv *r;
	int err = GM_EINVAL;

	pthread_mutex_lock(&c->lock);
	r = resv_of(c, addr);
	if (r && r->addr == addr) {
		unmap_range(c, r, 0, r->size / be->granule_bytes);
		err = cuerr(c->cu->mem_address_free(r->addr, r->size));
		free(r->handles);
		memset(r, 0, sizeof(*r));
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

static int c_event_record(struct gm_backend *be, uintptr_t stream,
			  uint64_t *event)
{
	struct cudabe *c = cb(be);
	gm_cu_event e = NULL;
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->nevents)
		e = c->events[--c->nevents];
	pthread_mutex_unlock(&c->lock);
	if (!e)
		err = cuerr(c->cu->event_create(&e, GM_CU_EVENT_DISABLE_TIMING));
	if (!err)
		err = cuerr(c->cu->event_record(e, (gm_cu_stream)stream));
	if (err) {
		if (e)
			c->cu->event_destroy(e);
		return err;
	}
	*event = (uint64_t)(uintptr_t)e;
	return 0;
}

static int c_event_query(struct gm_backend *be, uint64_t event)
{
	gm_cu_result r = cb(be)->cu->event_query((gm_cu_event)(uintptr_t)event);

	if (r == GM_CU_ERROR_NOT_READY)
		return GM_EBUSY;
	return cuerr(r);
}

static int c_event_sync(struct gm_backend *be, uint64_t event)
{
	return cuerr(cb(be)->cu->event_synchronize(
		(gm_cu_event)(uintptr_t)event));
}

static void c_event_destroy(struct gm_backend *be, uint64_t event)
{
	struct cudabe *c = cb(be);
	gm_cu_event e = (gm_cu_event)(uintptr_t)event;

	pthread_mutex_lock(&c->lock);
	if (c->nevents < EVENT_POOL) {
		c->events[c->nevents++] = e;
		e = NULL;
	}
	pthread_mutex_unlock(&c->lock);
	if (e)
		c->cu->event_destroy(e);
}

static int c_synchronize(struct gm_backend *be)
{
	return cuerr(cb(be)->cu->ctx_synchronize());
}

static int c_mem_free(struct gm_backend *be, uint64_t *free_bytes)
{
	size_t f = 0, t = 0;
	int err = cuerr(cb(be)->cu->mem_get_info(&f, &t));

	*free_bytes = f;
	return err;
}

static void c_destroy(struct gm_backend *be)
{
	struct cudabe *c = cb(be);

	for (unsigned i = 0; i < c->nevents; i++)
		c->cu->event_destroy(c->events[i]);
	for (unsigned i = 0; i < MAX_RESERVATIONS; i++)
		if (c->resv[i].size)
			c_va_release(be, c->resv[i].addr, c->resv[i].size);
	if (c->retained)
		c->cu->primary_ctx_release(c->dev);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static const struct gm_backend_ops cuda_ops = {
	.seg_alloc = c_seg_alloc,
	.seg_free = c_seg_free,
	.event_record = c_event_record,
	.event_query = c_event_query,
	.event_sync = c_event_sync,
	.event_destroy = c_event_destroy,
	.synchronize = c_synchronize,
	.mem_free = c_mem_free,
	.destroy = c_destroy,
};

static const struct gm_backend_ops cuda_ops_va = {
	.seg_alloc = c_seg_alloc,
	.seg_free = c_seg_free,
	.va_reserve = c_va_reserve,
	.va_map = c_va_map,
	.va_unmap = c_va_unmap,
	.va_release = c_va_release,
	.event_record = c_event_record,
	.event_query = c_event_query,
	.event_sync = c_event_sync,
	.event_destroy = c_event_destroy,
	.synchronize = c_synchronize,
	.mem_free = c_mem_free,
	.destroy = c_destroy,
};

int gm_cuda_backend_create(struct gm_backend **out, const struct gm_cu *cu,
			   const struct gm_cuda_options *opt,
			   struct gm_diag *diag)
{
	struct cudabe *c;
	size_t total = 0, gran = 0;
	gm_cu_result r;
	int vmm = 0;

	*out = NULL;
	if (!cu->mem_alloc || !cu->mem_free || !cu->event_record ||
	    !cu->device_total_mem)
		return gm_diag_set(diag, GM_ENODEV,
				   "the driver lacks cuMemAlloc or events");
	c = calloc(1, sizeof(*c));
	if (!c)
		return gm_diag_set(diag, GM_ENOMEM, "out of host memory");
	c->cu = cu;
	if (opt->charge && opt->uncharge) {
		c->charge = opt->charge;
		c->uncharge = opt->uncharge;
		c->charge_arg = opt->charge_arg;
	}
	pthread_mutex_init(&c->lock, NULL);
	r = cu->device_get(&c->dev, opt->device);
	if (!r && opt->make_current) {
		gm_cu_ctx ctx = NULL;

		r = cu->primary_ctx_retain(&ctx, c->dev);
		if (!r) {
			c->retained = true;
			r = cu->ctx_set_current(ctx);
		}
	}
	if (!r)
		r = cu->device_total_mem(&total, c->dev);
	if (r)
		goto fail;
	c->be.name = "cuda";
	c->be.total_bytes = total;
	c->be.ops = &cuda_ops;
	c->prop.type = GM_CU_MEM_ALLOCATION_PINNED;
	c->prop.location.type = GM_CU_MEM_LOCATION_DEVICE;
	c->prop.location.id = c->dev;
	if (opt->virtual_segments) {
		r = cu->device_attribute(&vmm, GM_CU_ATTR_VMM_SUPPORTED, c->dev);
		if (r || !vmm || !cu->mem_address_reserve ||
		    !cu->mem_address_free || !cu->mem_create ||
		    !cu->mem_release || !cu->mem_map || !cu->mem_unmap ||
		    !cu->mem_set_access || !cu->mem_granularity) {
			c_destroy(&c->be);
			return gm_diag_set(diag, GM_ENOTSUP,
					   "device %d has no virtual memory "
					   "management", opt->device);
		}
		r = cu->mem_granularity(&gran, &c->prop,
					GM_CU_GRANULARITY_RECOMMENDED);
		if (r)
			goto fail;
		/* 2 MiB: PyTorch's small-pool page (kSmallBuffer,
		 * c10/cuda/CUDACachingAllocator.cpp). */
		c->be.granule_bytes = gran > 2 * GM_MiB ? gran : 2 * GM_MiB;
		c->be.ops = &cuda_ops_va;
	}
	*out = &c->be;
	return 0;
fail:
	gm_diag_set(diag, cuerr(r), "device %d: %s", opt->device,
		    gm_cu_error_name(cu, r));
	c_destroy(&c->be);
	return r == GM_CU_ERROR_OUT_OF_MEMORY ? GM_EDEVNOMEM : GM_EDEVICE;
}
