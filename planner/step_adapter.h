/*
 * step_adapter.h - what a PEFT adapter (training.adapter: lora, qlora)
 * changes in a training step's allocation sequence (step_adapter.c):
 * which linears carry LoRA, the frozen base's bytes per parameter (NF4
 * for QLoRA's block linears), and the adapters' own parameter tensors
 * for the step emitter (step.h). The ops of a frozen, 4-bit or LoRA
 * linear are block.c's.
 *
 * Sources, each at the version the H200 measurements of
 * tests/data/calibration/pending/loops/measured-h200.json ran (PEFT
 * 0.21.0; read in PEFT 0.20.1.dev0 at commit 5d602fd, whose code these
 * rules follow line for line):
 *  - peft/tuners/tuners_utils.py, check_target_module_exists: a module
 *    is a target when its name is a target or ends in "." + a target;
 *    `all-linear` (utils/other.py _maybe_include_all_linear_layers):
 *    every nn.Linear / Conv1D but the output layer (lm_head);
 *  - peft/tuners/lora/layer.py, LoraLayer.update_layer: lora_A (r x in)
 *    and lora_B (out x r), no biases; every base parameter frozen
 *    (BaseTuner._mark_only_adapters_as_trainable);
 *  - peft/peft_model.py, PeftModel.__init__ with autocast_adapter_dtype
 *    True (the default): the adapters in fp32 over a 16-bit base
 *    (tuners_utils.py _cast_adapter_dtype).
 * Units: bytes, elements where a name says so. No errors.
 */
#ifndef GM_STEP_ADAPTER_H
#define GM_STEP_ADAPTER_H

#include <stdbool.h>

#include "optstep.h"
#include "params.h"
#include "spec.h"
#include "states.h"
#include "step.h"

/* Whether module `name` (its last name component: "q_proj") carries an
 * adapter under t (adapter lora; all-linear: every block linear). */
bool gm_adapter_targets(const struct gm_spec_training *t, const char *name);

/*
 * The frozen base model's bytes per parameter under t's adapter (b from
 * gm_state_bytes() for the spec's precision): the weights in the
 * compute dtype for 16-bit precisions (PEFT's recipes load the base
 * with torch_dtype=bfloat16 / float16; *-mixed then runs it under
 * torch.autocast), fp32 for fp32; no gradients and no optimizer states;
 * the residual stream in the weights' dtype (the embedding output and
 * the adds are the model's dtype; RMSNorm casts back to it).
 */
void gm_adapter_base_bytes(const struct gm_spec_training *t,
			   struct gm_state_bytes *b);

/* LoRA's trained parameters in one block of layout l (elements): r (in +
 * out) over every block linear gm_adapter_targets() names (a layout
 * tensor named "...q_proj" or "...c_attn.weight"). */
double gm_adapter_layer_params(const struct gm_param_layout *l,
			       const struct gm_spec_training *t);

/* The for-loop's walk (optstep.h) over the adapters' tensors of `layers`
 * blocks of layout l, tb bytes per element: block by block, each target
 * linear's lora_A (r x in) then lora_B (out x r) in the layout's order,
 * as named_parameters() visits a PEFT model's trainable tensors. */
struct gm_optstep_walk gm_adapter_for_loop_walk(
	const struct gm_param_layout *l, const struct gm_spec_training *t,
	uint64_t layers, double tb);

/*
 * Make st's parameters those of an adapter run: the base tensors frozen
 * (no gradient, no optimizer state or temporary, no autocast copy:
 * torch.autocast caches casts of leaves that require grad only,
 * autocast_mode.cpp cached_cast) and, per LoRA of the block program
 * (st->blk.lora), lora_A and lora_B appended as layer tensors added after
 * the model is built: fp32 weights and gradients, the optimizer's fp32
 * states (opt: its bytes per element), its foreach temporary (tmp bytes
 * per element), and under autocast (cache > 0: bytes per element) their
 * 16-bit casts cached for the step. Returns 0, or GM_ERANGE when the
 * tensors outgrow GM_PARAMS_MAX.
 */
int gm_adapter_step_params(struct gm_step *st,
			   const struct gm_spec_training *t, double opt,
			   int n_states, double tmp, double cache);

/*
 * QLoRA (transformers' bitsandbytes quantizer, BitsAndBytesConfig(
 * load_in_4bit=True, bnb_4bit_quant_type="nf4",
 * bnb_4bit_use_double_quant=True)): whether layout tensor pt is stored
 * as a Params4bit (every block linear; the head, embeddings and norms
 * stay in their dtype), and the bytes one block's quantized tensors
 * change (gm_nf4_bytes() each, less their base_b bytes per element).
 */
bool gm_adapter_quantized(const struct gm_spec_training *t,
			  const struct gm_ptensor *pt);
double gm_adapter_quantized_delta(const struct gm_param_layout *l,
				  const struct gm_spec_training *t,
				  double base_b);

#endif
