/* options.c - GPUMEM_* variables (see options.h). */
#include "options.h"

#include "error.h"
#include "log.h"
#include "units.h"

#include <stdbool.h>
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

int gm_pl_fraction_parse(const char *v, uint64_t *num, uint64_t *den)
{
	uint64_t m = 0, d = 1;
	int digits = 0, scale = 0;
	bool point = false, any = false;
	long e = 0;

	if (!v)
		return GM_EINVAL;
	for (; *v; v++) {
		if (*v == '.' && !point) {
			point = true;
			continue;
		}
		if (*v < '0' || *v > '9')
			break;
		any = true;
		if (m == 0 && *v == '0' && !point)
			continue; /* leading zeros */
		/* Digits past the 19th after the point are dropped (below
		 * 1e-19 of the value); an integer part that long is > 1. */
		if (digits < 19) {
			m = m * 10 + (uint64_t)(*v - '0');
			digits += m != 0;
			scale += point;
		} else if (!point) {
			return GM_EINVAL; /* 10^19 or more */
		}
	}
	if (!any)
		return GM_EINVAL;
	if (*v == 'e' || *v == 'E') {
		const char *x = v + 1 + (v[1] == '-' || v[1] == '+');
		char *end;

		if (*x < '0' || *x > '9') /* strtol would skip spaces */
			return GM_EINVAL;
		e = strtol(v + 1, &end, 10);
		if (end == v + 1 || e < -19 || e > 19)
			return GM_EINVAL;
		v = end;
	}
	if (*v)
		return GM_EINVAL;
	scale -= (int)e;
	for (; scale < 0; scale++) {
		if (m > UINT64_MAX / 10)
			return GM_EINVAL;
		m *= 10;
	}
	for (; scale > 19; scale--)
		m /= 10;
	for (int i = 0; i < scale; i++)
		d *= 10;
	if (m == 0 || m > d)
		return GM_EINVAL;
	*num = m;
	*den = d;
	return 0;
}

/* A cap setting that cannot be read: recorded, never ignored. */
static void set_bad(struct gm_pl_opts *o, const char *name, const char *v,
		    const char *what)
{
	if (!o->bad[0])
		snprintf(o->bad, sizeof(o->bad), "%s=%s is not %s", name, v,
			 what);
}

static void parse_fraction(const char *v, struct gm_pl_opts *o)
{
	if (!v || !*v)
		return;
	if (gm_pl_fraction_parse(v, &o->frac_num, &o->frac_den) != 0)
		set_bad(o, "GPUMEM_FRACTION", v,
			"a fraction in (0, 1] such as 0.5");
}

static void parse_size(const char *v, const char *name, uint64_t *out,
		       struct gm_pl_opts *o)
{
	uint64_t b;

	if (!v || !*v)
		return;
	if (gm_size_parse(v, &b) != 0) {
		char why[256];

		if (!o->bad[0])
			snprintf(o->bad, sizeof(o->bad), "%s=%s is not a "
				 "size: %s", name, v,
				 gm_size_error(v, why, sizeof(why)));
		return;
	}
	if (b == 0) {
		set_bad(o, name, v, "a size such as 40GiB or 80GB");
		return;
	}
	if (gm_size_bare_small(v))
		gm_warn("%s=%s has no unit and is read as %s bytes (write "
			"e.g. %sGiB)", name, v, v, v);
	*out = b;
}

/* One token of PyTorch's allocator-config lexer: a separator (',', ':',
 * '[', ']') alone, or the run of other characters up to the next one
 * with white space dropped. At most GM_PL_TOKEN - 1 characters are kept
 * (long is set beyond: such a token matches no key and no value). */
#define GM_PL_TOKEN 64
struct conf_tok {
	char s[GM_PL_TOKEN];
	bool sep, is_long;
};

static bool conf_is_sep(char ch)
{
	return ch == ',' || ch == ':' || ch == '[' || ch == ']';
}

static bool conf_is_space(char ch)
{
	return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

/* The next token from *p into t; false at the end of the string. */
static bool conf_next(const char **p, struct conf_tok *t)
{
	size_t n = 0;

	t->sep = t->is_long = false;
	while (**p && conf_is_space(**p))
		(*p)++;
	if (!**p)
		return false;
	if (conf_is_sep(**p)) {
		t->s[0] = *(*p)++;
		t->s[1] = '\0';
		t->sep = true;
		return true;
	}
	for (; **p && !conf_is_sep(**p); (*p)++) {
		if (conf_is_space(**p))
			continue;
		if (n + 1 < GM_PL_TOKEN)
			t->s[n++] = **p;
		else
			t->is_long = true;
	}
	t->s[n] = '\0';
	return true;
}

static bool conf_is(const struct conf_tok *t, const char *s)
{
	return !t->is_long && strcmp(t->s, s) == 0;
}

int gm_pl_alloc_conf_parse(const char *v, bool *on, char *why, size_t len)
{
	struct conf_tok key, t;
	const char *p = v ? v : "";
	bool val = false;

	*on = false;
	while (conf_next(&p, &key)) {
		if (key.sep) {
			snprintf(why, len, "'%s' where a key was expected",
				 key.s);
			return GM_EINVAL;
		}
		if (!conf_next(&p, &t) || !conf_is(&t, ":")) {
			snprintf(why, len, "%s has no ':' and value", key.s);
			return GM_EINVAL;
		}
		if (!conf_next(&p, &t) || (t.sep && !conf_is(&t, "["))) {
			snprintf(why, len, "%s has no value", key.s);
			return GM_EINVAL;
		}
		if (conf_is(&t, "[")) {
			while (conf_next(&p, &t) && !conf_is(&t, "]"))
				;
			if (!conf_is(&t, "]")) {
				snprintf(why, len, "the list of %s has no "
					 "closing ']'", key.s);
				return GM_EINVAL;
			}
			t.s[0] = '\0'; /* a list: never True or False */
		}
		if (conf_is(&key, "expandable_segments")) {
			if (!conf_is(&t, "True") && !conf_is(&t, "False")) {
				snprintf(why, len, "expandable_segments:%s is "
					 "not True or False (PyTorch's "
					 "spelling)", t.s[0] ? t.s : "[...]");
				return GM_EINVAL;
			}
			val = conf_is(&t, "True");
		}
		if (conf_next(&p, &t) && !conf_is(&t, ",")) {
			snprintf(why, len, "'%s' after the value of %s, where "
				 "',' was expected", t.s, key.s);
			return GM_EINVAL;
		}
	}
	*on = val;
	return 0;
}

/* Cache mode: expandable_segments from PyTorch's own setting. */
static void parse_alloc_conf(char *const *env, struct gm_pl_opts *o)
{
	const char *name = "PYTORCH_CUDA_ALLOC_CONF";
	const char *v = env_get(env, name);
	char why[256];

	if (!v) {
		name = "PYTORCH_ALLOC_CONF";
		v = env_get(env, name);
	}
	if (v && gm_pl_alloc_conf_parse(v, &o->virtual_segments, why,
					sizeof(why)))
		gm_warn("%s=%s: %s; the pool uses plain segments", name, v,
			why);
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

void gm_pl_opts_caps(char *const *env, struct gm_pl_opts *o)
{
	o->bad[0] = '\0';
	parse_fraction(env_get(env, "GPUMEM_FRACTION"), o);
	parse_size(env_get(env, "GPUMEM_LIMIT"), "GPUMEM_LIMIT", &o->limit, o);
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
	gm_pl_opts_caps(env, o);
	if (o->bad[0])
		gm_error("%s: every device allocation is refused until it is "
			 "fixed", o->bad);
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
	/* Only the pool reads it: in limit mode the setting is PyTorch's. */
	if (o->mode == GM_PL_MODE_CACHE)
		parse_alloc_conf(env, o);
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
