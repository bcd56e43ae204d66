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
	o->wrap = GM_WRAP_MEGATRON;
	return 0;
}

/* megatron/training/theoretical_memory_usage.py (d98e8a6), dense
 * models: compute_weight_and_optimizer_memory,
 * compute_activation_memory (sequence parallel with selective recompute)
 * or compute_activation_memory_without_sp, in MiB as it prints them. */
void gm_megatron_theoretical(const struct gm_megatron_args *a,
			     double *weight_and_optimizer_mib,
			     double *activation_mib)
{
	double h = (double)a->hidden_size, L = (double)a->num_layers;
	double heads = (double)a->num_attention_heads;
	double groups = a->num_query_groups ? (double)a->num_query_groups
					    : heads;
	double qp = (double)a->kv_channels * heads / h;
	double gated = a->swiglu ? 1.5 : 1;
	double norm = a->rmsnorm ? 1 : 2;
	double V = (double)a->padded_vocab_size, t = (double)a->tp;
	double p = (double)a->pp, d = (double)a->dp;
	double s = (double)a->seq_length, b = (double)a->micro_batch_size;
	double attn = 2 * h * h * ((1 + groups / heads) * qp);
	double mlp = 2 * h * (double)a->ffn_hidden_size * gated;
	double ln = 2 * h * norm, final_ln = norm * h, emb = h * V;
	double tp_shard = ((attn + mlp) * L / p + emb) / t;
	double repl = (ln * L + final_ln) / p;
	double bpp = a->distributed_optimizer ? 6 + 12 / d : 18;
	double act;
	const double mib = 1024.0 * 1024.0;

	if (a->untie && a->pp == 1)
		tp_shard += emb / t;
	*weight_and_optimizer_mib = (tp_shard + repl) * bpp / mib;
	if (a->sequence_parallel && a->selective) {
		act = s * b * h * (18 + 4 * ((double)a->ffn_hidden_size / h));
		act *= L;
		act += 8 * s * b * p;
		act += s * b * h * p;
		if (a->vpp)
			act *= 1 + (p - 1) / (p * (double)a->vpp);
		if (!a->vpp && a->pp > 1 && a->num_microbatches) {
			double f = (double)a->num_microbatches / p;
			act *= f < 1 ? f : 1;
		}
		if (a->pp == 1)
			act += s * b * h * 4 * (1 + V / h);
		*activation_mib = act / t / mib;
		return;
	}
	act = s * b * h * (10 + 24 / t) * L;
	act += 8 * s * b * p;
	act += s * b * h * p;
	if (a->vpp)
		act *= 1 + (p - 1) / (p * (double)a->vpp);
	if (!a->vpp && a->pp > 1 && a->num_microbatches) {
		double f = (double)a->num_microbatches / p;
		act *= f < 1 ? f : 1;
	}
	if (a->pp == 1)
		act += (s * b * V / t + s * b * h) * 2;
	act *= 1.05;
	*activation_mib = act / mib;
}
