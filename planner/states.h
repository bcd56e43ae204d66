/*
 * states.h - model states: weights, gradients, optimizer states (with
 * master weights) in bytes per parameter, and their ZeRO sharding
 * (states.c).
 *
 * A recipe says which framework's conventions hold, since they differ for
 * the same precision name:
 *  - GM_RECIPE_TORCH: PyTorch AMP / Lightning precision names:
 *    *-mixed keeps fp32 weights, fp32 gradients and fp32 optimizer
 *    states and computes under autocast; *-true keeps everything in the
 *    16-bit dtype. There is no separate master copy.
 *  - GM_RECIPE_DEEPSPEED: the ZeRO paper's mixed-precision Adam: 16-bit
 *    weights and gradients, fp32 master weights inside the optimizer
 *    (K = 12 bytes with Adam; Rajbhandari et al. 2020, section 3.1).
 *  - GM_RECIPE_MEGATRON: Megatron-LM's table (README "Distributed
 *    optimizer"): bf16 weights with fp32 main gradients (18 B/param
 *    with Adam), fp16 weights and gradients plus fp32 main
 *    gradients in the optimizer (20), fp32 (16).
 * All figures are bytes per parameter; no errors.
 */
#ifndef GM_STATES_H
#define GM_STATES_H

#include "spec.h"

enum gm_recipe { GM_RECIPE_TORCH, GM_RECIPE_DEEPSPEED, GM_RECIPE_MEGATRON };

struct gm_state_bytes {
	double weights;     /* the model's own parameters */
	double gradients;   /* .grad (or Megatron main_grad) */
	double optimizer;   /* optimizer states incl. master weights */
	double master;      /* the master-weight part of optimizer */
	double compute;     /* bytes of one activation element: 2 or 4 */
	double residual;    /* bytes of the residual stream: 4 under
			     * autocast (fp32 embeddings/adds), else compute */
	bool autocast;      /* torch.autocast casts matmul weights */
};

/* Bytes per parameter of each state for a recipe/precision/optimizer. */
struct gm_state_bytes gm_state_bytes(enum gm_recipe r, enum gm_precision p,
				     enum gm_optimizer o);

/*
 * Bytes per parameter on one data-parallel rank after ZeRO (Rajbhandari
 * et al. 2020, Figure 1): stage 1 shards optimizer states, 2 also
 * gradients, 3 also weights, each by the data-parallel degree d.
 */
struct gm_state_bytes gm_state_shard(struct gm_state_bytes b, unsigned zero,
				     unsigned long d);

/* Whether an optimizer keeps full-size per-element states (not factored). */
double gm_optimizer_elem_states(enum gm_optimizer o);

#endif
