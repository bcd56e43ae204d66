/*
 * megatron_moe.c - Megatron-Core's MoE layer (megatron_moe.h), from
 * NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/:
 * moe_layer.py MoELayer.forward (route, dispatch, experts, combine),
 * router.py TopKRouter, token_dispatcher.py MoEAlltoAllTokenDispatcher,
 * moe_utils.py permute / unpermute / RouterGatingLinearFunction,
 * experts.py TEGroupedMLP. The capacity factor is unset by default
 * (transformer_config.py moe_expert_capacity_factor None): dropless,
 * every routed token reaches its expert, so with a balanced router a
 * rank's experts receive tokens x top-k rows.
 */
#include "megatron_moe.h"

#include "params_hf.h"

#include <stdio.h>
#include <string.h>

/* A block's MLP tensor in a family's layout. */
static bool mlp_tensor(const struct gm_ptensor *pt)
{
	return (pt->flags & GM_PT_LAYER) && strstr(pt->name, ".mlp.");
}

bool gm_mg_moe_planned(const struct gm_spec *spec)
{
	return spec->task == GM_TASK_TRAIN &&
	       spec->training.framework == GM_FW_MEGATRON &&
	       spec->model.experts > 0;
}

void gm_mg_moe_layout(const struct gm_spec *spec, struct gm_param_layout *l)
{
	const struct gm_spec_model *m = &spec->model;
	uint64_t E = m->experts, F = m->moe_ffn_hidden_size, h = m->hidden_size;
	bool gpt2 = m->architecture == GM_ARCH_GPT2;
	uint64_t gF = (gpt2 ? 1 : 2) * F;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL;
	int k = 0;

	if (!gm_mg_moe_planned(spec))
		return;
	for (int i = 0; i < l->n; i++)
		if (!mlp_tensor(&l->t[i]))
			l->t[k++] = l->t[i];
	l->n = k;
	/* TopKRouter.weight: (experts, hidden), the same on every rank */
	gm_params_add(l, "decoder.layers.*.mlp.router.weight", E, h, lin);
	/* TEGroupedMLP: linear_fc1 (gated: gate and up, 2 x ffn) and
	 * linear_fc2 per expert, whole with expert tensor parallel 1 */
	gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc1.weight", E,
		       gF, h, lin);
	gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc2.weight", E,
		       h, F, lin);
	if (gpt2) {
		gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc1.bias",
			       E, gF, 1, GM_PT_LAYER);
		gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc2.bias",
			       E, h, 1, GM_PT_LAYER);
	}
	l->total = l->per_layer = 0;
	for (int i = 0; i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];

		if (pt->flags & GM_PT_TIED)
			continue;
		l->total += gm_ptensor_elems(l, pt);
		if (pt->flags & GM_PT_LAYER)
			l->per_layer += pt->rows * pt->cols;
	}
}

void gm_mg_moe_tensors(const struct gm_param_layout *l,
		       struct gm_hf_tensor *out, int *n)
{
	*n = 0;
	for (int i = 0; i < l->n && *n < GM_HF_TENSORS_MAX; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		struct gm_hf_tensor *t = &out[*n];

		if (pt->flags & GM_PT_TIED)
			continue;
		memset(t, 0, sizeof(*t));
		snprintf(t->name, sizeof(t->name), "%s", pt->name);
		if (pt->groups) {
			t->shape[0] = pt->groups;
			t->shape[1] = pt->rows / pt->groups;
			t->shape[2] = pt->cols;
			t->dims = 3;
		} else {
			t->shape[0] = pt->rows;
			t->shape[1] = pt->cols;
			t->dims = pt->cols > 1 ? 2 : 1;
		}
		t->count = pt->flags & GM_PT_LAYER ?
			   gm_ptensor_blocks(pt, 0, l->layers) : 1;
		(*n)++;
	}
}

bool gm_mg_moe_expert(const struct gm_ptensor *pt)
{
	return pt->groups > 0 && strstr(pt->name, ".mlp.experts.");
}

/* Rows the rank's experts compute, balanced: every rank of the
 * expert-parallel group routes tok x top-k rows, spread evenly over the
 * experts, of which this rank holds experts / ep. */
static double rows(const struct gm_mg_moe_in *in)
{
	return in->tok * (double)in->spec->model.experts_per_token;
}

/* What one routed row keeps in the experts (fc1's input, fc1's output,
 * GeLU's output where unfused, fc2's input, its fp32 probability). */
static double row_bytes(const struct gm_mg_moe_in *in)
{
	const struct gm_spec_model *m = &in->spec->model;
	double h = (double)m->hidden_size, F = (double)m->moe_ffn_hidden_size;

	return in->c * (h + (in->gated ? 2 : 1) * F + (in->gated ? 0 : F) + F) +
	       4;
}

int gm_mg_moe_saved(const struct gm_mg_moe_in *in, double *act, int n,
		    int max, double *fwd, double *bwd)
{
	const struct gm_spec_model *m = &in->spec->model;
	double T = in->tok, c = in->c, N = rows(in);
	double h = (double)m->hidden_size, F = (double)m->moe_ffn_hidden_size;
	double E = (double)m->experts, k = (double)m->experts_per_token;
	double gF = (in->gated ? 2 : 1) * F;
	double add[12];
	int a = 0;

	/* pre_mlp_layernorm (TENorm: the MoE layer is not a fused
	 * LayerNormLinear): its input and per-token statistics */
	add[a++] = T * h * c;
	add[a++] = T * (in->layernorm ? 8.0 : 4.0);
	/* the router's gating (RouterGatingLinearFunction saves its
	 * input, the norm's output); its logits in the input's dtype
	 * (moe_router_dtype unset), the top-k softmax's fp32 scores and the
	 * load-balancing loss's fp32 scores over every expert, the routing
	 * map (bool) the dispatcher keeps until combine */
	add[a++] = T * h * c;
	add[a++] = T * E * (c + 4 + 4 + 1);
	/* permute (moe_utils.py, unfused): the sorted token indices
	 * (int64) for unpermute; the permuted probabilities (fp32) that
	 * the experts' weighted activation saves */
	add[a++] = T * k * 8;
	add[a++] = N * 4;
	/* TEGroupedMLP over the rows the all-to-all delivered (sorted by
	 * local expert: sort_chunks_by_idxs): linear_fc1's input, its
	 * output (the activation's input), for GeLU the activation's
	 * output that the product with the probabilities saves (SwiGLU:
	 * weighted_bias_swiglu_impl saves only its input), linear_fc2's
	 * input */
	add[a++] = N * h * c;
	add[a++] = N * gF * c;
	if (!in->gated)
		add[a++] = N * F * c;
	add[a++] = N * F * c;
	for (int i = 0; i < a && n < max; i++)
		act[n++] = add[i];
	/* forward: the all-to-all's send buffer (the permuted tokens,
	 * tok x top-k rows) and receive buffer at once, and again at
	 * combine (fc2's output unsorted, sent back); unfused GeLU's fp32
	 * product with the probabilities */
	*fwd = T * k * h * c + N * h * c;
	if (2 * N * h * c > *fwd)
		*fwd = 2 * N * h * c;
	if (!in->gated && N * F * 4 > *fwd)
		*fwd = N * F * 4;
	/* backward: the gradients of fc2's input and fc1's output and the
	 * incoming rows' at once, with the combine all-to-all's receive
	 * buffer */
	*bwd = N * c * (F + gF + h) + T * k * h * c;
	return n;
}

double gm_mg_moe_skew(const struct gm_mg_moe_in *in)
{
	const struct gm_spec_model *m = &in->spec->model;
	double ep = (double)in->spec->parallelism.expert_parallel;
	double k = (double)m->experts_per_token;
	double local = (double)m->experts / (ep > 1 ? ep : 1);
	double worst = in->tok * (ep > 1 ? ep : 1) * (k < local ? k : local);
	double extra = worst - rows(in);

	return extra > 0 ? extra * row_bytes(in) : 0;
}
