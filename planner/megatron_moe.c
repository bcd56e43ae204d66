/*
 * megatron_moe.c - Megatron-Core's MoE layer (megatron_moe.h), from
 * NVIDIA/Megatron-LM d98e8a6, megatron/core/transformer/moe/:
 * moe_layer.py MoELayer.forward (route, dispatch, experts, combine),
 * router.py TopKRouter, token_dispatcher.py MoEAllGatherTokenDispatcher
 * (the default: transformer_config.py moe_token_dispatcher_type
 * "allgather") and MoEAlltoAllTokenDispatcher, moe_utils.py permute /
 * unpermute / RouterGatingLinearFunction, experts.py TEGroupedMLP. The
 * capacity factor is unset by default (transformer_config.py
 * moe_expert_capacity_factor None): dropless, every routed token
 * reaches its expert, so with a balanced router a rank's experts
 * receive tokens x top-k rows whichever dispatcher moves them.
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

/* A linear layer's bias in the gpt2 layout (GPT2Attention c_attn and
 * c_proj, GPT2MLP c_fc and c_proj: Conv1D), not a LayerNorm's. */
static bool linear_bias(const struct gm_ptensor *pt)
{
	static const char *const lin[] = {
		".attn.c_attn.bias", ".attn.c_proj.bias", ".mlp.c_fc.bias",
		".mlp.c_proj.bias"};

	for (size_t i = 0; i < sizeof(lin) / sizeof(lin[0]); i++)
		if (strstr(pt->name, lin[i]))
			return true;
	return false;
}

/* --disable-bias-linear (transformer_config.py add_bias_linear False):
 * Megatron's GPT layer without its linear biases. */
static bool no_bias(const struct gm_spec *spec)
{
	return spec->model.architecture == GM_ARCH_GPT2 &&
	       !spec->model.add_bias_linear && spec->task == GM_TASK_TRAIN &&
	       spec->training.framework == GM_FW_MEGATRON;
}

bool gm_mg_layout_differs(const struct gm_spec *spec)
{
	return gm_mg_moe_planned(spec) || no_bias(spec);
}

void gm_mg_moe_layout(const struct gm_spec *spec, struct gm_param_layout *l)
{
	const struct gm_spec_model *m = &spec->model;
	uint64_t E = m->experts, F = m->moe_ffn_hidden_size, h = m->hidden_size;
	bool gpt2 = m->architecture == GM_ARCH_GPT2;
	bool moe = gm_mg_moe_planned(spec), nobias = no_bias(spec);
	uint64_t gF = (gpt2 ? 1 : 2) * F;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL;
	int k = 0;

	if (!moe && !nobias)
		return;
	for (int i = 0; i < l->n; i++)
		if (!(moe && mlp_tensor(&l->t[i])) &&
		    !(nobias && linear_bias(&l->t[i])))
			l->t[k++] = l->t[i];
	l->n = k;
	if (!moe)
		goto recount;
	/* TopKRouter.weight: (experts, hidden), the same on every rank */
	gm_params_add(l, "decoder.layers.*.mlp.router.weight", E, h, lin);
	/* TEGroupedMLP: linear_fc1 (gated: gate and up, 2 x ffn) and
	 * linear_fc2 per expert, whole with expert tensor parallel 1 */
	gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc1.weight", E,
		       gF, h, lin);
	gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc2.weight", E,
		       h, F, lin);
	if (gpt2 && !nobias) {
		gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc1.bias",
			       E, gF, 1, GM_PT_LAYER);
		gm_params_add3(l, "decoder.layers.*.mlp.experts.linear_fc2.bias",
			       E, h, 1, GM_PT_LAYER);
	}
recount:
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

/* The expert tensor-parallel degree (spec.h). */
static double etp(const struct gm_mg_moe_in *in)
{
	return (double)gm_spec_expert_tensor_parallel(in->spec);
}

static double ep_of(const struct gm_mg_moe_in *in)
{
	uint64_t ep = in->spec->parallelism.expert_parallel;

	return (double)(ep > 1 ? ep : 1);
}

/* Rows the rank's experts compute, balanced: every rank of the expert
 * tensor x expert-parallel group routes tok x top-k rows, spread evenly
 * over the experts, of which this rank holds experts / ep, and every
 * rank of an expert tensor-parallel group computes all of its experts'
 * rows (on its share of their width): tok x top-k x etp. The alltoall
 * dispatcher all-gathers its all-to-all's rows over the expert tensor
 * group (dispatch_postprocess), allgather gathers over both. */
static double rows(const struct gm_mg_moe_in *in)
{
	return in->tok * (double)in->spec->model.experts_per_token * etp(in);
}

/* What one routed row keeps in the experts (fc1's input, fc1's output,
 * GeLU's output where unfused, fc2's input: the ffn width on this
 * rank's share, ffn / etp; its fp32 probability). */
static double row_bytes(const struct gm_mg_moe_in *in)
{
	const struct gm_spec_model *m = &in->spec->model;
	double h = (double)m->hidden_size;
	double F = (double)m->moe_ffn_hidden_size / etp(in);

	return in->c * (h + (in->gated ? 2 : 1) * F + (in->gated ? 0 : F) + F) +
	       4;
}

/* Whether the allgather dispatcher gathers: its group is expert tensor
 * x expert parallel (token_dispatcher.py token_dispatch: tp_ep_group),
 * and it skips the collectives when both are 1. */
static bool gathers(const struct gm_mg_moe_in *in)
{
	return in->spec->parallelism.moe_token_dispatcher_type ==
	       GM_MOE_DISPATCH_ALLGATHER && etp(in) * ep_of(in) > 1;
}

/* Rows the allgather dispatcher works on: every token of the expert
 * tensor x expert-parallel group (the rank's tok x etp x ep), the
 * rank's own without either. */
static double gathered(const struct gm_mg_moe_in *in)
{
	return in->tok * etp(in) * ep_of(in);
}

double gm_mg_moe_buffer(const struct gm_mg_moe_in *in)
{
	const struct gm_spec_model *m = &in->spec->model;

	/* token_dispatch gathers the hidden states with
	 * use_global_buffer=True (tensor_parallel/mappings.py
	 * _gather_along_first_dim: utils.py GlobalMemoryBuffer.get_tensor,
	 * "mpu", kept and reused by every layer and step; the backward's
	 * reduce-scatter writes into it too) */
	if (!gathers(in))
		return 0;
	return gathered(in) * (double)m->hidden_size * in->c;
}

/* The allgather dispatcher's own tensors (token_dispatcher.py
 * MoEAllGatherTokenDispatcher) beyond what both dispatchers keep: the
 * map of gathered rows to local experts that
 * dispatch_postprocess keeps for combine (local_map, bool) and the
 * masked_select that picks the local probabilities, which saves its
 * mask (the map transposed, a copy) and its input (the gathered
 * probabilities of the local experts). Returns the new count. */
static int ag_saved(const struct gm_mg_moe_in *in, double *add, int a)
{
	const struct gm_spec_model *m = &in->spec->model;
	double G = gathered(in), pb = in->c;
	double El = (double)m->experts / ep_of(in);

	add[a++] = G * El * (1 + 1 + pb);
	return a;
}

/* The allgather dispatcher's forward and backward transients, bytes.
 * The probabilities are in the router logits' dtype, the activations'
 * (moe_utils.py topk_routing_with_score_function: probs.type_as(logits);
 * moe_router_dtype unset), so token_combine's cast to them is a no-op.
 * Forward: combine_preprocess (unpermute, unfused) adds the experts'
 * output rows into zeros of the gathered shape while the experts'
 * output lives; token_combine reduce-scatters that back to the rank's
 * tokens. Backward: the reduce-scatter's backward all-gathers the
 * gradient (gathered rows) and unpermute's backward picks the rank's
 * rows from it; permute's backward adds fc1's input gradient into zeros
 * of the gathered shape, which the gather's backward reduce-scatters
 * into the global buffer. */
static void ag_transients(const struct gm_mg_moe_in *in, double *fwd,
			  double *bwd)
{
	const struct gm_spec_model *m = &in->spec->model;
	double G = gathered(in), N = rows(in), T = in->tok;
	double h = (double)m->hidden_size, c = in->c;

	*fwd = (G + N) * h * c;
	if ((G + T) * h * c > *fwd)
		*fwd = (G + T) * h * c;
	*bwd = (G + N) * h * c;
	if ((G + T) * h * c > *bwd)
		*bwd = (G + T) * h * c;
}

int gm_mg_moe_saved(const struct gm_mg_moe_in *in, double *act, int n,
		    int max, double *fwd, double *bwd)
{
	const struct gm_spec_model *m = &in->spec->model;
	double T = in->tok, c = in->c, N = rows(in);
	double h = (double)m->hidden_size;
	double F = (double)m->moe_ffn_hidden_size / etp(in); /* this rank's */
	double E = (double)m->experts, k = (double)m->experts_per_token;
	double gF = (in->gated ? 2 : 1) * F;
	bool ag = in->spec->parallelism.moe_token_dispatcher_type ==
		  GM_MOE_DISPATCH_ALLGATHER;
	double add[12], ft, bt;
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
	 * (int64) for unpermute, of the rows it permutes (alltoall: the
	 * rank's tok x top-k before the all-to-all; allgather: the
	 * gathered rows of the local experts); the permuted probabilities
	 * (fp32) that the experts' weighted activation saves */
	add[a++] = (ag ? N : T * k) * 8;
	add[a++] = N * 4;
	/* TEGroupedMLP over the rows the dispatcher delivered (sorted by
	 * local expert): linear_fc1's input, its output (the activation's
	 * input), for GeLU the activation's output that the product with
	 * the probabilities saves (SwiGLU: weighted_bias_swiglu_impl
	 * saves only its input), linear_fc2's input; fc1 column-parallel
	 * and fc2 row-parallel over expert tensor parallel
	 * (TEColumnParallelGroupedLinear, TERowParallelGroupedLinear):
	 * the ffn width is this rank's share */
	add[a++] = N * h * c;
	add[a++] = N * gF * c;
	if (!in->gated)
		add[a++] = N * F * c;
	add[a++] = N * F * c;
	if (ag)
		a = ag_saved(in, add, a);
	for (int i = 0; i < a && n < max; i++)
		act[n++] = add[i];
	/* unfused GeLU's fp32 product with the probabilities */
	ft = !in->gated ? N * F * 4 : 0;
	/* backward: the gradients of fc2's input and fc1's output and the
	 * incoming rows' at once */
	bt = N * c * (F + gF + h);
	if (ag) {
		double f2, b2;

		ag_transients(in, &f2, &b2);
		*fwd = f2 > ft ? f2 : ft;
		*bwd = b2 > bt ? b2 : bt;
		return n;
	}
	/* alltoall: the all-to-all's send buffer (the permuted tokens,
	 * tok x top-k rows) and receive buffer at once, and again at
	 * combine (fc2's output unsorted, sent back); with expert tensor
	 * parallel the received rows and their all-gather over the expert
	 * tensor group (N rows), then the gathered and the chunk-sorted
	 * ones, and at combine fc2's partial sums (N rows of hidden) and
	 * their unsorted copy before the reduce-scatter; in backward the
	 * combine all-to-all's receive buffer beside the experts'
	 * gradients */
	*fwd = T * k * h * c + N * h * c;
	if (2 * N * h * c > *fwd)
		*fwd = 2 * N * h * c;
	if (ft > *fwd)
		*fwd = ft;
	*bwd = bt + T * k * h * c;
	return n;
}

double gm_mg_moe_skew(const struct gm_mg_moe_in *in)
{
	const struct gm_spec_model *m = &in->spec->model;
	double k = (double)m->experts_per_token;
	double local = (double)m->experts / ep_of(in);
	/* every token of the expert tensor x expert-parallel group */
	double worst = gathered(in) * (k < local ? k : local);
	double extra = worst - rows(in);

	return extra > 0 ? extra * row_bytes(in) : 0;
}
