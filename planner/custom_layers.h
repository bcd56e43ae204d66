/*
 * custom_layers.h - the warning for a custom model planned as one layer
 * where the recipe's unit of gathering is a layer.
 */
#ifndef GM_CUSTOM_LAYERS_H
#define GM_CUSTOM_LAYERS_H

#include <stdbool.h>

#include "spec.h"

/*
 * Whether spec is a custom model (model.architecture custom) without
 * model.layers, trained under a recipe that gathers one layer at a
 * time: zero_stage 3, which is FSDP2's fully_shard on each block
 * (recipe/pytorch.c) or DeepSpeed's stage 3 fetching each module's
 * parameters (recipe/deepspeed.c). The default of 1 layer (arch/custom.c)
 * makes the whole model one unit, gathered at once.
 */
bool gm_custom_layers_default(const struct gm_spec *spec);

/* gm_warn (stderr) when gm_custom_layers_default(spec): what the
 * default assumes and that model.layers sets it. */
void gm_custom_layers_warn(const struct gm_spec *spec);

/* Whether the spec's model has a shape tensor parallel can split: a
 * family with a layout, or a custom model with model.hidden_size. */
bool gm_model_has_shape(const struct gm_spec *spec);

#endif
