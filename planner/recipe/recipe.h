/*
 * recipe.h - the recipe table: how each framework lays out the model
 * states of one rank (weights, gradients, optimizer states with their
 * master copies), its communication buffers, its optimizer step, its
 * host memory and its peak while the model is built and wrapped.
 *
 * One file per framework, each derived from that framework's source at
 * a pinned version, cited file and function beside each rule:
 *   pytorch.c    PyTorch 2.x AMP, DDP, ZeroRedundancyOptimizer, FSDP2
 *   deepspeed.c  DeepSpeed 0.19.6 ZeRO 0-3 with buckets and offload
 *   megatron.c   Megatron-LM core_v0.15 (main_grad buffer, distributed
 *                optimizer, 1F1B and interleaved in-flight micro-batches)
 *   adapter.c    PEFT 0.20 LoRA and bitsandbytes 0.50 NF4 (QLoRA); the
 *                step emitter's adapter rules: planner/step_adapter.c
 * recipe.c holds the table that picks a framework's function.
 *
 * All sizes are bytes (doubles: fractions of a byte per parameter add
 * up exactly over a model); parameter counts are elements. The
 * functions are pure and never fail except by returning GM_EINVAL for a
 * combination the table does not hold (the message says which).
 */
#ifndef GM_RECIPE_H
#define GM_RECIPE_H

#include <stdbool.h>
#include <stdint.h>

#include "run.h"
#include "spec.h"

struct gm_diag;

/* What a recipe needs to know of the model and the run. */
struct gm_recipe_in {
	double params;        /* parameters of this rank's model part (after
			       * tensor and pipeline splits), all of them */
	double trainable;     /* of which trained: params, or the adapters' */
	double matmul_params; /* of params, the weights of matmuls (what
			       * torch.autocast casts; embeddings are not) */
	double largest_layer; /* parameters of the largest layer: an FSDP
			       * unit, the module ZeRO-3 gathers at once */
	enum gm_precision precision;
	enum gm_optimizer optimizer;
	uint64_t dp;          /* data-parallel degree */
	unsigned zero;        /* parallelism.zero_stage */
	bool built_whole;     /* the whole model is built on each rank first
			       * (false: meta device / zero.Init) */
	double built_params;  /* built_whole: parameters built whole on the
			       * rank before tensor parallel and FSDP shard
			       * them (0: params) */
	enum gm_fsdp_mp fsdp_mp;
	enum gm_offload offload_optimizer, offload_parameters;
	bool distributed_optimizer;
	const struct gm_spec_deepspeed *ds; /* DeepSpeed's buckets (NULL:
					     * DeepSpeed's defaults) */
};

/* The model states of one rank, as the framework holds them. */
struct gm_recipe_states {
	char name[96];    /* "deepspeed-zero3-offload-optimizer", ... */
	enum gm_wrap wrap; /* what the name says of the wrapper (run.h) */
	double weights;   /* the parameters as the model holds them (GPU) */
	double gradients; /* their gradients (Megatron's main_grad incl.) */
	double optimizer; /* optimizer states, fp32 master copies incl. */
	double master;    /* the master-copy part of optimizer */
	double buffers;   /* communication buffers kept between steps: DDP's
			   * buckets, DeepSpeed's IPG buffers */
	double gathered;  /* parameters and gradients unsharded for the
			   * layer being computed (FSDP, ZeRO-3) at the
			   * backward's peak */
	double step;      /* transient of the optimizer step (fp32 gradient
			   * copies DeepSpeed makes for its master update) */
	double cache;     /* torch.autocast's weight cache (whole model) */
	double host;      /* host memory (pinned or pageable) of this rank */
	double init_peak; /* GPU peak while building and wrapping the model,
			   * before the first step */
};

/*
 * The model states of one rank under framework fw. Returns 0, or
 * GM_EINVAL with diag saying which combination is not in the table.
 */
int gm_recipe_states(enum gm_framework fw, const struct gm_recipe_in *in,
		     struct gm_recipe_states *out, struct gm_diag *diag);

/* Bytes on the GPU that the model states need at once at their peak:
 * weights + gradients + optimizer + buffers + gathered + step + cache. */
double gm_recipe_gpu_bytes(const struct gm_recipe_states *s);

/* Each framework's entry (its file); same contract as gm_recipe_states. */
int gm_recipe_pytorch(const struct gm_recipe_in *in,
		      struct gm_recipe_states *out, struct gm_diag *diag);
int gm_recipe_deepspeed(const struct gm_recipe_in *in,
			struct gm_recipe_states *out, struct gm_diag *diag);
int gm_recipe_megatron(const struct gm_recipe_in *in,
		       struct gm_recipe_states *out, struct gm_diag *diag);

/* DeepSpeedZeroConfig's defaults (runtime/zero/config.py), for a run
 * whose spec names no DeepSpeed JSON. */
const struct gm_spec_deepspeed *gm_ds_defaults(void);

/* ==== DeepSpeed's own estimators, reproduced (deepspeed.c) ==== */

/*
 * estimate_zero2_model_states_mem_needs (DeepSpeed 0.19.6,
 * deepspeed/runtime/zero/stage_1_and_2.py): bytes, as the Python
 * returns them (int() of each figure).
 */
void gm_ds_estimate_zero2(int64_t total_params, int64_t gpus_per_node,
			  int64_t nodes, bool cpu_offload,
			  double additional_buffer_factor, int64_t *cpu_mem,
			  int64_t *gpu_mem);

/* estimate_zero3_model_states_mem_needs (stage3.py), likewise; also
 * returns largest_layer_memory (4 bytes per largest-layer parameter). */
void gm_ds_estimate_zero3(int64_t total_params, int64_t largest_layer_params,
			  int64_t gpus_per_node, int64_t nodes,
			  bool cpu_offload, bool cpu_offload_params,
			  bool zero_init, double additional_buffer_factor,
			  int64_t *cpu_mem, int64_t *gpu_mem,
			  int64_t *largest_layer_memory);

/* ==== Megatron-LM (megatron.c) ==== */

/*
 * Bytes per parameter of weights + gradients + optimizer for Adam,
 * Megatron-LM's table (docs/user-guide/features/dist_optimizer.md;
 * megatron/training/theoretical_memory_usage.py,
 * compute_weight_and_optimizer_memory): bf16 18 or 6 + 12/d with the
 * distributed optimizer, fp16 20 or 4 + 16/d, fp32 16 or 8 + 8/d.
 */
double gm_megatron_bytes_per_param(enum gm_precision p, bool dist_opt,
				   uint64_t d);

/*
 * Micro-batches whose activations pipeline rank `rank` (0-based) of pp
 * holds at once under Megatron-LM's schedule, counted in model chunks
 * (megatron/core/pipeline_parallel/schedules.py,
 * get_pp_rank_microbatches: the warm-up forwards plus the one in the
 * steady 1F1B state, at most the step's total). vpp = 1: 1F1B,
 * min(pp - rank, m); vpp > 1: interleaved, min(2 (pp - rank - 1) +
 * (vpp - 1) group + 1, m vpp) with group = pp, Megatron's default
 * microbatch_group_size_per_vp_stage. m: micro-batches per step.
 */
uint64_t gm_megatron_in_flight(uint64_t pp, uint64_t vpp, uint64_t rank,
			       uint64_t m);

/* The arguments of Megatron-LM's theoretical memory report that a dense
 * GPT model uses (megatron/training/arguments.py names). */
struct gm_megatron_args {
	uint64_t hidden_size, num_attention_heads, num_query_groups,
		 kv_channels, ffn_hidden_size, num_layers, padded_vocab_size;
	bool swiglu, rmsnorm, untie;
	uint64_t tp, pp, vpp, dp; /* vpp 0: no interleaving */
	bool distributed_optimizer, sequence_parallel, selective;
	uint64_t seq_length, micro_batch_size;
	uint64_t num_microbatches; /* 0: not given */
};

/*
 * Megatron-LM's own "Theoretical memory footprints" (megatron/training/
 * theoretical_memory_usage.py at d98e8a6, report_theoretical_memory) for
 * a dense model: weight and optimizer, and activation memory of the
 * first pipeline stage, in MiB (its "MB" is 2^20 bytes). Reproduced, not
 * used by the plan: a published anchor for tests.
 */
void gm_megatron_theoretical(const struct gm_megatron_args *a,
			     double *weight_and_optimizer_mib,
			     double *activation_mib);

/* ==== LoRA and QLoRA (adapter.c) ==== */

/* Parameters LoRA trains on one linear in -> out: lora_A (in x r) and
 * lora_B (r x out), no biases (peft/tuners/lora/layer.py,
 * LoraLayer.update_layer): r (in + out). */
double gm_lora_params(uint64_t r, uint64_t in, uint64_t out);

/*
 * Bytes bitsandbytes stores for one weight of n elements quantized to
 * NF4 with double quantization (bitsandbytes 0.50, functional.py
 * quantize_4bit with compress_statistics=True, the QLoRA setting):
 * the packed 4-bit data, (n + 1) / 2 bytes; one absmax per 64-element
 * block quantized to 8 bits (quantize_blockwise, blocksize 256: one
 * byte each) with one fp32 second-level absmax per 256 of them, its
 * fp32 offset, the copy of the 256-entry fp32 dynamic code the nested
 * state keeps and the 16-entry fp32 NF4 code. About 0.516 bytes per
 * element on a large weight.
 */
double gm_nf4_bytes(uint64_t n);

/* What the adapter changes of a rank's model states. */
struct gm_adapter_in {
	enum gm_adapter adapter;
	enum gm_precision precision; /* the base model's (spec) */
	enum gm_optimizer optimizer;
	double base_params;     /* every parameter of the base model */
	double matmul_params;   /* of which, the weights of matmuls */
	double quantized;       /* of which, elements of the linears
				 * bitsandbytes quantizes (qlora) */
	double quantized_bytes; /* gm_nf4_bytes() summed over them */
	double adapter_params;  /* gm_lora_params() summed over targets */
	double largest_linear;  /* elements of the largest quantized linear */
	bool kbit_prepared;     /* peft prepare_model_for_kbit_training()
				 * was called (the QLoRA recipe) */
};

/*
 * Model states with an adapter (single data-parallel rank, pytorch).
 * Returns 0 or GM_EINVAL (adapter none, or an optimizer the table does
 * not hold).
 */
int gm_recipe_adapter(const struct gm_adapter_in *in,
		      struct gm_recipe_states *out, struct gm_diag *diag);

#endif
