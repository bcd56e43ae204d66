/*
 * qwen3.h - what the Qwen3-shaped families (qwen3_moe) reuse of qwen3.c:
 * Qwen3Attention (q_norm, k_norm, head_dim).
 */
#ifndef GM_ARCH_QWEN3_H
#define GM_ARCH_QWEN3_H

#include "step_emit.h"

#include <stdint.h>

struct gm_act_layer;
struct gm_act_style;
struct gm_blk;
struct gm_param_layout;
struct gm_spec_model;

/* Parameters: embed_tokens and each block's Qwen3Attention (q/k/v/o_proj,
 * q_norm and k_norm of head_dim, hidden / heads when not given). */
void gm_qwen3_attention_params(const struct gm_spec_model *m,
			       struct gm_param_layout *l);

/* Training (block.h's builders): Qwen3DecoderLayer's attention half,
 * from input_layernorm of the block input to the residual add, which it
 * returns; *n2 = post_attention_layernorm's output. */
int gm_qwen3_block_attention(struct gm_blk *b, int *n2);

/* The attention half's saved tensors in training: input_layernorm,
 * q/k/v's inputs, q_norm's and k_norm's inputs, the attention core. */
void gm_qwen3_saved_attention(struct gm_act_layer *l,
			      const struct gm_act_style *st);

/* Qwen3DecoderLayer's attention half in inference (transformers
 * modeling_qwen3.py): from input_layernorm to the residual add, which it
 * returns; *n2 = post_attention_layernorm's output. The caller frees
 * the layer input. */
uint32_t gm_qwen3_infer_attention(struct gm_em *e, uint64_t l,
				  const struct gm_em_fwd *f, uint32_t *n2);

#endif
