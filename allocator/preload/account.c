/* account.c - per-device accounting and the cap (see account.h). */
#include "account.h"

#include "claimed.h"
#include "cu.h"
#include "error.h"
#include "log.h"
#include "oom_say.h"
#include "report.h"
#include "units.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>

struct gm_pl_state gm__pl;
struct gm_cu gm__pl_cu;
__thread struct gm_pl_tls gm__pl_tls __attribute__((tls_model("initial-exec")));

static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

void gm_pl_setup_lock(bool take)
{
	if (take)
		pthread_mutex_lock(&setup_lock);
	else
		pthread_mutex_unlock(&setup_lock);
}

static void max_update(_Atomic uint64_t *peak, uint64_t v)
{
	uint64_t p = atomic_load_explicit(peak, memory_order_relaxed);

	while (v > p && !atomic_compare_exchange_weak_explicit(
				peak, &p, v, memory_order_relaxed,
				memory_order_relaxed))
		;
}

void gm_pl_dev_setup(struct gm_pl_dev *d, const struct gm_pl_opts *o,
		     int ordinal, const char *name, uint32_t pci_id,
		     uint64_t total)
{
	char have[32], want[32];
	uint64_t cap = UINT64_MAX;

	d->ordinal = ordinal;
	snprintf(d->name, sizeof(d->name), "%s", name);
	d->pci_device_id = pci_id;
	d->total = total;
	if (o->limit)
		cap = o->limit;
	if (o->frac_den) {
		/* floor(total x F) with F the exact decimal written. */
		__extension__ typedef unsigned __int128 u128;
		u128 f = (u128)total * o->frac_num / o->frac_den;
		if (f < cap)
			cap = (uint64_t)f;
	}
	d->cap = cap;
	d->bad_opts = o->bad[0] != '\0';
	/* a GPUMEM_LIMIT above the card never binds: the card runs out
	 * first (the fraction's cap is at most the total) */
	if (o->limit && o->limit > total)
		gm_warn("device %d (%s) has %s: GPUMEM_LIMIT %s is above it "
			"and never binds; the card's memory is the bound",
			ordinal, name, gm_size_format(have, sizeof(have), total),
			gm_size_format(want, sizeof(want), o->limit));

	gm_pl_claimed(name, pci_id, o->claimed, &d->claimed, &d->min_total);
	d->undersized = d->min_total && total < d->min_total;
	d->refuse = d->undersized && o->fail_undersized;
	if (d->undersized)
		gm_warn("device %d (%s) reports %s but a genuine card of %s "
			"reports at least %s: undersized card, MIG/vGPU "
			"slice or another memory cap%s",
			ordinal, name, gm_size_format(have, sizeof(have), total),
			o->claimed ? "GPUMEM_CLAIMED" : "this model",
			gm_size_format(want, sizeof(want), d->min_total),
			d->refuse ? "; GPUMEM_ON_UNDERSIZED=fail: every "
				    "allocation on it will fail" : "");
}

/* Read the PCI vendor's device id (0x2335) from sysfs; 0 when unknown. */
static uint32_t pci_product_id(int ordinal)
{
	int dom = 0, bus = 0, slot = 0;
	char path[128];
	unsigned id = 0;
	FILE *f;

	if (!gm__pl_cu.device_attribute ||
	    gm__pl_cu.device_attribute(&dom, GM_CU_ATTR_PCI_DOMAIN_ID,
				       ordinal) ||
	    gm__pl_cu.device_attribute(&bus, GM_CU_ATTR_PCI_BUS_ID, ordinal) ||
	    gm__pl_cu.device_attribute(&slot, GM_CU_ATTR_PCI_DEVICE_ID,
				       ordinal))
		return 0;
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/"
		 "vendor", dom, bus, slot);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%x", &id) != 1 || id != 0x10de) { /* NVIDIA */
		fclose(f);
		return 0;
	}
	fclose(f);
	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%04x:%02x:%02x.0/"
		 "device", dom, bus, slot);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%x", &id) != 1)
		id = 0;
	fclose(f);
	return id;
}

struct gm_pl_dev *gm_pl_dev_get(int ordinal)
{
	struct gm_pl_dev *d;
	char name[256] = "unknown";
	size_t total = 0;
	gm_cu_device cud = ordinal;

	if (ordinal < 0 || ordinal >= GM_PL_MAX_DEVICES)
		return NULL;
	d = &gm__pl.dev[ordinal];
	if (atomic_load_explicit(&d->ready, memory_order_acquire))
		return d;

	pthread_mutex_lock(&setup_lock);
	if (atomic_load_explicit(&d->ready, memory_order_relaxed))
		goto out;
	gm__pl_guard_enter();
	if (gm__pl_cu.device_get)
		gm__pl_cu.device_get(&cud, ordinal);
	if (gm__pl_cu.device_name)
		gm__pl_cu.device_name(name, (int)sizeof(name), cud);
	if (!gm__pl_cu.device_total_mem ||
	    gm__pl_cu.device_total_mem(&total, cud) != GM_CU_SUCCESS) {
		gm__pl_guard_leave();
		pthread_mutex_unlock(&setup_lock);
		return NULL;
	}
	gm_pl_dev_setup(d, &gm__pl.opts, ordinal, name,
			pci_product_id(cud), total);
	gm__pl_guard_leave();
	atomic_store_explicit(&d->ready, true, memory_order_release);
	gm_pl_reporter_start();
out:
	pthread_mutex_unlock(&setup_lock);
	return d;
}

/* Add size to d's reserved bytes unless that passes the cap; true when
 * charged. A compare-and-swap loop: the counter never holds more than
 * the cap, not even for an instant (no add that is undone later, which
 * other threads would see), and a size near 2^64 cannot wrap it. Every
 * value it takes is a candidate for the peak, so the peak is the true
 * high-water mark. */
static bool reserve_try(struct gm_pl_dev *d, uint64_t size)
{
	uint64_t cur = atomic_load_explicit(&d->reserved,
					    memory_order_relaxed);

	do {
		if (size > d->cap || cur > d->cap - size)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(
			&d->reserved, &cur, cur + size, memory_order_relaxed,
			memory_order_relaxed));
	max_update(&d->peak_reserved, cur + size);
	return true;
}

/* An allocation was asked for on d: the process and d get reported. */
static void mark_active(struct gm_pl_dev *d)
{
	if (!atomic_load_explicit(&d->active, memory_order_relaxed))
		atomic_store_explicit(&d->active, true, memory_order_relaxed);
	if (!atomic_load_explicit(&gm__pl.used, memory_order_relaxed))
		atomic_store_explicit(&gm__pl.used, true, memory_order_relaxed);
}

void gm_pl_note_cap_oom(struct gm_pl_dev *d, uint64_t size)
{
	mark_active(d);
	atomic_fetch_add_explicit(d->refuse ? &d->oom_undersized :
				  &d->oom_cap, 1, memory_order_relaxed);
	atomic_store_explicit(&d->last_refused, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
	gm_pl_oom_say(d, size, d->refuse ? GM_PL_OOM_UNDERSIZED :
		      d->bad_opts ? GM_PL_OOM_UNREADABLE : GM_PL_OOM_CAP);
}

/* The cap settings could not be read (said once at start-up, with why;
 * the out-of-memory line names the setting again): refuse. */
static bool refuse_bad_opts(struct gm_pl_dev *d)
{
	return d->bad_opts;
}

int gm_pl_charge(struct gm_pl_dev *d, uint64_t size, enum gm_pl_kind kind)
{
	uint64_t now;

	mark_active(d);
	if (d->refuse || refuse_bad_opts(d)) {
		gm_pl_note_cap_oom(d, size);
		return GM_ELIMIT;
	}
	if (!reserve_try(d, size) &&
	    !(gm__pl.release_cached && gm__pl.release_cached(d) &&
	      reserve_try(d, size))) {
		gm_pl_note_cap_oom(d, size);
		return GM_ELIMIT;
	}
	/* What the driver maps for these calls is both reserved and
	 * allocated: there is no pool between the two. */
	now = atomic_fetch_add_explicit(&d->allocated, size,
					memory_order_relaxed) + size;
	max_update(&d->peak_allocated, now);
	max_update(&d->peak_request, size);
	atomic_fetch_add_explicit(&d->by_kind[kind], size,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&d->n_alloc, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
	return 0;
}

int gm_pl_recharge(struct gm_pl_dev *d, uint64_t from, uint64_t to,
		   enum gm_pl_kind kind)
{
	uint64_t now;

	if (to > from) {
		if (!reserve_try(d, to - from))
			return GM_ELIMIT;
		now = atomic_fetch_add_explicit(&d->allocated, to - from,
						memory_order_relaxed) + to - from;
		max_update(&d->peak_allocated, now);
		atomic_fetch_add_explicit(&d->by_kind[kind], to - from,
					  memory_order_relaxed);
	} else if (to < from) {
		atomic_fetch_sub_explicit(&d->reserved, from - to,
					  memory_order_relaxed);
		atomic_fetch_sub_explicit(&d->allocated, from - to,
					  memory_order_relaxed);
		atomic_fetch_sub_explicit(&d->by_kind[kind], from - to,
					  memory_order_relaxed);
	}
	max_update(&d->peak_request, to);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
	return 0;
}

int gm_pl_reserve(struct gm_pl_dev *d, uint64_t size)
{
	mark_active(d);
	if (d->refuse || refuse_bad_opts(d) || !reserve_try(d, size))
		return GM_ELIMIT;
	atomic_fetch_add_explicit(&d->by_kind[GM_PL_KIND_POOL], size,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
	return 0;
}

void gm_pl_unreserve(struct gm_pl_dev *d, uint64_t size)
{
	atomic_fetch_sub_explicit(&d->reserved, size, memory_order_relaxed);
	atomic_fetch_sub_explicit(&d->by_kind[GM_PL_KIND_POOL], size,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
}

void gm_pl_use(struct gm_pl_dev *d, uint64_t size, uint64_t requested)
{
	uint64_t now = atomic_fetch_add_explicit(&d->allocated, size,
						 memory_order_relaxed) + size;

	mark_active(d);
	max_update(&d->peak_allocated, now);
	max_update(&d->peak_request, requested);
	atomic_fetch_add_explicit(&d->n_alloc, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
}

void gm_pl_unuse(struct gm_pl_dev *d, uint64_t size)
{
	atomic_fetch_sub_explicit(&d->allocated, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&d->n_free, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
}

void gm_pl_uncharge(struct gm_pl_dev *d, uint64_t size, enum gm_pl_kind kind)
{
	atomic_fetch_sub_explicit(&d->reserved, size, memory_order_relaxed);
	atomic_fetch_sub_explicit(&d->allocated, size, memory_order_relaxed);
	atomic_fetch_sub_explicit(&d->by_kind[kind], size,
				  memory_order_relaxed);
	atomic_fetch_add_explicit(&d->n_free, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
}

void gm_pl_note_device_oom(struct gm_pl_dev *d, uint64_t size)
{
	mark_active(d);
	atomic_fetch_add_explicit(&d->oom_device, 1, memory_order_relaxed);
	atomic_store_explicit(&d->last_refused, size, memory_order_relaxed);
	atomic_fetch_add_explicit(&gm__pl.changes, 1, memory_order_relaxed);
	gm_pl_oom_say(d, size, GM_PL_OOM_DEVICE);
}

void gm_pl_track(struct gm_ptrmap *m, uint64_t key, struct gm_pl_dev *d,
		 uint64_t size, enum gm_pl_kind kind)
{
	if (gm_ptrmap_put(m, key, size, (uint32_t)d->ordinal,
			  (uint8_t)kind) != 0)
		/* Untracked memory can never be subtracted: give the charge
		 * back now rather than leak it from the cap. */
		gm_pl_uncharge(d, size, kind);
}

bool gm_pl_untrack(struct gm_ptrmap *m, uint64_t key,
		   struct gm_ptrmap_entry *e)
{
	return gm_ptrmap_take(m, key, e);
}

void gm_pl_release(const struct gm_ptrmap_entry *e)
{
	if (e->device < GM_PL_MAX_DEVICES)
		gm_pl_uncharge(&gm__pl.dev[e->device], e->size,
			       (enum gm_pl_kind)e->kind);
}

void gm_pl_restore(struct gm_ptrmap *m, const struct gm_ptrmap_entry *e)
{
	/* The memory was never given back and its charge never released:
	 * only the entry returns. */
	if (e->device >= GM_PL_MAX_DEVICES)
		return;
	gm_pl_track(m, e->key, &gm__pl.dev[e->device], e->size,
		    (enum gm_pl_kind)e->kind);
}

void gm_pl_clamp_info(const struct gm_pl_dev *d, uint64_t *free_bytes,
		      uint64_t *total_bytes)
{
	uint64_t used, room;

	if (d->cap == UINT64_MAX)
		return;
	if (*total_bytes > d->cap)
		*total_bytes = d->cap;
	used = atomic_load_explicit(&d->reserved, memory_order_relaxed);
	room = used >= d->cap ? 0 : d->cap - used;
	if (*free_bytes > room)
		*free_bytes = room;
}

const char *gm_pl_oom_verdict(const struct gm_pl_dev *d)
{
	bool cap = atomic_load(&d->oom_cap) > 0;
	bool dev = atomic_load(&d->oom_device) > 0;

	if (atomic_load(&d->oom_undersized) > 0)
		return "undersized";
	if (cap && dev)
		return "cap+device";
	if (cap)
		return "cap";
	if (dev)
		return "device";
	return "none";
}
