/*
 * reduce.c - PyTorch's cross-block reduction staging buffer (reduce.h).
 */
#include "reduce.h"

#include <math.h>

/* Threads per block of a column sum with 4-wide outputs: 512 / 4. */
#define RED_THREADS 128
#define RED_WARP 32
#define RED_MIN_VALUES 16
#define RED_MAX_VALUES 256

static double last_pow2(double n)
{
	double p = 1;

	while (p * 2 <= n)
		p *= 2;
	return p;
}

double gm_reduce_staging_bytes(double rows, double cols, unsigned sms,
			       unsigned threads_per_sm)
{
	double vec = 4, dim0, w, bw, bh, gx, v, c1, c2, c3, ctas, nt;

	if (rows < 1 || cols < 1)
		return 0;
	while (vec > 1 && fmod(cols, vec) != 0)
		vec /= 2;
	dim0 = cols / vec;
	nt = RED_THREADS * 4 / vec;
	/* set_block_dimension: a warp over the outputs, the rest over the
	 * rows, then the width widened to fill the block */
	w = dim0 < nt ? last_pow2(dim0) : nt;
	bw = w < RED_WARP ? w : RED_WARP;
	bh = rows < nt ? last_pow2(rows) : nt;
	bh = bh < nt / bw ? bh : nt / bw;
	bw = w < nt / bh ? w : nt / bh;
	/* rows split over the block's warps only when each thread keeps
	 * at least 16 values (or 256) */
	if (!(rows >= bh * RED_MIN_VALUES || rows >= RED_MAX_VALUES))
		return 0;
	v = ceil(rows / bh);
	gx = ceil(dim0 / bw);
	if (v < RED_MAX_VALUES)
		return 0;
	c2 = ceil(v / RED_MIN_VALUES);
	c3 = ceil(v / RED_MAX_VALUES);
	if (sms && threads_per_sm) {
		double target = sms * floor(threads_per_sm / (bw * bh));
		if (gx > target)
			return 0;
		c1 = ceil(target / gx);
		ctas = c1 < c2 ? c1 : c2;
	} else {
		ctas = c2;
	}
	ctas = ctas > c3 ? ctas : c3;
	if (ctas <= 1)
		return 0;
	return 4 * cols * ctas * bw * vec;
}
