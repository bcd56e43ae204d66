/*
 * spec_excerpt.c - the source line under a "file:line:column:" message,
 * with a caret at the column, as netplan prints it (canonical/netplan
 * src/error.c at 268d464c, write_error_marker).
 *
 * Errors: 0 or GM_ENOTFOUND (no position in the message, or no such line).
 */
#include "spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"

/* The widest excerpt: longer lines are cut (with "..."). */
#define GM_EXCERPT_MAX 160

/* Read line number `line` (1-based) of path into out; 0 or -1. */
static int read_line(const char *path, unsigned long line, char *out,
		     size_t len)
{
	FILE *f = fopen(path, "rb");
	unsigned long n = 1;
	size_t used = 0;
	int ch;

	if (!f)
		return -1;
	while (n < line && (ch = getc(f)) != EOF) {
		if (ch == '\n')
			n++;
	}
	while (n == line && (ch = getc(f)) != EOF && ch != '\n' &&
	       used + 1 < len) {
		if ((ch < 0x20 && ch != '\t' && ch != '\r') || ch == 0x7f)
			ch = '?'; /* keep the terminal sane */
		out[used++] = (char)ch;
	}
	out[used] = '\0';
	fclose(f);
	if (n != line)
		return -1;
	if (used && out[used - 1] == '\r')
		out[--used] = '\0';
	return 0;
}

/*
 * Write "  TEXT\n  ^" into buf: the caret is preceded by one pad per
 * character before column (a tab where the text has one, so it lines up).
 */
static void format_excerpt(const char *text, unsigned long col, char *buf,
			   size_t len)
{
	char pad[GM_EXCERPT_MAX + 8];
	size_t p = 0, i = 0;
	unsigned long c = 1;

	while (text[i] && c < col && p < GM_EXCERPT_MAX) {
		pad[p++] = text[i] == '\t' ? '\t' : ' ';
		i++;
		while (((unsigned char)text[i] & 0xc0) == 0x80)
			i++;
		c++;
	}
	pad[p] = '\0';
	snprintf(buf, len, "  %s%s\n  %s^", text,
		 strlen(text) >= GM_EXCERPT_MAX ? "..." : "", pad);
}

int gm_spec_excerpt(const char *path, const char *msg, char *buf, size_t len)
{
	char text[GM_EXCERPT_MAX + 1];
	size_t n = strlen(path);
	unsigned long line, col;
	char *end;

	if (len)
		buf[0] = '\0';
	if (!len || strncmp(msg, path, n) || msg[n] != ':')
		return GM_ENOTFOUND;
	line = strtoul(msg + n + 1, &end, 10);
	if (*end != ':' || !line)
		return GM_ENOTFOUND;
	col = strtoul(end + 1, &end, 10);
	if (*end != ':' || !col)
		return GM_ENOTFOUND;
	if (read_line(path, line, text, sizeof(text)))
		return GM_ENOTFOUND;
	format_excerpt(text, col, buf, len);
	return 0;
}
