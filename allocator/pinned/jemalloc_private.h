/*
 * jemalloc_private.h - gpumem's own copy of jemalloc, invisible to the
 * program it runs in (defined in jemalloc_private.c).
 *
 * Debian's libjemalloc exports malloc and free unprefixed, so linking it
 * into the preload library would replace the host program's allocator.
 * The build instead copies libjemalloc_pic.a with every public name
 * renamed to gm_je_* (je.syms, make_private_jemalloc.sh) and a shared
 * library linking it hides those names (-Wl,--exclude-libs). Nothing
 * here changes what malloc() means to the program, and the program's
 * MALLOC_CONF and /etc/malloc.conf do not configure this copy: its
 * options are fixed in jemalloc_private.c.
 *
 * Memory here is gpumem's bookkeeping (range maps, arena records), from
 * one dedicated arena with jemalloc's default (mmap) extent hooks.
 * Units: bytes. Errors: gm__meta_* return NULL on failure;
 * gm__je_meta_arena() returns 0 or GM_ENOMEM.
 */
#ifndef GM_JEMALLOC_PRIVATE_H
#define GM_JEMALLOC_PRIVATE_H

#include <stddef.h>
#include <stdbool.h>

/* Types and flag macros only; the functions are the renamed ones below. */
#include <jemalloc/jemalloc.h>

void *gm_je_mallocx(size_t size, int flags);
void gm_je_dallocx(void *p, int flags);
void gm_je_sdallocx(void *p, size_t size, int flags);
size_t gm_je_sallocx(const void *p, int flags);
size_t gm_je_nallocx(size_t size, int flags);
int gm_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp,
		  size_t newlen);

/*
 * The arena index for gpumem's bookkeeping, created on first use
 * (thread-safe). Returns 0 and sets *ind, or GM_ENOMEM.
 */
int gm__je_meta_arena(unsigned *ind);

/* Zeroed bookkeeping memory of size bytes from the metadata arena. */
void *gm__meta_alloc(size_t size);

/* Give back what gm__meta_alloc() returned; NULL is ignored. */
void gm__meta_free(void *p);

#endif
