/* jemalloc_private.c - the private jemalloc copy (see jemalloc_private.h). */
#include "jemalloc_private.h"

#include "error.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/*
 * Options of the private copy. jemalloc reads conf_2_conf_harder last, so
 * these win over anything else it reads.
 * - narenas:1, tcache:false: gpumem allocates only from explicit arenas
 *   with MALLOCX_TCACHE_NONE; no automatic arenas or thread caches needed.
 * - retain:true (Linux default, stated): extents the hooks refuse to give
 *   back stay "retained" for reuse, and arenas grow in geometric slabs.
 * - background_thread:false: no thread of ours inside the host program.
 */
const char *gm_je_malloc_conf_2_conf_harder =
	"narenas:1,tcache:false,retain:true,"
	"background_thread:false,percpu_arena:disabled";

char *gm_je_secure_getenv(const char *name);
ssize_t gm_je_readlink(const char *path, char *buf, size_t len);

/*
 * jemalloc's reads of MALLOC_CONF land here (the archive's secure_getenv
 * reference is renamed): the program's MALLOC_CONF is meant for the
 * program's allocator, so the private copy does not see it.
 */
char *gm_je_secure_getenv(const char *name)
{
	if (strcmp(name, "MALLOC_CONF") == 0)
		return NULL;
	return secure_getenv(name);
}

/* Likewise for the /etc/malloc.conf symbolic link. */
ssize_t gm_je_readlink(const char *path, char *buf, size_t len)
{
	if (strcmp(path, "/etc/malloc.conf") == 0) {
		errno = ENOENT;
		return -1;
	}
	return readlink(path, buf, len);
}

static pthread_once_t gm__meta_once = PTHREAD_ONCE_INIT;
static unsigned gm__meta_ind;
static bool gm__meta_ok;

static void gm__meta_create(void)
{
	size_t len = sizeof(gm__meta_ind);

	gm__meta_ok = gm_je_mallctl("arenas.create", &gm__meta_ind, &len,
				    NULL, 0) == 0;
}

int gm__je_meta_arena(unsigned *ind)
{
	pthread_once(&gm__meta_once, gm__meta_create);
	if (!gm__meta_ok)
		return GM_ENOMEM;
	*ind = gm__meta_ind;
	return 0;
}

void *gm__meta_alloc(size_t size)
{
	unsigned ind;

	if (gm__je_meta_arena(&ind) != 0)
		return NULL;
	return gm_je_mallocx(size ? size : 1, MALLOCX_ARENA(ind) |
			     MALLOCX_TCACHE_NONE | MALLOCX_ZERO);
}

void gm__meta_free(void *p)
{
	if (p)
		gm_je_dallocx(p, MALLOCX_TCACHE_NONE);
}
