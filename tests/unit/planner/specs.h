/* Specs built in C for the planner's unit tests (no YAML loader needed). */
#ifndef GM_TEST_SPECS_H
#define GM_TEST_SPECS_H

#include <string.h>

#include "spec.h"

static inline struct gm_spec spec_llama(unsigned L, unsigned h, unsigned f,
					unsigned a, unsigned g, unsigned V)
{
	struct gm_spec s;

	memset(&s, 0, sizeof(s));
	strcpy(s.name, "llama");
	s.task = GM_TASK_TRAIN;
	s.model = (struct gm_spec_model){
		.architecture = GM_ARCH_LLAMA, .layers = L, .hidden_size = h,
		.ffn_hidden_size = f, .attention_heads = a, .kv_heads = g,
		.vocab_size = V, .head = GM_HEAD_CAUSAL_LM,
		/* the loader's default (spec_rules.c) */
		.add_bias_linear = true};
	s.training = (struct gm_spec_training){
		.micro_batch_size = 1, .sequence_length = 4096,
		.precision = GM_PREC_BF16_MIXED, .optimizer = GM_OPT_ADAMW,
		.attention = GM_ATTN_SDPA,
		/* the loader's default (spec_rules.c recipe_defaults) */
		.use_cache = GM_CACHE_FALSE};
	s.parallelism = (struct gm_spec_parallel){
		.data_parallel = 1, .tensor_parallel = 1, .pipeline_parallel = 1,
		.virtual_pipeline_stages = 1,
		.expert_parallel = 1,
		/* FSDP as tools/measure runs it (the traces) */
		.fsdp_mixed_precision = GM_FSDP_MP_AUTOCAST};
	return s;
}

static inline struct gm_spec spec_gpt2(void)
{
	struct gm_spec s = spec_llama(12, 768, 3072, 12, 12, 50257);

	strcpy(s.name, "gpt2");
	s.model.architecture = GM_ARCH_GPT2;
	s.model.max_position_embeddings = 1024;
	s.model.tied_embeddings = true;
	s.training.sequence_length = 1024;
	return s;
}

static inline struct gm_spec spec_bert(enum gm_head head)
{
	struct gm_spec s = spec_llama(12, 768, 3072, 12, 12, 30522);

	strcpy(s.name, "bert");
	s.model.architecture = GM_ARCH_BERT;
	s.model.max_position_embeddings = 512;
	s.model.type_vocab_size = 2;
	s.model.tied_embeddings = true;
	s.model.head = head;
	s.model.num_labels = 2;
	s.training.sequence_length = 512;
	return s;
}

#endif
