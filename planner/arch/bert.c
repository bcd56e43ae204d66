/*
 * bert.c - the BERT family (family.h): BertForMaskedLM and
 * BertForSequenceClassification of transformers 5.x
 * (src/transformers/models/bert/modeling_bert.py: BertEmbeddings,
 * BertLayer (post-LayerNorm, exact GELU), BertPooler,
 * BertOnlyMLMHead / BertLMPredictionHead).
 */
#include "arch/family.h"

#include "activations.h"
#include "block.h"
#include "step_emit.h"
#include "loss.h"
#include "params.h"

/* BertModel (biases everywhere, post-LayerNorm), then the head: the
 * tensors in named_parameters() order, each weight and bias one tensor. */
static void linear(struct gm_param_layout *l, const char *w, const char *bias,
		   uint64_t out, uint64_t in, unsigned flags, unsigned bflags)
{
	gm_params_add(l, w, out, in, flags);
	gm_params_add(l, bias, out, 1, bflags | GM_PT_BIAS);
}

static void layernorm(struct gm_param_layout *l, const char *w,
		      const char *bias, uint64_t h, unsigned flags)
{
	gm_params_add(l, w, h, 1, flags);
	gm_params_add(l, bias, h, 1, flags);
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, f = m->ffn_hidden_size, v = m->vocab_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;
	unsigned col = GM_PT_LAYER | GM_PT_TP, row = GM_PT_LAYER;
	unsigned head = GM_PT_HEAD | GM_PT_MATMUL;
	uint64_t kv = h / m->attention_heads * m->kv_heads;

	(void)diag;
	gm_params_add(l, "embeddings.word_embeddings.weight", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "embeddings.position_embeddings.weight",
		      m->max_position_embeddings, h, GM_PT_EMBED);
	gm_params_add(l, "embeddings.token_type_embeddings.weight",
		      m->type_vocab_size, h, GM_PT_EMBED);
	layernorm(l, "embeddings.LayerNorm.weight", "embeddings.LayerNorm.bias",
		  h, GM_PT_EMBED);
	linear(l, "layer.*.attention.self.query.weight",
	       "layer.*.attention.self.query.bias", h, h, lin, col);
	linear(l, "layer.*.attention.self.key.weight",
	       "layer.*.attention.self.key.bias", kv, h, lin, col);
	linear(l, "layer.*.attention.self.value.weight",
	       "layer.*.attention.self.value.bias", kv, h, lin, col);
	linear(l, "layer.*.attention.output.dense.weight",
	       "layer.*.attention.output.dense.bias", h, h, lin, row);
	layernorm(l, "layer.*.attention.output.LayerNorm.weight",
		  "layer.*.attention.output.LayerNorm.bias", h, row);
	linear(l, "layer.*.intermediate.dense.weight",
	       "layer.*.intermediate.dense.bias", f, h, lin, col);
	linear(l, "layer.*.output.dense.weight", "layer.*.output.dense.bias",
	       h, f, lin, row);
	layernorm(l, "layer.*.output.LayerNorm.weight",
		  "layer.*.output.LayerNorm.bias", h, row);
	if (m->head == GM_HEAD_CLASSIFICATION) {
		linear(l, "bert.pooler.dense.weight", "bert.pooler.dense.bias",
		       h, h, head, GM_PT_HEAD);
		linear(l, "classifier.weight", "classifier.bias",
		       m->num_labels, h, head, GM_PT_HEAD);
		return 0;
	}
	/* BertOnlyMLMHead: transform dense + LayerNorm, decoder (weight tied
	 * to the word embeddings) + its own bias. */
	linear(l, "cls.predictions.transform.dense.weight",
	       "cls.predictions.transform.dense.bias", h, h, head, GM_PT_HEAD);
	layernorm(l, "cls.predictions.transform.LayerNorm.weight",
		  "cls.predictions.transform.LayerNorm.bias", h, GM_PT_HEAD);
	gm_params_add(l, "cls.predictions.bias", v, 1,
		      GM_PT_HEAD | GM_PT_TP | GM_PT_BIAS);
	gm_params_add(l, "lm_head", v, h, GM_PT_HEAD | GM_PT_MATMUL | GM_PT_TP |
		      (m->tied_embeddings ? GM_PT_TIED : 0));
	return 0;
}

/*
 * BertLayer (post-norm): q/k/v linears on the block input -> attention
 * -> dense -> dropout -> add -> LayerNorm; intermediate dense -> gelu ->
 * output dense -> dropout -> add -> LayerNorm.
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute, R = st->residual;
	struct gm_act_tensor *t;

	t = gm_act_add(l, "q/k/v input", st->autocast ? C : R, GM_AT_SEQ);
	t->h = st->autocast ? 3 : 1;
	gm_act_attention(l, st, false);
	if (st->dropout)
		gm_act_add(l, "attention dropout mask", 1, GM_AT_SEQ)->h = 1;
	gm_act_norm(l, st, false, 1, "intermediate input");
	gm_act_add(l, "gelu input", C, 0)->f = 1;
	gm_act_add(l, "output dense input", C, 0)->f = 1;
	if (st->dropout)
		gm_act_add(l, "output dropout mask", 1, GM_AT_SEQ)->h = 1;
	t = gm_act_add(l, "output layernorm input", R, GM_AT_SEQ);
	t->h = 1;
	gm_act_add(l, "layernorm mean, rstd", 4, GM_AT_SEQ)->one = 2;
}

/* BertLayer.forward (post-LayerNorm, exact GELU). */
static void block(struct gm_blk *b)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double h = sh->hidden, Q = sh->q, K = sh->kv, F = sh->ffn;
	int q, k, v, at, d, dd, s1, n1, i, gl, o, od, s2;

	q = gm_blk_linear(b, GM_BLK_IN, h, Q, true);
	k = gm_blk_linear(b, GM_BLK_IN, h, K, true);
	v = gm_blk_linear(b, GM_BLK_IN, h, K, true);
	at = gm_blk_attention(b, q, k, v);
	gm_blk_drop(b, q);
	gm_blk_drop(b, k);
	gm_blk_drop(b, v);
	d = gm_blk_linear(b, at, Q, h, true);
	gm_blk_drop(b, at);
	dd = gm_blk_dropout(b, d);
	s1 = gm_blk_add(b, dd, GM_BLK_IN);
	gm_blk_drop(b, dd);
	n1 = gm_blk_layer_norm(b, s1);
	gm_blk_drop(b, s1);
	gm_blk_drop(b, GM_BLK_IN);
	i = gm_blk_linear(b, n1, h, F, true);
	gl = gm_blk_ew(b, i, GM_BLK_END, (int[]){i, GM_BLK_END});
	gm_blk_drop(b, i);
	o = gm_blk_linear(b, gl, F, h, true);
	gm_blk_drop(b, gl);
	od = gm_blk_dropout(b, o);
	s2 = gm_blk_add(b, od, n1);
	gm_blk_drop(b, od);
	gm_blk_output_next(b);
	gm_blk_layer_norm(b, s2);
	gm_blk_drop(b, s2);
	gm_blk_drop(b, n1);
}

/* BertEmbeddings: word + token type + position lookups, their sums, the
 * LayerNorm: its output (embedding_output) is the first block's input,
 * which the model's forward keeps named. */
static uint32_t infer_embed(struct gm_em *e, const struct gm_em_fwd *f,
			    struct gm_em_live *lv)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c, X = T * in->hidden * c;
	double q = T / (double)in->batch;
	uint32_t w, tt, s1, s2, hs;

	w = gm_em_alloc(e, X, GM_SK_TRANSIENT);
	tt = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* token type */
	s1 = gm_em_alloc(e, X, GM_SK_TRANSIENT);
	lv->keep[1] = gm_em_alloc(e, q * in->hidden * c, GM_SK_TRANSIENT);
	s2 = gm_em_alloc(e, X, GM_SK_TRANSIENT);
	gm_em_free(e, &s1);
	hs = gm_em_layer_norm(e, T);
	gm_em_free(e, &s2);
	gm_em_free(e, &w);
	gm_em_free(e, &tt);
	gm_em_free(e, &lv->keep[1]);
	lv->keep[2] = hs;
	return hs;
}

/* One BertLayer in inference (post-LayerNorm, exact GELU, no
 * cache). */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	double I = T * in->ffn * c;
	uint32_t q, k, v, o, d, s, n1, i, g, d2, s2, out;

	(void)l;
	q = gm_em_alloc(e, Q, GM_SK_TRANSIENT);
	k = gm_em_alloc(e, K, GM_SK_TRANSIENT);
	v = gm_em_alloc(e, K, GM_SK_TRANSIENT);
	o = gm_em_sdpa(e, f);                            /* sdpa */
	gm_em_free(e, &q);
	gm_em_free(e, &k);
	gm_em_free(e, &v);
	d = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* output.dense */
	s = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* + input */
	n1 = gm_em_layer_norm(e, T);
	gm_em_free(e, &s);
	gm_em_free(e, &d);
	gm_em_free(e, &o);
	i = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* intermediate */
	g = gm_em_alloc(e, I, GM_SK_TRANSIENT);          /* gelu */
	gm_em_free(e, &i);
	d2 = gm_em_alloc(e, X, GM_SK_TRANSIENT);         /* output.dense */
	s2 = gm_em_alloc(e, X, GM_SK_TRANSIENT);         /* + attention out */
	out = gm_em_layer_norm(e, T);
	gm_em_free(e, &s2);
	gm_em_free(e, &d2);
	gm_em_free(e, &g);
	gm_em_free(e, &n1);
	return out;
}

/* No final norm (post-norm blocks): the MLM head's transform (dense,
 * gelu, LayerNorm) of the last block's output. */
static uint32_t infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			   struct gm_em_live *lv)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, X = T * in->hidden * in->c;
	uint32_t t, g, nf;

	gm_em_free(e, &lv->keep[2]);
	if (!in->lm_head)
		return GM_EM_NONE;
	t = gm_em_alloc(e, X, GM_SK_TRANSIENT);  /* transform.dense */
	g = gm_em_alloc(e, X, GM_SK_TRANSIENT);  /* gelu */
	gm_em_free(e, &t);
	nf = gm_em_layer_norm(e, T);
	gm_em_free(e, &g);
	return nf;
}

const struct gm_family gm_family_bert = {
	.name = "bert",
	.shaped = true,
	.defaults = {.vocab = 30522, .max_positions = 512, .type_vocab = 2,
		     .tied = true, .head = GM_HEAD_MASKED_LM,
		     .lora_targets = {"query", "value"}},
	.keys = GM_FK_TYPE_VOCAB | GM_FK_MASKED_LM,
	.learned_positions = true,
	.linears = {"query", "key", "value", "dense"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 2,
	/* hidden_dropout_prob, attention_probs_dropout_prob 0.1
	 * (BertConfig) */
	.dropout = true,
	/* no padding: no mask; softmax in the scores' dtype (fp32 under
	 * autocast's list); eager_attention_forward (transformers 5.17.0
	 * modeling_bert.py) applies dropout to the probabilities as
	 * softmax made them */
	.attn = {.mask = false, .softmax_fp32 = false, .probs = GM_PROBS_KEPT},
	.block = block,
	.adapter = true,
	.final_norm = NULL,
	.embed_out = GM_EMBED_OUT_FREE,
	.embed_mask = 1,
	.embed_norm = true,
	.loss = &gm_loss_masked_lm,
	.encoder = true,
	.infer_embed = infer_embed,
	.infer_layer = infer_layer,
	.infer_head = infer_head,
};
