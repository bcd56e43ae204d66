/*
 * cmd.h - the gpumem subcommands (one file each: cmd_<name>.c) and the
 * helpers they share (main.c). Subcommands are thin: they parse
 * arguments, call a library, and print through the output layer.
 *
 * Each gm_cmd_<name>() takes argc/argv with argv[0] the subcommand name
 * and returns the process exit code (GM_EXIT_*).
 */
#ifndef GM_CMD_H
#define GM_CMD_H

#include "emit.h"
#include "fit.h"
#include "fit_search.h"
#include "model.h"
#include "spec.h"

#include <getopt.h>
#include <stdio.h>

struct gm_cmd {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

/* The table of subcommands (main.c); ends with a NULL name. */
extern const struct gm_cmd gm_cmds[];

/*
 * Report a usage error: "gpumem NAME: message" and a hint to run
 * --help, on stderr. Returns GM_EXIT_USAGE.
 */
int gm_cmd_usage_error(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/*
 * The usage error of option opt (e.g. "--limit") whose value text is
 * not a size: "--limit: '80gb' is not a size: unknown unit 'gb' ..."
 * (gm_size_error says why). Returns GM_EXIT_USAGE.
 */
int gm_cmd_size_error(const char *name, const char *opt, const char *text);

/*
 * Warn that a cap opt was given as text, a number below 1 MiB without a
 * unit (gm_size_bare_small), read as bytes: "gpumem NAME: warning: OPT
 * TEXT has no unit and is read as TEXT bytes (write e.g. TEXTGiB)",
 * more (e.g. ", or 1.0 for the whole card") before the parenthesis
 * closes.
 */
void gm_cmd_bare_size_warn(const char *name, const char *opt,
			   const char *text, const char *more);

/*
 * Report getopt_long's error c ('?' unknown option, ':' missing value;
 * the optstring must start with ':' and opterr be 0) the same way in
 * every subcommand: "option '--x' needs a value" or "unknown option
 * '--y'; did you mean '--x'?", the hint from opts, getopt_long's table,
 * NULL: none). Returns GM_EXIT_USAGE.
 */
int gm_cmd_option_error(const char *name, int c, char **argv,
			const struct option *opts);
/* "unknown option '--gpus'; did you mean '--gpu'?" for arg (its
 * "=VALUE" left out) against opts (getopt_long's table, NULL: no
 * hint). Returns GM_EXIT_USAGE. */
int gm_cmd_unknown_option(const char *name, const char *arg,
			  const struct option *opts);

/*
 * Print an error message "gpumem NAME: MSG" on stderr; when MSG starts
 * with "PATH:LINE:COLUMN:" for one of paths[0..n) (the spec, a
 * catalog file), also that line of the file with a caret under the
 * column (gm_spec_excerpt()).
 */
void gm_cmd_file_error(const char *name, const char *msg,
		       const char *const *paths, int n);

/* The options plan and fit share, as given (plan_args.c). */
#define GM_PLAN_MAX_SETS 64
struct gm_plan_args {
	const char *sets[GM_PLAN_MAX_SETS]; /* --set KEY=VALUE, in order */
	int n_sets;
	enum gm_format format;              /* --format, default table */
	const char *svg;                    /* --svg FILE or NULL */
	const char *html;                   /* --html FILE or NULL */
	const char *catalog;                /* --catalog FILE or NULL */
	double fraction;                    /* --fraction F, 0: none */
	uint64_t frac_num, frac_den;        /* the same, exactly: num/den */
	uint64_t limit;                     /* --limit SIZE, 0: none */
	struct gm_model_opts model;         /* --reserve-model */
};

/*
 * Every option of every subcommand is given at most once, but those
 * named in `repeatable` (e.g. "set,gpu"): call with each answer c of
 * getopt_long over the table opts (at most 64 entries); *seen holds the
 * options given so far, by their index in opts (0 before the first
 * call). A second --X is a usage error ("--X: given more than once;
 * give it once", then GM_EXIT_USAGE), so that a script's second
 * --limit (say) is not silently the one that counts; 0 otherwise
 * (also for '?', ':' and values not in opts).
 */
int gm_cmd_once(const char *name, uint64_t *seen, int c,
		const struct option *opts, const char *repeatable);

/* Whether one of a's --set options sets key ("hardware.gpu"). */
bool gm_plan_args_sets(const struct gm_plan_args *a, const char *key);

void gm_plan_args_init(struct gm_plan_args *a);

/*
 * Take getopt_long's answer c for `gpumem NAME` (optstring starting
 * with ':', long options 's' set, 'f' format, 'v' svg, 'c' catalog,
 * 'r' reserve-model, 'F' fraction, 'L' limit, 'H' html). Returns 0 when c was a shared option and was
 * taken, -1 when c is the caller's own or unknown ('?': the caller says
 * so with its table, gm_cmd_unknown_option), or GM_EXIT_USAGE after a
 * usage message (bad value, missing value).
 */
int gm_plan_args_option(struct gm_plan_args *a, const char *name, int c,
			char **argv);

/*
 * Write the --svg or --html file of plans (fits NULL for gpumem plan)
 * atomically (emit.h's gm_file). 0 or GM_EIO with diag set.
 */
int gm_plan_write_svg(const char *path, const struct gm_plan *plans,
		      const struct gm_fit *fits, size_t n,
		      struct gm_diag *diag);
/* Whether a's options can plan spec: --reserve-model analytic has no
 * closed forms for DeepSpeed's engine or a PEFT adapter (their states
 * would be planned unsharded, their blocks as a plain model's).
 * 0, or GM_EINVAL with the reason in diag. */
int gm_plan_args_check(const struct gm_plan_args *a,
		       const struct gm_spec *spec, struct gm_diag *diag);

/* The DeepSpeed JSON's "auto"s that took an assumed value, one note
 * each on stderr (also where the spec is then refused: the value may be
 * why). */
void gm_plan_ds_notes(const char *name, const struct gm_spec *spec);

/*
 * Warn on stderr about a loaded spec: the DeepSpeed JSON's "auto"s that
 * took an assumed value ("gpumem NAME: note: ds.json:L:C: ..."), and the
 * sections that the task ignores:
 * "gpumem NAME: SPEC:L:C: training: ignored for task inference".
 */
void gm_plan_spec_warn(const char *name, const struct gm_spec *spec);

int gm_plan_write_html(const char *path, const struct gm_spec *spec,
		       const struct gm_model_opts *opts,
		       const struct gm_plan *plans, const struct gm_fit *fits,
		       const struct gm_fit_change *changes, size_t n,
		       struct gm_diag *diag);

int gm_cmd_gpus(int argc, char **argv);
int gm_cmd_verify(int argc, char **argv);
int gm_cmd_plan(int argc, char **argv);
int gm_cmd_fit(int argc, char **argv);

int gm_cmd_replay(int argc, char **argv);

struct gm_sim_options;
struct gm_pool_options;
/*
 * Write "# gpumem-replay: OPTIONS\n", the `gpumem replay` options that
 * replay a trace on the card so and pool po (cmd_replay.c); replay reads
 * the line back as its defaults. 0 or GM_EIO.
 */
int gm_replay_options_write(FILE *fp, const struct gm_sim_options *so,
			    const struct gm_pool_options *po);
int gm_cmd_run(int argc, char **argv);
int gm_cmd_report(int argc, char **argv);

#endif
