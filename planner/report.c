/*
 * report.c - plan and fit reports (see report.h).
 */
#include "report.h"

#include "chart.h"

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

/* The peak and what the card shows (every breakdown ends so): the
 * requests live at the peak (what the rows at the peak add up to, PyTorch's
 * requested_bytes), the blocks they hold (allocated_bytes: rounded to
 * 512 B, a large block's unsplit remainder included), reserved. */
static void peak_set(struct gm_val *o, const struct gm_terms *t)
{
	gm_obj_set_str(o, "peak_phase", gm_phase_name(t->peak_phase));
	gm_obj_set_uint(o, "peak_requested_bytes", u(t->peak_requested));
	gm_obj_set_uint(o, "peak_allocated_bytes", u(t->peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", u(t->peak_reserved));
	gm_obj_set_uint(o, "cuda_context_bytes", u(t->cuda_context));
	gm_obj_set_uint(o, "nccl_bytes", u(t->nccl));
	gm_obj_set_uint(o, "device_used_bytes", u(t->device_used));
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
 * peak_requested); rows of a stage table leave it out. */
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
	/* what a skewed router would add: beside the peak, not in it */
	if (t->moe_skew > 0)
		gm_obj_set_uint(o, "skewed_router_extra_bytes",
				u(t->moe_skew));
	if (with_peak) {
		struct gm_val *a = gm_val_obj();

		parts_set(a, &t->at_peak);
		gm_obj_set(o, "at_peak", a);
		if (t->has_largest) {
			struct gm_val *m = gm_val_obj();

			parts_set(m, &t->largest);
			gm_obj_set(o, "largest", m);
		}
	}
	return o;
}

/*
 * What a process can get of the card, the bound of fits and headroom:
 * JSON "<key>_bytes" and "<key>_estimated"; a table row "<key> (cuda
 * total)" or "<key> (estimated)".
 */
static void usable_set(struct gm_val *o, const struct gm_plan_gpu *g,
		       bool table, const char *key)
{
	char k[64];

	if (table) {
		snprintf(k, sizeof(k), "%s (%s)_bytes", key,
			 g->usable_estimated ? "estimated" : "cuda total");
		gm_obj_set_uint(o, k, gm_plan_gpu_usable(g));
		return;
	}
	snprintf(k, sizeof(k), "%s_bytes", key);
	gm_obj_set_uint(o, k, gm_plan_gpu_usable(g));
	snprintf(k, sizeof(k), "%s_estimated", key);
	gm_obj_set_bool(o, k, g->usable_estimated);
}

/* The same as one column of fit's rows: JSON as usable_set(); a table
 * cell in GiB, "(estimated)" after an estimate. */
static void usable_cell(struct gm_val *r, const struct gm_plan_gpu *g,
			bool table)
{
	char t[48];

	if (!table) {
		usable_set(r, g, false, "usable");
		return;
	}
	if (!g->usable_estimated) {
		gm_obj_set_uint(r, "usable_bytes", gm_plan_gpu_usable(g));
		return;
	}
	snprintf(t, sizeof(t), "%.2f GiB (estimated)",
		 gm_gib(gm_plan_gpu_usable(g)));
	gm_obj_set_str(r, "usable_bytes", t);
}

/* The version of the plan and fit documents' schema (planner/README.md,
 * "Output schema"): a key removed or renamed raises it. */
#define GM_REPORT_VERSION 1

static struct gm_val *plan_obj(const struct gm_plan *p, bool table)
{
	struct gm_val *o = gm_val_obj(), *st;

	if (!table) {
		gm_obj_set_str(o, "kind", "gpumem-plan");
		gm_obj_set_int(o, "version", GM_REPORT_VERSION);
	}
	gm_obj_set_str(o, "name", p->name);
	if (table) {
		char buf[512];

		/* the run's shape in words (run.h), before any figure */
		gm_obj_set_str(o, "gpus", gm_run_gpus_text(&p->run, buf,
							   sizeof(buf)));
		gm_obj_set_str(o, "parallelism", gm_run_sharding_text(
				       &p->run, buf, sizeof(buf)));
		gm_obj_set_str(o, "batch", gm_run_batch_text(&p->run, buf,
							     sizeof(buf)));
		if (p->shape[0])
			gm_obj_set_str(o, "batch shape", p->shape);
	}
	gm_obj_set_str(o, "gpu", p->gpu.name);
	gm_obj_set_uint(o, "gpu_capacity_bytes", p->gpu.capacity_bytes);
	usable_set(o, &p->gpu, table, "usable");
	/* only under --fraction / --limit: the allocator's cap (cap.h) */
	if (p->gpu.cap_bytes)
		gm_obj_set_uint(o, "cap_bytes", p->gpu.cap_bytes);
	gm_obj_set_uint(o, "parameters", p->parameters);
	/* the table names it where it is not the whole model */
	if (!table || (p->run.train && p->trainable != p->parameters))
		gm_obj_set_uint(o, "trainable_parameters", p->trainable);
	if (!table)
		gm_run_set(o, &p->run);
	if (table) {
		/* a person reads the rows at the peak, which add up to
		 * peak requested, then each row at its own largest over the
		 * step: the same rows of the same sequence (model.h
		 * gm_terms.largest), so none at the peak exceeds its own
		 * largest; the closed forms where no sequence was counted */
		struct gm_val *a = gm_val_obj(), *l = gm_val_obj();
		struct gm_parts m = p->per_gpu.has_largest ?
				    p->per_gpu.largest :
				    largest(&p->per_gpu);

		parts_set(a, &p->per_gpu.at_peak);
		peak_set(a, &p->per_gpu);
		gm_obj_set(o, "per_gpu_at_the_peak", a);
		parts_set(l, &m);
		gm_obj_set(o, "each term at its own largest over the step "
			   "(not at the peak)", l);
		/* not part of the peak: a row of its own under the
		 * breakdowns, so the rows at the peak sum to it */
		if (p->per_gpu.moe_skew > 0) {
			struct gm_val *b = gm_val_obj();

			gm_obj_set_uint(b, "skewed_router_extra_bytes",
					u(p->per_gpu.moe_skew));
			gm_obj_set(o, "beside the peak (not part of it)", b);
		}
		/* what the cache holds once generation ends (the JSON's
		 * kv_cache_bytes): the rows above catch it at the peak and
		 * at its largest, a torch.cat's old and new tensors both */
		if (!p->run.train && p->per_gpu.kv_cache > 0)
			gm_obj_set_uint(o, "kv_cache_at_the_end_bytes",
					u(p->per_gpu.kv_cache));
	} else {
		gm_obj_set(o, "per_gpu", terms_obj(&p->per_gpu, false, true));
	}
	gm_obj_set_str(o, "recipe", p->recipe);
	gm_obj_set_uint(o, "init_peak_bytes", u(p->init_peak));
	/* a key of the JSON contract, 0 included; the table shows it only
	 * when the run needs host memory */
	if (p->host > 0 || !table)
		gm_obj_set_uint(o, "host_bytes", u(p->host));
	gm_obj_set_bool(o, "fits", p->fits);
	gm_obj_set_int(o, "headroom_bytes", p->headroom_bytes);
	/* a key of the JSON contract; a table shows it for training only */
	if (!table || p->run.train)
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

/* A uint, or null where it does not apply (0 = absent). */
static void set_uint_or_null(struct gm_val *o, const char *key, bool has,
			     uint64_t v)
{
	gm_obj_set(o, key, has ? gm_val_uint(v) : gm_val_null());
}

/*
 * fit's min gpus: JSON and CSV min_gpus (0: none), min_gpus_micro_batch
 * and min_gpus_none (why 0, else null); a table says "none at ZeRO 2"
 * in the cell and "-" for its micro-batch instead of two 0s.
 */
static void min_gpus_set(struct gm_val *r, const struct gm_fit *f,
			 bool table)
{
	char why[48];
	const char *none = gm_fit_min_gpus_none(f, why, sizeof(why));

	/* a table speaks of inference's batch, the JSON keeps one schema */
	const char *mb = table && !f->training ? "min_gpus_batch" :
			 "min_gpus_micro_batch";

	if (table && none) {
		gm_obj_set_str(r, "min_gpus", none);
		gm_obj_set_str(r, mb, "-");
		return;
	}
	gm_obj_set_uint(r, "min_gpus", f->min_gpus);
	gm_obj_set_uint(r, mb, f->min_gpus_micro_batch);
	if (table)
		return;
	if (none)
		gm_obj_set_str(r, "min_gpus_none", none);
	else
		gm_obj_set(r, "min_gpus_none", gm_val_null());
}

/* One row of the plan's CSV: every column of planner/README.md's list,
 * null (an empty cell) where it does not apply. */
static struct gm_val *plan_csv_row(const struct gm_plan *p, bool most,
				   unsigned stage, const struct gm_terms *t)
{
	struct gm_val *o = gm_val_obj(), *a = gm_val_obj();
	struct gm_parts l = largest(t);
	const struct gm_run *r = &p->run;
	bool fsdp = r->wrap == GM_WRAP_FSDP2 || r->wrap == GM_WRAP_FSDP2_KEEP;
	bool mixed = r->precision == GM_PREC_BF16_MIXED ||
		     r->precision == GM_PREC_FP16_MIXED;

	gm_obj_set_str(o, "kind", "gpumem-plan");
	gm_obj_set_int(o, "version", GM_REPORT_VERSION);
	gm_obj_set_str(o, "row", most ? "per_gpu" : "stage");
	gm_obj_set_uint(o, "stage", stage);
	gm_obj_set_str(o, "name", p->name);
	gm_obj_set_str(o, "gpu", p->gpu.name);
	gm_obj_set_uint(o, "gpu_capacity_bytes", p->gpu.capacity_bytes);
	usable_set(o, &p->gpu, false, "usable");
	set_uint_or_null(o, "cap_bytes", p->gpu.cap_bytes, p->gpu.cap_bytes);
	gm_obj_set_uint(o, "parameters", p->parameters);
	gm_obj_set_uint(o, "gpus", r->gpus);
	gm_obj_set_uint(o, "data_parallel", r->dp);
	gm_obj_set_uint(o, "tensor_parallel", r->tp);
	gm_obj_set_uint(o, "pipeline_parallel", r->pp);
	gm_obj_set_uint(o, "virtual_pipeline_stages", r->vpp);
	gm_obj_set_uint(o, "expert_parallel", r->ep);
	gm_obj_set_bool(o, "sequence_parallel", r->sequence_parallel);
	gm_obj_set_uint(o, "zero_stage", r->zero_stage);
	gm_obj_set_bool(o, "fsdp", fsdp);
	gm_obj_set(o, "fsdp_mixed_precision", fsdp && mixed ?
		   gm_val_str(gm_fsdp_mp_name(r->fsdp_mp)) : gm_val_null());
	gm_obj_set_bool(o, "distributed_optimizer", r->distributed_optimizer);
	gm_obj_set_str(o, "offload_optimizer",
		       gm_offload_name(r->offload_optimizer));
	gm_obj_set_str(o, "offload_parameters",
		       gm_offload_name(r->offload_parameters));
	set_uint_or_null(o, "micro_batch", r->train, r->micro_batch);
	set_uint_or_null(o, "gradient_accumulation_steps", r->train,
			 r->accumulation);
	set_uint_or_null(o, "global_batch", r->train, r->global_batch);
	set_uint_or_null(o, "sequence_length", r->train, r->sequence_length);
	set_uint_or_null(o, "batch", !r->train, r->batch);
	set_uint_or_null(o, "prompt_length", !r->train, r->prompt_length);
	set_uint_or_null(o, "generate_length", !r->train, r->generate_length);
	gm_obj_set_str(o, "recipe", p->recipe);
	gm_obj_set_uint(o, "init_peak_bytes", u(p->init_peak));
	gm_obj_set_uint(o, "host_bytes", u(p->host));
	gm_obj_set_bool(o, "fits", p->fits);
	gm_obj_set_int(o, "headroom_bytes", p->headroom_bytes);
	gm_obj_set_uint(o, "layers", t->layers);
	gm_obj_set_uint(o, "micro_batches_in_flight", t->in_flight);
	parts_set(o, &l);
	gm_obj_set_str(o, "peak_phase", gm_phase_name(t->peak_phase));
	gm_obj_set_uint(o, "peak_requested_bytes", u(t->peak_requested));
	gm_obj_set_uint(o, "peak_allocated_bytes", u(t->peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", u(t->peak_reserved));
	gm_obj_set_uint(o, "cuda_context_bytes", u(t->cuda_context));
	gm_obj_set_uint(o, "nccl_bytes", u(t->nccl));
	gm_obj_set_uint(o, "device_used_bytes", u(t->device_used));
	gm_obj_set_uint(o, "skewed_router_extra_bytes", u(t->moe_skew));
	set_uint_or_null(o, "out_of_memory_requested_bytes",
			 t->sim.out_of_memory, u(t->sim.oom_requested));
	set_uint_or_null(o, "out_of_memory_allocated_bytes",
			 t->sim.out_of_memory, u(t->sim.oom_allocated));
	set_uint_or_null(o, "out_of_memory_reserved_bytes",
			 t->sim.out_of_memory, u(t->sim.oom_reserved));
	parts_set(a, &t->at_peak);
	gm_obj_set(o, "at_peak", a);
	return o;
}

struct gm_val *gm_plan_report_csv(const struct gm_plan *p)
{
	struct gm_val *rows = gm_val_arr();

	gm_arr_push(rows, plan_csv_row(p, true, p->per_gpu_stage,
				       &p->per_gpu));
	for (unsigned i = 0; p->n_stages > 1 && i < p->n_stages; i++)
		gm_arr_push(rows, plan_csv_row(p, false, i, &p->stages[i]));
	return rows;
}

/* A change's figures under prefix ("smallest_change"), null where there
 * is none: the CSV's fixed columns. */
static void change_cols(struct gm_val *r, const char *prefix,
			const struct gm_fit_change *c, bool has)
{
	static const char *const keys[] = {
		"set", "gpus", "micro_batch", "gradient_accumulation_steps",
		"peak_allocated_bytes", "peak_reserved_bytes",
		"device_used_bytes", "headroom_bytes"};
	char k[64], sets[1024] = "";
	size_t n = 0;

	for (unsigned i = 0; has && i < c->n_sets && n < sizeof(sets); i++)
		n += (size_t)snprintf(sets + n, sizeof(sets) - n, "%s%s",
				      i ? " " : "", c->sets[i]);
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
		struct gm_val *v;

		snprintf(k, sizeof(k), "%s_%s", prefix, keys[i]);
		if (!has)
			v = gm_val_null();
		else if (i == 0)
			v = gm_val_str(sets);
		else if (i == 1)
			v = gm_val_uint(c->change.gpus);
		else if (i == 2)
			v = gm_val_uint(c->change.micro_batch);
		else if (i == 3)
			v = gm_val_uint(c->change.gradient_accumulation_steps);
		else if (i == 4)
			v = gm_val_uint(u(c->change.peak_allocated));
		else if (i == 5)
			v = gm_val_uint(u(c->change.peak_reserved));
		else if (i == 6)
			v = gm_val_uint(u(c->change.device_used));
		else
			v = gm_val_int(c->change.headroom_bytes);
		gm_obj_set(r, k, v);
	}
}

char *gm_fit_tflops_text(const struct gm_fit *f, char *buf, size_t len)
{
	bool fp16 = f->gpu.sm_major > 0 && f->gpu.sm_major < 8;

	if (!(f->gpu.bf16_tflops > 0))
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, fp16 ? "%.4g (fp16)" : "%.4g",
			 f->gpu.bf16_tflops);
	return buf;
}

char *gm_fit_bandwidth_text(const struct gm_fit *f, char *buf, size_t len)
{
	snprintf(buf, len, "%.4g", f->gpu.bandwidth_gbps);
	return buf;
}

/* bf16 TFLOP/s of row i: a number, "125 (fp16)" in a table where the
 * card has no bf16 (before sm_80: the catalog lists its fp16 figure), or
 * null where not known. */
static void tflops_set(struct gm_val *r, const struct gm_fit *f,
		       const char *key, bool table)
{
	bool fp16 = f->gpu.sm_major > 0 && f->gpu.sm_major < 8;

	if (f->gpu.bf16_tflops > 0 && fp16 && table) {
		char t[48];

		gm_obj_set_str(r, key, gm_fit_tflops_text(f, t, sizeof(t)));
	} else if (f->gpu.bf16_tflops > 0) {
		gm_obj_set_real(r, key, f->gpu.bf16_tflops);
	} else {
		gm_obj_set(r, key, gm_val_null());
	}
	if (!table)
		gm_obj_set_bool(r, "bf16_is_fp16", fp16);
}

/* One GPU's row: table (its headings: "bandwidth GB/s"), JSON (with
 * the search's keys, gm_fit_change_set) or CSV (fixed columns). */
static struct gm_val *fit_row(const struct gm_fit *f,
			      const struct gm_fit_change *ch,
			      enum gm_format fmt, const struct gm_fit_doc *d)
{
	struct gm_val *r = gm_val_obj();
	bool table = fmt == GM_FORMAT_TABLE, csv = fmt == GM_FORMAT_CSV;

	if (csv) {
		gm_obj_set_str(r, "kind", "gpumem-fit");
		gm_obj_set_int(r, "version", GM_REPORT_VERSION);
		gm_obj_set_str(r, "name", d ? d->name : "");
		set_uint_or_null(r, "global_batch", f->global_batch,
				 f->global_batch);
	}
	gm_obj_set_str(r, "gpu", f->gpu.name);
	gm_obj_set_uint(r, "capacity_bytes", f->gpu.capacity_bytes);
	usable_cell(r, &f->gpu, table);
	if (csv)
		set_uint_or_null(r, "cap_bytes", f->gpu.cap_bytes,
				 f->gpu.cap_bytes);
	else if (table && gm_plan_gpu_cap_above_usable(&f->gpu))
		/* the plan is against the card (gm_plan_gpu_warn) */
		gm_obj_set_str(r, "cap_bytes", "above usable");
	else if (f->gpu.cap_bytes)
		gm_obj_set_uint(r, "cap_bytes", f->gpu.cap_bytes);
	/* GB/s (10^9 bytes a second): the catalog's key; a table heads it
	 * "bandwidth GB/s" (emit.h) */
	gm_obj_set_real(r, "bandwidth_gbps", f->gpu.bandwidth_gbps);
	tflops_set(r, f, "bf16_tflops", table);
	if (table && !f->training) {
		/* inference: a batch, no accumulation */
		gm_obj_set_uint(r, "max_batch", f->max_micro_batch);
	} else {
		gm_obj_set_uint(r, "max_micro_batch", f->max_micro_batch);
		gm_obj_set_uint(r, "gradient_accumulation_steps",
				f->gradient_accumulation_steps);
	}
	min_gpus_set(r, f, table);
	gm_obj_set_uint(r, "device_used_bytes", u(f->device_used));
	if (!ch || table)
		return r;
	if (!csv) {
		gm_fit_change_set(r, ch);
		return r;
	}
	gm_obj_set(r, "fits_as_given", ch->refused[0] ? gm_val_null() :
		   gm_val_bool(ch->fits_as_given));
	gm_obj_set(r, "search_refused", ch->refused[0] ?
		   gm_val_str(ch->refused) : gm_val_null());
	change_cols(r, "smallest_change", ch, !ch->refused[0] && ch->found);
	change_cols(r, "widest_change", ch, !ch->refused[0] && ch->widest);
	return r;
}

struct gm_val *gm_fit_report(const struct gm_fit_doc *d,
			     const struct gm_fit *f,
			     const struct gm_fit_change *ch, size_t n,
			     enum gm_format fmt)
{
	struct gm_val *arr = gm_val_arr(), *o;

	for (size_t i = 0; i < n; i++)
		gm_arr_push(arr, fit_row(&f[i], ch ? &ch[i] : NULL, fmt, d));
	if (fmt == GM_FORMAT_TABLE || fmt == GM_FORMAT_CSV || !d)
		return arr;
	o = gm_val_obj();
	gm_obj_set_str(o, "kind", "gpumem-fit");
	gm_obj_set_int(o, "version", GM_REPORT_VERSION);
	gm_obj_set_str(o, "spec", d->spec);
	gm_obj_set_str(o, "name", d->name);
	gm_obj_set_str(o, "task", d->task);
	set_uint_or_null(o, "global_batch", d->global_batch, d->global_batch);
	gm_obj_set_str(o, "reserve_model", d->reserve_model);
	gm_obj_set(o, "fraction", d->fraction > 0 ?
		   gm_val_real(d->fraction) : gm_val_null());
	set_uint_or_null(o, "limit_bytes", d->limit_bytes, d->limit_bytes);
	gm_obj_set(o, "gpus", arr);
	return o;
}

/* A change's --set strings and its plan's figures (gm_fit_change_set). */
static struct gm_val *change_obj(const struct gm_fit_change *c)
{
	struct gm_val *o = gm_val_obj(), *sets = gm_val_arr();

	for (unsigned i = 0; i < c->n_sets; i++)
		gm_arr_push(sets, gm_val_str(c->sets[i]));
	gm_obj_set(o, "set", sets);
	gm_obj_set_uint(o, "gpus", c->change.gpus);
	gm_obj_set_uint(o, "micro_batch", c->change.micro_batch);
	gm_obj_set_uint(o, "gradient_accumulation_steps",
			c->change.gradient_accumulation_steps);
	gm_obj_set_uint(o, "peak_allocated_bytes", u(c->change.peak_allocated));
	gm_obj_set_uint(o, "peak_reserved_bytes", u(c->change.peak_reserved));
	gm_obj_set_uint(o, "device_used_bytes", u(c->change.device_used));
	gm_obj_set_int(o, "headroom_bytes", c->change.headroom_bytes);
	return o;
}

void gm_fit_change_set(struct gm_val *row, const struct gm_fit_change *c)
{
	if (c->refused[0]) {
		gm_obj_set(row, "fits_as_given", gm_val_null());
		gm_obj_set(row, "smallest_change", gm_val_null());
		gm_obj_set_str(row, "search_refused", c->refused);
		return;
	}
	gm_obj_set_bool(row, "fits_as_given", c->fits_as_given);
	gm_obj_set(row, "smallest_change", c->found ? change_obj(c)
						    : gm_val_null());
	if (c->widest)
		gm_obj_set(row, "widest_change", change_obj(c));
}

static double gib_signed(int64_t b)
{
	return (double)b / (double)GM_GiB;
}

/* " --set A --set B (N GPUs, micro-batch M, K gradient-accumulation
 * steps: peak reserved, device used, headroom)" at buf + n; the new
 * length. */
static size_t change_words(const struct gm_fit_change *c, char *buf,
			   size_t n, size_t len)
{
#define ROOM (n < len ? len - n : 0)
	for (unsigned i = 0; i < c->n_sets; i++)
		n += (size_t)snprintf(buf + n, ROOM, "%s--set %s",
				      i ? " " : "", c->sets[i]);
	n += (size_t)snprintf(buf + n, ROOM, " (%llu GPU%s, %s %llu",
			      (unsigned long long)c->change.gpus,
			      c->change.gpus == 1 ? "" : "s",
			      c->training ? "micro-batch" : "batch",
			      (unsigned long long)c->change.micro_batch);
	if (c->training)
		n += (size_t)snprintf(buf + n, ROOM,
				      ", %llu gradient-accumulation step%s",
				      (unsigned long long)
				      c->change.gradient_accumulation_steps,
				      c->change.gradient_accumulation_steps ==
				      1 ? "" : "s");
	n += (size_t)snprintf(buf + n, ROOM, ": peak reserved %.2f GiB, "
			      "device used %.2f GiB, headroom %.2f GiB",
			      c->change.peak_reserved / (double)GM_GiB,
			      c->change.device_used / (double)GM_GiB,
			      gib_signed(c->change.headroom_bytes));
	/* an offload moves state to the host, which must hold it */
	if (c->change.host > 0)
		n += (size_t)snprintf(buf + n, ROOM, ", host memory %.2f GiB "
				      "a rank", c->change.host /
				      (double)GM_GiB);
	n += (size_t)snprintf(buf + n, ROOM, ")");
	return n;
#undef ROOM
}

char *gm_fit_change_text(const struct gm_fit_change *c, char *buf,
			 size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	if (c->refused[0]) {
		snprintf(buf, len, "not searched: %s", c->refused);
		return buf;
	}
	if (c->fits_as_given) {
		/* at the spec's own batch, which a table's other columns
		 * (the largest micro-batch's) need not be */
		snprintf(buf, len, "fits as given (%s %llu: device used %.2f "
			 "GiB, headroom %.2f GiB)",
			 c->training ? "micro-batch" : "batch",
			 (unsigned long long)c->given.micro_batch,
			 c->given.device_used / (double)GM_GiB,
			 gib_signed(c->given.headroom_bytes));
		return buf;
	}
	if (c->found) {
		change_words(c, buf, 0, len);
		return buf;
	}
	n = (size_t)snprintf(buf, len, "nothing searched fits (headroom as "
			     "given %.2f GiB)",
			     gib_signed(c->given.headroom_bytes));
	if (!c->widest)
		return buf;
	/* no lever had a step left: the widest change is the spec as given
	 * (inference at batch 1 and tensor parallel 8, say) */
	n += (size_t)snprintf(buf + n, n < len ? len - n : 0, c->n_sets ?
			      ", not even " : "; every lever searched is at "
			      "its last step as given, so no change is left "
			      "to try");
	n = change_words(c, buf, n, len);
	/* data parallel stopped by the global batch (one sequence per
	 * micro-batch per rank at most) */
	if ((c->levers & (1u << GM_FL_DATA_PARALLEL)) &&
	    c->change.global_batch && c->change.gradient_accumulation_steps ==
	    1)
		snprintf(buf + n, n < len ? len - n : 0, "; the global batch "
			 "of %llu sequences bounds data parallel",
			 (unsigned long long)c->change.global_batch);
	return buf;
}

/* ==== SVG ==== */

int gm_plan_svg(FILE *out, const struct gm_plan *plans,
		const struct gm_fit *fits, size_t n)
{
	if (!fits && n == 1)
		return gm_chart_stages(out, plans);
	return gm_chart_fit(out, plans, fits, n);
}
