/*
 * custom.c - a model given by its parameter count (family.h): no layout
 * of its own, one pseudo-tensor of `parameters` elements. Where a shape
 * is given too, its blocks run as a decoder without biases: Llama's
 * programs (llama.c), with LayerNorm's saved tensors and a two-matrix
 * MLP in the analytic list.
 */
#include "arch/family.h"
#include "arch/llama.h"

#include <math.h>

#include "activations.h"
#include "error.h"
#include "loss.h"
#include "params.h"

/* One matmul-like tensor that tensor parallelism splits, spread evenly
 * over `layers` when given. */
static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	if (!(m->parameters >= 1))
		return gm_diag_set(diag, GM_EINVAL,
				   "model.parameters: a custom model "
				   "needs its parameter count");
	l->layers = m->layers ? m->layers : 1;
	gm_params_add(l, "parameters", (uint64_t)llround(m->parameters) /
		      l->layers, 1, GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP);
	return 0;
}

static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute;

	gm_act_norm(l, st, false, 3, "q/k/v input");
	gm_act_attention(l, st, false);
	gm_act_norm(l, st, false, 2, "gate/up input");
	gm_act_add(l, "gate output (SiLU input)", C, 0)->f = 1;
	gm_act_add(l, "SiLU output, up output", C, 0)->f = 2;
	gm_act_add(l, "down_proj input", C, 0)->f = 1;
}

const struct gm_family gm_family_custom = {
	.name = "custom",
	.shaped = false,
	.defaults = {.head = GM_HEAD_CAUSAL_LM},
	.keys = GM_FK_ACT_PER_TOKEN | GM_FK_MASKED_LM,
	.layout = layout,
	.saved = saved,
	.mlp_grads = 2,
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs = GM_PROBS_TO_QUERY},
	.block = gm_llama_block,
	.adapter = true,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_layer = gm_llama_infer_layer,
	.infer_head = gm_llama_infer_head,
};
