/*
 * plan_args.c - the options `gpumem plan` and `gpumem fit` share (see
 * cmd.h): --set, --format, --svg, --catalog, --reserve-model, --fraction,
 * --limit, and their missing-value / unknown-option messages.
 */
#include "arch/family.h"
#include "cmd.h"

#include "error.h"
#include "html.h"
#include "options.h"
#include "report.h"
#include "units.h"

#include <stdio.h>

#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A fraction in (0, 1], read as the preload library reads GPUMEM_FRACTION
 * (an exact decimal, options.h), so that the planned cap is its cap to
 * the byte. */
static bool fraction_parse(const char *s, struct gm_plan_args *a)
{
	uint64_t num, den;

	if (gm_pl_fraction_parse(s, &num, &den) != 0)
		return false;
	a->frac_num = num;
	a->frac_den = den;
	a->fraction = (double)num / (double)den;
	return true;
}

int gm_plan_write_svg(const char *path, const struct gm_plan *plans,
		      const struct gm_fit *fits, size_t n, struct gm_diag *diag)
{
	struct gm_file f;
	int rc = gm_file_begin(&f, path, diag);

	if (rc)
		return rc;
	rc = gm_plan_svg(f.fp, plans, fits, n);
	return gm_file_end(&f, rc == 0, diag) ? GM_EIO : rc;
}

int gm_plan_write_html(const char *path, const struct gm_spec *spec,
		       const struct gm_model_opts *opts,
		       const struct gm_plan *plans, const struct gm_fit *fits,
		       const struct gm_fit_change *changes, size_t n,
		       struct gm_diag *diag)
{
	struct gm_file f;
	int rc = gm_file_begin(&f, path, diag);

	if (rc)
		return rc;
	rc = gm_plan_html(f.fp, spec, opts, plans, fits, changes, n);
	return gm_file_end(&f, rc == 0, diag) ? GM_EIO : rc;
}

void gm_plan_args_init(struct gm_plan_args *a)
{
	memset(a, 0, sizeof(*a));
	a->format = GM_FORMAT_TABLE;
	gm_model_opts_default(&a->model);
}

/* Whether a --set names key ("hardware.gpu=..."). */
bool gm_plan_args_sets(const struct gm_plan_args *a, const char *key)
{
	size_t n = strlen(key);

	for (int i = 0; i < a->n_sets; i++)
		if (!strncmp(a->sets[i], key, n) && a->sets[i][n] == '=')
			return true;
	return false;
}

int gm_plan_args_option(struct gm_plan_args *a, const char *name, int c,
			char **argv)
{
	struct gm_diag diag = {{0}};

	switch (c) {
	case 's':
		if (a->n_sets == GM_PLAN_MAX_SETS)
			return gm_cmd_usage_error(name, "--set: at most %d",
						  GM_PLAN_MAX_SETS);
		a->sets[a->n_sets++] = optarg;
		return 0;
	case 'f':
		if (gm_format_parse(optarg, &a->format, &diag))
			return gm_cmd_usage_error(name, "%s", diag.msg);
		return 0;
	case 'v':
		a->svg = optarg;
		return 0;
	case 'H':
		a->html = optarg;
		return 0;
	case 'c':
		a->catalog = optarg;
		return 0;
	case 'r':
		if (gm_reserve_model_parse(optarg, &a->model.reserve))
			return gm_cmd_usage_error(name, "--reserve-model: "
						  "'%s' is not simulated or "
						  "analytic", optarg);
		return 0;
	case 'F':
		if (!fraction_parse(optarg, a))
			return gm_cmd_usage_error(name, "--fraction: '%s' is "
						  "not a number in (0, 1]",
						  optarg);
		return 0;
	case 'L':
		if (gm_size_parse(optarg, &a->limit))
			return gm_cmd_size_error(name, "--limit", optarg);
		if (a->limit == 0)
			return gm_cmd_usage_error(name, "--limit: '%s' is not "
						  "a size above 0 (e.g. 40GiB, "
						  "80GB)", optarg);
		if (gm_size_bare_small(optarg))
			gm_cmd_bare_size_warn(name, "--limit", optarg, "");
		return 0;
	case ':':
		return gm_cmd_usage_error(name, "%s needs a value",
					  argv[optind - 1]);
	}
	return -1;
}

/*
 * The parallelism keys an inference plan does not use: inference replicas
 * neither communicate nor share memory (gm_spec_data_parallel, spec.h),
 * so data parallelism and what shards across it (ZeRO, FSDP's options)
 * change no GPU's memory; sequence parallelism is Megatron-LM's split of
 * a training step's activations. tensor_parallel, pipeline_parallel,
 * tensor_parallel_vocab and expert_parallel are planned for inference.
 */
static const char *const train_only_parallel[] = {
	"parallelism.data_parallel", "parallelism.zero_stage",
	"parallelism.sequence_parallel", "parallelism.built_whole",
	"parallelism.fsdp_mixed_precision",
};

/* "spec.yaml:3:5: KEY" or "--set KEY" (which names the key already):
 * where key was given, in buf. */
static const char *where_key(const struct gm_spec *spec, const char *key,
			     char *buf, size_t len)
{
	char where[1100];
	size_t n, k = strlen(key);

	gm_spec_where(spec, key, where, sizeof(where));
	n = strlen(where);
	if (n >= k && !strcmp(where + n - k, key))
		snprintf(buf, len, "%s", where);
	else
		snprintf(buf, len, "%s: %s", where, key);
	return buf;
}

/*
 * A length past model.max_position_embeddings where the family has no
 * position table (rotary: nothing refuses it, so the spec's validation
 * does not): the model was not trained that far, a config's rope
 * scaling may be what the user meant. The plan is of the length asked.
 */
static void length_warn(const char *name, const struct gm_spec *spec)
{
	bool infer = spec->task == GM_TASK_INFERENCE;
	uint64_t max = spec->model.max_position_embeddings, n;
	const char *key;
	char where[1200], from[1200];

	if (!max || gm_family(spec->model.architecture)->learned_positions ||
	    !gm_spec_given(spec, "model.max_position_embeddings"))
		return;
	n = infer ? spec->inference.prompt_length +
		    spec->inference.generate_length :
		    spec->training.sequence_length;
	if (n <= max)
		return;
	key = !infer ? "training.sequence_length" :
	      gm_spec_given(spec, "inference.generate_length") ?
	      "inference.generate_length" : "inference.prompt_length";
	gm_spec_where(spec, "model.max_position_embeddings", from,
		      sizeof(from));
	fprintf(stderr, "gpumem %s: warning: %s: %s%llu tokens is more than "
		"model.max_position_embeddings %llu (%s), the positions the "
		"model was trained for; planned as asked\n", name,
		where_key(spec, key, where, sizeof(where)),
		infer ? "prompt_length + generate_length = " : "",
		(unsigned long long)n, (unsigned long long)max, from);
}

int gm_plan_args_check(const struct gm_plan_args *a,
		       const struct gm_spec *spec, struct gm_diag *diag)
{
	const char *what = NULL;

	if (a->model.reserve != GM_RESERVE_ANALYTIC ||
	    spec->task != GM_TASK_TRAIN)
		return 0;
	if (spec->training.framework == GM_FW_DEEPSPEED)
		what = "training.framework deepspeed";
	else if (spec->training.adapter != GM_ADAPTER_NONE)
		what = "training.adapter";
	if (!what)
		return 0;
	return gm_diag_set(diag, GM_EINVAL, "--reserve-model analytic: not "
			   "modelled for %s (its closed forms would plan the "
			   "states unsharded and the blocks as a plain "
			   "model's); the default, simulated, replays it",
			   what);
}

void gm_plan_ds_notes(const char *name, const struct gm_spec *spec)
{
	char where[1200];

	for (unsigned i = 0; i < spec->deepspeed.n_assumed; i++)
		fprintf(stderr, "gpumem %s: note: %s\n", name,
			gm_spec_ds_assumed(spec, i, where, sizeof(where)));
}

void gm_plan_spec_warn(const char *name, const struct gm_spec *spec)
{
	char where[1200];
	bool infer = spec->task == GM_TASK_INFERENCE;

	gm_plan_ds_notes(name, spec);
	/* a section the task does not read, either way round */
	if (gm_spec_given(spec, infer ? "training" : "inference"))
		fprintf(stderr, "gpumem %s: warning: %s: ignored for task "
			"%s\n", name,
			where_key(spec, infer ? "training" : "inference",
				  where, sizeof(where)),
			infer ? "inference" : "train");
	for (size_t i = 0; infer && i < sizeof(train_only_parallel) /
				    sizeof(train_only_parallel[0]); i++) {
		const char *key = train_only_parallel[i];

		if (!gm_spec_given(spec, key))
			continue;
		fprintf(stderr, "gpumem %s: warning: %s is a training "
			"setting; inference ignores it (each replica holds "
			"the model whole at tensor x pipeline parallel: the "
			"plan is one replica's)\n", name,
			where_key(spec, key, where, sizeof(where)));
	}
	length_warn(name, spec);
	/*
	 * FlashAttention runs fp16 and bf16 only: PyTorch's sdpa flash
	 * backend takes half and bfloat16 (torch 2.11 aten/src/ATen/native/
	 * transformers/cuda/sdp_utils.cpp, use_flash_attention's
	 * check_tensor_dtype) and picks the memory-efficient kernel for
	 * fp32; transformers' flash_attention_2 warns on an fp32 model
	 * (transformers 5.17.0 modeling_utils.py, its flash-attention dtype
	 * check) and the flash-attn kernel then refuses fp32 tensors. fp32
	 * has no autocast to put attention in half precision.
	 */
	if (!infer && spec->training.precision == GM_PREC_FP32 &&
	    spec->training.attention == GM_ATTN_FLASH)
		fprintf(stderr, "gpumem %s: warning: %s flash with "
			"training.precision fp32: FlashAttention runs only in "
			"fp16 or bf16 (flash_attention_2 refuses fp32; sdpa "
			"runs fp32 through its memory-efficient kernel); the "
			"plan keeps fused attention's memory (no s^2 scores), "
			"as that kernel's: set training.attention sdpa, or a "
			"bf16/fp16 precision for flash\n", name,
			where_key(spec, "training.attention", where,
				  sizeof(where)));
}
