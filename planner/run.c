/*
 * run.c - the shape of the run a plan is for (see run.h).
 */
#include "run.h"

#include "chart.h"
#include "emit.h"
#include "loop.h"

#include <stdarg.h>
#include <string.h>

static uint64_t one(uint64_t v)
{
	return v ? v : 1;
}

static bool mixed(enum gm_precision p)
{
	return p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED;
}

/* The 16-bit dtype a precision computes in ("bf16", "fp16", "fp32"). */
static const char *compute_dtype(enum gm_precision p)
{
	switch (p) {
	case GM_PREC_FP16_MIXED:
	case GM_PREC_FP16_TRUE:
		return "fp16";
	case GM_PREC_BF16_MIXED:
	case GM_PREC_BF16_TRUE:
		return "bf16";
	case GM_PREC_FP32:
		break;
	}
	return "fp32";
}

void gm_run_from_spec(const struct gm_spec *s, uint64_t accumulation,
		      enum gm_wrap wrap, struct gm_run *r)
{
	const struct gm_spec_parallel *pa = &s->parallelism;
	const struct gm_spec_training *t = &s->training;
	size_t n = 0;

	memset(r, 0, sizeof(*r));
	r->train = s->task == GM_TASK_TRAIN;
	r->wrap = wrap;
	r->framework = r->train ? t->framework : GM_FW_PYTORCH;
	r->dp = one(gm_spec_data_parallel(s));
	r->tp = one(pa->tensor_parallel);
	r->pp = one(pa->pipeline_parallel);
	r->vpp = one(pa->virtual_pipeline_stages);
	r->ep = one(pa->expert_parallel);
	r->etp = 1;
	r->gpus = r->dp * r->tp * r->pp;
	r->sequence_parallel = pa->sequence_parallel;
	r->experts = s->model.experts;
	r->experts_per_token = s->model.experts_per_token;
	r->shared_experts = s->model.shared_experts;
	if (!r->train) {
		r->precision = s->inference.precision;
		r->batch = s->inference.batch_size;
		r->prompt_length = s->inference.prompt_length;
		r->generate_length = s->inference.generate_length;
		r->kv_cache_dtype = s->inference.kv_cache_dtype;
		return;
	}
	r->zero_stage = pa->zero_stage;
	r->fsdp_mp = pa->fsdp_mixed_precision;
	r->distributed_optimizer = pa->distributed_optimizer;
	r->moe_dispatcher_set = r->framework == GM_FW_MEGATRON &&
				s->model.experts > 0;
	r->moe_dispatcher = pa->moe_token_dispatcher_type;
	r->etp = r->moe_dispatcher_set ? gm_spec_expert_tensor_parallel(s) : 1;
	r->offload_optimizer = pa->offload_optimizer;
	r->offload_parameters = pa->offload_parameters;
	r->micro_batch = t->micro_batch_size;
	r->accumulation = one(accumulation);
	r->global_batch = r->micro_batch * r->accumulation * r->dp;
	r->sequence_length = t->sequence_length;
	r->precision = t->precision;
	r->optimizer = t->optimizer;
	r->checkpointing = t->activation_checkpointing;
	r->attention = t->attention;
	r->loop = t->loop;
	r->optimizer_implementation = t->optimizer_implementation;
	r->kv_cache_in_training = gm_loop_kv_cache(s);
	if (t->adapter == GM_ADAPTER_NONE)
		return;
	r->lora_rank = t->lora_rank;
	r->n_lora_targets = t->n_lora_targets;
	for (unsigned i = 0; i < t->n_lora_targets &&
	     n < sizeof(r->lora_targets); i++)
		n += (size_t)snprintf(r->lora_targets + n,
				      sizeof(r->lora_targets) - n, "%s%s",
				      i ? ", " : "", t->lora_targets[i]);
}

/* The wrapper's words: "FSDP2 fully_shard (ZeRO-3)", ...; NULL where
 * nothing is sharded. */
static const char *wrap_sharding(const struct gm_run *r)
{
	switch (r->wrap) {
	case GM_WRAP_DDP:
		return "DDP, nothing sharded";
	case GM_WRAP_DDP_ZERO1:
		return "ZeRO-1 (DDP + ZeroRedundancyOptimizer)";
	case GM_WRAP_FSDP2_KEEP:
		return "ZeRO-2 (FSDP2 fully_shard, reshard_after_forward=False)";
	case GM_WRAP_FSDP2:
		return "ZeRO-3 (FSDP2 fully_shard)";
	case GM_WRAP_DEEPSPEED:
	case GM_WRAP_MEGATRON:
	case GM_WRAP_SINGLE:
	case GM_WRAP_LORA:
	case GM_WRAP_QLORA:
	case GM_WRAP_INFERENCE:
		break;
	}
	return NULL;
}

char *gm_run_sharding_text(const struct gm_run *r, char *buf, size_t len)
{
	const char *w = wrap_sharding(r);
	size_t n;

	n = (size_t)snprintf(buf, len, "data parallel %llu",
			     (unsigned long long)r->dp);
#define ADD(...) (n += n < len ? (size_t)snprintf(buf + n, len - n, \
						  __VA_ARGS__) : 0)
	if (w)
		ADD(", %s", w);
	if (r->wrap == GM_WRAP_DEEPSPEED)
		ADD(", DeepSpeed ZeRO-%u", r->zero_stage);
	if (r->wrap == GM_WRAP_MEGATRON)
		ADD(", Megatron-LM %s", r->distributed_optimizer ?
		    "distributed optimizer" : "DDP, optimizer not sharded");
	if (r->wrap == GM_WRAP_FSDP2 && mixed(r->precision))
		ADD(", %s", r->fsdp_mp == GM_FSDP_MP_PARAM_DTYPE ?
		    "MixedPrecisionPolicy param_dtype" : "autocast");
	if (r->offload_optimizer != GM_OFFLOAD_NONE)
		ADD(", optimizer offloaded to %s",
		    gm_offload_name(r->offload_optimizer));
	if (r->offload_parameters != GM_OFFLOAD_NONE)
		ADD(", parameters offloaded to %s",
		    gm_offload_name(r->offload_parameters));
	if (r->tp > 1)
		ADD(", tensor parallel %llu%s", (unsigned long long)r->tp,
		    r->sequence_parallel ? " (sequence parallel)" : "");
	if (r->pp > 1)
		ADD(", pipeline parallel %llu", (unsigned long long)r->pp);
	if (r->vpp > 1)
		ADD(" (%llu virtual stages)", (unsigned long long)r->vpp);
	if (r->ep > 1)
		ADD(", expert parallel %llu (within data x tensor parallel)",
		    (unsigned long long)r->ep);
	if (r->etp > 1)
		ADD(", expert tensor parallel %llu", (unsigned long long)r->etp);
	if (r->moe_dispatcher_set)
		ADD(", %s token dispatcher",
		    gm_moe_dispatcher_name(r->moe_dispatcher));
#undef ADD
	return buf;
}

char *gm_run_gpus_text(const struct gm_run *r, char *buf, size_t len)
{
	snprintf(buf, len, "%llu = data parallel %llu x tensor parallel %llu "
		 "x pipeline parallel %llu", (unsigned long long)r->gpus,
		 (unsigned long long)r->dp, (unsigned long long)r->tp,
		 (unsigned long long)r->pp);
	return buf;
}

char *gm_run_batch_text(const struct gm_run *r, char *buf, size_t len)
{
	if (!r->train) {
		snprintf(buf, len, "batch %llu, prompt %llu tokens, %llu "
			 "generated", (unsigned long long)r->batch,
			 (unsigned long long)r->prompt_length,
			 (unsigned long long)r->generate_length);
		return buf;
	}
	snprintf(buf, len, "global batch %llu sequences = micro-batch %llu x "
		 "%llu accumulation step%s x %llu data-parallel rank%s; %llu "
		 "tokens each", (unsigned long long)r->global_batch,
		 (unsigned long long)r->micro_batch,
		 (unsigned long long)r->accumulation,
		 r->accumulation == 1 ? "" : "s", (unsigned long long)r->dp,
		 r->dp == 1 ? "" : "s",
		 (unsigned long long)r->sequence_length);
	return buf;
}

void gm_run_set(struct gm_val *o, const struct gm_run *r)
{
	struct gm_val *p = gm_val_obj(), *b = gm_val_obj();
	bool fsdp = r->wrap == GM_WRAP_FSDP2;

	gm_obj_set_uint(o, "gpus", r->gpus);
	gm_obj_set_uint(p, "data_parallel", r->dp);
	gm_obj_set_uint(p, "tensor_parallel", r->tp);
	gm_obj_set_uint(p, "pipeline_parallel", r->pp);
	gm_obj_set_uint(p, "virtual_pipeline_stages", r->vpp);
	gm_obj_set_uint(p, "expert_parallel", r->ep);
	gm_obj_set_bool(p, "sequence_parallel", r->sequence_parallel);
	gm_obj_set_uint(p, "zero_stage", r->zero_stage);
	gm_obj_set_bool(p, "fsdp", fsdp);
	if (fsdp && mixed(r->precision))
		gm_obj_set_str(p, "fsdp_mixed_precision",
			       gm_fsdp_mp_name(r->fsdp_mp));
	else
		gm_obj_set(p, "fsdp_mixed_precision", gm_val_null());
	gm_obj_set_bool(p, "distributed_optimizer", r->distributed_optimizer);
	gm_obj_set_str(p, "offload_optimizer",
		       gm_offload_name(r->offload_optimizer));
	gm_obj_set_str(p, "offload_parameters",
		       gm_offload_name(r->offload_parameters));
	gm_obj_set(o, "parallelism", p);
	if (r->train) {
		gm_obj_set_uint(b, "micro_batch", r->micro_batch);
		gm_obj_set_uint(b, "gradient_accumulation_steps",
				r->accumulation);
		gm_obj_set_uint(b, "global_batch", r->global_batch);
		gm_obj_set_uint(b, "sequence_length", r->sequence_length);
	} else {
		gm_obj_set_uint(b, "batch", r->batch);
		gm_obj_set_uint(b, "prompt_length", r->prompt_length);
		gm_obj_set_uint(b, "generate_length", r->generate_length);
	}
	gm_obj_set(o, "batch", b);
}

/* ==== HTML ==== */

/* One list item, its text escaped (printf-style, at most 1 KiB). */
static void li(FILE *out, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void li(FILE *out, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fputs("<li>", out);
	gm_chart_text(out, buf);
	fputs("</li>\n", out);
}

/* Who builds the run, in words. */
static const char *framework_words(const struct gm_run *r)
{
	switch (r->wrap) {
	case GM_WRAP_SINGLE:
		return "plain PyTorch on one GPU, no wrapper";
	case GM_WRAP_DDP:
		return "PyTorch DistributedDataParallel";
	case GM_WRAP_DDP_ZERO1:
		return "PyTorch DistributedDataParallel with "
		       "ZeroRedundancyOptimizer (ZeRO-1)";
	case GM_WRAP_FSDP2_KEEP:
		return "PyTorch FSDP2 (fully_shard on each layer with "
		       "reshard_after_forward=False: gradients and optimizer "
		       "states sharded, parameters kept unsharded from their "
		       "forward to their backward, ZeRO-2)";
	case GM_WRAP_FSDP2:
		return "PyTorch FSDP2 (fully_shard on each layer: parameters, "
		       "gradients and optimizer states sharded, ZeRO-3)";
	case GM_WRAP_DEEPSPEED:
		return "DeepSpeed's engine (deepspeed.initialize)";
	case GM_WRAP_MEGATRON:
		return "Megatron-LM (its DDP with the fp32 main_grad buffer)";
	case GM_WRAP_LORA:
		return "PEFT LoRA (get_peft_model) in a PyTorch loop";
	case GM_WRAP_QLORA:
		return "PEFT QLoRA: a bitsandbytes 4-bit NF4 base "
		       "(prepare_model_for_kbit_training) with LoRA adapters";
	case GM_WRAP_INFERENCE:
		break;
	}
	return r->generate_length ? "PyTorch inference (model.generate with "
	       "a KV cache)" : "PyTorch inference (one forward pass over the "
	       "prompt that fills the KV cache)";
}

/* What each tensor of the model states is, in words. */
static void precision_li(FILE *out, const struct gm_run *r)
{
	const char *d = compute_dtype(r->precision);
	const char *pn = gm_precision_name(r->precision);

	if (!r->train) {
		li(out, "Precision: weights in %s (%s), KV cache in %s.", d, pn,
		   gm_kv_dtype_name(r->kv_cache_dtype));
		return;
	}
	switch (r->wrap) {
	case GM_WRAP_LORA:
	case GM_WRAP_QLORA:
		li(out, "Precision %s: the base model frozen, with no "
		   "gradients or optimizer states, in %s; the LoRA adapters "
		   "(rank %llu on %s) trained in fp32 with their gradients "
		   "and %s states%s.", pn,
		   r->wrap == GM_WRAP_QLORA ? "4-bit NF4 with double "
		   "quantization (its linears; the other parameters in fp32)" :
		   d,
		   (unsigned long long)r->lora_rank,
		   r->n_lora_targets ? r->lora_targets : "no module",
		   gm_optimizer_name(r->optimizer),
		   mixed(r->precision) ? ", computed under torch.autocast" :
		   "");
		return;
	case GM_WRAP_DEEPSPEED:
		if (r->precision == GM_PREC_FP32)
			break;
		li(out, "Precision %s: the engine's module and gradients in "
		   "%s, fp32 master weights and %s states inside its "
		   "optimizer (the ZeRO paper's mixed-precision Adam); no "
		   "autocast.", pn, d, gm_optimizer_name(r->optimizer));
		return;
	case GM_WRAP_MEGATRON:
		if (r->precision == GM_PREC_FP32)
			break;
		li(out, "Precision %s: %s weights, fp32 main gradients, fp32 "
		   "master weights and %s states.", pn, d,
		   gm_optimizer_name(r->optimizer));
		return;
	case GM_WRAP_FSDP2:
	case GM_WRAP_FSDP2_KEEP:
		if (!mixed(r->precision))
			break;
		if (r->fsdp_mp == GM_FSDP_MP_PARAM_DTYPE)
			li(out, "Precision %s as FSDP's MixedPrecisionPolicy"
			   "(param_dtype=%s, reduce_dtype=fp32): fp32 sharded "
			   "parameters, gradients and %s states; each layer's "
			   "parameters gathered in %s, so the forward and "
			   "backward run in %s without autocast.", pn, d,
			   gm_optimizer_name(r->optimizer), d, d);
		else
			li(out, "Precision %s: fp32 sharded parameters, "
			   "gradients and %s states; each layer gathered in "
			   "fp32 and computed in %s under torch.autocast.", pn,
			   gm_optimizer_name(r->optimizer), d);
		return;
	case GM_WRAP_SINGLE:
	case GM_WRAP_DDP:
	case GM_WRAP_DDP_ZERO1:
	case GM_WRAP_INFERENCE:
		break;
	}
	if (mixed(r->precision))
		li(out, "Precision %s (PyTorch AMP): fp32 weights, gradients "
		   "and %s states, computed in %s under torch.autocast.", pn,
		   gm_optimizer_name(r->optimizer), d);
	else
		li(out, "Precision %s: weights, gradients and %s states all in "
		   "%s.", pn, gm_optimizer_name(r->optimizer), d);
}

/* The training loop in words, by training.loop (planner/loop.c). */
static const char *const loop_words[] = {
	[GM_LOOP_TRAINER] = "only the loss leaves the forward call (Hugging "
			    "Face Trainer, accelerate)",
	[GM_LOOP_KEEP_OUTPUTS] = "the model's outputs kept until the next "
				 "step's forward returns (outputs = "
				 "model(**batch), as the transformers docs' "
				 "native loop)",
	[GM_LOOP_LIGHTNING] = "Lightning's automatic optimization: only the "
			      "loss leaves training_step, and zero_grad runs "
			      "after the next training_step, so the "
			      "gradients live through the next forward",
};

/* What each implementation's step adds to the states (optstep.h). */
static const char *const opt_impl_words[] = {
	[GM_OPT_IMPL_FOREACH] = "one temporary the size of the states, "
				"PyTorch's default on CUDA",
	[GM_OPT_IMPL_FUSED] = "fused=True: no temporary the size of a tensor",
	[GM_OPT_IMPL_FOR_LOOP] = "foreach=False: two temporaries of one "
				 "tensor at a time",
};

void gm_run_html(FILE *out, const struct gm_run *r, const char *recipe,
		 bool fit)
{
	char buf[512];

	li(out, "Recipe %s: %s.", recipe, framework_words(r));
	precision_li(out, r);
	if (r->train && r->framework == GM_FW_PYTORCH)
		li(out, "Training loop: %s%s.", loop_words[r->loop],
		   r->kv_cache_in_training ? "; the model builds "
		   "past_key_values in training (use_cache)" : "");
	else if (r->train && r->kv_cache_in_training)
		li(out, "The model builds past_key_values in training "
		   "(use_cache).");
	/* named where the spec chose it (the key is refused where the
	 * step is not torch.optim's) */
	if (r->train && r->optimizer_implementation != GM_OPT_IMPL_FOREACH)
		li(out, "Optimizer step: torch.optim's %s implementation "
		   "(%s).", gm_opt_impl_name(r->optimizer_implementation),
		   opt_impl_words[r->optimizer_implementation]);
	/* the parallelism line says more than the GPUs' product only with
	 * a wrapper or sharding after its "data parallel N" */
	gm_run_sharding_text(r, buf + 256, sizeof(buf) - 256);
	if (strchr(buf + 256, ','))
		li(out, "GPUs: %s; %s.", gm_run_gpus_text(r, buf, 256),
		   buf + 256);
	else
		li(out, "GPUs: %s.", gm_run_gpus_text(r, buf, 256));
	if (r->offload_optimizer != GM_OFFLOAD_NONE ||
	    r->offload_parameters != GM_OFFLOAD_NONE)
		li(out, "Offload (DeepSpeed ZeRO-Offload): optimizer states "
		   "%s, parameters %s; the host holds what is offloaded "
		   "(plan's JSON: host_bytes).", r->offload_optimizer != GM_OFFLOAD_NONE ?
		   gm_offload_name(r->offload_optimizer) : "on the GPU",
		   r->offload_parameters != GM_OFFLOAD_NONE ?
		   gm_offload_name(r->offload_parameters) : "on the GPU");
	if (r->experts && r->ep > 1)
		li(out, "Mixture of experts: %llu routed experts a layer, %llu "
		   "per token, %llu shared; each MoE layer's experts split "
		   "over %llu ranks (expert parallel, expert tensor parallel "
		   "%llu, %s token dispatcher).", (unsigned long long)r->experts,
		   (unsigned long long)r->experts_per_token,
		   (unsigned long long)r->shared_experts,
		   (unsigned long long)r->ep, (unsigned long long)r->etp,
		   gm_moe_dispatcher_name(r->moe_dispatcher));
	else if (r->experts && r->etp > 1)
		li(out, "Mixture of experts: %llu routed experts a layer, %llu "
		   "per token, %llu shared; every rank holds every expert of "
		   "its layers (no expert parallel), each expert's weights "
		   "split over %llu ranks (expert tensor parallel, %s token "
		   "dispatcher).", (unsigned long long)r->experts,
		   (unsigned long long)r->experts_per_token,
		   (unsigned long long)r->shared_experts,
		   (unsigned long long)r->etp,
		   gm_moe_dispatcher_name(r->moe_dispatcher));
	else if (r->experts)
		li(out, "Mixture of experts: %llu routed experts a layer, %llu "
		   "per token, %llu shared; every rank holds every expert of "
		   "its layers (no expert parallel).",
		   (unsigned long long)r->experts,
		   (unsigned long long)r->experts_per_token,
		   (unsigned long long)r->shared_experts);
	if (!r->train) {
		if (fit)
			li(out, "Batch: the largest on each GPU; prompt %llu "
			   "tokens, %llu generated.",
			   (unsigned long long)r->prompt_length,
			   (unsigned long long)r->generate_length);
		else
			li(out, "Batch: %s.",
			   gm_run_batch_text(r, buf, sizeof(buf)));
		return;
	}
	if (fit)
		li(out, "Batch: each GPU at its largest micro-batch, with the "
		   "gradient-accumulation steps that reach the global batch; "
		   "%llu tokens a sequence.",
		   (unsigned long long)r->sequence_length);
	else
		li(out, "Batch: %s.", gm_run_batch_text(r, buf, sizeof(buf)));
	li(out, "Activation checkpointing %s, attention %s, optimizer %s.",
	   gm_ckpt_name(r->checkpointing), gm_attn_name(r->attention),
	   gm_optimizer_name(r->optimizer));
}
