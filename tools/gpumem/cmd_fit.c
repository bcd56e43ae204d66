/*
 * cmd_fit.c - `gpumem fit SPEC.yaml`: per GPU (the catalog, or --gpu
 * ...), the largest micro-batch that fits, gradient-accumulation steps
 * for the global batch, the fewest data-parallel GPUs that fit, and
 * where the spec as given does not fit, the smallest change that does
 * (fit_search.h).
 * Exit: 0 when at least one GPU fits, 1 when none does, 2 bad input.
 */
/* sched_getaffinity, CPU_COUNT: _GNU_SOURCE (the build defines it) */
#include "cmd.h"

#include "cap.h"
#include "custom_layers.h"
#include "emit.h"
#include "error.h"
#include "fit.h"
#include "fit_search.h"
#include "gpu.h"
#include "log.h"
#include "report.h"
#include "spec.h"
#include "units.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_GPUS 256

static void help(void)
{
	printf("Usage: gpumem fit SPEC.yaml [--gpu NAME ...] "
	       "[--global-batch N] [--set KEY=VALUE ...]\n"
	       "                  [--format table|json|yaml|csv] "
	       "[--svg FILE]\n"
	       "                  [--reserve-model simulated|analytic] "
	       "[--catalog FILE]\n"
	       "                  [--fraction F] [--limit SIZE] [--html FILE]\n"
	       "                  [--jobs N]\n\n"
	       "For each GPU of the catalog (or each --gpu): the largest "
	       "micro-batch that fits\none GPU, the gradient-accumulation "
	       "steps that reach the global batch with it\n(exactly: micro x "
	       "accumulation x data_parallel = global, the micro-batch a\n"
	       "divisor of global / data_parallel), and the fewest "
	       "GPUs (data parallel with the spec's\nZeRO stage, times tensor "
	       "and pipeline parallel) that fit at the spec's micro-batch\n"
	       "(where that fits at no degree: at the largest that fits; "
	       "'min gpus micro batch'\nsays which; 'none at ZeRO N', JSON 0 and "
	       "min_gpus_none: no degree fits,\nsee the smallest change; 'none "
	       "on one GPU': a spec modelled on one GPU\nonly (an adapter) "
	       "does not fit; "
	       "inference: one replica's GPUs, the smallest tensor-\nparallel "
	       "degree, up to 8, that fits the batch).\n\"Fits\" is "
	       "gpumem plan's: each answer plans as fitting, the next\n"
	       "larger micro-batch (or one GPU fewer) as not. A table to "
	       "compare cards\nfor a purchase. On a terminal, a progress "
	       "line on stderr. SPEC.yaml \"-\" reads\nstandard input. "
	       "--set hardware.gpu does not go with --gpu.\n\n"
	       "Where the spec as given does not fit a GPU, the smallest "
	       "change that fits,\nas --set arguments to paste into gpumem "
	       "plan, with that plan's peak\nreserved, device used and "
	       "headroom. Changes are tried one lever before two,\nin this "
	       "order, each lever's smallest step first: a smaller "
	       "micro-batch with\nmore gradient-accumulation steps (the "
	       "global batch kept; inference: a\nsmaller batch), activation "
	       "checkpointing (selective, then full), a higher\nZeRO stage "
	       "or Megatron-LM's distributed optimizer (data_parallel above "
	       "1;\nDeepSpeed's stage at 1 too), DeepSpeed's CPU offload "
	       "(optimizer, then\nparameters), more data-parallel GPUs, "
	       "tensor parallel (x2, x4, ... up to 8),\nan adapter (lora, "
	       "then qlora); only values gpumem plan models.\nWhere nothing "
	       "fits, the widest change searched and its headroom. JSON:\n"
	       "fits_as_given, smallest_change, widest_change "
	       "(planner/README.md).\nThe spec's keys: models/README.md.\n\n"
	       "  --gpu NAME        a catalog GPU; may repeat\n"
	       "  --catalog FILE    add this file's GPUs to the built-in "
	       "catalog (same name:\n                    replaces)\n"
	       "  --global-batch N  sequences per optimizer step (default: "
	       "the spec's); a\n                    multiple of "
	       "parallelism.data_parallel, at most 2^30\n"
	       "  --jobs N          GPUs planned at once (default: one per "
	       "CPU this process\n                    may use); the output "
	       "is the same for any N\n"
	       "  --fraction F      fit under a per-process cap of F (0 < F "
	       "<= 1) of each\n                    card's CUDA total (gpumem "
	       "run --fraction,\n                    torch.cuda."
	       "set_per_process_memory_fraction)\n"
	       "  --limit SIZE      the same as a size; with both, the smaller "
	       "wins. The cap\n                    covers the allocator's "
	       "memory, not the CUDA context\n"
	       "  --set KEY=VALUE   override a spec key, may repeat\n"
	       "  --format FMT      table (default), json, yaml or csv\n"
	       "  --svg FILE        bars of each GPU at its largest "
	       "micro-batch\n"
	       "  --html FILE       a self-contained page: that chart, the "
	       "table, the\n                    recipe and the assumptions "
	       "in words\n"
	       "  --reserve-model M simulated (default) or analytic: how "
	       "peak reserved is\n                    predicted, for the "
	       "answers and the figures alike (the analytic\n"
	       "                    model only proposes where each search "
	       "starts)\n"
	       "  --help            this text\n\n"
	       "Exit status: 0 some GPU fits, 1 none fits, 2 bad input.\n");
}

/* The progress line: on a terminal only (stderr), at most five times a
 * second, cleared when the table is printed. The workers' plans add up
 * under lock. */
struct progress {
	pthread_mutex_t lock;
	const char *gpu;        /* the GPU started last */
	size_t i, n, done;      /* started last (0-based), GPUs, finished */
	unsigned long plans;    /* the finished GPUs' plans */
	struct gm_fit_progress *w; /* each worker's count */
	unsigned nw;
	double last;
	bool shown;
};

static double now_s(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* With pr->lock held. */
static void progress_show(struct progress *pr, bool force)
{
	double t = now_s();
	unsigned long plans = pr->plans;

	if (!force && t - pr->last < 0.2)
		return;
	for (unsigned k = 0; k < pr->nw; k++)
		plans += pr->w[k].plans;
	pr->last = t;
	pr->shown = true;
	fprintf(stderr, "\r\033[Kgpumem fit: GPU %zu of %zu (%s), %zu "
		"done: %lu plans so far", pr->i + 1, pr->n, pr->gpu,
		pr->done, plans);
	fflush(stderr);
}

static void progress_tick(struct gm_fit_progress *p)
{
	struct progress *pr = p->ctx;

	pthread_mutex_lock(&pr->lock);
	progress_show(pr, false);
	pthread_mutex_unlock(&pr->lock);
}

static void progress_end(struct progress *pr)
{
	if (pr->shown)
		fputs("\r\033[K", stderr);
	pr->shown = false;
}

/*
 * Below a training table: the global batch every row holds to and where
 * it came from, and how many rows it bounds (a row's micro-batch divides
 * global / data_parallel, so a row at that whole quotient may fit a
 * larger micro-batch under a larger --global-batch). gb: --global-batch,
 * 0 when not given. 0 or -1 (a write error).
 */
static int batch_note(const struct gm_spec *spec, uint64_t gb,
		      const struct gm_fit *f, size_t m)
{
	uint64_t dp = gm_spec_data_parallel(spec);
	uint64_t g = gb ? gb : spec->training.global_batch_size, top;
	char where[1200] = "--global-batch";
	size_t bound = 0;

	if (spec->task != GM_TASK_TRAIN || !g)
		return 0;
	top = g / dp;
	for (size_t i = 0; i < m; i++)
		bound += f[i].max_micro_batch == top;
	if (!gb && !gm_spec_given(spec, "training.global_batch_size"))
		snprintf(where, sizeof(where), "the spec's micro-batch x "
			 "data_parallel: training.global_batch_size not given");
	else if (!gb)
		gm_spec_where(spec, "training.global_batch_size", where,
			      sizeof(where));
	printf("\nglobal batch %llu sequences a step (%s): micro-batch x "
	       "accumulation steps x %llu data-parallel rank%s\n",
	       (unsigned long long)g, where, (unsigned long long)dp,
	       dp == 1 ? "" : "s");
	if (bound)
		printf("%zu row%s at micro-batch %llu, the whole global "
		       "batch a rank: bounded by the batch, not by memory "
		       "(--global-batch N searches a larger one)\n", bound,
		       bound == 1 ? "" : "s", (unsigned long long)top);
	return fflush(stdout) || ferror(stdout) ? -1 : 0;
}

/*
 * Below the table, for each GPU the spec as given does not fit: the
 * smallest change that fits, as --set arguments, or why none does.
 * Nothing where every GPU fits it as given. 0 or -1 (a write error).
 */
static int changes_print(const struct gm_fit *f,
			 const struct gm_fit_change *c, size_t m)
{
	size_t w = 0;
	char line[1024];
	bool any = false;

	for (size_t i = 0; i < m; i++) {
		if (c[i].fits_as_given)
			continue;
		any = true;
		if (strlen(f[i].gpu.name) > w)
			w = strlen(f[i].gpu.name);
	}
	if (!any)
		return 0;
	printf("\nsmallest change that fits, where the spec as given does "
	       "not:\n");
	for (size_t i = 0; i < m; i++) {
		if (c[i].fits_as_given)
			continue;
		printf("  %-*s  %s\n", (int)w, f[i].gpu.name,
		       gm_fit_change_text(&c[i], line, sizeof(line)));
	}
	return fflush(stdout) || ferror(stdout) ? -1 : 0;
}

/* Whether GPU name is among the first m rows already. */
static bool seen_gpu(const struct gm_plan_gpu *g, size_t m, const char *name)
{
	for (size_t j = 0; j < m; j++)
		if (!strcmp(g[j].name, name))
			return true;
	return false;
}

/* The rows to compute: each GPU's fit, its smallest change and the plan
 * at the row's micro-batch, taken in order by the workers. */
struct row_job {
	const struct gm_spec *spec;
	const struct gm_plan_args *a;
	unsigned long long gb;
	const char *const *pre;
	const struct gm_plan_gpu *gpus;
	struct gm_fit *fits;
	struct gm_fit_change *changes;
	struct gm_plan *plans;
	int *rc;
	struct gm_diag *diag;
	size_t m, next;         /* rows; the next to take (under pr->lock) */
	struct progress *pr;
	bool tty;               /* show the progress line */
	bool stop;              /* a row failed: take no more */
};

/* Row k: 0 or the first error (its message in j->diag[k]). */
static int row_run(struct row_job *j, size_t k, struct gm_fit_progress *p)
{
	const struct gm_plan_gpu *g = &j->gpus[k];
	struct gm_spec *s;
	uint64_t mb;
	int rc;

	rc = gm_fit_observed(j->spec, g, &j->a->model, j->gb, &j->fits[k], p,
			     &j->diag[k]);
	if (!rc)
		rc = gm_fit_change(j->spec, g, &j->a->model, NULL, j->pre,
				   j->gb ? 1 : 0, &j->changes[k], p,
				   &j->diag[k]);
	if (rc)
		return rc;
	/* planned at the row's micro-batch: the largest that fits, or 1
	 * where none does (fit.h's device_used), so that the chart's bar
	 * is the table's figure */
	s = malloc(sizeof(*s));
	if (!s)
		return gm_diag_set(&j->diag[k], GM_ENOMEM, "out of memory");
	*s = *j->spec;
	mb = j->fits[k].max_micro_batch ? j->fits[k].max_micro_batch : 1;
	s->training.micro_batch_size = mb;
	s->inference.batch_size = mb;
	if (j->gb)
		s->training.global_batch_size = j->gb;
	rc = gm_plan_capped(s, g, &j->a->model, &j->plans[k], &j->diag[k]);
	free(s);
	return rc;
}

struct worker {
	struct row_job *j;
	struct gm_fit_progress *p;
};

/* Take rows in order until none is left (or one failed). A row is taken
 * only after every row before it, so the first failing row is the one a
 * single worker would stop at. */
static void *row_worker(void *arg)
{
	struct worker *w = arg;
	struct row_job *j = w->j;
	struct progress *pr = j->pr;

	for (;;) {
		size_t k;

		pthread_mutex_lock(&pr->lock);
		k = j->stop ? j->m : j->next++;
		if (k < j->m && j->tty) {
			pr->gpu = j->gpus[k].name;
			pr->i = k;
			progress_show(pr, k == 0);
		}
		pthread_mutex_unlock(&pr->lock);
		if (k >= j->m)
			return NULL;
		j->rc[k] = row_run(j, k, j->tty ? w->p : NULL);
		pthread_mutex_lock(&pr->lock);
		j->stop |= j->rc[k] != 0;
		pr->done++;
		pr->plans += w->p->plans;
		w->p->plans = 0;
		pthread_mutex_unlock(&pr->lock);
	}
}

/* CPUs this process may run on. */
static unsigned cpus_usable(void)
{
	cpu_set_t set;
	long n;

	if (!sched_getaffinity(0, sizeof(set), &set) && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

/* The rows on `jobs` workers (0: one per CPU this process may use; never
 * more than rows): this thread is one of them, so every row is computed
 * even where no other worker starts. 0, or ENOMEM. */
static int rows_run(struct row_job *j, unsigned jobs)
{
	struct gm_fit_progress *p;
	struct worker *w;
	pthread_t *t;
	pthread_attr_t at;
	unsigned started = 1;

	if (!jobs)
		jobs = cpus_usable();
	if (jobs > j->m)
		jobs = j->m ? (unsigned)j->m : 1;
	p = calloc(jobs, sizeof(*p));
	w = calloc(jobs, sizeof(*w));
	t = calloc(jobs, sizeof(*t));
	if (!p || !w || !t) {
		free(p);
		free(w);
		free(t);
		return ENOMEM;
	}
	for (unsigned k = 0; k < jobs; k++) {
		p[k] = (struct gm_fit_progress){0, progress_tick, j->pr};
		w[k] = (struct worker){j, &p[k]};
	}
	j->pr->w = p;
	j->pr->nw = jobs;
	pthread_attr_init(&at);
	/* a plan's stack is the main thread's (8 MiB by default) */
	pthread_attr_setstacksize(&at, (size_t)32 << 20);
	for (; started < jobs; started++)
		if (pthread_create(&t[started], &at, row_worker, &w[started]))
			break;
	pthread_attr_destroy(&at);
	row_worker(&w[0]);
	for (unsigned k = 1; k < started; k++)
		pthread_join(t[k], NULL);
	pthread_mutex_lock(&j->pr->lock);
	j->pr->w = NULL;
	j->pr->nw = 0;
	pthread_mutex_unlock(&j->pr->lock);
	free(p);
	free(w);
	free(t);
	return 0;
}

/*
 * --global-batch against the spec's data-parallel degree: only exact
 * micro-batch x accumulation x data-parallel products are reported, so
 * it must be a multiple of (and so at least) data_parallel. 0 or -1
 * (after the usage message).
 */
static int check_global_batch(const struct gm_spec *spec,
			      unsigned long long gb)
{
	unsigned long long dp = spec->parallelism.data_parallel ?
				spec->parallelism.data_parallel : 1;

	if (spec->task != GM_TASK_TRAIN) {
		gm_cmd_usage_error("fit", "--global-batch: applies to "
				   "training specs only (task is %s)",
				   gm_task_name(spec->task));
		return -1;
	}
	if (gb < dp) {
		gm_cmd_usage_error("fit", "--global-batch: %llu is smaller "
				   "than parallelism.data_parallel %llu", gb,
				   dp);
		return -1;
	}
	if (gb % dp) {
		gm_cmd_usage_error("fit", "--global-batch: %llu is not a "
				   "multiple of parallelism.data_parallel "
				   "%llu", gb, dp);
		return -1;
	}
	return 0;
}

int gm_cmd_fit(int argc, char **argv)
{
	static const struct option opts[] = {
		{"gpu", required_argument, NULL, 'g'},
		{"global-batch", required_argument, NULL, 'b'},
		{"set", required_argument, NULL, 's'},
		{"format", required_argument, NULL, 'f'},
		{"svg", required_argument, NULL, 'v'},
		{"html", required_argument, NULL, 'H'},
		{"reserve-model", required_argument, NULL, 'r'},
		{"catalog", required_argument, NULL, 'c'},
		{"fraction", required_argument, NULL, 'F'},
		{"limit", required_argument, NULL, 'L'},
		{"jobs", required_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *names[MAX_GPUS];
	const struct gm_catalog *cat = gm_catalog_builtin();
	struct gm_catalog catalog = {0};
	const char *paths[4] = {NULL, NULL, NULL, NULL};
	struct gm_plan_args a;
	uint64_t given = 0;
	struct gm_diag diag = {{0}};
	struct gm_spec *spec = calloc(1, sizeof(*spec));
	struct gm_fit *fits = calloc(MAX_GPUS, sizeof(*fits));
	struct gm_fit_change *changes = calloc(MAX_GPUS, sizeof(*changes));
	struct gm_plan *plans = NULL;
	struct gm_plan_gpu *gpus = NULL;
	int *rcs = NULL;
	struct gm_diag *diags = NULL;
	unsigned jobs = 0;
	struct gm_val *v = NULL;
	unsigned long long gb = 0;
	size_t n = 0, m = 0, unbound = 0, nobf16 = 0;
	int c, rc, code = GM_EXIT_USAGE, any = 0;
	bool named;
	char *end;
	struct progress pr = {PTHREAD_MUTEX_INITIALIZER, "", 0, 0, 0, 0,
			      NULL, 0, 0, false};
	bool tty = isatty(STDERR_FILENO);
	char pre_set[64];
	const char *pre[1] = {pre_set};

	if (!spec || !fits || !changes) {
		gm_error("out of memory");
		goto out;
	}
	gm_plan_args_init(&a);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if ((code = gm_cmd_once("fit", &given, c, opts, "set,gpu")))
			goto out;
		code = GM_EXIT_USAGE;
		rc = gm_plan_args_option(&a, "fit", c, argv);
		if (rc > 0) {
			code = rc;
			goto out;
		}
		if (rc == 0)
			continue;
		switch (c) {
		case 'g':
			if (n == MAX_GPUS) {
				code = gm_cmd_usage_error("fit", "--gpu: at "
							  "most %d", MAX_GPUS);
				goto out;
			}
			names[n++] = optarg;
			break;
		case 'j': {
			unsigned long long x;

			errno = 0;
			x = strtoull(optarg, &end, 10);
			if (*optarg == '-' || *optarg == '+' || end == optarg ||
			    *end || !x || errno == ERANGE || x > MAX_GPUS) {
				code = gm_cmd_usage_error("fit", "--jobs: '%s' "
					"is not an integer from 1 to %d",
					optarg, MAX_GPUS);
				goto out;
			}
			jobs = (unsigned)x;
			break;
		}
		case 'b':
			errno = 0;
			gb = strtoull(optarg, &end, 10);
			if (*optarg == '-' || *optarg == '+' || end == optarg ||
			    *end || (!gb && errno != ERANGE)) {
				code = gm_cmd_usage_error("fit", "--global-"
					"batch: '%s' is not a positive "
					"integer", optarg);
				goto out;
			}
			if (errno == ERANGE || gb > GM_FIT_MAX_GLOBAL) {
				code = gm_cmd_usage_error("fit", "--global-"
					"batch: '%s' is too large (at most "
					"%llu)", optarg, GM_FIT_MAX_GLOBAL);
				goto out;
			}
			break;
		case 'h':
			help();
			code = GM_EXIT_OK;
			goto out;
		default:
			code = gm_cmd_unknown_option("fit", argv[optind - 1],
						     opts);
			goto out;
		}
	}
	if (n && gm_plan_args_sets(&a, "hardware.gpu")) {
		code = gm_cmd_usage_error("fit", "--gpu and --set "
					  "hardware.gpu both name GPUs; give "
					  "one");
		goto out;
	}
	if (optind + 1 != argc) {
		code = gm_cmd_usage_error("fit", optind == argc ?
					  "a spec file is needed" :
					  "one spec file only");
		goto out;
	}
	paths[0] = argv[optind];
	paths[1] = a.catalog;
	if (paths[1]) {
		rc = gm_catalog_load_over(&catalog, paths[1], NULL,
					  &diag);
		if (rc) {
			progress_end(&pr);
			gm_cmd_file_error("fit", diag.msg, paths, 2);
			code = gm_exit_code(rc);
			goto out;
		}
		cat = &catalog;
	}
	rc = gm_spec_load(spec, argv[optind], a.sets, a.n_sets, &diag);
	if (rc)
		gm_plan_ds_notes("fit", spec); /* maybe assumed values */
	if (!rc)
		rc = gm_spec_check_modelled(spec, &diag);
	if (!rc)
		rc = gm_plan_args_check(&a, spec, &diag);
	/* the GPU the spec names is checked as plan checks it, though fit
	 * compares the catalog's (or each --gpu) */
	if (!rc && spec->gpu[0])
		rc = gm_spec_check_gpu_catalog(spec, cat, &diag);
	if (!rc)
		gm_plan_spec_warn("fit", spec);
	if (!rc)
		gm_custom_layers_warn(spec);
	paths[2] = spec->hf_path[0] ? spec->hf_path : NULL;
	/* the DeepSpeed JSON, where its message points */
	paths[3] = spec->deepspeed.path[0] ? spec->deepspeed.path : NULL;
	if (rc) {
		gm_cmd_file_error("fit", diag.msg, paths, 4);
		code = gm_exit_code(rc);
		goto out;
	}
	if (gb && check_global_batch(spec, gb)) {
		code = GM_EXIT_USAGE;
		goto out;
	}
	/* the search plans what the table does: the global batch given */
	snprintf(pre_set, sizeof(pre_set), "training.global_batch_size=%llu",
		 gb);
	named = n > 0;
	if (!n)
		for (size_t i = 0; i < cat->n && n < MAX_GPUS; i++)
			names[n++] = cat->gpus[i].name;
	plans = calloc(n, sizeof(*plans));
	gpus = calloc(n, sizeof(*gpus));
	rcs = calloc(n, sizeof(*rcs));
	diags = calloc(n, sizeof(*diags));
	if (!plans || !gpus || !rcs || !diags) {
		gm_error("out of memory");
		goto out;
	}
	/* the rows: each GPU once (a repeated --gpu, or an alias of one) */
	for (size_t i = 0; i < n; i++) {
		struct gm_plan_gpu g;

		rc = gm_plan_gpu_resolve(&g, spec, cat, names[i], "--gpu",
					 &diag);
		if (rc) {
			gm_cmd_file_error("fit", diag.msg, paths, 2);
			code = gm_exit_code(rc);
			goto out;
		}
		gm_plan_gpu_cap(&g, a.frac_num, a.frac_den, a.limit);
		if (seen_gpu(gpus, m, g.name))
			continue;
		if (named)
			gm_plan_gpu_warn(spec, &g);
		gpus[m++] = g;
	}
	{
		struct row_job j = {spec, &a, gb, pre, gpus, fits, changes,
				    plans, rcs, diags, m, 0, &pr, tty, false};

		pr.n = m;
		if (rows_run(&j, jobs)) {
			gm_error("out of memory");
			goto out;
		}
	}
	for (size_t k = 0; k < m; k++) {
		if (rcs[k]) {
			progress_end(&pr);
			gm_cmd_file_error("fit", diags[k].msg, paths, 2);
			code = gm_exit_code(rcs[k]);
			goto out;
		}
		any |= fits[k].max_micro_batch > 0;
		unbound += !named && gpus[k].cap_bytes >
				     gm_plan_gpu_usable(&gpus[k]);
		nobf16 += !named && gm_plan_gpu_lacks_bf16(spec, &gpus[k]);
	}
	progress_end(&pr);
	/* over the catalog: one line for the GPUs a --limit is above (each
	 * --gpu is warned about by name, gm_plan_gpu_warn) */
	if (unbound)
		fprintf(stderr, "gpumem fit: warning: the cap %.2f GiB is above "
			"the usable memory of %zu of the %zu GPUs planned: on "
			"those it never binds, and the plan is against the "
			"card\n", (double)a.limit / (double)GM_GiB, unbound, m);
	if (nobf16)
		fprintf(stderr, "gpumem fit: warning: %zu of the %zu GPUs "
			"planned (compute capability below 8.0) have no bf16: "
			"their rows plan the spec's bf16 as asked, which those "
			"cards cannot run; fit fp16 there (--set "
			"training.precision or inference.precision)\n", nobf16,
			m);
	if (a.svg && gm_plan_write_svg(a.svg, plans, fits, m, &diag)) {
		fprintf(stderr, "gpumem fit: --svg: %s\n", diag.msg);
		goto out;
	}
	if (a.html && gm_plan_write_html(a.html, spec, &a.model, plans, fits,
					 changes, m, &diag)) {
		fprintf(stderr, "gpumem fit: --html: %s\n", diag.msg);
		goto out;
	}
	{
		struct gm_fit_doc d = {
			paths[0], spec->name, gm_task_name(spec->task),
			spec->task != GM_TASK_TRAIN ? 0 :
			gb ? gb : spec->training.global_batch_size,
			a.model.reserve == GM_RESERVE_ANALYTIC ? "analytic" :
			"simulated", a.fraction, a.limit};

		v = gm_fit_report(&d, fits, changes, m, a.format);
	}
	if (!v || (rc = gm_emit(stdout, v, a.format))) {
		/* a write error: main() says why, once */
		if (!v || rc != GM_EIO)
			gm_error("cannot print the report");
		goto out;
	}
	if (a.format == GM_FORMAT_TABLE &&
	    (batch_note(spec, gb, fits, m) ||
	     changes_print(fits, changes, m))) {
		gm_error("cannot print the report");
		goto out;
	}
	code = any ? GM_EXIT_OK : GM_EXIT_NO;
out:
	gm_catalog_free(&catalog);
	gm_val_free(v);
	free(plans);
	free(gpus);
	free(rcs);
	free(diags);
	free(changes);
	free(fits);
	free(spec);
	return code;
}
