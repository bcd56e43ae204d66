/* Unit tests for planner/spec.c and spec_rules.c: defaults, --set, enums. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "arch/family.h"
#include "catalog.h"
#include "error.h"
#include "spec.h"

static char dir[64];
static struct gm_spec spec;
static struct gm_diag diag;

/* Write text to DIR/file and load it with sets; returns gm_spec_load's. */
static int load(const char *file, const char *text, const char *const *sets,
		int n)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	memset(&diag, 0, sizeof(diag));
	return gm_spec_load(&spec, path, sets, n, &diag);
}

#define LLAMA                                                              \
	"model:\n  layers: 32\n  hidden_size: 4096\n  attention_heads: 32\n"

static void defaults_llama(void **state)
{
	(void)state;
	assert_int_equal(load("tiny.yaml", LLAMA, NULL, 0), 0);
	assert_string_equal(spec.name, "tiny");
	assert_int_equal(spec.task, GM_TASK_TRAIN);
	assert_int_equal(spec.model.architecture, GM_ARCH_LLAMA);
	assert_int_equal(spec.model.ffn_hidden_size, 11008);
	assert_int_equal(spec.model.kv_heads, 32);
	assert_int_equal(spec.model.vocab_size, 32000);
	assert_int_equal(spec.model.max_position_embeddings, 0);
	assert_int_equal(spec.model.type_vocab_size, 0);
	assert_false(spec.model.tied_embeddings);
	assert_false(spec.model.qkv_bias);
	assert_int_equal(spec.model.head, GM_HEAD_CAUSAL_LM);
	assert_int_equal(spec.model.num_labels, 2);
	assert_true(spec.model.parameters == 0);
	assert_int_equal(spec.training.micro_batch_size, 1);
	assert_int_equal(spec.training.global_batch_size, 0);
	assert_int_equal(spec.training.sequence_length, 2048);
	assert_int_equal(spec.training.precision, GM_PREC_BF16_MIXED);
	assert_int_equal(spec.training.optimizer, GM_OPT_ADAMW);
	assert_int_equal(spec.training.activation_checkpointing, GM_CKPT_NONE);
	assert_int_equal(spec.training.attention, GM_ATTN_SDPA);
	assert_int_equal(spec.inference.precision, GM_PREC_BF16_TRUE);
	assert_int_equal(spec.inference.batch_size, 1);
	assert_int_equal(spec.inference.prompt_length, 2048);
	assert_int_equal(spec.inference.generate_length, 0);
	assert_int_equal(spec.inference.kv_cache_dtype, GM_KV_BF16);
	assert_int_equal(spec.parallelism.data_parallel, 1);
	assert_int_equal(spec.parallelism.tensor_parallel, 1);
	assert_int_equal(spec.parallelism.pipeline_parallel, 1);
	assert_false(spec.parallelism.sequence_parallel);
	assert_int_equal(spec.parallelism.zero_stage, 0);
	assert_string_equal(spec.gpu, "");
	assert_false(gm_spec_given(&spec, "model.kv_heads"));
	assert_true(gm_spec_given(&spec, "model.layers"));
}

/* Meta's rule: 2/3 of 4h, rounded up to a multiple of 256. */
static void llama_ffn_rule(void **state)
{
	(void)state;
	assert_int_equal(load("a.yml", "model:\n  layers: 40\n  hidden_size: "
			      "5120\n  attention_heads: 40\n", NULL, 0), 0);
	assert_string_equal(spec.name, "a");
	assert_int_equal(spec.model.ffn_hidden_size, 13824);
}

static void defaults_gpt2(void **state)
{
	(void)state;
	assert_int_equal(load("g.yaml", "model:\n  architecture: gpt2\n  layers: "
			      "12\n  hidden_size: 768\n  attention_heads: 12\n",
			      NULL, 0), 0);
	assert_int_equal(spec.model.ffn_hidden_size, 3072);
	assert_int_equal(spec.model.vocab_size, 50257);
	assert_int_equal(spec.model.max_position_embeddings, 1024);
	assert_int_equal(spec.training.sequence_length, 1024);
	assert_true(spec.model.tied_embeddings);
	assert_int_equal(spec.model.head, GM_HEAD_CAUSAL_LM);
}

static void defaults_bert(void **state)
{
	(void)state;
	assert_int_equal(load("b.yaml", "model:\n  architecture: bert\n  layers: "
			      "24\n  hidden_size: 1024\n  attention_heads: 16\n",
			      NULL, 0), 0);
	assert_int_equal(spec.model.ffn_hidden_size, 4096);
	assert_int_equal(spec.model.vocab_size, 30522);
	assert_int_equal(spec.model.max_position_embeddings, 512);
	assert_int_equal(spec.model.type_vocab_size, 2);
	assert_int_equal(spec.training.sequence_length, 512);
	assert_true(spec.model.tied_embeddings);
	assert_int_equal(spec.model.head, GM_HEAD_MASKED_LM);
}

static void overrides(void **state)
{
	const char *sets[] = {
		"training.micro_batch_size=4", "hardware.gpu=h100",
		"model.tied_embeddings=yes", "parallelism.zero_stage=3",
		"training.micro_batch_size=8", "name=renamed",
	};
	char where[256];

	(void)state;
	assert_int_equal(load("o.yaml", "name: o\n" LLAMA "training:\n  "
			      "micro_batch_size: 2\n", sets, 6), 0);
	assert_int_equal(spec.training.micro_batch_size, 8); /* last wins */
	assert_string_equal(spec.gpu, "h100");
	assert_true(spec.model.tied_embeddings);
	assert_int_equal(spec.parallelism.zero_stage, 3);
	assert_string_equal(spec.name, "renamed");
	gm_spec_where(&spec, "training.micro_batch_size", where,
		      sizeof(where));
	assert_string_equal(where, "--set training.micro_batch_size");
	gm_spec_where(&spec, "model.hidden_size", where, sizeof(where));
	assert_non_null(strstr(where, "/o.yaml:4:16"));
	assert_true(gm_spec_given(&spec, "hardware.gpu"));
}

/* --set is checked like the file, and named in the message. */
static void override_errors(void **state)
{
	const char *bad[] = {"parallelism.data_parallel=0"};

	(void)state;
	assert_int_equal(load("e.yaml", LLAMA, bad, 1), GM_EINVAL);
	assert_string_equal(diag.msg, "--set parallelism.data_parallel: must "
			    "be a positive integer, got 0");
}

/* Another tool's name for a key (HF TrainingArguments, config.json,
 * Megatron-LM) gets the planner's name, from --set and from the file;
 * a list key from --set takes YAML's inline brackets too. */
static void foreign_names(void **state)
{
	const char *ck[] = {"training.gradient_checkpointing=full"};
	const char *tp[] = {"parallelism.tensor_model_parallel_size=2"};
	const char *lt[] = {"training.adapter=lora",
			    "training.lora_targets=[q_proj, v_proj]"};

	(void)state;
	assert_int_equal(load("e.yaml", LLAMA, ck, 1), GM_EINVAL);
	assert_string_equal(diag.msg, "--set training.gradient_checkpointing: "
			    "unknown key 'gradient_checkpointing' in "
			    "training; gpumem's key is "
			    "'activation_checkpointing' (none, selective or "
			    "full)");
	assert_int_equal(load("e.yaml", LLAMA, tp, 1), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "gpumem's key is 'tensor_parallel'"));
	assert_int_equal(load("e.yaml", "model:\n  num_hidden_layers: 4\n",
			      NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "e.yaml:2:3: unknown key "
				       "'num_hidden_layers' in model; gpumem's "
				       "key is 'layers'"));
	/* at the top level, and in another section than the key's */
	{
		const char *top[] = {"per_device_train_batch_size=2"};
		const char *zs[] = {"training.zero_stage=3"};

		assert_int_equal(load("e.yaml", LLAMA, top, 1), GM_EINVAL);
		assert_non_null(strstr(diag.msg, "at the top level; gpumem's "
					       "key is "
					       "'training.micro_batch_size'"));
		assert_int_equal(load("e.yaml", LLAMA, zs, 1), GM_EINVAL);
		assert_non_null(strstr(diag.msg, "unknown key 'zero_stage' in "
					       "training; it is parallelism's: "
					       "'parallelism.zero_stage'"));
		assert_int_equal(load("e.yaml", LLAMA "training:\n  fsdp: "
				      "full\n", NULL, 0), GM_EINVAL);
		assert_non_null(strstr(diag.msg, "e.yaml:6:3: unknown key "
					       "'fsdp' in training; gpumem's "
					       "key is 'parallelism.zero_stage'"));
	}
	/* inference.precision offers only what inference takes */
	{
		const char *ip[] = {"task=inference", "inference.precision=bf16"};

		assert_int_equal(load("e.yaml", LLAMA, ip, 2), GM_EINVAL);
		assert_string_equal(diag.msg, "--set inference.precision: "
				    "unknown value 'bf16'; did you mean "
				    "'bf16-true'?");
	}
	assert_int_equal(load("e.yaml", LLAMA, lt, 2), 0);
	assert_int_equal(spec.training.n_lora_targets, 2);
	assert_string_equal(spec.training.lora_targets[0], "q_proj");
	assert_string_equal(spec.training.lora_targets[1], "v_proj");
}

/* Every name of every enum loads to its value and prints back. */
static void enums(void **state)
{
	static const char *const prec[] = {"fp32", "fp16-mixed", "bf16-mixed",
					   "fp16-true", "bf16-true"};
	static const char *const opt[] = {"adamw", "adam", "sgd",
					  "sgd-momentum", "adamw-8bit",
					  "adafactor"};
	static const char *const ckpt[] = {"none", "full", "selective"};
	static const char *const attn[] = {"flash", "sdpa", "eager"};
	char a[64], b[64], c2[64], d[64];
	const char *sets[4] = {a, b, c2, d};

	(void)state;
	for (int i = 0; i < 6; i++) {
		snprintf(a, sizeof(a), "training.precision=%s", prec[i % 5]);
		snprintf(b, sizeof(b), "training.optimizer=%s", opt[i]);
		snprintf(c2, sizeof(c2), "training.activation_checkpointing=%s",
			 ckpt[i % 3]);
		snprintf(d, sizeof(d), "training.attention=%s", attn[i % 3]);
		assert_int_equal(load("n.yaml", LLAMA, sets, 4), 0);
		assert_int_equal(spec.training.precision, i % 5);
		assert_string_equal(gm_precision_name(spec.training.precision),
				    prec[i % 5]);
		assert_string_equal(gm_optimizer_name(spec.training.optimizer),
				    opt[i]);
		assert_string_equal(
			gm_ckpt_name(spec.training.activation_checkpointing),
			ckpt[i % 3]);
		assert_string_equal(gm_attn_name(spec.training.attention),
				    attn[i % 3]);
	}
	assert_string_equal(gm_arch_name(GM_ARCH_CUSTOM), "custom");
	assert_string_equal(gm_head_name(GM_HEAD_CLASSIFICATION),
			    "classification");
	assert_string_equal(gm_kv_dtype_name(GM_KV_FP8), "fp8");
	assert_string_equal(gm_task_name(GM_TASK_INFERENCE), "inference");
}

/* Two close names for a prefix: both offered. */
static void enum_prefix_hint(void **state)
{
	const char *sets[] = {"training.precision=bf16"};

	(void)state;
	assert_int_equal(load("p.yaml", LLAMA, sets, 1), GM_EINVAL);
	assert_string_equal(diag.msg, "--set training.precision: unknown value "
			    "'bf16'; did you mean 'bf16-mixed' or "
			    "'bf16-true'?");
}

static void numbers(void **state)
{
	(void)state;
	assert_int_equal(load("c.yaml", "model:\n  architecture: custom\n  "
			      "parameters: 13.0e9\n", NULL, 0), 0);
	assert_true(spec.model.parameters == 13e9);
	assert_int_equal(load("c.yaml", "model:\n  architecture: custom\n  "
			      "parameters: 7e9\n  activation_bytes_per_token: "
			      "1.5e6\n", NULL, 0), 0);
	assert_true(spec.model.parameters == 7e9);
	assert_true(spec.model.activation_bytes_per_token == 1.5e6);
	assert_int_equal(load("c.yaml", LLAMA "  parameters: 6738415616\n",
			      NULL, 0), 0);
	assert_true(spec.model.parameters == 6738415616.0);
}

static void inference_kv_default(void **state)
{
	(void)state;
	assert_int_equal(load("i.yaml", "task: inference\n" LLAMA
			      "inference:\n  precision: fp16-true\n  "
			      "generate_length: 0\n", NULL, 0), 0);
	assert_int_equal(spec.task, GM_TASK_INFERENCE);
	assert_int_equal(spec.inference.kv_cache_dtype, GM_KV_FP16);
	assert_int_equal(spec.inference.generate_length, 0);
}

static void missing_file(void **state)
{
	(void)state;
	memset(&diag, 0, sizeof(diag));
	assert_int_equal(gm_spec_load(&spec, "/nonexistent/x.yaml", NULL, 0,
				      &diag), GM_EIO);
	assert_non_null(strstr(diag.msg, "/nonexistent/x.yaml: cannot open"));
}

static void gpu_check(void **state)
{
	static const char *const names[] = {
		"NVIDIA A100-SXM4-80GB", "a100-80gb", "NVIDIA A100-SXM4-40GB",
		"NVIDIA H100 80GB HBM3", "h100", "Tesla V100-SXM2-32GB",
	};
	const char *sets[] = {"hardware.gpu=A100-90GB"};

	(void)state;
	assert_int_equal(load("h.yaml", LLAMA "hardware:\n  gpu: H100\n",
			      NULL, 0), 0);
	assert_int_equal(gm_spec_check_gpu(&spec, names, 6, &diag), 0);
	assert_int_equal(load("h.yaml", LLAMA "hardware:\n  gpu: A100-90GB\n",
			      NULL, 0), 0);
	assert_int_equal(gm_spec_check_gpu(&spec, names, 6, &diag), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "/h.yaml:6:8: hardware.gpu: unknown "
			       "GPU 'A100-90GB'; closest: a100-80gb, "));
	assert_int_equal(load("h.yaml", LLAMA, sets, 1), 0);
	assert_int_equal(gm_spec_check_gpu(&spec, names, 6, &diag), GM_EINVAL);
	assert_string_equal(diag.msg, "--set hardware.gpu: unknown GPU "
			    "'A100-90GB'; closest: a100-80gb, "
			    "NVIDIA A100-SXM4-80GB, NVIDIA A100-SXM4-40GB");
	assert_int_equal(load("h.yaml", LLAMA, NULL, 0), 0);
	assert_int_equal(gm_spec_check_gpu(&spec, names, 6, &diag), 0);
}

/* Against the built-in catalog: aliases and nvidia-smi names pass. */
static void gpu_check_catalog(void **state)
{
	const char *ok[] = {"hardware.gpu=h100"};
	const char *ok2[] = {"hardware.gpu=Tesla V100-SXM2-32GB"};
	const char *bad[] = {"hardware.gpu=V100-SXM2-48GB"};

	(void)state;
	assert_int_equal(load("k.yaml", LLAMA, ok, 1), 0);
	assert_int_equal(gm_spec_check_gpu_catalog(&spec, NULL, &diag), 0);
	assert_int_equal(load("k.yaml", LLAMA, ok2, 1), 0);
	assert_int_equal(gm_spec_check_gpu_catalog(&spec, NULL, &diag), 0);
	assert_int_equal(load("k.yaml", LLAMA, bad, 1), 0);
	assert_int_equal(gm_spec_check_gpu_catalog(&spec, NULL, &diag),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "--set hardware.gpu: unknown GPU "
			       "'V100-SXM2-48GB'; closest: "));
	assert_non_null(strstr(diag.msg, "V100"));
}

/* The source line and a caret under the column of a file message. */
static void excerpt(void **state)
{
	char buf[512], path[128], msg[256];

	(void)state;
	assert_int_equal(load("x.yaml", "model:\n  layers: 32\n  hidden_size: "
			      "4096\n  attention_heads: 30\n", NULL, 0),
			 GM_EINVAL);
	snprintf(path, sizeof(path), "%s/x.yaml", dir);
	assert_int_equal(gm_spec_excerpt(path, diag.msg, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "    attention_heads: 30\n"
				 "                     ^");
	assert_int_equal(gm_spec_excerpt(path, "--set a.b: x", buf,
					 sizeof(buf)), GM_ENOTFOUND);
	assert_string_equal(buf, "");
	assert_int_equal(gm_spec_excerpt(path, "", buf, sizeof(buf)),
			 GM_ENOTFOUND);
	snprintf(msg, sizeof(msg), "%s:99:1: beyond the end", path);
	assert_int_equal(gm_spec_excerpt(path, msg, buf, sizeof(buf)),
			 GM_ENOTFOUND);
}


/* The recipe keys' defaults: today's meaning (a plain PyTorch step,
 * use_cache=False) but FSDP with *-mixed as a MixedPrecisionPolicy;
 * PEFT's LoRA defaults. */
static void recipe_defaults(void **state)
{
	(void)state;
	assert_int_equal(load("x.yaml", LLAMA, NULL, 0), 0);
	assert_int_equal(spec.training.framework, GM_FW_PYTORCH);
	assert_int_equal(spec.training.loop, GM_LOOP_TRAINER);
	assert_int_equal(spec.training.use_cache, GM_CACHE_FALSE);
	assert_int_equal(spec.training.adapter, GM_ADAPTER_NONE);
	assert_int_equal(spec.training.lora_rank, 8);
	assert_int_equal(spec.training.n_lora_targets, 2);
	assert_string_equal(spec.training.lora_targets[0], "q_proj");
	assert_string_equal(spec.training.lora_targets[1], "v_proj");
	assert_int_equal(spec.parallelism.fsdp_mixed_precision,
			 GM_FSDP_MP_PARAM_DTYPE);
	assert_int_equal(spec.parallelism.virtual_pipeline_stages, 1);
	assert_int_equal(spec.parallelism.expert_parallel, 1);
	assert_int_equal(spec.deepspeed.reduce_bucket_size, 500000000);
	assert_int_equal(gm_spec_check_modelled(&spec, &diag), 0);
	/* lists: a YAML sequence, or one comma-separated --set */
	{
		const char *set[] = {"training.lora_targets=all-linear"};
		assert_int_equal(load("x.yaml", LLAMA "training:\n  adapter: "
				      "lora\n  lora_targets: [q_proj, k_proj, "
				      "down_proj]\n", NULL, 0), 0);
		assert_int_equal(spec.training.n_lora_targets, 3);
		assert_string_equal(spec.training.lora_targets[2], "down_proj");
		assert_int_equal(load("x.yaml", LLAMA "training:\n  adapter: "
				      "lora\n", set, 1), 0);
		assert_int_equal(spec.training.n_lora_targets, 1);
		assert_string_equal(spec.training.lora_targets[0],
				    "all-linear");
		/* LoRA and QLoRA are planned (planner/step_adapter.c),
		 * QLoRA in fp32 not */
		assert_int_equal(gm_spec_check_modelled(&spec, &diag), 0);
		assert_int_equal(load("x.yaml", LLAMA "training:\n  adapter: "
				      "qlora\n", NULL, 0), 0);
		assert_int_equal(gm_spec_check_modelled(&spec, &diag), 0);
		assert_int_equal(load("x.yaml", LLAMA "training:\n  adapter: "
				      "qlora\n  precision: fp32\n", NULL, 0),
				 0);
		assert_int_equal(gm_spec_check_modelled(&spec, &diag),
				 GM_EINVAL);
		assert_non_null(strstr(diag.msg, "not modelled yet"));
	}
	/* gpt2's default target is c_attn (PEFT's mapping) */
	assert_int_equal(load("x.yaml", "model:\n  architecture: gpt2\n  "
			      "layers: 12\n  hidden_size: 768\n  "
			      "attention_heads: 12\n", NULL, 0), 0);
	assert_int_equal(spec.training.n_lora_targets, 1);
	assert_string_equal(spec.training.lora_targets[0], "c_attn");
}

/* Every family: each of its linear layers is a LoRA target the spec
 * accepts, another name is refused with the family's list; a family
 * without a shape refuses the adapter. Runs over the whole family table
 * so a new family cannot index past a table of its own. */
static void lora_targets_every_family(void **state)
{
	(void)state;
	for (int a = 0; a < GM_ARCH_N; a++) {
		const struct gm_family *f = gm_family(a);
		char text[1024], list[512] = "";
		int n;

		for (n = 0; n < 8 && f->linears[n]; n++) {
			strcat(list, n ? ", " : "");
			strcat(list, f->linears[n]);
		}
		assert_true(f->shaped ? n > 0 : n == 0);
		snprintf(text, sizeof(text), "model:\n  architecture: %s\n"
			 "  layers: 2\n  hidden_size: 64\n  attention_heads: 4\n"
			 "%straining:\n  adapter: lora\n  lora_targets: [%s]\n",
			 f->name, f->shaped ? "" : "  parameters: 1000000\n",
			 f->shaped ? list : "q_proj");
		if (!f->shaped) {
			assert_int_equal(load("x.yaml", text, NULL, 0), GM_EINVAL);
			continue;
		}
		assert_int_equal(load("x.yaml", text, NULL, 0), 0);
		assert_int_equal(spec.training.n_lora_targets, n);
		snprintf(text, sizeof(text), "model:\n  architecture: %s\n"
			 "  layers: 2\n  hidden_size: 64\n  attention_heads: 4\n"
			 "training:\n  adapter: lora\n  lora_targets: [nonsense]\n",
			 f->name);
		assert_int_equal(load("x.yaml", text, NULL, 0), GM_EINVAL);
		assert_non_null(strstr(diag.msg, "'nonsense' is not a linear"));
		assert_non_null(strstr(diag.msg, list));
	}
}

/*
 * parallelism.expert_tensor_parallel (Megatron-LM's
 * --expert-tensor-parallel-size): not given it follows tensor_parallel,
 * --set included; given it stays; the expert grid and the gpt2 layer's
 * biases are checked with the key's position, or tensor_parallel's
 * where that set it.
 */
#define MIXTRAL_MG                                                         \
	"model:\n  architecture: mixtral\n  layers: 4\n  hidden_size: 1024\n" \
	"  attention_heads: 8\n  experts: 8\n  moe_ffn_hidden_size: 1536\n"   \
	"training:\n  framework: megatron\n  optimizer: adam\n"             \
	"parallelism:\n  data_parallel: 4\n  tensor_parallel: 2\n"           \
	"  sequence_parallel: true\n  expert_parallel: 2\n"

static void expert_tensor_parallel(void **state)
{
	const char *tp4[] = {"parallelism.tensor_parallel=4"};
	const char *etp1[] = {"parallelism.expert_tensor_parallel=1"};
	const char *etp8[] = {"parallelism.expert_tensor_parallel=8"};
	const char *etp3[] = {"parallelism.expert_tensor_parallel=3"};

	(void)state;
	assert_int_equal(load("m.yaml", MIXTRAL_MG, NULL, 0), 0);
	assert_int_equal(spec.parallelism.expert_tensor_parallel, 0);
	assert_int_equal(gm_spec_expert_tensor_parallel(&spec), 2);
	assert_int_equal(load("m.yaml", MIXTRAL_MG, tp4, 1), 0);
	assert_int_equal(gm_spec_expert_tensor_parallel(&spec), 4);
	assert_int_equal(load("m.yaml", MIXTRAL_MG
			      "  expert_tensor_parallel: 1\n", tp4, 1), 0);
	assert_int_equal(gm_spec_expert_tensor_parallel(&spec), 1);
	assert_int_equal(load("m.yaml", MIXTRAL_MG, etp1, 1), 0);
	assert_int_equal(gm_spec_expert_tensor_parallel(&spec), 1);
	/* 8 x 2 experts' ranks in 4 x 2 */
	assert_int_equal(load("m.yaml", MIXTRAL_MG, etp8, 1), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "--set parallelism.expert_tensor_"
			       "parallel: expert_tensor_parallel 8 x "
			       "expert_parallel 2 = 16 does not divide "
			       "data_parallel 4 x tensor_parallel 2 = 8"));
	/* 3 x 2 does not tile 8 either (the grid comes first) */
	assert_int_equal(load("m.yaml", MIXTRAL_MG, etp3, 1), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "= 6 does not divide"));
	/* tensor parallel 4 by default: 4 x 2 divides 4 x 4 */
	assert_int_equal(load("m.yaml", MIXTRAL_MG, tp4, 1), 0);
	/* the gpt2 layer's biases: tensor_parallel blamed where it set it */
	assert_int_equal(load("g.yaml", "model:\n  architecture: gpt2\n"
			      "  layers: 2\n  hidden_size: 256\n"
			      "  attention_heads: 4\n"
			      "  experts: 8\ntraining:\n  framework: "
			      "megatron\n  optimizer: adam\nparallelism:\n"
			      "  data_parallel: 4\n  tensor_parallel: 2\n"
			      "  sequence_parallel: true\n", NULL, 0),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "g.yaml:12:20: parallelism."
			       "tensor_parallel: 2 gives expert tensor "
			       "parallel 2 (not given"));
	/* --disable-bias-linear lets it be (the default keeps the biases) */
	assert_int_equal(load("g.yaml", "model:\n  architecture: gpt2\n"
			      "  layers: 2\n  hidden_size: 256\n"
			      "  attention_heads: 4\n  experts: 8\n"
			      "  add_bias_linear: false\ntraining:\n"
			      "  framework: megatron\n  optimizer: adam\n"
			      "parallelism:\n  data_parallel: 4\n"
			      "  tensor_parallel: 2\n  sequence_parallel: "
			      "true\n", NULL, 0), 0);
	assert_false(spec.model.add_bias_linear);
	assert_int_equal(gm_spec_expert_tensor_parallel(&spec), 2);
	assert_int_equal(load("l.yaml", LLAMA, NULL, 0), 0);
	assert_true(spec.model.add_bias_linear);
	/* not a Megatron MoE spec */
	assert_int_equal(load("l.yaml", LLAMA "parallelism:\n  "
			      "expert_tensor_parallel: 1\n", NULL, 0),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "l.yaml:6:27: parallelism.expert_"
			       "tensor_parallel: is Megatron-Core's"));
}

static void write_file(const char *file, const char *text)
{
	char path[128];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, file);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

/*
 * training.deepspeed_config: the JSON fills what the spec leaves out
 * (with DeepSpeed's defaults for what the JSON leaves out), the spec
 * file must agree with what the JSON writes, --set wins over both.
 */
static void deepspeed_config(void **state)
{
	const char *set[] = {"training.micro_batch_size=2"};
	char where[1200];

	(void)state;
	write_file("ds.json", "{\n  \"train_micro_batch_size_per_gpu\": 4,\n"
		   "  \"gradient_accumulation_steps\": 8,\n"
		   "  \"bf16\": {\"enabled\": true},\n"
		   "  \"optimizer\": {\"type\": \"AdamW\", \"params\": "
		   "{\"lr\": 1e-4}},\n"
		   "  \"zero_optimization\": {\"stage\": 3,\n"
		   "    \"offload_optimizer\": {\"device\": \"cpu\"},\n"
		   "    \"reduce_bucket_size\": 2e8, \"sub_group_size\": 5e8,\n"
		   "    \"stage3_prefetch_bucket_size\": \"auto\"}\n}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n  precision: fp32\nparallelism:\n"
			      "  data_parallel: 4\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:4:23: bf16.enabled: "
				       "bf16-mixed contradicts "
				       "training.precision fp32 at "));
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\nparallelism:\n  data_parallel: 4\n",
			      NULL, 0), 0);
	assert_true(spec.deepspeed.loaded);
	assert_int_equal(spec.training.framework, GM_FW_DEEPSPEED);
	assert_int_equal(spec.training.micro_batch_size, 4);
	assert_int_equal(spec.training.global_batch_size, 4 * 8 * 4);
	assert_int_equal(spec.training.precision, GM_PREC_BF16_MIXED);
	assert_int_equal(spec.training.optimizer, GM_OPT_ADAMW);
	assert_int_equal(spec.parallelism.zero_stage, 3);
	/* a path --set gives is the shell's: relative to the working
	 * directory, as --set model.hf_config's (the spec's own is
	 * relative to the spec's directory) */
	{
		char set2[128], cwd[512];
		const char *sets2[] = {set2};

		assert_non_null(getcwd(cwd, sizeof(cwd)));
		assert_int_equal(chdir("/tmp"), 0);
		snprintf(set2, sizeof(set2), "training.deepspeed_config=%s/"
			 "ds.json", dir + strlen("/tmp/"));
		assert_int_equal(load("x.yaml", LLAMA "parallelism:\n"
				      "  data_parallel: 4\n", sets2, 1), 0);
		assert_int_equal(spec.parallelism.zero_stage, 3);
		assert_int_equal(chdir(cwd), 0);
	}
	assert_int_equal(spec.parallelism.offload_optimizer, GM_OFFLOAD_CPU);
	assert_int_equal(spec.parallelism.offload_parameters, GM_OFFLOAD_NONE);
	assert_int_equal(spec.deepspeed.reduce_bucket_size, 200000000);
	/* "auto" at stage 3: the HF Trainer's int(0.9 * hidden^2),
	 * 0.9 * 4096 * 4096 = 15099494.4 */
	assert_int_equal(spec.deepspeed.prefetch_bucket_size, 15099494);
	/* what the JSON leaves out: DeepSpeed's defaults */
	assert_int_equal(spec.deepspeed.max_live_parameters, 1000000000);
	assert_true(spec.deepspeed.contiguous_gradients);
	assert_true(spec.deepspeed.overlap_comm); /* stage 3's default */
	assert_true(gm_spec_given(&spec, "parallelism.zero_stage"));
	assert_non_null(strstr(gm_spec_where(&spec, "parallelism.zero_stage",
					     where, sizeof(where)),
			       "ds.json:6:34"));
	/* the step is planned (planner/step_ds.c) */
	assert_int_equal(gm_spec_check_modelled(&spec, &diag), 0);
	/* sub_group_size read; stage3_max_reuse_distance left out: 1e9 */
	assert_int_equal(spec.deepspeed.sub_group_size, 500000000);
	assert_int_equal(spec.deepspeed.max_reuse_distance, 1000000000);
	/* --set wins over the JSON (a what-if) */
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", set, 1), 0);
	assert_int_equal(spec.training.micro_batch_size, 2);
	assert_int_equal(spec.training.global_batch_size, 2 * 8);
	/* neither fp16 nor bf16: DeepSpeed trains in fp32 */
	write_file("ds.json", "{\"zero_optimization\": {\"stage\": 1}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), 0);
	assert_int_equal(spec.training.precision, GM_PREC_FP32);
	assert_false(spec.deepspeed.overlap_comm);
	/* what DeepSpeed's hjson reader takes beyond JSON and users
	 * write: comments and trailing commas; marks after them stay */
	write_file("ds.json", "// ZeRO-2\n{ # the stage\n  \"zero_optimization\""
		   ": {/* \xc3\xa9tape */ \"stage\": 2,},\n"
		   "  /* two\n  lines */ \"bf16\": {\"enabled\": true,},\n}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), 0);
	assert_int_equal(spec.parallelism.zero_stage, 2);
	assert_int_equal(spec.training.precision, GM_PREC_BF16_MIXED);
	assert_non_null(strstr(gm_spec_where(&spec, "parallelism.zero_stage",
					     where, sizeof(where)),
			       "ds.json:3:46"));
	assert_non_null(strstr(gm_spec_where(&spec, "training.precision",
					     where, sizeof(where)),
			       "ds.json:5:32"));
	/* what DeepSpeed refuses: a key given twice
	 * (dict_raise_error_on_duplicate_keys), NaN (hjson has none) */
	write_file("ds.json", "{\"zero_optimization\": {\"stage\": 1,\n"
		   "  \"stage\": 2}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:2:3: duplicate member "
				       "\"zero_optimization.stage\" (first at "
				       "line 1)"));
	write_file("ds.json", "{\"gradient_clipping\": NaN}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:23: JSON syntax error: "
				       "'NaN' is not a value"));
	/* the rest of Hjson and of YAML: single quotes, bare words, a
	 * quoteless key, an open comment, a second object, no object */
	write_file("ds.json", "{'zero_optimization': {\"stage\": 1}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:2: JSON syntax error: a "
				       "member name must be a double-quoted "
				       "string"));
	write_file("ds.json", "{\"bf16\": {\"enabled\": yes}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:22: JSON syntax error: "
				       "'yes' is not a value"));
	write_file("ds.json", "{zero_optimization: {\"stage\": 1}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:2: JSON syntax error: a "
				       "member name must be a double-quoted "
				       "string"));
	write_file("ds.json", "{\"bf16\": {}} /* end\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:14: JSON syntax error: a "
				       "comment '/*' without its closing "
				       "'*/'"));
	write_file("ds.json", "{\"bf16\": {}}\n{}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:2:1: JSON syntax error"));
	write_file("ds.json", "[{\"bf16\": {}}]");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:1: a DeepSpeed config is "
				       "a JSON object ({ ... }), not an "
				       "array"));
	write_file("ds.json", "{\"optimizer\": {\"type\": \"Lamb\"}}");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:24: optimizer.type: "
				       "\"Lamb\" is not modelled yet"));
}

/*
 * "auto" is what transformers' Trainer fills in (integrations/
 * deepspeed.py, HfTrainerDeepSpeedConfig): the hidden-size keys from
 * model.hidden_size, the batch and precision keys from the spec's keys
 * standing for the TrainingArguments, an assumption recorded where the
 * spec does not write them.
 */
static void deepspeed_auto(void **state)
{
	char buf[1200];

	(void)state;
	/* the HF docs' ZeRO-2 config with CPU optimizer offload */
	write_file("ds.json", "{\n"
		   "  \"fp16\": {\"enabled\": \"auto\"},\n"
		   "  \"bf16\": {\"enabled\": \"auto\"},\n"
		   "  \"optimizer\": {\"type\": \"AdamW\", \"params\": "
		   "{\"lr\": \"auto\", \"betas\": \"auto\"}},\n"
		   "  \"zero_optimization\": {\"stage\": 2,\n"
		   "    \"offload_optimizer\": {\"device\": \"cpu\"},\n"
		   "    \"reduce_bucket_size\": \"auto\",\n"
		   "    \"stage3_prefetch_bucket_size\": \"auto\",\n"
		   "    \"stage3_param_persistence_threshold\": \"auto\"},\n"
		   "  \"gradient_clipping\": \"auto\",\n"
		   "  \"train_batch_size\": \"auto\",\n"
		   "  \"train_micro_batch_size_per_gpu\": \"auto\",\n"
		   "  \"gradient_accumulation_steps\": \"auto\"\n}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n  micro_batch_size: 2\n"
			      "  global_batch_size: 64\n"
			      "  precision: fp16-mixed\n"
			      "parallelism:\n  data_parallel: 4\n", NULL, 0), 0);
	/* hidden_size^2 = 4096 * 4096, at any stage */
	assert_int_equal(spec.deepspeed.reduce_bucket_size, 16777216);
	/* below stage 3 the stage-3 keys keep DeepSpeed's defaults */
	assert_int_equal(spec.deepspeed.prefetch_bucket_size, 50000000);
	assert_int_equal(spec.deepspeed.param_persistence_threshold, 100000);
	assert_int_equal(spec.training.micro_batch_size, 2);
	assert_int_equal(spec.training.global_batch_size, 64);
	assert_int_equal(spec.training.precision, GM_PREC_FP16_MIXED);
	assert_int_equal(spec.parallelism.zero_stage, 2);
	/* everything the Trainer fills came from the spec: no assumption */
	assert_int_equal(spec.deepspeed.n_assumed, 0);

	/* stage 3 through --set: int(0.9 * 4096^2) = 15099494 and
	 * 10 * 4096 = 40960; the spec writes no batch or precision, so
	 * the Trainer's values are assumed and said */
	const char *z3[] = {"parallelism.zero_stage=3"};
	write_file("ds.json", "{\"bf16\": {\"enabled\": \"auto\"},\n"
		   " \"train_micro_batch_size_per_gpu\": \"auto\",\n"
		   " \"gradient_accumulation_steps\": \"auto\",\n"
		   " \"zero_optimization\": {\"reduce_bucket_size\": \"auto\",\n"
		   "  \"stage3_prefetch_bucket_size\": \"auto\",\n"
		   "  \"stage3_param_persistence_threshold\": \"auto\"}}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", z3, 1), 0);
	assert_int_equal(spec.deepspeed.reduce_bucket_size, 16777216);
	assert_int_equal(spec.deepspeed.prefetch_bucket_size, 15099494);
	assert_int_equal(spec.deepspeed.param_persistence_threshold, 40960);
	/* bf16 "auto" with no training.precision: TrainingArguments' bf16
	 * and fp16 default False, so DeepSpeed runs in fp32; its
	 * per_device_train_batch_size defaults to 8 */
	assert_int_equal(spec.training.precision, GM_PREC_FP32);
	assert_int_equal(spec.training.micro_batch_size, 8);
	assert_int_equal(spec.deepspeed.n_assumed, 3);
	assert_non_null(strstr(gm_spec_ds_assumed(&spec, 0, buf, sizeof(buf)),
			       "/ds.json:1:22: bf16.enabled: \"auto\" is the HF "
			       "Trainer's bf16 / fp16, which the spec does not "
			       "write; assumed False for both "
			       "(TrainingArguments' default): "
			       "training.precision fp32"));
	assert_non_null(strstr(gm_spec_ds_assumed(&spec, 1, buf, sizeof(buf)),
			       "/ds.json:2:36: train_micro_batch_size_per_gpu: "
			       "\"auto\" is the HF Trainer's "
			       "per_device_train_batch_size, which the spec "
			       "does not write; assumed 8 "
			       "(TrainingArguments' default)"));
	assert_non_null(strstr(gm_spec_ds_assumed(&spec, 2, buf, sizeof(buf)),
			       "ds.json:3:33: gradient_accumulation_steps: "
			       "\"auto\" is the HF Trainer's "
			       "gradient_accumulation_steps, which the spec "
			       "does not write; assumed 1"));
	/* a micro-batch "auto" is the Trainer's 8 when the spec writes
	 * none, and DeepSpeed checks the batch keys written against it */
	write_file("ds.json", "{\"train_micro_batch_size_per_gpu\": \"auto\",\n"
		   " \"gradient_accumulation_steps\": 2,\n"
		   " \"train_batch_size\": 64}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\nparallelism:\n  data_parallel: 4\n",
			      NULL, 0), 0);
	assert_int_equal(spec.training.micro_batch_size, 8);
	assert_int_equal(spec.training.global_batch_size, 64);
	write_file("ds.json", "{\"train_micro_batch_size_per_gpu\": \"auto\",\n"
		   " \"gradient_accumulation_steps\": 2,\n"
		   " \"train_batch_size\": 32}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\nparallelism:\n  data_parallel: 4\n",
			      NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:3:22: train_batch_size: 32 "
				       "is not train_micro_batch_size_per_gpu "
				       "8 * gradient_accumulation_steps 2 * "
				       "data_parallel 4"));
	/* a train_batch_size written beside an accumulation "auto": the
	 * Trainer fills the accumulation first (the spec's, else 1) and
	 * refuses a train_batch_size it does not make */
	write_file("ds.json", "{\"train_micro_batch_size_per_gpu\": 2,\n"
		   " \"gradient_accumulation_steps\": \"auto\",\n"
		   " \"train_batch_size\": 64}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\nparallelism:\n  data_parallel: 4\n",
			      NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:3:22: train_batch_size: 64 "
				       "is not train_micro_batch_size_per_gpu "
				       "2 * gradient_accumulation_steps 1 * "
				       "data_parallel 4 (training."
				       "global_batch_size: 64 makes the "
				       "Trainer's gradient_accumulation_steps "
				       "8)"));
	assert_int_equal(spec.deepspeed.n_assumed, 1);
	assert_non_null(strstr(gm_spec_ds_assumed(&spec, 0, buf, sizeof(buf)),
			       "ds.json:2:33: gradient_accumulation_steps: "
			       "\"auto\" is the HF Trainer's "
			       "gradient_accumulation_steps, which the spec "
			       "does not write; assumed 1"));
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n  global_batch_size: 64\n"
			      "parallelism:\n  data_parallel: 4\n",
			      NULL, 0), 0);
	assert_int_equal(spec.training.micro_batch_size, 2);
	assert_int_equal(spec.training.global_batch_size, 64);
	assert_int_equal(spec.deepspeed.n_assumed, 0);
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n  global_batch_size: 32\n"
			      "parallelism:\n  data_parallel: 4\n",
			      NULL, 0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "train_batch_size: 64 is not "
				       "train_micro_batch_size_per_gpu 2 * "
				       "gradient_accumulation_steps 4 * "
				       "data_parallel 4"));
	/* an explicit fp16 true decides over a bf16 "auto" */
	write_file("ds.json", "{\"fp16\": {\"enabled\": true},\n"
		   " \"bf16\": {\"enabled\": \"auto\"}}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), 0);
	assert_int_equal(spec.training.precision, GM_PREC_FP16_MIXED);
	assert_int_equal(spec.deepspeed.n_assumed, 0);
	/* an explicit bf16 true beside an fp16 "auto": a --set precision
	 * is a what-if and wins; the same in the spec file contradicts
	 * the JSON, said at the JSON's value */
	{
		const char *f16[] = {"training.precision=fp16-mixed"};

		write_file("ds.json", "{\"bf16\": {\"enabled\": true},\n"
			   " \"fp16\": {\"enabled\": \"auto\"}}\n");
		assert_int_equal(load("x.yaml", LLAMA "training:\n  "
				      "deepspeed_config: ds.json\n", f16, 1),
				 0);
		assert_int_equal(spec.training.precision, GM_PREC_FP16_MIXED);
		assert_int_equal(load("x.yaml", LLAMA "training:\n  "
				      "deepspeed_config: ds.json\n  precision: "
				      "fp16-mixed\n", NULL, 0), GM_EINVAL);
		assert_non_null(strstr(diag.msg, "ds.json:1:22: bf16.enabled: "
					       "bf16-mixed contradicts "
					       "training.precision fp16-mixed"));
	}
	/* an explicit false against the spec's precision is the mismatch
	 * the Trainer stops on */
	write_file("ds.json", "{\"fp16\": {\"enabled\": false},\n"
		   " \"bf16\": {\"enabled\": \"auto\"}}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n  precision: fp16-mixed\n", NULL, 0),
			 GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:1:22: fp16.enabled: fp32 "
				       "contradicts training.precision "
				       "fp16-mixed"));
	/* the deprecated cpu_offload: true is offload_optimizer cpu, as
	 * DeepSpeedZeroConfig maps it */
	write_file("ds.json", "{\"zero_optimization\": {\"stage\": 2,\n"
		   " \"cpu_offload\": true}}\n");
	assert_int_equal(load("x.yaml", LLAMA "training:\n  deepspeed_config: "
			      "ds.json\n", NULL, 0), 0);
	assert_int_equal(spec.parallelism.offload_optimizer, GM_OFFLOAD_CPU);
	/* a hidden-size "auto" needs a hidden size, as the Trainer does */
	write_file("ds.json", "{\"zero_optimization\": {\"stage\": 2,\n"
		   " \"reduce_bucket_size\": \"auto\"}}\n");
	assert_int_equal(load("x.yaml", "model:\n  architecture: custom\n"
			      "  parameters: 1e9\ntraining:\n  framework: "
			      "deepspeed\n  deepspeed_config: ds.json\n", NULL,
			      0), GM_EINVAL);
	assert_non_null(strstr(diag.msg, "ds.json:2:24: \"auto\" is filled by "
				       "the HF Trainer from the model's "
				       "hidden_size"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(defaults_llama),
		cmocka_unit_test(llama_ffn_rule),
		cmocka_unit_test(defaults_gpt2),
		cmocka_unit_test(defaults_bert),
		cmocka_unit_test(overrides),
		cmocka_unit_test(override_errors),
		cmocka_unit_test(foreign_names),
		cmocka_unit_test(enums),
		cmocka_unit_test(enum_prefix_hint),
		cmocka_unit_test(numbers),
		cmocka_unit_test(inference_kv_default),
		cmocka_unit_test(missing_file),
		cmocka_unit_test(gpu_check),
		cmocka_unit_test(gpu_check_catalog),
		cmocka_unit_test(excerpt),
		cmocka_unit_test(recipe_defaults),
		cmocka_unit_test(lora_targets_every_family),
		cmocka_unit_test(expert_tensor_parallel),
		cmocka_unit_test(deepspeed_config),
		cmocka_unit_test(deepspeed_auto),
	};
	int rc;

	snprintf(dir, sizeof(dir), "/tmp/gm-spec-XXXXXX");
	if (!mkdtemp(dir))
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	{
		char cmd[96];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0 && rc == 0)
			rc = 1;
	}
	return rc;
}
