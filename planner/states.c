/*
 * states.c - bytes per parameter of the model states (see states.h).
 */
#include "states.h"

/*
 * Optimizer state elements per parameter (not bytes):
 * Adam/AdamW exp_avg + exp_avg_sq = 2 (torch/optim/adamw.py; `step` is a
 * CPU scalar per tensor unless capturable/fused, ignored); SGD with
 * momentum a momentum_buffer = 1 (torch/optim/sgd.py); plain SGD none.
 * Adafactor's factored moments are counted from tensor shapes by the
 * model (model.c), 8-bit Adam's bytes by gm_state_bytes().
 */
double gm_optimizer_elem_states(enum gm_optimizer o)
{
	switch (o) {
	case GM_OPT_ADAM:
	case GM_OPT_ADAMW:
		return 2;
	case GM_OPT_SGD_MOMENTUM:
		return 1;
	default:
		return 0;
	}
}

/*
 * bitsandbytes 8-bit Adam: two uint8 states plus one fp32 absmax per
 * 256-element block and state (blockwise quantization, Dettmers et al.
 * 2022 "8-bit Optimizers via Block-wise Quantization"): 2 + 2*4/256 B.
 * Tensors under 4096 elements keep 32-bit states (min_8bit_size); that
 * is norms and biases, a rounding error here.
 */
#define GM_ADAM8BIT_BYTES (2.0 + 8.0 / 256.0)

static double opt_bytes(enum gm_optimizer o, double state_elem)
{
	if (o == GM_OPT_ADAMW_8BIT)
		return GM_ADAM8BIT_BYTES;
	return gm_optimizer_elem_states(o) * state_elem;
}

struct gm_state_bytes gm_state_bytes(enum gm_recipe r, enum gm_precision p,
				     enum gm_optimizer o)
{
	struct gm_state_bytes b = {0};
	bool half = p != GM_PREC_FP32;
	bool mixed = p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED;

	b.compute = half ? 2 : 4;
	b.residual = b.compute;
	if (r == GM_RECIPE_TORCH) {
		/* Parameters (and so .grad and zeros_like states) live in
		 * fp32 for fp32 and *-mixed, in 16 bits for *-true. */
		double w = mixed || !half ? 4 : 2;
		b.weights = w;
		b.gradients = w;
		b.optimizer = opt_bytes(o, w);
		b.autocast = mixed;
		if (mixed)
			b.residual = 4;
		return b;
	}
	/* Megatron/DeepSpeed: 16-bit model, fp32 master in the optimizer
	 * (for 16-bit precisions), fp32 optimizer states. */
	b.weights = half ? 2 : 4;
	b.master = half ? 4 : 0;
	b.optimizer = b.master + opt_bytes(o, 4);
	b.gradients = b.weights;
	if (r == GM_RECIPE_MEGATRON && half) {
		if (p == GM_PREC_BF16_MIXED || p == GM_PREC_BF16_TRUE)
			b.gradients = 4; /* fp32 main_grad buffer: 18 B */
		else
			b.optimizer += 4; /* fp32 copy of fp16 grads: 20 B */
	}
	return b;
}

struct gm_state_bytes gm_state_shard(struct gm_state_bytes b, unsigned zero,
				     unsigned long d)
{
	if (d < 2)
		return b;
	if (zero >= 1) {
		b.optimizer /= (double)d;
		b.master /= (double)d;
	}
	if (zero >= 2)
		b.gradients /= (double)d;
	if (zero >= 3)
		b.weights /= (double)d;
	return b;
}
