/*
 * llama.h - what other Llama-shaped families (mixtral) reuse of llama.c.
 */
#ifndef GM_ARCH_LLAMA_H
#define GM_ARCH_LLAMA_H

#include "step_emit.h"

#include <stdint.h>

/* LlamaDecoderLayer's attention half in inference (transformers
 * modeling_llama.py): from input_layernorm to the residual add, which it
 * returns; *n2 = post_attention_layernorm's output. The caller frees
 * the layer input. */
uint32_t gm_llama_infer_attention(struct gm_em *e, uint64_t l,
				  const struct gm_em_fwd *f, uint32_t *n2);

#endif
