/*
 * cmd_plan.c - `gpumem plan SPEC.yaml`: load the spec, plan it on its GPU
 * (or --gpu), print the report; --svg FILE draws the breakdown; --trace
 * FILE writes the simulated replay's allocations as RMM CSV.
 * Exit: 0 fits, 1 does not fit, 2 bad input.
 */
#include "cmd.h"

#include "emit.h"
#include "fit_search.h"
#include "pool.h"
#include "sim.h"
#include "error.h"
#include "cap.h"
#include "custom_layers.h"
#include "gpu.h"
#include "log.h"
#include "megatron_moe.h"
#include "model.h"
#include "params.h"
#include "params_hf.h"
#include "report.h"
#include "spec.h"

#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

static void help(void)
{
	printf("Usage: gpumem plan SPEC.yaml [--set KEY=VALUE ...] "
	       "[--gpu NAME] [--format table|json|yaml|csv] [--svg FILE]\n"
	       "                  [--html FILE] "
	       "[--reserve-model simulated|analytic] [--catalog FILE]\n"
	       "                  [--trace FILE] [--fraction F] [--limit SIZE] "
	       "[--params]\n\n"
	       "Predict the memory one GPU (the most loaded rank) needs for "
	       "the training or\ninference run SPEC.yaml describes: weights, "
	       "gradients, optimizer states,\nactivations, logits, "
	       "temporaries, KV cache, buffers; peak allocated and\nreserved "
	       "(PyTorch's caching allocator), memory outside the allocator, "
	       "and\nwhether it fits, and where a run that does not fit "
	       "stops (out of memory:\nthe first request the caching "
	       "allocator refuses after freeing its cache and\nretrying). "
	       "The table's rows are what is live at the peak; each row at "
	       "its own\nlargest over the step follows. Tables print GiB "
	       "(2^30 bytes); other\nformats print bytes. SPEC.yaml \"-\" "
	       "reads standard input (messages say\n<stdin>:line:column). "
	       "Each option but --set is given at most once; --gpu\nand "
	       "--set hardware.gpu both name the GPU, so give one. The spec's "
	       "keys\n(model, training with deepspeed_config and use_cache, "
	       "inference,\nparallelism, hardware): models/README.md; the "
	       "output's rows: planner/README.md.\n\n"
	       "  --set KEY=VALUE  override a spec key (dotted), may repeat\n"
	       "  --gpu NAME       plan for this catalog GPU (gpumem gpus)\n"
	       "  --catalog FILE   add this file's GPUs to the built-in "
	       "catalog (same name:\n                   replaces)\n"
	       "  --fraction F     plan under a per-process cap of F (0 < F <= 1) of the\n"
	       "                   card's CUDA total, as `gpumem run --fraction` or\n"
	       "                   torch.cuda.set_per_process_memory_fraction enforce\n"
	       "  --limit SIZE     the same as a size (40GiB, 80GB); with both, the\n"
	       "                   smaller wins. The cap covers the allocator's memory\n"
	       "                   (peak reserved), not the CUDA context or NCCL\n"
	       "  --format FMT     table (default), json, yaml or csv\n"
	       "  --svg FILE       write a stacked bar of the peak against "
	       "the capacity\n"
	       "  --html FILE      write a self-contained page: the bars, the "
	       "figures, the\n                   recipe and the assumptions "
	       "in words\n"
	       "  --reserve-model M  how peak reserved is predicted: simulated "
	       "(default:\n                   the step's allocations replayed "
	       "through the allocator\n                   core) or analytic "
	       "(rounding rules + a fragmentation\n                   share; no "
	       "pool replayed: several times faster,\n                   "
	       "though a long generation still walks its\n                   "
	       "decode steps for the peak)\n"
	       "  --trace FILE     write the replayed allocations (the most "
	       "loaded rank's\n                   step) as the RMM CSV "
	       "`gpumem replay` reads, with the\n                   "
	       "replay's options on a first '# gpumem-replay:' line;\n"
	       "                   implies --reserve-model simulated\n"
	       "  --params         list the model's parameter tensors as "
	       "transformers'\n                   named_parameters() names "
	       "them (\"*\" = each layer) and\n                   stop; no "
	       "GPU needed\n"
	       "  --help           this text\n\n"
	       "Where it does not fit, one line on stderr names the smallest "
	       "change that fits\n(gpumem fit's search) as --set "
	       "arguments, or says that none searched fits.\n\n"
	       "Exit status: 0 fits (under the cap, when one is given), 1 "
	       "does not fit, 2 bad\ninput.\n");
}

/*
 * `--params`: the spec's parameter tensors (params_hf.h) in the chosen
 * format: table = one line per tensor "NAME SHAPE xCOUNT", else an
 * object {name, parameters, tensors: [{name, shape, count}]}. Returns
 * an exit code.
 */
static int print_params(const struct gm_spec *spec, enum gm_format format)
{
	struct gm_hf_tensor t[GM_HF_TENSORS_MAX];
	struct gm_param_layout pl;
	struct gm_diag diag = {{0}};
	struct gm_val *v, *arr;
	int n, rc;

	rc = gm_params_layout(&spec->model, &pl, &diag);
	if (!rc && gm_mg_layout_differs(spec)) {
		/* the layer Megatron-Core builds (megatron_moe.h) */
		gm_mg_moe_layout(spec, &pl);
		gm_mg_moe_tensors(&pl, t, &n);
	} else if (!rc) {
		rc = gm_params_hf(&spec->model, &pl, t, &n, &diag);
	}
	if (rc) {
		fprintf(stderr, "gpumem plan: --params: %s: %s\n", spec->path,
			diag.msg);
		return gm_exit_code(rc);
	}
	if (format == GM_FORMAT_TABLE) {
		printf("%s: %llu parameters\n", spec->name,
		       (unsigned long long)pl.total);
		for (int i = 0; i < n; i++) {
			char shape[64] = "";
			size_t at = 0;

			/* every dimension (3 for MoE experts' weights) */
			for (int d = 0; d < t[i].dims && at < sizeof(shape);
			     d++)
				at += (size_t)snprintf(shape + at,
						       sizeof(shape) - at,
						       d ? " x %llu" : "%llu",
						       (unsigned long long)
						       t[i].shape[d]);
			printf("  %-56s %-20s x%llu\n", t[i].name, shape,
			       (unsigned long long)t[i].count);
		}
		return GM_EXIT_OK;
	}
	v = gm_val_obj();
	gm_obj_set_str(v, "name", spec->name);
	gm_obj_set_uint(v, "parameters", pl.total);
	arr = gm_val_arr();
	for (int i = 0; i < n; i++) {
		struct gm_val *e = gm_val_obj(), *shape = gm_val_arr();
		for (int d = 0; d < t[i].dims; d++)
			gm_arr_push(shape, gm_val_uint(t[i].shape[d]));
		gm_obj_set_str(e, "name", t[i].name);
		gm_obj_set(e, "shape", shape);
		gm_obj_set_uint(e, "count", t[i].count);
		gm_arr_push(arr, e);
	}
	gm_obj_set(v, "tensors", arr);
	rc = gm_emit(stdout, v, format);
	gm_val_free(v);
	if (rc) {
		/* a write error: main() says why, once */
		if (rc != GM_EIO)
			gm_error("cannot print the parameter list");
		return GM_EXIT_USAGE;
	}
	return GM_EXIT_OK;
}

/* The replay's pool calls, kept until the plan is done (begin() starts
 * over: one replay per plan). */
struct trace_buf {
	struct trace_ev {
		uint64_t addr, bytes;
		bool alloc;
		bool empty;     /* torch.cuda.empty_cache() (no block) */
		struct gm_step_event info;
	} *ev;
	size_t n, cap;
	struct gm_sim_options so;  /* the replay's card and pool */
	struct gm_pool_options po;
};

static int trace_begin(void *ctx, const struct gm_sim_options *so,
		       const struct gm_pool_options *po)
{
	struct trace_buf *t = ctx;

	t->n = 0;
	t->so = *so;
	t->po = *po;
	return 0;
}

static int trace_push(struct trace_buf *t, const struct trace_ev *ev)
{
	if (t->n == t->cap) {
		size_t n = t->cap ? 2 * t->cap : 4096;
		struct trace_ev *e = realloc(t->ev, n * sizeof(*e));
		if (!e)
			return GM_ENOMEM;
		t->ev = e;
		t->cap = n;
	}
	t->ev[t->n++] = *ev;
	return 0;
}

static int trace_event(void *ctx, bool alloc, uint64_t addr, uint64_t bytes,
		       const struct gm_step_event *info)
{
	return trace_push(ctx, &(struct trace_ev){addr, bytes, alloc, false,
						   *info});
}

static int trace_empty(void *ctx, const struct gm_step_event *info)
{
	return trace_push(ctx, &(struct trace_ev){0, 0, false, true, *info});
}

/* Write t as RMM CSV (one thread, stream 0, Time = the event's index in
 * microseconds) to path, atomically, with three more columns (readers
 * of RMM logs skip unknown ones): Step (0 = before the first), Tag
 * ("phase/kind" of the allocation, step.h) and Reserved (the pool's
 * reserved bytes after the call); first a "# gpumem-replay:" line with
 * the replay's options, so that `gpumem replay` reproduces the plan.
 * 0 or GM_EIO (diag says why). */
static int trace_write(const char *path, const struct trace_buf *t,
		       struct gm_diag *diag)
{
	struct gm_file f;
	int rc = gm_file_begin(&f, path, diag);
	bool ok;

	if (rc)
		return rc;
	ok = gm_replay_options_write(f.fp, &t->so, &t->po) == 0 &&
	     fputs("Thread,Time,Action,Pointer,Size,Stream,Step,Tag,"
		   "Reserved\n", f.fp) >= 0;
	for (size_t i = 0; ok && i < t->n; i++) {
		const struct trace_ev *e = &t->ev[i];
		/* collectives on their own streams (step.h) */
		unsigned s = gm_step_kind_stream(e->info.kind);
		ok = fprintf(f.fp, "0,%zu,%s,0x%" PRIx64 ",%" PRIu64 ",0x%x,"
			     "%u,%s/%s,%" PRIu64 "\n", i,
			     e->empty ? "empty_cache" :
			     e->alloc ? "allocate" : "free", e->addr,
			     e->bytes, s, e->info.step,
			     gm_step_phase_name(e->info.phase),
			     e->empty ? "empty_cache" :
			     gm_step_kind_name(e->info.kind),
			     e->info.reserved) > 0;
	}
	if (!ok)
		gm_diag_set(diag, GM_EIO, "%s: cannot write", path);
	if (gm_file_end(&f, ok, diag))
		return GM_EIO;
	return ok ? 0 : GM_EIO;
}

/*
 * The progress line, on a terminal only (stderr; nothing when piped),
 * overwritten in place and cleared before anything else is printed:
 * while the plan runs past a second, the seconds so far (a timer: the
 * replay has no count of its own to show); during the hint's search,
 * the plans it has made, at most five times a second.
 */
static volatile sig_atomic_t prog_secs, prog_shown;

static void prog_alarm(int sig)
{
	char b[64] = "\r\033[Kgpumem plan: planning, ";
	size_t n = strlen(b);
	char d[12];
	int k = 0;
	unsigned v = (unsigned)++prog_secs;

	(void)sig;
	do
		d[k++] = (char)('0' + v % 10);
	while ((v /= 10) && k < (int)sizeof(d));
	while (k)
		b[n++] = d[--k];
	memcpy(b + n, " s", 2);
	n += 2;
	prog_shown = 1;
	/* a failed write loses only a progress line */
	if (write(STDERR_FILENO, b, n) < 0)
		return;
}

/* Start (on) or stop the seconds line; stopping clears it. */
static void prog_timer(bool on)
{
	struct itimerval it = {{on, 0}, {on, 0}};
	struct sigaction sa;

	if (!isatty(STDERR_FILENO))
		return;
	if (on) {
		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = prog_alarm;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		sigaction(SIGALRM, &sa, NULL);
		prog_secs = 0;
	}
	setitimer(ITIMER_REAL, &it, NULL);
	if (!on && prog_shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		prog_shown = 0;
	}
}

struct hint_progress {
	struct gm_fit_progress p;
	double last;
};

static double prog_now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void hint_tick(struct gm_fit_progress *p)
{
	struct hint_progress *h = (struct hint_progress *)p;
	double t = prog_now();

	if (h->last > 0 && t - h->last < 0.2)
		return;
	h->last = t;
	prog_shown = 1;
	fprintf(stderr, "\r\033[Kgpumem plan: looking for a change that "
		"fits: %lu plans so far", p->plans);
	fflush(stderr);
}

/*
 * Where the plan does not fit: the smallest change gpumem fit's search
 * finds (fit_search.h), for the hint and the --html page. NULL where the
 * search fails (the plan stands) or memory runs out; the caller frees.
 */
static struct gm_fit_change *plan_search(const struct gm_spec *spec,
					 const struct gm_plan_gpu *g,
					 const struct gm_model_opts *o,
					 const struct gm_plan *plan)
{
	struct gm_fit_change *c = calloc(1, sizeof(*c));
	struct gm_diag diag = {{0}};
	struct hint_progress hp = {{0, hint_tick, NULL}, 0};
	/* the search's plans are not the traced one (--trace) */
	struct gm_model_opts quiet = *o;
	bool ok;

	quiet.trace = NULL;
	ok = c && !gm_fit_change(spec, g, &quiet, plan, NULL, 0, c,
				      isatty(STDERR_FILENO) ? &hp.p : NULL,
				      &diag);

	if (prog_shown) {
		fputs("\r\033[K", stderr);
		prog_shown = 0;
	}
	if (!ok) {
		free(c);
		return NULL;
	}
	return c;
}

/* The hint: one line on stderr with c's change, as --set arguments, or
 * that none searched fits; nothing for c NULL. */
static void plan_hint(const struct gm_fit_change *c)
{
	char line[1024];

	if (c && !c->fits_as_given)
		fprintf(stderr, "gpumem plan: hint: %s%s\n",
			c->found ? "fits with " : "",
			gm_fit_change_text(c, line, sizeof(line)));
}

int gm_cmd_plan(int argc, char **argv)
{
	static const struct option opts[] = {
		{"set", required_argument, NULL, 's'},
		{"gpu", required_argument, NULL, 'g'},
		{"format", required_argument, NULL, 'f'},
		{"svg", required_argument, NULL, 'v'},
		{"html", required_argument, NULL, 'H'},
		{"reserve-model", required_argument, NULL, 'r'},
		{"catalog", required_argument, NULL, 'c'},
		{"trace", required_argument, NULL, 't'},
		{"fraction", required_argument, NULL, 'F'},
		{"limit", required_argument, NULL, 'L'},
		{"params", no_argument, NULL, 'p'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *gpu = NULL, *trace = NULL, *paths[4] = {NULL, NULL, NULL, NULL};
	bool params = false;
	struct trace_buf tb = {0};
	struct gm_step_observer obs = {&tb, trace_begin, trace_event,
				       trace_empty};
	struct gm_catalog catalog = {0};
	struct gm_plan_args a;
	uint64_t seen = 0;
	struct gm_diag diag = {{0}};
	struct gm_spec *spec = NULL;
	struct gm_plan *plan = NULL;
	struct gm_fit_change *change = NULL;
	struct gm_param_layout pl;
	struct gm_plan_gpu g;
	struct gm_val *v = NULL;
	int c, rc, code = GM_EXIT_USAGE;

	gm_plan_args_init(&a);
	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if ((rc = gm_cmd_once("plan", &seen, c, opts, "set")))
			return rc;
		rc = gm_plan_args_option(&a, "plan", c, argv);
		if (rc > 0)
			return rc;
		if (rc == 0)
			continue;
		switch (c) {
		case 'g':
			gpu = optarg;
			break;
		case 't':
			trace = optarg;
			break;
		case 'p':
			params = true;
			break;
		case 'h':
			help();
			return GM_EXIT_OK;
		default:
			return gm_cmd_unknown_option("plan", argv[optind - 1],
						     opts);
		}
	}
	if (gpu && gm_plan_args_sets(&a, "hardware.gpu"))
		return gm_cmd_usage_error("plan", "--gpu and --set "
					  "hardware.gpu both name the GPU; "
					  "give one");
	if (optind + 1 != argc)
		return gm_cmd_usage_error("plan", optind == argc ?
					  "a spec file is needed" :
					  "one spec file only");
	if (trace) {
		if (!*trace)
			return gm_cmd_usage_error("plan", "--trace needs a "
						  "file name");
		a.model.reserve = GM_RESERVE_SIMULATED;
		a.model.trace = &obs;
		a.model.trace_stage = 0;
	}
	spec = calloc(1, sizeof(*spec));
	plan = calloc(1, sizeof(*plan));
	if (!spec || !plan) {
		gm_error("out of memory");
		goto out;
	}
	paths[0] = argv[optind];
	paths[1] = a.catalog;
	rc = paths[1] ? gm_catalog_load_over(&catalog, paths[1],
						     NULL, &diag) : 0;
	if (!rc) {
		rc = gm_spec_load(spec, argv[optind], a.sets, a.n_sets, &diag);
		if (rc) /* the values it refused may be assumed ones */
			gm_plan_ds_notes("plan", spec);
	}
	paths[2] = spec->hf_path[0] ? spec->hf_path : NULL;
	/* the DeepSpeed JSON, where its message points */
	paths[3] = spec->deepspeed.path[0] ? spec->deepspeed.path : NULL;
	if (!rc && params) {
		code = print_params(spec, a.format);
		goto out;
	}
	if (!rc)
		rc = gm_spec_check_modelled(spec, &diag);
	if (!rc)
		rc = gm_plan_args_check(&a, spec, &diag);
	if (!rc)
		gm_plan_spec_warn("plan", spec);
	if (!rc)
		gm_custom_layers_warn(spec);
	if (!rc)
		rc = gm_plan_gpu_resolve(&g, spec, paths[1] ? &catalog : NULL,
					 gpu, "--gpu", &diag);
	if (!rc)
		gm_plan_gpu_cap(&g, a.frac_num, a.frac_den, a.limit);
	if (!rc) {
		prog_timer(true);
		rc = gm_plan_capped(spec, &g, &a.model, plan, &diag);
	}
	if (!rc && trace && plan->per_gpu_stage != a.model.trace_stage) {
		/* the most loaded stage is another: replay it again */
		a.model.trace_stage = plan->per_gpu_stage;
		rc = gm_plan_capped(spec, &g, &a.model, plan, &diag);
	}
	prog_timer(false);
	if (rc) {
		gm_cmd_file_error("plan", diag.msg, paths, 4);
		code = gm_exit_code(rc);
		goto out;
	}
	gm_plan_gpu_warn(spec, &g);
	if (!gm_params_layout(&spec->model, &pl, NULL))
		gm_mg_moe_layout(spec, &pl); /* Megatron's MoE layer */
	if (pl.total &&
	    gm_params_mismatch(&spec->model, &pl) > GM_PARAMS_TOLERANCE) {
		char where[1200];
		gm_warn("%s: model.parameters %.4g differs from the %llu the "
			"shape gives by %.1f%%; the shape is used",
			gm_spec_where(spec, "model.parameters", where,
				      sizeof(where)), spec->model.parameters,
			(unsigned long long)pl.total,
			100 * gm_params_mismatch(&spec->model, &pl));
	}
	if (a.svg && gm_plan_write_svg(a.svg, plan, NULL, 1, &diag)) {
		fprintf(stderr, "gpumem plan: --svg: %s\n", diag.msg);
		code = GM_EXIT_USAGE;
		goto out;
	}
	/* the page shows the hint's change: searched once, for both */
	if (a.html && !plan->fits)
		change = plan_search(spec, &g, &a.model, plan);
	if (a.html && gm_plan_write_html(a.html, spec, &a.model, plan, NULL,
					 change, 1, &diag)) {
		fprintf(stderr, "gpumem plan: --html: %s\n", diag.msg);
		code = GM_EXIT_USAGE;
		goto out;
	}
	/* under a cap the plan's replay ran on a card of the cap's size;
	 * the trace says the card and the cap, so that replay names the
	 * cap where a request does not fit under it (the same figures) */
	if (trace && g.cap_bytes && tb.so.total_bytes == g.cap_bytes &&
	    g.cap_bytes < gm_plan_gpu_usable(&g)) {
		tb.so.total_bytes = gm_plan_gpu_usable(&g);
		tb.po.cap_bytes = g.cap_bytes;
	}
	if (trace && trace_write(trace, &tb, &diag)) {
		fprintf(stderr, "gpumem plan: --trace: %s\n", diag.msg);
		code = GM_EXIT_USAGE;
		goto out;
	}
	v = a.format == GM_FORMAT_TABLE ? gm_plan_report_table(plan) :
	    a.format == GM_FORMAT_CSV ? gm_plan_report_csv(plan) :
	    gm_plan_report(plan);
	if (!v || (rc = gm_emit(stdout, v, a.format))) {
		/* a write error: main() says why, once */
		if (!v || rc != GM_EIO)
			gm_error("cannot print the report");
		code = GM_EXIT_USAGE;
		goto out;
	}
	if (!plan->fits && !change)
		change = plan_search(spec, &g, &a.model, plan);
	if (!plan->fits)
		plan_hint(change);
	code = plan->fits ? GM_EXIT_OK : GM_EXIT_NO;
out:
	free(change);
	free(tb.ev);
	gm_catalog_free(&catalog);
	gm_val_free(v);
	free(plan);
	free(spec);
	return code;
}
