/* log.c - leveled messages to stderr (see log.h). */
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

static enum gm_log_level current = GM_LOG_WARN;
static char prefix[64] = "gpumem";

static const char *const names[] = {"error", "warn", "info", "debug"};

bool gm_log_init(const char *value)
{
	static bool warned;

	if (!value || !*value)
		return true;
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(value, names[i]) == 0) {
			current = (enum gm_log_level)i;
			return true;
		}
	}
	if (!warned)
		gm_warn("GPUMEM_LOG=%s is not one of error, warn, info, "
			"debug; using warn",
			value);
	warned = true;
	return false;
}

const char *gm_log_level_name(enum gm_log_level level)
{
	return (unsigned)level < 4 ? names[level] : "warn";
}

void gm_log_set_prefix(const char *p)
{
	snprintf(prefix, sizeof(prefix), "%s", p ? p : "gpumem");
}

void gm_log_set_level(enum gm_log_level level)
{
	current = level;
}

enum gm_log_level gm_log_level(void)
{
	return current;
}

void gm_log(enum gm_log_level level, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	int n;

	if (level > current)
		return;
	n = snprintf(buf, sizeof(buf), "%s: %s", prefix,
		     level == GM_LOG_WARN ? "warning: " :
		     level == GM_LOG_ERROR ? "error: " : "");
	va_start(ap, fmt);
	vsnprintf(buf + n, sizeof(buf) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	n = (int)strlen(buf);
	buf[n] = '\n';
	/* One write(2) so concurrent messages do not interleave. */
	if (write(STDERR_FILENO, buf, (size_t)n + 1) < 0)
		return;
}
