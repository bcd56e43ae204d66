/*
 * text.h - small string helpers shared by every component (text.c).
 */
#ifndef GM_TEXT_H
#define GM_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Edit distance (Levenshtein, case-insensitive) between a and b, capped at
 * 255 (strings longer than 255 bytes compare as far apart).
 */
unsigned gm_text_distance(const char *a, const char *b);

/*
 * The candidate closest to word by gm_text_distance, or NULL when none is
 * within max(2, strlen(word) / 3) edits. Used for "did you mean" hints.
 */
const char *gm_text_suggest(const char *word, const char *const *candidates,
			    size_t n);

/*
 * A "did you mean" hint for word among names[0..n): the closest by edit
 * distance (gm_text_suggest), else every name that word is a prefix of
 * ("micro_batch" -> 'micro_batch_size'; "bf16" -> 'bf16-mixed' or
 * 'bf16-true'; "--glob" -> '--global-batch'). Writes "'a'" or "'a' or
 * 'b'" into buf; false if none. Spec keys and values, command-line
 * options and subcommands all use it.
 */
bool gm_text_suggest_list(const char *word, const char *const *names,
			  size_t n, char *buf, size_t len);

/* Copy src into dst of size len, always NUL-terminated (truncates). */
void gm_text_copy(char *dst, size_t len, const char *src);

/* The length of the UTF-8 character at s (NUL-terminated), 0 when the
 * bytes there are not UTF-8; *cp gets its code point. */
size_t gm_text_utf8(const char *s, uint32_t *cp);

/* A code point a terminal may act on: C0 and C1 controls and DEL. */
bool gm_text_is_control(uint32_t cp);

/*
 * s for a terminal, a table cell or a message, written into buf (at most
 * len - 1 bytes, cut at a whole character): control characters (C0, DEL,
 * C1: ESC starts a terminal's escape sequences) as \\n, \\r, \\t, \\xHH
 * or \\u00HH, bytes that are not UTF-8 as \\xHH; everything else as it
 * is. len must be at least 1.
 */
void gm_text_escape(char *buf, size_t len, const char *s);

#endif
