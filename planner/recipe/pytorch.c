/*
 * pytorch.c - the PyTorch recipe: a Hugging Face model under a plain
 * loop (the rules cite PyTorch's source at commit 01d5c2c, 2.x).
 *
 *  - Precision (Lightning's names): *-mixed keeps fp32 parameters,
 *    gradients and optimizer states and computes under torch.autocast,
 *    which caches the 16-bit cast of every matmul weight until the
 *    autocast region exits (aten/src/ATen/autocast_mode.cpp,
 *    cached_cast: leaf tensors that require grad); *-true keeps all in
 *    the 16-bit dtype; fp32 all in fp32.
 *  - zero_stage 0 with data parallel: DDP. Its reducer allocates every
 *    gradient bucket when it is built (torch/csrc/distributed/c10d/
 *    reducer.cpp, Reducer::initialize_buckets), a flat copy of the
 *    gradients with the default gradient_as_bucket_view=False.
 *  - zero_stage 1: DDP plus torch.distributed.optim.
 *    ZeroRedundancyOptimizer (optimizer states over d ranks).
 *  - zero_stage 2: PyTorch has no DDP mode that shards gradients; its
 *    ZeRO-2 is FSDP's ShardingStrategy.SHARD_GRAD_OP (torch 2.11
 *    torch/distributed/fsdp/api.py: unshards before the forward, does
 *    not reshard after it, reshards after the backward), in FSDP2
 *    fully_shard(reshard_after_forward=False) (_fully_shard/
 *    _fully_shard.py). Planned as FSDP2 below with each block's
 *    unsharded parameters kept from its forward to its post-backward:
 *    sharded parameters, gradients and optimizer states, and at the
 *    end of the forward every unit unsharded at once.
 *  - zero_stage 3: FSDP2 fully_shard (torch/distributed/fsdp/
 *    _fully_shard/): sharded parameters in their original dtype (fp32
 *    under *-mixed), sharded gradients, optimizer over the shards. With
 *    fsdp_mixed_precision param-dtype (_fsdp_api.py, MixedPrecision-
 *    Policy(param_dtype=16-bit, reduce_dtype=fp32)) the all-gather and
 *    the unsharded parameters are 16-bit and there is no autocast, so
 *    no weight cache; the unsharded 16-bit gradients are cast to fp32
 *    for the reduce-scatter (_fsdp_collectives.py, foreach_reduce) into
 *    fp32 gradient shards. With autocast the unsharded parameters are
 *    fp32 and autocast caches their 16-bit casts for the whole forward.
 *    The next unit's all-gather is prefetched (_fsdp_param_group.py,
 *    the implicit prefetch of FSDPParamGroup), so two units are
 *    unsharded at once. FSDP1's MixedPrecision(param_dtype=...) holds
 *    the same bytes; its FlatParameter pads each unit to a multiple of
 *    the world size, a rounding error here.
 */
#include <stdio.h>

#include "error.h"
#include "recipe.h"
#include "states.h"

/* Bytes of an element of the parameters, their .grad and their states. */
static double param_bytes(enum gm_precision p)
{
	return p == GM_PREC_FP16_TRUE || p == GM_PREC_BF16_TRUE ? 2 : 4;
}

static bool is_mixed(enum gm_precision p)
{
	return p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED;
}

/* Optimizer-state bytes per parameter of element size w: states.c's
 * per-element counts; 8-bit Adam's blockwise bytes. */
static double opt_bytes(enum gm_optimizer o, double w)
{
	if (o == GM_OPT_ADAMW_8BIT)
		return 2.0 + 8.0 / 256.0;
	return gm_optimizer_elem_states(o) * w;
}

int gm_recipe_pytorch(const struct gm_recipe_in *in,
		      struct gm_recipe_states *out, struct gm_diag *diag)
{
	double w = param_bytes(in->precision), P = in->params;
	double T = in->trainable, d = in->dp > 1 ? (double)in->dp : 1;
	double U = in->largest_layer;
	double B = in->built_whole && in->built_params > P ? in->built_params
							   : P;
	bool mixed = is_mixed(in->precision);
	const char *prec = gm_precision_name(in->precision);

	*out = (struct gm_recipe_states){0};
	if (in->optimizer == GM_OPT_ADAFACTOR)
		return gm_diag_set(diag, GM_EINVAL, "adafactor's factored "
				   "states are counted per tensor shape by the "
				   "model, not per parameter");
	out->weights = w * P;
	out->gradients = w * T;
	out->optimizer = opt_bytes(in->optimizer, w) * T;
	out->cache = mixed ? 2 * in->matmul_params : 0;
	out->init_peak = w * B;
	if (in->dp < 2) {
		snprintf(out->name, sizeof(out->name), "pytorch-%s", prec);
		out->wrap = GM_WRAP_SINGLE;
		return 0;
	}
	if (in->zero >= 2) {
		bool pd = mixed && in->fsdp_mp == GM_FSDP_MP_PARAM_DTYPE;
		bool keep = in->zero == 2; /* reshard_after_forward=False */
		double uw = pd ? 2 : w; /* unsharded element bytes */

		out->weights = w * P / d;
		out->gradients = w * T / d;
		out->optimizer = opt_bytes(in->optimizer, w) * T / d;
		/* two units unsharded (the current and the prefetched one),
		 * the unit's unsharded gradients and the reduce-scatter
		 * input in reduce_dtype (fp32) */
		out->gathered = 2 * uw * U + uw * U + 4 * U;
		/* kept: every unit unsharded at the end of the forward */
		if (keep)
			out->gathered = uw * P + uw * U + 4 * U;
		if (pd)
			out->cache = 0;
		/* a whole-model build, then each fully_shard allocates its
		 * unit's shards and frees the unit's full tensors (step.c,
		 * "FSDP2"); built sharded (meta device): the shards */
		out->init_peak = in->built_whole ? w * B + w * U / d
						 : w * P / d;
		snprintf(out->name, sizeof(out->name), "pytorch-fsdp2-%s%s%s",
			 keep ? "shard-grad-op-" : "", prec,
			 mixed ? pd ? "-param-dtype" : "-autocast" : "");
		out->wrap = keep ? GM_WRAP_FSDP2_KEEP : GM_WRAP_FSDP2;
		return 0;
	}
	/* DDP's buckets: a flat copy of the gradients, built with DDP */
	out->buffers = w * T;
	out->init_peak = w * P + out->buffers > w * B ? w * P + out->buffers
						      : w * B;
	if (in->zero >= 1)
		out->optimizer /= d;
	snprintf(out->name, sizeof(out->name), "pytorch-ddp%s-%s",
		 in->zero == 1 ? "-zero-redundancy-optimizer" : "", prec);
	out->wrap = in->zero == 1 ? GM_WRAP_DDP_ZERO1 : GM_WRAP_DDP;
	return 0;
}
