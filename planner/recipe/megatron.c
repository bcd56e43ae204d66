/*
 * megatron.c - the Megatron-LM recipe (Megatron-LM commit d98e8a6,
 * core_v0.15): Megatron-Core's DistributedDataParallel and optimizer.
 *
 *  - Parameters in the 16-bit dtype (--bf16 / --fp16), in one
 *    contiguous buffer per dtype (megatron/core/distributed/
 *    param_and_grad_buffer.py, _ParamAndGradBuffer).
 *  - Gradients accumulate into main_grad in that buffer's grad_data:
 *    fp32 for bf16 (megatron/training/arguments.py turns
 *    accumulate_allreduce_grads_in_fp32 on for bf16), the parameters'
 *    dtype for fp16.
 *  - The optimizer (megatron/core/optimizer/optimizer.py,
 *    Float16OptimizerWithFloat16Params) keeps fp32 master parameters,
 *    for fp16 also fp32 main gradients, and Adam's two fp32 states;
 *    with --use-distributed-optimizer (distrib_optimizer.py) all of it
 *    is sharded over data parallel. The totals are the table of
 *    docs/user-guide/features/dist_optimizer.md.
 *  - The model is built directly on the GPU in its dtype, then the
 *    buffers and master copies; Adam's states come with the first step.
 */
#include <stdio.h>

#include "error.h"
#include "recipe.h"
#include "states.h"

double gm_megatron_bytes_per_param(enum gm_precision p, bool dist_opt,
				   uint64_t d)
{
	double dd = d > 1 ? (double)d : 1;

	switch (p) {
	case GM_PREC_BF16_MIXED:
	case GM_PREC_BF16_TRUE:
		return dist_opt ? 6 + 12 / dd : 18;
	case GM_PREC_FP16_MIXED:
	case GM_PREC_FP16_TRUE:
		return dist_opt ? 4 + 16 / dd : 20;
	case GM_PREC_FP32:
		break;
	}
	return dist_opt ? 8 + 8 / dd : 16;
}

uint64_t gm_megatron_in_flight(uint64_t pp, uint64_t vpp, uint64_t rank,
			       uint64_t m)
{
	uint64_t warm, total = m * (vpp ? vpp : 1);

	if (pp < 2)
		return total ? 1 : 0;
	if (vpp < 2)
		warm = pp - rank - 1;
	else
		warm = (pp - rank - 1) * 2 + (vpp - 1) * pp;
	/* warm-up forwards, then one forward before each backward */
	return warm + 1 < total ? warm + 1 : total;
}

int gm_recipe_megatron(const struct gm_recipe_in *in,
		       struct gm_recipe_states *o, struct gm_diag *diag)
{
	double P = in->params, T = in->trainable;
	double d = in->dp > 1 ? (double)in->dp : 1;
	double w, g, opt;
	bool fp16 = in->precision == GM_PREC_FP16_MIXED ||
		    in->precision == GM_PREC_FP16_TRUE;
	bool fp32 = in->precision == GM_PREC_FP32;

	*o = (struct gm_recipe_states){0};
	if (in->optimizer != GM_OPT_ADAM && in->optimizer != GM_OPT_ADAMW)
		return gm_diag_set(diag, GM_EINVAL, "Megatron-LM with '%s' is "
				   "not in the recipe table (adam, adamw)",
				   gm_optimizer_name(in->optimizer));
	w = fp32 ? 4 : 2;
	g = fp16 ? 2 : 4;
	/* fp32 master (none for fp32), fp16's fp32 main gradients, Adam */
	o->master = fp32 ? 0 : 4 * T;
	opt = o->master + (fp16 ? 4 * T : 0) + 8 * T;
	o->weights = w * P;
	o->gradients = g * T;
	o->optimizer = in->distributed_optimizer ? opt / d : opt;
	if (in->distributed_optimizer)
		o->master /= d;
	/* the model built in its dtype, then DDP's buffers; with the
	 * distributed optimizer each parameter is copied into param_data
	 * before its own storage goes (param_and_grad_buffer.py); then the
	 * optimizer's fp32 masters (step_megatron.c emits the same) */
	o->init_peak = o->weights + o->gradients +
		       (in->distributed_optimizer && o->weights > o->master ?
			o->weights : o->master);
	snprintf(o->name, sizeof(o->name), "megatron%s-%s",
		 in->distributed_optimizer ? "-distributed-optimizer" : "",
		 gm_precision_name(in->precision));
	return 0;
}
