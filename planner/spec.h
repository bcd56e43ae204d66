/*
 * spec.h - a model spec: what `gpumem plan` reads (defined in spec.c).
 *
 * The YAML schema, key by key, is documented in models/README.md. gm_spec_load() parses a file with libyaml,
 * applies defaults and --set overrides, and validates; every message
 * names file:line:column of the offending key or value. Sizes are counts
 * (layers, tokens, elements) unless a name ends in _bytes.
 *
 * Errors: 0, or GM_EINVAL (bad spec; diag holds the message), GM_EIO
 * (unreadable file), GM_ENOMEM.
 */
#ifndef GM_SPEC_H
#define GM_SPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch/list.h"

struct gm_diag;

enum gm_task { GM_TASK_TRAIN, GM_TASK_INFERENCE };

/* enum gm_arch: the model families (planner/arch/list.h) */

enum gm_head {
	GM_HEAD_CAUSAL_LM,     /* llama, gpt2 default */
	GM_HEAD_MASKED_LM,     /* bert default */
	GM_HEAD_CLASSIFICATION,
};

enum gm_precision {
	GM_PREC_FP32,
	GM_PREC_FP16_MIXED, /* fp32 weights/grads/states, fp16 autocast */
	GM_PREC_BF16_MIXED, /* fp32 weights/grads/states, bf16 autocast */
	GM_PREC_FP16_TRUE,  /* everything fp16 */
	GM_PREC_BF16_TRUE,  /* everything bf16 */
};

enum gm_optimizer {
	GM_OPT_ADAMW,
	GM_OPT_ADAM,
	GM_OPT_SGD,
	GM_OPT_SGD_MOMENTUM,
	GM_OPT_ADAMW_8BIT,
	GM_OPT_ADAFACTOR,
};

enum gm_ckpt { GM_CKPT_NONE, GM_CKPT_FULL, GM_CKPT_SELECTIVE };

enum gm_attn { GM_ATTN_FLASH, GM_ATTN_SDPA, GM_ATTN_EAGER };

enum gm_kv_dtype { GM_KV_FP32, GM_KV_FP16, GM_KV_BF16, GM_KV_FP8, GM_KV_INT8 };

/* How the run is built (the recipe table, planner/recipe/). */
enum gm_framework { GM_FW_PYTORCH, GM_FW_DEEPSPEED, GM_FW_MEGATRON };

/* training.loop: what the training loop keeps of a step's outputs. */
enum gm_loop {
	GM_LOOP_TRAINER,      /* only the loss leaves the forward call */
	GM_LOOP_KEEP_OUTPUTS, /* `outputs = model(**batch)` lives until the
			       * next step's forward returns */
	GM_LOOP_LIGHTNING,    /* Lightning's automatic optimization:
			       * zero_grad after the next training_step */
};

/* training.optimizer_implementation: which of torch.optim's
 * implementations of adam, adamw, sgd, sgd-momentum steps (PyTorch's
 * own words, torch/optim/optimizer.py _foreach_doc / _fused_doc). The
 * temporaries each allocates: planner/optstep.h. */
enum gm_opt_impl {
	GM_OPT_IMPL_FOREACH,  /* PyTorch's default on CUDA tensors */
	GM_OPT_IMPL_FUSED,    /* fused=True: one kernel per tensor list */
	GM_OPT_IMPL_FOR_LOOP, /* foreach=False: one tensor at a time */
};

enum gm_use_cache { GM_CACHE_AUTO, GM_CACHE_TRUE, GM_CACHE_FALSE };

enum gm_adapter { GM_ADAPTER_NONE, GM_ADAPTER_LORA, GM_ADAPTER_QLORA };

/* parallelism.fsdp_mixed_precision (zero_stage 3, *-mixed, pytorch). */
enum gm_fsdp_mp {
	GM_FSDP_MP_PARAM_DTYPE, /* MixedPrecisionPolicy(param_dtype=16-bit) */
	GM_FSDP_MP_AUTOCAST,    /* fp32 unsharded parameters, torch.autocast */
};

enum gm_offload { GM_OFFLOAD_NONE, GM_OFFLOAD_CPU, GM_OFFLOAD_NVME };
/* parallelism.moe_token_dispatcher_type: Megatron-Core's token
 * dispatcher of a MoE layer (--moe-token-dispatcher-type; default
 * allgather as transformer_config.py at NVIDIA/Megatron-LM d98e8a6).
 * flex (DeepEP / HybridEP) is named only to be refused. */
enum gm_moe_dispatcher {
	GM_MOE_DISPATCH_ALLGATHER, GM_MOE_DISPATCH_ALLTOALL,
	GM_MOE_DISPATCH_FLEX
};

/* The most PEFT module names lora_targets may list. */
#define GM_LORA_MAX_TARGETS 16

struct gm_spec_model {
	enum gm_arch architecture;
	uint64_t layers;
	uint64_t hidden_size;
	uint64_t ffn_hidden_size;   /* default 4 * hidden_size (gpt2, bert) */
	uint64_t attention_heads;
	uint64_t kv_heads;          /* default attention_heads */
	uint64_t vocab_size;
	uint64_t max_position_embeddings; /* gpt2/bert learned positions */
	uint64_t type_vocab_size;   /* bert token types (default 2) */
	bool tied_embeddings;
	enum gm_head head;
	uint64_t num_labels;        /* head: classification */
	double parameters;          /* optional cross-check; 0 = not given */
	double activation_bytes_per_token; /* custom models; 0 = not given */
	bool qkv_bias;              /* q/k/v projections have biases where
				     * the family takes the key (Qwen2) */
	bool add_bias_linear;       /* Megatron-LM's gpt2 layer: linear
				     * biases (--disable-bias-linear: false);
				     * true when not given */
	uint64_t head_dim;          /* one attention head's width where the
				     * family takes the key (Qwen3); 0 =
				     * hidden_size / attention_heads */
	uint64_t sliding_window;    /* tokens a layer's attention sees
				     * (Mistral's sliding_window) where the
				     * family takes the key; 0 = none */
	/* mixture of experts (families that take GM_FK_MOE; else 0) */
	uint64_t experts;           /* routed experts per MoE layer */
	uint64_t experts_per_token; /* top-k */
	uint64_t shared_experts;    /* always-on experts */
	uint64_t moe_ffn_hidden_size; /* one expert's MLP width */
	uint64_t dense_layers;      /* the first blocks with a dense MLP of
				     * ffn_hidden_size, the rest routed
				     * (DeepSeek's first_k_dense_replace) */
	/* multi-head latent attention (families that take GM_FK_MLA) */
	uint64_t q_lora_rank;       /* q's low-rank width; 0 = a full q_proj */
	uint64_t kv_lora_rank;      /* the compressed K/V width */
	uint64_t qk_rope_head_dim;  /* the rotary part of a q/k head */
	uint64_t qk_nope_head_dim;  /* the part without rotary */
	uint64_t v_head_dim;        /* one value head's width */
};

struct gm_spec_training {
	uint64_t micro_batch_size;
	uint64_t global_batch_size; /* 0 = not given */
	uint64_t sequence_length;
	enum gm_precision precision;
	enum gm_optimizer optimizer;
	enum gm_opt_impl optimizer_implementation;
	enum gm_ckpt activation_checkpointing;
	enum gm_attn attention;
	enum gm_framework framework;
	char deepspeed_config[1024]; /* "" = none; relative to the spec */
	enum gm_loop loop;
	enum gm_use_cache use_cache;
	enum gm_adapter adapter;
	uint64_t lora_rank;
	/* PEFT target module names ("q_proj", ..., or "all-linear") */
	char lora_targets[GM_LORA_MAX_TARGETS][32];
	unsigned n_lora_targets;
	/* line and column (1-based) of each name written as a YAML
	 * sequence item in the spec file; 0 where not known */
	unsigned lora_target_at[GM_LORA_MAX_TARGETS][2];
};

struct gm_spec_inference {
	enum gm_precision precision; /* weights' dtype: *-true or fp32 */
	uint64_t batch_size;
	uint64_t prompt_length;
	uint64_t generate_length;   /* 0 = one forward pass over the prompt */
	enum gm_kv_dtype kv_cache_dtype;
};

/* Under tensor parallelism, the embedding and the lm_head: split over
 * the vocabulary (Megatron's VocabParallelEmbedding and vocab-parallel
 * cross-entropy: each rank holds vocab/t rows and logits) or replicated
 * on every rank (torch.distributed.tensor.parallel with only the blocks'
 * linears parallelized: full weights and full logits per rank). */
enum gm_tp_vocab { GM_TPV_SHARDED, GM_TPV_REPLICATED };

struct gm_spec_parallel {
	uint64_t data_parallel;     /* all default to 1 */
	uint64_t tensor_parallel;
	uint64_t pipeline_parallel;
	bool sequence_parallel;
	unsigned zero_stage;        /* 0..3; FSDP full shard = 3 */
	enum gm_tp_vocab tp_vocab;  /* tensor_parallel_vocab */
	bool built_whole;           /* the model is built whole on every
				     * rank, then FSDP / tensor parallel
				     * shard it (false: built sharded, as
				     * from a meta-device init) */
	enum gm_fsdp_mp fsdp_mixed_precision;
	enum gm_offload offload_optimizer;  /* DeepSpeed ZeRO */
	enum gm_offload offload_parameters; /* DeepSpeed ZeRO-3 */
	bool distributed_optimizer;         /* Megatron-LM */
	uint64_t virtual_pipeline_stages;   /* Megatron-LM interleaved 1F1B */
	uint64_t expert_parallel;           /* Megatron-LM: MoE experts split
					     * over this many ranks */
	uint64_t expert_tensor_parallel;    /* Megatron-LM: each expert's
					     * weights split over this many
					     * ranks; 0: not given, as
					     * tensor_parallel (use
					     * gm_spec_expert_tensor_parallel) */
	enum gm_moe_dispatcher moe_token_dispatcher_type; /* Megatron-LM */
};

/*
 * What a DeepSpeed JSON (training.deepspeed_config) says beyond the
 * spec's own keys, with DeepSpeed's defaults for what it leaves out
 * (deepspeed/runtime/zero/config.py, DeepSpeedZeroConfig, v0.19.6).
 * Sizes are elements, as DeepSpeed counts them.
 */
struct gm_spec_deepspeed {
	bool loaded;                     /* a config was read */
	char path[1024];                 /* the JSON file as opened */
	uint64_t reduce_bucket_size;     /* 5e8 */
	uint64_t allgather_bucket_size;  /* 5e8 */
	uint64_t prefetch_bucket_size;   /* stage3_prefetch_bucket_size, 5e7 */
	uint64_t max_live_parameters;    /* stage3_max_live_parameters, 1e9 */
	uint64_t param_persistence_threshold; /* stage3_..., 1e5 */
	uint64_t sub_group_size;         /* 1e9 */
	uint64_t max_reuse_distance;     /* stage3_max_reuse_distance, 1e9 */
	bool contiguous_gradients;       /* true */
	bool overlap_comm;               /* default: stage == 3 */
	bool overlap_comm_given;
	/* "auto" values the HF Trainer fills from a TrainingArguments
	 * field the spec does not write, with that field's default
	 * (GM_DS_TRAINER_MICRO_BATCH; bf16 and fp16 False: fp32;
	 * gradient_accumulation_steps 1; gm_spec_ds_assumed() words them):
	 * which one, and where the "auto" stands in the JSON */
	struct gm_ds_assumed {
		enum gm_ds_auto_arg {
			GM_DS_AUTO_MICRO,     /* per_device_train_batch_size */
			GM_DS_AUTO_GAS,       /* gradient_accumulation_steps */
			GM_DS_AUTO_PRECISION, /* bf16 / fp16 */
		} arg;
		char key[40];    /* the JSON key, dotted */
		unsigned line, column;
	} assumed[3];
	unsigned n_assumed;
};

/* TrainingArguments.per_device_train_batch_size's default (transformers
 * 5.17 training_args.py) */
#define GM_DS_TRAINER_MICRO_BATCH 8

/*
 * Where a key's value came from, for messages that blame it later (e.g.
 * the planner's parameter cross-check). line/column are 1-based.
 */
enum gm_spec_origin {
	GM_SPEC_DEFAULT = 0, /* not given: the documented default */
	GM_SPEC_FILE,        /* the YAML file, at line:column */
	GM_SPEC_SET,         /* a --set option */
	GM_SPEC_HF,          /* model.hf_config's file, at line:column */
	GM_SPEC_DEEPSPEED,   /* training.deepspeed_config's JSON, at
			      * line:column (or DeepSpeed's default for a
			      * key it leaves out: line 0) */
};

struct gm_spec_where {
	enum gm_spec_origin origin;
	unsigned line, column;
	const char *field;          /* GM_SPEC_HF: the config.json field */
};

#define GM_SPEC_MAX_KEYS 96

struct gm_spec {
	char name[128];
	char path[1024];            /* the file it came from */
	enum gm_task task;
	struct gm_spec_model model;
	struct gm_spec_training training;
	struct gm_spec_inference inference;
	struct gm_spec_parallel parallelism;
	struct gm_spec_deepspeed deepspeed;
	char gpu[128];              /* hardware.gpu: a catalog name or alias;
				     * "" = not given */
	char hf_config[512];        /* model.hf_config as written; "" = none */
	char hf_path[1024];         /* the config.json it names (hf_config.h) */
	/* Per key of the schema (by its index in spec.c's table); use
	 * gm_spec_given() and gm_spec_where() rather than reading it. */
	struct gm_spec_where where[GM_SPEC_MAX_KEYS];
};

/* How messages name a spec read from standard input (path "-"). */
#define GM_SPEC_STDIN "<stdin>"

/*
 * Load and validate a spec (path "-": standard input, named
 * GM_SPEC_STDIN in messages). sets: n strings "dotted.key=value" applied
 * over the file (as `--set` gives them) before validation; a bad --set
 * is reported naming the option. Returns 0 or GM_EINVAL/GM_EIO/GM_ENOMEM
 * with diag->msg "file:line:column: message" (plus a hint where one
 * helps: "did you mean 'hidden_size'?").
 */
int gm_spec_load(struct gm_spec *spec, const char *path,
		 const char *const *sets, int n_sets, struct gm_diag *diag);

/*
 * Apply n "dotted.key=value" strings (as --set gives them) over a spec
 * gm_spec_load() returned, then fill the defaults again and validate:
 * the spec is the one gm_spec_load() gives with these sets appended to
 * its own (gpumem fit's search plans a change the user can paste as
 * --set). On an error spec is half-changed: apply to a copy. Returns 0
 * or GM_EINVAL with diag as gm_spec_load()'s.
 */
int gm_spec_apply(struct gm_spec *spec, const char *const *sets, int n_sets,
		  struct gm_diag *diag);

/*
 * Refuse what a loaded spec asks for that `gpumem plan` does not model
 * yet (planner/README.md, "Not modelled", lists each case: under
 * DeepSpeed a loop other than trainer or an adapter, under Megatron-LM
 * other families, ...). gm_spec_load() accepts them (their values are
 * read and checked); plan and fit call this after loading. Returns 0 or
 * GM_EINVAL with diag "file:line:column: KEY: ... is not modelled yet".
 */
int gm_spec_check_modelled(const struct gm_spec *spec, struct gm_diag *diag);

/*
 * Whether a dotted key ("model.parameters") was given in the file or by
 * --set (false for defaults and for unknown keys).
 */
bool gm_spec_given(const struct gm_spec *spec, const char *key);

/*
 * The data-parallel degree a plan of spec is for: parallelism.
 * data_parallel (1 when not given) for training; 1 for inference, whose
 * replicas neither communicate nor share memory (each holds the model at
 * tensor x pipeline parallel), so a training spec's data parallelism
 * says nothing of one replica's GPUs.
 */
uint64_t gm_spec_data_parallel(const struct gm_spec *spec);

/*
 * The expert tensor-parallel degree of a Megatron-LM MoE run:
 * parallelism.expert_tensor_parallel where given, else tensor_parallel
 * (--expert-tensor-parallel-size defaults to --tensor-model-parallel-size:
 * megatron/training/arguments.py and megatron/core/parallel_state.py
 * initialize_model_parallel, NVIDIA/Megatron-LM d98e8a6). At least 1.
 */
uint64_t gm_spec_expert_tensor_parallel(const struct gm_spec *spec);

/* Where a dotted key's value came from (GM_SPEC_DEFAULT: not given, or
 * no such key). */
enum gm_spec_origin gm_spec_origin_of(const struct gm_spec *spec,
				      const char *key);

/*
 * Format where a dotted key's value came from into buf: "file:line:column"
 * or "--set KEY", or the file name alone for a default. Returns buf.
 */
char *gm_spec_where(const struct gm_spec *spec, const char *key, char *buf,
		    size_t len);

/*
 * The i-th "auto" of the DeepSpeed JSON whose value is an assumption
 * (0 <= i < spec->deepspeed.n_assumed), in words, into buf: "ds.json:
 * 2:37: train_micro_batch_size_per_gpu: "auto" is the HF Trainer's
 * per_device_train_batch_size, which the spec does not write; assumed
 * 8 (TrainingArguments' default)". Call it after
 * gm_spec_load() (the values are the final ones). Returns buf.
 */
char *gm_spec_ds_assumed(const struct gm_spec *spec, unsigned i, char *buf,
			 size_t len);

/*
 * Check hardware.gpu against a catalog: names[0..n) are every accepted
 * spelling (names and aliases). Returns 0 when the spec names no GPU or
 * one of names (case-insensitive), else GM_EINVAL with "file:line:column:
 * hardware.gpu: unknown GPU 'X'; closest: A, B, C". gm_spec_load() does
 * not call it: `--gpu` may replace hardware.gpu after loading.
 * Prefer gm_spec_check_gpu_catalog(), which ranks like `gpumem gpus`.
 */
int gm_spec_check_gpu(const struct gm_spec *spec, const char *const *names,
		      size_t n, struct gm_diag *diag);

/*
 * The same against a GPU catalog (catalog.h; NULL = the built-in one):
 * gm_catalog_find() accepts the name, else the message lists up to
 * GM_SPEC_GPU_SUGGEST gm_catalog_suggest() names ("...; closest: A, B,
 * C"), or points to `gpumem gpus` when none is close. In spec_gpu.c.
 */
struct gm_catalog;
int gm_spec_check_gpu_catalog(const struct gm_spec *spec,
			      const struct gm_catalog *cat,
			      struct gm_diag *diag);

/* How many names an unknown-GPU message suggests at most. */
#define GM_SPEC_GPU_SUGGEST 8

/*
 * The tail of an unknown-GPU message for name: "; closest: A, B, ..."
 * (gm_catalog_suggest(): every GPU with a name or alias containing
 * name, else those within a small edit distance; at most
 * GM_SPEC_GPU_SUGGEST), or "; see `gpumem gpus` for the names". cat
 * NULL: the built-in catalog.
 */
void gm_spec_gpu_suggest(const struct gm_catalog *cat, const char *name,
			 char *buf, size_t len);

/*
 * For a message "PATH:LINE:COLUMN: ..." about file path: that line of the
 * file and a caret under the column, as "  TEXT\n  ^" (netplan style),
 * for a command to print after the message. Returns 0, or GM_ENOTFOUND
 * when msg has no position in path (e.g. a --set message) or the line
 * cannot be read; buf is then "".
 */
int gm_spec_excerpt(const char *path, const char *msg, char *buf,
		    size_t len);

/* Names of the enums as spelled in YAML ("bf16-mixed", "adamw", ...). */
const char *gm_precision_name(enum gm_precision p);
const char *gm_optimizer_name(enum gm_optimizer o);
const char *gm_ckpt_name(enum gm_ckpt c);
const char *gm_attn_name(enum gm_attn a);
const char *gm_arch_name(enum gm_arch a);
const char *gm_task_name(enum gm_task t);
const char *gm_head_name(enum gm_head h);
const char *gm_kv_dtype_name(enum gm_kv_dtype k);
const char *gm_framework_name(enum gm_framework f);
const char *gm_loop_name(enum gm_loop l);
const char *gm_opt_impl_name(enum gm_opt_impl i);
const char *gm_use_cache_name(enum gm_use_cache u);
const char *gm_adapter_name(enum gm_adapter a);
const char *gm_fsdp_mp_name(enum gm_fsdp_mp m);
const char *gm_offload_name(enum gm_offload o);
const char *gm_moe_dispatcher_name(enum gm_moe_dispatcher d);

#endif
