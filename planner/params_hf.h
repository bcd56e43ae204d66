/*
 * params_hf.h - the planner's parameter layout (params.h) as the tensors
 * transformers' named_parameters() lists (params_hf.c), for
 * `gpumem plan --params` and the check against transformers
 * (tools/measure/check_tensors.py).
 *
 * A layer's tensors are one entry with "*" for the layer index and
 * count = the number of layers; tied tensors are left out, as
 * named_parameters() leaves out a parameter it has already given.
 *
 * Errors: 0, or GM_EINVAL (diag: a layout with no Hugging Face names,
 * e.g. a custom model), GM_ENOMEM.
 */
#ifndef GM_PARAMS_HF_H
#define GM_PARAMS_HF_H

#include <stdint.h>

#include "params.h"

struct gm_diag;

struct gm_hf_tensor {
	char name[128];          /* "model.layers.*.self_attn.q_proj.weight" */
	uint64_t shape[3];       /* torch's shape, dims entries */
	int dims;
	uint64_t count;          /* tensors of this name and shape */
};

#define GM_HF_TENSORS_MAX (2 * GM_PARAMS_MAX)

/*
 * The tensors of layout l of model m into out[0..*n). Returns 0 or
 * GM_EINVAL.
 */
int gm_params_hf(const struct gm_spec_model *m,
		 const struct gm_param_layout *l, struct gm_hf_tensor *out,
		 int *n, struct gm_diag *diag);

#endif
