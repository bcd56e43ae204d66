/*
 * moe.h - the routed mixture-of-experts MLP that the MoE families
 * (mixtral.c, qwen3_moe.c, deepseek_v3.c) share: a top-k router over
 * `experts` experts stored as 3-D parameters (gate_up_proj, down_proj),
 * run by transformers' grouped_mm experts forward (moe.c says which
 * version and what it saves).
 */
#ifndef GM_ARCH_MOE_H
#define GM_ARCH_MOE_H

#include <stdbool.h>
#include <stdint.h>

struct gm_act_layer;
struct gm_blk;
struct gm_param_layout;
struct gm_spec_model;
struct gm_act_style;
struct gm_em;
struct gm_em_fwd;

/*
 * Parameters: the router (mlp.gate.weight, experts x hidden, replicated)
 * and the experts' 3-D tensors (mlp.experts.gate_up_proj, experts x
 * 2 moe_ffn x hidden; mlp.experts.down_proj, experts x hidden x moe_ffn;
 * split over the ffn by tensor parallelism), in blocks lo..hi-1, or in
 * every block where hi is 0.
 */
void gm_moe_params(const struct gm_spec_model *m, struct gm_param_layout *l,
		   uint64_t lo, uint64_t hi);

/*
 * Training: append to l what the router and the experts save for
 * backward, after the norm in front of them (the caller lists it with
 * gm_act_norm(..., 1, "router input")), and set the MLP's transient.
 */
void gm_moe_saved(struct gm_act_layer *l, const struct gm_act_style *st);

/*
 * Training, op by op (block.h's builders): the softmax top-k router
 * (Mixtral's; Qwen3-MoE's with to_logits, which casts the weights to
 * the logits' dtype) and the grouped_mm experts on x (tokens x hidden);
 * returns the MLP's output (x's dtype). The caller drops x.
 */
int gm_moe_block_routed(struct gm_blk *b, int x, bool to_logits);

/* The grouped_mm experts alone on x with the router's top-k weights w
 * and indices idx (a family's own router); returns their output. */
int gm_moe_block_experts(struct gm_blk *b, int x, int w, int idx);

/* A MoE decoder layer's second half after its attention half (r1 the
 * residual, n2 post_attention_layernorm's output, dropped):
 * gm_moe_block_routed on n2, the residual add (the block's output), the
 * end of the layer (r1 and the block input dropped). */
void gm_moe_block_mlp(struct gm_blk *b, int r1, int n2, bool to_logits);

/*
 * Inference: the routed experts over the f->T tokens of forward f whose
 * routing (top-k indices, weights of wb bytes each) and MLP input the
 * caller holds, as transformers 5.17 runs them (moe.c): the grouped_mm
 * experts forward, or batched_mm in a decode forward of generate()
 * (f->decode), which copies each row's expert weights. Returns their
 * output (T x hidden in the activation dtype); frees everything else it
 * allocated.
 */
uint32_t gm_moe_infer_experts(struct gm_em *e, const struct gm_em_fwd *f,
			      double wb);

/*
 * Inference over the f->T tokens of forward f whose MLP input the caller
 * holds: the router
 * (softmax, top-k; cast: the weights cast back to the activation dtype,
 * as Qwen3-MoE's router does) and the experts. Returns the MLP's output
 * (T x hidden in the activation dtype); frees everything else it
 * allocated.
 */
uint32_t gm_moe_infer(struct gm_em *e, const struct gm_em_fwd *f, bool cast);

/*
 * A MoE decoder layer's second half in inference, after its attention
 * half: the sparse block over f->T tokens on *n2 (post_attention_
 * layernorm's output, freed), then the residual add with *r (freed);
 * cast as gm_moe_infer's. Returns the layer's output.
 */
uint32_t gm_moe_infer_mlp(struct gm_em *e, const struct gm_em_fwd *f,
			  uint32_t *n2, uint32_t *r, bool cast);

#endif
