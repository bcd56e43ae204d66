/*
 * run.h - the shape of the run a plan is for (run.c): how many GPUs and
 * how they split the model, how the framework wraps it, the batch. One
 * description that the plan's table, its JSON and CSV, and the HTML
 * page's "How the run is built" all print, so that they cannot disagree
 * with each other or with the recipe's name (planner/recipe/).
 */
#ifndef GM_RUN_H
#define GM_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "spec.h"

struct gm_val;

/* How the recipe wraps the model: what its name (planner/recipe/) says. */
enum gm_wrap {
	GM_WRAP_SINGLE,       /* one rank, no wrapper: pytorch-PREC */
	GM_WRAP_DDP,          /* DistributedDataParallel: pytorch-ddp-PREC */
	GM_WRAP_DDP_ZERO1,    /* DDP + ZeroRedundancyOptimizer */
	GM_WRAP_FSDP2_KEEP,   /* FSDP2 fully_shard(reshard_after_forward=
			       * False): PyTorch's ZeRO-2 */
	GM_WRAP_FSDP2,        /* FSDP2 fully_shard (ZeRO-3) */
	GM_WRAP_DEEPSPEED,    /* DeepSpeed's engine, ZeRO stage 0..3 */
	GM_WRAP_MEGATRON,     /* Megatron-LM's DDP and optimizer */
	GM_WRAP_LORA,         /* PEFT LoRA on a frozen 16-bit/fp32 base */
	GM_WRAP_QLORA,        /* PEFT LoRA on a bitsandbytes NF4 base */
	GM_WRAP_INFERENCE,    /* model.generate() / one forward pass */
};

struct gm_run {
	bool train;
	enum gm_wrap wrap;
	enum gm_framework framework;
	/* GPUs in all = dp x tp x pp; ep (Megatron-Core's expert parallel)
	 * splits each MoE layer's experts over ranks of dp x tp, etp
	 * (expert tensor parallel) each expert's weights; etp is 1 where
	 * no Megatron-Core MoE layer is planned */
	uint64_t gpus, dp, tp, pp, vpp, ep, etp;
	bool sequence_parallel;
	unsigned zero_stage;
	enum gm_fsdp_mp fsdp_mp;          /* under GM_WRAP_FSDP2, *-mixed */
	bool distributed_optimizer;       /* Megatron-LM */
	bool moe_dispatcher_set;          /* Megatron-LM MoE training: */
	enum gm_moe_dispatcher moe_dispatcher; /* its token dispatcher */
	enum gm_offload offload_optimizer, offload_parameters;
	/* training: sequences per micro-batch, per optimizer step over
	 * all data-parallel ranks (micro x accumulation x dp), tokens per
	 * sequence */
	uint64_t micro_batch, global_batch, accumulation, sequence_length;
	/* inference: sequences, prompt and generated tokens */
	uint64_t batch, prompt_length, generate_length;
	enum gm_precision precision;      /* training's, or the weights' */
	enum gm_optimizer optimizer;
	enum gm_ckpt checkpointing;
	enum gm_attn attention;
	enum gm_loop loop;
	enum gm_opt_impl optimizer_implementation;
	bool kv_cache_in_training;        /* past_key_values (loop.h) */
	enum gm_kv_dtype kv_cache_dtype;
	uint64_t lora_rank;
	unsigned n_lora_targets;
	char lora_targets[160];           /* "q_proj, v_proj" */
	uint64_t experts, experts_per_token, shared_experts;
};

/*
 * The run spec describes with accumulation gradient-accumulation steps
 * (the plan's) and the recipe's wrap. Pure; never fails.
 */
void gm_run_from_spec(const struct gm_spec *spec, uint64_t accumulation,
		      enum gm_wrap wrap, struct gm_run *out);

/* "data parallel 8, ZeRO-3 (FSDP2 fully_shard)" and the like: the
 * sharding in words into buf; returns buf. */
char *gm_run_sharding_text(const struct gm_run *r, char *buf, size_t len);

/* "8 = data parallel 8 x tensor parallel 1 x pipeline parallel 1". */
char *gm_run_gpus_text(const struct gm_run *r, char *buf, size_t len);

/* Training: "64 sequences = micro-batch 1 x 8 accumulation steps x 8
 * data-parallel ranks, 4096 tokens each"; inference: "batch 8, prompt
 * 2048 tokens, 256 generated". */
char *gm_run_batch_text(const struct gm_run *r, char *buf, size_t len);

/*
 * The JSON keys (planner/README.md): "gpus": N, "parallelism":
 * {data_parallel, tensor_parallel, pipeline_parallel,
 * virtual_pipeline_stages, expert_parallel, sequence_parallel, zero_stage, fsdp,
 * fsdp_mixed_precision (null unless fsdp), distributed_optimizer,
 * offload_optimizer, offload_parameters}, "batch": training
 * {micro_batch, gradient_accumulation_steps, global_batch,
 * sequence_length}, inference {batch, prompt_length, generate_length}.
 */
void gm_run_set(struct gm_val *obj, const struct gm_run *r);

/*
 * The run in sentences, as HTML list items (<li>...</li>, text
 * escaped), one per aspect: framework and wrapper with the recipe's
 * name, precision, adapter, loop, parallelism, offload, experts, batch.
 * fit: the batch is each GPU's largest (no single figure).
 */
void gm_run_html(FILE *out, const struct gm_run *r, const char *recipe,
		 bool fit);

#endif
