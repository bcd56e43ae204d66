/*
 * spec_rules.c - the defaults of a model spec and the rules that tie its
 * keys together (heads divide the hidden size, parallel degrees divide
 * what they split, ...). Every default and rule is listed, with its
 * reason, in models/README.md.
 *
 * Errors: gm__spec_validate() returns 0 or GM_EINVAL with a message that
 * blames the key (its file position, or the --set that gave it).
 */
#include "spec_int.h"

#include <string.h>

#include <stdio.h>

#include "arch/family.h"
#include "error.h"
#include "text.h"

/* Was key id given (file or --set)? */
static bool given(const struct gm_spec *s, int id)
{
	return s->where[id].origin != GM_SPEC_DEFAULT;
}

/*
 * Megatron-Core's GPT layer with routed experts: model.experts on the
 * gpt2 layer under training.framework megatron (--num-experts, which
 * replaces the MLP of Megatron's GPT layer by a MoE layer whatever the
 * layer's norm and activation; megatron/core/models/gpt/
 * gpt_layer_specs.py get_gpt_layer_with_transformer_engine_spec).
 */
static bool megatron_gpt_moe(const struct gm_spec *s)
{
	return s->training.framework == GM_FW_MEGATRON &&
	       s->model.architecture == GM_ARCH_GPT2;
}

/* The family's model defaults (Hugging Face's configs: planner/arch/). */
static void model_defaults(struct gm_spec *s)
{
	struct gm_spec_model *m = &s->model;
	const struct gm_family *fam = gm_family(m->architecture);

	if (!given(s, GM_K_FFN))
		m->ffn_hidden_size = fam->defaults.ffn ?
				     fam->defaults.ffn(m->hidden_size) :
				     4 * m->hidden_size;
	if (!given(s, GM_K_KV_HEADS))
		m->kv_heads = m->attention_heads;
	if (!given(s, GM_K_VOCAB))
		m->vocab_size = fam->defaults.vocab;
	if (!given(s, GM_K_MAX_POS))
		m->max_position_embeddings = fam->defaults.max_positions;
	if (!given(s, GM_K_TYPE_VOCAB))
		m->type_vocab_size = fam->defaults.type_vocab;
	if (!given(s, GM_K_TIED))
		m->tied_embeddings = fam->defaults.tied;
	if (!given(s, GM_K_HEAD))
		m->head = fam->defaults.head;
	if (!given(s, GM_K_NUM_LABELS))
		m->num_labels = 2;
	if (!given(s, GM_K_HEAD_DIM))
		m->head_dim = fam->defaults.head_dim;
	/* Megatron's defaults (megatron/training/arguments.py: --moe-
	 * router-topk 2; moe_ffn_hidden_size = ffn_hidden_size unless
	 * given) */
	if (megatron_gpt_moe(s) && m->experts) {
		if (!given(s, GM_K_EXPERTS_PER_TOKEN))
			m->experts_per_token = 2;
		if (!given(s, GM_K_MOE_FFN))
			m->moe_ffn_hidden_size = m->ffn_hidden_size;
	}
	if (!(fam->keys & GM_FK_MOE))
		return;
	if (!given(s, GM_K_EXPERTS))
		m->experts = fam->defaults.experts;
	if (!given(s, GM_K_EXPERTS_PER_TOKEN))
		m->experts_per_token = fam->defaults.experts_per_token;
	if (!given(s, GM_K_MOE_FFN))
		m->moe_ffn_hidden_size = m->ffn_hidden_size;
	if (!given(s, GM_K_SHARED_EXPERTS))
		m->shared_experts = fam->defaults.shared_experts;
	if (!given(s, GM_K_DENSE_LAYERS))
		m->dense_layers = fam->defaults.dense_layers;
	if (!(fam->keys & GM_FK_MLA))
		return;
	if (!given(s, GM_K_Q_LORA_RANK))
		m->q_lora_rank = fam->defaults.mla.q_lora_rank;
	if (!given(s, GM_K_KV_LORA_RANK))
		m->kv_lora_rank = fam->defaults.mla.kv_lora_rank;
	if (!given(s, GM_K_QK_ROPE_HEAD_DIM))
		m->qk_rope_head_dim = fam->defaults.mla.qk_rope_head_dim;
	if (!given(s, GM_K_QK_NOPE_HEAD_DIM))
		m->qk_nope_head_dim = fam->defaults.mla.qk_nope_head_dim;
	if (!given(s, GM_K_V_HEAD_DIM))
		m->v_head_dim = fam->defaults.mla.v_head_dim;
}

/*
 * PEFT's default LoRA targets per model type (peft/utils/constants.py,
 * TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING, PEFT 0.20).
 */

/*
 * How the run is built: each default is what the planner modelled
 * before these keys existed (a plain PyTorch step as tools/measure runs
 * it: model(..., use_cache=False), only the loss kept), except FSDP
 * with *-mixed, which is a MixedPrecisionPolicy (param-dtype) as users
 * run it. A DeepSpeed JSON implies framework deepspeed.
 */
static void recipe_defaults(struct gm_spec *s)
{
	struct gm_spec_training *t = &s->training;

	if (!given(s, GM_K_FRAMEWORK) && t->deepspeed_config[0])
		t->framework = GM_FW_DEEPSPEED;
	if (!given(s, GM_K_USE_CACHE))
		t->use_cache = GM_CACHE_FALSE;
	if (!given(s, GM_K_LORA_RANK))
		t->lora_rank = 8; /* peft LoraConfig.r */
	if (!given(s, GM_K_LORA_TARGETS)) {
		t->n_lora_targets = 0;
		for (int i = 0; i < 2; i++) {
			const char *n = gm_family(s->model.architecture)->
					defaults.lora_targets[i];
			if (n)
				gm_text_copy(t->lora_targets[t->n_lora_targets++],
					     sizeof(t->lora_targets[0]), n);
		}
	}
	/* FSDP with *-mixed: a MixedPrecisionPolicy (torch/distributed/
	 * fsdp/_fully_shard/_fsdp_api.py), as Lightning, accelerate and
	 * torchtitan build it (planner/README.md, Several GPUs) */
	if (!given(s, GM_K_FSDP_MP))
		s->parallelism.fsdp_mixed_precision = GM_FSDP_MP_PARAM_DTYPE;
	if (!given(s, GM_K_VPP))
		s->parallelism.virtual_pipeline_stages = 1;
	if (!given(s, GM_K_EP))
		s->parallelism.expert_parallel = 1;
	/* Megatron-LM's add_bias_linear (transformer_config.py): true
	 * unless --disable-bias-linear */
	if (!given(s, GM_K_ADD_BIAS_LINEAR))
		s->model.add_bias_linear = true;
}

/* The KV-cache dtype that matches the weights' precision. */
static enum gm_kv_dtype kv_of(enum gm_precision p)
{
	switch (p) {
	case GM_PREC_FP16_MIXED:
	case GM_PREC_FP16_TRUE: return GM_KV_FP16;
	case GM_PREC_BF16_MIXED:
	case GM_PREC_BF16_TRUE: return GM_KV_BF16;
	case GM_PREC_FP32: break;
	}
	return GM_KV_FP32;
}

void gm__spec_defaults(struct gm_spec *s)
{
	uint64_t seq;

	/* task (train) and architecture (llama) are 0 already. */
	model_defaults(s);
	seq = s->model.max_position_embeddings ? s->model.max_position_embeddings
					      : 2048;
	if (!given(s, GM_K_MICRO_BATCH))
		s->training.micro_batch_size = 1;
	if (!given(s, GM_K_SEQ_LEN))
		s->training.sequence_length = seq;
	if (!given(s, GM_K_PRECISION))
		s->training.precision = GM_PREC_BF16_MIXED;
	if (!given(s, GM_K_ATTENTION))
		s->training.attention = GM_ATTN_SDPA;
	if (!given(s, GM_K_INF_PRECISION))
		s->inference.precision = GM_PREC_BF16_TRUE;
	if (!given(s, GM_K_BATCH))
		s->inference.batch_size = 1;
	if (!given(s, GM_K_PROMPT))
		s->inference.prompt_length = seq;
	if (!given(s, GM_K_KV_DTYPE))
		s->inference.kv_cache_dtype = kv_of(s->inference.precision);
	if (!given(s, GM_K_DP))
		s->parallelism.data_parallel = 1;
	if (!given(s, GM_K_TP))
		s->parallelism.tensor_parallel = 1;
	if (!given(s, GM_K_PP))
		s->parallelism.pipeline_parallel = 1;
	recipe_defaults(s);
}

/* The shape keys every non-custom architecture must give. */
static int check_required(struct gm__spec_ctx *c)
{
	static const int need[] = {GM_K_LAYERS, GM_K_HIDDEN, GM_K_HEADS};
	const struct gm_spec *s = c->spec;

	if (!given(s, GM_K_MODEL))
		return gm_diag_set(c->diag, GM_EINVAL,
				   "%s:%u:%u: missing the 'model' section",
				   c->path, c->root_line, c->root_col);
	if (!gm_family(s->model.architecture)->shaped) {
		if (!given(s, GM_K_PARAMETERS))
			return gm__spec_blame(c, GM_K_ARCH,
					      "'%s' needs model.parameters "
					      "(the parameter count)",
					      gm_arch_name(s->model.architecture));
		return 0;
	}
	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++) {
		if (!given(s, need[i]))
			return gm__spec_blame(c, GM_K_MODEL,
					      "missing '%s' (required for "
					      "architecture '%s')",
					      gm__spec_keys[need[i]].name,
					      gm_arch_name(s->model.architecture));
	}
	return 0;
}

/*
 * The families that take the optional keys of mask (GM_FK_*; shaped:
 * those with a layout only) into buf: "'bert'" or "'a' or 'b'".
 */
static const char *takers(unsigned mask, bool shaped, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = 0;
	for (int a = 0; a < GM_ARCH_N; a++) {
		const struct gm_family *f = gm_family((enum gm_arch)a);

		if (!(f->keys & mask) || (shaped && !f->shaped))
			continue;
		n += (size_t)snprintf(buf + n, n < len ? len - n : 0,
				      "%s'%s'", n ? " or " : "", f->name);
	}
	return buf;
}

/* Keys that mean something for some families only. */
static int check_arch_keys(struct gm__spec_ctx *c)
{
	static const struct {
		int key;
		unsigned mask;
		const char *note;
	} only[] = {
		{GM_K_TYPE_VOCAB, GM_FK_TYPE_VOCAB, ""},
		{GM_K_QKV_BIAS, GM_FK_QKV_BIAS,
		 " (gpt2 and bert always have biases)"},
		{GM_K_ACT_PER_TOKEN, GM_FK_ACT_PER_TOKEN, ""},
		{GM_K_EXPERTS, GM_FK_MOE,
		 " (or gpt2 under training.framework megatron)"},
		{GM_K_EXPERTS_PER_TOKEN, GM_FK_MOE,
		 " (or gpt2 under training.framework megatron)"},
		{GM_K_MOE_FFN, GM_FK_MOE,
		 " (or gpt2 under training.framework megatron)"},
		{GM_K_SHARED_EXPERTS, GM_FK_SHARED_EXPERTS, ""},
		{GM_K_HEAD_DIM, GM_FK_HEAD_DIM, ""},
		{GM_K_SLIDING_WINDOW, GM_FK_SLIDING_WINDOW, ""},
		{GM_K_DENSE_LAYERS, GM_FK_DENSE_LAYERS, ""},
		{GM_K_Q_LORA_RANK, GM_FK_MLA, ""},
		{GM_K_KV_LORA_RANK, GM_FK_MLA, ""},
		{GM_K_QK_ROPE_HEAD_DIM, GM_FK_MLA, ""},
		{GM_K_QK_NOPE_HEAD_DIM, GM_FK_MLA, ""},
		{GM_K_V_HEAD_DIM, GM_FK_MLA, ""},
	};
	const struct gm_spec *s = c->spec;
	const struct gm_family *fam = gm_family(s->model.architecture);
	char names[256];

	for (size_t i = 0; i < sizeof(only) / sizeof(only[0]); i++) {
		if (!given(s, only[i].key) || (fam->keys & only[i].mask))
			continue;
		if (only[i].mask == GM_FK_MOE && megatron_gpt_moe(s)) {
			if (s->model.experts)
				continue;
			return gm__spec_blame(c, only[i].key, "needs "
					      "model.experts (Megatron's GPT "
					      "layer with routed experts)");
		}
		if (!*takers(only[i].mask, false, names, sizeof(names)))
			return gm__spec_blame(c, only[i].key, "no architecture "
					      "takes it yet");
		return gm__spec_blame(c, only[i].key, "applies to "
				      "architecture %s only%s", names,
				      only[i].note);
	}
	if (fam->train_only && s->task == GM_TASK_INFERENCE)
		return gm__spec_blame(c, given(s, GM_K_TASK) ? GM_K_TASK :
				      GM_K_ARCH, "inference of architecture "
				      "'%s' is not modelled yet by `gpumem "
				      "plan` (training is)", fam->name);
	if (given(s, GM_K_ACT_PER_TOKEN) && s->task != GM_TASK_TRAIN)
		return gm__spec_blame(c, GM_K_ACT_PER_TOKEN, "applies to "
				      "task 'train' only (a forward pass "
				      "without autograd saves no "
				      "activations)");
	if (s->model.head == GM_HEAD_MASKED_LM &&
	    !(fam->keys & GM_FK_MASKED_LM))
		return gm__spec_blame(c, GM_K_HEAD, "masked-lm needs "
				      "architecture %s",
				      takers(GM_FK_MASKED_LM, true, names,
					     sizeof(names)));
	if (((fam->keys & GM_FK_MOE) || megatron_gpt_moe(s)) &&
	    s->model.experts_per_token > s->model.experts)
		return gm__spec_blame(c, given(s, GM_K_EXPERTS_PER_TOKEN) ?
				      GM_K_EXPERTS_PER_TOKEN : GM_K_EXPERTS,
				      "%llu experts per token of %llu experts; "
				      "must be at most model.experts",
				      (unsigned long long)
					      s->model.experts_per_token,
				      (unsigned long long)s->model.experts);
	/* the rotary embedding turns pairs of elements: transformers'
	 * inv_freq has dim / 2 entries (arange(0, dim, 2)) and cos, sin
	 * are two copies of them side by side, which an odd
	 * qk_rope_head_dim cannot multiply */
	if ((fam->keys & GM_FK_MLA) && s->model.qk_rope_head_dim % 2)
		return gm__spec_blame(c, given(s, GM_K_QK_ROPE_HEAD_DIM) ?
				      GM_K_QK_ROPE_HEAD_DIM : GM_K_ARCH,
				      "%llu is odd; the rotary embedding "
				      "turns pairs of elements (must be "
				      "even)", (unsigned long long)
				      s->model.qk_rope_head_dim);
	return 0;
}

/*
 * The key to blame when a rule ties key a to key b: a, unless a came
 * from model.hf_config and b was written in the spec (the spec's key
 * is the one that contradicts the config).
 */
static int blame_pair(const struct gm_spec *s, int a, int b)
{
	enum gm_spec_origin oa = s->where[a].origin, ob = s->where[b].origin;

	if (oa == GM_SPEC_HF && (ob == GM_SPEC_FILE || ob == GM_SPEC_SET))
		return b;
	return a;
}

/*
 * "A does not divide B" about keys a (the divisor) and b: blamed on a,
 * or on b when a came from model.hf_config and b from the spec.
 */
static int not_divide(struct gm__spec_ctx *c, int a, int b, uint64_t va,
		      uint64_t vb)
{
	if (blame_pair(c->spec, a, b) == b)
		return gm__spec_blame(c, b, "%llu is not a multiple of %s %llu "
				      "(from %s)", (unsigned long long)vb,
				      gm__spec_keys[a].name,
				      (unsigned long long)va,
				      c->spec->where[a].field);
	return gm__spec_blame(c, a, "%llu does not divide %s %llu",
			      (unsigned long long)va, gm__spec_keys[b].name,
			      (unsigned long long)vb);
}

/* Attention heads split the hidden size; kv heads group the heads. */
static int check_heads(struct gm__spec_ctx *c)
{
	const struct gm_spec_model *m = &c->spec->model;

	if (!gm_family(m->architecture)->shaped && !m->attention_heads)
		return 0;
	if (m->hidden_size % m->attention_heads)
		return not_divide(c, GM_K_HEADS, GM_K_HIDDEN,
				  m->attention_heads, m->hidden_size);
	if (m->attention_heads % m->kv_heads)
		return not_divide(c, GM_K_KV_HEADS, GM_K_HEADS, m->kv_heads,
				  m->attention_heads);
	return 0;
}

/*
 * Tensor parallel splits heads, kv heads and the FFN across ranks
 * (Megatron-LM's column/row parallel layers), so it must divide each.
 */
static int check_tensor_parallel(struct gm__spec_ctx *c)
{
	const struct gm_spec_model *m = &c->spec->model;
	uint64_t tp = c->spec->parallelism.tensor_parallel;
	const struct {
		uint64_t v;
		const char *what;
	} split[] = {
		{m->attention_heads, "model.attention_heads"},
		{m->kv_heads, "model.kv_heads"},
		{m->ffn_hidden_size, "model.ffn_hidden_size"},
	};

	if (!gm_family(m->architecture)->shaped)
		return 0;
	for (size_t i = 0; i < sizeof(split) / sizeof(split[0]); i++) {
		if (split[i].v % tp)
			return gm__spec_blame(c, GM_K_TP, "%llu does not divide "
					      "%s %llu", (unsigned long long)tp,
					      split[i].what,
					      (unsigned long long)split[i].v);
	}
	return 0;
}

static int check_parallel(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;
	uint64_t dp = s->parallelism.data_parallel;
	uint64_t pp = s->parallelism.pipeline_parallel;
	int rc = check_tensor_parallel(c);

	if (rc)
		return rc;
	/* Megatron's sequence parallelism splits the non-tensor-parallel
	 * regions within a tensor-parallel group: nothing to split at 1 */
	if (s->parallelism.sequence_parallel &&
	    s->parallelism.tensor_parallel <= 1)
		return gm__spec_blame(c, GM_K_SP, "needs tensor_parallel above "
				      "1 (it splits activations within a "
				      "tensor-parallel group)");
	if (s->model.layers && pp > s->model.layers)
		return gm__spec_blame(c, GM_K_PP, "%llu stages for %llu layers; "
				      "must be at most model.layers",
				      (unsigned long long)pp,
				      (unsigned long long)s->model.layers);
	if (s->task == GM_TASK_TRAIN && t->global_batch_size &&
	    t->global_batch_size % (t->micro_batch_size * dp))
		return gm__spec_blame(c, GM_K_GLOBAL_BATCH, "%llu is not a "
				      "multiple of micro_batch_size %llu * "
				      "data_parallel %llu = %llu",
				      (unsigned long long)t->global_batch_size,
				      (unsigned long long)t->micro_batch_size,
				      (unsigned long long)dp,
				      (unsigned long long)(t->micro_batch_size *
							   dp));
	return 0;
}

/* Families with learned positions (gpt2, bert) have one embedding per
 * token position. */
static int check_lengths(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	uint64_t max = s->model.max_position_embeddings;
	uint64_t total = s->inference.prompt_length + s->inference.generate_length;

	if (!gm_family(s->model.architecture)->learned_positions)
		return 0;
	if (s->task == GM_TASK_TRAIN && s->training.sequence_length > max)
		return gm__spec_blame(c, GM_K_SEQ_LEN, "%llu is more than "
				      "model.max_position_embeddings %llu",
				      (unsigned long long)
					      s->training.sequence_length,
				      (unsigned long long)max);
	if (s->task == GM_TASK_INFERENCE && total > max)
		return gm__spec_blame(c, given(s, GM_K_GENERATE) ? GM_K_GENERATE
								 : GM_K_PROMPT,
				      "prompt_length + generate_length = %llu "
				      "is more than "
				      "model.max_position_embeddings %llu",
				      (unsigned long long)total,
				      (unsigned long long)max);
	return 0;
}

/* Inference keeps the weights in one dtype: no *-mixed. */
static int check_inference(struct gm__spec_ctx *c)
{
	enum gm_precision p = c->spec->inference.precision;

	if (p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED)
		return gm__spec_blame(c, GM_K_INF_PRECISION, "'%s' is a "
				      "training precision; use fp32, "
				      "fp16-true or bf16-true",
				      gm_precision_name(p));
	return 0;
}


static bool is_mixed(enum gm_precision p)
{
	return p == GM_PREC_FP16_MIXED || p == GM_PREC_BF16_MIXED;
}

/*
 * The keys of one framework (models/README.md, "How the run is built"):
 * DeepSpeed's JSON and offload, Megatron-LM's distributed optimizer and
 * interleaved schedule, FSDP's mixed-precision policy under PyTorch.
 */
static int check_framework(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_parallel *p = &s->parallelism;
	enum gm_framework fw = s->training.framework;
	enum gm_precision pr = s->training.precision;

	if (given(s, GM_K_DS_CONFIG) && fw != GM_FW_DEEPSPEED)
		return gm__spec_blame(c, GM_K_DS_CONFIG, "needs "
				      "training.framework deepspeed, not "
				      "'%s'", gm_framework_name(fw));
	if (p->offload_optimizer != GM_OFFLOAD_NONE && fw != GM_FW_DEEPSPEED)
		return gm__spec_blame(c, GM_K_OFFLOAD_OPT, "is DeepSpeed ZeRO's "
				      "offload: needs training.framework "
				      "deepspeed (FSDP's CPUOffloadPolicy is "
				      "not modelled yet)");
	if (p->offload_parameters != GM_OFFLOAD_NONE && fw != GM_FW_DEEPSPEED)
		return gm__spec_blame(c, GM_K_OFFLOAD_PARAM, "is DeepSpeed "
				      "ZeRO-3's offload: needs "
				      "training.framework deepspeed");
	/* DeepSpeed: offload_optimizer from stage 1, offload_param only
	 * with stage 3 (runtime/zero/config.py; stage3.py) */
	if (p->offload_optimizer != GM_OFFLOAD_NONE && p->zero_stage < 1)
		return gm__spec_blame(c, GM_K_OFFLOAD_OPT, "needs zero_stage 1, "
				      "2 or 3 (ZeRO-Offload partitions the "
				      "optimizer)");
	if (p->offload_parameters != GM_OFFLOAD_NONE && p->zero_stage != 3)
		return gm__spec_blame(c, GM_K_OFFLOAD_PARAM, "needs zero_stage "
				      "3 (only ZeRO-3 partitions parameters)");
	if (p->distributed_optimizer && fw != GM_FW_MEGATRON)
		return gm__spec_blame(c, GM_K_DIST_OPT, "is Megatron-LM's "
				      "(--use-distributed-optimizer): needs "
				      "training.framework megatron; the "
				      "others shard with zero_stage");
	if (fw == GM_FW_MEGATRON && p->zero_stage)
		return gm__spec_blame(c, GM_K_ZERO, "Megatron-LM shards the "
				      "optimizer with distributed_optimizer: "
				      "true, not zero_stage");
	if (p->virtual_pipeline_stages > 1 && fw != GM_FW_MEGATRON)
		return gm__spec_blame(c, GM_K_VPP, "is Megatron-LM's "
				      "interleaved 1F1B: needs "
				      "training.framework megatron");
	if (p->virtual_pipeline_stages > 1 && p->pipeline_parallel < 2)
		return gm__spec_blame(c, GM_K_VPP, "needs pipeline_parallel "
				      "above 1");
	/* Megatron-LM: each model chunk holds the same number of layers
	 * (megatron/core/transformer/transformer_block.py,
	 * get_num_layers_to_build) */
	if (p->virtual_pipeline_stages > 1 && s->model.layers %
	    (p->pipeline_parallel * p->virtual_pipeline_stages))
		return gm__spec_blame(c, GM_K_VPP, "%llu stages * %llu chunks "
				      "do not divide model.layers %llu",
				      (unsigned long long)p->pipeline_parallel,
				      (unsigned long long)
					      p->virtual_pipeline_stages,
				      (unsigned long long)s->model.layers);
	if (given(s, GM_K_FSDP_MP) && (fw != GM_FW_PYTORCH ||
				       p->zero_stage < 2 || !is_mixed(pr)))
		return gm__spec_blame(c, GM_K_FSDP_MP, "applies to FSDP "
				      "(zero_stage 2 or 3) with a *-mixed precision "
				      "under framework pytorch");
	/* DeepSpeed and Megatron-LM keep fp32 master weights for 16-bit
	 * training; the spec names that *-mixed */
	if (fw != GM_FW_PYTORCH && (pr == GM_PREC_FP16_TRUE ||
				    pr == GM_PREC_BF16_TRUE))
		return gm__spec_blame(c, GM_K_PRECISION, "%s keeps fp32 master "
				      "weights with 16-bit training: write "
				      "%s", gm_framework_name(fw),
				      pr == GM_PREC_FP16_TRUE ? "fp16-mixed"
							      : "bf16-mixed");
	if (fw != GM_FW_PYTORCH && (s->training.optimizer == GM_OPT_ADAMW_8BIT ||
				    s->training.optimizer == GM_OPT_ADAFACTOR))
		return gm__spec_blame(c, GM_K_OPTIMIZER, "'%s' under %s is not "
				      "modelled yet",
				      gm_optimizer_name(s->training.optimizer),
				      gm_framework_name(fw));
	return 0;
}

static int check_adapter(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;
	const char *const *names = gm_family(s->model.architecture)->linears;

	if (s->task != GM_TASK_TRAIN)
		return 0; /* the training section is ignored (warned) */
	if (t->adapter == GM_ADAPTER_NONE) {
		if (given(s, GM_K_LORA_RANK))
			return gm__spec_blame(c, GM_K_LORA_RANK, "applies to "
					      "adapter lora or qlora");
		if (given(s, GM_K_LORA_TARGETS))
			return gm__spec_blame(c, GM_K_LORA_TARGETS, "applies to "
					      "adapter lora or qlora");
		return 0;
	}
	if (s->model.architecture == GM_ARCH_CUSTOM)
		return gm__spec_blame(c, GM_K_ADAPTER, "'%s' on custom needs a "
				      "model shape (modelled: a causal-lm "
				      "head on llama, qwen3 or gpt2)",
				      gm_adapter_name(t->adapter));
	for (unsigned i = 0; i < t->n_lora_targets; i++) {
		const char *n = t->lora_targets[i];
		bool ok = false;
		char list[160] = "";

		if (!strcmp(n, "all-linear")) {
			if (t->n_lora_targets > 1)
				return gm__spec_blame(c, GM_K_LORA_TARGETS,
						      "'all-linear' stands "
						      "alone (PEFT replaces "
						      "the list with every "
						      "linear but the head)");
			continue;
		}
		for (int j = 0; names[j]; j++) {
			ok = ok || !strcmp(n, names[j]);
			strcat(list, j ? ", " : "");
			strcat(list, names[j]);
		}
		if (!ok) {
			/* at the item, where the spec file lists it */
			struct gm_spec_where *w =
				&c->spec->where[GM_K_LORA_TARGETS];
			struct gm_spec_where kept = *w;
			int rc;

			if (w->origin == GM_SPEC_FILE &&
			    t->lora_target_at[i][0]) {
				w->line = t->lora_target_at[i][0];
				w->column = t->lora_target_at[i][1];
			}
			rc = gm__spec_blame(c, GM_K_LORA_TARGETS, "'%s' is not "
					    "a linear layer of %s; expected "
					    "some of: %s, or all-linear", n,
					    gm_arch_name(s->model.architecture),
					    list);
			*w = kept;
			return rc;
		}
	}
	return 0;
}

/*
 * training.loop where it means nothing (planner/loop.c models it):
 * keep-outputs needs a loop that receives the model's outputs, which a
 * pipeline schedule never hands back (torch.distributed.pipelining,
 * PipelineSchedule.step returns the losses). Under framework megatron
 * check_megatron() refuses the Hugging Face loop keys altogether.
 */
static int check_loop(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;

	if (s->task != GM_TASK_TRAIN)
		return 0;
	if (t->loop == GM_LOOP_KEEP_OUTPUTS &&
	    s->parallelism.pipeline_parallel > 1)
		return gm__spec_blame(c, GM_K_LOOP, "'keep-outputs' with "
				      "pipeline_parallel %llu: a pipeline "
				      "schedule returns only the losses, no "
				      "outputs to keep",
				      (unsigned long long)
				      s->parallelism.pipeline_parallel);
	if (t->loop == GM_LOOP_LIGHTNING &&
	    s->parallelism.pipeline_parallel > 1)
		return gm__spec_blame(c, GM_K_LOOP, "'lightning' with "
				      "pipeline_parallel %llu: Lightning "
				      "has no pipeline-parallel strategy "
				      "(lightning 2.6.6 pytorch/strategies: "
				      "ddp, fsdp, model_parallel, deepspeed, "
				      "xla, single device)",
				      (unsigned long long)
				      s->parallelism.pipeline_parallel);
	return 0;
}

/*
 * training.optimizer_implementation names one of torch.optim's
 * implementations (torch/optim/optimizer.py, PyTorch 2.11.0: "for-loop",
 * "foreach", "fused"); adam, adamw (torch/optim/adam.py) and sgd
 * (torch/optim/sgd.py) have all three. Where the step is not
 * torch.optim's the key is refused: bitsandbytes' AdamW8bit,
 * transformers' Adafactor, the DeepSpeed JSON's optimizer (DeepSpeed's
 * FusedAdam or DeepSpeedCPUAdam, engine.py _configure_basic_optimizer)
 * and Megatron-LM's (Transformer Engine's or Apex's FusedAdam,
 * megatron/core/optimizer/__init__.py at d98e8a6).
 */
static int check_opt_impl(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;

	if (!given(s, GM_K_OPT_IMPL) || s->task != GM_TASK_TRAIN)
		return 0;
	if (t->framework == GM_FW_MEGATRON)
		return gm__spec_blame(c, GM_K_OPT_IMPL, "applies to "
				      "torch.optim; Megatron-LM steps its own "
				      "optimizer (Transformer Engine's or "
				      "Apex's FusedAdam): leave it out");
	if (t->optimizer == GM_OPT_ADAMW_8BIT ||
	    t->optimizer == GM_OPT_ADAFACTOR)
		return gm__spec_blame(c, GM_K_OPT_IMPL, "applies to "
				      "torch.optim's adam, adamw, sgd and "
				      "sgd-momentum, not to '%s' (%s)",
				      gm_optimizer_name(t->optimizer),
				      t->optimizer == GM_OPT_ADAFACTOR ?
				      "transformers' Adafactor" :
				      "bitsandbytes' AdamW8bit");
	if (t->framework == GM_FW_DEEPSPEED &&
	    s->where[GM_K_OPTIMIZER].origin == GM_SPEC_DEEPSPEED)
		return gm__spec_blame(c, GM_K_OPT_IMPL, "applies to a "
				      "torch.optim client optimizer; the "
				      "DeepSpeed JSON's optimizer is "
				      "DeepSpeed's own (FusedAdam, or "
				      "DeepSpeedCPUAdam with offload): leave "
				      "it out");
	return 0;
}

/*
 * training.framework megatron (model_megatron.c): Megatron-Core's GPT
 * model with the Llama layer (SwiGLU, RMSNorm, rotary) or the GPT-2 one
 * (GeLU, LayerNorm, learned positions), Adam. Megatron runs its own
 * loop, so the Hugging Face loop keys do not apply; what it has but the
 * planner does not model yet is refused here.
 */
static int check_megatron(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;
	enum gm_arch a = s->model.architecture;

	if (a != GM_ARCH_LLAMA && a != GM_ARCH_GPT2 && a != GM_ARCH_MIXTRAL &&
	    a != GM_ARCH_QWEN3_MOE)
		return gm__spec_blame(c, given(s, GM_K_ARCH) ? GM_K_ARCH :
				      GM_K_FRAMEWORK, "'%s' under training."
				      "framework megatron is not modelled yet "
				      "by `gpumem plan` (Megatron-Core's GPT "
				      "model with the llama or gpt2 layer, "
				      "with or without routed experts, is: "
				      "llama, gpt2, mixtral, qwen3-moe)",
				      gm_arch_name(a));
	/* Megatron-Core's MoE layer refuses tensor parallelism without
	 * sequence parallelism in training (megatron/core/transformer/moe/
	 * moe_layer.py MoELayer.forward) */
	if (s->model.experts && s->parallelism.tensor_parallel > 1 &&
	    !s->parallelism.sequence_parallel)
		return gm__spec_blame(c, GM_K_TP, "%llu with model.experts "
				      "needs parallelism.sequence_parallel: "
				      "true (Megatron-Core's MoE layer raises "
				      "without it in training)",
				      (unsigned long long)
				      s->parallelism.tensor_parallel);
	if (t->optimizer != GM_OPT_ADAM && t->optimizer != GM_OPT_ADAMW)
		return gm__spec_blame(c, GM_K_OPTIMIZER, "'%s' under megatron "
				      "is not modelled yet (adam, adamw)",
				      gm_optimizer_name(t->optimizer));
	if (t->adapter != GM_ADAPTER_NONE)
		return gm__spec_blame(c, GM_K_ADAPTER, "'%s' under megatron is "
				      "not modelled yet",
				      gm_adapter_name(t->adapter));
	/* the interleaved schedule runs groups of pipeline_parallel
	 * micro-batches through each chunk and raises when a step has
	 * fewer (schedules.py forward_backward_pipelining_with_
	 * interleaving, microbatch_group_size_per_vp_stage) */
	if (s->parallelism.virtual_pipeline_stages > 1) {
		uint64_t per = t->micro_batch_size *
			       (s->parallelism.data_parallel ?
				s->parallelism.data_parallel : 1);
		uint64_t m = t->global_batch_size && per ?
			     t->global_batch_size / per : 1;
		if (m < s->parallelism.pipeline_parallel)
			return gm__spec_blame(c, GM_K_VPP, "needs at least "
					      "pipeline_parallel (%llu) "
					      "micro-batches per step, not "
					      "%llu (Megatron-LM's interleaved "
					      "schedule; set training."
					      "global_batch_size)",
					      (unsigned long long)s->
					      parallelism.pipeline_parallel,
					      (unsigned long long)m);
	}
	if (given(s, GM_K_LOOP))
		return gm__spec_blame(c, GM_K_LOOP, "applies to framework "
				      "pytorch; Megatron-LM runs its own loop "
				      "(pretrain_gpt.py): leave it out");
	if (given(s, GM_K_USE_CACHE))
		return gm__spec_blame(c, GM_K_USE_CACHE, "applies to framework "
				      "pytorch (Hugging Face's KV cache); "
				      "Megatron-Core builds none in training: "
				      "leave it out");
	return 0;
}

/*
 * What of training.adapter the step emitter plans (planner/step_adapter.c):
 * LoRA and QLoRA (with a 16-bit compute dtype) on one GPU over a causal
 * LM whose family's block plans frozen linears with LoRA (family.h
 * adapter: llama, qwen3, gpt2), with
 * Adam(W) or SGD over the adapters. The rest is refused by the key that
 * asks for it.
 */
static int adapter_modelled(struct gm__spec_ctx *c, const char *tail)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;
	const struct gm_spec_parallel *p = &s->parallelism;
	const char *an = gm_adapter_name(t->adapter);

	if (t->adapter == GM_ADAPTER_NONE)
		return 0;
	if (t->adapter == GM_ADAPTER_QLORA && t->precision == GM_PREC_FP32)
		return gm__spec_blame(c, GM_K_PRECISION, "'fp32' with training."
				      "adapter 'qlora' %s (the 4-bit linears "
				      "compute in 16 bits: bf16-mixed or "
				      "fp16-mixed)", tail);
	if (!gm_family(s->model.architecture)->adapter ||
	    s->model.head != GM_HEAD_CAUSAL_LM)
		return gm__spec_blame(c, GM_K_ADAPTER, "'%s' on %s with head "
				      "%s %s (modelled: a causal-lm head on "
				      "llama, qwen3 or gpt2)", an,
				      gm_arch_name(s->model.architecture),
				      gm_head_name(s->model.head), tail);
	if (p->data_parallel > 1 || p->tensor_parallel > 1 ||
	    p->pipeline_parallel > 1 || p->zero_stage > 0)
		return gm__spec_blame(c, p->data_parallel > 1 ? GM_K_DP :
				      p->tensor_parallel > 1 ? GM_K_TP :
				      p->pipeline_parallel > 1 ? GM_K_PP :
				      GM_K_ZERO, "with training.adapter '%s' "
				      "(more than one GPU) %s", an, tail);
	if (t->optimizer == GM_OPT_ADAFACTOR ||
	    t->optimizer == GM_OPT_ADAMW_8BIT)
		return gm__spec_blame(c, GM_K_OPTIMIZER, "'%s' over training."
				      "adapter '%s' %s",
				      gm_optimizer_name(t->optimizer), an,
				      tail);
	return 0;
}

/*
 * Values the planner reads but does not model yet are refused, so no
 * key is accepted and then ignored (planner/README.md, "Not modelled").
 * Their analytic model-state rows exist (planner/recipe/); the step
 * emitter does not use them yet.
 */
/*
 * What of a DeepSpeed run the step emitter (planner/step_ds.c) does not
 * hold: nvme offload (its swap buffers, runtime/swap_tensor/), stage 0
 * with fp32 (the client optimizer runs unwrapped) or with the JSON's
 * own optimizer (FP16_Optimizer's flat groups, engine.py
 * _configure_fp16_optimizer), and DeepSpeed's pipeline and tensor
 * parallel engines.
 */
static int check_ds_modelled(struct gm__spec_ctx *c, const char *tail)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_parallel *p = &s->parallelism;

	if (p->offload_optimizer == GM_OFFLOAD_NVME)
		return gm__spec_blame(c, GM_K_OFFLOAD_OPT, "'nvme' (DeepSpeed's "
				      "swap buffers) %s", tail);
	if (p->offload_parameters == GM_OFFLOAD_NVME)
		return gm__spec_blame(c, GM_K_OFFLOAD_PARAM, "'nvme' (DeepSpeed's "
				      "swap buffers) %s", tail);
	if (p->zero_stage == 0 && s->training.precision == GM_PREC_FP32)
		return gm__spec_blame(c, GM_K_ZERO, "0 with fp32 under "
				      "DeepSpeed (the client optimizer "
				      "unwrapped) %s", tail);
	if (p->zero_stage == 0 &&
	    s->where[GM_K_OPTIMIZER].origin == GM_SPEC_DEEPSPEED)
		return gm__spec_blame(c, GM_K_OPTIMIZER, "the DeepSpeed JSON's "
				      "optimizer at ZeRO stage 0 "
				      "(FP16_Optimizer's flat groups) %s",
				      tail);
	if (p->tensor_parallel > 1 || p->pipeline_parallel > 1)
		return gm__spec_blame(c, p->tensor_parallel > 1 ? GM_K_TP
							       : GM_K_PP,
				      "above 1 under DeepSpeed (its pipeline "
				      "and tensor-parallel engines) %s", tail);
	/* the client optimizer one tensor at a time over DeepSpeed's flat
	 * partitions: not emitted (step_ds.c emits foreach and fused) */
	if (s->training.optimizer_implementation == GM_OPT_IMPL_FOR_LOOP)
		return gm__spec_blame(c, GM_K_OPT_IMPL, "'for-loop' under "
				      "deepspeed %s", tail);
	return 0;
}

static int check_modelled(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_training *t = &s->training;
	static const char tail[] = "is not modelled yet by `gpumem plan`";

	if (s->task != GM_TASK_TRAIN)
		return 0;
	if (t->framework == GM_FW_MEGATRON)
		return check_megatron(c);
	if (t->framework == GM_FW_DEEPSPEED) {
		int rc = check_ds_modelled(c, tail);

		if (rc)
			return rc;
		/* engine(**batch).loss drops the outputs as the trainer
		 * loop does (the cache rule holds); the other loops and the
		 * adapters are not checked against DeepSpeed's engine yet */
		if (t->loop != GM_LOOP_TRAINER)
			return gm__spec_blame(c, GM_K_LOOP, "'%s' under "
					      "deepspeed %s",
					      gm_loop_name(t->loop), tail);
		if (t->adapter != GM_ADAPTER_NONE)
			return gm__spec_blame(c, GM_K_ADAPTER, "'%s' under "
					      "deepspeed %s",
					      gm_adapter_name(t->adapter), tail);
	}
	return adapter_modelled(c, tail);
}

/*
 * parallelism.expert_parallel: the routed experts of each MoE layer
 * split over that many ranks. Only Megatron-LM does it for the models
 * the planner knows (--expert-model-parallel-size); the rank grid
 * (check_expert_grid) must hold it.
 */
static int check_expert_parallel(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_parallel *p = &s->parallelism;
	uint64_t ep = p->expert_parallel;
	enum gm_framework fw = s->training.framework;

	if (ep <= 1)
		return 0;
	if (!s->model.experts)
		return gm__spec_blame(c, GM_K_EP, "needs a mixture-of-experts "
				      "model (model.experts: architecture "
				      "mixtral, qwen3-moe or deepseek-v3; "
				      "gpt2 with model.experts under "
				      "framework megatron)");
	if (s->model.experts % ep)
		return not_divide(c, GM_K_EP, GM_K_EXPERTS, ep,
				  s->model.experts);
	if (fw == GM_FW_PYTORCH)
		return gm__spec_blame(c, GM_K_EP, "needs training.framework "
				      "megatron: a PyTorch run of a Hugging "
				      "Face MoE model keeps every expert on "
				      "every rank (FSDP and tensor parallel "
				      "shard tensors, not experts); "
				      "Megatron-LM splits experts "
				      "(--expert-model-parallel-size)");
	if (fw == GM_FW_DEEPSPEED)
		return gm__spec_blame(c, GM_K_EP, "needs training.framework "
				      "megatron: DeepSpeed's ZeRO shards "
				      "states, not experts, and DeepSpeed-MoE "
				      "splits experts only of a model built "
				      "from deepspeed.moe.layer.MoE, which a "
				      "Hugging Face model is not; Megatron-LM "
				      "splits experts "
				      "(--expert-model-parallel-size)");
	return 0;
}

/*
 * model.add_bias_linear (Megatron-LM's --disable-bias-linear sets it
 * false; transformer_config.py add_bias_linear, default true): the gpt2
 * layer under Megatron-LM is the only planned one with linear biases.
 */
static int check_bias_linear(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;

	if (given(s, GM_K_ADD_BIAS_LINEAR) &&
	    (s->task != GM_TASK_TRAIN ||
	     s->training.framework != GM_FW_MEGATRON ||
	     s->model.architecture != GM_ARCH_GPT2))
		return gm__spec_blame(c, GM_K_ADD_BIAS_LINEAR, "is Megatron-"
				      "LM's (--disable-bias-linear): needs "
				      "architecture gpt2 (the layer with "
				      "linear biases) under "
				      "training.framework megatron");
	return 0;
}

/*
 * parallelism.expert_tensor_parallel (--expert-tensor-parallel-size):
 * each routed expert's weights split over that many ranks, Megatron-
 * Core's only (a megatron spec with model.experts); not given, it is
 * tensor_parallel, as Megatron defaults it. What Megatron-Core at
 * NVIDIA/Megatron-LM d98e8a6 refuses:
 * - the expert grid, expert-tensor x expert-model x expert-data x
 *   pipeline parallel over the same world, must tile it: world_size
 *   divisible by expert tensor x expert model x pipeline parallel
 *   (megatron/core/parallel_state.py initialize_model_parallel raises
 *   RuntimeError), i.e. expert tensor x expert parallel divides data x
 *   tensor parallel;
 * - linear biases with experts need expert tensor parallel 1
 *   (transformer_config.py __post_init__: "Bias in Moe is only
 *   supported when ETP==1"); the gpt2 layer has them unless
 *   model.add_bias_linear is false (--disable-bias-linear);
 * - each expert's fc1 and fc2 split their ffn width: it must divide
 *   model.moe_ffn_hidden_size (megatron/core/extensions/
 *   transformer_engine.py TEGroupedLinear: divide(output_size,
 *   tp_size), divide(input_size, tp_size)).
 * A violation is blamed on expert_tensor_parallel where given, else on
 * what set it (tensor_parallel) or expert_parallel.
 */
static int check_expert_grid(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;
	const struct gm_spec_parallel *p = &s->parallelism;
	uint64_t ep = p->expert_parallel ? p->expert_parallel : 1;
	uint64_t dp = p->data_parallel ? p->data_parallel : 1;
	uint64_t tp = p->tensor_parallel ? p->tensor_parallel : 1;
	uint64_t etp = gm_spec_expert_tensor_parallel(s);
	uint64_t F = s->model.moe_ffn_hidden_size;
	bool set = given(s, GM_K_ETP);
	int who = set ? GM_K_ETP : GM_K_TP;
	bool moe = s->task == GM_TASK_TRAIN &&
		   s->training.framework == GM_FW_MEGATRON && s->model.experts;

	if (set && !moe)
		return gm__spec_blame(c, GM_K_ETP, "is Megatron-Core's "
				      "(--expert-tensor-parallel-size): "
				      "needs task train under "
				      "training.framework megatron with "
				      "model.experts");
	if (!moe)
		return 0;
	if (dp * tp % (etp * ep))
		return gm__spec_blame(c, set || ep == 1 ? who : GM_K_EP,
				      "expert_tensor_parallel %llu%s x "
				      "expert_parallel %llu = %llu does not "
				      "divide data_parallel %llu x "
				      "tensor_parallel %llu = %llu "
				      "(Megatron-Core's expert ranks: "
				      "parallel_state.py refuses a world "
				      "size that expert tensor x expert x "
				      "pipeline parallel does not divide)",
				      (unsigned long long)etp,
				      set ? "" : " (not given: "
				      "tensor_parallel)",
				      (unsigned long long)ep,
				      (unsigned long long)(etp * ep),
				      (unsigned long long)dp,
				      (unsigned long long)tp,
				      (unsigned long long)(dp * tp));
	if (etp > 1 && s->model.architecture == GM_ARCH_GPT2 &&
	    s->model.add_bias_linear)
		return gm__spec_blame(c, who, "%llu gives expert tensor "
				      "parallel %llu%s, but the gpt2 layer "
				      "has linear biases, which Megatron-"
				      "Core's MoE layer takes only at expert "
				      "tensor parallel 1 "
				      "(transformer_config.py); set "
				      "parallelism.expert_tensor_parallel: 1 "
				      "or model.add_bias_linear: false",
				      (unsigned long long)(set ? etp : tp),
				      (unsigned long long)etp,
				      set ? "" : " (not given: tensor_parallel,"
				      " Megatron's default)");
	if (F % etp)
		return gm__spec_blame(c, who, "%llu does not divide "
				      "model.moe_ffn_hidden_size %llu (each "
				      "expert's linear_fc1 and linear_fc2 "
				      "split their ffn width over expert "
				      "tensor parallel: Megatron-Core's "
				      "TEGroupedLinear)",
				      (unsigned long long)(set ? etp : tp),
				      (unsigned long long)F);
	return 0;
}

/*
 * parallelism.moe_token_dispatcher_type (--moe-token-dispatcher-type):
 * how Megatron-Core's MoE layer moves tokens to the experts' ranks
 * (megatron/core/transformer/moe/token_dispatcher.py at d98e8a6). Only a
 * megatron spec with routed experts has one; allgather and alltoall are
 * planned (megatron_moe.c), flex (DeepEP / HybridEP) is not.
 */
static int check_moe_dispatcher(struct gm__spec_ctx *c)
{
	const struct gm_spec *s = c->spec;

	if (!given(s, GM_K_MOE_DISPATCHER))
		return 0;
	if (s->training.framework != GM_FW_MEGATRON || !s->model.experts)
		return gm__spec_blame(c, GM_K_MOE_DISPATCHER, "is Megatron-"
				      "Core's MoE layer's "
				      "(--moe-token-dispatcher-type): needs "
				      "training.framework megatron and "
				      "model.experts");
	if (s->parallelism.moe_token_dispatcher_type == GM_MOE_DISPATCH_FLEX)
		return gm__spec_blame(c, GM_K_MOE_DISPATCHER, "'flex' (DeepEP "
				      "/ HybridEP) is not modelled yet by "
				      "`gpumem plan` (allgather, alltoall)");
	return 0;
}

int gm__spec_validate(struct gm__spec_ctx *c)
{
	int (*const rules[])(struct gm__spec_ctx *) = {
		check_required, check_arch_keys, check_heads, check_parallel,
		check_lengths,  check_inference, check_framework,
		check_adapter,  check_loop, check_opt_impl,
		check_expert_parallel, check_bias_linear, check_expert_grid,
		check_moe_dispatcher,
	};
	int rc;

	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		rc = rules[i](c);
		if (rc)
			return rc;
	}
	return 0;
}

int gm_spec_check_modelled(const struct gm_spec *spec, struct gm_diag *diag)
{
	struct gm__spec_ctx c = {
		.spec = (struct gm_spec *)spec, .diag = diag,
		.path = spec->path, .root_line = 1, .root_col = 1,
	};

	return check_modelled(&c);
}
