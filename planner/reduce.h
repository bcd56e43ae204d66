/*
 * reduce.h - the staging buffer PyTorch's CUDA reduction kernel takes
 * from the caching allocator when it splits one sum over several thread
 * blocks (reduce.c).
 *
 * Where the planner meets it: a gradient that sums over the tokens, a
 * linear's bias gradient (grad.sum(0) of a tokens x out tensor) and a
 * norm weight's (the product summed back to its broadcast shape). The
 * buffer is allocated and freed around the kernel; at 8192 tokens it is
 * 48 to 133 MiB on an H200 while the result is a few KiB.
 *
 * Units: bytes. No errors: unknown inputs give the largest buffer the
 * kernel could take (see gm_reduce_staging_bytes).
 */
#ifndef GM_PLANNER_REDUCE_H
#define GM_PLANNER_REDUCE_H

/*
 * Staging bytes PyTorch (2.x, aten/src/ATen/native/cuda/Reduce.cuh:
 * setReduceConfig, ReduceConfig::global_memory_size) allocates to sum a
 * contiguous rows x cols tensor over its rows, accumulating in fp32
 * (fp32, fp16 and bf16 inputs), on a GPU of sms multiprocessors with
 * threads_per_sm resident threads each. 0 when one block per output
 * column suffices (at most 1020 rows at 4-wide outputs) or the grid
 * alone fills the GPU.
 *
 * The kernel: outputs vectorized by 4 (2, 1 when cols is not a multiple
 * of 4), blocks of 32 x 4 threads over (output vectors, rows), so
 * grid.x = cols / (4 * 32); rows split over 4 warps leave
 * v = rows / 4 values per thread; when v >= 256 the rows are split over
 * ctas = max(min(ceil(target / grid.x), ceil(v / 16)), ceil(v / 256))
 * blocks, target = sms * threads_per_sm / 128, and each block stages
 * 32 x 4 fp32 partial sums per output column:
 * bytes = 4 * cols * ctas * 32 * vec.
 * Checked against every such buffer in the H200 allocation traces of
 * tests/data/calibration/traces (132 SMs, 2048 threads): 768 x 8192 ->
 * 48 MiB, 3072 x 8192 -> 132 MiB, 2304 x 8192 -> 132.75 MiB,
 * 768 x 16384 -> 96 MiB, 2048 x 8192 -> 128 MiB, 1600 x 4096 -> 50 MiB,
 * 6400 x 4096 -> 134.375 MiB, 4800 x 4096 -> 131.25 MiB.
 *
 * sms or threads_per_sm 0 (not known): the SM term is left out, which
 * gives the most the kernel could take for these rows and cols.
 */
double gm_reduce_staging_bytes(double rows, double cols, unsigned sms,
			       unsigned threads_per_sm);

#endif
