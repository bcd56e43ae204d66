/*
 * units.h - sizes in bytes: parsing and printing (defined in units.c).
 *
 * GB/MB/KB/TB are decimal (10^9, ...) except in a claimed card capacity
 * (gm_claimed_size_parse); GiB/MiB/KiB/TiB are binary (2^30, ...). A bare suffix K/M/G/T (no "B") is binary, as in numfmt --from=iec.
 * A plain number is bytes. Fractions ("0.9") are a separate notion, read
 * only where the caller asks for one.
 */
#ifndef GM_UNITS_H
#define GM_UNITS_H

#include <stddef.h>
#include <stdint.h>

#define GM_KiB ((uint64_t)1 << 10)
#define GM_MiB ((uint64_t)1 << 20)
#define GM_GiB ((uint64_t)1 << 30)
#define GM_TiB ((uint64_t)1 << 40)
#define GM_GB ((uint64_t)1000000000)

/*
 * Parse a size such as "80GB", "74.5GiB", "81920MiB", "4096" into bytes
 * (rounded down to a whole byte). Returns 0, or GM_EINVAL for text that is
 * not a size, or GM_ERANGE for a size above 2^64 - 1 bytes or below zero.
 */
int gm_size_parse(const char *text, uint64_t *bytes);

/*
 * Why text is not a size for gm_size_parse: writes a short phrase such as
 * "unknown unit 'gb' (units: B, KB, ...; GB = 10^9)" or "no number" into
 * buf and returns buf. For text that parses, writes "a size".
 */
char *gm_size_error(const char *text, char *buf, size_t len);

/*
 * True when text is a number with no unit (read as bytes) and the bytes
 * are below 1 MiB: a cap given so is most likely a forgotten unit
 * ("--limit 12"), which callers warn about.
 */
int gm_size_bare_small(const char *text);

/*
 * Parse a card's claimed capacity (verify --claimed, gpumem run
 * --claimed, GPUMEM_CLAIMED, claimed= of verify --emulate): as
 * gm_size_parse, except that KB/MB/GB/TB mean what memory makers mean
 * by them on a card, 2^10/2^20/2^30/2^40: an "80 GB" A100 has 80 GiB
 * (81920 MiB, as nvidia-smi reports). Same returns.
 */
int gm_claimed_size_parse(const char *text, uint64_t *bytes);

/* How far below a claimed capacity a genuine card's total may be (the
 * driver keeps 1-2% for itself): NVML's total within GM_CLAIM_TOL_NVML of
 * it, CUDA's (cudaMemGetInfo, which also leaves out NVML's reserved
 * part) within GM_CLAIM_TOL_CUDA. gpumem verify and the preload
 * library's start-up check judge a claim with no catalog entry so. */
#define GM_CLAIM_TOL_NVML 0.01
#define GM_CLAIM_TOL_CUDA 0.02

/*
 * Parse either a fraction in (0, 1] ("0.5") or a size; *fraction is set
 * (and *bytes 0) for a fraction, *bytes (and *fraction 0) for a size.
 * Returns 0 or GM_EINVAL / GM_ERANGE.
 */
int gm_size_or_fraction_parse(const char *text, uint64_t *bytes,
			      double *fraction);

/* bytes / 2^30, for printing GiB with two decimals. */
double gm_gib(uint64_t bytes);

/*
 * Print bytes in the largest binary unit that keeps the number >= 1, with
 * two decimals ("1.50 GiB", "512 B"). Returns buf.
 */
char *gm_size_format(char *buf, size_t len, uint64_t bytes);

#endif
