/*
 * preload.c - libgpumem-preload.so: start-up, the driver, fork, exit.
 *
 * Start-up (gm__pl_start, exactly once, from the constructor or from the
 * first intercepted call, whichever comes first: glibc runs the
 * constructors of the program's own libraries before a preloaded one's,
 * and those may already call the driver) does only what is safe before
 * main(): find the real dlsym (hooks_dl.c needs it at once), read the
 * GPUMEM_* variables, make the pointer maps and register fork handlers.
 * The driver is opened on the first intercepted call (gm__pl_init,
 * once); a device is set up on its first use (account.c). No CUDA call
 * is made at exit: the destructor only writes the reports from host-side
 * counters.
 *
 * Fork: the child inherits the parent's counters but none of its device
 * memory and no CUDA context, so it starts from zero, and its reporting
 * thread (threads do not survive fork) is started again if it uses a
 * device. The pointer maps and the device set-up are locked around fork
 * so the child never sees one half-updated, nor a lock held by a thread
 * it does not have.
 */
#include "account.h"
#include "error.h"
#include "hooks.h"
#include "log.h"
#include "report.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static int init_rc = GM_ENODEV;

static void before_fork(void);
static void after_fork_parent(void);
static void after_fork_child(void);

static void start(void)
{
	if (gm__pl_resolve_dl() != 0)
		gm_warn("cannot find the C library's dlsym; dlsym lookups "
			"will fail");
	/* environ is set before any constructor runs. */
	gm_pl_opts_parse(environ, &gm__pl.opts);
	gm_ptrmap_init(&gm__pl.ptrs);
	gm_ptrmap_init(&gm__pl.handles);
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

void gm__pl_start(void)
{
	pthread_once(&start_once, start);
}

/* Open the driver: $GPUMEM_LIBCUDA, else (or when that cannot be opened)
 * libcuda.so.1; resolve the real functions behind the hooks. */
static void open_driver(void)
{
	const char *path = getenv("GPUMEM_LIBCUDA");
	struct gm_diag diag;

	gm__pl_guard_enter();
	init_rc = gm_cu_open(&gm__pl_cu, NULL, &diag);
	if (init_rc != 0 && path && *path) {
		/* A program linked to libcuda has it loaded whatever
		 * GPUMEM_LIBCUDA says: cap through the one it uses. */
		gm_warn("%s (GPUMEM_LIBCUDA); using libcuda.so.1", diag.msg);
		init_rc = gm_cu_open(&gm__pl_cu, "libcuda.so.1", &diag);
	}
	if (init_rc == 0) {
		for (int i = 0; i < GM_PL_N_HOOKS; i++) {
			void *fn;
			if (__atomic_load_n(&gm__pl_real[i], __ATOMIC_ACQUIRE))
				continue;
			fn = gm__pl_real_dlsym(gm__pl_cu.lib,
					       gm__pl_hook_name[i]);
			if (fn == gm__pl_hook_fn[i])
				continue;
			__atomic_store_n(&gm__pl_real[i], fn,
					 __ATOMIC_RELEASE);
		}
	} else {
		gm_warn("%s; no CUDA driver: nothing is capped", diag.msg);
	}
	gm__pl_guard_leave();
}

int gm__pl_init(void)
{
	gm__pl_start();
	if (gm__pl_resolve_dl() != 0)
		return GM_ENOTFOUND;
	pthread_once(&init_once, open_driver);
	return init_rc;
}

/* A device set-up in progress finishes before the fork (gm_pl_setup_lock
 * is taken first: the set-up never takes the others). */
static void before_fork(void)
{
	gm_pl_setup_lock(true);
	gm_ptrmap_lock_all(&gm__pl.ptrs);
	gm_ptrmap_lock_all(&gm__pl.handles);
}

static void after_fork_parent(void)
{
	gm_ptrmap_unlock_all(&gm__pl.handles);
	gm_ptrmap_unlock_all(&gm__pl.ptrs);
	gm_pl_setup_lock(false);
}

static void after_fork_child(void)
{
	gm_pl_setup_lock(false);
	gm_ptrmap_reset(&gm__pl.ptrs);
	gm_ptrmap_reset(&gm__pl.handles);
	for (int i = 0; i < GM_PL_MAX_DEVICES; i++) {
		struct gm_pl_dev *d = &gm__pl.dev[i];
		size_t first = offsetof(struct gm_pl_dev, reserved);
		/* Keep what describes the card, zero the counters. */
		memset((char *)d + first, 0, sizeof(*d) - first);
	}
	atomic_store(&gm__pl.used, false);
	atomic_store(&gm__pl.changes, 0);
	gm_pl_reporter_child();
}

__attribute__((constructor)) static void gm_pl_start(void)
{
	gm__pl_start();
}

__attribute__((destructor)) static void gm_pl_stop(void)
{
	gm_pl_reporter_exit();
}
