/*
 * Unit tests for planner/json.c (the tree, its marks and types) and
 * planner/hf_config.c (model.hf_config: the field map per model_type,
 * precedence of spec keys and --set, class defaults, the head from
 * "architectures", where a filled key points). The bad-input cases with
 * their messages are in tests/data/bad/hf-*.yaml.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "json.h"
#include "spec.h"

static char dir[64];
static struct gm_spec spec;
static struct gm_diag diag;

static void put(const char *file, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static int load(const char *yaml, const char *const *sets, int n)
{
	char path[128];

	put("s.yaml", yaml);
	snprintf(path, sizeof(path), "%s/s.yaml", dir);
	memset(&diag, 0, sizeof(diag));
	return gm_spec_load(&spec, path, sets, n, &diag);
}

/* Meta-Llama-3-8B's shape fields. */
#define LLAMA3                                                              \
	"{\n"                                                               \
	"  \"architectures\": [\"LlamaForCausalLM\"],\n"                    \
	"  \"hidden_size\": 4096,\n"                                        \
	"  \"intermediate_size\": 14336,\n"                                 \
	"  \"max_position_embeddings\": 8192,\n"                            \
	"  \"model_type\": \"llama\",\n"                                    \
	"  \"num_attention_heads\": 32,\n"                                  \
	"  \"num_hidden_layers\": 32,\n"                                    \
	"  \"num_key_value_heads\": 8,\n"                                   \
	"  \"rms_norm_eps\": 1e-05,\n"                                      \
	"  \"rope_scaling\": null,\n"                                       \
	"  \"vocab_size\": 128256\n"                                        \
	"}\n"

static void json_tree(void **state)
{
	struct gm_json *j = NULL;
	const struct gm_json_node *n;
	char path[128];
	uint64_t u;

	(void)state;
	put("t.json", LLAMA3);
	snprintf(path, sizeof(path), "%s/t.json", dir);
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag), 0);
	assert_int_equal(j->root->type, GM_JSON_OBJECT);
	assert_int_equal(j->root->n, 11);
	n = gm_json_get(j->root, "num_key_value_heads");
	assert_non_null(n);
	assert_int_equal(n->type, GM_JSON_NUMBER);
	assert_true(gm_json_uint(n, &u));
	assert_int_equal(u, 8);
	assert_int_equal(n->key_line, 9);
	assert_int_equal(n->key_column, 3);
	assert_int_equal(n->line, 9);
	assert_int_equal(n->column, 26);
	n = gm_json_get(j->root, "rms_norm_eps");
	assert_int_equal(n->type, GM_JSON_NUMBER);
	assert_false(gm_json_uint(n, &u));
	assert_true(n->number > 0.9e-5 && n->number < 1.1e-5);
	assert_int_equal(gm_json_get(j->root, "rope_scaling")->type,
			 GM_JSON_NULL);
	n = gm_json_get(j->root, "architectures");
	assert_int_equal(n->type, GM_JSON_ARRAY);
	assert_int_equal(n->n, 1);
	assert_string_equal(n->kids[0].text, "LlamaForCausalLM");
	assert_null(gm_json_get(j->root, "nope"));
	gm_json_tree_free(j);
}

/* A quoted number is a string; words other than true/false/null refused. */
static void json_types(void **state)
{
	struct gm_json *j = NULL;
	char path[128];
	uint64_t u;

	(void)state;
	put("t.json", "{\"a\": \"4096\", \"b\": true, \"c\": -1, \"d\": 1.0}");
	snprintf(path, sizeof(path), "%s/t.json", dir);
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag), 0);
	assert_int_equal(gm_json_get(j->root, "a")->type, GM_JSON_STRING);
	assert_false(gm_json_uint(gm_json_get(j->root, "a"), &u));
	assert_true(gm_json_get(j->root, "b")->boolean);
	assert_false(gm_json_uint(gm_json_get(j->root, "c"), &u));
	assert_false(gm_json_uint(gm_json_get(j->root, "d"), &u));
	gm_json_tree_free(j);
	put("t.json", "{\"a\": yes}");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "t.json:1:7: JSON syntax error"));
	put("t.json", "{\"a\": 1}\n{\"b\": 2}\n");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag), GM_EINVAL);
	/* transformers reads config.json with json.loads: no comments, no
	 * trailing commas (libyaml alone would take both) */
	put("t.json", "{\"a\": 1, # x\n\"b\": \"#\"}");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "t.json:1:10: JSON syntax error: a "
				       "comment ('#'); JSON has none"));
	put("t.json", "{\"a\": [1, 2 ,\n ], \"b\": \",]\"}");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "t.json:1:13: JSON syntax error: a "
				       "',' before ']' (JSON has no trailing "
				       "commas)"));
	/* a reader that takes them: blanked, "#" in a string kept */
	put("t.json", "{\"a\": [1, 2,], // x\n \"b\": \"#,]\",}");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_COMMENTS |
					   GM_JSON_TRAILING_COMMAS, &j, &diag),
			 0);
	assert_int_equal(gm_json_get(j->root, "a")->n, 2);
	assert_string_equal(gm_json_get(j->root, "b")->text, "#,]");
	assert_int_equal(gm_json_get(j->root, "b")->key_line, 2);
	assert_int_equal(gm_json_get(j->root, "b")->key_column, 2);
	gm_json_tree_free(j);
	put("t.json", "");
	assert_int_equal(gm_json_tree_load(path, GM_JSON_STRICT, &j, &diag), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "t.json:1:1: empty file"));
}

static void llama_from_config(void **state)
{
	char where[256];

	(void)state;
	put("c.json", LLAMA3);
	assert_int_equal(load("model:\n  hf_config: c.json\n", NULL, 0), 0);
	assert_int_equal(spec.model.architecture, GM_ARCH_LLAMA);
	assert_int_equal(spec.model.layers, 32);
	assert_int_equal(spec.model.hidden_size, 4096);
	assert_int_equal(spec.model.ffn_hidden_size, 14336);
	assert_int_equal(spec.model.attention_heads, 32);
	assert_int_equal(spec.model.kv_heads, 8);
	assert_int_equal(spec.model.vocab_size, 128256);
	assert_int_equal(spec.model.max_position_embeddings, 8192);
	assert_false(spec.model.tied_embeddings);
	assert_false(spec.model.qkv_bias);
	assert_int_equal(spec.model.head, GM_HEAD_CAUSAL_LM);
	/* the sequence length defaults from max_position_embeddings */
	assert_int_equal(spec.training.sequence_length, 8192);
	assert_true(gm_spec_given(&spec, "model.kv_heads"));
	gm_spec_where(&spec, "model.kv_heads", where, sizeof(where));
	assert_non_null(strstr(where, "/c.json:9:26"));
}

/* Keys written in the spec win, --set over both. */
static void spec_keys_win(void **state)
{
	const char *sets[] = {"model.vocab_size=32000"};

	(void)state;
	put("c.json", LLAMA3);
	assert_int_equal(load("model:\n  hf_config: c.json\n  layers: 2\n"
			      "  kv_heads: 32\n", sets, 1), 0);
	assert_int_equal(spec.model.layers, 2);
	assert_int_equal(spec.model.kv_heads, 32);
	assert_int_equal(spec.model.vocab_size, 32000);
	assert_int_equal(spec.model.hidden_size, 4096);
}

/* --set model.hf_config is relative to the current directory. */
static void set_hf_config(void **state)
{
	char set[160];
	const char *sets[] = {set};

	(void)state;
	put("c.json", LLAMA3);
	snprintf(set, sizeof(set), "model.hf_config=%s/c.json", dir);
	assert_int_equal(load("model:\n  layers: 4\n", sets, 1), 0);
	assert_int_equal(spec.model.layers, 4);
	assert_int_equal(spec.model.kv_heads, 8);
}

/* qwen2 implies q/k/v biases; mistral is llama's layout. */
static void qwen2_and_mistral(void **state)
{
	(void)state;
	put("c.json", "{\"model_type\": \"qwen2\", \"hidden_size\": 3584, "
	    "\"intermediate_size\": 18944, \"num_hidden_layers\": 28, "
	    "\"num_attention_heads\": 28, \"num_key_value_heads\": 4, "
	    "\"vocab_size\": 152064, \"tie_word_embeddings\": false}");
	assert_int_equal(load("model:\n  hf_config: c.json\n", NULL, 0), 0);
	assert_int_equal(spec.model.architecture, GM_ARCH_LLAMA);
	assert_true(spec.model.qkv_bias);
	assert_int_equal(load("model:\n  hf_config: c.json\n"
			      "  qkv_bias: false\n", NULL, 0), 0);
	assert_false(spec.model.qkv_bias);
	put("c.json", "{\"model_type\": \"mistral\", \"hidden_size\": 4096, "
	    "\"intermediate_size\": 14336, \"num_hidden_layers\": 32, "
	    "\"num_attention_heads\": 32, \"num_key_value_heads\": 8, "
	    "\"vocab_size\": 32000, \"sliding_window\": 4096, "
	    "\"head_dim\": 128}");
	assert_int_equal(load("model:\n  hf_config: c.json\n", NULL, 0), 0);
	assert_false(spec.model.qkv_bias);
	assert_false(spec.model.tied_embeddings); /* MistralConfig default */
}

/* GPT2Config: n_inner null = 4 * n_embd; n_positions and tying default. */
static void gpt2_defaults(void **state)
{
	(void)state;
	put("c.json", "{\"model_type\": \"gpt2\", \"n_embd\": 768, "
	    "\"n_head\": 12, \"n_layer\": 12, \"n_inner\": null, "
	    "\"vocab_size\": 50257}");
	assert_int_equal(load("model:\n  hf_config: c.json\n", NULL, 0), 0);
	assert_int_equal(spec.model.architecture, GM_ARCH_GPT2);
	assert_int_equal(spec.model.ffn_hidden_size, 3072);
	assert_int_equal(spec.model.max_position_embeddings, 1024);
	assert_true(spec.model.tied_embeddings);
}

/* BERT: the head from "architectures", num_labels from id2label. */
static void bert_heads(void **state)
{
	(void)state;
	put("c.json", "{\"model_type\": \"bert\", \"hidden_size\": 768, "
	    "\"intermediate_size\": 3072, \"num_hidden_layers\": 12, "
	    "\"num_attention_heads\": 12, \"vocab_size\": 21128, "
	    "\"architectures\": [\"BertForSequenceClassification\"], "
	    "\"id2label\": {\"0\": \"a\", \"1\": \"b\", \"2\": \"c\"}}");
	assert_int_equal(load("model:\n  hf_config: c.json\n", NULL, 0), 0);
	assert_int_equal(spec.model.architecture, GM_ARCH_BERT);
	assert_int_equal(spec.model.head, GM_HEAD_CLASSIFICATION);
	assert_int_equal(spec.model.num_labels, 3);
	assert_int_equal(spec.model.type_vocab_size, 2);
	assert_int_equal(spec.model.max_position_embeddings, 512);
	assert_true(spec.model.tied_embeddings);
	assert_int_equal(load("model:\n  hf_config: c.json\n"
			      "  head: masked-lm\n", NULL, 0), 0);
	assert_int_equal(spec.model.head, GM_HEAD_MASKED_LM);
}

/* A config in another directory: the path is the spec's directory's. */
static void relative_path(void **state)
{
	char sub[128];

	(void)state;
	snprintf(sub, sizeof(sub), "%s/configs", dir);
	assert_int_equal(mkdir(sub, 0700), 0);
	put("configs/l.json", LLAMA3);
	assert_int_equal(load("model:\n  hf_config: configs/l.json\n", NULL, 0),
			 0);
	assert_non_null(strstr(spec.hf_path, "/configs/l.json"));
	assert_int_equal(spec.model.vocab_size, 128256);
}

static int setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/gm-hf-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_tree),
		cmocka_unit_test(json_types),
		cmocka_unit_test(llama_from_config),
		cmocka_unit_test(spec_keys_win),
		cmocka_unit_test(set_hf_config),
		cmocka_unit_test(qwen2_and_mistral),
		cmocka_unit_test(gpt2_defaults),
		cmocka_unit_test(bert_heads),
		cmocka_unit_test(relative_path),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
