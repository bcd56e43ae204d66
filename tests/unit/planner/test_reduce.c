/*
 * test_reduce.c - PyTorch's reduction staging buffer (planner/reduce.h):
 * every size seen in the H200 allocation traces of
 * tests/data/calibration/traces, and the kernel's thresholds.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "reduce.h"

#define MiB (1024.0 * 1024.0)

static double h200(double rows, double cols)
{
	return gm_reduce_staging_bytes(rows, cols, 132, 2048);
}

/* (rows, cols) -> bytes as the traces show them (sizes of the
 * allocation before the semaphores, 4 bytes x grid.x). */
static void traced_sizes(void **state)
{
	(void)state;
	assert_true(h200(8192, 768) == 48 * MiB);      /* GPT-2 c_proj */
	assert_true(h200(8192, 3072) == 132 * MiB);    /* c_fc */
	assert_true(h200(8192, 2304) == 139198464);    /* c_attn */
	assert_true(h200(16384, 768) == 96 * MiB);     /* BERT, RMSNorm */
	assert_true(h200(8192, 2048) == 128 * MiB);    /* Llama-1.1B norm */
	assert_true(h200(4096, 1600) == 52428800);     /* GPT-2 1.5B */
	assert_true(h200(4096, 6400) == 140902400);
	assert_true(h200(4096, 4800) == 137625600);
	assert_true(h200(8192, 4096) == 132 * MiB);    /* GPT-2 355M c_fc */
	assert_true(h200(8192, 1024) == 64 * MiB);
}

/* One block per column up to 1020 rows (fewer than 256 values per
 * thread over 4 warps); at 1024 rows 16 blocks per column. */
static void row_threshold(void **state)
{
	(void)state;
	assert_true(h200(1020, 768) == 0);
	assert_true(h200(1021, 768) > 0);
	assert_true(h200(512, 3072) == 0);
	assert_true(h200(1024, 768) == 4.0 * 768 * 16 * 128);
	assert_true(h200(0, 768) == 0);
	assert_true(h200(8192, 0) == 0);
}

/* Fewer SMs cap the split sooner; unknown SMs give the uncapped (the
 * largest) buffer. */
static void sm_count(void **state)
{
	double a100 = gm_reduce_staging_bytes(8192, 3072, 108, 2048);
	double any = gm_reduce_staging_bytes(8192, 3072, 0, 0);

	(void)state;
	/* grid.x 24, target 108 x 16 = 1728: 72 blocks per column */
	assert_true(a100 == 4.0 * 3072 * 72 * 128);
	assert_true(a100 < h200(8192, 3072));
	/* 2048 values per thread / 16 = 128 blocks */
	assert_true(any == 4.0 * 3072 * 128 * 128);
	assert_true(any >= h200(8192, 3072));
	/* 1536 threads per SM (sm_86): 12 blocks of 128 per SM */
	assert_true(gm_reduce_staging_bytes(8192, 3072, 82, 1536) ==
		    4.0 * 3072 * 41 * 128);
}

/* Columns not a multiple of 4 vectorize by 2 (or 1): 256-thread blocks
 * of 32 x 8, 512 of 32 x 16. */
static void vector_width(void **state)
{
	(void)state;
	/* 30522 / 2 = 15261 vectors, grid.x 477, 8 warps: 1024 values per
	 * thread; target 132 x 8 = 1056 gives 3 blocks per column, at
	 * least 1024 / 256 = 4 */
	assert_true(h200(8192, 30522) == 4.0 * 30522 * 4 * 32 * 2);
	/* odd: 32 x 16, grid.x 954 over the target 132 x 4: no split */
	assert_true(h200(8192, 30523) == 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(traced_sizes),
		cmocka_unit_test(row_threshold),
		cmocka_unit_test(sm_count),
		cmocka_unit_test(vector_width),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
