/*
 * gpt_neox.c - the GPT-NeoX family (family.h): GPTNeoXForCausalLM of
 * transformers 5.x (src/transformers/models/gpt_neox/modeling_gpt_neox.py:
 * GPTNeoXModel, GPTNeoXLayer, GPTNeoXAttention, GPTNeoXMLP;
 * configuration_gpt_neox.py GPTNeoXConfig), the architecture of
 * GPT-NeoX-20B and the Pythia suite. Names and shapes are checked against
 * transformers 5.24.0's meta-device model (tests/data/hf-tensors.json).
 *
 * GPTNeoXLayer with use_parallel_residual (the config's default): the
 * attention and the MLP both read the layer input,
 * x + attention(input_layernorm(x)) + mlp(post_attention_layernorm(x)).
 * Rotary embedding turns the first rotary_pct of each head (0.25 by
 * default); it changes no parameter.
 *
 * The MLP's activation is the config's default hidden_act "gelu"
 * (torch's gelu, which saves only its input). GPT-NeoX-20B's config.json
 * names "gelu_fast" (activations.py GELUFastActivation, evaluated op by
 * op), whose backward keeps more FFN-wide tensors: not modelled.
 * Training runs GPTNeoXLayer op by op (block), read off transformers
 * 5.17.0's modeling_gpt_neox.py; no H200 run of the family exists, its
 * pieces are the builders checked on the other families' traces
 * (LayerNorm and biased linears: GPT-2's; sdpa and rotary: Llama's).
 */
#include "arch/family.h"
#include "arch/llama.h"

#include "activations.h"
#include "block.h"
#include "loss.h"
#include "params.h"
#include "step_emit.h"

#include <math.h>

/* GPTNeoXConfig's default rotary_pct: the share of a head's channels
 * apply_rotary_pos_emb turns (the rest is passed through and
 * concatenated back). */
#define ROTARY_PCT 0.25

/* nn.Linear(hidden, 3 hidden) query_key_value and every other linear
 * with a bias (attention_bias true by default); nn.LayerNorm weight and
 * bias; embed_in and an untied head. */
static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, f = m->ffn_hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	unsigned vec = GM_PT_LAYER, bias = vec | GM_PT_BIAS;

	(void)diag;
	gm_params_add(l, "embed_in", m->vocab_size, h, GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "layers.*.input_layernorm.weight", h, 1, vec);
	gm_params_add(l, "layers.*.input_layernorm.bias", h, 1, vec);
	gm_params_add(l, "layers.*.post_attention_layernorm.weight", h, 1,
		      vec);
	gm_params_add(l, "layers.*.post_attention_layernorm.bias", h, 1, vec);
	gm_params_add(l, "layers.*.attention.query_key_value.weight", 3 * h, h,
		      lin);
	gm_params_add(l, "layers.*.attention.query_key_value.bias", 3 * h, 1,
		      bias | GM_PT_TP);
	gm_params_add(l, "layers.*.attention.dense.weight", h, h, lin);
	gm_params_add(l, "layers.*.attention.dense.bias", h, 1, bias);
	gm_params_add(l, "layers.*.mlp.dense_h_to_4h.weight", f, h, lin);
	gm_params_add(l, "layers.*.mlp.dense_h_to_4h.bias", f, 1,
		      bias | GM_PT_TP);
	gm_params_add(l, "layers.*.mlp.dense_4h_to_h.weight", h, f, lin);
	gm_params_add(l, "layers.*.mlp.dense_4h_to_h.bias", h, 1, bias);
	gm_params_add(l, "final_layer_norm.weight", h, 1, GM_PT_HEAD);
	gm_params_add(l, "final_layer_norm.bias", h, 1, GM_PT_HEAD);
	gm_params_lm_head(m, l);
	return 0;
}

/*
 * What a GPTNeoXLayer keeps for backward (derivatives.yaml per op):
 * input_layernorm's saved tensors and query_key_value's input; the fused
 * output, kept whole by value (a view of it that attention saves); the
 * rotated query and key (torch.cat of the turned and the passed
 * channels: apply_rotary_pos_emb's products save only cos and sin,
 * which need no gradient); the attention core; post_attention_layernorm
 * on the same layer input and dense_h_to_4h's input; gelu's input;
 * dense_4h_to_h's input. The sums save nothing; hidden_dropout and
 * attention_dropout are 0.
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute;
	struct gm_act_tensor *t;

	gm_act_norm(l, st, false, 1, "query_key_value input");
	t = gm_act_add(l, "query_key_value output (value view)", C, 0);
	t->h = 1;
	t->kv = 2;
	t = gm_act_add(l, "rotated query, key (cat)", C, 0);
	t->h = 1;
	t->kv = 1;
	gm_act_attention(l, st, true);
	gm_act_norm(l, st, false, 1, "dense_h_to_4h input");
	gm_act_add(l, "dense_h_to_4h output (gelu input)", C, 0)->f = 1;
	gm_act_add(l, "dense_4h_to_h input", C, 0)->f = 1;
}

/* One query or key of q bytes in inference: the turned channels
 * (apply_rotary_pos_emb on the first ROTARY_PCT), then torch.cat with
 * the passed channels. Returns the concatenation. */
static uint32_t partial_rotary(struct gm_em *e, double q)
{
	uint32_t r = gm_em_rotary(e, q * ROTARY_PCT);
	uint32_t c = gm_em_alloc(e, q, GM_SK_TRANSIENT);   /* cat */

	gm_em_free(e, &r);
	return c;
}

/* One GPTNeoXLayer in inference (parallel residual): fused
 * query_key_value, partial rotary, sdpa, dense; the MLP on
 * post_attention_layernorm of the same input; then
 * mlp_output + attn_output + hidden_states. */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	double I = T * in->ffn * c;
	uint32_t n1, qkv, qe, ke, o, p, n2, a, g, d, s, out;

	n1 = gm_em_layer_norm(e, T);
	qkv = gm_em_alloc(e, Q + 2 * K, GM_SK_TRANSIENT);
	qe = partial_rotary(e, Q);
	ke = partial_rotary(e, K);
	gm_em_kv_append(e, l, f);
	gm_em_free(e, &ke);
	o = gm_em_sdpa(e, f);                            /* sdpa */
	gm_em_free(e, &qe);
	gm_em_free(e, &qkv);
	p = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* dense */
	gm_em_free(e, &o);
	gm_em_free(e, &n1);
	n2 = gm_em_layer_norm(e, T);
	a = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* dense_h_to_4h */
	g = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* gelu */
	gm_em_free(e, &a);
	d = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* dense_4h_to_h */
	gm_em_free(e, &g);
	gm_em_free(e, &n2);
	s = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* mlp + attn */
	gm_em_free(e, &d);
	gm_em_free(e, &p);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* + hidden_states */
	gm_em_free(e, &s);
	return out;
}

/*
 * apply_rotary_pos_emb of GPT-NeoX for one of q, k (x, tokens x hidden,
 * a view of the fused output): x[..., :rotary_ndims] turned as Llama's
 * (block.c's rotary on that slice), then torch.cat with the passed
 * x[..., rotary_ndims:] into a new tensor (the wider dtype: the turned
 * part is the residual dtype's under autocast). Each slice's backward
 * (SliceBackward) makes a zero tensor of x's size and copies its part in;
 * the cat's backward narrows its incoming gradient (views).
 */
static int rotary_partial(struct gm_blk *b, int x)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, N = T * sh->hidden;
	double nr = floor(sh->head_dim * ROTARY_PCT) * sh->heads * T;
	double eb = gm_blk_eb(b, x);
	int xr, xp, re, o;

	xr = gm_blk_view(b, x, 0);
	gm_blk_node(b, (int[]){x, GM_BLK_END}, (int[]){xr, GM_BLK_END}, NULL);
	xp = gm_blk_view(b, x, 0);
	gm_blk_node(b, (int[]){x, GM_BLK_END}, (int[]){xp, GM_BLK_END}, NULL);
	gm_blk_set_grad_bytes(b, xr, nr * eb);
	gm_blk_set_grad_bytes(b, xp, (N - nr) * eb);
	re = gm_blk_rotary(b, xr);
	gm_blk_drop(b, xr);
	o = gm_blk_op(b, N, gm_blk_eb(b, re) > eb ? gm_blk_eb(b, re) : eb,
		      (int[]){re, xp, GM_BLK_END}, NULL);
	gm_blk_view_grads_last(b);
	gm_blk_drop(b, re);
	gm_blk_drop(b, xp);
	return o;
}

/*
 * GPTNeoXLayer.forward with use_parallel_residual, op by op:
 * input_layernorm; query_key_value (biased) viewed per head and chunked
 * into q, k, v (views; the chunk's backward concatenates their
 * gradients); the partial rotary on q and k; the cache; the attention
 * (q, k, v at hidden width: no grouped heads); dense; the MLP on
 * post_attention_layernorm of the same layer input (dense_h_to_4h,
 * gelu, dense_4h_to_h); mlp_output + attn_output + hidden_states, left
 * to right. hidden_dropout and attention_dropout are 0 (no op).
 */
static void block(struct gm_blk *b)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double T = sh->tok, h = sh->hidden, F = sh->ffn;
	int n1, qkv, q, k, v, qe, ke, at, o, n2, m1, a, m2, s1;

	n1 = gm_blk_layer_norm(b, GM_BLK_IN);
	qkv = gm_blk_linear_named(b, "query_key_value", n1, h, 3 * h, true);
	q = gm_blk_view(b, qkv, 0);
	k = gm_blk_view(b, qkv, 0);
	v = gm_blk_view(b, qkv, 0);
	gm_blk_set_grad_bytes(b, q, T * h * gm_blk_eb(b, qkv));
	gm_blk_set_grad_bytes(b, k, T * h * gm_blk_eb(b, qkv));
	gm_blk_set_grad_bytes(b, v, T * h * gm_blk_eb(b, qkv));
	gm_blk_node(b, (int[]){qkv, GM_BLK_END},
		    (int[]){q, k, v, GM_BLK_END}, NULL);
	gm_blk_drop(b, qkv);
	qe = rotary_partial(b, q);
	ke = rotary_partial(b, k);
	gm_blk_drop(b, q);
	gm_blk_drop(b, k);
	gm_blk_kv_cache(b, &ke, &v);
	at = gm_blk_attention(b, qe, ke, v);
	gm_blk_drop(b, qe);
	gm_blk_drop(b, ke);
	gm_blk_drop(b, v);
	o = gm_blk_linear_named(b, "dense", at, h, h, true);
	gm_blk_drop(b, at);
	gm_blk_drop(b, n1);
	n2 = gm_blk_layer_norm(b, GM_BLK_IN);
	m1 = gm_blk_linear_named(b, "dense_h_to_4h", n2, h, F, true);
	a = gm_blk_ew(b, m1, GM_BLK_END, (int[]){m1, GM_BLK_END});
	gm_blk_drop(b, m1);
	m2 = gm_blk_linear_named(b, "dense_4h_to_h", a, F, h, true);
	gm_blk_drop(b, a);
	gm_blk_drop(b, n2);
	s1 = gm_blk_add(b, m2, o);
	gm_blk_drop(b, m2);
	gm_blk_drop(b, o);
	gm_blk_output_next(b);
	gm_blk_add(b, s1, GM_BLK_IN);
	gm_blk_drop(b, s1);
	/* GPTNeoXModel's loop holds the layer's input until the layer
	 * returns */
	gm_blk_drop(b, GM_BLK_IN);
}

/* GPTNeoXModel's final_layer_norm (nn.LayerNorm). */
static int final_norm(struct gm_blk *b, int x)
{
	return gm_family_gpt2.final_norm(b, x);
}

/* final_layer_norm, then the model returns (as GPT-2's ln_f). */
static uint32_t infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			   struct gm_em_live *lv)
{
	return gm_family_gpt2.infer_head(e, f, lv);
}

const struct gm_family gm_family_gpt_neox = {
	.name = "gpt-neox",
	.shaped = true,
	/* GPTNeoXConfig: vocab_size 50432, max_position_embeddings 2048,
	 * intermediate_size 24576 = 4 x hidden_size 6144 (the 4 x hidden
	 * default), tie_word_embeddings false */
	.defaults = {.vocab = 50432, .max_positions = 2048, .tied = false,
		     .head = GM_HEAD_CAUSAL_LM,
		     /* PEFT's mapping for gpt_neox */
		     .lora_targets = {"query_key_value", NULL}},
	.linears = {"query_key_value", "dense", "dense_h_to_4h", "dense_4h_to_h"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 2,
	/* hidden_dropout 0, attention_dropout 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs = GM_PROBS_TO_QUERY},
	.block = block,
	.final_norm = final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed, /* embed_in, kept named
					      * as Llama's inputs_embeds */
	.infer_pre = gm_llama_infer_pre, /* GPTNeoXRotaryEmbedding's
					  * cos and sin, once per forward */
	.infer_layer = infer_layer,
	.infer_head = infer_head,
};
