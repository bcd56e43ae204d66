/*
 * step_emit.h - the inference emitter a family's inference layer is written
 * with (step.c emits the pass; family.h's infer_* ops fill in the
 * model-specific part).
 *
 * Every call appends allocate or free requests to the step's sequence in
 * order; ids are slots (GM_EM_NONE: nothing, e.g. a zero-sized tensor or
 * after an error: the emitter keeps its first error and ignores the
 * rest). The shapes of the pass are gm_em_infer()'s (widths per tensor-
 * parallel rank, c bytes per activation element). Units: bytes.
 */
#ifndef GM_STEP_EMIT_H
#define GM_STEP_EMIT_H

#include <stdbool.h>
#include <stdint.h>

#include "step.h"

#define GM_EM_NONE UINT32_MAX

struct gm_em;
struct gm_ds_em;

/* One forward: its tokens and the KV length before it. */
struct gm_em_fwd {
	uint64_t T;          /* tokens of this forward */
	uint64_t n;          /* KV length before it (0: prefill) */
	bool decode;         /* one of generate()'s decode forwards, which
	                      * GenerationMixin._optimize_model_for_decode
	                      * runs with the experts as batched_mm
	                      * (transformers 5.17.0 generation/utils.py) */
};

/* What the model's forward keeps while its blocks run. */
struct gm_em_live {
	uint32_t hs;         /* the hidden states between blocks */
	uint32_t keep[3];    /* embedding outputs the forward still names */
	uint32_t cs[2];      /* rotary cos, sin (GM_EM_NONE: none) */
};

const struct gm_step_infer *gm_em_infer(const struct gm_em *e);

/* Allocate bytes of kind k; free *id and set it to GM_EM_NONE. */
uint32_t gm_em_alloc(struct gm_em *e, double bytes, enum gm_step_kind k);
void gm_em_free(struct gm_em *e, uint32_t *id);
/* torch.cuda.empty_cache() here (the sink's pool releases its cached
 * segments). */
void gm_em_empty_cache(struct gm_em *e);

/* nn.LayerNorm over T tokens: its output (mean and rstd freed at once). */
uint32_t gm_em_layer_norm(struct gm_em *e, double T);
/* LlamaRMSNorm over T tokens: its output. */
uint32_t gm_em_rms_norm(struct gm_em *e, double T);
/* An RMSNorm over width elements of each of T tokens (DeepSeek-V3's
 * q_a_layernorm, kv_a_layernorm): its output. */
uint32_t gm_em_rms_norm_w(struct gm_em *e, double T, double width);
/* An RMSNorm over head_dim on each head of a T x width projection
 * (Qwen3Attention's q_norm, k_norm; width per rank): its output. */
uint32_t gm_em_head_rms_norm(struct gm_em *e, double T, double width);
/* apply_rotary_pos_emb for one of q, k of the given bytes: its output. */
uint32_t gm_em_rotary(struct gm_em *e, double bytes);
/* scaled_dot_product_attention of forward f (its queries over the cache
 * and its own positions; q and kv widths, head_dim padded to a multiple
 * of 8 for the flash kernel as PyTorch does): its output, T x q. */
uint32_t gm_em_sdpa(struct gm_em *e, const struct gm_em_fwd *f);
/* The rotary cos and sin for q positions into cs[0..1] (with the first
 * matmul's cuBLAS workspace). */
void gm_em_rope_tables(struct gm_em *e, double q, uint32_t *cs);
/* DynamicCache.update of layer l's key and value tensors (kv and kv_v
 * elements per token) for forward f. */
void gm_em_kv_append(struct gm_em *e, uint64_t l, const struct gm_em_fwd *f);

/* Positions of the key and value states a layer's cache update returns
 * for forward f: f->n + its own, or at most window - 1 + its own under
 * a sliding window (step.c). */
uint64_t gm_em_kv_len(const struct gm_em *e, const struct gm_em_fwd *f);

/* For the framework engines beside the emitter (step_ds.c): the step
 * described, the ids of parameter i's weight and gradient in row `row`
 * (a block, or the layer count for the embeddings and head; GM_EM_NONE
 * when not live), the engine's own state, and an error that ends the
 * emission (the first one is kept). */
const struct gm_step *gm_em_step(const struct gm_em *e);
/* Parameter i as row `row` holds it (row L: the embeddings and head):
 * gm_em_step(e)->p[i], or a copy with no bytes where the block is
 * outside the parameter's span (step.h). */
const struct gm_step_param *gm_em_param(const struct gm_em *e, uint64_t row,
					int i);
uint32_t *gm_em_wid(struct gm_em *e, uint64_t row, int i);
uint32_t *gm_em_gid(struct gm_em *e, uint64_t row, int i);
struct gm_ds_em **gm_em_ds(struct gm_em *e);
void gm_em_fail(struct gm_em *e, int err);

#endif
