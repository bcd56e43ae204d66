/*
 * catalog_report.c - the catalog as an output tree for the one output
 * layer (emit.h): gm_catalog_report(), gm_gpu_report() (see catalog.h).
 */
#include "catalog.h"

#include "emit.h"

#include <stdio.h>

/* A byte count, or null when not known (0). */
static void set_bytes(struct gm_val *o, const char *key, uint64_t v)
{
	if (v)
		gm_obj_set_uint(o, key, v);
	else
		gm_obj_set(o, key, gm_val_null());
}

static void set_real(struct gm_val *o, const char *key, double v)
{
	if (v > 0)
		gm_obj_set_real(o, key, v);
	else
		gm_obj_set(o, key, gm_val_null());
}

/*
 * Aliases: a list in JSON and YAML; one string, "h200, h200-sxm", in
 * CSV (GM_GPU_REPORT_FLAT), where a list would spread over aliases.0,
 * aliases.1, ... columns.
 */
static void set_aliases(struct gm_val *o, const struct gm_gpu *g,
			unsigned flags)
{
	char buf[1024];
	size_t used = 0;

	if (!(flags & GM_GPU_REPORT_FLAT)) {
		struct gm_val *a = gm_val_arr();

		for (size_t i = 0; i < g->n_aliases; i++)
			gm_arr_push(a, gm_val_str(g->aliases[i]));
		gm_obj_set(o, "aliases", a);
		return;
	}
	buf[0] = '\0';
	for (size_t i = 0; i < g->n_aliases && used < sizeof(buf); i++)
		used += (size_t)snprintf(buf + used, sizeof(buf) - used,
					 "%s%s", i ? ", " : "",
					 g->aliases[i]);
	gm_obj_set_str(o, "aliases", buf);
}

static void set_identity(struct gm_val *o, const struct gm_gpu *g,
			 unsigned flags)
{
	char buf[32];

	set_aliases(o, g, flags);
	snprintf(buf, sizeof(buf), "%u.%u", g->cc_major, g->cc_minor);
	gm_obj_set_str(o, "compute_capability", buf);
	if (g->multiprocessors)
		gm_obj_set_uint(o, "multiprocessors", g->multiprocessors);
	else
		gm_obj_set(o, "multiprocessors", gm_val_null());
	if (g->pci_device_id) {
		snprintf(buf, sizeof(buf), "0x%04x",
			 (unsigned)g->pci_device_id);
		gm_obj_set_str(o, "pci_device_id", buf);
	} else {
		gm_obj_set(o, "pci_device_id", gm_val_null());
	}
	gm_obj_set_str(o, "form_factor", g->form_factor);
}

struct gm_val *gm_gpu_report(const struct gm_gpu *g, unsigned flags)
{
	struct gm_val *o = gm_val_obj();
	bool brief = flags & GM_GPU_REPORT_BRIEF;

	if (!o)
		return NULL;
	gm_obj_set_str(o, "name", g->name);
	/* the table's short name to type (--gpu): the first alias */
	if (brief)
		gm_obj_set_str(o, "short_name", g->n_aliases ? g->aliases[0] :
			       "-");
	if (!brief)
		set_identity(o, g, flags);
	gm_obj_set_str(o, "marketed", g->marketed);
	if (!brief)
		gm_obj_set_uint(o, "marketed_bytes", g->marketed_bytes);
	gm_obj_set_uint(o, "total_bytes", g->total_bytes);
	if (!brief) {
		set_bytes(o, "total_other_ecc_bytes", g->total_other_ecc_bytes);
		set_bytes(o, "total_legacy_bytes", g->total_legacy_bytes);
	}
	set_bytes(o, "cuda_total_bytes", g->cuda_total_bytes);
	if (!brief) {
		gm_obj_set_uint(o, "min_total_bytes", gm_gpu_min_total(g));
		gm_obj_set_bool(o, "total_estimate", g->total_estimate);
		gm_obj_set_bool(o, "ecc_default_on", g->ecc_default_on);
	}
	gm_obj_set_str(o, "memory_type", g->memory_type);
	gm_obj_set_real(o, "bandwidth_gbps", g->bandwidth_gbps);
	if (brief && g->bf16_is_fp16 && g->bf16_tflops > 0) {
		/* the table's one column: say the figure is fp16's */
		char t[48];

		snprintf(t, sizeof(t), "%.4g (fp16)", g->bf16_tflops);
		gm_obj_set_str(o, "bf16_tflops", t);
	} else {
		set_real(o, "bf16_tflops", g->bf16_tflops);
	}
	if (!brief)
		gm_obj_set_bool(o, "bf16_is_fp16", g->bf16_is_fp16);
	gm_obj_set_str(o, "architecture", g->architecture);
	gm_obj_set_uint(o, "cuda_context_bytes", g->cuda_context_bytes);
	if (brief)
		return o;
	gm_obj_set_uint(o, "cuda_context_inference_bytes",
			g->cuda_context_inference_bytes);
	gm_obj_set_bool(o, "cuda_context_estimate", g->cuda_context_estimate);
	gm_obj_set_str(o, "cuda_context_source", g->cuda_context_source);
	gm_obj_set_real(o, "tolerance", g->tolerance);
	gm_obj_set_str(o, "source", g->source);
	gm_obj_set_str(o, "notes", g->notes);
	return o;
}

struct gm_val *gm_catalog_report(const struct gm_catalog *cat,
				 unsigned flags)
{
	struct gm_val *a = gm_val_arr();

	if (!cat)
		cat = gm_catalog_builtin();
	for (size_t i = 0; a && i < cat->n; i++)
		gm_arr_push(a, gm_gpu_report(&cat->gpus[i], flags));
	return a;
}
