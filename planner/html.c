/*
 * html.c - the `--html FILE` page (see html.h).
 */
#include "html.h"

#include "chart.h"
#include "error.h"
#include "report.h"
#include "units.h"

#include <string.h>

static const char style[] =
	"body{font-family:'DejaVu Sans',Verdana,sans-serif;color:#222;"
	"margin:24px;max-width:1400px}"
	"h1{font-size:21px;margin:0 0 8px}h2{font-size:16px;margin:24px 0 8px}"
	"p,li{line-height:1.45;max-width:980px}"
	".yes{color:#060;font-weight:bold}.no{color:#b00;font-weight:bold}"
	"table{border-collapse:collapse;font-size:13px}"
	"th,td{padding:3px 10px;text-align:right;"
	"border-bottom:1px solid #ddd}"
	"th:first-child,td:first-child{text-align:left}"
	"th{background:#f4f4f4}"
	".chart{overflow-x:auto}.sw{display:inline-block;width:10px;"
	"height:10px;margin-right:6px}"
	"pre.hint{background:#f6f6f6;padding:8px 10px;white-space:pre-wrap;"
	"max-width:980px;font-size:13px}"
	"footer{margin-top:28px;color:#666;font-size:12px}";

static double gib(double bytes)
{
	return bytes / (double)GM_GiB;
}

static void model_words(FILE *out, const struct gm_spec *s,
			const struct gm_plan *p)
{
	const struct gm_spec_model *m = &s->model;

	double n = (double)p->parameters;

	fprintf(out, "<li>Model: %s, %s head, %llu layers, hidden size %llu, "
		"MLP %llu, %llu attention heads (%llu key/value heads), "
		"vocabulary %llu; %.2f %s parameters.</li>\n",
		gm_arch_name(m->architecture), gm_head_name(m->head),
		(unsigned long long)m->layers,
		(unsigned long long)m->hidden_size,
		(unsigned long long)m->ffn_hidden_size,
		(unsigned long long)m->attention_heads,
		(unsigned long long)m->kv_heads,
		(unsigned long long)m->vocab_size, n >= 1e9 ? n / 1e9 : n / 1e6,
		n >= 1e9 ? "billion" : "million");
}

/* How the run is built: the model, then the run's description (run.h),
 * the one the plan's table and JSON print, with the recipe's name. */
static void run_words(FILE *out, const struct gm_spec *s,
		      const struct gm_plan *p, bool fit)
{
	fputs("<ul>\n", out);
	model_words(out, s, p);
	gm_run_html(out, &p->run, p->recipe, fit);
	/* a plan's figures that no bar shows */
	if (!fit && p->run.train && p->trainable != p->parameters)
		fprintf(out, "<li>Trainable parameters: %llu, the adapters' "
			"(the base's frozen).</li>\n",
			(unsigned long long)p->trainable);
	if (!fit && p->host > 0)
		fprintf(out, "<li>Host memory a rank: %.2f GiB (what is "
			"offloaded, pinned).</li>\n", gib(p->host));
	if (!fit && !p->run.train && p->per_gpu.kv_cache > 0)
		fprintf(out, "<li>KV cache at the end: %.2f GiB a GPU, what "
			"the cache holds after the last decode step (the "
			"figure to size a server's batch by; the bars show it "
			"at the peak).</li>\n", gib(p->per_gpu.kv_cache));
	fputs("</ul>\n", out);
}

/* The plans' (n of them: a fit page's cards) outside-the-allocator
 * figure, from the smallest to the largest where the cards differ. */
static void assumptions(FILE *out, const struct gm_model_opts *o,
			const struct gm_plan *p, size_t n)
{
	double lo = (double)p->gpu.context_bytes, hi = lo;

	for (size_t i = 1; i < n; i++) {
		double c = (double)p[i].gpu.context_bytes;
		lo = c < lo ? c : lo;
		hi = c > hi ? c : hi;
	}
	fputs("<ul>\n<li>Peak reserved (what "
	      "<code>torch.cuda.max_memory_reserved()</code> would report): ",
	      out);
	if (o->reserve == GM_RESERVE_SIMULATED)
		fputs("the step's allocations, tensor by tensor in PyTorch's "
		      "order, replayed through gpumem's allocator core with "
		      "PyTorch's caching policy on a simulated card (two "
		      "training steps or inference passes).", out);
	else
		fputs("PyTorch's rounding and segment rules applied to the "
		      "peak's tensors, plus a share for fragmentation "
		      "(the analytic model).", out);
	fputs("</li>\n<li>Outside the allocator: ", out);
	if (hi > lo)
		fprintf(out, "%.2f to %.2f GiB a GPU, by the card, for the "
			"CUDA context and the libraries' modules (the "
			"catalog's figure for each card's generation: measured "
			"on an H200, estimated for the others; <code>gpumem "
			"gpus --format json</code>)", gib(lo), gib(hi));
	else
		fprintf(out, "%.2f GiB a GPU for the CUDA context and the "
			"libraries' modules (the catalog's figure for this "
			"generation: measured on an H200, estimated for the "
			"others; <code>gpumem gpus --format json</code>)",
			gib(lo));
	if (p->per_gpu.nccl > 0)
		fprintf(out, ", plus %.2f GiB of NCCL buffers",
			gib(p->per_gpu.nccl));
	fputs(". nvidia-smi shows the sum as the process's memory.</li>\n",
	      out);
	if (p->gpu.cap_bytes) {
		bool same = true;

		/* a fraction gives each card its own cap */
		for (size_t i = 1; i < n; i++)
			same = same && p[i].gpu.cap_bytes == p->gpu.cap_bytes;
		if (same)
			fprintf(out, "<li>Planned under a per-process cap of "
				"%.2f GiB", gib((double)p->gpu.cap_bytes));
		else
			fputs("<li>Planned under a per-process cap, each "
			      "card's in the table's cap column", out);
		fputs(" (<code>--fraction</code> / <code>--limit</code>, as "
		      "<code>gpumem run</code> or "
		      "<code>torch.cuda.set_per_process_memory_fraction"
		      "</code> enforce it). The cap covers the allocator's "
		      "memory, not the CUDA context or NCCL; the allocator "
		      "is held to it, as PyTorch's frees its cache before it "
		      "reports out of memory.</li>\n", out);
	}
	fputs("<li>Not modelled, and how close the figures come to real "
	      "runs: planner/README.md (\"What is not modelled\") and "
	      "tests/data/calibration/README.md.</li>\n</ul>\n", out);
}

static void stage_table(FILE *out, const struct gm_plan *p)
{
	const unsigned n = p->n_stages > 1 ? p->n_stages : 1;
	double v[GM_CHART_PARTS];

	fputs("<table>\n<tr><th>GiB at the peak</th>", out);
	for (unsigned i = 0; i < n; i++)
		if (n > 1)
			fprintf(out, "<th>stage %u</th>", i);
		else
			fputs("<th>each GPU</th>", out);
	fputs("</tr>\n", out);
	for (int k = 0; k < GM_CHART_PARTS; k++) {
		fprintf(out, "<tr><td><span class=\"sw\" style=\"background:"
			"%s\"></span>%s</td>", gm_chart_part_color[k],
			gm_chart_part_label[k]);
		for (unsigned i = 0; i < n; i++) {
			gm_chart_parts(n > 1 ? &p->stages[i] : &p->per_gpu, v);
			fprintf(out, "<td>%.2f</td>", gib(v[k]));
		}
		fputs("</tr>\n", out);
	}
	fputs("<tr><td>peak allocated</td>", out);
	for (unsigned i = 0; i < n; i++)
		fprintf(out, "<td>%.2f</td>", gib(n > 1 ?
			p->stages[i].peak_allocated : p->per_gpu.peak_allocated));
	fputs("</tr>\n<tr><td>peak reserved</td>", out);
	for (unsigned i = 0; i < n; i++)
		fprintf(out, "<td>%.2f</td>", gib(n > 1 ?
			p->stages[i].peak_reserved : p->per_gpu.peak_reserved));
	fputs("</tr>\n<tr><th>device used</th>", out);
	for (unsigned i = 0; i < n; i++)
		fprintf(out, "<th>%.2f</th>", gib(n > 1 ?
			p->stages[i].device_used : p->per_gpu.device_used));
	fputs("</tr>\n</table>\n", out);
}

static void fit_table(FILE *out, const struct gm_plan *plans,
		      const struct gm_fit *f, const struct gm_fit_change *ch,
		      size_t n, bool train)
{
	bool cap = n && f[0].gpu.cap_bytes;
	char buf[1024];

	fprintf(out, "<table>\n<tr><th>GPU</th><th>capacity GiB</th>"
		"<th>usable GiB</th>%s"
		"<th>largest %s</th>%s<th>fewest GPUs</th><th>GiB used at "
		"the largest %s</th>"
		"<th>bandwidth GB/s</th><th>bf16 TFLOP/s</th>%s</tr>\n",
		cap ? "<th>cap GiB</th>" : "", train ? "micro-batch" : "batch",
		train ? "<th>accumulation steps</th>" : "",
		train ? "micro-batch" : "batch",
		ch ? "<th>smallest change that fits</th>" : "");
	for (size_t i = 0; i < n; i++) {
		fputs("<tr><td>", out);
		gm_chart_text(out, f[i].gpu.name);
		fprintf(out, "</td><td>%.2f</td><td>%.2f%s</td>",
			gib((double)f[i].gpu.capacity_bytes),
			gib((double)gm_plan_gpu_usable(&f[i].gpu)),
			f[i].gpu.usable_estimated ? " (estimated)" : "");
		if (cap && gm_plan_gpu_cap_above_usable(&f[i].gpu))
			fputs("<td>above usable</td>", out);
		else if (cap)
			fprintf(out, "<td>%.2f</td>",
				gib((double)f[i].gpu.cap_bytes));
		if (f[i].max_micro_batch)
			fprintf(out, "<td>%llu</td>",
				(unsigned long long)f[i].max_micro_batch);
		else
			fputs("<td class=\"no\">none</td>", out);
		if (train && f[i].max_micro_batch)
			fprintf(out, "<td>%llu</td>", (unsigned long long)
				f[i].gradient_accumulation_steps);
		else if (train)
			fputs("<td>-</td>", out);
		if (f[i].min_gpus && f[i].min_gpus_micro_batch !=
				     f[i].max_micro_batch) {
			/* at another micro-batch than the row's */
			fprintf(out, "<td>%llu (at %s %llu)</td>",
				(unsigned long long)f[i].min_gpus,
				train ? "micro-batch" : "batch",
				(unsigned long long)
				f[i].min_gpus_micro_batch);
		} else if (f[i].min_gpus) {
			fprintf(out, "<td>%llu</td>",
				(unsigned long long)f[i].min_gpus);
		} else {
			char why[48];

			fprintf(out, "<td class=\"no\">%s</td>",
				gm_fit_min_gpus_none(&f[i], why, sizeof(why)));
		}
		/* the table's figures, by its rules (report.h) */
		fprintf(out, "<td>%.2f</td><td>%s</td>",
			gib(plans[i].per_gpu.device_used),
			gm_fit_bandwidth_text(&f[i], buf, sizeof(buf)));
		fprintf(out, "<td>%s</td>",
			gm_fit_tflops_text(&f[i], buf, sizeof(buf)));
		if (ch) {
			fputs("<td style=\"text-align:left\">", out);
			gm_chart_text(out, gm_fit_change_text(&ch[i], buf,
							      sizeof(buf)));
			fputs("</td>", out);
		}
		fputs("</tr>\n", out);
	}
	fputs("</table>\n", out);
}

static void head(FILE *out, const char *title)
{
	fputs("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset="
	      "\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-"
	      "width\">\n<title>", out);
	gm_chart_text(out, title);
	fprintf(out, "</title>\n<style>%s</style>\n</head>\n<body>\n", style);
}

/*
 * What a process can have of the card (gm_plan_gpu_usable, the bound of
 * fits and headroom), as plan's table names it ("gpu capacity", "usable
 * (cuda total)" or "usable (estimated)").
 */
static void usable_words(FILE *out, const struct gm_plan *p)
{
	fprintf(out, "A process can have %.2f GiB of the card (usable, %s) "
		"of its %.2f GiB capacity",
		gib((double)gm_plan_gpu_usable(&p->gpu)),
		p->gpu.usable_estimated ? "estimated" :
		"CUDA's total, <code>cudaMemGetInfo</code>",
		gib((double)p->gpu.capacity_bytes));
}

/* The cap binds where it leaves the allocator less than the card does
 * (gm_plan_capped, cap.c): fits and headroom are then against it. */
static bool cap_binds(const struct gm_plan *p)
{
	return p->gpu.cap_bytes &&
	       (double)p->gpu.cap_bytes + p->per_gpu.cuda_context <
		       (double)gm_plan_gpu_usable(&p->gpu);
}

/* The three largest parts at the peak (gm_chart_parts' first nine, the
 * tensors), largest first, as "activations 56.08 GiB, ...". */
static void peak_parts(FILE *out, const struct gm_terms *t)
{
	double v[GM_CHART_PARTS];
	bool used[GM_CHART_PARTS] = {false};

	gm_chart_parts(t, v);
	for (int j = 0; j < 3; j++) {
		int best = -1;

		for (int k = 0; k < 9; k++)
			if (!used[k] && v[k] > 0 && (best < 0 || v[k] > v[best]))
				best = k;
		if (best < 0)
			return;
		used[best] = true;
		fprintf(out, "%s%s %.2f GiB", j ? ", " : "",
			gm_chart_part_label[best], gib(v[best]));
	}
}

/*
 * Why a plan does not fit: by how much, against what (the cap where it
 * binds, else usable memory; set-up's peak where only it is over), where
 * the peak is (phase, stage, its largest parts), where the simulated
 * allocator first refuses a request, and the smallest change that fits
 * as gpumem plan's hint prints it (c NULL: the search failed; nothing).
 */
static void not_fit(FILE *out, const struct gm_plan *p,
		    const struct gm_fit_change *c)
{
	const struct gm_terms *t = &p->per_gpu;
	double usable = (double)gm_plan_gpu_usable(&p->gpu);
	char buf[1024];

	fputs("<h2>Why it does not fit</h2>\n<ul>\n<li>", out);
	if (cap_binds(p))
		fprintf(out, "Peak reserved, %.2f GiB, is %.2f GiB over the "
			"cap of %.2f GiB on the allocator.",
			gib(t->peak_reserved), gib(-(double)p->headroom_bytes),
			gib((double)p->gpu.cap_bytes));
	else if (t->device_used > usable)
		fprintf(out, "Device used, %.2f GiB, is %.2f GiB over the "
			"%.2f GiB usable (the card's capacity is %.2f GiB).",
			gib(t->device_used), gib(-(double)p->headroom_bytes),
			gib(usable), gib((double)p->gpu.capacity_bytes));
	else if (p->init_peak + t->cuda_context > usable)
		fprintf(out, "While the model is built, before the first "
			"step, it holds %.2f GiB plus %.2f GiB outside the "
			"allocator: %.2f GiB over the %.2f GiB usable.",
			gib(p->init_peak), gib(t->cuda_context),
			gib(p->init_peak + t->cuda_context - usable),
			gib(usable));
	else
		fputs("The step's peak is within the usable memory, but the "
		      "allocator runs out of memory before it (below).", out);
	fprintf(out, "</li>\n<li>The peak is in the %s", gm_phase_name(
		t->peak_phase));
	if (p->n_stages > 1)
		fprintf(out, " of pipeline stage %u (of %u)",
			p->per_gpu_stage, p->n_stages);
	fprintf(out, ": of the %.2f GiB allocated then, the largest parts "
		"are ", gib(t->peak_allocated));
	peak_parts(out, t);
	fputs(".</li>\n", out);
	if (t->sim.out_of_memory)
		fprintf(out, "<li>Replayed on this card, the allocator first "
			"refuses a request of %.2f GiB, with %.2f GiB "
			"allocated and %.2f GiB reserved: there the run stops "
			"with an out-of-memory error. The figures on this page "
			"are those of a card grown until the step gets "
			"through.</li>\n", gib(t->sim.oom_requested),
			gib(t->sim.oom_allocated), gib(t->sim.oom_reserved));
	fputs("</ul>\n", out);
	if (!c || c->fits_as_given)
		return;
	gm_fit_change_text(c, buf, sizeof(buf));
	if (c->found) {
		fputs("<p>The smallest change that fits (gpumem plan's hint; "
		      "paste the <code>--set</code> arguments after the "
		      "command):</p>\n<pre class=\"hint\">", out);
		gm_chart_text(out, buf);
		fputs("</pre>\n", out);
		return;
	}
	fputs("<p>No change gpumem searches fits (micro-batch, activation "
	      "checkpointing, ZeRO, offload, more GPUs, tensor parallel, "
	      "adapters): </p>\n<pre class=\"hint\">", out);
	gm_chart_text(out, buf);
	fputs("</pre>\n", out);
}

static void plan_page(FILE *out, const struct gm_spec *s,
		      const struct gm_model_opts *o, const struct gm_plan *p,
		      const struct gm_fit_change *change)
{
	char title[512];
	const struct gm_terms *t = &p->per_gpu;

	snprintf(title, sizeof(title), "gpumem plan: %s on %s", p->name,
		 p->gpu.name);
	head(out, title);
	fputs("<h1>", out);
	gm_chart_text(out, p->name);
	fputs(" on ", out);
	gm_chart_text(out, p->gpu.name);
	fprintf(out, ": <span class=\"%s\">%s</span></h1>\n<p>The most loaded "
		"GPU%s reserves %.2f GiB at its peak (%.2f GiB of tensors "
		"live) and %.2f GiB outside the allocator: %.2f GiB in all. ",
		p->fits ? "yes" : "no", p->fits ? "fits" : "does not fit",
		p->n_stages > 1 ? " (a pipeline stage)" : "",
		gib(t->peak_reserved), gib(t->peak_allocated),
		gib(t->cuda_context), gib(t->device_used));
	usable_words(out, p);
	if (cap_binds(p))
		fprintf(out, "; under a cap of %.2f GiB on the allocator, "
			"headroom %.2f GiB (the cap less peak reserved).</p>\n",
			gib((double)p->gpu.cap_bytes),
			gib((double)p->headroom_bytes));
	else if (p->gpu.cap_bytes)
		fprintf(out, "; the cap of %.2f GiB on the allocator does not "
			"bind: headroom %.2f GiB (usable less device used)."
			"</p>\n", gib((double)p->gpu.cap_bytes),
			gib((double)p->headroom_bytes));
	else
		fprintf(out, "; headroom %.2f GiB (usable less device used)."
			"</p>\n", gib((double)p->headroom_bytes));
	if (!p->fits)
		not_fit(out, p, change);
	fprintf(out, "<h2>Memory of each GPU at the peak</h2>\n<div "
		"class=\"chart\">\n");
	gm_chart_stages(out, p);
	fputs("</div>\n<h2>The figures</h2>\n", out);
	stage_table(out, p);
	fputs("<h2>How the run is built</h2>\n", out);
	run_words(out, s, p, false);
	fputs("<h2>Assumptions</h2>\n", out);
	assumptions(out, o, p, 1);
}

static void fit_page(FILE *out, const struct gm_spec *s,
		     const struct gm_model_opts *o, const struct gm_plan *plans,
		     const struct gm_fit *f, const struct gm_fit_change *ch,
		     size_t n)
{
	bool train = s->task == GM_TASK_TRAIN;
	const char *mb = train ? "micro-batch" : "batch";
	char title[512];
	size_t ok = 0;

	for (size_t i = 0; i < n; i++)
		ok += f[i].max_micro_batch > 0;
	/* n card models of the catalog, each planned on its own: not one
	 * run of n GPUs */
	snprintf(title, sizeof(title), "gpumem fit: %s on %zu GPU model%s",
		 n ? plans[0].name : "", n, n == 1 ? "" : "s");
	head(out, title);
	fputs("<h1>", out);
	gm_chart_text(out, n ? plans[0].name : "");
	fprintf(out, ": the largest %s on each of %zu GPU model%s</h1>\n"
		"<p>%zu of them run it at %s 1 or more", mb, n,
		n == 1 ? "" : "s", ok, mb);
	if (train && f[0].global_batch)
		fprintf(out, ", with gradient accumulation to the global "
			"batch of %llu", (unsigned long long)f[0].global_batch);
	fprintf(out, ". Each bar is the GPU's memory at its largest %s "
		"(at 1 where none fits) against its capacity (red); a %s "
		"fits when that memory is within what a process can have of "
		"the card (usable, the table's column), and under "
		"<code>--fraction</code> / <code>--limit</code> peak reserved "
		"within the cap. Where the spec as given does not fit, the "
		"table's last column is the smallest change that does, as "
		"gpumem plan's hint prints it.</p>\n<h2>Across cards</h2>\n"
		"<div class=\"chart\">\n", mb, mb);
	gm_chart_fit(out, plans, f, n);
	fputs("</div>\n<h2>The figures</h2>\n", out);
	fit_table(out, plans, f, ch, n, train);
	fputs("<h2>How the run is built</h2>\n", out);
	run_words(out, s, &plans[0], true);
	fputs("<h2>Assumptions</h2>\n", out);
	assumptions(out, o, plans, n);
}

int gm_plan_html(FILE *out, const struct gm_spec *spec,
		 const struct gm_model_opts *opts, const struct gm_plan *plans,
		 const struct gm_fit *fits, const struct gm_fit_change *changes,
		 size_t n)
{
	struct gm_model_opts d;

	if (!opts) {
		gm_model_opts_default(&d);
		opts = &d;
	}
	if (!n)
		return GM_EINVAL;
	if (fits)
		fit_page(out, spec, opts, plans, fits, changes, n);
	else
		plan_page(out, spec, opts, plans, changes);
	fputs("<footer>Written by gpumem. GiB = 2<sup>30</sup> bytes.</footer>"
	      "\n</body>\n</html>\n", out);
	return ferror(out) ? GM_EIO : 0;
}
