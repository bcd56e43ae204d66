/* Unit tests for verify/ident.c: identity and claims read through fake
 * driver and NVML tables (the seams), and the health rules of the
 * verdict. The fake card is an H200 as measured
 * (tools/bench/results/catalog-h200.md). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "cu.h"
#include "error.h"
#include "nvml.h"
#include "units.h"
#include "verify.h"

static unsigned remap_failed, retire_pending;

static gm_cu_result f_device_get(gm_cu_device *d, int i)
{
	*d = i;
	return i == 0 ? 0 : GM_CU_ERROR_INVALID_DEVICE;
}
static gm_cu_result f_name(char *name, int len, gm_cu_device d)
{
	snprintf(name, (size_t)len, "NVIDIA H200");
	return 0;
}
static gm_cu_result f_total(size_t *b, gm_cu_device d)
{
	*b = 143155 * GM_MiB;
	return 0;
}
static gm_cu_result f_attr(int *v, int attr, gm_cu_device d)
{
	*v = attr == GM_CU_ATTR_COMPUTE_MAJOR ? 9
	     : attr == GM_CU_ATTR_MULTIPROCESSOR_COUNT ? 132 : 0;
	return 0;
}
static gm_cu_result f_bus(char *b, int len, gm_cu_device d)
{
	snprintf(b, (size_t)len, "0000:99:00.0");
	return 0;
}
static gm_cu_result f_drv(int *v)
{
	*v = 13000;
	return 0;
}
static gm_cu_result f_err(gm_cu_result r, const char **name)
{
	*name = "CUDA_ERROR_FAKE";
	return 0;
}

static gm_nvml_return n_init(void) { return 0; }
static gm_nvml_return n_handle(const char *bus, gm_nvml_device *dev)
{
	*dev = (gm_nvml_device)0x1;
	return strcmp(bus, "0000:99:00.0") ? GM_NVML_ERROR_NOT_FOUND : 0;
}
static gm_nvml_return n_drv(char *v, unsigned len)
{
	snprintf(v, len, "580.159.04");
	return 0;
}
static gm_nvml_return n_pci(gm_nvml_device dev, struct gm_nvml_pci *p)
{
	memset(p, 0, sizeof(*p));
	p->pci_device_id = 0x233510de;
	p->pci_subsystem_id = 0x18be10de;
	return 0;
}
static gm_nvml_return n_mem(gm_nvml_device dev, struct gm_nvml_memory_v2 *m)
{
	if (m->version != GM_NVML_MEMORY_V2)
		return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
	m->total = 143771 * GM_MiB;
	m->reserved = 616 * GM_MiB;
	return 0;
}
static gm_nvml_return n_ecc(gm_nvml_device dev, int *c, int *p)
{
	*c = *p = 1;
	return 0;
}
static gm_nvml_return n_mig(gm_nvml_device dev, unsigned *c, unsigned *p)
{
	*c = *p = 0;
	return 0;
}
static gm_nvml_return n_retired(gm_nvml_device dev, int cause, unsigned *n,
				unsigned long long *a)
{
	*n = 0;
	return 0;
}
static gm_nvml_return n_pending(gm_nvml_device dev, int *p)
{
	*p = (int)retire_pending;
	return 0;
}
static gm_nvml_return n_remap(gm_nvml_device dev, unsigned *c, unsigned *u,
			      unsigned *p, unsigned *f)
{
	*c = 2;
	*u = 0;
	*p = 0;
	*f = remap_failed;
	return 0;
}

static struct gm_cu fake_cu(void)
{
	struct gm_cu cu = {0};

	cu.device_get = f_device_get;
	cu.device_name = f_name;
	cu.device_total_mem = f_total;
	cu.device_attribute = f_attr;
	cu.device_pci_bus_id = f_bus;
	cu.driver_version = f_drv;
	cu.error_name = f_err;
	return cu;
}

static struct gm_nvml fake_nvml(void)
{
	struct gm_nvml n = {0};

	n.init = n_init;
	n.handle_by_bus_id = n_handle;
	n.driver_version = n_drv;
	n.pci_info = n_pci;
	n.memory_info_v2 = n_mem;
	n.ecc_mode = n_ecc;
	n.mig_mode = n_mig;
	n.retired_pages = n_retired;
	n.retired_pending = n_pending;
	n.remapped_rows = n_remap;
	return n;
}

static void identity_from_both(void **state)
{
	struct gm_cu cu = fake_cu();
	struct gm_nvml nv = fake_nvml();
	struct gm_verify_result r = {0};
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_verify_identify(&cu, &nv, 0, &r.id, &d), 0);
	assert_string_equal(r.id.name, "NVIDIA H200");
	assert_true(r.id.nvml);
	assert_int_equal(r.id.pci_device_id, 0x2335);
	assert_int_equal(r.id.pci_subsystem_id, 0x18be10de);
	assert_true(r.id.nvml_total_bytes == 143771 * GM_MiB);
	assert_true(r.id.nvml_reserved_bytes == 616 * GM_MiB);
	assert_true(r.id.cuda_total_bytes == 143155 * GM_MiB);
	assert_int_equal(r.id.ecc, 1);
	assert_int_equal(r.id.mig, 0);
	assert_int_equal(r.id.sm_count, 132);
	assert_int_equal(r.id.remap_corrected, 2);
	assert_false(r.id.gddr);
	assert_string_equal(r.id.driver_version, "580.159.04");
	/* sold as 141 GB: NVML's 143771 MiB is more than that */
	gm_verify_claims(&r, 141 * GM_GB);
	assert_true(r.reported_bytes == 143771 * GM_MiB);
	r.verified_bytes = r.tested_bytes = 140 * GM_GiB;
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_OK);
	/* sold as 160 GB: the report says otherwise */
	memset(&r.claimed_bytes, 0, sizeof(r.claimed_bytes));
	gm_verify_claims(&r, 160 * GM_GB);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_UNDERSIZED);
	/* bad device index: a driver error */
	assert_int_equal(gm_verify_identify(&cu, &nv, 1, &r.id, &d),
			 GM_EDEVICE);
	assert_non_null(strstr(d.msg, "CUDA_ERROR_FAKE"));
}

static void without_nvml(void **state)
{
	struct gm_cu cu = fake_cu();
	struct gm_nvml none = {0};
	struct gm_verify_result r = {0};
	struct gm_diag d;

	(void)state;
	assert_int_equal(gm_verify_identify(&cu, &none, 0, &r.id, &d), 0);
	assert_false(r.id.nvml);
	assert_non_null(strstr(r.id.nvml_error, "NVML"));
	assert_int_equal(r.id.ecc, -1);
	gm_verify_claims(&r, 141 * GM_GB);
	assert_true(r.reported_bytes == 143155 * GM_MiB);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_OK);
	/* NULL table: the same */
	assert_int_equal(gm_verify_identify(&cu, NULL, 0, &r.id, &d), 0);
	assert_false(r.id.nvml);
}

static void health(void **state)
{
	struct gm_cu cu = fake_cu();
	struct gm_nvml nv = fake_nvml();
	struct gm_verify_result r = {0};
	struct gm_diag d;

	(void)state;
	remap_failed = 1;
	assert_int_equal(gm_verify_identify(&cu, &nv, 0, &r.id, &d), 0);
	gm_verify_claims(&r, 141 * GM_GB);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_FAULTY);
	assert_non_null(strstr(r.reason, "remap"));
	remap_failed = 0;
	retire_pending = 1;
	assert_int_equal(gm_verify_identify(&cu, &nv, 0, &r.id, &d), 0);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_FAULTY);
	retire_pending = 0;
}

/* Without --claimed the catalog gives the claim: an H200 reporting its
 * 143771 MiB is fine; one reporting 120 GiB is undersized; CUDA's total
 * alone (no NVML) is within the catalog's tolerance. */
static void claim_from_catalog(void **state)
{
	struct gm_cu cu = fake_cu();
	struct gm_nvml nv = fake_nvml();
	struct gm_nvml none = {0};
	struct gm_verify_result r;
	struct gm_diag d;

	(void)state;
	memset(&r, 0, sizeof(r));
	assert_int_equal(gm_verify_identify(&cu, &nv, 0, &r.id, &d), 0);
	gm_verify_claims(&r, 0);
	assert_string_equal(r.claimed_source, "catalog");
	assert_true(r.claimed_bytes == 143771 * GM_MiB);
	assert_true(r.claimed_min_bytes > 0 &&
		    r.claimed_min_bytes <= 143155 * GM_MiB);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_OK);

	memset(&r, 0, sizeof(r));
	assert_int_equal(gm_verify_identify(&cu, &none, 0, &r.id, &d), 0);
	gm_verify_claims(&r, 0);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_OK);

	memset(&r, 0, sizeof(r));
	assert_int_equal(gm_verify_identify(&cu, &nv, 0, &r.id, &d), 0);
	r.id.nvml_total_bytes = 120 * GM_GiB;
	gm_verify_claims(&r, 0);
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_UNDERSIZED);
	assert_non_null(strstr(r.reason, "catalog"));
}

static void unknown_name_notes(void **state)
{
	struct gm_verify_result r = {0};

	(void)state;
	snprintf(r.id.name, sizeof(r.id.name), "Mystery GPU 9000");
	r.id.cuda_total_bytes = GM_GiB;
	gm_verify_claims(&r, 0);
	assert_true(r.claimed_bytes == 0);
	assert_int_equal(r.nnotes, 1);
	assert_non_null(strstr(r.notes[0], "--claimed"));
	gm_verify_judge(&r);
	assert_int_equal(r.verdict, GM_VERDICT_OK);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(identity_from_both),
		cmocka_unit_test(without_nvml),
		cmocka_unit_test(health),
		cmocka_unit_test(claim_from_catalog),
		cmocka_unit_test(unknown_name_notes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
