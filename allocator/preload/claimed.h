/*
 * claimed.h - what a card should report, for the undersized-card check
 * at start-up (claimed.c).
 *
 * With GPUMEM_CLAIMED the claim is that size and a genuine card's CUDA
 * total is at most GM_CLAIM_TOL_CUDA (2%) below it, as gpumem verify
 * judges it (units.h). Otherwise the
 * GPU catalog (models/gpus.yaml, compiled in; no YAML is read in the
 * target process) is searched by device name, then by PCI device id, and
 * gives the smallest total a genuine card of that model reports. Builds
 * without the catalog know only GPUMEM_CLAIMED. Bytes throughout.
 */
#ifndef GM_PL_CLAIMED_H
#define GM_PL_CLAIMED_H

#include <stdint.h>

/*
 * Look the card up: *claimed = capacity it is sold as, *min_total = the
 * least total a genuine card reports; both 0 when nothing is known (the
 * check is then skipped). override: GPUMEM_CLAIMED in bytes, or 0.
 */
void gm_pl_claimed(const char *name, uint32_t pci_id, uint64_t override,
		   uint64_t *claimed, uint64_t *min_total);

#endif
