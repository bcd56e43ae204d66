/*
 * params.c - exact parameter layouts of the Hugging Face models
 * (see params.h). Sources: transformers' modeling_llama.py (LlamaModel,
 * LlamaForCausalLM), modeling_gpt2.py (GPT2Model, GPT2LMHeadModel: Conv1D
 * weights are in x out with a bias), modeling_bert.py (BertEmbeddings,
 * BertLayer, BertPooler, BertLMPredictionHead). Checked by the unit tests
 * against the counts `sum(p.numel() for p in model.parameters())` prints:
 * GPT-2 124,439,808; Llama-2-7B 6,738,415,616; BERT-base MLM 109,514,298.
 */
#include "params.h"

#include "error.h"

#include <math.h>
#include <string.h>

static void add(struct gm_param_layout *l, const char *name, uint64_t rows,
		uint64_t cols, unsigned flags)
{
	if (l->n >= GM_PARAMS_MAX)
		return; /* cannot happen with the layouts below */
	l->t[l->n++] = (struct gm_ptensor){name, rows, cols, flags};
}

/*
 * LlamaForCausalLM / LlamaForSequenceClassification: no biases, except
 * q/k/v biases where model.qkv_bias is set (Qwen2's modeling_qwen2.py:
 * q_proj, k_proj, v_proj with bias=True, o_proj without).
 */
static void llama(const struct gm_spec_model *m, struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t q = d * m->attention_heads, kv = d * m->kv_heads;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	add(l, "embed_tokens", m->vocab_size, h, GM_PT_EMBED | GM_PT_TP);
	add(l, "layers.*.self_attn.q_proj", q, h, lin);
	add(l, "layers.*.self_attn.k_proj", kv, h, lin);
	add(l, "layers.*.self_attn.v_proj", kv, h, lin);
	add(l, "layers.*.self_attn.o_proj", h, q, lin);
	if (m->qkv_bias) {
		unsigned vec = GM_PT_LAYER | GM_PT_TP;
		add(l, "layers.*.self_attn.q_proj.bias", q, 1, vec);
		add(l, "layers.*.self_attn.k_proj.bias", kv, 1, vec);
		add(l, "layers.*.self_attn.v_proj.bias", kv, 1, vec);
	}
	add(l, "layers.*.mlp.gate_proj", m->ffn_hidden_size, h, lin);
	add(l, "layers.*.mlp.up_proj", m->ffn_hidden_size, h, lin);
	add(l, "layers.*.mlp.down_proj", h, m->ffn_hidden_size, lin);
	add(l, "layers.*.input_layernorm", h, 1, GM_PT_LAYER);
	add(l, "layers.*.post_attention_layernorm", h, 1, GM_PT_LAYER);
	add(l, "norm", h, 1, GM_PT_HEAD);
}

/* GPT2LMHeadModel: Conv1D layers carry biases, LayerNorm weight + bias. */
static void gpt2(const struct gm_spec_model *m, struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t qkv = h + 2 * d * m->kv_heads, f = m->ffn_hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	unsigned vec = GM_PT_LAYER;

	add(l, "wte", m->vocab_size, h, GM_PT_EMBED | GM_PT_TP);
	add(l, "wpe", m->max_position_embeddings, h, GM_PT_EMBED);
	add(l, "h.*.ln_1", 2 * h, 1, vec);
	add(l, "h.*.attn.c_attn.weight", h, qkv, lin);
	add(l, "h.*.attn.c_attn.bias", qkv, 1, vec | GM_PT_TP);
	add(l, "h.*.attn.c_proj.weight", h, h, lin);
	add(l, "h.*.attn.c_proj.bias", h, 1, vec);
	add(l, "h.*.ln_2", 2 * h, 1, vec);
	add(l, "h.*.mlp.c_fc.weight", h, f, lin);
	add(l, "h.*.mlp.c_fc.bias", f, 1, vec | GM_PT_TP);
	add(l, "h.*.mlp.c_proj.weight", f, h, lin);
	add(l, "h.*.mlp.c_proj.bias", h, 1, vec);
	add(l, "ln_f", 2 * h, 1, GM_PT_HEAD);
}

/* BertModel layers (biases everywhere, post-LayerNorm). */
static void bert(const struct gm_spec_model *m, struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size, f = m->ffn_hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	uint64_t kv = h / m->attention_heads * m->kv_heads;

	add(l, "embeddings.word_embeddings", m->vocab_size, h,
	    GM_PT_EMBED | GM_PT_TP);
	add(l, "embeddings.position_embeddings", m->max_position_embeddings,
	    h, GM_PT_EMBED);
	add(l, "embeddings.token_type_embeddings", m->type_vocab_size, h,
	    GM_PT_EMBED);
	add(l, "embeddings.LayerNorm", 2 * h, 1, GM_PT_EMBED);
	add(l, "layer.*.attention.self.query", h, h + 1, lin);
	add(l, "layer.*.attention.self.key", kv, h + 1, lin);
	add(l, "layer.*.attention.self.value", kv, h + 1, lin);
	add(l, "layer.*.attention.output.dense", h, h, lin);
	add(l, "layer.*.attention.output.dense.bias", h, 1, GM_PT_LAYER);
	add(l, "layer.*.attention.output.LayerNorm", 2 * h, 1, GM_PT_LAYER);
	add(l, "layer.*.intermediate.dense", f, h + 1, lin);
	add(l, "layer.*.output.dense", h, f, lin);
	add(l, "layer.*.output.dense.bias", h, 1, GM_PT_LAYER);
	add(l, "layer.*.output.LayerNorm", 2 * h, 1, GM_PT_LAYER);
}

/* The head on top of the blocks (after the architecture's final norm). */
static void head(const struct gm_spec_model *m, struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size, v = m->vocab_size;
	unsigned lm = GM_PT_HEAD | GM_PT_MATMUL | GM_PT_TP;

	if (m->head == GM_HEAD_CLASSIFICATION) {
		if (m->architecture == GM_ARCH_BERT) {
			/* BertPooler dense (+bias), classifier (+bias) */
			add(l, "bert.pooler.dense", h, h + 1, GM_PT_HEAD |
			    GM_PT_MATMUL);
			add(l, "classifier", m->num_labels, h + 1,
			    GM_PT_HEAD | GM_PT_MATMUL);
		} else {
			/* Llama/GPT-2 ForSequenceClassification: score,
			 * no bias */
			add(l, "score", m->num_labels, h,
			    GM_PT_HEAD | GM_PT_MATMUL);
		}
		return;
	}
	if (m->architecture == GM_ARCH_BERT) {
		/* BertOnlyMLMHead: transform dense + LayerNorm, decoder
		 * (weight tied to the word embeddings) + its own bias. */
		add(l, "cls.predictions.transform.dense", h, h + 1,
		    GM_PT_HEAD | GM_PT_MATMUL);
		add(l, "cls.predictions.transform.LayerNorm", 2 * h, 1,
		    GM_PT_HEAD);
		add(l, "cls.predictions.bias", v, 1, GM_PT_HEAD | GM_PT_TP);
	}
	add(l, "lm_head", v, h, lm | (m->tied_embeddings ? GM_PT_TIED : 0));
}

uint64_t gm_ptensor_elems(const struct gm_param_layout *l,
			  const struct gm_ptensor *pt)
{
	uint64_t n = pt->rows * pt->cols;

	return pt->flags & GM_PT_LAYER ? n * l->layers : n;
}

int gm_params_layout(const struct gm_spec_model *m,
		     struct gm_param_layout *l, struct gm_diag *diag)
{
	memset(l, 0, sizeof(*l));
	l->layers = m->layers;
	if (m->architecture == GM_ARCH_CUSTOM) {
		if (!(m->parameters >= 1))
			return gm_diag_set(diag, GM_EINVAL,
					   "model.parameters: a custom model "
					   "needs its parameter count");
		l->layers = m->layers ? m->layers : 1;
		add(l, "parameters", (uint64_t)llround(m->parameters) /
		    l->layers, 1, GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP);
	} else {
		if (!m->hidden_size || !m->attention_heads || !m->layers ||
		    !m->kv_heads)
			return gm_diag_set(diag, GM_EINVAL,
					   "model: layers, hidden_size and "
					   "attention_heads are needed");
		l->from_shape = true;
		if (m->architecture == GM_ARCH_LLAMA)
			llama(m, l);
		else if (m->architecture == GM_ARCH_GPT2)
			gpt2(m, l);
		else
			bert(m, l);
		head(m, l);
	}
	for (int i = 0; i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		uint64_t n = gm_ptensor_elems(l, pt);

		if (pt->flags & GM_PT_TIED)
			continue;
		l->total += n;
		if (pt->flags & GM_PT_LAYER)
			l->per_layer += pt->rows * pt->cols;
		else if (pt->flags & GM_PT_EMBED)
			l->embed += n;
		else if (pt->flags & GM_PT_HEAD)
			l->head += n;
	}
	return 0;
}

double gm_params_mismatch(const struct gm_spec_model *m,
			  const struct gm_param_layout *l)
{
	if (!l->from_shape || !(m->parameters > 0) || !l->total)
		return 0;
	return fabs(m->parameters - (double)l->total) / (double)l->total;
}
