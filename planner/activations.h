/*
 * activations.h - what one transformer block keeps for backward
 * (activations.c).
 *
 * A block is described as the list of tensors autograd saves, each sized
 * per token (elements in units of h, q_proj's width, the KV width, the
 * FFN width, a*s for attention scores, a) with its element size in bytes and how tensor /
 * sequence parallelism divide it. Korthikanti et al. 2022 ("Reducing
 * Activation Recomputation in Large Transformer Models", section 4.1,
 * Table 2) count exactly such a list for Megatron's GPT block; the same
 * sum over each family's Hugging Face block (planner/arch/: each op's
 * saved tensors read off PyTorch's autograd formulas and transformers'
 * modeling code) gives our figures. Bytes, per micro-batch; no errors.
 */
#ifndef GM_ACTIVATIONS_H
#define GM_ACTIVATIONS_H

#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

enum {
	GM_AT_SEQ = 1 << 0,  /* sequence-dim tensor: whole on every TP rank
			      * unless sequence parallel (then / t) */
	GM_AT_CORE = 1 << 1, /* core attention (a*s per token): dropped by
			      * selective recomputation */
};

struct gm_act_tensor {
	const char *name;
	double h, kv, f, as, a, one; /* elements per token, by unit */
	double q;                   /* in units of q_proj's width (heads x
				     * head_dim; hidden_size unless
				     * model.head_dim decouples them) */
	double fe;                  /* elements per token in units of one
				     * expert's MLP width */
	double bytes;               /* per element */
	unsigned flags;
};

#define GM_ACT_MAX 32

struct gm_act_layer {
	struct gm_act_tensor t[GM_ACT_MAX];
	int n;
	double input_bytes;     /* per element of the block's input (what
				 * full checkpointing keeps) */
	/* Largest transient beyond the saved set inside one block (forward
	 * or backward), in the same per-token units, TP-divided: */
	struct gm_act_tensor transient;
	struct gm_act_tensor transient_seq; /* SEQ part of it */
};

/* The shape one block sees on one rank. */
struct gm_act_dims {
	double h, kv, f, a;     /* hidden, K/V width, FFN width, heads */
	double q;               /* q_proj's width (heads x head_dim) */
	double fe;              /* one expert's MLP width (MoE), else 0 */
	double s, b;            /* sequence length, micro-batch */
	double t;               /* tensor parallel degree (>= 1) */
	bool sp;                /* sequence parallel */
};

/* How the block is computed: the style of the code that runs it. */
struct gm_family;

struct gm_act_style {
	const struct gm_family *fam; /* the block's family (its saved op) */
	const struct gm_spec_model *model; /* the shape, for widths the
					    * dims do not name (MLA's) */
	enum gm_attn attn;
	bool autocast;          /* torch.autocast: each linear saves its own
				 * cast of its input */
	bool dropout;           /* training with dropout p > 0 */
	double compute;         /* bytes of a compute element (2 or 4) */
	double residual;        /* bytes of the residual stream */
	double experts, topk;   /* MoE: routed experts, experts per token
				 * (0: a dense MLP) */
	double moe_frac;        /* MoE: the share of blocks whose MLP is
				 * routed (the rest dense: DeepSeek's
				 * model.dense_layers); the list is the
				 * average block */
};

/* The block HF transformers runs: the family's saved list (its saved op,
 * written with the helpers below) and the block's transient. */
void gm_act_layer_hf(struct gm_act_layer *out, const struct gm_act_style *st);

/* Append a tensor (zero per-token units: the caller sets them). */
struct gm_act_tensor *gm_act_add(struct gm_act_layer *l, const char *name,
				  double bytes, unsigned flags);

/*
 * A norm in front of n linears, what (the linears' input) named: RMSNorm
 * (rms) or LayerNorm's saved tensors, then the linears' inputs (n
 * autocast casts, or the norm output once). See activations.c.
 */
void gm_act_norm(struct gm_act_layer *l, const struct gm_act_style *st,
		 bool rms, int n, const char *what);

/*
 * The attention core after the q/k/v projections (sdpa or eager as
 * st->attn says); kv_saved_already: q, k, v are views of a fused
 * projection's output the caller listed.
 */
void gm_act_attention(struct gm_act_layer *l, const struct gm_act_style *st,
		      bool kv_saved_already);

/*
 * The block of Korthikanti et al. 2022, section 4.1: Megatron GPT, 16-bit
 * activations, 1-byte dropout masks, GeLU MLP, LayerNorm, attention
 * scores stored (no flash attention).
 */
void gm_act_layer_paper(struct gm_act_layer *out);

/* Bytes of one tensor for dims (per micro-batch, on one rank). */
double gm_act_tensor_bytes(const struct gm_act_tensor *t,
			   const struct gm_act_dims *d);

/*
 * Bytes one block keeps for backward under checkpointing ck: none = every
 * tensor; selective = all but GM_AT_CORE (Korthikanti's selective
 * recomputation); full = the block input only (input_bytes * s*b*h, / t
 * with sequence parallelism).
 */
double gm_act_layer_saved(const struct gm_act_layer *l,
			  const struct gm_act_dims *d, enum gm_ckpt ck);

/* Largest transient of one block (beyond what it saved), bytes. */
double gm_act_layer_transient(const struct gm_act_layer *l,
			      const struct gm_act_dims *d);

#endif
