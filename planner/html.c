/*
 * html.c - the `--html FILE` page (see html.h).
 */
#include "html.h"

#include "chart.h"
#include "error.h"
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
	"footer{margin-top:28px;color:#666;font-size:12px}";

static double gib(double bytes)
{
	return bytes / (double)GM_GiB;
}

static const char *recipe_words(enum gm_recipe r)
{
	switch (r) {
	case GM_RECIPE_DEEPSPEED:
		return "DeepSpeed's conventions: 16-bit weights and gradients, "
		       "fp32 master weights inside the optimizer (the ZeRO "
		       "paper's mixed-precision Adam)";
	case GM_RECIPE_MEGATRON:
		return "Megatron-LM's conventions: 16-bit weights with fp32 "
		       "main gradients";
	case GM_RECIPE_TORCH:
		break;
	}
	return "PyTorch's conventions (AMP, Lightning precision names)";
}

static const char *precision_words(enum gm_precision p)
{
	switch (p) {
	case GM_PREC_FP32:
		return "everything in fp32";
	case GM_PREC_FP16_MIXED:
		return "fp32 weights, gradients and optimizer states, "
		       "computed in fp16 under autocast";
	case GM_PREC_BF16_MIXED:
		return "fp32 weights, gradients and optimizer states, "
		       "computed in bf16 under autocast";
	case GM_PREC_FP16_TRUE:
		return "everything in fp16";
	case GM_PREC_BF16_TRUE:
		return "everything in bf16";
	}
	return "";
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

/* Megatron-LM's precisions (planner/model_megatron.c). */
static const char *megatron_precision_words(enum gm_precision p)
{
	switch (p) {
	case GM_PREC_FP32:
		return "everything in fp32";
	case GM_PREC_FP16_MIXED:
	case GM_PREC_FP16_TRUE:
		return "fp16 weights and gradients, fp32 master weights, "
		       "main gradients and Adam states";
	case GM_PREC_BF16_MIXED:
	case GM_PREC_BF16_TRUE:
		break;
	}
	return "bf16 weights, fp32 main gradients, master weights and Adam "
	       "states";
}

static void run_words(FILE *out, const struct gm_spec *s,
		      const struct gm_model_opts *o, const struct gm_plan *p,
		      const struct gm_fit *fits)
{
	const struct gm_spec_parallel *pa = &s->parallelism;

	fputs("<ul>\n", out);
	model_words(out, s, p);
	if (s->task == GM_TASK_TRAIN) {
		const struct gm_spec_training *t = &s->training;

		bool mg = t->framework == GM_FW_MEGATRON;

		fprintf(out, "<li>Training with %s: %s (%s), optimizer %s.</li>\n",
			recipe_words(mg ? GM_RECIPE_MEGATRON : o->recipe),
			gm_precision_name(t->precision),
			mg ? megatron_precision_words(t->precision) :
			precision_words(t->precision),
			gm_optimizer_name(t->optimizer));
		if (fits)
			fprintf(out, "<li>Sequences of %llu tokens, each GPU at "
				"its largest micro-batch",
				(unsigned long long)t->sequence_length);
		else
			fprintf(out, "<li>Micro-batch %llu of %llu tokens",
				(unsigned long long)t->micro_batch_size,
				(unsigned long long)t->sequence_length);
		if (!fits && p->gradient_accumulation_steps > 1)
			fprintf(out, ", %llu gradient-accumulation steps",
				(unsigned long long)
				p->gradient_accumulation_steps);
		fprintf(out, "; activation checkpointing %s, attention %s.</li>\n",
			gm_ckpt_name(t->activation_checkpointing),
			gm_attn_name(t->attention));
	} else {
		const struct gm_spec_inference *in = &s->inference;

		char batch[32];

		snprintf(batch, sizeof(batch), "%llu",
			 (unsigned long long)in->batch_size);
		fprintf(out, "<li>Inference: weights %s, batch %s, prompt "
			"%llu tokens, %llu generated, KV cache in %s.</li>\n",
			gm_precision_name(in->precision),
			fits ? "the largest on each GPU" : batch,
			(unsigned long long)in->prompt_length,
			(unsigned long long)in->generate_length,
			gm_kv_dtype_name(in->kv_cache_dtype));
	}
	fprintf(out, "<li>Parallelism: %llu data-parallel rank%s",
		(unsigned long long)gm_spec_data_parallel(s),
		gm_spec_data_parallel(s) == 1 ? "" : "s");
	if (pa->zero_stage && s->task == GM_TASK_TRAIN)
		fprintf(out, " with ZeRO stage %u%s", pa->zero_stage,
			pa->zero_stage == 3 ? " (FSDP full shard)" : "");
	if (pa->tensor_parallel > 1)
		fprintf(out, "; %llu-way tensor parallel (vocabulary %s%s)",
			(unsigned long long)pa->tensor_parallel,
			pa->tp_vocab == GM_TPV_REPLICATED ? "replicated" :
			"sharded",
			pa->sequence_parallel ? ", sequence parallel" : "");
	if (pa->pipeline_parallel > 1)
		fprintf(out, "; %llu pipeline stages (1F1B)",
			(unsigned long long)pa->pipeline_parallel);
	if (pa->expert_parallel > 1)
		fprintf(out, "; each MoE layer's experts split over %llu "
			"ranks (expert parallel, expert tensor parallel 1, "
			"all-to-all dispatch)",
			(unsigned long long)pa->expert_parallel);
	fputs(".</li>\n</ul>\n", out);
}

static void assumptions(FILE *out, const struct gm_model_opts *o,
			const struct gm_plan *p)
{
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
	fprintf(out, "</li>\n<li>Outside the allocator: %.2f GiB a GPU for the "
		"CUDA context and the libraries' modules (the catalog's "
		"figure for this generation: measured on an H200, estimated "
		"for the others; <code>gpumem gpus --format json</code>)",
		gib((double)p->gpu.context_bytes));
	if (p->per_gpu.nccl > 0)
		fprintf(out, ", plus %.2f GiB of NCCL buffers",
			gib(p->per_gpu.nccl));
	fputs(". nvidia-smi shows the sum as the process's memory.</li>\n",
	      out);
	if (p->gpu.cap_bytes)
		fprintf(out, "<li>Planned under a per-process cap of %.2f GiB "
			"(<code>--fraction</code> / <code>--limit</code>, as "
			"<code>gpumem run</code> or "
			"<code>torch.cuda.set_per_process_memory_fraction"
			"</code> enforce it). The cap covers the allocator's "
			"memory, not the CUDA context or NCCL; the allocator "
			"is held to it, as PyTorch's frees its cache before it "
			"reports out of memory.</li>\n",
			gib((double)p->gpu.cap_bytes));
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
		      const struct gm_fit *f, size_t n)
{
	bool cap = n && f[0].gpu.cap_bytes;

	fprintf(out, "<table>\n<tr><th>GPU</th><th>capacity GiB</th>%s"
		"<th>largest micro-batch</th><th>accumulation steps</th>"
		"<th>fewest GPUs</th><th>GiB used</th><th>bandwidth GB/s</th>"
		"<th>bf16 TFLOP/s</th></tr>\n", cap ? "<th>cap GiB</th>" : "");
	for (size_t i = 0; i < n; i++) {
		fputs("<tr><td>", out);
		gm_chart_text(out, f[i].gpu.name);
		fprintf(out, "</td><td>%.2f</td>",
			gib((double)f[i].gpu.capacity_bytes));
		if (cap)
			fprintf(out, "<td>%.2f</td>",
				gib((double)f[i].gpu.cap_bytes));
		if (f[i].max_micro_batch)
			fprintf(out, "<td>%llu</td><td>%llu</td>",
				(unsigned long long)f[i].max_micro_batch,
				(unsigned long long)
				f[i].gradient_accumulation_steps);
		else
			fputs("<td class=\"no\">none</td><td>-</td>", out);
		if (f[i].min_gpus) {
			fprintf(out, "<td>%llu</td>",
				(unsigned long long)f[i].min_gpus);
		} else {
			char why[48];

			fprintf(out, "<td class=\"no\">%s</td>",
				gm_fit_min_gpus_none(&f[i], why, sizeof(why)));
		}
		fprintf(out, "<td>%.2f</td><td>%g</td>",
			gib(plans[i].per_gpu.device_used),
			f[i].gpu.bandwidth_gbps);
		if (f[i].gpu.bf16_tflops > 0)
			fprintf(out, "<td>%g</td></tr>\n", f[i].gpu.bf16_tflops);
		else
			fputs("<td>-</td></tr>\n", out);
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

static void plan_page(FILE *out, const struct gm_spec *s,
		      const struct gm_model_opts *o, const struct gm_plan *p)
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
		"live) and %.2f GiB outside the allocator: %.2f GiB of the "
		"card's %.2f GiB",
		p->fits ? "yes" : "no", p->fits ? "fits" : "does not fit",
		p->n_stages > 1 ? " (a pipeline stage)" : "",
		gib(t->peak_reserved), gib(t->peak_allocated),
		gib(t->cuda_context), gib(t->device_used),
		gib((double)p->gpu.capacity_bytes));
	if (p->gpu.cap_bytes)
		fprintf(out, ", under a cap of %.2f GiB on the allocator",
			gib((double)p->gpu.cap_bytes));
	fprintf(out, "; headroom %.2f GiB.</p>\n",
		gib((double)p->headroom_bytes));
	fprintf(out, "<h2>Memory of each GPU at the peak</h2>\n<div "
		"class=\"chart\">\n");
	gm_chart_stages(out, p);
	fputs("</div>\n<h2>The figures</h2>\n", out);
	stage_table(out, p);
	fputs("<h2>How the run is built</h2>\n", out);
	run_words(out, s, o, p, NULL);
	fputs("<h2>Assumptions</h2>\n", out);
	assumptions(out, o, p);
}

static void fit_page(FILE *out, const struct gm_spec *s,
		     const struct gm_model_opts *o, const struct gm_plan *plans,
		     const struct gm_fit *f, size_t n)
{
	char title[512];
	size_t ok = 0;

	for (size_t i = 0; i < n; i++)
		ok += f[i].max_micro_batch > 0;
	snprintf(title, sizeof(title), "gpumem fit: %s on %zu GPUs",
		 n ? plans[0].name : "", n);
	head(out, title);
	fputs("<h1>", out);
	gm_chart_text(out, n ? plans[0].name : "");
	fprintf(out, ": the largest micro-batch on %zu GPU%s</h1>\n<p>%zu of "
		"them run it at micro-batch 1 or more", n, n == 1 ? "" : "s",
		ok);
	if (f[0].global_batch)
		fprintf(out, ", with gradient accumulation to the global "
			"batch of %llu", (unsigned long long)f[0].global_batch);
	fputs(". Each bar is the GPU's memory at its largest micro-batch "
	      "against its capacity (red).</p>\n<h2>Across cards</h2>\n<div "
	      "class=\"chart\">\n", out);
	gm_chart_fit(out, plans, f, n);
	fputs("</div>\n<h2>The figures</h2>\n", out);
	fit_table(out, plans, f, n);
	fputs("<h2>How the run is built</h2>\n", out);
	run_words(out, s, o, &plans[0], f);
	fputs("<h2>Assumptions</h2>\n", out);
	assumptions(out, o, &plans[0]);
}

int gm_plan_html(FILE *out, const struct gm_spec *spec,
		 const struct gm_model_opts *opts, const struct gm_plan *plans,
		 const struct gm_fit *fits, size_t n)
{
	struct gm_model_opts d;

	if (!opts) {
		gm_model_opts_default(&d);
		opts = &d;
	}
	if (!n)
		return GM_EINVAL;
	if (fits)
		fit_page(out, spec, opts, plans, fits, n);
	else
		plan_page(out, spec, opts, plans);
	fputs("<footer>Written by gpumem. GiB = 2<sup>30</sup> bytes.</footer>"
	      "\n</body>\n</html>\n", out);
	return ferror(out) ? GM_EIO : 0;
}
