/*
 * block.h - one transformer block's allocation program for training
 * (struct gm_step_block, step.h), built from its shapes (block.c).
 *
 * The forward is written op by op as Hugging Face transformers 5.x runs
 * it under PyTorch 2.11 eager (Llama, GPT-2, BERT; sdpa or eager
 * attention; fp32, 16-bit, or autocast with an fp32 residual stream);
 * every op records an autograd node (its inputs, the tensors it saves,
 * its output). The backward is derived from that tape as autograd's
 * engine runs it: nodes in reverse creation order, each allocating its
 * inputs' gradients (plus its own temporaries), then releasing its
 * incoming gradient and its saved tensors.
 *
 * Units: bytes. Errors: 0 or GM_ERANGE (the program outgrew
 * GM_STEP_BLOCK_OPS / GM_STEP_BLOCK_IDS; *out is then empty).
 */
#ifndef GM_BLOCK_H
#define GM_BLOCK_H

#include "step.h"

/* The block program of sh->fam (its block op), per tensor-parallel
 * rank; GM_EINVAL for a family without one (the memory model then
 * replays the analytic saved-tensor list). */
int gm_block_build(const struct gm_step_shape *sh, struct gm_step_block *out);

/*
 * The head's input as a program of the same form: the family's final
 * norm (Llama's model.norm, GPT-2's ln_f) of the last block's output
 * (GM_BLK_IN) and, under autocast, lm_head's cast of it; GM_BLK_OUT is
 * the tensor lm_head takes (and saves), gout_bytes its gradient, gin_id
 * the last block's output gradient. GM_EINVAL for a family without one
 * (BERT's post-norm blocks), else as gm_block_build.
 */
int gm_block_head_build(const struct gm_step_shape *sh,
			struct gm_step_block *out);

/*
 * The op builders a family's block (family.h) is written with. Each
 * records one autograd node per op and returns the id of its output
 * tensor; ids are ints (GM_BLK_IN is the block's input). Lists of ids end
 * with GM_BLK_END; in a save list GM_BLK_OUTP stands for the node's own
 * output. Shapes come from gm_blk_shape() (tok x width elements; bytes
 * per element follow the inputs and autocast). Python's references are
 * explicit: gm_blk_drop() where the modeling code rebinds or leaves a
 * name; what autograd saved lives on until its backward.
 */
#define GM_BLK_END -1
#define GM_BLK_OUTP -2

struct gm_blk;

const struct gm_step_shape *gm_blk_shape(const struct gm_blk *b);
/* Bytes per element of tensor x. */
double gm_blk_eb(const struct gm_blk *b, int x);
/* The bytes of x's gradient (a view's: its own part). */
void gm_blk_set_grad_bytes(struct gm_blk *b, int x, double bytes);
/* The last node passes its gradient through (an add: no new tensor). */
void gm_blk_alias_last(struct gm_blk *b);
/* The last node's inputs' gradients are views of its incoming one (a
 * cat's backward narrows it): nothing is allocated for them. */
void gm_blk_view_grads_last(struct gm_blk *b);
/* The next tensor made is the block's output (GM_BLK_OUT). */
void gm_blk_output_next(struct gm_blk *b);
/* A node without a new output: in (get gradients), out, saved sv. */
void gm_blk_node(struct gm_blk *b, const int *in, const int *out,
		 const int *sv);
/* A view of x (its storage) of n elements. */
int gm_blk_view(struct gm_blk *b, int x, double n);
/* An op of the inputs in (get gradients) with one new output of n
 * elements of eb bytes, saving sv (may be NULL). */
int gm_blk_op(struct gm_blk *b, double n, double eb, const int *in,
	      const int *sv);
/* A new tensor of n elements of eb bytes that no recorded node makes and
 * that does not require grad (indices, an empty_like buffer). */
int gm_blk_tensor(struct gm_blk *b, double n, double eb);
/* The last node's backward temporary of the given bytes: allocated
 * before its inputs' gradients (after them with after), freed when the
 * node is done. */
void gm_blk_set_tmp(struct gm_blk *b, double bytes, bool after);
/* Python drops a reference to x (a view: to its storage). */
void gm_blk_drop(struct gm_blk *b, int x);
/* x.to(dtype of eb bytes). */
int gm_blk_cast(struct gm_blk *b, int x, double eb);
/* softmax over x's last dim (saving its output), in fp32 where f32
 * (through an fp32 copy of a bfloat16 x: block.c), else in x's dtype. */
int gm_blk_softmax(struct gm_blk *b, int x, bool f32);
/* nn.Linear / Conv1D: x (tok x in) -> tok x out, with a bias or not. */
int gm_blk_linear(struct gm_blk *b, int x, double in, double out, bool bias);
/* The same for the linear whose module name is name (PEFT's target
 * name: "q_proj", "c_attn", ...): under training.adapter it is frozen and
 * carries LoRA when lora_targets match (gm_blk_linear: never a target). */
int gm_blk_linear_named(struct gm_blk *b, const char *name, int x, double in,
			double out, bool bias);
/* An elementwise op of x (and y >= 0, broadcast against x: the output
 * has x's elements, in the wider dtype of the two) saving sv (may be
 * NULL). With y, each input's gradient is made at the output's shape
 * and dtype, then summed and cast to the input's. */
int gm_blk_ew(struct gm_blk *b, int x, int y, const int *sv);
/* x.view(b, s, heads, head_dim).transpose(1, 2) of a linear's output x
 * (a view); its backward copies a gradient contiguous in (b, heads, s,
 * head_dim), as rotary's is, back to x's layout. */
int gm_blk_head_view(struct gm_blk *b, int x);
/* x ** e for a scalar e != 0: saves x; its backward makes two
 * temporaries of x's size before x's gradient. */
int gm_blk_pow(struct gm_blk *b, int x);
/* x + y. */
int gm_blk_add(struct gm_blk *b, int x, int y);
/* nn.LayerNorm, LlamaRMSNorm of x. */
int gm_blk_layer_norm(struct gm_blk *b, int x);
int gm_blk_rms_norm(struct gm_blk *b, int x);
/* An RMSNorm of x (tokens x width) with a (width,) weight: the latent
 * norms of multi-head latent attention (q_a_layernorm, kv_a_layernorm). */
int gm_blk_rms_norm_width(struct gm_blk *b, int x, double width);
/* An RMSNorm over head_dim applied to each head of x (tok x heads x
 * head_dim): Qwen3Attention's q_norm, k_norm. */
int gm_blk_head_rms_norm(struct gm_blk *b, int x);
/* apply_rotary_pos_emb for one of q, k. */
int gm_blk_rotary(struct gm_blk *b, int x);
/* torch.nn.functional.grouped_mm of x (rows x in, sorted by expert)
 * with the experts' 3-D weight (experts x in x out, the parameters'
 * dtype): rows x out in the weight's dtype. Not on autocast's lists:
 * transformers casts the input to the weight's dtype (a copy it saves
 * where the dtypes differ); saves its input; the weight's gradient is
 * the parameter's (step.c). */
int gm_blk_grouped_mm(struct gm_blk *b, int x, double rows, double in,
		      double out);
/* Dropout of x (replaces it; x itself without training dropout). */
int gm_blk_dropout(struct gm_blk *b, int x);
/* The attention function: q, k, v -> tok x q (sdpa or eager as the
 * shape says, the family's eager variant). */
int gm_blk_attention(struct gm_blk *b, int q, int k, int v);
/* The same for q and k of head dim hd and v of head dim vd, sh->heads
 * heads each (multi-head latent attention: q/k 192, v 128 in
 * DeepSeek-V3): tok x heads x vd. */
int gm_blk_attention_dims(struct gm_blk *b, int q, int k, int v, double hd,
			  double vd);
/* past_key_values.update(k, v) where the forward builds the cache
 * (sh->kv_cache): *k, *v become the cache's copies, which the cache
 * holds; the caller's references to the originals are dropped. Call it
 * where the family's attention does, before gm_blk_attention(). */
void gm_blk_kv_cache(struct gm_blk *b, int *k, int *v);

#endif
