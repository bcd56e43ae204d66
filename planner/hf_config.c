/*
 * hf_config.c - a Hugging Face config.json into the model section of a
 * spec (see hf_config.h). Tables of rows: which config.json field fills
 * which spec key, which fields must be there, and which values a family
 * has no layout for; the rows the configuration classes share are one
 * table each, and a family lists the shared tables it takes before its
 * own. The field names and their defaults are those
 * of transformers' configuration classes (configuration_llama.py
 * LlamaConfig, configuration_mistral.py, configuration_qwen2.py,
 * configuration_qwen3.py, configuration_qwen3_moe.py,
 * configuration_mixtral.py, configuration_deepseek_v3.py,
 * configuration_gpt_neox.py, configuration_gpt2.py GPT2Config,
 * configuration_bert.py BertConfig, transformers v4.57).
 *
 * A row whose spec key this build of the planner does not have is
 * applied when the key appears (the family's validator then decides);
 * until then a value that would change the layout is refused.
 */
#include "hf_config.h"

#include "arch/family.h"

#include "json.h"
#include "spec_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "text.h"

enum hf_rule {
	HF_SET,      /* the value fills key (its kind decides the JSON type) */
	HF_HEAD_DIM, /* fills key where the planner's family takes
		      * model.head_dim (GM_FK_HEAD_DIM); else it must be
		      * hidden_size / num_attention_heads */
	HF_SHAPE_FREE, /* fills key where the build has it; else ignored:
			* no parameter or activation shape depends on it */
	HF_FALSE,    /* must be false or absent: `why` names the missing layout */
	HF_ONE,      /* must be 1 or absent */
	HF_EMPTY,    /* must be an empty list or absent */
	HF_NULLABLE, /* as HF_SET, but only an absent field takes `absent`:
		      * null means none (the key stays unset) */
};

struct hf_field {
	const char *hf;       /* the config.json field */
	const char *key;      /* the dotted spec key it fills, or NULL */
	enum hf_rule rule;
	bool required;        /* the config must have it unless the spec
			       * gives key */
	const char *absent;   /* the configuration class's default, set
			       * when the field is absent or null ("false") */
	const char *why;      /* HF_FALSE / HF_ONE / HF_EMPTY: why refused */
};

/* A key the family's model_type implies, whatever the fields say. */
struct hf_implied {
	const char *key, *value;
};

/* A family's row tables, applied in order (the shared ones first). */
#define HF_MAX_TABLES 4

struct hf_family {
	const char *model_type;
	const char *architecture;     /* the spec's model.architecture */
	const struct hf_field *tables[HF_MAX_TABLES + 1]; /* NULL-ended */
	const struct hf_implied *implied; /* NULL-terminated, may be NULL */
};

#define END {NULL, NULL, HF_SET, false, NULL, NULL}
#define REQ(hf, key) {hf, key, HF_SET, true, NULL, NULL}
#define OPT(hf, key) {hf, key, HF_SET, false, NULL, NULL}
#define DEF(hf, key, dflt) {hf, key, HF_SET, false, dflt, NULL}

static const char no_o_bias[] =
	"gives o_proj a bias too; the planner's llama family has q/k/v "
	"biases only (Qwen2's layout, model.qkv_bias)";
static const char no_mlp_bias[] =
	"gives the MLP projections biases, which the planner's llama family "
	"does not have";

/*
 * The rows every configuration class but GPT2Config (which has names of
 * its own) spells alike: PretrainedConfig subclasses' hidden_size,
 * num_hidden_layers, num_attention_heads and vocab_size.
 */
static const struct hf_field common_fields[] = {
	REQ("hidden_size", "model.hidden_size"),
	REQ("num_hidden_layers", "model.layers"),
	REQ("num_attention_heads", "model.attention_heads"),
	REQ("vocab_size", "model.vocab_size"),
	END,
};

/*
 * The rotary decoders: max_position_embeddings sizes no tensor (rotary
 * embeddings are computed; rope scaling changes no shape either), and
 * the embeddings are untied unless the config says. A sliding window
 * bounds the inference KV cache (mistral_fields).
 */
static const struct hf_field decoder_fields[] = {
	OPT("max_position_embeddings", "model.max_position_embeddings"),
	DEF("tie_word_embeddings", "model.tied_embeddings", "false"),
	END,
};

/* LlamaConfig's grouped-query attention and explicit head width, which
 * Mistral, Qwen2, Qwen3, Qwen3-MoE and Mixtral share. */
static const struct hf_field gqa_fields[] = {
	OPT("num_key_value_heads", "model.kv_heads"),
	{"head_dim", "model.head_dim", HF_HEAD_DIM, false, NULL, NULL},
	END,
};

/* Llama, Mistral, Qwen2: LlamaConfig's fields beyond the shared ones. */
static const struct hf_field llama_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	{"attention_bias", NULL, HF_FALSE, false, NULL, no_o_bias},
	{"mlp_bias", NULL, HF_FALSE, false, NULL, no_mlp_bias},
	END,
};

/* Mistral: Llama's fields and the sliding window, MistralConfig's
 * (transformers 5.17.0 models/mistral/configuration_mistral.py:
 * sliding_window defaults to 4096; null is full attention, which
 * Mistral-7B v0.2 and later give). Qwen2 keeps its window off unless
 * use_sliding_window, so its field is not read. */
static const struct hf_field mistral_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	{"attention_bias", NULL, HF_FALSE, false, NULL, no_o_bias},
	{"mlp_bias", NULL, HF_FALSE, false, NULL, no_mlp_bias},
	{"sliding_window", "model.sliding_window", HF_NULLABLE, false,
	 "4096", NULL},
	END,
};

static const struct hf_implied qwen2_implied[] = {
	{"model.qkv_bias", "true"}, /* Qwen2Attention: bias=True on q, k, v */
	{NULL, NULL},
};

/* Qwen3: Llama's layout with q/k norms and an explicit head_dim. */
static const struct hf_field qwen3_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	{"attention_bias", NULL, HF_FALSE, false, NULL,
	 "gives q/k/v/o biases, which the planner's qwen3 family does not "
	 "have"},
	END,
};

/* Qwen3-MoE: every layer sparse (decoder_sparse_step 1, no mlp_only_layers). */
static const struct hf_field qwen3_moe_fields[] = {
	OPT("intermediate_size", "model.ffn_hidden_size"),
	REQ("moe_intermediate_size", "model.moe_ffn_hidden_size"),
	REQ("num_experts", "model.experts"),
	REQ("num_experts_per_tok", "model.experts_per_token"),
	{"decoder_sparse_step", NULL, HF_ONE, false, NULL,
	 "makes some layers dense; the planner's qwen3-moe family has every "
	 "layer sparse"},
	{"mlp_only_layers", NULL, HF_EMPTY, false, NULL,
	 "makes some layers dense; the planner's qwen3-moe family has every "
	 "layer sparse"},
	{"attention_bias", NULL, HF_FALSE, false, NULL,
	 "gives q/k/v/o biases, which the planner's qwen3-moe family does "
	 "not have"},
	END,
};

/*
 * Mixtral: every layer's MLP is num_local_experts experts of
 * intermediate_size; the width fills both ffn_hidden_size and
 * moe_ffn_hidden_size (the family reads the one it means).
 */
static const struct hf_field mixtral_fields[] = {
	REQ("intermediate_size", "model.moe_ffn_hidden_size"),
	OPT("intermediate_size", "model.ffn_hidden_size"),
	REQ("num_local_experts", "model.experts"),
	REQ("num_experts_per_tok", "model.experts_per_token"),
	END,
};

/*
 * DeepSeek-V3: multi-head latent attention (q/kv low-rank projections,
 * rope and nope parts of a head), first_k_dense_replace dense layers of
 * intermediate_size, then n_routed_experts experts of
 * moe_intermediate_size plus n_shared_experts always-on ones.
 * num_nextn_predict_layers (multi-token prediction) is not part of
 * transformers' DeepseekV3ForCausalLM and is not read.
 */
static const struct hf_field deepseek_v3_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	REQ("moe_intermediate_size", "model.moe_ffn_hidden_size"),
	OPT("num_key_value_heads", "model.kv_heads"),
	REQ("n_routed_experts", "model.experts"),
	REQ("num_experts_per_tok", "model.experts_per_token"),
	OPT("n_shared_experts", "model.shared_experts"),
	OPT("first_k_dense_replace", "model.dense_layers"),
	OPT("q_lora_rank", "model.q_lora_rank"),
	REQ("kv_lora_rank", "model.kv_lora_rank"),
	REQ("qk_rope_head_dim", "model.qk_rope_head_dim"),
	REQ("qk_nope_head_dim", "model.qk_nope_head_dim"),
	REQ("v_head_dim", "model.v_head_dim"),
	{"attention_bias", NULL, HF_FALSE, false, NULL,
	 "gives the attention projections biases, which the planner's "
	 "deepseek-v3 family does not have"},
	END,
};

/* GPT-NeoX / Pythia: rotary_pct of each head is rotated. */
static const struct hf_field gpt_neox_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	{"rotary_pct", "model.rotary_pct", HF_SHAPE_FREE, false, NULL, NULL},
	{"use_parallel_residual", "model.parallel_residual", HF_SHAPE_FREE,
	 false, NULL, NULL},
	END,
};

/* GPT2Config, all its own names: n_inner null = 4 * n_embd (the
 * planner's default too). */
static const struct hf_field gpt2_fields[] = {
	REQ("n_embd", "model.hidden_size"),
	OPT("n_inner", "model.ffn_hidden_size"),
	REQ("n_layer", "model.layers"),
	REQ("n_head", "model.attention_heads"),
	REQ("vocab_size", "model.vocab_size"),
	DEF("n_positions", "model.max_position_embeddings", "1024"),
	DEF("tie_word_embeddings", "model.tied_embeddings", "true"),
	END,
};

/* BertConfig: a learned position table and token types, tied by default. */
static const struct hf_field bert_fields[] = {
	REQ("intermediate_size", "model.ffn_hidden_size"),
	DEF("max_position_embeddings", "model.max_position_embeddings", "512"),
	DEF("type_vocab_size", "model.type_vocab_size", "2"),
	DEF("tie_word_embeddings", "model.tied_embeddings", "true"),
	END,
};

#define LLAMA_LIKE(extra) {common_fields, decoder_fields, gqa_fields, extra}

static const struct hf_family families[] = {
	{"llama", "llama", LLAMA_LIKE(llama_fields), NULL},
	{"mistral", "llama", LLAMA_LIKE(mistral_fields), NULL},
	{"qwen2", "llama", LLAMA_LIKE(llama_fields), qwen2_implied},
	{"qwen3", "qwen3", LLAMA_LIKE(qwen3_fields), NULL},
	{"mixtral", "mixtral", LLAMA_LIKE(mixtral_fields), NULL},
	{"qwen3_moe", "qwen3-moe", LLAMA_LIKE(qwen3_moe_fields), NULL},
	{"deepseek_v3", "deepseek-v3",
	 {common_fields, decoder_fields, deepseek_v3_fields}, NULL},
	{"gpt2", "gpt2", {gpt2_fields}, NULL},
	{"gpt_neox", "gpt-neox",
	 {common_fields, decoder_fields, gpt_neox_fields}, NULL},
	{"bert", "bert", {common_fields, bert_fields}, NULL},
};

#define N_FAMILIES (sizeof(families) / sizeof(families[0]))

/* transformers' class name endings -> model.head. */
static const struct {
	const char *suffix, *head;
} heads[] = {
	{"ForCausalLM", "causal-lm"},
	{"LMHeadModel", "causal-lm"},
	{"ForMaskedLM", "masked-lm"},
	{"ForSequenceClassification", "classification"},
};

void gm_hf_config_known(char *buf, size_t len)
{
	size_t used = 0;

	buf[0] = '\0';
	for (size_t i = 0; i < N_FAMILIES && used < len; i++)
		used += (size_t)snprintf(buf + used, len - used, "%s%s",
					 i ? ", " : "", families[i].model_type);
}

/* ==== Storing a value into a spec key ==== */

struct hf_ctx {
	struct gm__spec_ctx *c;
	struct gm_json *j;
	const struct hf_family *fam;
};

static bool given(const struct gm_spec *s, int id)
{
	return s->where[id].origin != GM_SPEC_DEFAULT;
}

static void mark_from(struct hf_ctx *h, int id, const struct gm_json_node *n,
		      const char *field)
{
	struct gm_spec_where *w = &h->c->spec->where[id];

	w->origin = GM_SPEC_HF;
	w->line = n->line;
	w->column = n->column;
	w->field = field;
}

/* Index of name in key id's enum names, or -1. */
static int enum_index(int id, const char *name)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];

	for (size_t i = 0; i < k->n_names; i++) {
		if (!strcmp(k->names[i], name))
			return (int)i;
	}
	return -1;
}

/*
 * Store JSON value n of config field `field` into key id, by the key's
 * kind. text overrides the node's value (a class default or an implied
 * value); n then only gives the position.
 */
static int store(struct hf_ctx *h, int id, const struct gm_json_node *n,
		 const char *field, const char *text)
{
	const struct gm__spec_keydef *k = &gm__spec_keys[id];
	void *dst = (char *)h->c->spec + k->off;
	char key[64];
	uint64_t u;
	int e;

	gm__spec_dotted(id, key, sizeof(key));
	switch (k->kind) {
	case GM_KIND_U64:
	case GM_KIND_U32:
		if (text) {
			u = strtoull(text, NULL, 10);
		} else if (!gm_json_uint(n, &u)) {
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): expected a non-negative "
					    "integer, got %s", field, key,
					    n->type == GM_JSON_NUMBER
						    ? n->text
						    : gm_json_type_name(n->type));
		}
		if (u < k->min || u > k->max)
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): must be %u..%u, got %llu",
					    field, key, k->min, k->max,
					    (unsigned long long)u);
		if (k->kind == GM_KIND_U64)
			*(uint64_t *)dst = u;
		else
			*(unsigned *)dst = (unsigned)u;
		break;
	case GM_KIND_BOOL:
		if (!text && n->type != GM_JSON_BOOL)
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): expected true or false, "
					    "got %s", field, key,
					    gm_json_type_name(n->type));
		*(bool *)dst = text ? !strcmp(text, "true") : n->boolean;
		break;
	case GM_KIND_NUM:
		if (!text && (n->type != GM_JSON_NUMBER || !(n->number > 0)))
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): expected a positive "
					    "number", field, key);
		*(double *)dst = text ? strtod(text, NULL) : n->number;
		break;
	case GM_KIND_ENUM:
		if (!text && n->type != GM_JSON_STRING)
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): expected a string, got "
					    "%s", field, key,
					    gm_json_type_name(n->type));
		e = enum_index(id, text ? text : n->text);
		if (e < 0)
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s (%s): '%s' is not one of its "
					    "values", field, key,
					    text ? text : n->text);
		*(int *)dst = e;
		break;
	case GM_KIND_STR:
	case GM_KIND_MAP:
	case GM_KIND_LIST:
		return gm_json_fail(h->j, n, false, h->c->diag,
				    "%s: cannot fill %s", field, key);
	}
	mark_from(h, id, n, field);
	return 0;
}

/* ==== The family's rows ==== */

static bool is_null(const struct gm_json_node *n)
{
	return !n || n->type == GM_JSON_NULL;
}

/* A row whose key this build of the planner does not have. */
static int row_without_key(struct hf_ctx *h, const struct hf_field *f,
			   const struct gm_json_node *n)
{
	const struct gm_spec_model *m = &h->c->spec->model;
	uint64_t u;

	switch (f->rule) {
	case HF_SHAPE_FREE:
		return 0;
	case HF_HEAD_DIM:
		if (!gm_json_uint(n, &u))
			return gm_json_fail(h->j, n, false, h->c->diag,
					    "%s: expected a positive integer",
					    f->hf);
		if (m->attention_heads && u * m->attention_heads ==
					  m->hidden_size)
			return 0;
		return gm_json_fail(h->j, n, false, h->c->diag,
				    "%s %llu is not hidden_size / "
				    "num_attention_heads (%llu / %llu); the "
				    "planner's %s family has no model.head_dim",
				    f->hf, (unsigned long long)u,
				    (unsigned long long)m->hidden_size,
				    (unsigned long long)m->attention_heads,
				    h->fam->architecture);
	default:
		return gm_json_fail(h->j, n, false, h->c->diag,
				    "%s: this build of the planner has no key "
				    "%s for it (family %s)", f->hf, f->key,
				    h->fam->architecture);
	}
}

/* The checks of HF_FALSE / HF_ONE / HF_EMPTY rows. */
static int row_check(struct hf_ctx *h, const struct hf_field *f,
		     const struct gm_json_node *n)
{
	uint64_t u;
	bool ok;

	if (f->rule == HF_FALSE)
		ok = n->type == GM_JSON_BOOL && !n->boolean;
	else if (f->rule == HF_ONE)
		ok = gm_json_uint(n, &u) && u == 1;
	else
		ok = n->type == GM_JSON_ARRAY && !n->n;
	if (ok)
		return 0;
	return gm_json_fail(h->j, n, false, h->c->diag, "%s %s %s", f->hf,
			    n->text ? n->text : gm_json_type_name(n->type),
			    f->why);
}

/*
 * One row: fill its key unless the spec gives it. HF_HEAD_DIM rows are
 * checked in a second pass (pass 1), when hidden size and heads are
 * known, spec values included.
 */
static int apply_row(struct hf_ctx *h, const struct hf_field *f, int pass)
{
	const struct gm_json_node *root = h->j->root;
	const struct gm_json_node *n = gm_json_get(root, f->hf);
	int id = f->key ? gm__spec_find(f->key) : -1;

	if ((f->rule == HF_HEAD_DIM) != (pass == 1))
		return 0;
	if (f->rule == HF_FALSE || f->rule == HF_ONE || f->rule == HF_EMPTY)
		return is_null(n) ? 0 : row_check(h, f, n);
	if (id >= 0 && given(h->c->spec, id))
		return 0;
	if (is_null(n)) {
		if (f->required)
			return gm_json_fail(h->j, n ? n : root, n != NULL,
					    h->c->diag, "missing \"%s\" "
					    "(required for model_type '%s'"
					    "%s%s)", f->hf,
					    h->fam->model_type,
					    f->key ? ", or give " : "",
					    f->key ? f->key : "");
		if (f->absent && id >= 0 &&
		    (f->rule != HF_NULLABLE || !n))
			return store(h, id, root, f->hf, f->absent);
		return 0;
	}
	if (id < 0 || (f->rule == HF_HEAD_DIM &&
			!(gm_family(h->c->spec->model.architecture)->keys &
			  GM_FK_HEAD_DIM)))
		return row_without_key(h, f, n);
	return store(h, id, n, f->hf, NULL);
}

/* model.head from "architectures": ["LlamaForCausalLM"], where it says. */
static int apply_head(struct hf_ctx *h)
{
	const struct gm_json_node *a = gm_json_get(h->j->root,
						   "architectures");
	const struct gm_json_node *labels;
	const char *cls;
	size_t len;

	if (given(h->c->spec, GM_K_HEAD) || !a || a->type != GM_JSON_ARRAY ||
	    a->n != 1 || a->kids[0].type != GM_JSON_STRING)
		return 0;
	cls = a->kids[0].text;
	len = strlen(cls);
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		size_t sl = strlen(heads[i].suffix);
		int rc;

		if (len < sl || strcmp(cls + len - sl, heads[i].suffix))
			continue;
		rc = store(h, GM_K_HEAD, &a->kids[0], "architectures",
			   heads[i].head);
		labels = gm_json_get(h->j->root, "id2label");
		if (!rc && !strcmp(heads[i].head, "classification") &&
		    labels && labels->type == GM_JSON_OBJECT && labels->n &&
		    !given(h->c->spec, GM_K_NUM_LABELS)) {
			char num[32];
			snprintf(num, sizeof(num), "%zu", labels->n);
			rc = store(h, GM_K_NUM_LABELS, labels, "id2label", num);
		}
		return rc;
	}
	return 0;
}

/* model_type -> the family, and model.architecture from it. */
static int pick_family(struct hf_ctx *h)
{
	const struct gm_json_node *root = h->j->root;
	const struct gm_json_node *t = gm_json_get(root, "model_type");
	struct gm_spec *s = h->c->spec;
	char known[256];
	int arch;

	gm_hf_config_known(known, sizeof(known));
	if (!t)
		return gm_json_fail(h->j, root, false, h->c->diag,
				    "missing \"model_type\" (the model family; "
				    "known: %s)", known);
	if (t->type != GM_JSON_STRING)
		return gm_json_fail(h->j, t, false, h->c->diag,
				    "model_type: expected a string, got %s",
				    gm_json_type_name(t->type));
	for (size_t i = 0; i < N_FAMILIES && !h->fam; i++) {
		if (!strcmp(t->text, families[i].model_type))
			h->fam = &families[i];
	}
	if (!h->fam)
		return gm_json_fail(h->j, t, false, h->c->diag,
				    "model_type '%s' is not known; known: %s",
				    t->text, known);
	arch = enum_index(GM_K_ARCH, h->fam->architecture);
	if (arch < 0)
		return gm_json_fail(h->j, t, false, h->c->diag,
				    "model_type '%s' needs the planner's "
				    "family '%s', which this build does not "
				    "have", t->text, h->fam->architecture);
	if (given(s, GM_K_ARCH) && (int)s->model.architecture != arch)
		return gm__spec_blame(h->c, GM_K_ARCH, "'%s' contradicts "
				      "hf_config's model_type '%s' (family "
				      "'%s')",
				      gm_arch_name(s->model.architecture),
				      t->text, h->fam->architecture);
	if (!given(s, GM_K_ARCH))
		store(h, GM_K_ARCH, t, "model_type", h->fam->architecture);
	for (const struct hf_implied *im = h->fam->implied; im && im->key;
	     im++) {
		int id = gm__spec_find(im->key);
		int rc;

		if (id < 0 || given(s, id))
			continue;
		rc = store(h, id, t, "model_type", im->value);
		if (rc)
			return rc;
	}
	return 0;
}

int gm__hf_config_apply(struct gm__spec_ctx *c)
{
	struct gm_spec *s = c->spec;
	struct hf_ctx h = {.c = c};
	struct gm_diag d = {{0}};
	int rc;

	if (!given(s, GM_K_HF_CONFIG))
		return 0;
	if (!gm__spec_path(s, GM_K_HF_CONFIG, s->hf_config, s->hf_path,
			   sizeof(s->hf_path)))
		return gm__spec_blame(c, GM_K_HF_CONFIG, "the path is too long");
	rc = gm_json_tree_load(s->hf_path, GM_JSON_STRICT, &h.j, &d);
	if (rc == GM_EIO)
		return gm__spec_blame(c, GM_K_HF_CONFIG, "%s", d.msg);
	if (rc) {
		if (c->diag)
			*c->diag = d;
		return rc;
	}
	if (h.j->root->type != GM_JSON_OBJECT) {
		rc = gm_json_fail(h.j, h.j->root, false, c->diag,
				  "a config.json is an object {...}, not %s",
				  gm_json_type_name(h.j->root->type));
		goto out;
	}
	rc = pick_family(&h);
	for (int pass = 0; !rc && pass < 2; pass++) {
		for (size_t t = 0; !rc && h.fam->tables[t]; t++) {
			for (const struct hf_field *f = h.fam->tables[t];
			     !rc && f->hf; f++)
				rc = apply_row(&h, f, pass);
		}
		if (!rc && !pass)
			rc = apply_head(&h);
	}
out:
	gm_json_tree_free(h.j);
	return rc;
}
