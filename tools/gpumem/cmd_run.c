/*
 * cmd_run.c - gpumem run [--fraction F] [--limit SIZE] [--report FILE]
 *             [--mode limit|cache] [--prometheus FILE] -- COMMAND ...
 *
 * Sets LD_PRELOAD (the library first, then the pinned host memory cache
 * libgpumem-pinned.so unless --no-pinned, what was there kept after
 * them) and the GPUMEM_* variables, then executes COMMAND. Each library
 * is found beside this program: its variable ($GPUMEM_PRELOAD_LIBRARY,
 * $GPUMEM_PINNED_LIBRARY), then the build tree (../../allocator/preload/,
 * ../../allocator/pinned/), then the install tree (../lib*, same dir).
 * The pinned library is optional (not built without jemalloc's PIC
 * archive): when it is not found, pinned memory passes through.
 */
#include "cmd.h"

#include "error.h"
#include "options.h"
#include "units.h"

#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define LIB "libgpumem-preload.so"
#define PINNED_LIB "libgpumem-pinned.so"

#ifndef GM_LIBDIR
#define GM_LIBDIR "lib"
#endif

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: gpumem run [OPTIONS] -- COMMAND [ARGS...]\n\n"
		"Run COMMAND with the gpumem preload allocator: every CUDA "
		"device allocation\nis accounted and capped, and a report is "
		"written at exit.\n\n"
		"  --fraction F       cap per process and device: F of the "
		"device's memory (0 < F <= 1)\n"
		"  --limit SIZE       cap as a size (40GiB, 80GB); with "
		"--fraction the smaller wins\n"
		"  --report FILE      JSON report at exit and on SIGUSR1 "
		"(%%p pid, %%r rank)\n"
		"  --prometheus FILE  Prometheus text file, rewritten while "
		"running\n"
		"  --mode MODE        limit (pass through, account, cap) or "
		"cache\n"
		"  --claimed SIZE     capacity the card is sold as (undersized "
		"check; GB is\n"
		"                     the maker's: 80GB = 80GiB)\n"
		"  --on-undersized W  warn (default) or fail\n"
		"  --no-pinned        no pinned host memory cache "
		"(GPUMEM_PINNED=off)\n"
		"  -h, --help         this help\n\n"
		"Each option sets the GPUMEM_* variable of the same name "
		"(see allocator/README.md).\n\n"
		"Exit status: the command's own (127: it cannot be run), or 2 "
		"for a bad\noption before it starts.\n");
}

/*
 * Path of library lib (file name): $env, else beside this program in
 * the build tree (../../allocator/build_dir/) or the install tree.
 * Returns 0, GM_ENOTFOUND (not beside this program), or GM_EINVAL after
 * a message when $env is set to a path that cannot be read (the user
 * named it: neither another copy nor running without it is taken).
 */
static int find_library(char *out, size_t len, const char *env_name,
			const char *build_dir, const char *lib)
{
	const char *env = getenv(env_name);
	char exe[PATH_MAX], dir[PATH_MAX];
	ssize_t n;

	if (env && *env) {
		snprintf(out, len, "%s", env);
		if (access(out, R_OK) == 0)
			return 0;
		fprintf(stderr, "gpumem run: %s=%s: cannot read it: %s\n",
			env_name, env, strerror(errno));
		return GM_EINVAL;
	}
	n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return GM_ENOTFOUND;
	exe[n] = '\0';
	snprintf(dir, sizeof(dir), "%s", dirname(exe));
	for (int i = 0; i < 3; i++) {
		char path[PATH_MAX * 2];

		if (i == 0)
			snprintf(path, sizeof(path), "%s/../../allocator/%s/%s",
				 dir, build_dir, lib);
		else if (i == 1)
			snprintf(path, sizeof(path), "%s/../%s/%s", dir,
				 GM_LIBDIR, lib);
		else
			snprintf(path, sizeof(path), "%s/%s", dir, lib);
		if (access(path, R_OK) == 0 && realpath(path, out))
			return 0;
	}
	return GM_ENOTFOUND;
}

/*
 * --report / --prometheus PATH: the library writes it at exit (or while
 * the program runs), so a directory that is not there or not writable is
 * found now, before the program runs, not after it. A directory part
 * holding %p or %r is the library's to expand and is not checked here.
 * Returns 0 or GM_EXIT_USAGE with a message naming the option.
 */
static int check_output_path(const char *opt, const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	struct stat st;

	if (!*path)
		return gm_cmd_usage_error("run", "--%s needs a file name", opt);
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return gm_cmd_usage_error("run", "--%s: %s is a directory", opt,
					  path);
	if (!slash)
		snprintf(dir, sizeof(dir), ".");
	else if (slash == path)
		snprintf(dir, sizeof(dir), "/");
	else
		snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
	if (strchr(dir, '%'))
		return 0;
	if (stat(dir, &st) != 0)
		return gm_cmd_usage_error("run", "--%s: cannot write %s: %s: %s",
					  opt, path, dir, strerror(errno));
	if (!S_ISDIR(st.st_mode))
		return gm_cmd_usage_error("run", "--%s: cannot write %s: %s is "
					  "not a directory", opt, path, dir);
	if (access(dir, W_OK | X_OK) != 0)
		return gm_cmd_usage_error("run", "--%s: cannot write %s: %s: %s",
					  opt, path, dir, strerror(errno));
	return 0;
}

/*
 * The cap settings in the environment (set by the options above or
 * inherited) as the library will read them: one it cannot read would
 * leave every allocation refused, so the program is not started. Returns
 * true (after the message) when one cannot be read.
 */
static bool refuse_env(void)
{
	extern char **environ;
	static struct gm_pl_opts o;

	gm_pl_opts_caps(environ, &o);
	if (!o.bad[0])
		return false;
	fprintf(stderr, "gpumem run: %s (from the environment); not "
		"starting the program with a cap that cannot be read\n", o.bad);
	return true;
}

/*
 * The dynamic linker splits LD_PRELOAD at spaces and colons and skips an
 * object it cannot open, so a library path with either would run the
 * program uncapped: true (after the message) for such a path.
 */
static bool splits(const char *path)
{
	if (!strpbrk(path, " :"))
		return false;
	fprintf(stderr, "gpumem run: the library path '%s' has a space or a "
		"colon, where LD_PRELOAD splits it (the program would run "
		"uncapped); install or copy it to a path without them, or set "
		"GPUMEM_PRELOAD_LIBRARY / GPUMEM_PINNED_LIBRARY to one\n", path);
	return true;
}

/*
 * Does the dynamic linker really load the preload library with this
 * LD_PRELOAD value? It skips an object it cannot open or load (a split
 * path, another architecture, a missing dependency) with a message and
 * runs the program uncapped. So this program is run once under it, as a
 * probe (GPUMEM_RUN_PROBE set: gm_cmd_run answers whether the library's
 * gpumem_malloc is in the process). True when it loaded.
 */
static bool preload_loads(const char *preload)
{
	int status;
	pid_t pid = fork();

	if (pid == 0) {
		setenv("LD_PRELOAD", preload, 1);
		setenv("GPUMEM_RUN_PROBE", "1", 1);
		setenv("GPUMEM_LOG", "error", 1); /* the program warns */
		execl("/proc/self/exe", "gpumem", "run", (char *)NULL);
		_exit(126);
	}
	if (pid < 0 || waitpid(pid, &status, 0) != pid)
		return true; /* cannot tell: let the program run */
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int gm_cmd_run(int argc, char **argv)
{
	static const struct option opts[] = {
		{"fraction", required_argument, NULL, 'f'},
		{"limit", required_argument, NULL, 'l'},
		{"report", required_argument, NULL, 'r'},
		{"prometheus", required_argument, NULL, 'p'},
		{"mode", required_argument, NULL, 'm'},
		{"claimed", required_argument, NULL, 'c'},
		{"on-undersized", required_argument, NULL, 'u'},
		{"no-pinned", no_argument, NULL, 'P'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	char lib[2 * PATH_MAX + 2], pinned[PATH_MAX], *preload;
	bool use_pinned = true;
	const char *old;
	uint64_t bytes, num, den;
	uint64_t seen = 0;
	int c, rc, lib_len;

	if (getenv("GPUMEM_RUN_PROBE")) /* preload_loads() */
		return dlsym(RTLD_DEFAULT, "gpumem_malloc") ? 0 : 1;
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, "+:h", opts, NULL)) != -1) {
		if (gm_cmd_once("run", &seen, c, opts, NULL))
			return GM_EXIT_USAGE;
		switch (c) {
		case 'f':
			if (gm_pl_fraction_parse(optarg, &num, &den))
				return gm_cmd_usage_error("run", "--fraction: "
					"'%s' is not a fraction in (0, 1]",
					optarg);
			setenv("GPUMEM_FRACTION", optarg, 1);
			break;
		case 'l':
		case 'c':
			if ((c == 'l' ? gm_size_parse(optarg, &bytes) :
			     gm_claimed_size_parse(optarg, &bytes)))
				return gm_cmd_size_error("run", c == 'l' ?
							 "--limit" :
							 "--claimed", optarg);
			if (!bytes)
				return gm_cmd_usage_error("run", "--%s: '%s' "
					"is not a size such as 40GiB or 80GB",
					c == 'l' ? "limit" : "claimed", optarg);
			if (c == 'l' && gm_size_bare_small(optarg)) {
				char b[64];

				gm_cmd_bare_size_warn("run", "--limit", optarg,
						      "");
				/* said once: the library, in each process
				 * of the command, reads it with its unit */
				snprintf(b, sizeof(b), "%lluB",
					 (unsigned long long)bytes);
				setenv("GPUMEM_LIMIT", b, 1);
				break;
			}
			setenv(c == 'l' ? "GPUMEM_LIMIT" : "GPUMEM_CLAIMED",
			       optarg, 1);
			break;
		case 'r':
			if (check_output_path("report", optarg))
				return GM_EXIT_USAGE;
			setenv("GPUMEM_REPORT", optarg, 1);
			break;
		case 'p':
			if (check_output_path("prometheus", optarg))
				return GM_EXIT_USAGE;
			setenv("GPUMEM_PROMETHEUS", optarg, 1);
			break;
		case 'm':
			if (strcmp(optarg, "limit") && strcmp(optarg, "cache"))
				return gm_cmd_usage_error("run", "--mode: '%s' "
					"is not limit or cache", optarg);
			setenv("GPUMEM_MODE", optarg, 1);
			break;
		case 'u':
			if (strcmp(optarg, "warn") && strcmp(optarg, "fail"))
				return gm_cmd_usage_error("run",
					"--on-undersized: '%s' is not warn or "
					"fail", optarg);
			setenv("GPUMEM_ON_UNDERSIZED", optarg, 1);
			break;
		case 'P':
			use_pinned = false;
			setenv("GPUMEM_PINNED", "off", 1);
			break;
		case 'h':
			usage(stdout);
			return GM_EXIT_OK;
		case ':':
		default:
			return gm_cmd_option_error("run", c, argv, opts);
		}
	}
	if (optind >= argc)
		return gm_cmd_usage_error("run", "no COMMAND to run (put it "
					  "after --)");
	if (refuse_env())
		return GM_EXIT_USAGE;
	if ((rc = find_library(lib, sizeof(lib), "GPUMEM_PRELOAD_LIBRARY",
			       "preload", LIB))) {
		if (rc == GM_EINVAL)
			return GM_EXIT_USAGE;
		fprintf(stderr, "gpumem run: cannot find %s (set "
			"GPUMEM_PRELOAD_LIBRARY to its path)\n", LIB);
		return GM_EXIT_USAGE;
	}
	if (splits(lib))
		return GM_EXIT_USAGE;
	lib_len = (int)strlen(lib);
	if (use_pinned && (rc = find_library(pinned, sizeof(pinned),
					     "GPUMEM_PINNED_LIBRARY", "pinned",
					     PINNED_LIB)) == GM_EINVAL)
		return GM_EXIT_USAGE;
	if (use_pinned && rc == 0) {
		size_t n = strlen(lib);

		if (splits(pinned))
			return GM_EXIT_USAGE;

		/* LD_PRELOAD takes ':' or ' ' between entries. */
		if (n + 1 + strlen(pinned) >= sizeof(lib))
			return gm_cmd_usage_error("run", "library paths are "
						  "too long");
		lib[n] = ':';
		memcpy(lib + n + 1, pinned, strlen(pinned) + 1);
	}
	old = getenv("LD_PRELOAD");
	if (old && *old) {
		size_t n = strlen(lib) + strlen(old) + 2;
		preload = malloc(n);
		if (!preload)
			return GM_EXIT_USAGE;
		snprintf(preload, n, "%s:%s", lib, old);
	} else {
		preload = lib;
	}
	if (!preload_loads(preload)) {
		fprintf(stderr, "gpumem run: the dynamic linker did not load "
			"%.*s (LD_PRELOAD=%s); not running the program "
			"uncapped\n", lib_len, lib, preload);
		return GM_EXIT_USAGE;
	}
	setenv("LD_PRELOAD", preload, 1);
	{
		/* the program keeps this pid: the library tells it from
		 * the processes it starts (report.c, no_report_note) */
		char pid[24];

		snprintf(pid, sizeof(pid), "%ld", (long)getpid());
		setenv("GPUMEM_RUN_PID", pid, 1);
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "gpumem run: %s: %s\n", argv[optind], strerror(errno));
	return errno == ENOENT ? 127 : 126;
}
