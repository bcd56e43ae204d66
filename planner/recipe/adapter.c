/*
 * adapter.c - LoRA and QLoRA (PEFT 0.20.1.dev0 at commit 5d602fd;
 * bitsandbytes 0.50.2.dev0 at commit 95f9af3), single rank, PyTorch.
 *
 *  - LoRA (peft/tuners/lora/layer.py, LoraLayer.update_layer): each
 *    target linear gains lora_A (in -> r) and lora_B (r -> out), no
 *    biases; every base parameter is frozen (requires_grad False), so
 *    only the adapters have gradients and optimizer states.
 *    get_peft_model(autocast_adapter_dtype=True), the default, keeps the
 *    adapters in fp32 over a 16-bit base (tuners_utils.py,
 *    _cast_adapter_dtype).
 *  - QLoRA: the base linears are bitsandbytes Linear4bit, NF4 with
 *    double quantization (gm_nf4_bytes); the rest of the base keeps the
 *    load dtype, or fp32 after peft's prepare_model_for_kbit_training
 *    (utils/other.py: every 16-bit parameter that is not Params4bit is
 *    cast to fp32; it also turns gradient checkpointing on). Each 4-bit
 *    linear dequantizes its whole weight to the compute dtype in forward
 *    and again in backward (bitsandbytes autograd/_functions.py,
 *    MatMul4Bit, which saves only the 4-bit weight): one such 16-bit
 *    transient at a time.
 */
#include <stdio.h>

#include "error.h"
#include "recipe.h"
#include "states.h"

double gm_lora_params(uint64_t r, uint64_t in, uint64_t out)
{
	return (double)r * ((double)in + (double)out);
}

double gm_nf4_bytes(uint64_t n)
{
	uint64_t blocks = (n + 63) / 64;      /* absmax per 64 elements */
	uint64_t blocks2 = (blocks + 255) / 256;

	return (double)((n + 1) / 2)          /* two 4-bit codes a byte */
	       + (double)blocks               /* 8-bit absmax */
	       + 4.0 * (double)blocks2        /* fp32 second-level absmax */
	       + 4.0                          /* fp32 offset (absmax mean) */
	       + 256 * 4.0                    /* the nested state's code */
	       + 16 * 4.0;                    /* the NF4 code */
}

int gm_recipe_adapter(const struct gm_adapter_in *in,
		      struct gm_recipe_states *o, struct gm_diag *diag)
{
	bool half = in->precision != GM_PREC_FP32;
	bool mixed = in->precision == GM_PREC_FP16_MIXED ||
		     in->precision == GM_PREC_BF16_MIXED;
	/* the base's dtype: PEFT's recipes load it in the 16-bit compute
	 * dtype (from_pretrained(torch_dtype=torch.bfloat16)) and *-mixed
	 * runs it under torch.autocast; fp32 stays fp32 (the H200
	 * measurement of lora-llama-1.1b-r16-qv: 2 bytes per base weight,
	 * tests/data/calibration/pending/loops/measured-h200.json) */
	double base = half ? 2 : 4;
	double A = in->adapter_params;

	*o = (struct gm_recipe_states){0};
	if (in->adapter == GM_ADAPTER_NONE)
		return gm_diag_set(diag, GM_EINVAL, "no adapter");
	if (in->optimizer == GM_OPT_ADAFACTOR ||
	    in->optimizer == GM_OPT_ADAMW_8BIT)
		return gm_diag_set(diag, GM_EINVAL, "'%s' over LoRA adapters "
				   "is not in the recipe table",
				   gm_optimizer_name(in->optimizer));
	/* adapters in fp32 (autocast_adapter_dtype), their .grad and states */
	o->gradients = 4 * A;
	o->optimizer = gm_optimizer_elem_states(in->optimizer) * 4 * A;
	if (in->adapter == GM_ADAPTER_LORA) {
		o->weights = base * in->base_params + 4 * A;
		/* *-mixed: the 16-bit base needs no cast; autocast caches
		 * the casts of leaves that require grad (autocast_mode.cpp,
		 * cached_cast): the fp32 adapters' 16-bit copies */
		o->cache = mixed ? 2 * A : 0;
		snprintf(o->name, sizeof(o->name), "pytorch-lora-%s",
			 gm_precision_name(in->precision));
		o->wrap = GM_WRAP_LORA;
	} else {
		double rest = in->base_params - in->quantized;
		double rb = in->kbit_prepared ? 4 : half ? 2 : 4;

		o->weights = in->quantized_bytes + rb * rest + 4 * A;
		o->step = (half ? 2 : 4) * in->largest_linear;
		snprintf(o->name, sizeof(o->name), "pytorch-qlora-nf4-%s",
			 gm_precision_name(in->precision));
		o->wrap = GM_WRAP_QLORA;
	}
	o->init_peak = o->weights;
	return 0;
}
