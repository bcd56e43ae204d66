/* text.c - string helpers (see text.h). */
#include "text.h"

#include <ctype.h>
#include <string.h>

#define GM_TEXT_MAX 255

unsigned gm_text_distance(const char *a, const char *b)
{
	unsigned row[GM_TEXT_MAX + 1];
	size_t la = strlen(a), lb = strlen(b);

	if (la > GM_TEXT_MAX || lb > GM_TEXT_MAX)
		return GM_TEXT_MAX;
	for (size_t j = 0; j <= lb; j++)
		row[j] = (unsigned)j;
	for (size_t i = 1; i <= la; i++) {
		unsigned diag = row[0];
		row[0] = (unsigned)i;
		for (size_t j = 1; j <= lb; j++) {
			unsigned up = row[j];
			int same = tolower((unsigned char)a[i - 1]) ==
				   tolower((unsigned char)b[j - 1]);
			unsigned best = diag + (same ? 0 : 1);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[lb];
}

const char *gm_text_suggest(const char *word, const char *const *candidates,
			    size_t n)
{
	size_t limit = strlen(word) / 3;
	const char *best = NULL;
	unsigned best_d = GM_TEXT_MAX;

	if (limit < 2)
		limit = 2;
	for (size_t i = 0; i < n; i++) {
		unsigned d = gm_text_distance(word, candidates[i]);
		if (d < best_d) {
			best_d = d;
			best = candidates[i];
		}
	}
	return best_d <= limit ? best : NULL;
}

void gm_text_copy(char *dst, size_t len, const char *src)
{
	size_t n;

	if (len == 0)
		return;
	n = strlen(src);
	if (n >= len)
		n = len - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}
