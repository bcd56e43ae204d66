/*
 * log.h - messages to stderr, prefixed "gpumem: " or the prefix set
 * (log.c).
 *
 * The level comes from GPUMEM_LOG (error, warn, info, debug; default warn)
 * read once by gm_log_init(). Nothing here allocates host memory, so it is
 * safe inside the preload library's hooks; messages longer than 1 KiB are
 * cut. Never writes to stdout.
 */
#ifndef GM_LOG_H
#define GM_LOG_H

#include <stdbool.h>

enum gm_log_level {
	GM_LOG_ERROR = 0,
	GM_LOG_WARN = 1,
	GM_LOG_INFO = 2,
	GM_LOG_DEBUG = 3,
};

/* Read GPUMEM_LOG (value may be NULL: the default, warn). A value that
 * is not a level is warned about, once per process, and the level stays
 * warn. Returns false for such a value. */
bool gm_log_init(const char *value);

/* "error", "warn", "info" or "debug". */
const char *gm_log_level_name(enum gm_log_level level);

/* What messages start with (at most 63 bytes, copied): "gpumem" by
 * default; the CLI sets "gpumem plan" for its subcommand, so a warning
 * reads "gpumem plan: warning: ...". NULL: the default. */
void gm_log_set_prefix(const char *prefix);

/* Set the level directly (tests, --verbose). */
void gm_log_set_level(enum gm_log_level level);

enum gm_log_level gm_log_level(void);

void gm_log(enum gm_log_level level, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

#define gm_error(...) gm_log(GM_LOG_ERROR, __VA_ARGS__)
#define gm_warn(...) gm_log(GM_LOG_WARN, __VA_ARGS__)
#define gm_info(...) gm_log(GM_LOG_INFO, __VA_ARGS__)
#define gm_debug(...) gm_log(GM_LOG_DEBUG, __VA_ARGS__)

#endif
