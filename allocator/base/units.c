/* units.c - size parsing and printing (see units.h). */
#include "units.h"

#include "error.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

struct unit {
	const char *suffix;
	double scale;
	double claimed; /* in a claimed card capacity */
};

/* Longest suffixes first so that "GiB" is not read as "G". */
static const struct unit units[] = {
	{"KiB", 1024.0, 1024.0},
	{"MiB", 1048576.0, 1048576.0},
	{"GiB", 1073741824.0, 1073741824.0},
	{"TiB", 1099511627776.0, 1099511627776.0},
	{"kB", 1e3, 1024.0},
	{"KB", 1e3, 1024.0},
	{"MB", 1e6, 1048576.0},
	{"GB", 1e9, 1073741824.0},
	{"TB", 1e12, 1099511627776.0},
	{"K", 1024.0, 1024.0},
	{"M", 1048576.0, 1048576.0},
	{"G", 1073741824.0, 1073741824.0},
	{"T", 1099511627776.0, 1099511627776.0},
	{"B", 1.0, 1.0},
	{"", 1.0, 1.0},
};

static int scale_of(const char *suffix, bool claimed, double *scale)
{
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
		if (strcmp(suffix, units[i].suffix) == 0) {
			*scale = claimed ? units[i].claimed : units[i].scale;
			return 0;
		}
	}
	return GM_EINVAL;
}

/* Read a non-negative decimal number; end points past it. */
static int number_parse(const char *text, double *value, char **end)
{
	if (!text || !(isdigit((unsigned char)text[0]) || text[0] == '.'))
		return GM_EINVAL;
	errno = 0;
	*value = strtod(text, end);
	if (*end == text || errno == ERANGE || !isfinite(*value))
		return GM_EINVAL;
	return 0;
}

static int size_parse(const char *text, bool claimed, uint64_t *bytes)
{
	double value, scale;
	char *end;

	if (text && text[0] == '-')
		return GM_ERANGE;
	if (number_parse(text, &value, &end) != 0)
		return GM_EINVAL;
	while (*end == ' ')
		end++;
	if (scale_of(end, claimed, &scale) != 0)
		return GM_EINVAL;
	value *= scale;
	if (value >= 18446744073709551616.0)
		return GM_ERANGE;
	*bytes = (uint64_t)value;
	return 0;
}

int gm_size_parse(const char *text, uint64_t *bytes)
{
	return size_parse(text, false, bytes);
}

int gm_claimed_size_parse(const char *text, uint64_t *bytes)
{
	return size_parse(text, true, bytes);
}

int gm_size_or_fraction_parse(const char *text, uint64_t *bytes,
			      double *fraction)
{
	double value;
	char *end;

	*bytes = 0;
	*fraction = 0;
	if (text && text[0] == '-')
		return GM_ERANGE;
	if (number_parse(text, &value, &end) != 0)
		return GM_EINVAL;
	if (*end != '\0' || strchr(text, '.') == NULL)
		return gm_size_parse(text, bytes);
	if (value <= 0 || value > 1)
		return GM_ERANGE;
	*fraction = value;
	return 0;
}

double gm_gib(uint64_t bytes)
{
	return (double)bytes / (double)GM_GiB;
}

char *gm_size_format(char *buf, size_t len, uint64_t bytes)
{
	static const char *names[] = {"KiB", "MiB", "GiB", "TiB", "PiB"};
	double v = (double)bytes;
	int i = -1;

	if (bytes < 1024) {
		snprintf(buf, len, "%llu B", (unsigned long long)bytes);
		return buf;
	}
	while (v >= 1024.0 && i < 4) {
		v /= 1024.0;
		i++;
	}
	snprintf(buf, len, "%.2f %s", v, names[i]);
	return buf;
}
