/*
 * chart.c - plans drawn as SVG (see chart.h).
 *
 * Text is measured as CHAR_W pixels a character at 12 px (DejaVu Sans,
 * the commonest sans-serif fallback, averages about 6.6 px), so columns
 * sized from it do not clip or collide.
 */
#include "chart.h"

#include "error.h"
#include "units.h"

#include <math.h>
#include <string.h>

#define CHAR_W 7.0
#define LABEL_GAP 14.0 /* least vertical distance between two labels */
#define TITLE_W 1.45   /* a 15 px bold character, in CHAR_W */

const char *const gm_chart_part_label[GM_CHART_PARTS] = {
	"weights", "gradients", "optimizer states", "activations", "logits",
	"temporary", "KV cache", "communication", "workspace",
	"allocator reserve", "outside allocator"};
const char *const gm_chart_part_color[GM_CHART_PARTS] = {
	"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948",
	"#b07aa1", "#ff9da7", "#9c755f", "#bab0ac", "#79706e"};

void gm_chart_parts(const struct gm_terms *t, double v[GM_CHART_PARTS])
{
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
	/* what reserved holds beyond the requests at the peak (the blocks'
	 * rounding included), so the bar adds up to device used */
	v[9] = t->peak_reserved - t->peak_requested;
	v[10] = t->cuda_context;
	for (int k = 0; k < GM_CHART_PARTS; k++)
		if (!(v[k] > 0))
			v[k] = 0;
}

void gm_chart_text(FILE *out, const char *s)
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

static double gib(double bytes)
{
	return bytes / (double)GM_GiB;
}

static double sum(const double *v)
{
	double s = 0;

	for (int k = 0; k < GM_CHART_PARTS; k++)
		s += v[k];
	return s;
}

/* A tick step of 1, 2 or 5 x 10^k GiB giving about 5 ticks up to max. */
static double tick_step(double max_gib)
{
	double raw = max_gib / 5, p = pow(10, floor(log10(raw > 0 ? raw : 1)));

	if (raw <= p)
		return p;
	if (raw <= 2 * p)
		return 2 * p;
	if (raw <= 5 * p)
		return 5 * p;
	return 10 * p;
}

/* Whether a stage fits: the card, and under a cap the allocator too. */
static bool stage_fits(const struct gm_plan *p, const struct gm_terms *t)
{
	if (t->device_used > (double)gm_plan_gpu_usable(&p->gpu))
		return false;
	return !p->gpu.cap_bytes || t->peak_reserved <= (double)p->gpu.cap_bytes;
}

static void title(FILE *out, const char *name, const char *gpu,
		  const char *what)
{
	fputs("<title>", out);
	gm_chart_text(out, name);
	fputs(" on ", out);
	gm_chart_text(out, gpu);
	fprintf(out, ": %s</title>\n<text x=\"12\" y=\"24\" font-size=\"15\" "
		"font-weight=\"bold\">", what);
	gm_chart_text(out, name);
	fputs(" on ", out);
	gm_chart_text(out, gpu);
	fprintf(out, ": %s</text>\n", what);
}

/* A label beside a bar: where it points (y), where it goes (at). */
struct label {
	double y, at;
	const char *what, *color;
	double bytes;
};

/*
 * Spread labels (sorted bottom first) so that two are at least LABEL_GAP
 * apart, moving each up as little as needed; when that runs above top,
 * push them back down from there.
 */
static void spread(struct label *l, int m, double top)
{
	for (int j = 0; j < m; j++)
		l[j].at = l[j].y + 4;
	for (int j = 1; j < m; j++)
		if (l[j].at > l[j - 1].at - LABEL_GAP)
			l[j].at = l[j - 1].at - LABEL_GAP;
	if (m && l[m - 1].at < top) {
		l[m - 1].at = top;
		for (int j = m - 2; j >= 0; j--)
			if (l[j].at < l[j + 1].at + LABEL_GAP)
				l[j].at = l[j + 1].at + LABEL_GAP;
	}
}

int gm_chart_stages(FILE *out, const struct gm_plan *p)
{
	const double left = 64, top = 60, plot_h = 380, bar_w = 84;
	const double label_w = 24 * CHAR_W, col_w = bar_w + label_w + 36;
	const unsigned n = p->n_stages > 1 ? p->n_stages : 1;
	const char *what = "memory per GPU at the peak (GiB)";
	double v[GM_CHART_PARTS], maxv = (double)p->gpu.capacity_bytes;
	double width = left + n * col_w + 12, height = top + plot_h + 58;
	double title_w = 24 + CHAR_W * TITLE_W *
		(strlen(p->name) + strlen(p->gpu.name) + strlen(what) + 6);
	double step, cap_y = 0, card_y;

	for (unsigned i = 0; i < n; i++) {
		gm_chart_parts(n > 1 ? &p->stages[i] : &p->per_gpu, v);
		if (sum(v) > maxv)
			maxv = sum(v);
	}
	if (maxv <= 0)
		maxv = 1;
	maxv *= 1.001;
	if (title_w > width)
		width = title_w;
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"DejaVu Sans, Verdana, sans-serif\" "
		"font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
		"fill=\"white\"/>\n", width, height, width, height);
	title(out, p->name, p->gpu.name, what);
	step = tick_step(gib(maxv));
	maxv = ceil(gib(maxv) / step) * step * (double)GM_GiB;
	for (double t = 0; t <= gib(maxv) + step / 1e6; t += step) {
		double y = top + plot_h - plot_h * t / gib(maxv);

		fprintf(out, "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" "
			"y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n<text x=\"%.0f\" "
			"y=\"%.1f\" text-anchor=\"end\" fill=\"#555\">%g"
			"</text>\n", left - 4, y, left + n * col_w, y,
			left - 8, y + 4, t);
	}
	card_y = top + plot_h - plot_h * (double)p->gpu.capacity_bytes / maxv;
	if (p->gpu.cap_bytes)
		cap_y = top + plot_h - plot_h * (double)p->gpu.cap_bytes / maxv;
	for (unsigned i = 0; i < n; i++) {
		const struct gm_terms *t = n > 1 ? &p->stages[i] : &p->per_gpu;
		double x = left + 16 + i * col_w, y = top + plot_h;
		struct label l[GM_CHART_PARTS + 2];
		int m = 0;
		char name[64];

		gm_chart_parts(t, v);
		for (int k = 0; k < GM_CHART_PARTS; k++) {
			double h = plot_h * v[k] / maxv;

			if (v[k] <= 0)
				continue;
			y -= h;
			fprintf(out, "<rect x=\"%.1f\" y=\"%.2f\" width=\"%.0f\" "
				"height=\"%.2f\" fill=\"%s\"><title>%s: %.2f "
				"GiB</title></rect>\n", x, y, bar_w, h,
				gm_chart_part_color[k], gm_chart_part_label[k],
				gib(v[k]));
			l[m++] = (struct label){y + h / 2, 0,
						gm_chart_part_label[k], "#222",
						v[k]};
		}
		/* the capacity and cap lines, labelled in the same column */
		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			"y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"2\" "
			"stroke-dasharray=\"6 3\"/>\n", x - 8, card_y,
			x + bar_w + 8, card_y);
		l[m++] = (struct label){card_y, 0, "capacity", "#c00",
					(double)p->gpu.capacity_bytes};
		if (p->gpu.cap_bytes) {
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				"y2=\"%.1f\" stroke=\"#d67200\" stroke-width="
				"\"2\" stroke-dasharray=\"3 2\"/>\n", x - 8, cap_y,
				x + bar_w + 8, cap_y);
			l[m++] = (struct label){cap_y, 0, "cap", "#d67200",
						(double)p->gpu.cap_bytes};
		}
		/* bottom first */
		for (int j = 1; j < m; j++)
			for (int k = j; k > 0 && l[k].y > l[k - 1].y; k--) {
				struct label tmp = l[k];
				l[k] = l[k - 1];
				l[k - 1] = tmp;
			}
		spread(l, m, top - 8);
		for (int j = 0; j < m; j++)
			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				"y2=\"%.1f\" stroke=\"#999\"/>\n<text x=\"%.1f\" "
				"y=\"%.1f\" fill=\"%s\">%s %.2f</text>\n",
				x + bar_w + 8, l[j].y, x + bar_w + 14,
				l[j].at - 4, x + bar_w + 16, l[j].at,
				l[j].color, l[j].what, gib(l[j].bytes));
		if (n > 1)
			snprintf(name, sizeof(name), "stage %u (%llu layers)",
				 i, (unsigned long long)t->layers);
		else
			snprintf(name, sizeof(name), "each GPU");
		fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle"
			"\" font-weight=\"bold\">%s</text>\n<text x=\"%.1f\" "
			"y=\"%.0f\" text-anchor=\"middle\" fill=\"%s\">%.2f GiB "
			"used, %s</text>\n", x + bar_w / 2, top + plot_h + 20,
			name, x + bar_w / 2, top + plot_h + 38,
			stage_fits(p, t) ? "#060" : "#b00", gib(t->device_used),
			stage_fits(p, t) ? "fits" : "does not fit");
	}
	fputs("</svg>\n", out);
	return ferror(out) ? GM_EIO : 0;
}

int gm_chart_fit(FILE *out, const struct gm_plan *plans,
		 const struct gm_fit *fits, size_t n)
{
	const double row_h = 24, bar_h = 14, region = 480, right_w = 36 * CHAR_W;
	/* inference has a batch, no accumulation */
	bool train = !n || plans[0].run.train;
	const char *what = train ? "each GPU at its largest micro-batch (GiB)"
				 : "each GPU at its largest batch (GiB)";
	double name_w = 0, maxv = 0, width, height, legend_y = 44, y0, lx;
	double v[GM_CHART_PARTS], bx, step, title_w;
	const char *model = n ? plans[0].name : "";

	for (size_t i = 0; i < n; i++) {
		double w = CHAR_W * (double)strlen(plans[i].gpu.name);

		gm_chart_parts(&plans[i].per_gpu, v);
		if (w > name_w)
			name_w = w;
		if ((double)plans[i].gpu.capacity_bytes > maxv)
			maxv = (double)plans[i].gpu.capacity_bytes;
		if (sum(v) > maxv)
			maxv = sum(v);
	}
	if (maxv <= 0)
		maxv = 1;
	maxv *= 1.02;
	bx = 12 + name_w + 12;
	width = bx + region + 12 + right_w;
	title_w = 24 + CHAR_W * TITLE_W * (strlen(model) + strlen(what) + 2);
	if (title_w > width)
		width = title_w;
	/* the legend wraps at the width */
	lx = 12;
	for (int k = 0; k < GM_CHART_PARTS; k++) {
		double w = 26 + CHAR_W * (double)strlen(gm_chart_part_label[k]);

		if (lx + w > width - 12) {
			lx = 12;
			legend_y += 18;
		}
		lx += w;
	}
	y0 = legend_y + 46;
	height = y0 + n * row_h + 36;
	fprintf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
		"height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" "
		"font-family=\"DejaVu Sans, Verdana, sans-serif\" "
		"font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" "
		"fill=\"white\"/>\n<title>", width, height, width, height);
	gm_chart_text(out, model);
	fprintf(out, ": %s</title>\n<text x=\"12\" y=\"24\" font-size=\"15\" "
		"font-weight=\"bold\">", what);
	gm_chart_text(out, model);
	fprintf(out, ": %s</text>\n", what);
	lx = 12;
	legend_y = 44;
	for (int k = 0; k < GM_CHART_PARTS; k++) {
		double w = 26 + CHAR_W * (double)strlen(gm_chart_part_label[k]);

		if (lx + w > width - 12) {
			lx = 12;
			legend_y += 18;
		}
		fprintf(out, "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" "
			"height=\"12\" fill=\"%s\"/><text x=\"%.0f\" "
			"y=\"%.0f\">%s</text>\n", lx, legend_y - 10,
			gm_chart_part_color[k], lx + 16, legend_y,
			gm_chart_part_label[k]);
		lx += w;
	}
	/* grid and axis */
	step = tick_step(gib(maxv));
	for (double t = 0; t <= gib(maxv) + step / 1e6; t += step) {
		double x = bx + region * t / gib(maxv);

		fprintf(out, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" "
			"y2=\"%.0f\" stroke=\"#e4e4e4\"/>\n<text x=\"%.1f\" "
			"y=\"%.0f\" text-anchor=\"middle\" fill=\"#555\">%g"
			"</text>\n", x, y0 - 8, x, y0 + n * row_h, x,
			y0 + n * row_h + 16, t);
	}
	fprintf(out, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" "
		"fill=\"#555\">GiB</text>\n<text x=\"%.1f\" y=\"%.0f\" "
		"font-weight=\"bold\">%s</text>\n<text x=\"%.1f\" "
		"y=\"%.0f\" font-weight=\"bold\">GiB used / capacity</text>\n",
		bx + region / 2, y0 + n * row_h + 32, bx + region + 12, y0 - 26,
		!fits ? "" : train ? "micro-batch \xc3\x97 accumulation:" :
		"batch:",
		bx + region + 12, y0 - 12);
	for (size_t i = 0; i < n; i++) {
		const struct gm_plan *p = &plans[i];
		double y = y0 + i * row_h, x = bx;
		double card = region * (double)p->gpu.capacity_bytes / maxv;
		bool ok = fits ? fits[i].max_micro_batch > 0 : p->fits;

		gm_chart_parts(&p->per_gpu, v);
		fprintf(out, "<g><title>");
		gm_chart_text(out, p->gpu.name);
		fprintf(out, "</title>\n<text x=\"%.1f\" y=\"%.1f\" "
			"text-anchor=\"end\">", bx - 12, y + 11);
		gm_chart_text(out, p->gpu.name);
		fprintf(out, "</text>\n<rect x=\"%.1f\" y=\"%.1f\" "
			"width=\"%.1f\" height=\"%.0f\" fill=\"#f0f0f0\"/>\n",
			bx, y, card, bar_h);
		for (int k = 0; k < GM_CHART_PARTS; k++) {
			double w = region * v[k] / maxv;

			if (v[k] <= 0)
				continue;
			if (x + w > bx + region)
				w = bx + region - x;
			if (w <= 0)
				break;
			fprintf(out, "<rect x=\"%.1f\" y=\"%.1f\" "
				"width=\"%.2f\" height=\"%.0f\" fill=\"%s\">"
				"<title>%s: %.2f GiB</title></rect>\n", x, y,
				w, bar_h, gm_chart_part_color[k],
				gm_chart_part_label[k], gib(v[k]));
			x += w;
		}
		fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
			"y2=\"%.1f\" stroke=\"#c00\" stroke-width=\"2\"/>\n",
			bx + card, y - 3, bx + card, y + bar_h + 3);
		if (p->gpu.cap_bytes) {
			double c = region * (double)p->gpu.cap_bytes / maxv;

			fprintf(out, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
				"y2=\"%.1f\" stroke=\"#d67200\" stroke-width="
				"\"2\" stroke-dasharray=\"3 2\"/>\n", bx + c,
				y - 3, bx + c, y + bar_h + 3);
		}
		fprintf(out, "<text x=\"%.1f\" y=\"%.1f\" fill=\"%s\">",
			bx + region + 12, y + 11, ok ? "#222" : "#b00");
		if (fits && fits[i].max_micro_batch && !train)
			fprintf(out, "%llu: ", (unsigned long long)
				fits[i].max_micro_batch);
		else if (fits && fits[i].max_micro_batch)
			fprintf(out, "%llu \xc3\x97 %llu: ",
				(unsigned long long)fits[i].max_micro_batch,
				(unsigned long long)
				fits[i].gradient_accumulation_steps);
		else if (fits)
			fputs("none (at 1): ", out);
		fprintf(out, "%.2f / %.2f</text>\n</g>\n",
			gib(p->per_gpu.device_used),
			gib((double)p->gpu.capacity_bytes));
	}
	fputs("</svg>\n", out);
	return ferror(out) ? GM_EIO : 0;
}
