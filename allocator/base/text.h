/*
 * text.h - small string helpers shared by every component (text.c).
 */
#ifndef GM_TEXT_H
#define GM_TEXT_H

#include <stddef.h>

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

/* Copy src into dst of size len, always NUL-terminated (truncates). */
void gm_text_copy(char *dst, size_t len, const char *src);

#endif
