/*
 * pl_early_lib.c - libpl_early.so, a library of the program whose
 * constructor uses the driver before the preload library's constructor
 * has run (glibc runs the program's own libraries' constructors first):
 * it asks for the device's total memory, as a framework probing the card
 * would, and allocates 8 MiB. pl_early.c checks the cap held anyway.
 */
#include <stddef.h>

int cuDeviceTotalMem_v2(size_t *bytes, int dev);
int cuMemAlloc_v2(unsigned long long *p, size_t size);

__attribute__((visibility("default"))) size_t pl_early_total;
__attribute__((visibility("default"))) unsigned long long pl_early_ptr;
__attribute__((visibility("default"))) int pl_early_rc = -1;

__attribute__((constructor)) static void early(void)
{
	cuDeviceTotalMem_v2(&pl_early_total, 0);
	pl_early_rc = cuMemAlloc_v2(&pl_early_ptr, (size_t)8 << 20);
}
