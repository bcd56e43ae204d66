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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parses_rmm),
		cmocka_unit_test(columns_any_order_and_us),
		cmocka_unit_test(segment_hints),
		cmocka_unit_test(bad_input),
		cmocka_unit_test(gzip_and_replay),
		cmocka_unit_test(failed_frees_and_streams),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
