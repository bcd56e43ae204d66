/* claimed.c - the claim a card is checked against (see claimed.h). */
#include "claimed.h"
#include "units.h"

#ifdef GM_HAVE_CATALOG
#include "catalog.h"
#endif

void gm_pl_claimed(const char *name, uint32_t pci_id, uint64_t override,
		   uint64_t *claimed, uint64_t *min_total)
{
	*claimed = 0;
	*min_total = 0;
	if (override) {
		*claimed = override;
		*min_total = (uint64_t)((double)override *
					(1.0 - GM_CLAIM_TOL_CUDA));
		return;
	}
#ifdef GM_HAVE_CATALOG
	const struct gm_gpu *gpu = gm_catalog_find(NULL, name);

	if (!gpu && pci_id)
		gpu = gm_catalog_find_pci(NULL, pci_id);
	if (!gpu)
		return;
	*claimed = gpu->marketed_bytes;
	*min_total = gm_gpu_min_total(gpu);
#else
	(void)name;
	(void)pci_id;
#endif
}
