/*
 * options.h - the preload library's settings, read from the GPUMEM_*
 * environment variables (options.c).
 *
 * Read once, in the library's constructor, from the environment block the
 * process started with; nothing here allocates host memory (strings are
 * copied into fixed buffers) so it is safe before main(). Sizes are bytes.
 * Errors: gm_pl_opts_parse() never fails; a value it cannot read is
 * ignored with one warning on stderr naming the variable.
 */
#ifndef GM_PL_OPTIONS_H
#define GM_PL_OPTIONS_H

#include <stdbool.h>
#include <stdint.h>

enum gm_pl_mode {
	GM_PL_MODE_LIMIT, /* pass through, account, cap */
	GM_PL_MODE_CACHE, /* serve from the allocator core's pool */
};

#define GM_PL_PATH_MAX 4096

struct gm_pl_opts {
	enum gm_pl_mode mode;
	double fraction;       /* GPUMEM_FRACTION in (0, 1]; 0 = unset */
	uint64_t limit;        /* GPUMEM_LIMIT in bytes; 0 = unset */
	uint64_t claimed;      /* GPUMEM_CLAIMED in bytes; 0 = catalog */
	bool fail_undersized;  /* GPUMEM_ON_UNDERSIZED=fail */
	long rank;             /* RANK, LOCAL_RANK, ...; -1 = none */
	char report[GM_PL_PATH_MAX];     /* GPUMEM_REPORT; "" = none */
	char prometheus[GM_PL_PATH_MAX]; /* GPUMEM_PROMETHEUS; "" = none */
};

/*
 * Fill opts from env (a NULL-terminated "NAME=value" array such as
 * environ; NULL reads as empty). Also sets the log level from GPUMEM_LOG.
 */
void gm_pl_opts_parse(char *const *env, struct gm_pl_opts *opts);

/*
 * Expand a report path template: "%p" the process id, "%r" the rank
 * ("none-<pid>" when there is none, so a process without a rank never
 * takes a rank's file), "%%" a percent sign. Returns 0, or GM_ERANGE
 * when the result does not fit in len bytes.
 */
int gm_pl_path_expand(char *out, unsigned len, const char *tmpl, long pid,
		      long rank);

#endif
