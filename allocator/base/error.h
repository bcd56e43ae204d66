/*
 * error.h - the one error convention of gpumem (defined in error.c).
 *
 * Library functions return int: 0 on success or a negative GM_E* code.
 * Functions that can explain a failure to a person also take a
 * struct gm_diag *, filled with a one-line message (for YAML input:
 * "file:line:column: message"). Exit codes of the gpumem program follow
 * gm_exit_code(): 0 ok, 1 "no" (does not fit / card failed), 2 bad input
 * or usage, 3 CUDA or driver error.
 */
#ifndef GM_ERROR_H
#define GM_ERROR_H

#include <stddef.h>

/* XX(name, value, description) */
#define GM_ERRNO_MAP(XX)                                                   \
	XX(INVAL, 1, "invalid input")                                     \
	XX(NOMEM, 2, "out of host memory")                                \
	XX(IO, 3, "input/output error")                                   \
	XX(NOTFOUND, 4, "not found")                                      \
	XX(RANGE, 5, "value out of range")                                \
	XX(DEVICE, 6, "CUDA or driver error")                             \
	XX(DEVNOMEM, 7, "out of device memory")                           \
	XX(LIMIT, 8, "over the memory cap")                               \
	XX(NOTSUP, 9, "not supported")                                    \
	XX(NODEV, 10, "no CUDA device")                                   \
	XX(BUSY, 11, "busy")

enum {
#define GM__ERR_ENUM(name, val, desc) GM_E##name = -(val),
	GM_ERRNO_MAP(GM__ERR_ENUM)
#undef GM__ERR_ENUM
};

/* Exit codes of the gpumem program (README.md, "Exit codes"). */
enum {
	GM_EXIT_OK = 0,
	GM_EXIT_NO = 1,
	GM_EXIT_USAGE = 2,
	GM_EXIT_DEVICE = 3,
};

/* A human-readable explanation of a failure; msg is always NUL-terminated. */
struct gm_diag {
	char msg[1024];
};

/* Description of a GM_E* code ("invalid input"); never NULL. */
const char *gm_strerror(int err);

/* Symbolic name of a GM_E* code ("GM_EINVAL"); never NULL. */
const char *gm_err_name(int err);

/* The program exit code that a GM_E* code maps to. */
int gm_exit_code(int err);

/*
 * Format a message into diag (printf-style) and return err, so that
 * callers can write: return gm_diag_set(d, GM_EINVAL, "...", ...).
 * diag may be NULL, then only err is returned.
 */
int gm_diag_set(struct gm_diag *diag, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
