/*
 * test_badinput.c - the bad-input suite of model specs: NAME.yaml in DIR
 * must fail with GM_EINVAL and exactly the message on the first line of
 * NAME.expected. An optional NAME.set holds --set arguments, one per
 * line, applied over the file. A spec that loads is then checked for
 * what is not modelled yet and for its hardware.gpu against the built-in
 * GPU catalog, as `gpumem plan` does.
 * Runs from inside DIR so that messages name "NAME.yaml".
 *
 * Usage: test-badinput DIR NAME   one case
 *        test-badinput DIR --count N
 *            checks that DIR holds exactly N cases (all of them listed in
 *            tests/badinput/meson.build) and runs them all, printing TAP.
 */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "catalog.h"
#include "error.h"
#include "spec.h"

#define MAX_CASES 256
#define MAX_SETS 8

/* Read the first line of path into buf (no newline); 0 or -1. */
static int first_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f))
		buf[0] = '\0';
	fclose(f);
	buf[strcspn(buf, "\n")] = '\0';
	return 0;
}

/* Read NAME.set (if any) into sets[]; returns how many. */
static int read_sets(const char *name, char sets[][256])
{
	char path[300];
	FILE *f;
	int n = 0;

	snprintf(path, sizeof(path), "%s.set", name);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (n < MAX_SETS && fgets(sets[n], 256, f)) {
		sets[n][strcspn(sets[n], "\n")] = '\0';
		n++;
	}
	fclose(f);
	return n;
}

/* What is not modelled yet, then hardware.gpu against the built-in
 * catalog, as `gpumem plan` does. */
static int check_gpu(const struct gm_spec *spec, struct gm_diag *diag)
{
	int rc = gm_spec_check_modelled(spec, diag);

	return rc ? rc : gm_spec_check_gpu_catalog(spec, NULL, diag);
}

/* Run one case; prints a TAP line; returns 1 if it passed. */
static int run_case(int no, const char *yaml)
{
	char name[256], path[300], want[1024], sets[MAX_SETS][256];
	const char *argv[MAX_SETS];
	struct gm_spec *spec = malloc(sizeof(*spec));
	struct gm_diag diag = {{0}};
	int n, rc, ok;

	snprintf(name, sizeof(name), "%.*s", (int)(strlen(yaml) - 5), yaml);
	snprintf(path, sizeof(path), "%s.expected", name);
	if (!spec || first_line(path, want, sizeof(want))) {
		printf("not ok %d - %s: no %s\n", no, yaml, path);
		free(spec);
		return 0;
	}
	n = read_sets(name, sets);
	for (int i = 0; i < n; i++)
		argv[i] = sets[i];
	rc = gm_spec_load(spec, yaml, argv, n, &diag);
	if (!rc)
		rc = check_gpu(spec, &diag);
	ok = rc == GM_EINVAL && !strcmp(diag.msg, want);
	printf("%s %d - %s\n", ok ? "ok" : "not ok", no, yaml);
	if (!ok)
		printf("# rc %s\n#  got: %s\n# want: %s\n", gm_err_name(rc),
		       rc ? diag.msg : "(loaded)", want);
	free(spec);
	return ok;
}

static int by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
	char *names[MAX_CASES], one[300];
	int n = 0, passed = 0, want;
	struct dirent *e;
	DIR *d;

	if (argc < 3 || chdir(argv[1])) {
		printf("Bail out! usage: test-badinput DIR NAME|--count N\n");
		return 1;
	}
	if (strcmp(argv[2], "--count")) {
		snprintf(one, sizeof(one), "%s.yaml", argv[2]);
		printf("1..1\n");
		return run_case(1, one) ? 0 : 1;
	}
	want = argc > 3 ? atoi(argv[3]) : 0;
	if (!(d = opendir(".")))
		return 1;
	while ((e = readdir(d)) && n < MAX_CASES) {
		size_t len = strlen(e->d_name);
		if (len > 5 && !strcmp(e->d_name + len - 5, ".yaml"))
			names[n++] = strdup(e->d_name);
	}
	closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), by_name);
	printf("1..%d\n", n + 1);
	for (int i = 0; i < n; i++) {
		passed += run_case(i + 1, names[i]);
		free(names[i]);
	}
	printf("%s %d - %d cases, as many as meson.build lists (%d)\n",
	       n == want ? "ok" : "not ok", n + 1, n, want);
	return passed == n && n == want ? 0 : 1;
}
