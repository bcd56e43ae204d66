/*
 * model_megatron.h - one pipeline stage of a Megatron-LM training run
 * (training.framework: megatron): its model states, the tensors its
 * layers keep for backward as Megatron-Core computes them, and its
 * allocation sequence (step_megatron.h). model.c calls it for a
 * megatron spec instead of its Hugging Face path and then reads the
 * peak, the terms at the peak and the reserve off the sequence, as for
 * every other recipe.
 *
 * Units: bytes per rank of the stage (the most loaded tensor- and
 * data-parallel rank: they are alike). Errors: none (the spec rules
 * refuse what is not modelled, spec_rules.c).
 */
#ifndef GM_MODEL_MEGATRON_H
#define GM_MODEL_MEGATRON_H

#include <stdint.h>

#include "model.h"
#include "params.h"
#include "spec.h"
#include "step_megatron.h"

struct gm_mg_in {
	const struct gm_spec *spec;
	const struct gm_param_layout *pl;
	double t, d;          /* tensor-, data-parallel degrees */
	unsigned p, r;        /* pipeline stages, this stage */
	uint64_t layers;      /* transformer layers on the stage */
	uint64_t m;           /* micro-batches per step (accumulation) */
	double workspace;     /* one cuBLAS workspace (model.c) */
	int sm_major;         /* the GPU's compute capability major */
};

/*
 * Megatron's vocabulary padding (megatron/training/tokenizer/
 * tokenizer.py _vocab_size_with_padding): the smallest multiple of
 * make_vocab_size_divisible_by (128) x tensor_parallel at or above v.
 */
uint64_t gm_mg_padded_vocab(uint64_t v, uint64_t t);

/* The saved tensors of one layer for one micro-batch (bytes each, into
 * act[], at most GM_MG_ACT; returns how many) and the layer's forward
 * and backward transients, as in.spec's run computes them. */
int gm_mg_layer_saved(const struct gm_mg_in *in, double *act,
		      double *fwd_trans, double *bwd_trans,
		      double *recompute);

/* Fill mg with the stage's sequence and T with its model-state terms
 * (weights, gradients, optimizer states), parameters, layers and
 * micro-batches in flight (model chunks). */
void gm_mg_stage(const struct gm_mg_in *in, struct gm_mg_step *mg,
		 struct gm_terms *T);

#endif
