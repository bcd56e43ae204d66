/*
 * pl_early.c - linked to libpl_early.so (whose constructor calls the
 * driver before the preload library's constructor) and to the fake
 * libcuda. Run with GPUMEM_LIMIT=64MiB: the early calls saw the cap, the
 * early allocation is known (its free gives its charge back), and the
 * cap holds for the rest of the run. Exit 0 when all hold.
 */
#include <stdio.h>
#include <stddef.h>

#define MiB ((size_t)1 << 20)

extern size_t pl_early_total;
extern unsigned long long pl_early_ptr;
extern int pl_early_rc;

int cuMemAlloc_v2(unsigned long long *p, size_t size);
int cuMemFree_v2(unsigned long long p);
int cuMemGetInfo_v2(size_t *f, size_t *t);

int main(void)
{
	unsigned long long a = 0, b = 0;
	size_t f0 = 0, f1 = 0, t = 0;
	int bad = 0;

	cuMemGetInfo_v2(&f0, &t);
	bad |= pl_early_rc != 0 || pl_early_total != 64 * MiB;
	bad |= f0 != 56 * MiB || t != 64 * MiB;
	bad |= cuMemFree_v2(pl_early_ptr) != 0;
	cuMemGetInfo_v2(&f1, &t);
	bad |= f1 != 64 * MiB;
	bad |= cuMemAlloc_v2(&a, 40 * MiB) != 0;
	bad |= cuMemAlloc_v2(&b, 40 * MiB) != 2; /* over the cap */
	bad |= cuMemFree_v2(a) != 0;
	fprintf(stderr, "early: rc %d total %zu; free %zu then %zu of %zu\n",
		pl_early_rc, pl_early_total, f0, f1, t);
	return bad;
}
