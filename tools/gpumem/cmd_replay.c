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
	       "                        policy; gpumem plan --trace needs it "
	       "for FSDP)\n"
	       "  --help                this text\n");
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

int gm_cmd_replay(int argc, char **argv)
{
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
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	enum gm_format format = GM_FORMAT_TABLE;
	struct gm_sim_options so = {.total_bytes = DEFAULT_CAPACITY,
				    .placement = DEFAULT_PLACEMENT};
	struct gm_pool_options po = {0};
	struct gm_replay_result r;
	struct gm_backend *be = NULL;
	struct gm_trace t;
	struct gm_diag d;
	struct gm_val *v;
	bool segments = false, hints = true;
	int c, err, rc;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
		char *end;

		switch (c) {
		case 'h':
			help();
			return GM_EXIT_OK;
		case 'f':
			if (gm_format_parse(optarg, &format, &d))
				return gm_cmd_usage_error("replay", "%s",
							  d.msg);
			break;
		case 'c':
			if (gm_size_parse(optarg, &so.total_bytes) ||
			    !so.total_bytes)
				return gm_cmd_usage_error("replay",
					"--capacity: '%s' is not a size",
					optarg);
			break;
		case 'l':
			if (gm_size_or_fraction_parse(optarg, &po.cap_bytes,
						      &po.cap_fraction) ||
			    (!po.cap_bytes && po.cap_fraction <= 0))
				return gm_cmd_usage_error("replay",
					"--cap: '%s' is not a size or a "
					"fraction in (0, 1]", optarg);
			break;
		case 'v':
			po.virtual_segments = true;
			so.virtual_segments = true;
			break;
		case 's':
			if (gm_size_parse(optarg, &po.max_split_bytes) ||
			    po.max_split_bytes < 20 * GM_MiB)
				return gm_cmd_usage_error("replay",
					"--max-split: '%s' is not a size of "
					"at least 20MiB", optarg);
			break;
		case 'g':
			segments = true;
			break;
		case 'n':
			hints = false;
			break;
		case 'p':
			if (gm_sim_placement_parse(optarg, &so.placement))
				return gm_cmd_usage_error("replay",
					"--placement: '%s' is not rising or "
					"driver", optarg);
			break;
		case 'x':
			po.no_cross_stream = true;
			break;
		case 'r': {
			unsigned long n = strtoul(optarg, &end, 10);

			if (*end || !*optarg || n > 64 || (n & (n - 1)))
				return gm_cmd_usage_error("replay",
					"--roundup-divisions: '%s' is not 0 "
					"or a power of 2 up to 64", optarg);
			po.roundup_power2_divisions = (unsigned)n;
			break;
		}
		case ':':
		default:
			return gm_cmd_option_error("replay", c, argv);
		}
	}
	if (optind != argc - 1)
		return gm_cmd_usage_error("replay", optind >= argc ?
			"missing TRACE" : "one TRACE only");
	err = gm_trace_read(argv[optind], &t, &d);
	if (err) {
		fprintf(stderr, "gpumem replay: %s\n", d.msg);
		return gm_exit_code(err);
	}
	if (!hints)
		drop_hints(&t);
	err = gm_sim_backend_create(&be, &so);
	if (!err)
		err = gm_replay(&t, be, &po, &r, &d);
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
	gm_obj_set_str(v, "trace", argv[optind]);
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
	gm_obj_set_uint(v, "capacity_bytes", so.total_bytes);
	gm_obj_set_bool(v, "virtual_segments", po.virtual_segments);
	if (segments && (err = add_segments(v, &t, be, &po, &d))) {
		fprintf(stderr, "gpumem replay: %s\n", d.msg);
		gm_val_free(v);
		gm_trace_free(&t);
		be->ops->destroy(be);
		return gm_exit_code(err);
	}
	rc = gm_emit(stdout, v, format) ? GM_EXIT_USAGE : GM_EXIT_OK;
	gm_val_free(v);
	gm_trace_free(&t);
	be->ops->destroy(be);
	return rc;
}
