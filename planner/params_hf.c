/*
 * params_hf.c - the layout's tensor groups under transformers' names
 * (see params_hf.h). Each layout entry is one tensor, as the modules
 * hold it:
 * nn.Linear weight (out, in) and bias (out,); Conv1D (GPT-2) weight
 * (in, out); nn.LayerNorm weight and bias (h,); LlamaRMSNorm weight (h,).
 * The module paths are those of modeling_llama.py (LlamaForCausalLM:
 * model.*, lm_head), modeling_gpt2.py (GPT2LMHeadModel: transformer.*),
 * modeling_bert.py (BertForMaskedLM: bert.embeddings.*,
 * bert.encoder.layer.*, cls.predictions.*), modeling_gpt_neox.py
 * (GPTNeoXForCausalLM: gpt_neox.*, lm_head).
 */
#include "params_hf.h"

#include <stdio.h>
#include <string.h>

#include "error.h"

/*
 * Where a family's groups live under the model's top module, by family
 * name (model.architecture). A family without rows here gets "model."
 * before every group but the head's (lm_head, score): the layout of
 * transformers' *ForCausalLM classes (Llama, Mistral, Qwen, Mixtral,
 * DeepSeek).
 */
struct hf_prefix {
	const char *family;
	const char *group;       /* a group name's start */
	const char *prefix;      /* put before it */
};

static const struct hf_prefix prefixes[] = {
	{"gpt2", "wte", "transformer."},
	{"gpt2", "wpe", "transformer."},
	{"gpt2", "h.", "transformer."},
	{"gpt2", "ln_f", "transformer."},
	{"bert", "embeddings.", "bert."},
	{"bert", "layer.", "bert.encoder."},
	{"gpt-neox", "embed_in", "gpt_neox."},
	{"gpt-neox", "layers.", "gpt_neox."},
	{"gpt-neox", "final_layer_norm", "gpt_neox."},
};

/* The prefix of group name in family fam (see prefixes[]). */
static const char *prefix_of(const char *fam, const char *name)
{
	bool listed = false;

	for (size_t k = 0; k < sizeof(prefixes) / sizeof(prefixes[0]); k++) {
		if (strcmp(prefixes[k].family, fam))
			continue;
		listed = true;
		if (!strncmp(name, prefixes[k].group,
			     strlen(prefixes[k].group)))
			return prefixes[k].prefix;
	}
	if (listed || !strcmp(name, "lm_head") || !strcmp(name, "score"))
		return "";
	return "model.";
}

static bool ends_with(const char *s, const char *suffix)
{
	size_t n = strlen(s), k = strlen(suffix);

	return n >= k && !strcmp(s + n - k, suffix);
}

static int put(struct gm_hf_tensor *out, int *n, const char *prefix,
	       const char *name, const char *suffix, uint64_t a, uint64_t b,
	       uint64_t count)
{
	struct gm_hf_tensor *t;

	if (*n >= GM_HF_TENSORS_MAX)
		return GM_ENOMEM;
	t = &out[(*n)++];
	snprintf(t->name, sizeof(t->name), "%s%s%s", prefix, name, suffix);
	t->shape[0] = a;
	t->shape[1] = b;
	t->dims = b ? 2 : 1;
	t->count = count;
	return 0;
}

int gm_params_hf(const struct gm_spec_model *m,
		 const struct gm_param_layout *l, struct gm_hf_tensor *out,
		 int *n, struct gm_diag *diag)
{
	int rc = 0;

	*n = 0;
	if (!l->from_shape)
		return gm_diag_set(diag, GM_EINVAL, "model.architecture: "
				   "'%s' has no Hugging Face tensors to list",
				   gm_arch_name(m->architecture));
	for (int i = 0; !rc && i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		const char *prefix = prefix_of(gm_arch_name(m->architecture),
					       pt->name);
		uint64_t count = pt->flags & GM_PT_LAYER ?
				 gm_ptensor_blocks(pt, 0, l->layers) : 1;
		uint64_t cols = pt->cols > 1 ? pt->cols : 0;

		if ((pt->flags & GM_PT_TIED) ||
		    ((pt->flags & GM_PT_LAYER) && !count))
			continue;
		if (pt->groups) {
			/* a 3-D nn.Parameter (MoE experts), no suffix */
			rc = put(out, n, prefix, pt->name, "", pt->groups,
				 pt->rows / pt->groups, count);
			if (!rc) {
				out[*n - 1].shape[2] = pt->cols;
				out[*n - 1].dims = 3;
			}
		} else if (ends_with(pt->name, ".weight") ||
		    ends_with(pt->name, ".bias")) {
			rc = put(out, n, prefix, pt->name, "", pt->rows, cols,
				 count);
		} else {
			rc = put(out, n, prefix, pt->name, ".weight", pt->rows,
				 cols, count);
		}
	}
	if (rc)
		return gm_diag_set(diag, rc, "more than %d tensors",
				   GM_HF_TENSORS_MAX);
	return 0;
}
