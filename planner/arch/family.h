/*
 * family.h - a model family: everything the planner knows about one
 * architecture, in one `const struct gm_family` per file of planner/arch/
 * (llama.c, gpt2.c, bert.c, custom.c), listed once in list.h.
 *
 * The stages read a family only through this table: the spec's defaults
 * and rules (spec_rules.c), the parameter layout (params.c), the analytic
 * saved-tensor list (activations.c), the training block program and the
 * final norm (block.c builds them with the op builders of block.h), the
 * loss program (loss.h), the inference layer (step.c emits it with the
 * emitter of emit.h) and the flags the memory model (model.c) needs.
 * planner/README.md, "How to add a model family", says what to write.
 *
 * Units: bytes, elements where a name says so; no errors unless stated.
 */
#ifndef GM_ARCH_FAMILY_H
#define GM_ARCH_FAMILY_H

#include <stdbool.h>
#include <stdint.h>

#include "arch/list.h"
#include "spec.h"

struct gm_diag;
struct gm_param_layout;
struct gm_act_layer;
struct gm_act_style;
struct gm_blk;
struct gm_em;
struct gm_em_fwd;
struct gm_em_live;
struct gm_loss;
struct gm_step_infer;

/* Optional model keys a family accepts (spec_rules.c refuses them for
 * the others). */
enum {
	GM_FK_TYPE_VOCAB = 1 << 0,     /* model.type_vocab_size */
	GM_FK_QKV_BIAS = 1 << 1,       /* model.qkv_bias */
	GM_FK_ACT_PER_TOKEN = 1 << 2,  /* model.activation_bytes_per_token */
	GM_FK_MASKED_LM = 1 << 3,      /* model.head: masked-lm */
	GM_FK_MOE = 1 << 4,            /* model.experts, experts_per_token,
					* moe_ffn_hidden_size */
	GM_FK_SHARED_EXPERTS = 1 << 5, /* model.shared_experts */
	GM_FK_HEAD_DIM = 1 << 6,       /* model.head_dim */
	GM_FK_MLA = 1 << 7,            /* model.q_lora_rank, kv_lora_rank,
					* qk_rope_head_dim, qk_nope_head_dim,
					* v_head_dim */
	GM_FK_DENSE_LAYERS = 1 << 8,   /* model.dense_layers */
	GM_FK_SLIDING_WINDOW = 1 << 9, /* model.sliding_window */
};

/* Multi-head latent attention's widths (GM_FK_MLA families' defaults). */
struct gm_family_mla {
	uint64_t q_lora_rank, kv_lora_rank, qk_rope_head_dim;
	uint64_t qk_nope_head_dim, v_head_dim;
};

/* What the first block's input is to the model's forward (training):
 * how long the embedding output lives. */
enum gm_embed_out {
	GM_EMBED_OUT_FREE,     /* nothing keeps it beyond the first block */
	GM_EMBED_OUT_NAMED,    /* the block input itself stays named until
				* the base model's forward returns */
	GM_EMBED_OUT_SUM,      /* a named embedding output plus a transient
				* sum (token + position embeddings) that
				* the block input (its dropout) replaces */
};

/* What eager attention does to softmax's probabilities before the
 * dropout: Llama's .to(query.dtype), GPT-2's .type(value.dtype), or
 * nothing (BERT: they stay in softmax's dtype). */
enum gm_probs_cast { GM_PROBS_TO_QUERY, GM_PROBS_TO_VALUE, GM_PROBS_KEPT };

/* Eager attention's variant (block.c's attention core). */
struct gm_family_attn {
	bool mask;             /* adds a materialised causal mask, (b, 1,
				* s, s) in the residual dtype */
	bool softmax_fp32;     /* softmax(..., dtype=float32) whatever
				* autocast does */
	enum gm_probs_cast probs;
};

struct gm_family {
	const char *name;      /* model.architecture */
	bool shaped;           /* has a layout from layers / hidden_size /
				* attention_heads (else `parameters`) */

	/* ---- spec: defaults and rules (spec_rules.c) ---- */
	struct {
		uint64_t (*ffn)(uint64_t hidden); /* NULL: 4 x hidden */
		uint64_t vocab, max_positions, type_vocab;
		bool tied;
		enum gm_head head;
		uint64_t experts, experts_per_token; /* MoE families */
		uint64_t head_dim; /* 0: hidden_size / attention_heads */
		uint64_t shared_experts, dense_layers; /* MoE families */
		struct gm_family_mla mla; /* GM_FK_MLA families */
		/* PEFT's default LoRA target modules for the model type
		 * (peft utils/constants.py
		 * TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING); NULL
		 * ends the list */
		const char *lora_targets[2];
	} defaults;
	unsigned keys;         /* GM_FK_*: optional keys it accepts */
	/* The module names of a block's nn.Linear layers in the family's
	 * transformers modeling file (5.24.0): what training.lora_targets
	 * may name. NULL ends the list; empty for a family without a
	 * shape. */
	const char *linears[8];
	bool learned_positions; /* one position embedding per position:
				 * max_position_embeddings bounds the
				 * sequence */

	/* ---- parameters (params.c) ---- */
	/* Append the tensors of m's layout (blocks, final norm, head) with
	 * gm_params_add(). 0 or GM_EINVAL with a message in diag. */
	int (*layout)(const struct gm_spec_model *m,
		      struct gm_param_layout *l, struct gm_diag *diag);

	/* ---- analytic saved tensors (activations.c) ---- */
	void (*saved)(struct gm_act_layer *l, const struct gm_act_style *st);
	double mlp_grads;      /* FFN-wide gradients the MLP's backward
				* holds at once (its transient) */
	bool moe;              /* a routed mixture-of-experts MLP
				* (model.experts ...): the plan says what a
				* skewed router adds */
	bool train_only;       /* task: inference is not modelled yet (its
				* infer_* ops are never called) */

	/* ---- training ---- */
	bool dropout;          /* Hugging Face's default dropout p > 0 */
	bool conv1d;           /* its linears are GPT-2's Conv1D
				* (pytorch_utils.py: addmm(bias, x, W)):
				* autocast casts the weight, the input, then
				* the bias (else F.linear's bias, weight,
				* input) */
	struct gm_family_attn attn;
	/* One block's forward, written with block.h's builders from the
	 * block input GM_BLK_IN; its last op's output is GM_BLK_OUT. NULL:
	 * no program (the analytic saved list is replayed instead). */
	void (*block)(struct gm_blk *b);
	/* The block names its linears and models them frozen with LoRA
	 * (block.c's frozen linears): training.adapter is planned (with a
	 * causal-lm head); false refuses it (spec_rules.c). */
	bool adapter;
	/* The final norm of x (the last block's output); NULL: the model
	 * has none (post-norm blocks). Returns the norm's output. */
	int (*final_norm)(struct gm_blk *b, int x);
	enum gm_embed_out embed_out;
	double embed_mask;     /* bytes per embedding element the embedding
				* saves beyond the ids (its dropout mask) */
	bool embed_norm;       /* the embedding ends in a LayerNorm that
				* saves its input (residual dtype) */
	const struct gm_loss *loss; /* the LM head's loss (loss.h) */

	/* ---- inference (step.c) ---- */
	bool encoder;          /* no KV cache, no generate(): one pass */
	/* The first stage's embedding of f->T tokens; returns the first
	 * block's input, setting lv->keep[] for what stays referenced. */
	uint32_t (*infer_embed)(struct gm_em *e, const struct gm_em_fwd *f,
				struct gm_em_live *lv);
	/* Before the blocks, on every stage (rotary tables into lv->cs);
	 * NULL: nothing. q: positions of the forward. */
	void (*infer_pre)(struct gm_em *e, double q, struct gm_em_live *lv);
	/* The family's own widths of a pass (struct gm_step_infer: kv,
	 * kv_v, head_dim, mla) after the generic ones are set, for the
	 * model m on a tensor-parallel degree t; NULL: the generic ones. */
	void (*infer_shapes)(const struct gm_spec_model *m, double t,
			     struct gm_step_infer *in);
	/* Block l (of this stage: in->layer0 + l in the model) over f;
	 * returns its output (the caller frees the input). */
	uint32_t (*infer_layer)(struct gm_em *e, uint64_t l,
				const struct gm_em_fwd *f);
	/* The last stage's head input after the blocks (lv->hs: the last
	 * block's output): frees what the model drops, returns the tensor
	 * lm_head multiplies, or GM_EM_NONE without an LM head. */
	uint32_t (*infer_head)(struct gm_em *e, const struct gm_em_fwd *f,
			       struct gm_em_live *lv);
};

#define GM_FAMILY_DECL_(id, sym, name) extern const struct gm_family gm_family_##sym;
GM_FAMILIES(GM_FAMILY_DECL_)
#undef GM_FAMILY_DECL_

/* The family of architecture a (a < GM_ARCH_N). */
const struct gm_family *gm_family(enum gm_arch a);

#endif
