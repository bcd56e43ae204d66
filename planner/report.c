/*
 * report.c - plan and fit reports (see report.h).
 */
#include "report.h"

#include "emit.h"
#include "error.h"
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Bytes as an integer, saturated at 2^63 (no undefined conversion). */
static uint64_t u(double bytes)
{
	if (!(bytes > 0))
		return 0;
	if (bytes >= 0x1p63)
		return (uint64_t)1 << 63;
	return (uint64_t)llround(bytes);
}

/* The nine terms of a breakdown (at the peak, or each one's largest). */
static void parts_set(struct gm_val *o, const struct gm_parts *a)
{
	gm_obj_set_uint(o, "weights_bytes", u(a->weights));
	gm_obj_set_uint(o, "gradients_bytes", u(a->gradients));
	gm_obj_set_uint(o, "optimizer_states_bytes", u(a->optimizer_states));
	gm_obj_set_uint(o, "activations_bytes", u(a->activations));
	gm_obj_set_uint(o, "logits_bytes", u(a->logits));
	gm_obj_set_uint(o, "temporary_bytes", u(a->temporary));
	gm_obj_set_uint(o, "kv_cache_bytes", u(a->kv_cache));
	gm_obj_set_uint(o, "communication_bytes", u(a->communication));
	gm_obj_set_uint(o, "workspace_bytes", u(a->workspace));
}

static struct gm_parts largest(const struct gm_terms *t)
{
	return (struct gm_parts){
		t->weights, t->gradients, t->optimizer_states, t->activations,
		t->logits, t->temporary, t->kv_cache, t->communication,
		t->workspace};
}

/* The peak and what the card shows (every breakdown ends so). */
static void peak_set(struct gm_val *o, const struct gm_terms *t)
{
	gm_obj_set_str(o, "peak_phase", gm_phase_name(t->peak_phase));
	gm_obj_set_uint(o, "peak_allocated_bytes", u(t->peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", u(t->peak_reserved));
	gm_obj_set_uint(o, "cuda_context_bytes", u(t->cuda_context));
	gm_obj_set_uint(o, "nccl_bytes", u(t->nccl));
	gm_obj_set_uint(o, "device_used_bytes", u(t->device_used));
	if (t->moe_skew > 0)
		gm_obj_set_uint(o, "skewed_router_extra_bytes",
				u(t->moe_skew));
	if (t->sim.out_of_memory) {
		/* where the run stops on this card: the first request the
		 * caching allocator refused after freeing its cache */
		struct gm_val *f = gm_val_obj();

		gm_obj_set_uint(f, "requested_bytes", u(t->sim.oom_requested));
		gm_obj_set_uint(f, "allocated_bytes", u(t->sim.oom_allocated));
		gm_obj_set_uint(f, "reserved_bytes", u(t->sim.oom_reserved));
		gm_obj_set(o, "out_of_memory", f);
	}
}

/* JSON and the stages' rows: each term's closed form at its own largest
 * over the step (the documented keys; not what is live at the
 * peak), then at_peak: what each holds at the peak (they sum to
 * peak_allocated); rows of a stage table leave it out. */
static struct gm_val *terms_obj(const struct gm_terms *t, bool stage,
				bool with_peak)
{
	struct gm_val *o = gm_val_obj();
	struct gm_parts l = largest(t);

	if (stage) {
		gm_obj_set_uint(o, "layers", t->layers);
		gm_obj_set_uint(o, "micro_batches_in_flight", t->in_flight);
	}
	parts_set(o, &l);
	peak_set(o, t);
	if (with_peak) {
		struct gm_val *a = gm_val_obj();

		parts_set(a, &t->at_peak);
		gm_obj_set(o, "at_peak", a);
	}
	return o;
}

static struct gm_val *plan_obj(const struct gm_plan *p, bool table)
{
	struct gm_val *o = gm_val_obj(), *st;

	gm_obj_set_str(o, "name", p->name);
	gm_obj_set_str(o, "gpu", p->gpu.name);
	gm_obj_set_uint(o, "gpu_capacity_bytes", p->gpu.capacity_bytes);
	/* only under --fraction / --limit: the allocator's cap (cap.h) */
	if (p->gpu.cap_bytes)
		gm_obj_set_uint(o, "cap_bytes", p->gpu.cap_bytes);
	gm_obj_set_uint(o, "parameters", p->parameters);
	if (table) {
		/* a person reads the rows at the peak, which add up to
		 * peak allocated, then each term's closed form at its own
		 * largest over the step, which is not the peak's */
		struct gm_val *a = gm_val_obj(), *l = gm_val_obj();
		struct gm_parts m = largest(&p->per_gpu);

		parts_set(a, &p->per_gpu.at_peak);
		peak_set(a, &p->per_gpu);
		gm_obj_set(o, "per_gpu_at_the_peak", a);
		parts_set(l, &m);
		gm_obj_set(o, "each term at its own largest (closed form, "
			   "not at the peak)", l);
	} else {
		gm_obj_set(o, "per_gpu", terms_obj(&p->per_gpu, false, true));
	}
	gm_obj_set_bool(o, "fits", p->fits);
	gm_obj_set_int(o, "headroom_bytes", p->headroom_bytes);
	gm_obj_set_uint(o, "gradient_accumulation_steps",
			p->gradient_accumulation_steps);
	if (p->n_stages > 1) {
		st = gm_val_arr();
		for (unsigned i = 0; i < p->n_stages; i++) {
			struct gm_val *s = terms_obj(&p->stages[i], true,
						     !table);
			gm_arr_push(st, s);
		}
		gm_obj_set(o, "stages", st);
	}
	return o;
}

struct gm_val *gm_plan_report(const struct gm_plan *p)
{
	return plan_obj(p, false);
}

struct gm_val *gm_plan_report_table(const struct gm_plan *p)
{
	return plan_obj(p, true);
}

struct gm_val *gm_fit_report(const char *name, const struct gm_fit *f,
			     size_t n, bool table)
{
	struct gm_val *arr = gm_val_arr();

	(void)name;
	for (size_t i = 0; i < n; i++) {
		struct gm_val *r = gm_val_obj();
		gm_obj_set_str(r, "gpu", f[i].gpu.name);
		gm_obj_set_uint(r, "capacity_bytes", f[i].gpu.capacity_bytes);
		if (f[i].gpu.cap_bytes)
			gm_obj_set_uint(r, "cap_bytes", f[i].gpu.cap_bytes);
		gm_obj_set_real(r, "bandwidth_gbps", f[i].gpu.bandwidth_gbps);
		/* 0 in the catalog: not known (a table prints "-"); a card
		 * without bf16 (before sm_80) lists its fp16 figure */
		bool fp16 = f[i].gpu.sm_major > 0 && f[i].gpu.sm_major < 8;

		if (f[i].gpu.bf16_tflops > 0 && fp16 && table) {
			char t[48];

			snprintf(t, sizeof(t), "%.4g (fp16)",
				 f[i].gpu.bf16_tflops);
			gm_obj_set_str(r, "bf16_tflops", t);
		} else if (f[i].gpu.bf16_tflops > 0) {
			gm_obj_set_real(r, "bf16_tflops",
					f[i].gpu.bf16_tflops);
		} else {
			gm_obj_set(r, "bf16_tflops", gm_val_null());
		}
		if (!table)
			gm_obj_set_bool(r, "bf16_is_fp16", fp16);
		gm_obj_set_uint(r, "max_micro_batch", f[i].max_micro_batch);
		gm_obj_set_uint(r, "gradient_accumulation_steps",
				f[i].gradient_accumulation_steps);
		gm_obj_set_uint(r, "min_gpus", f[i].min_gpus);
		gm_obj_set_uint(r, "min_gpus_micro_batch",
				f[i].min_gpus_micro_batch);
		gm_obj_set_uint(r, "device_used_bytes", u(f[i].device_used));
		gm_arr_push(arr, r);
	}
	return arr;
}

/* ==== SVG ==== */

static const struct {
	const char *label, *color;
} parts[] = {
	{"weights", "#4e79a7"},      {"gradients", "#f28e2b"},
	{"optimizer states", "#e15759"}, {"activations", "#76b7b2"},
	{"logits", "#59a14f"},       {"temporary", "#edc948"},
	{"KV cache", "#b07aa1"},     {"communication", "#ff9da7"},
	{"workspace", "#9c755f"},    {"allocator reserve", "#bab0ac"},
	{"outside allocator", "#79706e"},
};
#define N_PARTS (sizeof(parts) / sizeof(parts[0]))

static void values(const struct gm_plan *p, double *v)
{
	const struct gm_terms *t = &p->per_gpu;
	const struct gm_parts *a = &t->at_peak;

	v[0] = a->weights;
	v[1] = a->gradients;
	v[2] = a->optimizer_states;
	v[3] = a->activations;
	v[4] = a->logits;
	v[5] = a->temporary;
	v[6] = a->kv_cache;
	v[7] = a->communication;
	v[8] = a->workspace;
	v[9] = t->peak_reserved - t->peak_allocated;
	v[10] = t->cuda_context;
}

static void xml_text(FILE *out, const char *s)
{
	for (; *s; s++) {
		if (*s == '<')
			fputs("&lt;", out);
		else if (*s == '>')
			fputs("&gt;", out);
		else if (*s == '&')
			fputs("&amp;", out);
		else if (*s == '"')
			fputs("&quot;", out);
		else
			fputc(*s, out);
	}
}

/* Label lines under a bar: the GPU name wrapped at spaces into lines of
 * at most GM_SVG_LINE characters (about the bar pitch at 12 px), at most
 * GM_SVG_NAME_LINES of them, so neighbouring labels do not overlap. */
#define GM_SVG_LINE 22
#define GM_SVG_NAME_LINES 3

static void svg_label(FILE *out, double x, double y, const char *name)
{
	char line[GM_SVG_LINE + 1];
	size_t len = strlen(name);

	for (int l = 0; l < GM_SVG_NAME_LINES && len; l++) {
		size_t take = len;

		if (take > GM_SVG_LINE) {
			take = GM_SVG_LINE;
			while (take > 0 && name[take] != ' ')
				take--;
			if (!take || l + 1 == GM_SVG_NAME_LINES)
				take = GM_SVG_LINE;
		}
		memcpy(line, name, take);
		line[take] = '\0';
		if (l + 1 == GM_SVG_NAME_LINES && take < len && take >= 3)
			memcpy(line + take - 3, "...", 3);
		fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\""
			"middle\">", x, y + 14 * l);
		xml_text(out, line);
		fprintf(out, "</text>\n");
		name += take;
		len -= take;
		while (*name == ' ')
			name++, len--;
	}
}

int gm_plan_svg(FILE *out, const struct gm_plan *p, size_t n)
{
	const double bar_w = 90, gap = 60, top = 40, plot_h = 400, left = 70;
	double maxv = 0, v[N_PARTS];
	double width = left + n * (bar_w + gap) + 190;
	double height = top + plot_h + 20 + 14 * (GM_SVG_NAME_LINES + 2) + 10;

	for (size_t i = 0; i < n; i++) {
		double sum = 0;
		values(&p[i], v);
		for (size_t k = 0; k < N_PARTS; k++)
			sum += v[k] > 0 ? v[k] : 0;
		if (sum > maxv)
			maxv = sum;
		if ((double)p[i].gpu.capacity_bytes > maxv)
			maxv = (double)p[i].gpu.capacity_bytes;
	}
	if (maxv <= 0)
		maxv = 1;
	maxv *= 1.05;
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" "
		"width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
		"font-size=\"12\">\n", width, height);
	fprintf(out, "<title>");
	xml_text(out, n ? p[0].name : "");
	fprintf(out, ": memory per GPU (GiB)</title>\n");
	fprintf(out, "<text x=\"%.0f\" y=\"20\" font-size=\"14\">", left);
	xml_text(out, n ? p[0].name : "");
	fprintf(out, ": memory per GPU at the peak (GiB)</text>\n");
	/* axis with ticks every 1/4 of the range */
	for (int k = 0; k <= 4; k++) {
		double y = top + plot_h - plot_h * k / 4.0;
		fprintf(out, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" "
			"y2=\"%.1f\" stroke=\"#ddd\"/>\n<text x=\"%.0f\" "
			"y=\"%.1f\" text-anchor=\"end\">%.1f</text>\n",
			left - 5, y, left + n * (bar_w + gap), y, left - 8,
			y + 4, maxv * k / 4.0 / (double)GM_GiB);
	}
	for (size_t i = 0; i < n; i++) {
		double x = left + gap / 2 + i * (bar_w + gap), y = top + plot_h;
		double cap = top + plot_h - plot_h *
			     (double)p[i].gpu.capacity_bytes / maxv;

		values(&p[i], v);
		for (size_t k = 0; k < N_PARTS; k++) {
			double hgt = v[k] > 0 ? plot_h * v[k] / maxv : 0;
			if (hgt <= 0)
				continue;
			y -= hgt;
			fprintf(out, "<rect x=\"%.1f\" y=\"%.2f\" width=\"%.0f\""
				" height=\"%.2f\" fill=\"%s\"><title>%s: %.2f "
				"GiB</title></rect>\n", x, y, bar_w, hgt,
				parts[k].color, parts[k].label,
				v[k] / (double)GM_GiB);
		}
		fprintf(out, "<line x1=\"%.1f\" y1=\"%.2f\" x2=\"%.1f\" "
			"y2=\"%.2f\" stroke=\"#d00\" stroke-width=\"2\" "
			"stroke-dasharray=\"6 3\"/>\n", x - 10, cap,
			x + bar_w + 10, cap);
		fprintf(out, "<text x=\"%.1f\" y=\"%.2f\" fill=\"#d00\" "
			"text-anchor=\"middle\">capacity %.2f</text>\n",
			x + bar_w / 2, cap - 4,
			gm_gib(p[i].gpu.capacity_bytes));
		fprintf(out, "<g><title>");
		xml_text(out, p[i].gpu.name);
		fprintf(out, "</title>\n");
		svg_label(out, x + bar_w / 2, top + plot_h + 18,
			  p[i].gpu.name);
		fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\""
			"middle\">%s</text>\n<text x=\"%.1f\" y=\"%.0f\" "
			"text-anchor=\"middle\">%.2f GiB used</text>\n",
			x + bar_w / 2,
			top + plot_h + 18 + 14 * GM_SVG_NAME_LINES,
			p[i].fits ? "fits" : "does not fit", x + bar_w / 2,
			top + plot_h + 18 + 14 * (GM_SVG_NAME_LINES + 1),
			p[i].per_gpu.device_used / (double)GM_GiB);
		fprintf(out, "</g>\n");
	}
	for (size_t k = 0; k < N_PARTS; k++) {
		double lx = left + n * (bar_w + gap) + 10;
		double ly = top + (N_PARTS - 1 - k) * 18;
		fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" "
			"height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
			"y=\"%.0f\">%s</text>\n", lx, ly, parts[k].color,
			lx + 18, ly + 10, parts[k].label);
	}
	fprintf(out, "</svg>\n");
	return ferror(out) ? GM_EIO : 0;
}
