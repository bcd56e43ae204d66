/* options.c - GPUMEM_* variables (see options.h). */
#include "options.h"

#include "error.h"
#include "log.h"
#include "units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* The value of NAME in env, or NULL; no getenv, so env may be any block. */
static const char *env_get(char *const *env, const char *name)
{
	size_t n = strlen(name);

	for (; env && *env; env++)
		if (strncmp(*env, name, n) == 0 && (*env)[n] == '=')
			return *env + n + 1;
	return NULL;
}

static void copy_path(char *dst, const char *src, const char *name)
{
	size_t n;

	dst[0] = '\0';
	if (!src || !*src)
		return;
	n = strlen(src);
	if (n >= GM_PL_PATH_MAX) {
		gm_warn("%s is longer than %d bytes; ignored", name,
			GM_PL_PATH_MAX - 1);
		return;
	}
	memcpy(dst, src, n + 1);
}

static void parse_fraction(const char *v, struct gm_pl_opts *o)
{
	char *end;
	double f;

	if (!v || !*v)
		return;
	f = strtod(v, &end);
	if (*end || !(f > 0.0 && f <= 1.0)) {
		gm_warn("GPUMEM_FRACTION=%s is not a fraction in (0, 1]; "
			"ignored", v);
		return;
	}
	o->fraction = f;
}

static void parse_size(const char *v, const char *name, uint64_t *out)
{
	uint64_t b;

	if (!v || !*v)
		return;
	if (gm_size_parse(v, &b) != 0 || b == 0) {
		gm_warn("%s=%s is not a size such as 40GiB or 80GB; ignored",
			name, v);
		return;
	}
	*out = b;
}

/* The job's rank from the launchers' variables, first found wins. */
static long parse_rank(char *const *env)
{
	static const char *const names[] = {
		"RANK", "LOCAL_RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK",
	};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = env_get(env, names[i]);
		char *end;
		long r;

		if (!v || !*v)
			continue;
		r = strtol(v, &end, 10);
		if (!*end && r >= 0)
			return r;
	}
	return -1;
}

void gm_pl_opts_parse(char *const *env, struct gm_pl_opts *o)
{
	const char *v;

	memset(o, 0, sizeof(*o));
	gm_log_init(env_get(env, "GPUMEM_LOG"));
	o->mode = GM_PL_MODE_LIMIT;
	v = env_get(env, "GPUMEM_MODE");
	if (v && strcasecmp(v, "cache") == 0)
		o->mode = GM_PL_MODE_CACHE;
	else if (v && *v && strcasecmp(v, "limit") != 0)
		gm_warn("GPUMEM_MODE=%s is not cache or limit; using limit",
			v);
	parse_fraction(env_get(env, "GPUMEM_FRACTION"), o);
	parse_size(env_get(env, "GPUMEM_LIMIT"), "GPUMEM_LIMIT", &o->limit);
	/* a card's claimed capacity: GB = GiB (units.h) */
	v = env_get(env, "GPUMEM_CLAIMED");
	if (v && *v && (gm_claimed_size_parse(v, &o->claimed) || !o->claimed))
		gm_warn("GPUMEM_CLAIMED=%s is not a size such as 80GB; "
			"ignored", v);
	v = env_get(env, "GPUMEM_ON_UNDERSIZED");
	if (v && strcasecmp(v, "fail") == 0)
		o->fail_undersized = true;
	else if (v && *v && strcasecmp(v, "warn") != 0)
		gm_warn("GPUMEM_ON_UNDERSIZED=%s is not warn or fail; "
			"using warn", v);
	copy_path(o->report, env_get(env, "GPUMEM_REPORT"), "GPUMEM_REPORT");
	copy_path(o->prometheus, env_get(env, "GPUMEM_PROMETHEUS"),
		  "GPUMEM_PROMETHEUS");
	o->rank = parse_rank(env);
}

int gm_pl_path_expand(char *out, unsigned len, const char *tmpl, long pid,
		      long rank)
{
	unsigned n = 0;

	for (const char *s = tmpl; *s; s++) {
		char num[24];
		const char *add = num;

		if (s[0] == '%' && s[1] == 'p') {
			snprintf(num, sizeof(num), "%ld", pid);
			s++;
		} else if (s[0] == '%' && s[1] == 'r') {
			/* No rank: never a real rank's name (a launcher
			 * such as torchrun has none, its workers do). */
			if (rank < 0)
				snprintf(num, sizeof(num), "none-%ld", pid);
			else
				snprintf(num, sizeof(num), "%ld", rank);
			s++;
		} else if (s[0] == '%' && s[1] == '%') {
			add = "%";
			s++;
		} else {
			num[0] = *s;
			num[1] = '\0';
		}
		for (; *add; add++) {
			if (n + 1 >= len)
				return GM_ERANGE;
			out[n++] = *add;
		}
	}
	if (len == 0)
		return GM_ERANGE;
	out[n] = '\0';
	return 0;
}
