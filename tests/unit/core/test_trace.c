/* Unit tests for core/trace.c: the RMM CSV reader and the replayer. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "error.h"
#include "pool.h"
#include "sim.h"
#include "trace.h"
#include "units.h"

static const char good[] =
	"Thread,Time,Action,Pointer,Size,Stream\n"
	"1,10:00:00.000001,allocate,0x7f0000000000,1048576,0x0\n"
	"1,10:00:00.000002,allocate,0x7f0000100000,4096,0x0\n"
	"1,10:00:00.000003,allocate failure,(nil),999999999999,0x0\n"
	"1,10:00:00.000004,free,0x7f0000000000,1048576,0x0\n"
	"\n"
	"1,10:00:00.000005,free,0x7f0000100000,4096,0x0\n";

static void parses_rmm(void **state)
{
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_trace_parse(good, strlen(good), "t.csv", &t, &d),
			 0);
	assert_int_equal(t.n, 5);
	assert_int_equal(t.ev[0].action, GM_TRACE_ALLOC);
	assert_int_equal(t.ev[0].ptr, 0x7f0000000000ULL);
	assert_int_equal(t.ev[0].size, 1048576);
	assert_int_equal(t.ev[0].time_ns, 36000000001000ULL);
	assert_int_equal(t.ev[2].action, GM_TRACE_ALLOC_FAILURE);
	assert_int_equal(t.ev[3].action, GM_TRACE_FREE);
	gm_trace_free(&t);
}

/* "segment" lines: parsed as hints; a replay on the simulated card puts
 * the next segment of that size at the recorded address, and only it. */
static void segment_hints(void **state)
{
	static const char txt[] =
		"Action,Pointer,Size\n"
		"segment,0x7f0000000000,20971520\n"
		"allocate,0x7f0000000000,4194304\n";
	static const char bad[] = "Action,Pointer,Size\nsegment,0x0,1\n";
	struct gm_sim_options so = {.total_bytes = 64 * GM_GiB};
	struct gm_backend *be;
	struct gm_pool *pool;
	struct gm_trace t;
	struct gm_diag d;
	uint64_t a, b;

	(void)state;
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "h", &t, &d), 0);
	assert_int_equal(t.n, 2);
	assert_int_equal(t.ev[0].action, GM_TRACE_SEGMENT);
	assert_int_equal(t.ev[0].ptr, 0x7f0000000000ULL);
	assert_int_equal(t.ev[0].size, 20 * GM_MiB);
	gm_trace_free(&t);
	assert_int_equal(gm_trace_parse(bad, strlen(bad), "b", &t, &d),
			 GM_EINVAL);
	assert_non_null(strstr(d.msg, "b:2:"));

	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_pool_create(&pool, be, NULL, &d), 0);
	/* a hint of another size is dropped by the next segment */
	gm_sim_place_next(be, 0x7f0000000000ULL, 2 * GM_MiB);
	assert_int_equal(gm_pool_alloc(pool, 4 * GM_MiB, 0, &a), 0);
	assert_true(a != 0x7f0000000000ULL);
	gm_sim_place_next(be, 0x7e0000000000ULL, 64 * GM_MiB);
	assert_int_equal(gm_pool_alloc(pool, 64 * GM_MiB, 0, &b), 0);
	assert_int_equal(b, 0x7e0000000000ULL);
	/* used once */
	assert_int_equal(gm_pool_alloc(pool, 64 * GM_MiB, 0, &b), 0);
	assert_true(b != 0x7e0000000000ULL);
	gm_pool_destroy(pool);
	be->ops->destroy(be);
}

static void columns_any_order_and_us(void **state)
{
	static const char txt[] = "Action,Size,Pointer,Time,Stream,Thread\r\n"
				  "allocate,100,7f00,12.5,3,0\r\n";
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "x", &t, &d), 0);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.ev[0].ptr, 0x7f00);
	assert_int_equal(t.ev[0].stream, 3);
	assert_int_equal(t.ev[0].time_ns, 12500);
	gm_trace_free(&t);
}

static void expect_bad(const char *txt, const char *where)
{
	struct gm_trace t;
	struct gm_diag d;

	memset(&d, 0, sizeof(d));
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "b.csv", &t, &d),
			 GM_EINVAL);
	if (!strstr(d.msg, where))
		fail_msg("message '%s' lacks '%s'", d.msg, where);
}

static void bad_input(void **state)
{
	(void)state;
	expect_bad("", "b.csv:1:1: empty");
	expect_bad("Thread,Time,Pointer,Size\n", "no 'Action' column");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x10,12x,0\n", "b.csv:2:19: bad Size");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,malloc,0x10,12,0\n", "b.csv:2:5: bad Action");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x10\n", "b.csv:2:");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x10,99999999999999999999999,0\n",
		   "bad Size");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x0,10,0\n", "needs a pointer");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1:,allocate,0x10,10,0\n", "bad Time");
	/* More fields than the header, a column named twice, a zero size
	 * pointed at its own column. */
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x10,10,0,7\n",
		   "b.csv:2:25: 7 fields, the header has 6");
	expect_bad("Thread,Time,Action,Action,Pointer,Size,Stream\n",
		   "b.csv:1:20: the header names 'Action' twice");
	expect_bad("Thread,Time,Action,Pointer,Size,Stream\n"
		   "1,1,allocate,0x10,0,0\n", "b.csv:2:19: an allocation");
}

/* A free of a pointer whose allocation failed in the replay is a
 * failed_free, not an unmatched one; a stream past the pool's 1,024 is
 * counted apart from out-of-memory failures. */
static void failed_frees_and_streams(void **state)
{
	struct gm_sim_options so = {.total_bytes = 4 * GM_GiB};
	static char txt[1 << 20];
	struct gm_replay_result r;
	struct gm_backend *be;
	struct gm_trace t;
	struct gm_diag d;
	size_t o = 0;

	(void)state;
	o += (size_t)snprintf(txt + o, sizeof(txt) - o,
		"Thread,Time,Action,Pointer,Size,Stream\n"
		"1,1,allocate,0x1000,8589934592,0\n"
		"1,2,free,0x1000,8589934592,0\n"
		"1,3,free,0x2000,10,0\n");
	for (int i = 0; i < 1100; i++)
		o += (size_t)snprintf(txt + o, sizeof(txt) - o,
			"1,4,allocate,0x%x,512,0x%x\n", 0x100000 + i * 0x1000,
			i + 1);
	assert_int_equal(gm_trace_parse(txt, o, "s.csv", &t, &d), 0);
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_replay(&t, be, NULL, &r, &d), 0);
	assert_int_equal(r.failed_allocations, 1);
	assert_int_equal(r.failed_frees, 1);
	assert_int_equal(r.unmatched_frees, 1);
	assert_true(r.stream_limit_allocations > 0);
	assert_int_equal(r.allocations + r.stream_limit_allocations, 1100);
	gm_trace_free(&t);
	be->ops->destroy(be);
}

/* "empty_cache" lines (gpumem plan --trace writes one where the step
 * calls torch.cuda.empty_cache()): the replay's pool releases its
 * cached segments there, so a later, larger block does not come on top
 * of the freed one's segment: 30 MiB reserved at the peak, not 50. */
static void empty_cache_releases(void **state)
{
	struct gm_sim_options so = {.total_bytes = 4 * GM_GiB};
	const char *body[2] = {"", "1,3,empty_cache,0x0,0,0\n"};
	uint64_t peak[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		struct gm_replay_result r;
		struct gm_backend *be;
		struct gm_trace t;
		struct gm_diag d;
		char txt[512];
		int n = snprintf(txt, sizeof(txt),
			"Thread,Time,Action,Pointer,Size,Stream\n"
			"1,1,allocate,0x1000,20971520,0\n"
			"1,2,free,0x1000,20971520,0\n"
			"%s"
			"1,4,allocate,0x2000,31457280,0\n"
			"1,5,free,0x2000,31457280,0\n", body[k]);

		assert_int_equal(gm_trace_parse(txt, (size_t)n, "e.csv", &t,
						&d), 0);
		assert_int_equal(gm_sim_backend_create(&be, &so), 0);
		assert_int_equal(gm_replay(&t, be, NULL, &r, &d), 0);
		assert_int_equal(r.allocations, 2);
		peak[k] = r.peak_reserved_bytes;
		gm_trace_free(&t);
		be->ops->destroy(be);
	}
	assert_int_equal(peak[0], 50 * GM_MiB);
	assert_int_equal(peak[1], 30 * GM_MiB);
}

static void gzip_and_replay(void **state)
{
	char path[] = "/tmp/gm-trace-XXXXXX";
	struct gm_sim_options so = {.total_bytes = 80 * GM_GiB};
	struct gm_backend *be;
	struct gm_replay_result r;
	struct gm_trace t;
	struct gm_diag d;
	int fd = mkstemp(path);
	gzFile gz;

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	gz = gzopen(path, "wb");
	assert_non_null(gz);
	gzputs(gz, good);
	gzputs(gz, "1,6,free,0xdead000,10,0\n"); /* never allocated */
	gzclose(gz);
	assert_int_equal(gm_trace_read(path, &t, &d), 0);
	unlink(path);
	assert_int_equal(t.n, 6);
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_replay(&t, be, NULL, &r, &d), 0);
	assert_int_equal(r.allocations, 2);
	assert_int_equal(r.frees, 2);
	assert_int_equal(r.unmatched_frees, 1);
	assert_int_equal(r.events, 5);
	assert_int_equal(r.peak_allocated_bytes, GM_MiB + 4096);
	assert_int_equal(r.trace_peak_allocated_bytes, GM_MiB + 4096);
	/* 1 MiB and 4 KiB both fit one 2 MiB small segment */
	assert_int_equal(r.peak_reserved_bytes, 2 * GM_MiB);
	assert_true(r.fragmentation >= 0 && r.fragmentation < 1);
	assert_true(r.ns_per_op > 0);
	gm_trace_free(&t);
	assert_int_equal(gm_trace_read("/nonexistent/x.csv", &t, &d), GM_EIO);
	be->ops->destroy(be);
}

/* Lines that end in CR alone are refused where the first CR is, not
 * read as one line with no events. */
static void cr_only_line_endings(void **state)
{
	static const char txt[] = "Thread,Time,Action,Pointer,Size,Stream\r"
				  "1,1,allocate,0x10,10,0\r1,2,free,0x10,10,0\r";

	(void)state;
	expect_bad(txt, "b.csv:1:39: a carriage return inside a line");
}

/* Write len bytes of text to a gzip (gz) or plain file; returns the path
 * (static). */
static const char *write_file(const char *text, size_t len, int repeat,
			      bool gz)
{
	static char path[64];
	int fd;

	strcpy(path, "/tmp/gm-trace-XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	if (gz) {
		gzFile g = gzdopen(fd, "wb9");

		assert_non_null(g);
		for (int i = 0; i < repeat; i++)
			assert_int_equal(gzwrite(g, text, (unsigned)len),
					 (int)len);
		gzclose(g);
	} else {
		for (int i = 0; i < repeat; i++)
			assert_int_equal(write(fd, text, len), (ssize_t)len);
		close(fd);
	}
	return path;
}

static void expect_read_bad(const char *path, const char *where)
{
	struct gm_trace t;
	struct gm_diag d;

	memset(&d, 0, sizeof(d));
	assert_int_equal(gm_trace_read(path, &t, &d), GM_EINVAL);
	if (!strstr(d.msg, where))
		fail_msg("message '%s' lacks '%s'", d.msg, where);
	assert_null(t.ev);
}

/* The reader streams: a line, the lines, the events and a gzip stream's
 * expansion are bounded, with the line where the bound was passed
 * (small bounds reach each one with small generated inputs). */
static void streaming_bounds(void **state)
{
	struct gm_trace_limits l = {.max_line = 64, .max_lines = 50,
				    .max_events = 3, .max_ratio = 20,
				    .ratio_after = 4096};
	static const char head[] = "Action,Pointer,Size\n";
	static const char ev[] = "allocate,0x10,10\nfree,0x10,10\n";
	char big[256];
	const char *p;
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	gm_trace_set_limits(&l);
	/* a long line, plain and compressed */
	memset(big, 'x', sizeof(big));
	for (int gz = 0; gz < 2; gz++) {
		p = write_file(big, sizeof(big), 1, gz);
		expect_read_bad(p, ":1:1: a line longer than 64 bytes");
		unlink(p);
	}
	/* /dev/zero: refused at the first chunk, not read to the end */
	expect_read_bad("/dev/zero", "/dev/zero:1:1: NUL byte");
	/* the fourth event */
	{
		char txt[256];
		size_t n = (size_t)snprintf(txt, sizeof(txt), "%s%s%s", head,
					    ev, ev);

		p = write_file(txt, n, 1, true);
		expect_read_bad(p, ":5:1: more than 3 events");
		unlink(p);
		assert_int_equal(gm_trace_parse(txt, n, "m", &t, &d),
				 GM_EINVAL);
		assert_non_null(strstr(d.msg, "m:5:1: more than 3 events"));
	}
	/* blank lines past the bound on lines */
	{
		char txt[128];
		size_t n = (size_t)snprintf(txt, sizeof(txt), "%s", head);

		memset(txt + n, '\n', 60);
		p = write_file(txt, n + 60, 1, false);
		expect_read_bad(p, ":51:1: more than 50 lines");
		unlink(p);
	}
	/* a compression bomb of newlines stops past 4 KiB */
	{
		static char nl[1 << 16];

		l.max_lines = 1ul << 30;
		gm_trace_set_limits(&l);
		memset(nl, '\n', sizeof(nl));
		memcpy(nl, head, strlen(head));
		p = write_file(nl, sizeof(nl), 64, true);
		expect_read_bad(p, "expands more than 20 times");
		unlink(p);
	}
	gm_trace_set_limits(NULL);
	/* within the default bounds, the same events read */
	{
		char txt[256];
		size_t n = (size_t)snprintf(txt, sizeof(txt), "%s%s%s%s", head,
					    ev, ev, ev);

		p = write_file(txt, n, 1, true);
		assert_int_equal(gm_trace_read(p, &t, &d), 0);
		unlink(p);
		assert_int_equal(t.n, 6);
		assert_int_equal(t.ev[5].line, 7);
		gm_trace_free(&t);
	}
}

/* A PyTorch memory-history trace (tools/measure/tracefile.py): initial
 * blocks, alloc / free_completed, segment hints, other actions read and
 * not replayed; bad lines named by line and column. */
static void torch_memory_history(void **state)
{
	static const char txt[] =
		"{\"name\": \"x\", \"initial\": [[4096, 512]], "
		"\"segments\": [[4096, 2097152]]}\n"
		"[\"segment_alloc\", 8388608, 20971520, 0, \"\"]\n"
		"[\"alloc\", 8388608, 4194304, 7, \"a.py:f:1\"]\n"
		"[\"free_requested\", 8388608, 4194304, 7, \"\"]\n"
		"[\"free_completed\", 8388608, 4194304, 7, \"\"]\n"
		"[\"oom\", 0, 99, 0, \"\"]\n";
	static const char seg_free[] =
		"{\"initial\": []}\n"
		"[\"segment_alloc\", 8388608, 20971520, 0, \"\"]\n"
		"[\"alloc\", 8388608, 4194304, 0, \"\"]\n"
		"[\"segment_free\", 8388608, 20971520, 0, \"\"]\n";
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "t.jsonl", &t, &d),
			 0);
	assert_int_equal(t.n, 4);
	assert_int_equal(t.ev[0].action, GM_TRACE_ALLOC);
	assert_int_equal(t.ev[0].ptr, 4096);
	assert_int_equal(t.ev[0].size, 512);
	assert_int_equal(t.ev[1].action, GM_TRACE_SEGMENT);
	assert_int_equal(t.ev[2].action, GM_TRACE_ALLOC);
	assert_int_equal(t.ev[2].stream, 7);
	assert_int_equal(t.ev[2].line, 3);
	assert_int_equal(t.ev[3].action, GM_TRACE_FREE);
	gm_trace_free(&t);
	/* a trace that gave a segment back keeps no hints */
	assert_int_equal(gm_trace_parse(seg_free, strlen(seg_free), "s", &t,
					&d), 0);
	assert_int_equal(t.n, 1);
	assert_int_equal(t.ev[0].action, GM_TRACE_ALLOC);
	gm_trace_free(&t);
	/* lines not as json.dumps writes them (spaces, escapes) read
	 * through libyaml, in order with the others */
	{
		static const char mixed[] =
			"{\"initial\": []}\n"
			"[\"alloc\", 4096, 512, 0, \"a\"]\n"
			"[ \"alloc\" ,8192,  512, -1, \"b\\u00e9\" ]\n"
			"[\"alloc\", 12288, 512, 0, \"c\"]\n"
			"[\"free_completed\", 4096, 512, 0, \"\"]\n";

		assert_int_equal(gm_trace_parse(mixed, strlen(mixed), "m",
						&t, &d), 0);
		assert_int_equal(t.n, 4);
		assert_int_equal(t.ev[0].ptr, 4096);
		assert_int_equal(t.ev[1].ptr, 8192);
		assert_int_equal(t.ev[1].stream, UINT64_MAX);
		assert_int_equal(t.ev[1].line, 3);
		assert_int_equal(t.ev[2].ptr, 12288);
		assert_int_equal(t.ev[3].action, GM_TRACE_FREE);
		gm_trace_free(&t);
	}
	expect_bad("{\"initial\": []}\n[\"alloc\", 0, 2, 0, \"\"]\n",
		   "b.csv:2:11: an alloc needs an address");
	expect_bad("{\"initial\": []}\n[\"alloc\", 1, 2, 0, \"\"]\n"
		   "[\"alloc\", 2, 2, 0, \"\"] x\n", "b.csv:3:");
	expect_bad("{\"name\": \"x\"}\n", "b.csv:1:1: a PyTorch");
	expect_bad("{\"initial\": [[1, 2, 3]]}\n", "b.csv:1:21: an 'initial'"
		   " block has more");
	expect_bad("{\"initial\": []}\n[\"malloc\", 1, 2, 0, \"\"]\n",
		   "b.csv:2:2: unknown action 'malloc'");
	expect_bad("{\"initial\": []}\n[\"alloc\", -1, 2, 0, \"\"]\n",
		   "b.csv:2:11: the address is not an integer");
	expect_bad("{\"initial\": []}\n[\"alloc\", 16, \"2\", 0, \"\"]\n",
		   "b.csv:2:15: the size is not an integer");
	expect_bad("{\"initial\": []}\n[\"alloc\", 16, 2, 0, \"\"] [1]\n",
		   "b.csv:2:");
	expect_bad("{\"initial\": []}\nThread,Time\n", "b.csv:2:1: not a "
		   "JSON list");
}

/* A failed allocation is named by its line, size and what the pool held
 * then; the trace's own peak counts what it asked for, served or not. */
static void failure_named(void **state)
{
	static const char txt[] =
		"Action,Pointer,Size\n"
		"allocate,0x1000,1048576\n"
		"allocate,0x2000,1000000000000000\n"
		"allocate,0x3000,1000000000000000\n"
		"free,0x2000,1000000000000000\n";
	struct gm_sim_options so = {.total_bytes = 80 * GM_GiB};
	struct gm_replay_result r;
	struct gm_backend *be;
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "f", &t, &d), 0);
	assert_int_equal(gm_sim_backend_create(&be, &so), 0);
	assert_int_equal(gm_replay(&t, be, NULL, &r, &d), 0);
	assert_int_equal(r.failed_allocations, 2);
	assert_int_equal(r.first_failure.line, 3);
	assert_int_equal(r.first_failure.size, 1000000000000000ULL);
	assert_int_equal(r.first_failure.err, GM_EDEVNOMEM);
	assert_int_equal(r.first_failure.allocated_bytes, GM_MiB);
	assert_int_equal(r.first_failure.reserved_bytes, 2 * GM_MiB);
	assert_int_equal(r.trace_peak_allocated_bytes,
			 GM_MiB + 2000000000000000ULL);
	gm_trace_free(&t);
	be->ops->destroy(be);
}

/* "# gpumem-replay:" before the header is kept for the caller; a second
 * one is an error. */
static void options_line(void **state)
{
	static const char txt[] = "# gpumem-replay: --no-cross-stream\n"
				  "# other\nAction,Pointer,Size\n";
	struct gm_trace t;
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_trace_parse(txt, strlen(txt), "o", &t, &d), 0);
	assert_string_equal(t.options, " --no-cross-stream");
	assert_int_equal(t.options_line, 1);
	gm_trace_free(&t);
	expect_bad("# gpumem-replay: a\n# gpumem-replay: b\n",
		   "b.csv:2:1: a second");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_rmm),
		cmocka_unit_test(columns_any_order_and_us),
		cmocka_unit_test(segment_hints),
		cmocka_unit_test(empty_cache_releases),
		cmocka_unit_test(bad_input),
		cmocka_unit_test(gzip_and_replay),
		cmocka_unit_test(failed_frees_and_streams),
		cmocka_unit_test(cr_only_line_endings),
		cmocka_unit_test(streaming_bounds),
		cmocka_unit_test(torch_memory_history),
		cmocka_unit_test(failure_named),
		cmocka_unit_test(options_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
