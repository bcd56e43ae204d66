/*
 * llama.h - what other Llama-shaped families (custom, mixtral, qwen3,
 * qwen3-moe, deepseek-v3) reuse of llama.c: its entries of the family
 * table (family.h says each one's contract) and the halves of its
 * inference layer.
 */
#ifndef GM_ARCH_LLAMA_H
#define GM_ARCH_LLAMA_H

#include "step_emit.h"

#include <stdint.h>

struct gm_blk;
struct gm_param_layout;
struct gm_spec_model;

/* Parameters: each block's input_layernorm and post_attention_layernorm
 * (hidden), the final norm and the LM head (params.h gm_params_lm_head):
 * LlamaDecoderLayer's and LlamaModel's, which the Llama-shaped families
 * share. */
void gm_llama_norm_params(const struct gm_spec_model *m,
			  struct gm_param_layout *l);

/* LlamaDecoderLayer's attention half in inference (transformers
 * modeling_llama.py): from input_layernorm to the residual add, which it
 * returns; *n2 = post_attention_layernorm's output. The caller frees
 * the layer input. */
uint32_t gm_llama_infer_attention(struct gm_em *e, uint64_t l,
				  const struct gm_em_fwd *f, uint32_t *n2);

/* Training (block.h's builders): LlamaDecoderLayer's attention half,
 * from input_layernorm of the block input to the residual add, which it
 * returns; *n2 = post_attention_layernorm's output. */
int gm_llama_block_attention(struct gm_blk *b, int *n2);

/* LlamaMLP of width ffn (gate_proj, SiLU, up_proj, the product,
 * down_proj) on n2, which it drops, then the residual add with r1 (the
 * block's output) and the end of the layer (r1 and the block input
 * dropped). */
void gm_llama_block_mlp(struct gm_blk *b, int r1, int n2, double ffn);

/* gm_family_llama's entries (family.h: block, final_norm, infer_embed,
 * infer_pre, infer_layer, infer_head). */
void gm_llama_block(struct gm_blk *b);
int gm_llama_final_norm(struct gm_blk *b, int x);
uint32_t gm_llama_infer_embed(struct gm_em *e, const struct gm_em_fwd *f,
			      struct gm_em_live *lv);
void gm_llama_infer_pre(struct gm_em *e, double q, struct gm_em_live *lv);
uint32_t gm_llama_infer_layer(struct gm_em *e, uint64_t l,
			      const struct gm_em_fwd *f);
uint32_t gm_llama_infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			     struct gm_em_live *lv);

/* LlamaMLP (gate_proj, SiLU, up_proj, the product, down_proj) and the
 * residual add in inference, after the attention half: frees *n2
 * (post_attention_layernorm's output) and *r (the residual); returns
 * the layer's output. */
uint32_t gm_llama_infer_mlp(struct gm_em *e, const struct gm_em_fwd *f,
			    uint32_t *n2, uint32_t *r);

#endif
