/*
 * custom_layers.c - see custom_layers.h.
 */
#include "custom_layers.h"

#include "arch/family.h"
#include "error.h"
#include "log.h"

bool gm_model_has_shape(const struct gm_spec *spec)
{
	return gm_family(spec->model.architecture)->shaped ||
	       spec->model.hidden_size > 0;
}

bool gm_custom_layers_default(const struct gm_spec *spec)
{
	return spec->task == GM_TASK_TRAIN && !gm_model_has_shape(spec) &&
	       spec->model.layers == 0 &&
	       spec->parallelism.zero_stage == 3;
}

void gm_custom_layers_warn(const struct gm_spec *spec)
{
	char where[1200];

	if (!gm_custom_layers_default(spec))
		return;
	gm_warn("%s: model.layers: not given for a custom model, so the planner "
		"takes it as 1 layer of all %.4g parameters; zero_stage 3 "
		"gathers a layer at a time, so here the whole model is "
		"gathered at once: set model.layers to the model's number of "
		"blocks", gm_spec_where(spec, "model.architecture", where,
					sizeof(where)),
		spec->model.parameters);
}
