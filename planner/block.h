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

int gm_block_build(const struct gm_step_shape *sh, struct gm_step_block *out);

/*
 * The head's input as a program of the same form: the final norm
 * (Llama's model.norm, GPT-2's ln_f) of the last block's output
 * (GM_BLK_IN) and, under autocast, lm_head's cast of it; GM_BLK_OUT is
 * the tensor lm_head takes (and saves), gout_bytes its gradient, gin_id
 * the last block's output gradient. GM_EINVAL for BERT (post-norm
 * blocks: no final norm), else as gm_block_build.
 */
int gm_block_head_build(const struct gm_step_shape *sh,
			struct gm_step_block *out);

#endif
