/*
 * megatron_moe.h - Megatron-Core's mixture-of-experts layer on one rank
 * (training.framework megatron with model.experts; megatron_moe.c):
 * its parameter tensors, which of them the experts' ranks split
 * (parallelism.expert_parallel), and what one micro-batch through it
 * keeps for backward with its token dispatcher (parallelism.
 * moe_token_dispatcher_type: allgather, Megatron's default, or alltoall)
 * and balanced routing.
 *
 * Expert tensor parallelism (parallelism.expert_tensor_parallel, etp:
 * --expert-tensor-parallel-size, default the tensor-parallel size;
 * gm_spec_expert_tensor_parallel) splits each expert's ffn width over
 * etp ranks, which then compute every row routed to their experts from
 * the etp x ep ranks of the expert tensor x expert-parallel group.
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
 * --add-bias-linear by default) and recount l's totals. Under
 * framework megatron the gpt2 layer with model.add_bias_linear false
 * (--disable-bias-linear) loses its linear biases, experts or not. Any
 * other spec is left as it is.
 */
void gm_mg_moe_layout(const struct gm_spec *spec, struct gm_param_layout *l);

/* Whether gm_mg_moe_layout() changes spec's layout (a MoE layer, or the
 * gpt2 layer without linear biases). */
bool gm_mg_layout_differs(const struct gm_spec *spec);

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
 * gathered over the expert tensor x expert-parallel group (tok x etp x
 * ep rows x hidden x c), allocated with the first MoE forward and
 * reused by every layer and step; 0 for alltoall or where etp x ep is 1.
 */
double gm_mg_moe_buffer(const struct gm_mg_moe_in *in);

/*
 * What one MoE layer of one micro-batch keeps beyond the balanced plan
 * when the router sends to this rank's experts every token of the
 * expert tensor x expert-parallel group that top-k lets it (each token
 * at most min(top-k, local experts) times).
 */
double gm_mg_moe_skew(const struct gm_mg_moe_in *in);

#endif
