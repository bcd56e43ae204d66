/*
 * options.h - the preload library's settings, read from the GPUMEM_*
 * environment variables (options.c).
 *
 * Read once, in the library's constructor, from the environment block the
 * process started with; nothing here allocates host memory (strings are
 * copied into fixed buffers) so it is safe before main(). Sizes are bytes.
 * Errors: gm_pl_opts_parse() never fails. A cap setting it cannot read
 * (GPUMEM_FRACTION, GPUMEM_LIMIT) fails closed: opts.bad says which and
 * every device allocation is then refused (account.c), never served
 * uncapped. Any other value it cannot read is ignored with one warning
 * on stderr naming the variable.
 */
#ifndef GM_PL_OPTIONS_H
#define GM_PL_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum gm_pl_mode {
	GM_PL_MODE_LIMIT, /* pass through, account, cap */
	GM_PL_MODE_CACHE, /* serve from the allocator core's pool */
};

#define GM_PL_PATH_MAX 4096

struct gm_pl_opts {
	enum gm_pl_mode mode;
	uint64_t frac_num;     /* GPUMEM_FRACTION = frac_num / frac_den, */
	uint64_t frac_den;     /* exactly as written; den 0 = unset */
	uint64_t limit;        /* GPUMEM_LIMIT in bytes; 0 = unset */
	uint64_t claimed;      /* GPUMEM_CLAIMED in bytes; 0 = catalog */
	bool fail_undersized;  /* GPUMEM_ON_UNDERSIZED=fail */
	long rank;             /* RANK, LOCAL_RANK, ...; -1 = none */
	/* Cache mode: the pool grows virtual segments (PyTorch's
	 * expandable_segments:True in PYTORCH_CUDA_ALLOC_CONF, else in
	 * PYTORCH_ALLOC_CONF); false in limit mode. */
	bool virtual_segments;
	char report[GM_PL_PATH_MAX];     /* GPUMEM_REPORT; "" = none */
	char prometheus[GM_PL_PATH_MAX]; /* GPUMEM_PROMETHEUS; "" = none */
	char bad[512]; /* "GPUMEM_LIMIT=50% is not a size ..."; "" = ok */
};

/*
 * Fill opts from env (a NULL-terminated "NAME=value" array such as
 * environ; NULL reads as empty). Also sets the log level from GPUMEM_LOG.
 */
void gm_pl_opts_parse(char *const *env, struct gm_pl_opts *opts);

/*
 * Read only the cap settings (GPUMEM_FRACTION, GPUMEM_LIMIT) of env into
 * opts, silently: opts->bad names the first that cannot be read ("" when
 * both are fine). For `gpumem run`, which refuses to start a program
 * whose cap could not be honoured.
 */
void gm_pl_opts_caps(char *const *env, struct gm_pl_opts *opts);

/*
 * Read PyTorch's allocator setting string (PYTORCH_CUDA_ALLOC_CONF) for
 * the one key gpumem's pool honours, expandable_segments, as PyTorch's
 * parser reads it (torch 2.11: c10/core/AllocatorConfig.h ConfigTokenizer,
 * c10/cuda/CUDAAllocatorConfig.cpp parseArgs): tokens split
 * at ',', ':', '[' and ']', white space dropped everywhere; a list of
 * key:value pairs separated by ','; a value is one token or a [...]
 * list; expandable_segments takes exactly True or False (PyTorch refuses
 * any other spelling); the last occurrence wins; every other key is
 * PyTorch's and skipped. *on gets the setting (false when absent).
 * Returns 0, or GM_EINVAL with why (len bytes) saying what is wrong and
 * *on false. Allocates nothing.
 */
int gm_pl_alloc_conf_parse(const char *v, bool *on, char *why, size_t len);

/*
 * Read a fraction in (0, 1] written as a decimal ("0.29", ".5", "1",
 * "25e-2") exactly as num / den (den a power of ten, digits past the
 * 19th after the point dropped). Returns 0 or GM_EINVAL (anything else,
 * trailing characters and spaces included).
 */
int gm_pl_fraction_parse(const char *v, uint64_t *num, uint64_t *den);

/*
 * Expand a report path template: "%p" the process id, "%r" the rank
 * ("none-<pid>" when there is none, so a process without a rank never
 * takes a rank's file), "%%" a percent sign. Returns 0, or GM_ERANGE
 * when the result does not fit in len bytes.
 */
int gm_pl_path_expand(char *out, unsigned len, const char *tmpl, long pid,
		      long rank);

#endif
