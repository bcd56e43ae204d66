/*
 * cmd_replay.c - gpumem replay TRACE: run an RMM CSV allocation log
 * through the allocator core on a simulated card and report peak
 * allocated and reserved bytes, fragmentation and host time per op.
 */
#include "cmd.h"

#include "emit.h"
#include "error.h"
#include "pool.h"
#include "sim.h"
#include "trace.h"
#include "units.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The H200's cudaMemGetInfo total (tools/bench/results/catalog-h200.md). */
#define DEFAULT_CAPACITY (143155 * GM_MiB)
/* Where segments without a recorded address go (sim.h): driver, whose
 * address order replays PyTorch's traces closer without segment lines
 * (48 of 52 within 0.5% against 45 with rising; the table in
 * tools/bench/results/alloc-emulation.md). */
#define DEFAULT_PLACEMENT GM_SIM_PLACE_DRIVER

static void help(void)
{
	printf("Usage: gpumem replay TRACE [options]\n\n"
	       "Replay an RMM CSV allocation log (Thread,Time,Action,Pointer,"
	       "Size,Stream;\n.gz is read too) through the gpumem allocator "
	       "on a simulated card.\n\n"
	       "Options:\n"
	       "  --format table|json|yaml|csv   output format (table)\n"
	       "  --capacity SIZE       simulated card (default 143155MiB, "
	       "an H200)\n"
	       "  --cap SIZE|FRACTION   cap on reserved bytes\n"
	       "  --virtual-segments    grow/shrink virtual segments in 2 MiB"
	       " granules\n"
	       "  --max-split SIZE      never split blocks this large "
	       "(PyTorch max_split_size)\n"
	       "  --roundup-divisions N round sizes > 1 MiB to N steps per "
	       "power of 2\n"
	       "  --segments            also list each allocation that took a"
	       " new segment\n"
	       "  --no-segment-hints    ignore the trace's 'segment' lines "
	       "(recorded segment\n"
	       "                        addresses; by default the simulated "
	       "card reuses them)\n"
	       "  --placement driver|rising  where segments without a "
	       "recorded address go:\n"
	       "                        a downward-growing heap as cudaMalloc"
	       " on the H200\n"
	       "                        (driver, default) or ascending "
	       "addresses (rising)\n"
	       "  --no-cross-stream     never move a free segment to another "
	       "stream (PyTorch's\n"
	       "                        policy)\n"
	       "  --cross-stream        move free segments between streams "
	       "(the default)\n"
	       "  --help                this text\n\n"
	       "A trace may also be a PyTorch memory-history recording "
	       "(tools/measure/tracefile.py).\n"
	       "A '# gpumem-replay: OPTIONS' line before the header (gpumem "
	       "plan --trace\nwrites one) gives the options the trace was made"
	       " with; options on the command\nline win.\n\n"
	       "Exit status: 0 every allocation was served, 1 one failed "
	       "(the first is named\non stderr), 2 bad input.\n");
}

/* --no-segment-hints: drop the trace's "segment" lines. */
static void drop_hints(struct gm_trace *t)
{
	size_t n = 0;

	for (size_t i = 0; i < t->n; i++)
		if (t->ev[i].action != GM_TRACE_SEGMENT)
			t->ev[n++] = t->ev[i];
	t->n = n;
}

/*
 * --segments: "segments", one entry per allocation that grew reserved
 * bytes: its event (0-based index of the trace's data lines), its size
 * as asked, the bytes the pool took and the reserved bytes after.
 */
static int add_segments(struct gm_val *v, const struct gm_trace *t,
			struct gm_backend *be,
			const struct gm_pool_options *po, struct gm_diag *d)
{
	struct gm_replay_growth *g;
	struct gm_val *arr;
	size_t n;
	int err = gm_replay_growths(t, be, po, &g, &n, d);

	if (err)
		return err;
	arr = gm_val_arr();
	for (size_t i = 0; arr && i < n; i++) {
		struct gm_val *e = gm_val_obj();

		gm_obj_set_uint(e, "event", g[i].event);
		gm_obj_set_uint(e, "size_bytes", g[i].size);
		gm_obj_set_uint(e, "segment_bytes", g[i].bytes);
		gm_obj_set_uint(e, "reserved_bytes", g[i].reserved_bytes);
		gm_arr_push(arr, e);
	}
	free(g);
	if (!arr)
		return gm_diag_set(d, GM_ENOMEM, "out of memory");
	gm_obj_set(v, "segments", arr);
	return 0;
}

/* Everything the options set. */
struct ropts {
	enum gm_format format;
	struct gm_sim_options so;
	struct gm_pool_options po;
	bool segments, hints;
};

static const struct option longopts[] = {
	{"format", required_argument, NULL, 'f'},
	{"capacity", required_argument, NULL, 'c'},
	{"cap", required_argument, NULL, 'l'},
	{"virtual-segments", no_argument, NULL, 'v'},
	{"max-split", required_argument, NULL, 's'},
	{"roundup-divisions", required_argument, NULL, 'r'},
	{"segments", no_argument, NULL, 'g'},
	{"no-segment-hints", no_argument, NULL, 'n'},
	{"placement", required_argument, NULL, 'p'},
	{"no-cross-stream", no_argument, NULL, 'x'},
	{"cross-stream", no_argument, NULL, 'X'},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* What a trace's "# gpumem-replay:" line may set: how the card and the
 * pool behave, not what is printed. */
static const char trace_settable[] = "clvsrnpxX";

/*
 * Take option c (value optarg) into o. Returns 0, or GM_EXIT_USAGE with
 * the message in msg.
 */
static int take_option(struct ropts *o, int c, char *msg, size_t len)
{
	char *end;

	switch (c) {
	case 'f': {
		struct gm_diag d;

		if (gm_format_parse(optarg, &o->format, &d)) {
			snprintf(msg, len, "%.200s", d.msg);
			return GM_EXIT_USAGE;
		}
		return 0;
	}
	case 'c':
		if (gm_size_parse(optarg, &o->so.total_bytes) ||
		    !o->so.total_bytes)
			break;
		return 0;
	case 'l':
		if (gm_size_or_fraction_parse(optarg, &o->po.cap_bytes,
					      &o->po.cap_fraction) ||
		    (!o->po.cap_bytes && o->po.cap_fraction <= 0)) {
			char why[256] = "";
			uint64_t b;

			if (!strchr(optarg, '.') && gm_size_parse(optarg, &b)) {
				strcpy(why, ": ");
				gm_size_error(optarg, why + 2, sizeof(why) - 2);
			}
			snprintf(msg, len, "--cap: '%s' is not a size or a "
				 "fraction in (0, 1] (a fraction has a "
				 "decimal point: 1.0 is the whole card)%s",
				 optarg, why);
			return GM_EXIT_USAGE;
		}
		/* as every cap without a unit (allocator/README.md) */
		if (o->po.cap_bytes && gm_size_bare_small(optarg))
			gm_cmd_bare_size_warn("replay", "--cap", optarg,
					      ", or 1.0 for the whole card");
		return 0;
	case 'v':
		o->po.virtual_segments = true;
		o->so.virtual_segments = true;
		return 0;
	case 's':
		if (gm_size_parse(optarg, &o->po.max_split_bytes) ||
		    o->po.max_split_bytes < 20 * GM_MiB) {
			snprintf(msg, len, "--max-split: '%s' is not a size "
				 "of at least 20MiB", optarg);
			return GM_EXIT_USAGE;
		}
		return 0;
	case 'g':
		o->segments = true;
		return 0;
	case 'n':
		o->hints = false;
		return 0;
	case 'p':
		if (gm_sim_placement_parse(optarg, &o->so.placement)) {
			snprintf(msg, len, "--placement: '%s' is not rising "
				 "or driver", optarg);
			return GM_EXIT_USAGE;
		}
		return 0;
	case 'x':
		o->po.no_cross_stream = true;
		return 0;
	case 'X':
		o->po.no_cross_stream = false;
		return 0;
	case 'r': {
		unsigned long n = strtoul(optarg, &end, 10);

		if (*end || !*optarg || n > 64 || (n & (n - 1))) {
			snprintf(msg, len, "--roundup-divisions: '%s' is not "
				 "0 or a power of 2 up to 64", optarg);
			return GM_EXIT_USAGE;
		}
		o->po.roundup_power2_divisions = (unsigned)n;
		return 0;
	}
	}
	{
		char why[256];

		gm_size_error(optarg, why, sizeof(why));
		snprintf(msg, len, "--capacity: '%s' is not a size: %s",
			 optarg, why);
	}
	return GM_EXIT_USAGE;
}

/*
 * Parse the command line (argv[0] = "replay") into o; *trace = the
 * TRACE argument. 0, GM_EXIT_OK + 1 after --help, or GM_EXIT_USAGE
 * (message printed).
 */
static int parse_command_line(int argc, char **argv, struct ropts *o,
			      const char **trace)
{
	char msg[1024];
	uint64_t seen = 0;
	unsigned cross = 0;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		if (gm_cmd_once("replay", &seen, c, longopts, NULL))
			return GM_EXIT_USAGE;
		/* opposites: the second is not silently the one that counts */
		if ((c == 'x' || c == 'X') && (cross |= c == 'x' ? 1 : 2) == 3)
			return gm_cmd_usage_error("replay", "--cross-stream and "
						  "--no-cross-stream: give "
						  "one");
		if (c == 'h') {
			help();
			return 1;
		}
		if (c == ':' || c == '?')
			return gm_cmd_option_error("replay", c, argv, longopts);
		if (take_option(o, c, msg, sizeof(msg)))
			return gm_cmd_usage_error("replay", "%s", msg);
	}
	if (optind != argc - 1)
		return gm_cmd_usage_error("replay", optind >= argc ?
			"missing TRACE" : "one TRACE only");
	*trace = argv[optind];
	return 0;
}

/*
 * Apply the trace's "# gpumem-replay:" options to o (before the command
 * line's, which win). 0 or GM_EXIT_USAGE (message printed, naming the
 * file and line).
 */
static int trace_options(const char *path, const struct gm_trace *t,
			 struct ropts *o)
{
	char *copy, *tok, *save = NULL, *args[64], msg[1024];
	int n = 1, c, rc = 0;

	if (!t->options)
		return 0;
	copy = strdup(t->options);
	if (!copy) {
		fprintf(stderr, "gpumem replay: out of memory\n");
		return GM_EXIT_USAGE;
	}
	args[0] = (char *)"replay";
	for (tok = strtok_r(copy, " \t\r", &save); tok && n < 63;
	     tok = strtok_r(NULL, " \t\r", &save))
		args[n++] = tok;
	args[n] = NULL;
	if (tok) {
		fprintf(stderr, "gpumem replay: %s:%u:1: # gpumem-replay: more "
			"than 62 words\n", path, t->options_line);
		free(copy);
		return GM_EXIT_USAGE;
	}
	opterr = 0;
	optind = 1;
	msg[0] = '\0';
	while (!rc && (c = getopt_long(n, args, "+:", longopts, NULL)) != -1) {
		if (c == '?' || c == ':' || !strchr(trace_settable, c)) {
			const char *opt = args[optind - 1];

			for (size_t i = 0; longopts[i].name; i++)
				if (longopts[i].val == c && c != '?')
					opt = longopts[i].name;
			snprintf(msg, sizeof(msg), "'%s%s' is not an option a "
				 "trace can set", opt == args[optind - 1] ?
				 "" : "--", opt);
			rc = GM_EXIT_USAGE;
		} else {
			rc = take_option(o, c, msg, sizeof(msg));
		}
	}
	if (!rc && optind < n) {
		snprintf(msg, sizeof(msg), "'%s' is not an option",
			 args[optind]);
		rc = GM_EXIT_USAGE;
	}
	if (rc)
		fprintf(stderr, "gpumem replay: %s:%u:1: # gpumem-replay: "
			"%s\n", path, t->options_line, msg);
	free(copy);
	return rc;
}

int gm_replay_options_write(FILE *fp, const struct gm_sim_options *so,
			    const struct gm_pool_options *po)
{
	bool ok = fprintf(fp, "# gpumem-replay: --capacity %" PRIu64
			  " --placement %s", so->total_bytes,
			  so->placement == GM_SIM_PLACE_DRIVER ? "driver" :
			  "rising") > 0;

	ok = ok && fputs(po->no_cross_stream ? " --no-cross-stream" :
			 " --cross-stream", fp) >= 0;
	if (ok && (po->virtual_segments || so->virtual_segments))
		ok = fputs(" --virtual-segments", fp) >= 0;
	if (ok && po->cap_bytes)
		ok = fprintf(fp, " --cap %" PRIu64, po->cap_bytes) > 0;
	if (ok && po->cap_fraction > 0)
		ok = fprintf(fp, " --cap %.17g", po->cap_fraction) > 0;
	if (ok && po->max_split_bytes)
		ok = fprintf(fp, " --max-split %" PRIu64,
			     po->max_split_bytes) > 0;
	if (ok && po->roundup_power2_divisions)
		ok = fprintf(fp, " --roundup-divisions %u",
			     po->roundup_power2_divisions) > 0;
	ok = ok && fputc('\n', fp) != EOF;
	return ok ? 0 : GM_EIO;
}

/* Why an allocation failed, in words. */
static const char *failure_reason(int err)
{
	switch (err) {
	case GM_ELIMIT:
		return "over the cap";
	case GM_EDEVNOMEM:
		return "the card is full";
	case GM_ENOMEM:
		return "no arena for one more stream (the pool's 1,024)";
	case GM_EINVAL:
		return "larger than any request the pool serves";
	}
	return gm_strerror(err);
}

/* "first_failure" of the output and the one line on stderr. */
static void report_failure(struct gm_val *v, const char *path,
			   const struct gm_replay_result *r,
			   const struct ropts *o)
{
	const struct gm_replay_failure *f = &r->first_failure;
	struct gm_val *e = gm_val_obj();
	char a[32], b[32], c[32], d[32];
	uint64_t failed = r->failed_allocations + r->stream_limit_allocations;

	gm_obj_set_uint(e, "line", f->line);
	gm_obj_set_uint(e, "size_bytes", f->size);
	gm_obj_set_str(e, "reason", failure_reason(f->err));
	gm_obj_set_uint(e, "allocated_bytes", f->allocated_bytes);
	gm_obj_set_uint(e, "reserved_bytes", f->reserved_bytes);
	gm_obj_set(v, "first_failure", e);
	fprintf(stderr, "gpumem replay: %s:%u: an allocation of %s failed "
		"(%s): %s allocated, %s reserved on a %s card; %" PRIu64
		" allocation%s failed in all\n", path, f->line,
		gm_size_format(a, sizeof(a), f->size), failure_reason(f->err),
		gm_size_format(b, sizeof(b), f->allocated_bytes),
		gm_size_format(c, sizeof(c), f->reserved_bytes),
		gm_size_format(d, sizeof(d), o->so.total_bytes), failed,
		failed == 1 ? "" : "s");
}

int gm_cmd_replay(int argc, char **argv)
{
	struct ropts o = {
		.format = GM_FORMAT_TABLE,
		.so = {.total_bytes = DEFAULT_CAPACITY,
		       .placement = DEFAULT_PLACEMENT},
		.hints = true,
	};
	struct gm_replay_result r;
	struct gm_backend *be = NULL;
	const char *path = NULL;
	struct gm_trace t;
	struct gm_diag d;
	struct gm_val *v;
	int err, rc;

	rc = parse_command_line(argc, argv, &o, &path);
	if (rc)
		return rc == 1 ? GM_EXIT_OK : rc;
	err = gm_trace_read(path, &t, &d);
	if (err) {
		fprintf(stderr, "gpumem replay: %s\n", d.msg);
		return gm_exit_code(err);
	}
	/* the trace's options first, then the command line's again */
	rc = trace_options(path, &t, &o);
	if (!rc && t.options)
		rc = parse_command_line(argc, argv, &o, &path);
	if (rc) {
		gm_trace_free(&t);
		return rc;
	}
	if (!o.hints)
		drop_hints(&t);
	err = gm_sim_backend_create(&be, &o.so);
	if (!err)
		err = gm_replay(&t, be, &o.po, &r, &d);
	else
		gm_diag_set(&d, err, "cannot create the simulated card");
	if (err) {
		fprintf(stderr, "gpumem replay: %s\n", d.msg);
		gm_trace_free(&t);
		if (be)
			be->ops->destroy(be);
		return gm_exit_code(err);
	}
	v = gm_val_obj();
	gm_obj_set_str(v, "trace", path);
	gm_obj_set_uint(v, "events", r.events);
	gm_obj_set_uint(v, "allocations", r.allocations);
	gm_obj_set_uint(v, "frees", r.frees);
	gm_obj_set_uint(v, "peak_allocated_bytes", r.peak_allocated_bytes);
	gm_obj_set_uint(v, "peak_reserved_bytes", r.peak_reserved_bytes);
	gm_obj_set_real(v, "fragmentation", r.fragmentation);
	gm_obj_set_real(v, "ns_per_op", r.ns_per_op);
	gm_obj_set_real(v, "reserved_over_allocated",
			r.peak_allocated_bytes ?
			(double)r.peak_reserved_bytes /
			(double)r.peak_allocated_bytes : 0);
	gm_obj_set_uint(v, "trace_peak_requested_bytes",
			r.trace_peak_allocated_bytes);
	gm_obj_set_uint(v, "failed_allocations", r.failed_allocations);
	gm_obj_set_uint(v, "stream_limit_allocations",
			r.stream_limit_allocations);
	gm_obj_set_uint(v, "failed_frees", r.failed_frees);
	gm_obj_set_uint(v, "unmatched_frees", r.unmatched_frees);
	gm_obj_set_uint(v, "duplicate_allocations", r.duplicate_allocations);
	gm_obj_set_uint(v, "num_device_alloc", r.num_device_alloc);
	gm_obj_set_uint(v, "num_device_free", r.num_device_free);
	gm_obj_set_uint(v, "num_alloc_retries", r.num_alloc_retries);
	gm_obj_set_uint(v, "capacity_bytes", o.so.total_bytes);
	gm_obj_set_bool(v, "virtual_segments", o.po.virtual_segments);
	gm_obj_set_bool(v, "cross_stream", !o.po.no_cross_stream);
	if (o.segments && (err = add_segments(v, &t, be, &o.po, &d))) {
		fprintf(stderr, "gpumem replay: %s\n", d.msg);
		gm_val_free(v);
		gm_trace_free(&t);
		be->ops->destroy(be);
		return gm_exit_code(err);
	}
	if (r.first_failure.line)
		report_failure(v, path, &r, &o);
	rc = gm_emit(stdout, v, o.format) ? GM_EXIT_USAGE :
	     r.first_failure.line ? GM_EXIT_NO : GM_EXIT_OK;
	gm_val_free(v);
	gm_trace_free(&t);
	be->ops->destroy(be);
	return rc;
}
