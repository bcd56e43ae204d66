/*
 * main.c - the gpumem program: dispatch to a subcommand (see cmd.h).
 */
#include "cmd.h"

#include "error.h"
#include "log.h"
#include "spec.h"
#include "text.h"
#include "units.h"

#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GM_VERSION
#define GM_VERSION "unknown"
#endif

const struct gm_cmd gm_cmds[] = {
	{"plan", gm_cmd_plan, "predict per-GPU memory of one configuration"},
	{"fit", gm_cmd_fit, "largest micro-batch and fewest GPUs, per GPU model"},
	{"gpus", gm_cmd_gpus, "the GPU catalog: names, capacities, bandwidth"},
	{"replay", gm_cmd_replay,
	 "replay an allocation trace through the allocator core"},
	{"verify", gm_cmd_verify,
	 "check a card's real capacity and health (write/read every byte)"},
	{"run", gm_cmd_run, "run a command with the preload allocator "
			    "(cap, account, report)"},
	{"report", gm_cmd_report, "print and merge preload and verify reports"},
	{NULL, NULL, NULL},
};

int gm_cmd_usage_error(const char *name, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "gpumem %s: ", name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry 'gpumem %s --help'.\n", name);
	return GM_EXIT_USAGE;
}

int gm_cmd_size_error(const char *name, const char *opt, const char *text)
{
	char why[256];

	gm_size_error(text, why, sizeof(why));
	return gm_cmd_usage_error(name, "%s: '%s' is not a size: %s", opt,
				  text, why);
}

void gm_cmd_bare_size_warn(const char *name, const char *opt,
			   const char *text, const char *more)
{
	fprintf(stderr, "gpumem %s: warning: %s %s has no unit and is read as "
		"%s bytes (write e.g. %sGiB%s)\n", name, opt, text, text, text,
		more);
}

/* "; did you mean '--gpu'?" for an unknown long option among opts (the
 * spec keys' helper, text.h), or "". */
static const char *option_hint(const char *opt, const struct option *opts,
			       char *buf, size_t len)
{
	char names[64][40], near[256];
	const char *list[64];
	size_t n = 0;

	buf[0] = '\0';
	if (!opts || strncmp(opt, "--", 2))
		return buf;
	for (; opts[n].name && n < 64; n++) {
		snprintf(names[n], sizeof(names[n]), "--%s", opts[n].name);
		list[n] = names[n];
	}
	if (gm_text_suggest_list(opt, list, n, near, sizeof(near)))
		snprintf(buf, len, "; did you mean %s?", near);
	return buf;
}

int gm_cmd_unknown_option(const char *name, const char *arg,
			  const struct option *opts)
{
	char opt[64], hint[320];

	snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(arg, "="), arg);
	return gm_cmd_usage_error(name, "unknown option '%s'%s", opt,
				  option_hint(opt, opts, hint, sizeof(hint)));
}

int gm_cmd_once(const char *name, uint64_t *seen, int c,
		const struct option *opts, const char *repeatable)
{
	size_t len;

	for (unsigned i = 0; i < 64 && opts[i].name; i++) {
		if (opts[i].flag || opts[i].val != c)
			continue;
		len = strlen(opts[i].name);
		for (const char *r = repeatable; r && *r;
		     r += strcspn(r, ",") + (r[strcspn(r, ",")] == ',')) {
			if (strcspn(r, ",") == len &&
			    !strncmp(r, opts[i].name, len))
				return 0;
		}
		if (*seen & (UINT64_C(1) << i))
			return gm_cmd_usage_error(name, "--%s: given more "
						  "than once; give it once",
						  opts[i].name);
		*seen |= UINT64_C(1) << i;
		return 0;
	}
	return 0;
}

int gm_cmd_option_error(const char *name, int c, char **argv,
			const struct option *opts)
{
	char hint[320];

	const char *arg = optind > 0 ? argv[optind - 1] : "";
	char opt[64];

	if (strncmp(arg, "--", 2) == 0 && (c == ':' || !optopt))
		snprintf(opt, sizeof(opt), "%.*s", (int)strcspn(arg, "="),
			 arg);
	else if (optopt)
		snprintf(opt, sizeof(opt), "-%c", optopt);
	else
		snprintf(opt, sizeof(opt), "%s", arg);
	if (c == ':')
		return gm_cmd_usage_error(name, "option '%s' needs a value",
					  opt);
	return gm_cmd_usage_error(name, "unknown option '%s'%s", opt,
				  option_hint(opt, opts, hint, sizeof(hint)));
}

/* "gpumem: 'x' is not a command", with the closest command. */
static int not_a_command(const char *word)
{
	const char *names[16];
	char near[256] = "";
	size_t n = 0;

	for (const struct gm_cmd *c = gm_cmds; c->name && n < 15; c++)
		names[n++] = c->name;
	names[n++] = "help";
	if (gm_text_suggest_list(word, names, n, near, sizeof(near)))
		fprintf(stderr, "gpumem: '%s' is not a command; did you mean "
			"%s? Run 'gpumem --help'.\n", word, near);
	else
		fprintf(stderr, "gpumem: '%s' is not a command. Run 'gpumem "
			"--help'.\n", word);
	return GM_EXIT_USAGE;
}

/*
 * After a subcommand: anything it printed must have reached stdout. A
 * write error (a full disk, a closed pipe, /dev/full) is exit 2 with a
 * message, whatever the subcommand answered.
 */
static int check_stdout(const char *name, int rc)
{
	errno = 0;
	if (fflush(stdout) == 0 && !ferror(stdout) && fclose(stdout) == 0)
		return rc;
	fprintf(stderr, "gpumem %s: cannot write the output: %s\n", name,
		strerror(errno ? errno : EIO));
	return GM_EXIT_USAGE;
}

void gm_cmd_file_error(const char *name, const char *msg,
		       const char *const *paths, int n)
{
	char ex[512];

	fprintf(stderr, "gpumem %s: %s\n", name, msg);
	for (int i = 0; i < n; i++) {
		if (paths[i] && !gm_spec_excerpt(paths[i], msg, ex,
						 sizeof(ex))) {
			fprintf(stderr, "%s\n", ex);
			return;
		}
	}
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: gpumem COMMAND [ARGS...]\n\n"
		     "Plan, cap and verify NVIDIA GPU memory.\n\n"
		     "Commands:\n");
	for (const struct gm_cmd *c = gm_cmds; c->name; c++)
		fprintf(out, "  %-8s  %s\n", c->name, c->summary);
	fprintf(out, "\nRun 'gpumem COMMAND --help' (or 'gpumem help COMMAND') "
		     "for a command's options;\n'gpumem --version' prints the "
		     "version.\n"
		     "Each option is given at most once (twice: exit 2), but "
		     "--set (plan, fit)\nand --gpu (fit).\n"
		     "Exit codes: 0 ok, 1 the answer is no (does not fit, "
		     "card failed), 2 bad input or usage, 3 CUDA/driver "
		     "error.\n");
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : NULL;

	/* a bad value is warned about here, once: what this program runs
	 * (gpumem run's command, the preload library in it) gets the level
	 * in effect instead */
	if (!gm_log_init(getenv("GPUMEM_LOG")))
		setenv("GPUMEM_LOG", gm_log_level_name(gm_log_level()), 1);
	if (!name) {
		usage(stderr);
		return GM_EXIT_USAGE;
	}
	/* "gpumem help CMD" is "gpumem CMD --help". */
	if (strcmp(name, "help") == 0 && argc > 2) {
		for (const struct gm_cmd *c = gm_cmds; c->name; c++)
			if (strcmp(argv[2], c->name) == 0) {
				char *hargv[] = {argv[2], "--help", NULL};

				return check_stdout(c->name,
						    c->run(2, hargv));
			}
		return not_a_command(argv[2]);
	}
	if (strcmp(name, "--help") == 0 || strcmp(name, "-h") == 0 ||
	    strcmp(name, "help") == 0) {
		usage(stdout);
		return check_stdout("help", GM_EXIT_OK);
	}
	if (strcmp(name, "--version") == 0) {
		printf("gpumem %s\n", GM_VERSION);
		return check_stdout("--version", GM_EXIT_OK);
	}
	for (const struct gm_cmd *c = gm_cmds; c->name; c++) {
		char prefix[64];

		if (strcmp(name, c->name))
			continue;
		/* warnings say which command gave them: "gpumem plan:
		 * warning: ..." as the docs show */
		snprintf(prefix, sizeof(prefix), "gpumem %s", c->name);
		gm_log_set_prefix(prefix);
		return check_stdout(name, c->run(argc - 1, argv + 1));
	}
	return not_a_command(name);
}
