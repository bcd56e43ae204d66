/*
 * loop.h - what the training loop keeps from one forward into the next
 * (training.loop, training.use_cache): the loop table the step emitter
 * follows (step.h, gm_step.keep_outputs / kv_cache /
 * grads_to_next_forward; step.c, "The training loop"). Each rule cites
 * the framework's source at a version (loop.c).
 */
#ifndef GM_LOOP_H
#define GM_LOOP_H

#include <stdbool.h>

#include "spec.h"

struct gm_step;

/* One way of writing the training loop. */
struct gm_loop_rule {
	const char *name;        /* training.loop's value */
	bool keep_outputs;       /* the forward's outputs (logits,
				  * past_key_values) live until the next
				  * forward returns */
	bool grads_to_next_forward; /* zero_grad runs after the next
				     * forward, before its backward */
	const char *source;      /* the loop's code, file and function */
};

/* The row of training.loop l (every enum gm_loop has one). */
const struct gm_loop_rule *gm_loop_rule(enum gm_loop l);

/*
 * Whether the forward of a training run builds past_key_values (a
 * DynamicCache) as transformers 5.17 decides it: use_cache false: no;
 * true, or auto (every causal LM config class defaults use_cache=True:
 * LlamaConfig, GPT2Config, Qwen3Config, MixtralConfig, GPTNeoXConfig)
 * unless gradient checkpointing is on, which turns it off in training
 * (modeling_layers.py GradientCheckpointingLayer.__call__, utils/
 * generic.py merge_with_config_defaults). Encoders (BERT), shapeless
 * models and Megatron-LM's GPTModel build none. False outside training.
 */
bool gm_loop_kv_cache(const struct gm_spec *s);

/* Set st's keep_outputs, grads_to_next_forward and kv_cache from rule r
 * and spec s (kv_copies and kv_block are the memory model's). */
void gm_loop_apply(const struct gm_loop_rule *r, const struct gm_spec *s,
		   struct gm_step *st);

#endif
