/*
 * pattern.h - what the verifier writes and how it judges what it reads
 * back, shared word for word by the GPU kernels (kernels.cu, nvcc) and the
 * CPU emulation (emu.c, gcc): every function is static inline and
 * __host__ __device__ under nvcc.
 *
 * Units: memory under test is a sequence of 8-byte words; a word's
 * "index" is its position in the whole tested range (all chunks laid end
 * to end), so index * 8 is its byte offset. Patterns:
 *  - GM_VP_UNIQUE: word i holds mix(i ^ seed), a bijection of i, so every
 *    word's value is different and names the word it belongs to (the
 *    own-address test of ComputationalRadiationPhysics/cuda_memtest
 *    tests.cpp, salted like f3's blocks, AltraMayor/f3
 *    src/libutils.c);
 *  - GM_VP_UNIQUE_INV: its bitwise complement (every bit the other way);
 *  - GM_VP_CONST: every word holds konst (moving inversions).
 *
 * Errors are gathered per thread in a struct gm_ve_acc (no atomics in the
 * hot loop) and flushed once into the shared struct gm_ve, whose layout is
 * the same on host and device (it is copied between them).
 */
#ifndef GM_VERIFY_PATTERN_H
#define GM_VERIFY_PATTERN_H

#include <stdint.h>

#if defined(__CUDACC__)
#define GM_HD static __host__ __device__ __forceinline__
#else
#define GM_HD static inline
#endif

enum {
	GM_VP_UNIQUE = 0,
	GM_VP_UNIQUE_INV = 1,
	GM_VP_CONST = 2,
	GM_VP_NONE = -1, /* "write nothing" (verify-only passes) */
};

/* Number of differing bits up to which a wrong word counts as "flipped
 * bits" rather than aliasing or garbage. Two unrelated 64-bit values
 * differ in 32 bits on average; 6 or fewer happens by chance with
 * probability ~1e-11 (binomial tail), so the classes do not mix. */
#define GM_VE_FLIP_MAX 6

/* Error records kept per pass (the first ones found). */
#define GM_VE_RECORDS 32

/* Constants of MurmurHash3's 64-bit finalizer (fmix64). */
#define GM_VP_M1 0xff51afd7ed558ccdULL
#define GM_VP_M2 0xc4ceb9fe1a85ec53ULL

/* A bijective 64-bit mix (fmix64): each step (xor-shift by >= 32, multiply
 * by an odd constant) is invertible, so is the whole. */
GM_HD uint64_t gm_vp_mix(uint64_t x)
{
	x ^= x >> 33;
	x *= GM_VP_M1;
	x ^= x >> 33;
	x *= GM_VP_M2;
	x ^= x >> 33;
	return x;
}

/* Multiplicative inverse of an odd c modulo 2^64 (Newton's iteration,
 * each step doubles the correct low bits: 5 steps from 3 bits > 64). */
GM_HD uint64_t gm_vp_inverse(uint64_t c)
{
	uint64_t y = c; /* correct to 3 bits for odd c */

	for (int i = 0; i < 5; i++)
		y *= 2 - c * y;
	return y;
}

/* The inverse of gm_vp_mix(). An xor-shift by s >= 32 is its own inverse. */
GM_HD uint64_t gm_vp_unmix(uint64_t x)
{
	x ^= x >> 33;
	x *= gm_vp_inverse(GM_VP_M2);
	x ^= x >> 33;
	x *= gm_vp_inverse(GM_VP_M1);
	x ^= x >> 33;
	return x;
}

/* The value word `index` holds under pattern kind. */
GM_HD uint64_t gm_vp_value(int kind, uint64_t seed, uint64_t konst,
			   uint64_t index)
{
	if (kind == GM_VP_CONST)
		return konst;
	uint64_t v = gm_vp_mix(index ^ seed);
	return kind == GM_VP_UNIQUE_INV ? ~v : v;
}

/*
 * The index whose value under a unique pattern is v (the inverse of
 * gm_vp_value), or UINT64_MAX for a constant pattern. The caller checks
 * that it lies in the tested range: a value decoding out of range was
 * not written by this pass (garbage).
 */
GM_HD uint64_t gm_vp_decode(int kind, uint64_t seed, uint64_t v)
{
	if (kind == GM_VP_CONST)
		return UINT64_MAX;
	if (kind == GM_VP_UNIQUE_INV)
		v = ~v;
	return gm_vp_unmix(v) ^ seed;
}

GM_HD int gm_vp_popcount(uint64_t x)
{
#if defined(__CUDA_ARCH__)
	return __popcll(x);
#else
	return __builtin_popcountll(x);
#endif
}

/* One recorded wrong word. */
struct gm_ve_rec {
	uint64_t index;    /* word index (byte offset / 8) */
	uint64_t expected;
	uint64_t actual;
};

/*
 * The errors of one pass, shared by all threads (device memory for the
 * kernels). Initialise with gm_ve_init(). All counts are words.
 */
struct gm_ve {
	unsigned long long bad;       /* wrong words */
	unsigned long long alias;     /* held another word's value */
	unsigned long long flip;      /* <= GM_VE_FLIP_MAX bits wrong */
	unsigned long long garbage;   /* anything else */
	unsigned long long first_bad; /* lowest wrong index; ~0 if none */
	unsigned long long last_bad;  /* highest wrong index */
	unsigned long long alias_min_dist; /* smallest |i - j|; ~0 if none */
	unsigned long long alias_xor; /* OR of i ^ j over aliased pairs */
	unsigned long long flip_bits; /* OR of the flipped bits */
	unsigned long long bit_hist[64]; /* per data bit: flips seen */
	unsigned long long nrec;      /* records claimed (may exceed cap) */
	struct gm_ve_rec rec[GM_VE_RECORDS];
};

/* One thread's running totals, flushed with gm_ve_flush(). */
struct gm_ve_acc {
	uint64_t bad, alias, flip, garbage;
	uint64_t first_bad, last_bad, alias_min_dist, alias_xor, flip_bits;
	int recorded; /* this thread already wrote a record */
};

GM_HD void gm_ve_init(struct gm_ve *e)
{
	unsigned char *p = (unsigned char *)e;

	for (unsigned long i = 0; i < sizeof(*e); i++)
		p[i] = 0;
	e->first_bad = ~0ULL;
	e->alias_min_dist = ~0ULL;
}

GM_HD void gm_ve_acc_init(struct gm_ve_acc *a)
{
	a->bad = a->alias = a->flip = a->garbage = 0;
	a->first_bad = ~0ULL;
	a->last_bad = 0;
	a->alias_min_dist = ~0ULL;
	a->alias_xor = a->flip_bits = 0;
	a->recorded = 0;
}

/* Shared-struct updates: atomics on the device; the CPU emulation runs
 * one thread, so plain updates there. */
#if defined(__CUDA_ARCH__)
#define GM_VE_ADD(p, v) atomicAdd((unsigned long long *)(p), (v))
#define GM_VE_MIN(p, v) atomicMin((unsigned long long *)(p), (v))
#define GM_VE_MAX(p, v) atomicMax((unsigned long long *)(p), (v))
#define GM_VE_OR(p, v) atomicOr((unsigned long long *)(p), (v))
#define GM_VE_FETCH_ADD(p, v) atomicAdd((unsigned long long *)(p), (v))
#else
#define GM_VE_ADD(p, v) (*(p) += (v))
#define GM_VE_MIN(p, v) (*(p) = *(p) < (v) ? *(p) : (v))
#define GM_VE_MAX(p, v) (*(p) = *(p) > (v) ? *(p) : (v))
#define GM_VE_OR(p, v) (*(p) |= (v))
#define GM_VE_FETCH_ADD(p, v) ((*(p) += (v)) - (v))
#endif

/*
 * Classify the wrong word `index` (read `actual`, wanted `expected`)
 * under pattern (kind, seed) over `total` tested words:
 *  - flipped bits: at most GM_VE_FLIP_MAX bits differ (counted per bit);
 *  - aliasing: a unique pattern's value of another tested word j (the
 *    write to j landed here: i and j share storage);
 *  - garbage: anything else (lost writes, zeros, noise).
 * Call only when actual != expected.
 */
GM_HD void gm_ve_classify(struct gm_ve_acc *a, struct gm_ve *e,
			  uint64_t index, uint64_t expected, uint64_t actual,
			  int kind, uint64_t seed, uint64_t total)
{
	uint64_t diff = expected ^ actual;
	uint64_t j;

	a->bad++;
	if (index < a->first_bad)
		a->first_bad = index;
	if (index > a->last_bad)
		a->last_bad = index;
	if (gm_vp_popcount(diff) <= GM_VE_FLIP_MAX) {
		a->flip++;
		a->flip_bits |= diff;
		for (int b = 0; b < 64; b++)
			if (diff >> b & 1)
				GM_VE_ADD(&e->bit_hist[b], 1ULL);
	} else if ((j = gm_vp_decode(kind, seed, actual)) < total &&
		   j != index) {
		uint64_t d = j > index ? j - index : index - j;

		a->alias++;
		if (d < a->alias_min_dist)
			a->alias_min_dist = d;
		a->alias_xor |= j ^ index;
	} else {
		a->garbage++;
	}
	if (!a->recorded && e->nrec < GM_VE_RECORDS) {
		unsigned long long slot = GM_VE_FETCH_ADD(&e->nrec, 1ULL);

		a->recorded = 1;
		if (slot < GM_VE_RECORDS) {
			e->rec[slot].index = index;
			e->rec[slot].expected = expected;
			e->rec[slot].actual = actual;
		}
	}
}

/* Add a thread's totals to the shared struct (nothing if it saw none). */
GM_HD void gm_ve_flush(struct gm_ve *e, const struct gm_ve_acc *a)
{
	if (!a->bad)
		return;
	GM_VE_ADD(&e->bad, a->bad);
	GM_VE_ADD(&e->alias, a->alias);
	GM_VE_ADD(&e->flip, a->flip);
	GM_VE_ADD(&e->garbage, a->garbage);
	GM_VE_MIN(&e->first_bad, a->first_bad);
	GM_VE_MAX(&e->last_bad, a->last_bad);
	GM_VE_MIN(&e->alias_min_dist, a->alias_min_dist);
	GM_VE_OR(&e->alias_xor, a->alias_xor);
	GM_VE_OR(&e->flip_bits, a->flip_bits);
}

/*
 * Walking ones over the address bits: the word indices written by the
 * address-line test are 0 and 2^k for every 2^k < total, in this order
 * (pos 0 -> index 0, pos k+1 -> index 2^k). Returns the number of such
 * positions.
 */
GM_HD int gm_vp_walk_count(uint64_t total)
{
	int n = total > 0;

	for (int k = 0; k < 63 && (1ULL << k) < total; k++)
		n++;
	return n;
}

GM_HD uint64_t gm_vp_walk_index(int pos)
{
	return pos == 0 ? 0 : 1ULL << (pos - 1);
}

/* The seed of the walking-ones test, distinct from the full pass's. */
GM_HD uint64_t gm_vp_walk_seed(uint64_t seed)
{
	return seed ^ 0x5a5a5a5a00000000ULL;
}

#endif
