/*
 * kernels.cu - the verifier's device kernels, compiled by nvcc into a
 * fatbin that the library embeds (meson.build, embed.py) and loads with
 * cuModuleLoadData through the driver seam (gpu.c).
 *
 * Every value written and every judgement made is in pattern.h, which
 * the CPU emulation (emu.c) uses too. Writing and verifying are separate
 * launches, so a verify never reads what the L2 cache still holds from
 * its own writes: each kernel reads memory another kernel wrote.
 *
 * Shape: grid-stride loops over 16-byte words pairs (ulonglong2), enough
 * blocks to fill every SM; the verify kernel keeps GM_K_UNROLL loads in
 * flight per thread before it checks them. Word counts are even (chunks
 * are multiples of 2 MiB; gpu.c guarantees it).
 */
#include "pattern.h"

#define GM_K_UNROLL 4

/* Fill words [0, n) of p (global indices base + i) with pattern kind. */
extern "C" __global__ void gm_k_write(unsigned long long *p,
				      unsigned long long n,
				      unsigned long long base, int kind,
				      unsigned long long seed,
				      unsigned long long konst)
{
	ulonglong2 *q = (ulonglong2 *)p;
	unsigned long long n2 = n / 2;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;

	for (unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x +
				    threadIdx.x;
	     i < n2; i += stride) {
		unsigned long long w = base + 2 * i;
		ulonglong2 v;

		v.x = gm_vp_value(kind, seed, konst, w);
		v.y = gm_vp_value(kind, seed, konst, w + 1);
		q[i] = v;
	}
}

/*
 * Check words [0, n) of p against pattern kind; with next_kind >= 0 also
 * write pattern next_kind (a moving-inversion step: read, check, write the
 * inverse in one sweep). Errors go to e (see pattern.h); total is the
 * number of words tested across all chunks (for alias decoding).
 */
extern "C" __global__ void gm_k_verify(unsigned long long *p,
				       unsigned long long n,
				       unsigned long long base, int kind,
				       unsigned long long seed,
				       unsigned long long konst, int next_kind,
				       unsigned long long next_konst,
				       struct gm_ve *e,
				       unsigned long long total)
{
	ulonglong2 *q = (ulonglong2 *)p;
	unsigned long long n2 = n / 2;
	unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
	struct gm_ve_acc a;

	gm_ve_acc_init(&a);
	for (unsigned long long i0 = blockIdx.x * (unsigned long long)blockDim.x +
				     threadIdx.x;
	     i0 < n2; i0 += GM_K_UNROLL * stride) {
		ulonglong2 v[GM_K_UNROLL];

#pragma unroll
		for (int u = 0; u < GM_K_UNROLL; u++) {
			unsigned long long i = i0 + u * stride;

			if (i < n2)
				v[u] = __ldcs(q + i);
		}
#pragma unroll
		for (int u = 0; u < GM_K_UNROLL; u++) {
			unsigned long long i = i0 + u * stride;
			unsigned long long w = base + 2 * i;
			unsigned long long x, y;

			if (i >= n2)
				continue;
			x = gm_vp_value(kind, seed, konst, w);
			y = gm_vp_value(kind, seed, konst, w + 1);
			if (v[u].x != x)
				gm_ve_classify(&a, e, w, x, v[u].x, kind, seed,
					       total);
			if (v[u].y != y)
				gm_ve_classify(&a, e, w + 1, y, v[u].y, kind,
					       seed, total);
			if (next_kind >= 0) {
				ulonglong2 nv;

				nv.x = gm_vp_value(next_kind, seed, next_konst,
						   w);
				nv.y = gm_vp_value(next_kind, seed, next_konst,
						   w + 1);
				q[i] = nv;
			}
		}
	}
	gm_ve_flush(e, &a);
}

/*
 * Walking ones over the address bits (one thread, in order): write
 * (verify = 0) or check (verify = 1) the words 0, 1, 2, 4, ... that fall
 * in this chunk. Written in ascending order, so when address bit k is not
 * decoded, word 0 ends up holding word 2^k's value.
 */
extern "C" __global__ void gm_k_walk(unsigned long long *p,
				     unsigned long long n,
				     unsigned long long base, int verify,
				     unsigned long long seed,
				     struct gm_ve *e, unsigned long long total)
{
	struct gm_ve_acc a;
	int npos = gm_vp_walk_count(total);

	if (blockIdx.x != 0 || threadIdx.x != 0)
		return;
	gm_ve_acc_init(&a);
	for (int pos = 0; pos < npos; pos++) {
		unsigned long long w = gm_vp_walk_index(pos);
		unsigned long long x = gm_vp_value(GM_VP_UNIQUE, seed, 0, w);

		if (w < base || w >= base + n)
			continue;
		if (!verify) {
			((volatile unsigned long long *)p)[w - base] = x;
			continue;
		}
		unsigned long long got = ((volatile unsigned long long *)p)[w - base];
		if (got != x)
			gm_ve_classify(&a, e, w, x, got, GM_VP_UNIQUE, seed,
				       total);
	}
	gm_ve_flush(e, &a);
}
