/*
 * llama.c - the Llama family (family.h): LlamaForCausalLM and
 * LlamaForSequenceClassification of transformers 5.x
 * (src/transformers/models/llama/modeling_llama.py: LlamaModel,
 * LlamaDecoderLayer, LlamaAttention, LlamaMLP, LlamaRMSNorm), with
 * Qwen2's q/k/v biases where model.qkv_bias is set
 * (models/qwen2/modeling_qwen2.py: q_proj, k_proj, v_proj with
 * bias=True, o_proj without).
 */
#include "arch/family.h"
#include "arch/llama.h"

#include "activations.h"
#include "block.h"
#include "step_emit.h"
#include "loss.h"
#include "params.h"

/*
 * The FFN width when not given: Meta's llama model.py rounds 2/3 of
 * 4 * hidden up to a multiple of 256 (multiple_of = 256), which gives
 * 11008 for hidden 4096 (Llama-2-7B) and 13824 for 5120 (Llama-2-13B).
 */
static uint64_t ffn(uint64_t hidden)
{
	uint64_t f = 2 * (4 * hidden) / 3;

	return (f + 255) / 256 * 256;
}

/* No biases, except q/k/v biases where model.qkv_bias is set. */
void gm_llama_norm_params(const struct gm_spec_model *m,
			  struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size;

	gm_params_add(l, "layers.*.input_layernorm", h, 1, GM_PT_LAYER);
	gm_params_add(l, "layers.*.post_attention_layernorm", h, 1,
		      GM_PT_LAYER);
	gm_params_add(l, "norm", h, 1, GM_PT_HEAD);
	gm_params_lm_head(m, l);
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t q = d * m->attention_heads, kv = d * m->kv_heads;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	(void)diag;
	gm_params_add(l, "embed_tokens", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "layers.*.self_attn.q_proj", q, h, lin);
	gm_params_add(l, "layers.*.self_attn.k_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.v_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.o_proj", h, q, lin);
	if (m->qkv_bias) {
		unsigned vec = GM_PT_LAYER | GM_PT_TP | GM_PT_BIAS;
		gm_params_add(l, "layers.*.self_attn.q_proj.bias", q, 1, vec);
		gm_params_add(l, "layers.*.self_attn.k_proj.bias", kv, 1, vec);
		gm_params_add(l, "layers.*.self_attn.v_proj.bias", kv, 1, vec);
	}
	gm_params_add(l, "layers.*.mlp.gate_proj", m->ffn_hidden_size, h, lin);
	gm_params_add(l, "layers.*.mlp.up_proj", m->ffn_hidden_size, h, lin);
	gm_params_add(l, "layers.*.mlp.down_proj", h, m->ffn_hidden_size, lin);
	gm_llama_norm_params(m, l);
	return 0;
}

/*
 * LlamaDecoderLayer: input_layernorm -> q/k/v (RoPE saves only cos/sin)
 * -> attention -> o_proj -> add; post_attention_layernorm -> gate/up ->
 * SiLU(gate)*up -> down -> add. No dropout (attention_dropout 0).
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute;

	gm_act_norm(l, st, true, 3, "q/k/v input");
	gm_act_attention(l, st, false);
	gm_act_norm(l, st, true, 2, "gate/up input");
	gm_act_add(l, "gate output (SiLU input)", C, 0)->f = 1;
	gm_act_add(l, "SiLU output, up output", C, 0)->f = 2;
	gm_act_add(l, "down_proj input", C, 0)->f = 1;
}

/* LlamaDecoderLayer.forward's attention half, op by op (arch/llama.h):
 * input_layernorm, q/k/v, rotary, the cache, the attention, o_proj, the
 * residual add and post_attention_layernorm. */
int gm_llama_block_attention(struct gm_blk *b, int *n2)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double h = sh->hidden, Q = sh->q, K = sh->kv;
	int n1, q, k, v, qt, kt, qe, ke, at, o, r1;

	n1 = gm_blk_rms_norm(b, GM_BLK_IN);
	q = gm_blk_linear_named(b, "q_proj", n1, h, Q, sh->qkv_bias);
	qt = gm_blk_head_view(b, q);
	k = gm_blk_linear_named(b, "k_proj", n1, h, K, sh->qkv_bias);
	kt = gm_blk_head_view(b, k);
	v = gm_blk_linear_named(b, "v_proj", n1, h, K, sh->qkv_bias);
	qe = gm_blk_rotary(b, qt);
	ke = gm_blk_rotary(b, kt);
	gm_blk_drop(b, qt);
	gm_blk_drop(b, kt);
	gm_blk_drop(b, q);
	gm_blk_drop(b, k);
	gm_blk_kv_cache(b, &ke, &v);
	at = gm_blk_attention(b, qe, ke, v);
	o = gm_blk_linear_named(b, "o_proj", at, Q, h, false);
	gm_blk_drop(b, at);
	gm_blk_drop(b, qe);
	gm_blk_drop(b, ke);
	gm_blk_drop(b, v);
	gm_blk_drop(b, n1);
	r1 = gm_blk_add(b, GM_BLK_IN, o);
	gm_blk_drop(b, o);
	*n2 = gm_blk_rms_norm(b, r1);
	return r1;
}

/* LlamaMLP on n2 of width ffn and the second residual add (arch/llama.h). */
void gm_llama_block_mlp(struct gm_blk *b, int r1, int n2, double ffn)
{
	double h = gm_blk_shape(b)->hidden, F = ffn;
	int g, s, u, m, d;

	g = gm_blk_linear_named(b, "gate_proj", n2, h, F, false);
	s = gm_blk_ew(b, g, GM_BLK_END, (int[]){g, GM_BLK_END});
	u = gm_blk_linear_named(b, "up_proj", n2, h, F, false);
	m = gm_blk_ew(b, s, u, (int[]){s, u, GM_BLK_END});
	gm_blk_drop(b, g);
	gm_blk_drop(b, s);
	gm_blk_drop(b, u);
	d = gm_blk_linear_named(b, "down_proj", m, F, h, false);
	gm_blk_drop(b, m);
	gm_blk_drop(b, n2);
	gm_blk_output_next(b);
	gm_blk_add(b, r1, d);
	gm_blk_drop(b, d);
	gm_blk_drop(b, r1);
	/* LlamaModel's loop holds the layer's input until the layer
	 * returns (hidden_states = decoder_layer(hidden_states, ...)): it
	 * is freed last, after the residual stream (where RMSNorm's fp32
	 * copy did not save it; the H200 trace of
	 * llama-134m-bf16true-sgd-seq8192) */
	gm_blk_drop(b, GM_BLK_IN);
}

/* LlamaDecoderLayer.forward, op by op (arch/llama.h). */
void gm_llama_block(struct gm_blk *b)
{
	int n2, r1 = gm_llama_block_attention(b, &n2);

	gm_llama_block_mlp(b, r1, n2, gm_blk_shape(b)->ffn);
}

/* LlamaModel's final norm (self.norm, an RMSNorm). */
int gm_llama_final_norm(struct gm_blk *b, int x)
{
	return gm_blk_rms_norm(b, x);
}

/* embed_tokens: the first block's input, which the model's forward keeps
 * named (inputs_embeds) until it returns. */
uint32_t gm_llama_infer_embed(struct gm_em *e, const struct gm_em_fwd *f,
			      struct gm_em_live *lv)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double X = (double)f->T * in->hidden * in->c;
	uint32_t hs = gm_em_alloc(e, X, GM_SK_TRANSIENT);

	lv->keep[2] = hs;
	return hs;
}

/* LlamaRotaryEmbedding's cos and sin, on every stage. */
void gm_llama_infer_pre(struct gm_em *e, double q, struct gm_em_live *lv)
{
	gm_em_rope_tables(e, q, lv->cs);
}

/* LlamaDecoderLayer's attention half in inference: input_layernorm,
 * q/k/v, rotary, the cache, sdpa, o_proj and the residual add; returns
 * the residual and sets *n2 to post_attention_layernorm's output (arch/
 * llama.h). */
uint32_t gm_llama_infer_attention(struct gm_em *e, uint64_t l,
				  const struct gm_em_fwd *f, uint32_t *n2)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	uint32_t n1, q, k, v, qe, ke, o, p, r;

	n1 = gm_em_rms_norm(e, T);
	q = gm_em_alloc(e, Q, GM_SK_TRANSIENT);
	k = gm_em_alloc(e, K, GM_SK_TRANSIENT);
	v = gm_em_alloc(e, K, GM_SK_TRANSIENT);
	qe = gm_em_rotary(e, Q);
	ke = gm_em_rotary(e, K);
	gm_em_free(e, &q);
	gm_em_free(e, &k);
	gm_em_kv_append(e, l, f);
	gm_em_free(e, &ke);
	gm_em_free(e, &v);
	o = gm_em_sdpa(e, f);                            /* sdpa */
	p = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* o_proj */
	gm_em_free(e, &o);
	gm_em_free(e, &qe);
	gm_em_free(e, &n1);
	r = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* residual + */
	gm_em_free(e, &p);
	*n2 = gm_em_rms_norm(e, T);
	return r;
}

/* LlamaMLP and the second residual add in inference (arch/llama.h). */
uint32_t gm_llama_infer_mlp(struct gm_em *e, const struct gm_em_fwd *f,
			    uint32_t *n2, uint32_t *r)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, I = T * in->ffn * c;
	uint32_t gt, s, up, m, d, out;

	gt = gm_em_alloc(e, I, GM_SK_TRANSIENT);         /* gate_proj */
	s = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* silu */
	gm_em_free(e, &gt);
	up = gm_em_alloc(e, I, GM_SK_TRANSIENT);         /* up_proj */
	m = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* * */
	gm_em_free(e, &s);
	gm_em_free(e, &up);
	d = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* down_proj */
	gm_em_free(e, &m);
	gm_em_free(e, n2);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &d);
	gm_em_free(e, r);
	return out;
}

/* One LlamaDecoderLayer in inference: returns its output; the
 * caller frees the input. */
uint32_t gm_llama_infer_layer(struct gm_em *e, uint64_t l,
			      const struct gm_em_fwd *f)
{
	uint32_t n2, r = gm_llama_infer_attention(e, l, f, &n2);

	return gm_llama_infer_mlp(e, f, &n2, &r);
}

/* The final norm, then the model returns: the last block's output, the
 * named embedding output and the rotary tables are freed. */
uint32_t gm_llama_infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			     struct gm_em_live *lv)
{
	uint32_t nf = gm_em_rms_norm(e, (double)f->T);

	gm_em_free(e, &lv->hs);
	for (int k = 0; k < 3; k++)
		gm_em_free(e, &lv->keep[k]);
	for (int k = 0; k < 2; k++)
		gm_em_free(e, &lv->cs[k]);
	if (!gm_em_infer(e)->lm_head)
		gm_em_free(e, &nf);
	return nf;
}

const struct gm_family gm_family_llama = {
	.name = "llama",
	.shaped = true,
	.defaults = {.ffn = ffn, .vocab = 32000, .head = GM_HEAD_CAUSAL_LM,
		     .lora_targets = {"q_proj", "v_proj"}},
	.keys = GM_FK_QKV_BIAS | GM_FK_SLIDING_WINDOW,
	.linears = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
		    "down_proj"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 3,
	/* attention_dropout 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs = GM_PROBS_TO_QUERY},
	.block = gm_llama_block,
	.adapter = true,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_layer = gm_llama_infer_layer,
	.infer_head = gm_llama_infer_head,
};
