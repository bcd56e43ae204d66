/* text.c - string helpers (see text.h). */
#include "text.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

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

size_t gm_text_utf8(const char *str, uint32_t *cp)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t len;

	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, *cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, *cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, *cp = s[0] & 0x07;
	else
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		*cp = *cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && *cp < 0x800) || (len == 4 && *cp < 0x10000) ||
	    (*cp >= 0xd800 && *cp <= 0xdfff) || *cp > 0x10ffff)
		return 0;
	return len;
}

bool gm_text_is_control(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f);
}

void gm_text_escape(char *buf, size_t len, const char *s)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t at = 0;

	while (*p) {
		char esc[8];
		uint32_t cp;
		size_t n = gm_text_utf8((const char *)p, &cp), w;

		if (n == 0)
			w = (size_t)snprintf(esc, sizeof(esc), "\\x%02x", *p);
		else if (cp == '\n')
			w = (size_t)snprintf(esc, sizeof(esc), "\\n");
		else if (cp == '\r')
			w = (size_t)snprintf(esc, sizeof(esc), "\\r");
		else if (cp == '\t')
			w = (size_t)snprintf(esc, sizeof(esc), "\\t");
		else if (gm_text_is_control(cp))
			w = (size_t)snprintf(esc, sizeof(esc),
					     cp < 0x80 ? "\\x%02x" : "\\u%04x",
					     (unsigned)cp);
		else
			w = 0;
		if (at + (w ? w : n) >= len)
			break;
		if (w)
			memcpy(buf + at, esc, w);
		else
			memcpy(buf + at, p, n);
		at += w ? w : n;
		p += n ? n : 1;
	}
	buf[len ? (at < len ? at : len - 1) : 0] = '\0';
}


bool gm_text_suggest_list(const char *word, const char *const *names,
			  size_t n, char *buf, size_t len)
{
	const char *near = gm_text_suggest(word, names, n);
	size_t used = 0, wl = strlen(word);

	buf[0] = '\0';
	if (near) {
		snprintf(buf, len, "'%s'", near);
		return true;
	}
	for (size_t i = 0; wl >= 2 && i < n && used < len; i++) {
		if (strncasecmp(word, names[i], wl))
			continue;
		used += (size_t)snprintf(buf + used, len - used, "%s'%s'",
					 used ? " or " : "", names[i]);
	}
	return used > 0 && used < len;
}
