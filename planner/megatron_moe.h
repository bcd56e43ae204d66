/*
 * megatron_moe.h - Megatron-Core's mixture-of-experts layer on one rank
 * (training.framework megatron with model.experts; megatron_moe.c):
 * its parameter tensors, which of them the experts' ranks split
 * (parallelism.expert_parallel), and what one micro-batch through it
 * keeps for backward with its token dispatcher (parallelism.
 * moe_token_dispatcher_type: allgather, Megatron's default, or alltoall)
 * and balanced routing.
 *
 * Expert tensor parallelism is 1 (--expert-tensor-parallel-size 1): an
 * expert's weights are whole on the rank that holds it; tensor
 * parallelism splits the attention only. Megatron-LM defaults it to
 * the tensor-parallel size; the plan is for runs that set it to 1.
 *
 * Units: bytes, elements where a name says so. Errors: none.
 */
#ifndef GM_MEGATRON_MOE_H
#define GM_MEGATRON_MOE_H

#include <stdbool.h>

#include "params.h"
#include "spec.h"

/* Whether spec is planned with Megatron-Core's MoE layer: training
 * under framework megatron with model.experts. */
bool gm_mg_moe_planned(const struct gm_spec *spec);

/*
 * Replace the MLP tensors of l (the family's layout: every block tensor
 * named "*.mlp.*") by Megatron-Core's MoE layer (megatron/core/
 * transformer/moe/: router.py TopKRouter.weight, experts x hidden,
 * replicated; experts.py TEGroupedMLP linear_fc1 / linear_fc2, one
 * weight per expert, and their biases on the gpt2 layer, which has
 * --add-bias-linear by default) and recount l's totals. A spec that
 * gm_mg_moe_planned() does not take is left as it is.
 */
void gm_mg_moe_layout(const struct gm_spec *spec, struct gm_param_layout *l);

/*
 * The tensor groups of a layout rewritten by gm_mg_moe_layout() as
 * `gpumem plan --params` lists them (the layout's names; experts as
 * experts x rows x cols; count: the blocks that hold a group), tied
 * groups left out, into out[0..*n) (at most GM_HF_TENSORS_MAX).
 */
struct gm_hf_tensor;
void gm_mg_moe_tensors(const struct gm_param_layout *l,
		       struct gm_hf_tensor *out, int *n);

/* Whether pt is one of the routed experts' tensors (groups = experts):
 * expert-parallel, in DDP's separate expert buffers. */
bool gm_mg_moe_expert(const struct gm_ptensor *pt);

/* One MoE layer on one rank for one micro-batch. */
struct gm_mg_moe_in {
	const struct gm_spec *spec;
	double tok;       /* tokens of the rank before dispatch: the
			   * micro-batch / tensor parallel (sequence
			   * parallel) */
	double c;         /* activation bytes per element */
	bool layernorm;   /* LayerNorm (else RMSNorm) before the router */
	bool gated;       /* SwiGLU experts (else GeLU) */
};

/*
 * Append to act[n..] what the MoE MLP keeps for its backward (at most
 * max entries in all) and return the new count; *fwd and *bwd: its
 * largest forward and backward transients (the all-to-all's send and
 * receive buffers, or the allgather dispatcher's gathered-shape
 * unpermute and its gradients, among them).
 */
int gm_mg_moe_saved(const struct gm_mg_moe_in *in, double *act, int n,
		    int max, double *fwd, double *bwd);

/*
 * The allgather dispatcher's persistent buffer of the hidden states
 * gathered over the expert-parallel group (tok x ep rows x hidden x c),
 * allocated with the first MoE forward and reused by every layer and
 * step; 0 for alltoall or without expert parallelism.
 */
double gm_mg_moe_buffer(const struct gm_mg_moe_in *in);

/*
 * What one MoE layer of one micro-batch keeps beyond the balanced plan
 * when the router sends to this rank's experts every token of the
 * expert-parallel group that top-k lets it (each token at most
 * min(top-k, local experts) times).
 */
double gm_mg_moe_skew(const struct gm_mg_moe_in *in);

#endif
