/*
 * step_adapter.c - PEFT LoRA in the training step (step_adapter.h).
 */
#include "step_adapter.h"

#include "error.h"
#include "recipe.h"

#include <string.h>

bool gm_adapter_targets(const struct gm_spec_training *t, const char *name)
{
	if (!t || t->adapter == GM_ADAPTER_NONE || !name)
		return false;
	for (unsigned i = 0; i < t->n_lora_targets; i++)
		if (!strcmp(t->lora_targets[i], "all-linear") ||
		    !strcmp(t->lora_targets[i], name))
			return true;
	return false;
}

void gm_adapter_base_bytes(const struct gm_spec_training *t,
			   struct gm_state_bytes *b)
{
	if (!t || t->adapter == GM_ADAPTER_NONE)
		return;
	/* QLoRA: prepare_model_for_kbit_training (peft utils/other.py)
	 * casts every 16-bit parameter that is not Params4bit to fp32 */
	b->weights = t->adapter == GM_ADAPTER_QLORA ? 4 : b->compute;
	b->gradients = 0;
	b->optimizer = 0;
	b->master = 0;
	b->residual = b->weights;
}

/* The module name of a layout tensor: its last component, a trailing
 * ".weight" dropped ("h.*.attn.c_attn.weight" -> "c_attn"), into buf. */
static void module_name(const char *path, char *buf, size_t n)
{
	size_t len = strlen(path);
	const char *end = path + len, *dot;

	if (len > 7 && !strcmp(end - 7, ".weight"))
		end -= 7;
	dot = end;
	while (dot > path && dot[-1] != '.')
		dot--;
	len = (size_t)(end - dot);
	if (len >= n)
		len = n - 1;
	memcpy(buf, dot, len);
	buf[len] = '\0';
}

double gm_adapter_layer_params(const struct gm_param_layout *l,
			       const struct gm_spec_training *t)
{
	double r = t ? (double)t->lora_rank : 0, n = 0;
	char name[64];

	if (!t || t->adapter == GM_ADAPTER_NONE)
		return 0;
	for (int i = 0; i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		if (!(pt->flags & GM_PT_LAYER) || !(pt->flags & GM_PT_MATMUL) ||
		    pt->groups)
			continue;
		module_name(pt->name, name, sizeof(name));
		if (gm_adapter_targets(t, name))
			n += r * ((double)pt->rows + (double)pt->cols);
	}
	return n;
}

struct gm_optstep_walk gm_adapter_for_loop_walk(
	const struct gm_param_layout *l, const struct gm_spec_training *t,
	uint64_t layers, double tb)
{
	struct gm_optstep_walk w = {0, 0, 0};
	double r = t ? (double)t->lora_rank : 0;
	char name[64];

	if (!t || t->adapter == GM_ADAPTER_NONE)
		return w;
	for (uint64_t b = 0; b < layers; b++)
		for (int i = 0; i < l->n; i++) {
			const struct gm_ptensor *pt = &l->t[i];
			if (!(pt->flags & GM_PT_LAYER) ||
			    !(pt->flags & GM_PT_MATMUL) || pt->groups)
				continue;
			module_name(pt->name, name, sizeof(name));
			if (!gm_adapter_targets(t, name))
				continue;
			gm_optstep_walk_add(&w, r * (double)pt->cols * tb);
			gm_optstep_walk_add(&w, r * (double)pt->rows * tb);
		}
	return w;
}

/* Append one adapter tensor of n elements. */
static int add(struct gm_step *st, double n, double opt, int k, double tmp,
	       double cache)
{
	struct gm_step_param *q;

	if (st->n_param >= GM_PARAMS_MAX)
		return GM_ERANGE;
	q = &st->p[st->n_param++];
	memset(q, 0, sizeof(*q));
	q->where = GM_STEP_LAYER;
	q->added = true;
	q->weight = 4 * n;
	q->grad = 4 * n;
	q->cache = cache * n;
	q->opt_tmp = tmp * n;
	q->n_state = opt > 0 ? k : 0;
	for (int j = 0; j < q->n_state; j++)
		q->state[j] = n * opt / k;
	return 0;
}

int gm_adapter_step_params(struct gm_step *st,
			   const struct gm_spec_training *t, double opt,
			   int n_states, double tmp, double cache)
{
	double r = (double)t->lora_rank;
	int rc = 0;

	if (n_states < 1)
		n_states = 1;
	if (n_states > GM_STEP_STATES)
		n_states = GM_STEP_STATES;
	for (int i = 0; i < st->n_param; i++) {
		struct gm_step_param *q = &st->p[i];
		/* QLoRA's fp32 lm_head (prepare_model_for_kbit_training)
		 * under autocast: F.linear casts its weight each forward
		 * (not cached: it does not require grad), and the matmul
		 * keeps the cast for the input's gradient until its
		 * backward (the H200 trace of
		 * qlora-llama-1.1b-r16-alllinear-fullckpt: 125 MiB) */
		bool cast = t->adapter == GM_ADAPTER_QLORA && cache > 0 &&
			    q->where == GM_STEP_HEAD && q->grad_at_loss;
		q->grad = 0;
		q->cache = cast ? q->cache : 0; /* a tied head: the whole table */
		q->bcache = 0; /* frozen: not cached by autocast */
		q->opt_tmp = 0;
		q->n_state = 0;
	}
	/* get_peft_model wraps each target module in turn, lora_A then
	 * lora_B (LoraLayer.update_layer) */
	for (int i = 0; i < st->blk.n_lora && !rc; i++) {
		rc = add(st, r * st->blk.lora[i].in, opt, n_states, tmp, cache);
		if (!rc)
			rc = add(st, r * st->blk.lora[i].out, opt, n_states,
				 tmp, cache);
	}
	return rc;
}

bool gm_adapter_quantized(const struct gm_spec_training *t,
			  const struct gm_ptensor *pt)
{
	return t && t->adapter == GM_ADAPTER_QLORA &&
	       (pt->flags & GM_PT_LAYER) && (pt->flags & GM_PT_MATMUL) &&
	       !pt->groups;
}

double gm_adapter_quantized_delta(const struct gm_param_layout *l,
				  const struct gm_spec_training *t,
				  double base_b)
{
	double d = 0;

	for (int i = 0; i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		double n = (double)pt->rows * (double)pt->cols;
		if (!gm_adapter_quantized(t, pt))
			continue;
		d += gm_nf4_bytes(pt->rows * pt->cols) - n * base_b;
	}
	return d;
}
