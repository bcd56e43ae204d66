/*
 * params.h - parameter tensors of a model, from its shape (params.c).
 *
 * The exact Hugging Face layouts come from the model's family (its layout
 * op, planner/arch/: LlamaForCausalLM, GPT2LMHeadModel, BertForMaskedLM,
 * BertForSequenceClassification, ...). The layout is a short list of
 * tensor groups (a group = `count` tensors of rows x cols
 * elements), so later stages can size per-tensor allocations, tensor-
 * parallel shards, FSDP units and Adafactor's factored states. Counts are
 * elements (not bytes).
 *
 * Errors: 0, or GM_EINVAL with a message in diag (a shape that has no
 * layout, e.g. a custom model without `parameters`).
 */
#ifndef GM_PARAMS_H
#define GM_PARAMS_H

#include <stdbool.h>
#include <stdint.h>

#include "spec.h"

struct gm_diag;

enum {
	GM_PT_LAYER = 1 << 0,   /* inside a transformer block (x layers) */
	GM_PT_MATMUL = 1 << 1,  /* a matmul weight: autocast casts it */
	GM_PT_TP = 1 << 2,      /* split by tensor parallelism */
	GM_PT_EMBED = 1 << 3,   /* embedding tables (first pipeline stage) */
	GM_PT_HEAD = 1 << 4,    /* final norm, LM/classifier head (last) */
	GM_PT_TIED = 1 << 5,    /* shares storage with the input embedding */
	GM_PT_BIAS = 1 << 6,    /* a linear's bias: autocast casts it too */
};

struct gm_ptensor {
	const char *name;       /* HF module path, "layers.*.mlp.up_proj" */
	uint64_t rows, cols;    /* a vector is rows x 1 */
	unsigned flags;         /* GM_PT_* */
	uint64_t groups;        /* a 3-D parameter of groups x (rows /
				 * groups) x cols (MoE experts); 0: 2-D */
	uint64_t lo, hi;        /* GM_PT_LAYER: only in blocks lo..hi-1
				 * (DeepSeek's dense and routed MLPs);
				 * hi 0: in every block */
};

#define GM_PARAMS_MAX 32

struct gm_param_layout {
	struct gm_ptensor t[GM_PARAMS_MAX];
	int n;
	uint64_t layers;        /* the transformer blocks */
	uint64_t per_layer;     /* elements in one block (the largest where
				 * blocks differ) */
	uint64_t embed;         /* elements of GM_PT_EMBED tensors */
	uint64_t head;          /* elements of GM_PT_HEAD tensors, not tied */
	uint64_t total;         /* what sum(p.numel()) prints, tied once */
	bool from_shape;        /* false: custom, total from `parameters` */
};

/*
 * Build the layout of spec model m. Custom models (no layout) get one
 * pseudo-tensor of `parameters` elements treated as a matmul weight that
 * tensor parallelism splits, spread evenly over `layers` when given.
 * Returns 0 or GM_EINVAL.
 */
int gm_params_layout(const struct gm_spec_model *m,
		     struct gm_param_layout *out, struct gm_diag *diag);

/* Append a tensor group (a family's layout op): rows x cols elements,
 * GM_PT_* flags; name is a static string. */
void gm_params_add(struct gm_param_layout *l, const char *name,
		   uint64_t rows, uint64_t cols, unsigned flags);

/* A 3-D tensor group of groups x rows x cols elements (stored as
 * groups * rows rows). */
void gm_params_add3(struct gm_param_layout *l, const char *name,
		    uint64_t groups, uint64_t rows, uint64_t cols,
		    unsigned flags);

/* Restrict the last tensor group added to blocks lo..hi-1 (clipped to
 * the model's blocks; it may end up in none). */
void gm_params_blocks(struct gm_param_layout *l, uint64_t lo, uint64_t hi);

/* How many blocks hold tensor group pt (GM_PT_LAYER), of blocks
 * first..first+n-1. */
uint64_t gm_ptensor_blocks(const struct gm_ptensor *pt, uint64_t first,
			   uint64_t n);

/* The causal models' head: lm_head (tied where the spec says), or score
 * for head: classification. */
void gm_params_lm_head(const struct gm_spec_model *m,
		       struct gm_param_layout *l);

/* Elements of tensor group pt across the whole model (x the blocks that
 * hold it if LAYER). */
uint64_t gm_ptensor_elems(const struct gm_param_layout *l,
			  const struct gm_ptensor *pt);

/*
 * Relative difference |given - counted| / counted of a `parameters:`
 * cross-check (0 when not given or custom). The planner warns above
 * GM_PARAMS_TOLERANCE: published counts are rounded ("7B"), so only a
 * gross mismatch, i.e. a wrong shape, is worth a message.
 */
#define GM_PARAMS_TOLERANCE 0.01
double gm_params_mismatch(const struct gm_spec_model *m,
			  const struct gm_param_layout *l);

#endif
