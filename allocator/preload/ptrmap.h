/*
 * ptrmap.h - device pointer (or VMM handle) -> {size, device, kind}, for
 * the preload library's accounting (ptrmap.c).
 *
 * Sharded open-addressing hash tables whose storage comes from mmap, never
 * from the application's malloc, so the hooks cannot recurse into an
 * interposed allocator. Each shard has its own mutex; no lock is held
 * across a driver call. Sizes are bytes.
 * Errors: gm_ptrmap_put() returns 0 or GM_ENOMEM (mmap failed; the entry
 * is then not tracked and its free will not be subtracted).
 */
#ifndef GM_PL_PTRMAP_H
#define GM_PL_PTRMAP_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GM_PTRMAP_SHARDS 64

struct gm_ptrmap_entry {
	uint64_t key;
	uint64_t size;
	uint32_t device;
	uint8_t kind;  /* caller's tag (enum gm_pl_kind) */
	uint8_t state; /* 0 empty, 1 used, 2 deleted */
};

struct gm_ptrmap_shard {
	pthread_mutex_t lock;
	struct gm_ptrmap_entry *slots;
	size_t cap;  /* power of two, or 0 */
	size_t used; /* state 1 */
	size_t dead; /* state 2 */
} __attribute__((aligned(64)));

struct gm_ptrmap {
	struct gm_ptrmap_shard shard[GM_PTRMAP_SHARDS];
};

void gm_ptrmap_init(struct gm_ptrmap *m);

/* Release all storage (after fork in the child, or in tests). */
void gm_ptrmap_reset(struct gm_ptrmap *m);

/* Insert or replace key. */
int gm_ptrmap_put(struct gm_ptrmap *m, uint64_t key, uint64_t size,
		  uint32_t device, uint8_t kind);

/* Remove key and return its entry in *out; false when it is not there. */
bool gm_ptrmap_take(struct gm_ptrmap *m, uint64_t key,
		    struct gm_ptrmap_entry *out);

/* Number of entries (a snapshot; takes every shard lock in turn). */
size_t gm_ptrmap_count(struct gm_ptrmap *m);

/* fork handlers: lock every shard before fork, unlock after. */
void gm_ptrmap_lock_all(struct gm_ptrmap *m);
void gm_ptrmap_unlock_all(struct gm_ptrmap *m);

#endif
