/*
 * gpt2.c - the GPT-2 family (family.h): GPT2LMHeadModel and
 * GPT2ForSequenceClassification of transformers 5.x
 * (src/transformers/models/gpt2/modeling_gpt2.py: GPT2Model, GPT2Block,
 * GPT2Attention, GPT2MLP; Conv1D weights are in x out with a bias;
 * activations.py NewGELUActivation).
 */
#include "arch/family.h"

#include "activations.h"
#include "block.h"
#include "step_emit.h"
#include "loss.h"
#include "params.h"

/* Conv1D layers carry biases; each LayerNorm a weight and a bias. The
 * tensors in named_parameters() order, one each. */
static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t qkv = h + 2 * d * m->kv_heads, f = m->ffn_hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	unsigned vec = GM_PT_LAYER, bias = vec | GM_PT_BIAS;

	(void)diag;
	gm_params_add(l, "wte", m->vocab_size, h, GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "wpe", m->max_position_embeddings, h, GM_PT_EMBED);
	gm_params_add(l, "h.*.ln_1.weight", h, 1, vec);
	gm_params_add(l, "h.*.ln_1.bias", h, 1, vec);
	gm_params_add(l, "h.*.attn.c_attn.weight", h, qkv, lin);
	gm_params_add(l, "h.*.attn.c_attn.bias", qkv, 1, bias | GM_PT_TP);
	gm_params_add(l, "h.*.attn.c_proj.weight", h, h, lin);
	gm_params_add(l, "h.*.attn.c_proj.bias", h, 1, bias);
	gm_params_add(l, "h.*.ln_2.weight", h, 1, vec);
	gm_params_add(l, "h.*.ln_2.bias", h, 1, vec);
	gm_params_add(l, "h.*.mlp.c_fc.weight", h, f, lin);
	gm_params_add(l, "h.*.mlp.c_fc.bias", f, 1, bias | GM_PT_TP);
	gm_params_add(l, "h.*.mlp.c_proj.weight", f, h, lin);
	gm_params_add(l, "h.*.mlp.c_proj.bias", h, 1, bias);
	gm_params_add(l, "ln_f.weight", h, 1, GM_PT_HEAD);
	gm_params_add(l, "ln_f.bias", h, 1, GM_PT_HEAD);
	gm_params_lm_head(m, l);
	return 0;
}

/*
 * GPT2Block: ln_1 -> c_attn (fused qkv; split views keep the whole
 * output alive) -> attention -> c_proj -> resid dropout -> add; ln_2 ->
 * c_fc -> gelu_new -> c_proj -> dropout -> add.
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute;
	struct gm_act_tensor *t;

	gm_act_norm(l, st, false, 1, "c_attn input");
	t = gm_act_add(l, "c_attn output (q, k, v views)", C, 0);
	t->h = 1;
	t->kv = 2;
	gm_act_attention(l, st, true);
	if (st->dropout)
		gm_act_add(l, "resid dropout mask", 1, GM_AT_SEQ)->h = 1;
	gm_act_norm(l, st, false, 1, "c_fc input");
	/* gelu_new is Python: 0.5*x*(1+tanh(c*(x+0.044715x^3)))
	 * (NewGELUActivation): pow saves x, tanh its output, the last mul
	 * 0.5*x and 1+tanh; c_proj saves the product. Under autocast pow
	 * is on the fp32 list, so it saves an fp32 copy of x, and x +
	 * 0.044715x^3 promotes to fp32: tanh's output and 1+tanh are fp32,
	 * 0.5*x stays 16-bit. */
	if (st->autocast) {
		gm_act_add(l, "gelu_new pow input (fp32)", 4, 0)->f = 1;
		gm_act_add(l, "gelu_new tanh, 1+tanh (fp32)", 4, 0)->f = 2;
		gm_act_add(l, "gelu_new 0.5x", C, 0)->f = 1;
	} else {
		gm_act_add(l, "c_fc output", C, 0)->f = 1;
		gm_act_add(l, "gelu_new tanh, 0.5x, 1+tanh", C, 0)->f = 3;
	}
	gm_act_add(l, "c_proj input", C, 0)->f = 1;
	if (st->dropout)
		gm_act_add(l, "mlp dropout mask", 1, GM_AT_SEQ)->h = 1;
}

/* GPT2Block.forward: fused c_attn split into q, k, v views,
 * gelu_new op by op. */
static void block(struct gm_blk *b)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double h = sh->hidden, Q = sh->q, K = sh->kv, F = sh->ffn, T = sh->tok;
	int n1, qkv, q, k, v, at, cp, d1, r1, n2, fc, h0, xc, p3, m1, a1, m2;
	int th, p1, g, fc2, d2;

	n1 = gm_blk_layer_norm(b, GM_BLK_IN);
	qkv = gm_blk_linear_named(b, "c_attn", n1, h, Q + 2 * K, true);
	q = gm_blk_view(b, qkv, 0);
	k = gm_blk_view(b, qkv, 0);
	v = gm_blk_view(b, qkv, 0);
	gm_blk_set_grad_bytes(b, q, T * Q * gm_blk_eb(b, qkv));
	gm_blk_set_grad_bytes(b, k, T * K * gm_blk_eb(b, qkv));
	gm_blk_set_grad_bytes(b, v, T * K * gm_blk_eb(b, qkv));
	gm_blk_node(b, (int[]){qkv, GM_BLK_END}, (int[]){q, k, v, GM_BLK_END}, NULL);
	gm_blk_drop(b, qkv);
	gm_blk_kv_cache(b, &k, &v);
	at = gm_blk_attention(b, q, k, v);
	gm_blk_drop(b, q);
	gm_blk_drop(b, k);
	gm_blk_drop(b, v);
	cp = gm_blk_linear_named(b, "c_proj", at, Q, h, true);
	gm_blk_drop(b, at);
	d1 = gm_blk_dropout(b, cp);
	r1 = gm_blk_add(b, d1, GM_BLK_IN);
	gm_blk_drop(b, n1);
	gm_blk_drop(b, GM_BLK_IN);
	n2 = gm_blk_layer_norm(b, r1);
	fc = gm_blk_linear_named(b, "c_fc", n2, h, F, true);
	h0 = gm_blk_ew(b, fc, GM_BLK_END, NULL);                       /* 0.5 * x */
	xc = sh->autocast && gm_blk_eb(b, fc) != 4 ? gm_blk_cast(b, fc, 4) : fc;
	p3 = gm_blk_pow(b, xc);                                         /* x ** 3 */
	if (xc != fc)
		gm_blk_drop(b, xc);
	m1 = gm_blk_ew(b, p3, GM_BLK_END, NULL);                       /* 0.044715 * */
	gm_blk_drop(b, p3);
	a1 = gm_blk_add(b, fc, m1);                        /* x + */
	gm_blk_drop(b, m1);
	m2 = gm_blk_ew(b, a1, GM_BLK_END, NULL);                       /* sqrt(2/pi) * */
	gm_blk_drop(b, a1);
	th = gm_blk_ew(b, m2, GM_BLK_END, (int[]){GM_BLK_OUTP, GM_BLK_END});         /* tanh */
	gm_blk_drop(b, m2);
	p1 = gm_blk_ew(b, th, GM_BLK_END, NULL);                       /* 1.0 + */
	gm_blk_alias_last(b);
	gm_blk_drop(b, th);
	g = gm_blk_ew(b, h0, p1, (int[]){h0, p1, GM_BLK_END});
	gm_blk_drop(b, h0);
	gm_blk_drop(b, p1);
	gm_blk_drop(b, fc);
	fc2 = gm_blk_linear_named(b, "c_proj", g, F, h, true);
	gm_blk_drop(b, g);
	d2 = gm_blk_dropout(b, fc2);
	gm_blk_output_next(b);
	gm_blk_add(b, r1, d2);
	gm_blk_drop(b, n2);
	gm_blk_drop(b, d1);
	gm_blk_drop(b, d2);
	gm_blk_drop(b, r1);
}

/* GPT2Model's final norm (ln_f). */
static int final_norm(struct gm_blk *b, int x)
{
	return gm_blk_layer_norm(b, x);
}

/* wte and wpe lookups (both kept until the model returns), their sum is
 * the first block's input. */
static uint32_t infer_embed(struct gm_em *e, const struct gm_em_fwd *f,
			    struct gm_em_live *lv)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c, X = T * in->hidden * c;
	double q = T / (double)in->batch;

	lv->keep[0] = gm_em_alloc(e, X, GM_SK_TRANSIENT);  /* wte */
	lv->keep[1] = gm_em_alloc(e, q * in->hidden * c, GM_SK_TRANSIENT);
	return gm_em_alloc(e, X, GM_SK_TRANSIENT);         /* wte + wpe */
}

/* One GPT2Block in inference: fused c_attn, gelu_new evaluated
 * op by op (0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))). */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	double I = T * in->ffn * c;
	uint32_t n1, qkv, o, p, r, n2, a, t[8], mm, out;

	n1 = gm_em_layer_norm(e, T);
	qkv = gm_em_alloc(e, Q + 2 * K, GM_SK_TRANSIENT);
	gm_em_kv_append(e, l, f);
	o = gm_em_sdpa(e, f);                            /* sdpa */
	p = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* c_proj */
	gm_em_free(e, &o);
	gm_em_free(e, &qkv);
	r = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* residual + */
	gm_em_free(e, &n1);
	n2 = gm_em_layer_norm(e, T);
	a = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* c_fc */
	t[0] = gm_em_alloc(e, I, GM_SK_TRANSIENT);       /* 0.5 * x */
	t[1] = gm_em_alloc(e, I, GM_SK_TRANSIENT);       /* x ** 3 */
	for (int i = 2; i < 8; i++) {               /* *, +, *, tanh, +, * */
		t[i] = gm_em_alloc(e, I, GM_SK_TRANSIENT);
		gm_em_free(e, &t[i - 1]);
	}
	gm_em_free(e, &t[0]);
	gm_em_free(e, &a);
	mm = gm_em_alloc(e, X, GM_SK_TRANSIENT);         /* c_proj */
	gm_em_free(e, &t[7]);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &n2);
	gm_em_free(e, &r);
	gm_em_free(e, &p);
	gm_em_free(e, &mm);
	return out;
}

/* ln_f, then the model returns: the last block's output and the
 * embedding lookups are freed. */
static uint32_t infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			   struct gm_em_live *lv)
{
	uint32_t nf = gm_em_layer_norm(e, (double)f->T);

	gm_em_free(e, &lv->hs);
	for (int k = 0; k < 3; k++)
		gm_em_free(e, &lv->keep[k]);
	for (int k = 0; k < 2; k++)
		gm_em_free(e, &lv->cs[k]);
	if (!gm_em_infer(e)->lm_head)
		gm_em_free(e, &nf);
	return nf;
}

const struct gm_family gm_family_gpt2 = {
	.name = "gpt2",
	.shaped = true,
	.defaults = {.vocab = 50257, .max_positions = 1024, .tied = true,
		     .head = GM_HEAD_CAUSAL_LM, .lora_targets = {"c_attn"}},
	.learned_positions = true,
	.linears = {"c_attn", "c_proj", "c_fc"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 2,
	/* resid_pdrop, attn_pdrop, embd_pdrop 0.1 (GPT2Config) */
	.dropout = true,
	.conv1d = true,
	.attn = {.mask = true, .softmax_fp32 = false, .probs = GM_PROBS_TO_VALUE},
	.block = block,
	.adapter = true,
	.final_norm = final_norm,
	.embed_out = GM_EMBED_OUT_SUM,
	.embed_mask = 1,
	.loss = &gm_loss_causal_lm,
	.infer_embed = infer_embed,
	.infer_layer = infer_layer,
	.infer_head = infer_head,
};
