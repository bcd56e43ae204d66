/*
 * spec.c - reading a model spec: the file (UTF-8 checked by hand, then
 * libyaml's document API, whose nodes keep their marks for messages), the
 * key table, type checks of each value, and --set overrides. Defaults and
 * cross-key rules are in spec_rules.c.
 *
 * Layout after netplan's parser (src/parse.c at 009be5b8): one table of keys
 * with offsetof() targets, a generic handler per value kind, messages
 * "file:line:column: ..." (1-based, from the node's start mark).
 *
 * Errors: 0, GM_EINVAL (bad spec or --set; diag says why and where),
 * GM_EIO (unreadable file), GM_ENOMEM.
 */
#include "spec.h"
#include "spec_int.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <yaml.h>

#include "error.h"
#include "hf_config.h"
#include "text.h"
#include "yaml_check.h"

/* A spec is a page of YAML; anything larger is not one. */
#define GM_SPEC_MAX_FILE (1u << 20)

_Static_assert(GM_K_COUNT <= GM_SPEC_MAX_KEYS, "raise GM_SPEC_MAX_KEYS");
_Static_assert(sizeof(enum gm_precision) == sizeof(int), "enum size");

/* ==== Names of the enums, in the order of their C values ==== */

static const char *const task_names[] = {"train", "inference"};
static const char *const head_names[] = {"causal-lm", "masked-lm",
					 "classification"};
static const char *const prec_names[] = {"fp32", "fp16-mixed", "bf16-mixed",
					 "fp16-true", "bf16-true"};
static const char *const opt_names[] = {"adamw", "adam", "sgd",
					"sgd-momentum", "adamw-8bit",
					"adafactor"};
static const char *const ckpt_names[] = {"none", "full", "selective"};
static const char *const attn_names[] = {"flash", "sdpa", "eager"};
static const char *const tpv_names[] = {"sharded", "replicated"};
static const char *const kv_names[] = {"fp32", "fp16", "bf16", "fp8",
				       "int8"};
static const char *const fw_names[] = {"pytorch", "deepspeed", "megatron"};
static const char *const loop_names[] = {"trainer", "keep-outputs",
					 "lightning"};
static const char *const opt_impl_names[] = {"foreach", "fused", "for-loop"};
static const char *const cache_names[] = {"auto", "true", "false"};
static const char *const adapter_names[] = {"none", "lora", "qlora"};
static const char *const fsdp_mp_names[] = {"param-dtype", "autocast"};
static const char *const offload_names[] = {"none", "cpu", "nvme"};
static const char *const dispatcher_names[] = {"allgather", "alltoall",
					       "flex"};

#define GM_N(a) (sizeof(a) / sizeof((a)[0]))

static const char *enum_name(const char *const *names, size_t n, unsigned v)
{
	return v < n ? names[v] : "?";
}

const char *gm_task_name(enum gm_task t)
{
	return enum_name(task_names, GM_N(task_names), t);
}
const char *gm_arch_name(enum gm_arch a)
{
	return enum_name(gm_arch_names, GM_N(gm_arch_names), a);
}
const char *gm_head_name(enum gm_head h)
{
	return enum_name(head_names, GM_N(head_names), h);
}
const char *gm_precision_name(enum gm_precision p)
{
	return enum_name(prec_names, GM_N(prec_names), p);
}
const char *gm_optimizer_name(enum gm_optimizer o)
{
	return enum_name(opt_names, GM_N(opt_names), o);
}
const char *gm_ckpt_name(enum gm_ckpt c)
{
	return enum_name(ckpt_names, GM_N(ckpt_names), c);
}
const char *gm_attn_name(enum gm_attn a)
{
	return enum_name(attn_names, GM_N(attn_names), a);
}
const char *gm_kv_dtype_name(enum gm_kv_dtype k)
{
	return enum_name(kv_names, GM_N(kv_names), k);
}
const char *gm_framework_name(enum gm_framework f)
{
	return enum_name(fw_names, GM_N(fw_names), f);
}
const char *gm_loop_name(enum gm_loop l)
{
	return enum_name(loop_names, GM_N(loop_names), l);
}
const char *gm_opt_impl_name(enum gm_opt_impl i)
{
	return enum_name(opt_impl_names, GM_N(opt_impl_names), i);
}
const char *gm_use_cache_name(enum gm_use_cache u)
{
	return enum_name(cache_names, GM_N(cache_names), u);
}
const char *gm_adapter_name(enum gm_adapter a)
{
	return enum_name(adapter_names, GM_N(adapter_names), a);
}
const char *gm_fsdp_mp_name(enum gm_fsdp_mp m)
{
	return enum_name(fsdp_mp_names, GM_N(fsdp_mp_names), m);
}
const char *gm_offload_name(enum gm_offload o)
{
	return enum_name(offload_names, GM_N(offload_names), o);
}
const char *gm_moe_dispatcher_name(enum gm_moe_dispatcher d)
{
	return enum_name(dispatcher_names, GM_N(dispatcher_names), d);
}

/* ==== The key table (models/README.md documents each key) ==== */

#define OFF(f) offsetof(struct gm_spec, f)
#define SEC(id, nm, par) [id] = {nm, par, GM_KIND_MAP, 0, 0, 0, 0, NULL, 0}
#define STR(id, nm, par, f)                                                 \
	[id] = {nm, par, GM_KIND_STR, OFF(f), sizeof(((struct gm_spec *)0)->f), \
		0, 0, NULL, 0}
#define U64(id, nm, par, f, lo, hi)                                         \
	[id] = {nm, par, GM_KIND_U64, OFF(f), 0, lo, hi, NULL, 0}
#define U32(id, nm, par, f, lo, hi)                                         \
	[id] = {nm, par, GM_KIND_U32, OFF(f), 0, lo, hi, NULL, 0}
#define NUM(id, nm, par, f) [id] = {nm, par, GM_KIND_NUM, OFF(f), 0, 0, 0, NULL, 0}

/*
 * Upper bounds of the shape keys (models/README.md, "Bounds"): far above
 * any real model, low enough that every product the model forms (e.g.
 * layers x 12 x hidden^2 parameters, micro-batch x sequence x hidden
 * activations) stays well inside 64 bits.
 */
/* layers: 8 x the deepest published dense transformer (126 blocks,
 * Llama 3.1 405B); the replay emits every block of every micro-batch in
 * flight, so its time grows with layers (10,000 took 15 s a plan, 34 s
 * a fit on one card; 1,024 take 0.45 s a plan) */
#define GM_MAX_LAYERS   1024u
#define GM_MAX_HIDDEN   (1u << 20)  /* 1,048,576 */
#define GM_MAX_FFN      (1u << 22)  /* 4,194,304 */
#define GM_MAX_HEADS    (1u << 16)  /* 65,536 */
#define GM_MAX_VOCAB    (1u << 24)  /* 16,777,216 */
#define GM_MAX_SEQ      (1u << 20)  /* 1,048,576 tokens */
#define GM_MAX_BATCH    (1u << 16)  /* 65,536 sequences */
#define GM_MAX_GLOBAL   (1u << 30)  /* 1,073,741,824 sequences */
#define GM_MAX_PARALLEL (1u << 16)  /* 65,536 ranks */
#define GM_MAX_LORA_RANK (1u << 16) /* a LoRA rank above the widest layer
				     * is refused by spec_rules.c */
#define GM_MAX_EXPERTS  (1u << 12)  /* 4,096 experts */
#define GM_MAX_HEAD_DIM (1u << 16)  /* 65,536 elements per head */
#define BOOL(id, nm, par, f)                                                \
	[id] = {nm, par, GM_KIND_BOOL, OFF(f), 0, 0, 0, NULL, 0}
#define ENUM(id, nm, par, f, names)                                         \
	[id] = {nm, par, GM_KIND_ENUM, OFF(f), 0, 0, 0, names, GM_N(names)}

const struct gm__spec_keydef gm__spec_keys[GM_K_COUNT] = {
	STR(GM_K_NAME, "name", -1, name),
	ENUM(GM_K_TASK, "task", -1, task, task_names),
	SEC(GM_K_MODEL, "model", -1),
	ENUM(GM_K_ARCH, "architecture", GM_K_MODEL, model.architecture,
	     gm_arch_names),
	U64(GM_K_LAYERS, "layers", GM_K_MODEL, model.layers, 1, GM_MAX_LAYERS),
	U64(GM_K_HIDDEN, "hidden_size", GM_K_MODEL, model.hidden_size,
	    1, GM_MAX_HIDDEN),
	U64(GM_K_FFN, "ffn_hidden_size", GM_K_MODEL, model.ffn_hidden_size,
	    1, GM_MAX_FFN),
	U64(GM_K_HEADS, "attention_heads", GM_K_MODEL, model.attention_heads,
	    1, GM_MAX_HEADS),
	U64(GM_K_KV_HEADS, "kv_heads", GM_K_MODEL, model.kv_heads,
	    1, GM_MAX_HEADS),
	U64(GM_K_VOCAB, "vocab_size", GM_K_MODEL, model.vocab_size,
	    1, GM_MAX_VOCAB),
	U64(GM_K_MAX_POS, "max_position_embeddings", GM_K_MODEL,
	    model.max_position_embeddings, 1, GM_MAX_VOCAB),
	U64(GM_K_TYPE_VOCAB, "type_vocab_size", GM_K_MODEL,
	    model.type_vocab_size, 1, GM_MAX_VOCAB),
	BOOL(GM_K_TIED, "tied_embeddings", GM_K_MODEL, model.tied_embeddings),
	ENUM(GM_K_HEAD, "head", GM_K_MODEL, model.head, head_names),
	U64(GM_K_NUM_LABELS, "num_labels", GM_K_MODEL, model.num_labels,
	    1, GM_MAX_VOCAB),
	NUM(GM_K_PARAMETERS, "parameters", GM_K_MODEL, model.parameters),
	NUM(GM_K_ACT_PER_TOKEN, "activation_bytes_per_token", GM_K_MODEL,
	    model.activation_bytes_per_token),
	BOOL(GM_K_QKV_BIAS, "qkv_bias", GM_K_MODEL, model.qkv_bias),
	BOOL(GM_K_ADD_BIAS_LINEAR, "add_bias_linear", GM_K_MODEL,
	     model.add_bias_linear),
	U64(GM_K_HEAD_DIM, "head_dim", GM_K_MODEL, model.head_dim, 1,
	    GM_MAX_HEAD_DIM),
	U64(GM_K_SLIDING_WINDOW, "sliding_window", GM_K_MODEL,
	    model.sliding_window, 2, GM_MAX_VOCAB),
	U64(GM_K_EXPERTS, "experts", GM_K_MODEL, model.experts, 1,
	    GM_MAX_EXPERTS),
	U64(GM_K_EXPERTS_PER_TOKEN, "experts_per_token", GM_K_MODEL,
	    model.experts_per_token, 1, GM_MAX_EXPERTS),
	U64(GM_K_SHARED_EXPERTS, "shared_experts", GM_K_MODEL,
	    model.shared_experts, 0, GM_MAX_EXPERTS),
	U64(GM_K_MOE_FFN, "moe_ffn_hidden_size", GM_K_MODEL,
	    model.moe_ffn_hidden_size, 1, GM_MAX_FFN),
	U64(GM_K_DENSE_LAYERS, "dense_layers", GM_K_MODEL, model.dense_layers,
	    0, GM_MAX_LAYERS),
	U64(GM_K_Q_LORA_RANK, "q_lora_rank", GM_K_MODEL, model.q_lora_rank,
	    0, GM_MAX_HIDDEN),
	U64(GM_K_KV_LORA_RANK, "kv_lora_rank", GM_K_MODEL, model.kv_lora_rank,
	    1, GM_MAX_HIDDEN),
	U64(GM_K_QK_ROPE_HEAD_DIM, "qk_rope_head_dim", GM_K_MODEL,
	    model.qk_rope_head_dim, 1, GM_MAX_HEAD_DIM),
	U64(GM_K_QK_NOPE_HEAD_DIM, "qk_nope_head_dim", GM_K_MODEL,
	    model.qk_nope_head_dim, 0, GM_MAX_HEAD_DIM),
	U64(GM_K_V_HEAD_DIM, "v_head_dim", GM_K_MODEL, model.v_head_dim, 1,
	    GM_MAX_HEAD_DIM),
	STR(GM_K_HF_CONFIG, "hf_config", GM_K_MODEL, hf_config),
	SEC(GM_K_TRAINING, "training", -1),
	U64(GM_K_MICRO_BATCH, "micro_batch_size", GM_K_TRAINING,
	    training.micro_batch_size, 1, GM_MAX_BATCH),
	U64(GM_K_GLOBAL_BATCH, "global_batch_size", GM_K_TRAINING,
	    training.global_batch_size, 1, GM_MAX_GLOBAL),
	U64(GM_K_SEQ_LEN, "sequence_length", GM_K_TRAINING,
	    training.sequence_length, 1, GM_MAX_SEQ),
	ENUM(GM_K_PRECISION, "precision", GM_K_TRAINING, training.precision,
	     prec_names),
	ENUM(GM_K_OPTIMIZER, "optimizer", GM_K_TRAINING, training.optimizer,
	     opt_names),
	ENUM(GM_K_OPT_IMPL, "optimizer_implementation", GM_K_TRAINING,
	     training.optimizer_implementation, opt_impl_names),
	ENUM(GM_K_CKPT, "activation_checkpointing", GM_K_TRAINING,
	     training.activation_checkpointing, ckpt_names),
	ENUM(GM_K_ATTENTION, "attention", GM_K_TRAINING, training.attention,
	     attn_names),
	ENUM(GM_K_FRAMEWORK, "framework", GM_K_TRAINING, training.framework,
	     fw_names),
	STR(GM_K_DS_CONFIG, "deepspeed_config", GM_K_TRAINING,
	    training.deepspeed_config),
	ENUM(GM_K_LOOP, "loop", GM_K_TRAINING, training.loop, loop_names),
	ENUM(GM_K_USE_CACHE, "use_cache", GM_K_TRAINING, training.use_cache,
	     cache_names),
	ENUM(GM_K_ADAPTER, "adapter", GM_K_TRAINING, training.adapter,
	     adapter_names),
	U64(GM_K_LORA_RANK, "lora_rank", GM_K_TRAINING, training.lora_rank,
	    1, GM_MAX_LORA_RANK),
	[GM_K_LORA_TARGETS] = {"lora_targets", GM_K_TRAINING, GM_KIND_LIST,
			       OFF(training.lora_targets), 0, 0, 0, NULL, 0},
	SEC(GM_K_INFERENCE, "inference", -1),
	ENUM(GM_K_INF_PRECISION, "precision", GM_K_INFERENCE,
	     inference.precision, prec_names),
	U64(GM_K_BATCH, "batch_size", GM_K_INFERENCE, inference.batch_size,
	    1, GM_MAX_BATCH),
	U64(GM_K_PROMPT, "prompt_length", GM_K_INFERENCE,
	    inference.prompt_length, 1, GM_MAX_SEQ),
	U64(GM_K_GENERATE, "generate_length", GM_K_INFERENCE,
	    inference.generate_length, 0, GM_MAX_SEQ),
	ENUM(GM_K_KV_DTYPE, "kv_cache_dtype", GM_K_INFERENCE,
	     inference.kv_cache_dtype, kv_names),
	SEC(GM_K_PARALLELISM, "parallelism", -1),
	U64(GM_K_DP, "data_parallel", GM_K_PARALLELISM,
	    parallelism.data_parallel, 1, GM_MAX_PARALLEL),
	U64(GM_K_TP, "tensor_parallel", GM_K_PARALLELISM,
	    parallelism.tensor_parallel, 1, GM_MAX_PARALLEL),
	U64(GM_K_PP, "pipeline_parallel", GM_K_PARALLELISM,
	    parallelism.pipeline_parallel, 1, GM_MAX_PARALLEL),
	BOOL(GM_K_SP, "sequence_parallel", GM_K_PARALLELISM,
	     parallelism.sequence_parallel),
	U32(GM_K_ZERO, "zero_stage", GM_K_PARALLELISM, parallelism.zero_stage,
	    0, 3),
	ENUM(GM_K_TP_VOCAB, "tensor_parallel_vocab", GM_K_PARALLELISM,
	     parallelism.tp_vocab, tpv_names),
	BOOL(GM_K_BUILT_WHOLE, "built_whole", GM_K_PARALLELISM,
	     parallelism.built_whole),
	ENUM(GM_K_FSDP_MP, "fsdp_mixed_precision", GM_K_PARALLELISM,
	     parallelism.fsdp_mixed_precision, fsdp_mp_names),
	ENUM(GM_K_OFFLOAD_OPT, "offload_optimizer", GM_K_PARALLELISM,
	     parallelism.offload_optimizer, offload_names),
	ENUM(GM_K_OFFLOAD_PARAM, "offload_parameters", GM_K_PARALLELISM,
	     parallelism.offload_parameters, offload_names),
	BOOL(GM_K_DIST_OPT, "distributed_optimizer", GM_K_PARALLELISM,
	     parallelism.distributed_optimizer),
	U64(GM_K_VPP, "virtual_pipeline_stages", GM_K_PARALLELISM,
	    parallelism.virtual_pipeline_stages, 1, GM_MAX_LAYERS),
	U64(GM_K_EP, "expert_parallel", GM_K_PARALLELISM,
	    parallelism.expert_parallel, 1, GM_MAX_EXPERTS),
	U64(GM_K_ETP, "expert_tensor_parallel", GM_K_PARALLELISM,
	    parallelism.expert_tensor_parallel, 1, GM_MAX_PARALLEL),
	ENUM(GM_K_MOE_DISPATCHER, "moe_token_dispatcher_type",
	     GM_K_PARALLELISM, parallelism.moe_token_dispatcher_type,
	     dispatcher_names),
	SEC(GM_K_HARDWARE, "hardware", -1),
	STR(GM_K_GPU, "gpu", GM_K_HARDWARE, gpu),
};

const char *gm__spec_dotted(int id, char *buf, size_t len)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];

	if (k->parent < 0)
		snprintf(buf, len, "%s", k->name);
	else
		snprintf(buf, len, "%s.%s", gm__spec_keys[k->parent].name,
			 k->name);
	return buf;
}

/* The id of key `name` (length n) in section parent, or -1. */
static int find_key(int parent, const char *name, size_t n)
{
	for (int id = 0; id < GM_K_COUNT; id++) {
		const char *kn = gm__spec_keys[id].name;
		if (gm__spec_keys[id].parent == parent && strlen(kn) == n &&
		    memcmp(kn, name, n) == 0)
			return id;
	}
	return -1;
}

/* The id of a dotted key ("model.layers", "name"), or -1. */
static int find_dotted(const char *key)
{
	const char *dot = strchr(key, '.');
	int sec;

	if (!dot)
		return find_key(-1, key, strlen(key));
	sec = find_key(-1, key, (size_t)(dot - key));
	if (sec < 0 || gm__spec_keys[sec].kind != GM_KIND_MAP)
		return -1;
	return find_key(sec, dot + 1, strlen(dot + 1));
}

int gm__spec_find(const char *dotted)
{
	return find_dotted(dotted);
}

/* ==== Messages ==== */

/* Format "PREFIX: message" into c->diag, return GM_EINVAL. */
static int vfail(struct gm__spec_ctx *c, const char *prefix, const char *fmt,
		 va_list ap)
{
	char msg[768];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	return gm_diag_set(c->diag, GM_EINVAL, "%s: %s", prefix, msg);
}

/*
 * Report a problem at a file position (line, col 1-based) or, while a
 * --set is applied, at that option. No key name is added.
 */
static int fail_at(struct gm__spec_ctx *c, unsigned line, unsigned col,
		   const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_at(struct gm__spec_ctx *c, unsigned line, unsigned col,
		   const char *fmt, ...)
{
	char prefix[1100];
	va_list ap;
	int rc;

	if (c->set_key)
		snprintf(prefix, sizeof(prefix), "--set %s", c->set_key);
	else
		snprintf(prefix, sizeof(prefix), "%s:%u:%u", c->path, line,
			 col);
	va_start(ap, fmt);
	rc = vfail(c, prefix, fmt, ap);
	va_end(ap);
	return rc;
}

/* Like fail_at() at a node, with "KEY: " before the message (file only). */
static int fail_value(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_value(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *fmt, ...)
{
	char prefix[1200], key[64];
	va_list ap;
	int rc;

	if (c->set_key)
		snprintf(prefix, sizeof(prefix), "--set %s", c->set_key);
	else
		snprintf(prefix, sizeof(prefix), "%s:%zu:%zu: %s", c->path,
			 m->line + 1, m->column + 1,
			 gm__spec_dotted(id, key, sizeof(key)));
	va_start(ap, fmt);
	rc = vfail(c, prefix, fmt, ap);
	va_end(ap);
	return rc;
}

bool gm__spec_path(const struct gm_spec *s, int id, const char *value,
		   char *out, size_t len)
{
	const char *slash = strrchr(s->path, '/');
	size_t dir = slash ? (size_t)(slash - s->path) + 1 : 0;

	if (value[0] == '/' || s->where[id].origin == GM_SPEC_SET)
		dir = 0;
	if (dir + strlen(value) >= len)
		return false;
	memcpy(out, s->path, dir);
	strcpy(out + dir, value);
	return true;
}

int gm__spec_blame(struct gm__spec_ctx *c, int id, const char *fmt, ...)
{
	const struct gm_spec_where *w = &c->spec->where[id];
	char prefix[1200], key[64];
	va_list ap;
	int rc;

	gm__spec_dotted(id, key, sizeof(key));
	if (w->origin == GM_SPEC_DEFAULT && gm__spec_keys[id].parent >= 0)
		w = &c->spec->where[gm__spec_keys[id].parent];
	if (w->origin == GM_SPEC_SET)
		snprintf(prefix, sizeof(prefix), "--set %s", key);
	else if (w->origin == GM_SPEC_DEEPSPEED)
		snprintf(prefix, sizeof(prefix), "%s:%u:%u: %s (from the "
			 "DeepSpeed config)", c->spec->deepspeed.path,
			 w->line ? w->line : 1, w->line ? w->column : 1, key);
	else if (w->origin == GM_SPEC_HF)
		snprintf(prefix, sizeof(prefix), "%s:%u:%u: %s (%s)",
			 c->spec->hf_path, w->line, w->column, w->field, key);
	else if (w->origin == GM_SPEC_FILE)
		snprintf(prefix, sizeof(prefix), "%s:%u:%u: %s", c->path,
			 w->line, w->column, key);
	else
		snprintf(prefix, sizeof(prefix), "%s:%u:%u: %s", c->path,
			 c->root_line, c->root_col, key);
	va_start(ap, fmt);
	rc = vfail(c, prefix, fmt, ap);
	va_end(ap);
	return rc;
}

/* ==== Values ==== */

/* What a kind expects, for "expected ..." messages. */
static const char *kind_expects(const struct gm__spec_keydef *k)
{
	switch (k->kind) {
	case GM_KIND_MAP: return "a mapping (check indentation)";
	case GM_KIND_STR: return "a string";
	case GM_KIND_U64:
	case GM_KIND_U32: return "an integer";
	case GM_KIND_NUM: return "a number";
	case GM_KIND_BOOL: return "true or false";
	case GM_KIND_ENUM: return "a name";
	case GM_KIND_LIST: return "a list of names";
	}
	return "a value";
}

/* Control characters would break the one-line messages that echo text. */
static bool has_control(const char *s)
{
	for (; *s; s++) {
		if ((unsigned char)*s < 0x20 || *s == 0x7f)
			return true;
	}
	return false;
}

/* YAML 1.1's plain null spellings; an empty value is null too. */
static bool is_null(const char *s)
{
	return !*s || !strcmp(s, "~") || !strcmp(s, "null") ||
	       !strcmp(s, "Null") || !strcmp(s, "NULL");
}

/*
 * Parse a decimal integer: digits only (no sign, no '_', no exponent),
 * at most 2^64 - 1. Distinguishes the ways it can be wrong in messages.
 */
static int parse_uint(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *s, uint64_t *out)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];
	const char *want = k->min ? "a positive integer"
				  : "zero or a positive integer";
	char *end;
	double d;

	if (s[0] == '-' && s[1]) {
		d = strtod(s, &end);
		if (*end || !isfinite(d))
			;
		else if (k->kind == GM_KIND_U32)
			return fail_value(c, m, id, "must be %u..%u, got %s",
					  k->min, k->max, s);
		else
			return fail_value(c, m, id, "must be %s, got %s", want,
					  s);
	}
	if (strspn(s, "0123456789") != strlen(s)) {
		if (strchr(s, '_') && strspn(s, "0123456789_") == strlen(s))
			return fail_value(c, m, id,
					  "expected an integer, got '%s' "
					  "(write digits only, no '_')", s);
		return fail_value(c, m, id, "expected an integer, got '%s'",
				  s);
	}
	if (s[0] == '0' && s[1])
		return fail_value(c, m, id, "expected a decimal integer without "
				  "leading zeros, got '%s'", s);
	errno = 0;
	*out = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return fail_value(c, m, id, "integer too large: %s", s);
	if (*out < k->min)
		return fail_value(c, m, id, "must be %s, got %s", want, s);
	if (k->kind == GM_KIND_U64 && *out > k->max)
		return fail_value(c, m, id, "%s is too large (at most %u)", s,
				  k->max);
	if (k->kind == GM_KIND_U32 && *out > k->max)
		return fail_value(c, m, id, "must be %u..%u, got %s", k->min,
				  k->max, s);
	return 0;
}

/* The largest model.parameters / activation_bytes_per_token: 10^15. */
#define GM_MAX_NUM 1e15

/* A positive finite decimal number ("13.0e9", "7e9", "6738415616"),
 * at most GM_MAX_NUM. */
static int parse_num(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		     const char *s, double *out)
{
	char *end;

	if (strspn(s, "0123456789.eE+-") != strlen(s))
		return fail_value(c, m, id, "expected a number, got '%s'", s);
	errno = 0;
	*out = strtod(s, &end);
	if (end == s || *end)
		return fail_value(c, m, id, "expected a number, got '%s'", s);
	if (errno == ERANGE || !isfinite(*out))
		return fail_value(c, m, id, "number out of range: %s", s);
	if (*out <= 0)
		return fail_value(c, m, id, "must be a positive number, got %s",
				  s);
	if (*out > GM_MAX_NUM)
		return fail_value(c, m, id, "%s is too large (at most 1e15)",
				  s);
	return 0;
}

/* YAML 1.1 booleans (libyaml's version): true/false, yes/no, on/off. */
static int parse_bool(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *s, bool *out)
{
	static const char *const yes[] = {"true", "yes", "on"};
	static const char *const no[] = {"false", "no", "off"};

	for (size_t i = 0; i < GM_N(yes); i++) {
		if (!strcasecmp(s, yes[i]))
			return *out = true, 0;
		if (!strcasecmp(s, no[i]))
			return *out = false, 0;
	}
	return fail_value(c, m, id, "expected true or false, got '%s'", s);
}

/*
 * Names users write for what the planner does not model yet
 * (planner/README.md, "Not modelled"): refused with that message rather
 * than "unknown", so nobody reads it as a typo. Keys are by section.
 */
static const struct {
	int id;            /* an enum key, or a section for a key name */
	const char *name;  /* the value, or the key */
	const char *what;
} not_modelled[] = {
	{GM_K_PRECISION, "fp8", "FP8 training (Transformer Engine's "
				"fp8_autocast)"},
	{GM_K_PRECISION, "fp8-mixed", "FP8 training (Transformer Engine's "
				      "fp8_autocast)"},
	{GM_K_PRECISION, "fp8-true", "FP8 training"},
	{GM_K_INF_PRECISION, "fp8", "FP8 weights"},
	{GM_K_INF_PRECISION, "int8", "int8 weights (LLM.int8)"},
	{GM_K_INF_PRECISION, "int4", "4-bit weights"},
	{GM_K_PARALLELISM, "context_parallel", "context parallelism (ring "
					       "attention over the sequence)"},
	{GM_K_PARALLELISM, "ulysses_parallel", "DeepSpeed-Ulysses sequence "
					       "parallelism"},
	{GM_K_PARALLELISM, "sequence_parallel_size", "DeepSpeed-Ulysses "
						     "sequence parallelism"},
	{GM_K_PARALLELISM, "cpu_offload", "FSDP's CPUOffloadPolicy"},
	{GM_K_TRAINING, "fp8", "FP8 training"},
};

/* The not-modelled entry of (id, name), or NULL. */
static const char *unmodelled(int id, const char *name)
{
	for (size_t i = 0; i < GM_N(not_modelled); i++) {
		if (not_modelled[i].id == id &&
		    !strcmp(not_modelled[i].name, name))
			return not_modelled[i].what;
	}
	return NULL;
}

/* One of k->names, exactly; otherwise suggest the closest or list them. */
static int parse_enum(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *s, int *out)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];
	const char *what = unmodelled(id, s);
	char list[256] = "";

	if (what)
		return fail_value(c, m, id, "'%s': %s is not modelled yet "
				  "(planner/README.md, \"Not modelled\")", s,
				  what);
	const char *cands[32] = {NULL};
	size_t n = 0;

	for (size_t i = 0; i < k->n_names; i++) {
		if (!strcmp(s, k->names[i]))
			return *out = (int)i, 0;
	}
	/* the values offered: inference.precision shares training's names
	 * but takes no *-mixed one (spec_rules.c refuses them) */
	for (size_t i = 0; i < k->n_names && n < GM_N(cands); i++)
		if (id != GM_K_INF_PRECISION ||
		    !strstr(k->names[i], "-mixed"))
			cands[n++] = k->names[i];
	if (gm_text_suggest_list(s, cands, n, list, sizeof(list)))
		return fail_value(c, m, id,
				  "unknown value '%s'; did you mean %s?", s,
				  list);
	for (size_t i = 0; i < n; i++) {
		strcat(list, i ? ", " : "");
		strcat(list, cands[i]);
	}
	return fail_value(c, m, id, "unknown value '%s'; expected one of: %s",
			  s, list);
}

/*
 * Append one word of a list key (training.lora_targets) to its field:
 * a PEFT module name, letters, digits, '_', '-' and '.', at most 31
 * bytes, at most GM_LORA_MAX_TARGETS of them, no repeats.
 */
static int list_add(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		    const char *w, size_t n)
{
	struct gm_spec_training *t = &c->spec->training;

	if (!n)
		return fail_value(c, m, id, "an empty name in the list");
	if (n >= sizeof(t->lora_targets[0]))
		return fail_value(c, m, id, "'%.*s' is longer than %zu bytes",
				  (int)n, w, sizeof(t->lora_targets[0]) - 1);
	for (size_t i = 0; i < n; i++) {
		if (!isalnum((unsigned char)w[i]) && !strchr("_-.", w[i]))
			return fail_value(c, m, id, "'%.*s' is not a module "
					  "name (letters, digits, '_', '-', "
					  "'.')", (int)n, w);
	}
	for (unsigned i = 0; i < t->n_lora_targets; i++) {
		if (strlen(t->lora_targets[i]) == n &&
		    !memcmp(t->lora_targets[i], w, n))
			return fail_value(c, m, id, "'%.*s' is listed twice",
					  (int)n, w);
	}
	if (t->n_lora_targets == GM_LORA_MAX_TARGETS)
		return fail_value(c, m, id, "more than %d names",
				  GM_LORA_MAX_TARGETS);
	memcpy(t->lora_targets[t->n_lora_targets], w, n);
	t->lora_targets[t->n_lora_targets++][n] = '\0';
	return 0;
}

/* A list key given as one scalar: comma-separated words ("q_proj,
 * v_proj", as --set gives it, or "all-linear"), or those words in
 * YAML's brackets ("[q_proj, v_proj]", as a spec file writes the list
 * inline). */
static int set_list_text(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
			 const char *s)
{
	char in[512];
	size_t len;

	while (isspace((unsigned char)*s))
		s++;
	len = strlen(s);
	while (len && isspace((unsigned char)s[len - 1]))
		len--;
	if (len >= 2 && s[0] == '[' && s[len - 1] == ']') {
		if (len - 2 >= sizeof(in))
			return fail_value(c, m, id, "the list is too long");
		memcpy(in, s + 1, len - 2);
		in[len - 2] = '\0';
		s = in;
	}
	c->spec->training.n_lora_targets = 0;
	memset(c->spec->training.lora_target_at, 0,
	       sizeof(c->spec->training.lora_target_at));
	for (;;) {
		size_t n = strcspn(s, ",");
		const char *w = s;
		int rc;

		while (n && isspace((unsigned char)*w))
			w++, n--;
		while (n && isspace((unsigned char)w[n - 1]))
			n--;
		rc = list_add(c, m, id, w, n);
		if (rc)
			return rc;
		s += strcspn(s, ",");
		if (!*s)
			return 0;
		s++;
	}
}

/* A list key given as a YAML sequence of plain words. */
static int set_list_node(struct gm__spec_ctx *c, yaml_document_t *doc,
			 yaml_node_t *seq, int id)
{
	struct gm_spec_training *t = &c->spec->training;
	yaml_node_item_t *it;

	t->n_lora_targets = 0;
	memset(t->lora_target_at, 0, sizeof(t->lora_target_at));
	if (seq->data.sequence.items.start == seq->data.sequence.items.top)
		return fail_value(c, &seq->start_mark, id, "an empty list");
	for (it = seq->data.sequence.items.start;
	     it < seq->data.sequence.items.top; it++) {
		yaml_node_t *n = yaml_document_get_node(doc, *it);
		const char *w;

		if (n->type != YAML_SCALAR_NODE)
			return fail_value(c, &n->start_mark, id, "expected a "
					  "name, got %s", n->type ==
					  YAML_MAPPING_NODE ? "a mapping"
							    : "a list");
		w = (const char *)n->data.scalar.value;
		if (has_control(w))
			return fail_value(c, &n->start_mark, id, "a name "
					  "contains a control character");
		if (list_add(c, &n->start_mark, id, w, strlen(w)))
			return GM_EINVAL;
		t->lora_target_at[t->n_lora_targets - 1][0] =
			(unsigned)n->start_mark.line + 1;
		t->lora_target_at[t->n_lora_targets - 1][1] =
			(unsigned)n->start_mark.column + 1;
	}
	return 0;
}

/*
 * Store scalar text s (from the file at m, or from --set when m is NULL)
 * into key id's field. quoted: the YAML scalar was quoted, i.e. a string
 * even if it looks like a number.
 */
static int set_scalar(struct gm__spec_ctx *c, const yaml_mark_t *m, int id,
		      const char *s, bool quoted)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];
	void *field = (char *)c->spec + k->off;
	uint64_t u;

	if (has_control(s))
		return fail_value(c, m, id, "the value contains a control "
				  "character (a line break or tab?)");
	if (!quoted && is_null(s))
		return fail_value(c, m, id, "no value (expected %s)",
				  kind_expects(k));
	if (k->kind == GM_KIND_MAP)
		return fail_value(c, m, id, "expected a mapping (check "
				  "indentation), got '%s'", s);
	if (quoted && k->kind != GM_KIND_STR && k->kind != GM_KIND_ENUM &&
	    k->kind != GM_KIND_LIST)
		return fail_value(c, m, id, "expected %s, got the quoted "
				  "string \"%s\"", kind_expects(k), s);
	switch (k->kind) {
	case GM_KIND_STR:
		if (!*s)
			return fail_value(c, m, id, "must not be empty");
		if (strlen(s) >= k->len)
			return fail_value(c, m, id, "longer than %zu bytes",
					  k->len - 1);
		gm_text_copy(field, k->len, s);
		return 0;
	case GM_KIND_U64:
		if (parse_uint(c, m, id, s, &u))
			return GM_EINVAL;
		*(uint64_t *)field = u;
		return 0;
	case GM_KIND_U32:
		if (parse_uint(c, m, id, s, &u))
			return GM_EINVAL;
		*(unsigned *)field = (unsigned)u;
		return 0;
	case GM_KIND_NUM:
		return parse_num(c, m, id, s, field);
	case GM_KIND_BOOL:
		return parse_bool(c, m, id, s, field);
	case GM_KIND_ENUM:
		return parse_enum(c, m, id, s, field);
	case GM_KIND_LIST:
		return set_list_text(c, m, id, s);
	case GM_KIND_MAP:
		break;
	}
	return 0;
}

static const char *node_kind(const yaml_node_t *n)
{
	return n->type == YAML_MAPPING_NODE ? "a mapping" : "a list";
}

static void mark_where(struct gm_spec_where *w, const yaml_mark_t *m)
{
	w->origin = GM_SPEC_FILE;
	w->line = (unsigned)m->line + 1;
	w->column = (unsigned)m->column + 1;
}

/* ==== The document ==== */

struct gm__walk {
	struct gm__spec_ctx *c;
	yaml_document_t *doc;
	unsigned first_line[GM_K_COUNT]; /* duplicate keys: first line */
};

static int walk_map(struct gm__walk *w, yaml_node_t *map, int section);

/* The "in model" / "at the top level" part of key messages. */
static void section_words(int section, char *buf, size_t len)
{
	if (section < 0)
		snprintf(buf, len, "at the top level");
	else
		snprintf(buf, len, "in %s", gm__spec_keys[section].name);
}

/* Key i's dotted name ("training.micro_batch_size") into buf. */
static void dotted_name(int i, char *buf, size_t len)
{
	int p = gm__spec_keys[i].parent;

	if (p < 0) {
		snprintf(buf, len, "%s", gm__spec_keys[i].name);
		return;
	}
	dotted_name(p, buf, len);
	snprintf(buf + strlen(buf), len - strlen(buf), ".%s",
		 gm__spec_keys[i].name);
}

/* Every key named word in some section, as "'a.word' or 'b.word'"; 0
 * when none. */
static size_t sectioned(const char *word, char *buf, size_t len)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int i = 0; i < GM_K_COUNT; i++) {
		char d[256];

		if (gm__spec_keys[i].parent < 0 ||
		    strcmp(gm__spec_keys[i].name, word))
			continue;
		dotted_name(i, d, sizeof(d));
		snprintf(buf + strlen(buf), len - strlen(buf), "%s'%s'",
			 n ? " or " : "", d);
		n++;
	}
	return n;
}

/*
 * Names other tools give the planner's keys (Hugging Face
 * TrainingArguments and config.json, DeepSpeed, Megatron-LM, torchrun):
 * an unknown key among them is answered with the planner's name.
 */
static const struct {
	int section;       /* where it is written */
	const char *name;  /* the other tool's name */
	int id;            /* the planner's key */
	const char *note;  /* how it maps, or NULL */
} foreign[] = {
	{GM_K_TRAINING, "gradient_checkpointing", GM_K_CKPT,
	 "none, selective or full"},
	{GM_K_TRAINING, "gradient_accumulation_steps", GM_K_GLOBAL_BATCH,
	 "the accumulation steps are global_batch_size / (micro_batch_size x "
	 "data_parallel)"},
	{GM_K_TRAINING, "per_device_train_batch_size", GM_K_MICRO_BATCH, NULL},
	{GM_K_TRAINING, "train_micro_batch_size_per_gpu", GM_K_MICRO_BATCH,
	 NULL},
	{GM_K_TRAINING, "batch_size", GM_K_MICRO_BATCH,
	 "per GPU; global_batch_size is the step's"},
	{GM_K_TRAINING, "microbatch", GM_K_MICRO_BATCH, NULL},
	{GM_K_TRAINING, "train_batch_size", GM_K_GLOBAL_BATCH, NULL},
	{GM_K_TRAINING, "max_seq_length", GM_K_SEQ_LEN, NULL},
	{GM_K_TRAINING, "max_length", GM_K_SEQ_LEN, NULL},
	{GM_K_TRAINING, "seq_length", GM_K_SEQ_LEN, NULL},
	{GM_K_TRAINING, "seq_len", GM_K_SEQ_LEN, NULL},
	{GM_K_TRAINING, "block_size", GM_K_SEQ_LEN, NULL},
	{GM_K_TRAINING, "bf16", GM_K_PRECISION, "bf16-mixed or bf16-true"},
	{GM_K_TRAINING, "fp16", GM_K_PRECISION, "fp16-mixed or fp16-true"},
	{GM_K_TRAINING, "mixed_precision", GM_K_PRECISION,
	 "bf16-mixed, fp16-mixed, ..."},
	{GM_K_TRAINING, "optim", GM_K_OPTIMIZER,
	 "with optimizer_implementation: adamw_torch_fused is adamw and "
	 "fused"},
	{GM_K_TRAINING, "deepspeed", GM_K_DS_CONFIG, NULL},
	{GM_K_HARDWARE, "num_gpus", GM_K_DP,
	 "hardware.gpu names the card; the GPUs are data_parallel x "
	 "tensor_parallel x pipeline_parallel"},
	{GM_K_TRAINING, "lora_r", GM_K_LORA_RANK, NULL},
	{GM_K_TRAINING, "target_modules", GM_K_LORA_TARGETS, NULL},
	{GM_K_PARALLELISM, "tp", GM_K_TP, NULL},
	{GM_K_PARALLELISM, "tp_size", GM_K_TP, NULL},
	{GM_K_PARALLELISM, "tensor_model_parallel_size", GM_K_TP, NULL},
	{GM_K_PARALLELISM, "pp", GM_K_PP, NULL},
	{GM_K_PARALLELISM, "pipeline_model_parallel_size", GM_K_PP, NULL},
	{GM_K_PARALLELISM, "dp", GM_K_DP, NULL},
	{GM_K_PARALLELISM, "world_size", GM_K_DP,
	 "data_parallel x tensor_parallel x pipeline_parallel GPUs in all"},
	{GM_K_PARALLELISM, "num_gpus", GM_K_DP,
	 "data_parallel x tensor_parallel x pipeline_parallel GPUs in all"},
	{GM_K_PARALLELISM, "fsdp", GM_K_ZERO,
	 "FSDP's FULL_SHARD is zero_stage: 3, SHARD_GRAD_OP zero_stage: 2"},
	{GM_K_PARALLELISM, "zero", GM_K_ZERO, NULL},
	{GM_K_PARALLELISM, "ep", GM_K_EP, NULL},
	{GM_K_PARALLELISM, "expert_model_parallel_size", GM_K_EP, NULL},
	{GM_K_MODEL, "num_hidden_layers", GM_K_LAYERS, NULL},
	{GM_K_MODEL, "n_layer", GM_K_LAYERS, NULL},
	{GM_K_MODEL, "num_layers", GM_K_LAYERS, NULL},
	{GM_K_MODEL, "num_attention_heads", GM_K_HEADS, NULL},
	{GM_K_MODEL, "n_head", GM_K_HEADS, NULL},
	{GM_K_MODEL, "num_key_value_heads", GM_K_KV_HEADS, NULL},
	{GM_K_MODEL, "intermediate_size", GM_K_FFN, NULL},
	{GM_K_MODEL, "n_embd", GM_K_HIDDEN, NULL},
	{GM_K_MODEL, "num_local_experts", GM_K_EXPERTS, NULL},
	{GM_K_MODEL, "num_experts", GM_K_EXPERTS, NULL},
	{GM_K_MODEL, "n_routed_experts", GM_K_EXPERTS, NULL},
	{GM_K_MODEL, "num_experts_per_tok", GM_K_EXPERTS_PER_TOKEN, NULL},
	{GM_K_INFERENCE, "max_new_tokens", GM_K_GENERATE, NULL},
	{GM_K_INFERENCE, "prompt_len", GM_K_PROMPT, NULL},
	{GM_K_INFERENCE, "input_length", GM_K_PROMPT, NULL},
};

/* The planner's key for another tool's name in section (-1: in any
 * section), or -1. */
static int foreign_key(int section, const char *name, const char **note)
{
	for (size_t i = 0; i < GM_N(foreign); i++)
		if ((section < 0 || foreign[i].section == section) &&
		    !strcmp(foreign[i].name, name)) {
			*note = foreign[i].note;
			return foreign[i].id;
		}
	return -1;
}

/* A key of another section than section (-1 where there is none, or
 * more than one): "zero_stage" in training is parallelism's. */
static int other_section_key(int section, const char *name)
{
	int found = -1;

	for (int i = 0; i < GM_K_COUNT; i++) {
		if (gm__spec_keys[i].parent < 0 ||
		    gm__spec_keys[i].parent == section ||
		    strcmp(gm__spec_keys[i].name, name))
			continue;
		if (found >= 0)
			return -1;
		found = i;
	}
	return found;
}

/*
 * "unknown key 'x' in model; did you mean 'y'?" at line:col (or the --set
 * being applied). A dotted key at the top level ("model.layers:") gets
 * told to nest it.
 */
static int unknown_key(struct gm__spec_ctx *c, unsigned line, unsigned col,
		       int section, const char *name)
{
	const char *cands[GM_K_COUNT];
	char where[64], near[256];
	size_t n = 0;
	int id;

	for (id = 0; id < GM_K_COUNT; id++) {
		if (gm__spec_keys[id].parent == section)
			cands[n++] = gm__spec_keys[id].name;
	}
	section_words(section, where, sizeof(where));
	if (section >= 0 && unmodelled(section, name))
		return fail_at(c, line, col, "'%s' %s: %s is not modelled yet "
			       "(planner/README.md, \"Not modelled\")", name,
			       where, unmodelled(section, name));
	id = section < 0 && !c->set_key ? find_dotted(name) : -1;
	if (id >= 0 && gm__spec_keys[id].parent >= 0)
		return fail_at(c, line, col, "unknown key '%s' %s; write it "
			       "nested, as '%s:' under '%s:'", name, where,
			       gm__spec_keys[id].name,
			       gm__spec_keys[gm__spec_keys[id].parent].name);
	if (section < 0) {
		/* a section's key at the top: name the section */
		char both[1024];

		if (sectioned(name, both, sizeof(both)))
			return fail_at(c, line, col, "unknown key '%s' %s; "
				       "did you mean %s?", name, where, both);
	}
	{
		/* another tool's name: in this section the key's own name,
		 * elsewhere its dotted name */
		const char *note = NULL;
		int k = foreign_key(section, name, &note);
		char d[256];

		if (k < 0 && section >= 0) {
			k = foreign_key(-1, name, &note);
			if (k >= 0 && gm__spec_keys[k].parent == section)
				k = -1; /* this section's: the fuzzy match */
		}
		if (k >= 0) {
			if (gm__spec_keys[k].parent == section)
				snprintf(d, sizeof(d), "%s",
					 gm__spec_keys[k].name);
			else
				dotted_name(k, d, sizeof(d));
			return fail_at(c, line, col, "unknown key '%s' %s; "
				       "gpumem's key is '%s'%s%s%s", name,
				       where, d, note ? " (" : "",
				       note ? note : "", note ? ")" : "");
		}
		/* another section's key written in this one */
		k = section >= 0 ? other_section_key(section, name) : -1;
		if (k >= 0) {
			dotted_name(k, d, sizeof(d));
			return fail_at(c, line, col, "unknown key '%s' %s; it "
				       "is %s's: '%s'", name, where,
				       gm__spec_keys[gm__spec_keys[k].parent]
				       .name, d);
		}
	}
	if (gm_text_suggest_list(name, cands, n, near, sizeof(near)))
		return fail_at(c, line, col,
			       "unknown key '%s' %s; did you mean %s?", name,
			       where, near);
	return fail_at(c, line, col, "unknown key '%s' %s", name, where);
}

/* Handle one key: value pair of a mapping in section. */
static int walk_pair(struct gm__walk *w, yaml_node_pair_t *p, int section)
{
	yaml_node_t *k = yaml_document_get_node(w->doc, p->key);
	yaml_node_t *v = yaml_document_get_node(w->doc, p->value);
	const yaml_mark_t *km = &k->start_mark;
	struct gm__spec_ctx *c = w->c;
	char where[64];
	const char *name;
	int id;

	if (k->type != YAML_SCALAR_NODE)
		return fail_at(c, km->line + 1, km->column + 1,
			       "a key must be a plain word, not %s",
			       node_kind(k));
	name = (const char *)k->data.scalar.value;
	if (has_control(name))
		return fail_at(c, km->line + 1, km->column + 1,
			       "a key contains a control character");
	id = find_key(section, name, k->data.scalar.length);
	if (id < 0)
		return unknown_key(c, (unsigned)km->line + 1,
				   (unsigned)km->column + 1, section, name);
	if (w->first_line[id]) {
		section_words(section, where, sizeof(where));
		return fail_at(c, km->line + 1, km->column + 1,
			       "duplicate key '%s' %s (first at line %u)",
			       name, where, w->first_line[id]);
	}
	w->first_line[id] = (unsigned)km->line + 1;
	if (gm__spec_keys[id].kind == GM_KIND_MAP) {
		mark_where(&c->spec->where[id], km);
		if (v->type == YAML_MAPPING_NODE)
			return walk_map(w, v, id);
	} else {
		mark_where(&c->spec->where[id], &v->start_mark);
	}
	if (v->type == YAML_SEQUENCE_NODE &&
	    gm__spec_keys[id].kind == GM_KIND_LIST)
		return set_list_node(c, w->doc, v, id);
	if (v->type != YAML_SCALAR_NODE)
		return fail_value(c, &v->start_mark, id, "expected %s, got %s",
				  kind_expects(&gm__spec_keys[id]),
				  node_kind(v));
	return set_scalar(c, &v->start_mark, id,
			  (const char *)v->data.scalar.value,
			  v->data.scalar.style != YAML_PLAIN_SCALAR_STYLE);
}

static int walk_map(struct gm__walk *w, yaml_node_t *map, int section)
{
	yaml_node_pair_t *p;
	int rc;

	for (p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top;
	     p++) {
		rc = walk_pair(w, p, section);
		if (rc)
			return rc;
	}
	return 0;
}

/* ==== The file ==== */

/* 1-based line and column (in characters) of byte offset off in buf. */
static void position(const char *buf, size_t off, unsigned *line,
		     unsigned *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off; i++) {
		unsigned char b = (unsigned char)buf[i];
		if (b == '\n') {
			++*line;
			*col = 1;
		} else if ((b & 0xc0) != 0x80) {
			++*col;
		}
	}
}

/* The length of the UTF-8 sequence at s (n bytes left), 0 if invalid. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	size_t len;
	uint32_t cp;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf)
		len = 2, cp = s[0] & 0x1f;
	else if (s[0] >= 0xe0 && s[0] <= 0xef)
		len = 3, cp = s[0] & 0x0f;
	else if (s[0] >= 0xf0 && s[0] <= 0xf4)
		len = 4, cp = s[0] & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
	    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff)
		return 0;
	return len;
}

/* Check that buf is UTF-8 before libyaml sees it (its message has no mark). */
static int check_utf8(struct gm__spec_ctx *c, const char *buf, size_t n)
{
	const unsigned char *s = (const unsigned char *)buf;
	unsigned line, col;
	size_t i = 0, len;

	while (i < n) {
		len = utf8_len(s + i, n - i);
		if (!len) {
			position(buf, i, &line, &col);
			return fail_at(c, line, col,
				       "not UTF-8 text (byte 0x%02x); save the "
				       "spec as UTF-8", s[i]);
		}
		i += len;
	}
	return 0;
}

/* Read the whole file (at most GM_SPEC_MAX_FILE bytes), NUL-terminated. */
static int read_file(struct gm__spec_ctx *c, char **out, size_t *n)
{
	FILE *f = c->from_stdin ? stdin : fopen(c->path, "rb");
	char *buf = NULL;
	size_t got;
	int rc = 0;

	if (!f)
		return gm_diag_set(c->diag, GM_EIO, "%s: cannot open: %s",
				   c->path, strerror(errno));
	buf = malloc(GM_SPEC_MAX_FILE + 1);
	if (!buf) {
		rc = gm_diag_set(c->diag, GM_ENOMEM, "%s: out of memory",
				 c->path);
		goto out;
	}
	got = fread(buf, 1, GM_SPEC_MAX_FILE + 1, f);
	if (ferror(f)) {
		rc = gm_diag_set(c->diag, GM_EIO, "%s: cannot read: %s",
				 c->path, strerror(errno));
		goto out;
	}
	if (got > GM_SPEC_MAX_FILE) {
		rc = gm_diag_set(c->diag, GM_EINVAL,
				 "%s: larger than %u bytes; not a spec",
				 c->path, GM_SPEC_MAX_FILE);
		goto out;
	}
	buf[got] = '\0';
	*out = buf;
	*n = got;
	buf = NULL;
out:
	free(buf);
	if (f != stdin)
		fclose(f);
	return rc;
}

/* The byte offset of 1-based line:col (in characters) in buf. */
static size_t byte_offset(const char *buf, unsigned line, unsigned col)
{
	size_t i = 0;

	for (; line > 1 && buf[i]; i++) {
		if (buf[i] == '\n')
			line--;
	}
	for (; col > 1 && buf[i] && buf[i] != '\n'; col--) {
		i++;
		while ((buf[i] & 0xc0) == 0x80)
			i++;
	}
	return i;
}

/* libyaml's error, at its mark, with a hint for tabs. */
static int syntax_error(struct gm__spec_ctx *c, yaml_parser_t *p,
			const char *buf)
{
	unsigned line, col;
	const yaml_mark_t *m = &p->problem_mark;
	const char *problem = p->problem ? p->problem : "unreadable YAML";

	if (p->error == YAML_MEMORY_ERROR)
		return gm_diag_set(c->diag, GM_ENOMEM, "%s: out of memory",
				   c->path);
	if (p->error == YAML_READER_ERROR) {
		position(buf, p->problem_offset, &line, &col);
	} else {
		line = (unsigned)m->line + 1;
		col = (unsigned)m->column + 1;
	}
	if (p->error != YAML_READER_ERROR &&
	    buf[byte_offset(buf, line, col)] == '\t')
		return fail_at(c, line, col, "YAML syntax error: tabs are not "
			       "allowed, indent with spaces");
	if (p->context)
		return fail_at(c, line, col,
			       "YAML syntax error: %s (%s at line %zu)",
			       problem, p->context, p->context_mark.line + 1);
	return fail_at(c, line, col, "YAML syntax error: %s", problem);
}

/*
 * Bounds checked before the document is built (gm_yaml_scan): a spec is
 * two levels deep and has no use for many anchors; also no tags, no NUL
 * bytes (yaml_check.h says why).
 */
static const struct gm_yaml_limits spec_limits = {
	.max_depth = 32,
	.max_anchors = 256,
	.max_aliases = 256,
	.depth_hint = "a spec is a mapping of sections of keys",
};

/* The event pass: 0, or GM_EINVAL at file:line:column, GM_ENOMEM. */
static int check_events(struct gm__spec_ctx *c, const char *buf, size_t n)
{
	struct gm_yaml_fault f;
	int rc = gm_yaml_scan(buf, n, &spec_limits, &f);

	if (rc == 1)
		return fail_at(c, f.line, f.col, "%s", f.msg);
	if (rc)
		return gm_diag_set(c->diag, rc, "out of memory");
	return 0;
}

/*
 * Parse buf as one YAML document whose root is a mapping and walk it.
 */
static int load_doc(struct gm__spec_ctx *c, const char *buf, size_t n)
{
	yaml_parser_t parser;
	yaml_document_t doc, extra;
	struct gm__walk w = {.c = c, .doc = &doc};
	yaml_node_t *root;
	int rc;

	rc = check_events(c, buf, n);
	if (rc)
		return rc;
	if (!yaml_parser_initialize(&parser))
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	yaml_parser_set_input_string(&parser, (const unsigned char *)buf, n);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = syntax_error(c, &parser, buf);
		yaml_parser_delete(&parser);
		return rc;
	}
	root = yaml_document_get_root_node(&doc);
	if (!root) {
		rc = fail_at(c, 1, 1, "empty spec; expected a mapping with at "
			     "least a 'model' section");
		goto out;
	}
	c->root_line = (unsigned)root->start_mark.line + 1;
	c->root_col = (unsigned)root->start_mark.column + 1;
	if (root->type != YAML_MAPPING_NODE) {
		rc = fail_at(c, c->root_line, c->root_col,
			     "a spec is a mapping of keys (name, model, "
			     "training, ...), not %s",
			     root->type == YAML_SCALAR_NODE ? "a single value"
							    : "a list");
		goto out;
	}
	if (!yaml_parser_load(&parser, &extra)) {
		rc = syntax_error(c, &parser, buf);
		goto out;
	}
	root = yaml_document_get_root_node(&extra);
	if (root) {
		rc = fail_at(c, (unsigned)root->start_mark.line + 1,
			     (unsigned)root->start_mark.column + 1,
			     "a second YAML document; a spec is one document");
		yaml_document_delete(&extra);
		goto out;
	}
	yaml_document_delete(&extra);
	rc = walk_map(&w, yaml_document_get_root_node(&doc), -1);
out:
	yaml_document_delete(&doc);
	yaml_parser_delete(&parser);
	return rc;
}

/* ==== --set ==== */

/* A --set KEY that is not in the table: say why, suggest the closest. */
static int set_unknown(struct gm__spec_ctx *c, const char *key)
{
	const char *dot = strchr(key, '.'), *cands[GM_K_COUNT], *near;
	char sec[64];
	int parent = -1;
	size_t n = 0;

	snprintf(sec, sizeof(sec), "%.*s", dot ? (int)(dot - key) : 63, key);
	if (dot)
		parent = find_key(-1, sec, strlen(sec));
	if (parent >= 0 && gm__spec_keys[parent].kind != GM_KIND_MAP)
		return fail_at(c, 0, 0, "'%s' takes a value, not keys", sec);
	if (parent >= 0)
		return unknown_key(c, 0, 0, parent, dot + 1);
	if (!dot) {
		/* a key of a section given without it */
		char both[1024];

		if (sectioned(key, both, sizeof(both)))
			return fail_at(c, 0, 0, "unknown key '%s'; did you "
				       "mean %s?", key, both);
		return unknown_key(c, 0, 0, -1, key);
	}
	for (int i = 0; i < GM_K_COUNT; i++) {
		if (gm__spec_keys[i].parent < 0)
			cands[n++] = gm__spec_keys[i].name;
	}
	near = gm_text_suggest(sec, cands, n);
	if (near)
		return fail_at(c, 0, 0, "unknown key '%s'; did you mean "
			       "'%s%s'?", key, near, dot);
	return fail_at(c, 0, 0, "unknown key '%s'", key);
}

/* Apply one "dotted.key=value" over what the file gave. */
static int apply_set(struct gm__spec_ctx *c, const char *arg)
{
	const char *eq = strchr(arg, '=');
	char key[128];
	int id, parent;
	size_t n;

	c->set_key = arg;
	if (!eq || eq == arg)
		return fail_at(c, 0, 0, "expected KEY=VALUE, e.g. "
			       "training.micro_batch_size=4");
	n = (size_t)(eq - arg);
	if (n >= sizeof(key))
		return fail_at(c, 0, 0, "key too long");
	memcpy(key, arg, n);
	key[n] = '\0';
	c->set_key = key;
	id = find_dotted(key);
	if (id < 0)
		return set_unknown(c, key);
	if (gm__spec_keys[id].kind == GM_KIND_MAP)
		return fail_at(c, 0, 0, "'%s' is a section; set one of its "
			       "keys, e.g. %s.%s", key, key,
			       gm__spec_keys[id + 1].name);
	if (set_scalar(c, NULL, id, eq + 1, false))
		return GM_EINVAL;
	c->spec->where[id].origin = GM_SPEC_SET;
	parent = gm__spec_keys[id].parent;
	if (parent >= 0 && c->spec->where[parent].origin == GM_SPEC_DEFAULT)
		c->spec->where[parent].origin = GM_SPEC_SET;
	return 0;
}

/* The name of a spec by default: its file name without .yaml/.yml. */
static void default_name(struct gm_spec *spec, const char *path)
{
	const char *base = strrchr(path, '/');
	size_t n;

	base = base ? base + 1 : path;
	gm_text_copy(spec->name, sizeof(spec->name), base);
	n = strlen(spec->name);
	if (n > 5 && !strcmp(spec->name + n - 5, ".yaml"))
		spec->name[n - 5] = '\0';
	else if (n > 4 && !strcmp(spec->name + n - 4, ".yml"))
		spec->name[n - 4] = '\0';
}

int gm_spec_load(struct gm_spec *spec, const char *path,
		 const char *const *sets, int n_sets, struct gm_diag *diag)
{
	struct gm__spec_ctx c = {
		.spec = spec, .diag = diag, .path = path,
		.root_line = 1, .root_col = 1,
	};
	char *buf = NULL;
	size_t n = 0;
	int rc;

	if (!strcmp(path, "-")) {
		/* the spec on standard input; messages say <stdin>:l:c */
		c.from_stdin = true;
		c.path = path = GM_SPEC_STDIN;
	}
	memset(spec, 0, sizeof(*spec));
	gm_text_copy(spec->path, sizeof(spec->path), path);
	rc = read_file(&c, &buf, &n);
	if (rc)
		return rc;
	rc = check_utf8(&c, buf, n);
	if (!rc)
		rc = load_doc(&c, buf, n);
	free(buf);
	for (int i = 0; !rc && i < n_sets; i++)
		rc = apply_set(&c, sets[i]);
	c.set_key = NULL;
	if (!rc)
		rc = gm__hf_config_apply(&c);
	if (!rc)
		rc = gm__spec_deepspeed(&c);
	if (rc)
		return rc;
	if (!spec->name[0])
		default_name(spec, c.from_stdin ? "stdin" : path);
	gm__spec_defaults(spec);
	return gm__spec_validate(&c);
}

int gm_spec_apply(struct gm_spec *spec, const char *const *sets, int n_sets,
		  struct gm_diag *diag)
{
	struct gm__spec_ctx c = {
		.spec = spec, .diag = diag, .path = spec->path,
		.root_line = 1, .root_col = 1,
	};
	bool from_json[GM_SPEC_MAX_KEYS];
	int rc = 0;

	for (int id = 0; id < GM_SPEC_MAX_KEYS; id++)
		from_json[id] = spec->where[id].origin == GM_SPEC_DEEPSPEED;
	for (int i = 0; !rc && i < n_sets; i++)
		rc = apply_set(&c, sets[i]);
	c.set_key = NULL;
	if (rc)
		return rc;
	if (spec->training.deepspeed_config[0]) {
		/* what the DeepSpeed JSON filled is read again after the
		 * sets, as gm_spec_load() reads it after them (the batch it
		 * derives depends on data_parallel, overlap_comm's default on
		 * the stage); a set over a JSON value has no position, as
		 * when it is loaded */
		for (int id = 0; id < GM_SPEC_MAX_KEYS; id++) {
			struct gm_spec_where *w = &spec->where[id];
			if (!from_json[id])
				continue;
			if (w->origin == GM_SPEC_DEEPSPEED)
				memset(w, 0, sizeof(*w));
			else
				w->line = w->column = 0;
		}
		rc = gm__spec_deepspeed(&c);
		if (rc)
			return rc;
	}
	gm__spec_defaults(spec);
	return gm__spec_validate(&c);
}

/* ==== Queries ==== */

uint64_t gm_spec_data_parallel(const struct gm_spec *spec)
{
	if (spec->task != GM_TASK_TRAIN || !spec->parallelism.data_parallel)
		return 1;
	return spec->parallelism.data_parallel;
}

uint64_t gm_spec_expert_tensor_parallel(const struct gm_spec *spec)
{
	const struct gm_spec_parallel *p = &spec->parallelism;

	if (p->expert_tensor_parallel)
		return p->expert_tensor_parallel;
	return p->tensor_parallel ? p->tensor_parallel : 1;
}

bool gm_spec_given(const struct gm_spec *spec, const char *key)
{
	int id = find_dotted(key);

	return id >= 0 && spec->where[id].origin != GM_SPEC_DEFAULT;
}

enum gm_spec_origin gm_spec_origin_of(const struct gm_spec *spec,
				      const char *key)
{
	int id = find_dotted(key);

	return id >= 0 ? spec->where[id].origin : GM_SPEC_DEFAULT;
}

char *gm_spec_where(const struct gm_spec *spec, const char *key, char *buf,
		    size_t len)
{
	int id = find_dotted(key);
	const struct gm_spec_where *w;

	if (id < 0) {
		snprintf(buf, len, "%s", spec->path);
		return buf;
	}
	w = &spec->where[id];
	if (w->origin == GM_SPEC_FILE)
		snprintf(buf, len, "%s:%u:%u", spec->path, w->line, w->column);
	else if (w->origin == GM_SPEC_SET)
		snprintf(buf, len, "--set %s", key);
	else if (w->origin == GM_SPEC_DEEPSPEED && w->line)
		snprintf(buf, len, "%s:%u:%u", spec->deepspeed.path, w->line,
			 w->column);
	else if (w->origin == GM_SPEC_DEEPSPEED)
		snprintf(buf, len, "%s (DeepSpeed's default)",
			 spec->deepspeed.path);
	else if (w->origin == GM_SPEC_HF)
		snprintf(buf, len, "%s:%u:%u", spec->hf_path, w->line,
			 w->column);
	else
		snprintf(buf, len, "%s", spec->path);
	return buf;
}

/*
 * How many of word's alphanumeric tokens ("a100", "80gb" in "A100-80GB")
 * occur in name, case-insensitive: GPU names share model numbers more
 * reliably than spellings.
 */
static unsigned shared_tokens(const char *word, const char *name)
{
	char tok[64];
	unsigned n = 0;
	size_t len;

	while (*word) {
		len = 0;
		while (*word && !isalnum((unsigned char)*word))
			word++;
		while (isalnum((unsigned char)*word) && len < sizeof(tok) - 1)
			tok[len++] = *word++;
		while (isalnum((unsigned char)*word))
			word++;
		tok[len] = '\0';
		if (len >= 2 && strcasestr(name, tok))
			n++;
	}
	return n;
}

/* Lower is closer: more shared tokens first, then edit distance. */
static unsigned gpu_score(const char *word, const char *name)
{
	return (16 - shared_tokens(word, name)) * 256 +
	       gm_text_distance(word, name);
}

/*
 * Keep the (at most) three names closest to word in best[] (indexes into
 * names, nearest first), skipping spellings that differ only in case.
 */
static void keep_closest(const char *word, const char *const *names,
			 size_t i, size_t *best, unsigned *dist, size_t *nb)
{
	unsigned d = gpu_score(word, names[i]);
	size_t j;

	for (j = 0; j < *nb; j++) {
		if (!strcasecmp(names[best[j]], names[i]))
			return;
	}
	if (*nb < 3)
		j = (*nb)++;
	else if (d < dist[2])
		j = 2;
	else
		return;
	for (; j > 0 && dist[j - 1] > d; j--) {
		best[j] = best[j - 1];
		dist[j] = dist[j - 1];
	}
	best[j] = i;
	dist[j] = d;
}

int gm_spec_check_gpu(const struct gm_spec *spec, const char *const *names,
		      size_t n, struct gm_diag *diag)
{
	struct gm__spec_ctx c = {.spec = (struct gm_spec *)spec,
				 .diag = diag, .path = spec->path,
				 .root_line = 1, .root_col = 1};
	size_t best[3], nb = 0;
	unsigned dist[3];
	char list[512] = "";

	if (!spec->gpu[0])
		return 0;
	for (size_t i = 0; i < n; i++) {
		if (!strcasecmp(spec->gpu, names[i]))
			return 0;
	}
	for (size_t i = 0; i < n; i++)
		keep_closest(spec->gpu, names, i, best, dist, &nb);
	for (size_t j = 0; j < nb; j++) {
		strncat(list, j ? ", " : "", sizeof(list) - strlen(list) - 1);
		strncat(list, names[best[j]], sizeof(list) - strlen(list) - 1);
	}
	if (!nb)
		return gm__spec_blame(&c, GM_K_GPU, "unknown GPU '%s'",
				      spec->gpu);
	return gm__spec_blame(&c, GM_K_GPU, "unknown GPU '%s'; closest: %s",
			      spec->gpu, list);
}
