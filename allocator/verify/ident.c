/*
 * ident.c - who the card says it is and what it claims, read without
 * writing to it: CUDA (name, total, PCI bus, compute capability) and NVML
 * (total, reserved, ECC, MIG, retired pages, remapped rows), both through
 * their seams; the claim from --claimed or the GPU catalog.
 */
#include "verify.h"

#include "catalog.h"
#include "cu.h"
#include "error.h"
#include "nvml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/*
 * The one place the verifier asks the GPU catalog (allocator/catalog):
 * by name (with aliases), else by PCI device id. Fills what the card of
 * that model reports (total_bytes), the least a genuine one may report
 * (gm_gpu_min_total: either ECC mode, older drivers, CUDA's total, less
 * the catalog's tolerance), and whether its memory is GDDR.
 */
int gm_verify_catalog_lookup(const char *name, unsigned pci_device_id,
			     struct gm_verify_catalog *out)
{
	const struct gm_gpu *g = gm_catalog_find(NULL, name);

	memset(out, 0, sizeof(*out));
	if (!g && pci_device_id)
		g = gm_catalog_find_pci(NULL, pci_device_id);
	if (!g || !g->total_bytes)
		return GM_ENOTFOUND;
	out->total_bytes = g->total_bytes;
	out->min_bytes = gm_gpu_min_total(g);
	out->estimate = g->total_estimate;
	out->gddr = g->memory_type && strncmp(g->memory_type, "GDDR", 4) == 0;
	out->pci_device_id = g->pci_device_id;
	snprintf(out->name, sizeof(out->name), "%s", g->name);
	return 0;
}

void gm_verify_claims(struct gm_verify_result *r, uint64_t claimed)
{
	struct gm_verify_ident *id = &r->id;
	struct gm_verify_catalog c;
	bool found;

	r->reported_bytes = id->nvml && id->nvml_total_bytes
				    ? id->nvml_total_bytes
				    : id->cuda_total_bytes;
	found = gm_verify_catalog_lookup(id->name, id->pci_device_id, &c) == 0;
	if (found) {
		snprintf(r->catalog_name, sizeof(r->catalog_name), "%s",
			 c.name);
		if (c.gddr)
			id->gddr = true;
		if (id->pci_device_id && c.pci_device_id &&
		    id->pci_device_id != c.pci_device_id)
			gm_verify_note(r, "the name says %s but the PCI device "
					  "id 0x%04x is not that card's (0x%04x)",
				       c.name, id->pci_device_id,
				       c.pci_device_id);
	}
	if (claimed) {
		r->claimed_bytes = claimed;
		snprintf(r->claimed_source, sizeof(r->claimed_source),
			 "--claimed");
		return;
	}
	if (found) {
		r->claimed_bytes = c.total_bytes;
		r->claimed_min_bytes = c.min_bytes;
		r->claimed_estimate = c.estimate;
		snprintf(r->claimed_source, sizeof(r->claimed_source),
			 "catalog");
		return;
	}
	r->claimed_bytes = 0;
	r->claimed_source[0] = '\0';
	gm_verify_note(r, "no claimed capacity: '%s' is not in the GPU "
			  "catalog; give --claimed SIZE to check the report",
		       id->name);
}

/* HBM parts lose no capacity to ECC; GDDR parts give it 1/16. Known by
 * name: the data-center HBM families (their datasheets: HBM2,
 * HBM2e, HBM3, HBM3e). */
static bool name_is_hbm(const char *name)
{
	static const char *const hbm[] = {"V100", "A100", "A800", "A30",
					  "H100", "H800", "H200", "H20",
					  "GH200", "B200", "B100", "GB200",
					  "MI", NULL};

	for (int i = 0; hbm[i]; i++)
		if (strstr(name, hbm[i]))
			return true;
	return false;
}

/* PCI ids from sysfs when NVML is absent: /sys/bus/pci/devices/BUS/. */
static unsigned sysfs_hex(const char *bus_id, const char *file)
{
	char path[256], buf[32];
	unsigned v = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/sys/bus/pci/devices/%s/%s", bus_id,
		 file);
	for (char *p = path + 21; *p; p++)
		if (*p >= 'A' && *p <= 'F')
			*p = (char)(*p - 'A' + 'a');
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (fgets(buf, sizeof(buf), f))
		v = (unsigned)strtoul(buf, NULL, 16);
	fclose(f);
	return v;
}

static void nvml_read(const struct gm_nvml *nvml, struct gm_verify_ident *id)
{
	gm_nvml_device dev = NULL;
	struct gm_nvml_pci pci;
	struct gm_nvml_memory_v2 mem = {.version = GM_NVML_MEMORY_V2};
	int cur, pend, r;
	unsigned ucur, upend, a, b, c, e;

	if (!nvml || !nvml->init || !nvml->handle_by_bus_id) {
		snprintf(id->nvml_error, sizeof(id->nvml_error),
			 "NVML not opened (no table given)");
		return;
	}
	r = nvml->handle_by_bus_id(id->bus_id, &dev);
	if (r != GM_NVML_SUCCESS) {
		snprintf(id->nvml_error, sizeof(id->nvml_error),
			 "NVML does not know bus %s (nvmlReturn %d)",
			 id->bus_id, r);
		return;
	}
	id->nvml = true;
	if (nvml->driver_version)
		nvml->driver_version(id->driver_version,
				     sizeof(id->driver_version));
	if (nvml->pci_info && nvml->pci_info(dev, &pci) == GM_NVML_SUCCESS) {
		id->pci_device_id = pci.pci_device_id >> 16;
		id->pci_subsystem_id = pci.pci_subsystem_id;
	}
	if (nvml->memory_info_v2 &&
	    nvml->memory_info_v2(dev, &mem) == GM_NVML_SUCCESS) {
		id->nvml_total_bytes = mem.total;
		id->nvml_reserved_bytes = mem.reserved;
	}
	if (nvml->ecc_mode && nvml->ecc_mode(dev, &cur, &pend) ==
				      GM_NVML_SUCCESS)
		id->ecc = cur != 0;
	if (nvml->mig_mode && nvml->mig_mode(dev, &ucur, &upend) ==
				      GM_NVML_SUCCESS)
		id->mig = ucur != 0;
	if (nvml->retired_pages) {
		a = b = 0;
		if (nvml->retired_pages(dev, GM_NVML_RETIRE_MULTIPLE_SBE, &a,
					NULL) != GM_NVML_ERROR_NOT_SUPPORTED &&
		    nvml->retired_pages(dev, GM_NVML_RETIRE_DBE, &b, NULL) !=
			    GM_NVML_ERROR_NOT_SUPPORTED) {
			id->retired_sbe = (int)a;
			id->retired_dbe = (int)b;
		}
	}
	if (nvml->retired_pending &&
	    nvml->retired_pending(dev, &cur) == GM_NVML_SUCCESS)
		id->retired_pending = cur != 0;
	if (nvml->remapped_rows &&
	    nvml->remapped_rows(dev, &a, &b, &c, &e) == GM_NVML_SUCCESS) {
		id->remap_corrected = (int)a;
		id->remap_uncorrected = (int)b;
		id->remap_pending = c != 0;
		id->remap_failed = e != 0;
	}
}

int gm_verify_identify(const struct gm_cu *cu, const struct gm_nvml *nvml,
		       int index, struct gm_verify_ident *id,
		       struct gm_diag *d)
{
	gm_cu_device dev;
	size_t total = 0;
	int r;

	memset(id, 0, sizeof(*id));
	id->ecc = id->mig = -1;
	id->retired_sbe = id->retired_dbe = id->retired_pending = -1;
	id->remap_corrected = id->remap_uncorrected = -1;
	id->remap_pending = id->remap_failed = -1;
	r = cu->device_get(&dev, index);
	if (!r)
		r = cu->device_name(id->name, sizeof(id->name), dev);
	if (!r)
		r = cu->device_total_mem(&total, dev);
	if (r)
		return gm_diag_set(d, GM_EDEVICE,
				   "device %d: identity: %s", index,
				   gm_cu_error_name(cu, r));
	id->cuda_total_bytes = total;
	cu->device_attribute(&id->cc_major, GM_CU_ATTR_COMPUTE_MAJOR, dev);
	cu->device_attribute(&id->cc_minor, GM_CU_ATTR_COMPUTE_MINOR, dev);
	cu->device_attribute(&id->sm_count, GM_CU_ATTR_MULTIPROCESSOR_COUNT,
			     dev);
	if (cu->driver_version)
		cu->driver_version(&id->driver_cuda_version);
	if (cu->device_pci_bus_id &&
	    cu->device_pci_bus_id(id->bus_id, sizeof(id->bus_id), dev) == 0) {
		id->pci_device_id = sysfs_hex(id->bus_id, "device");
		id->pci_subsystem_id =
			sysfs_hex(id->bus_id, "subsystem_device") << 16 |
			sysfs_hex(id->bus_id, "subsystem_vendor");
	}
	id->gddr = !name_is_hbm(id->name);
	nvml_read(nvml, id);
	return 0;
}
