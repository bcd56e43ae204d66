/*
 * recipe.c - the recipe table: a framework's model-state function (see
 * recipe.h).
 */
#include "recipe.h"

#include "error.h"

static const struct {
	enum gm_framework fw;
	int (*states)(const struct gm_recipe_in *, struct gm_recipe_states *,
		      struct gm_diag *);
} recipes[] = {
	{GM_FW_PYTORCH, gm_recipe_pytorch},
	{GM_FW_DEEPSPEED, gm_recipe_deepspeed},
	{GM_FW_MEGATRON, gm_recipe_megatron},
};

int gm_recipe_states(enum gm_framework fw, const struct gm_recipe_in *in,
		     struct gm_recipe_states *out, struct gm_diag *diag)
{
	for (size_t i = 0; i < sizeof(recipes) / sizeof(recipes[0]); i++) {
		if (recipes[i].fw == fw)
			return recipes[i].states(in, out, diag);
	}
	return gm_diag_set(diag, GM_EINVAL, "no recipe for framework %d",
			   (int)fw);
}

double gm_recipe_gpu_bytes(const struct gm_recipe_states *s)
{
	return s->weights + s->gradients + s->optimizer + s->buffers +
	       s->gathered + s->step + s->cache;
}
