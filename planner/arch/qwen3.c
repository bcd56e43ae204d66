/*
 * qwen3.c - the dense Qwen3 family (family.h): Qwen3ForCausalLM of
 * transformers 5.x (src/transformers/models/qwen3/modeling_qwen3.py,
 * commit 000c33fd: Qwen3Model, Qwen3DecoderLayer, Qwen3Attention,
 * Qwen3MLP, Qwen3RMSNorm). Llama's block with two changes, both in
 * Qwen3Attention:
 * - head_dim comes from the config (model.head_dim), not hidden_size /
 *   num_attention_heads: q_proj is hidden -> heads x head_dim, k/v_proj
 *   hidden -> kv_heads x head_dim, o_proj heads x head_dim -> hidden
 *   (Qwen3-0.6B: 1024 -> 2048 and 2048 -> 1024);
 * - q_norm and k_norm, Qwen3RMSNorm(head_dim) with a (head_dim,)
 *   weight, applied to q and k viewed per head, before the rotary
 *   embedding.
 * No biases (attention_bias false; true is refused by hf_config.c).
 * Defaults: Qwen3Config (models/qwen3/configuration_qwen3.py, same
 * version).
 */
#include "arch/family.h"
#include "arch/llama.h"
#include "arch/qwen3.h"

#include "activations.h"
#include "block.h"
#include "step_emit.h"
#include "loss.h"
#include "params.h"

/* Qwen3Config's intermediate_size default (22016). */
static uint64_t ffn(uint64_t hidden)
{
	(void)hidden;
	return 22016;
}

void gm_qwen3_attention_params(const struct gm_spec_model *m,
			       struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size;
	uint64_t d = m->head_dim ? m->head_dim : h / m->attention_heads;
	uint64_t q = d * m->attention_heads, kv = d * m->kv_heads;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	gm_params_add(l, "embed_tokens", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "layers.*.self_attn.q_proj", q, h, lin);
	gm_params_add(l, "layers.*.self_attn.k_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.v_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.o_proj", h, q, lin);
	gm_params_add(l, "layers.*.self_attn.q_norm", d, 1, GM_PT_LAYER);
	gm_params_add(l, "layers.*.self_attn.k_norm", d, 1, GM_PT_LAYER);
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	(void)diag;
	gm_qwen3_attention_params(m, l);
	gm_params_add(l, "layers.*.mlp.gate_proj", m->ffn_hidden_size, h, lin);
	gm_params_add(l, "layers.*.mlp.up_proj", m->ffn_hidden_size, h, lin);
	gm_params_add(l, "layers.*.mlp.down_proj", h, m->ffn_hidden_size, lin);
	gm_llama_norm_params(m, l);
	return 0;
}

/*
 * Qwen3DecoderLayer, the analytic list: Llama's (llama.c), with the q/k
 * norms' inputs (q and k, which their fp32 copies save as the norm
 * input does; the rotary embedding saves only cos/sin, the norms'
 * outputs are what the attention core reads), q at q_proj's width.
 */
void gm_qwen3_saved_attention(struct gm_act_layer *l,
			      const struct gm_act_style *st)
{
	double C = st->compute;

	gm_act_norm(l, st, true, 3, "q/k/v input");
	gm_act_add(l, "q_norm input (q)", C, 0)->q = 1;
	gm_act_add(l, "k_norm input (k)", C, 0)->kv = 1;
	gm_act_attention(l, st, false);
}

static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute;

	gm_qwen3_saved_attention(l, st);
	gm_act_norm(l, st, true, 2, "gate/up input");
	gm_act_add(l, "gate output (SiLU input)", C, 0)->f = 1;
	gm_act_add(l, "SiLU output, up output", C, 0)->f = 2;
	gm_act_add(l, "down_proj input", C, 0)->f = 1;
}

/* Qwen3DecoderLayer.forward's attention half, op by op: llama.c's
 * with q_norm(q_proj(x).view(..., head_dim)) and the same for k
 * (arch/qwen3.h). */
int gm_qwen3_block_attention(struct gm_blk *b, int *n2)
{
	const struct gm_step_shape *sh = gm_blk_shape(b);
	double h = sh->hidden, Q = sh->q, K = sh->kv;
	int n1, q, k, v, qn, kn, qe, ke, at, o, r1;

	n1 = gm_blk_rms_norm(b, GM_BLK_IN);
	q = gm_blk_linear_named(b, "q_proj", n1, h, Q, false);
	qn = gm_blk_head_rms_norm(b, q);
	gm_blk_drop(b, q);
	k = gm_blk_linear_named(b, "k_proj", n1, h, K, false);
	kn = gm_blk_head_rms_norm(b, k);
	gm_blk_drop(b, k);
	v = gm_blk_linear_named(b, "v_proj", n1, h, K, false);
	qe = gm_blk_rotary(b, qn);
	ke = gm_blk_rotary(b, kn);
	gm_blk_drop(b, qn);
	gm_blk_drop(b, kn);
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

/* Qwen3DecoderLayer.forward: the attention half, then Llama's MLP half
 * (Qwen3Model's loop holds the layer's input until the layer returns,
 * as LlamaModel's does). */
static void block(struct gm_blk *b)
{
	int n2, r1 = gm_qwen3_block_attention(b, &n2);

	gm_llama_block_mlp(b, r1, n2, gm_blk_shape(b)->ffn);
}

/* Qwen3DecoderLayer's attention half in inference (arch/qwen3.h). */
uint32_t gm_qwen3_infer_attention(struct gm_em *e, uint64_t l,
				  const struct gm_em_fwd *f, uint32_t *n2)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	uint32_t n1, q, qn, k, kn, v, qe, ke, o, p, r;

	n1 = gm_em_rms_norm(e, T);
	q = gm_em_alloc(e, Q, GM_SK_TRANSIENT);          /* q_proj */
	qn = gm_em_head_rms_norm(e, T, in->q);           /* q_norm */
	gm_em_free(e, &q);
	k = gm_em_alloc(e, K, GM_SK_TRANSIENT);          /* k_proj */
	kn = gm_em_head_rms_norm(e, T, in->kv);          /* k_norm */
	gm_em_free(e, &k);
	v = gm_em_alloc(e, K, GM_SK_TRANSIENT);          /* v_proj */
	qe = gm_em_rotary(e, Q);
	ke = gm_em_rotary(e, K);
	gm_em_free(e, &qn);
	gm_em_free(e, &kn);
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

/* One Qwen3DecoderLayer in inference: Qwen3's attention half, then
 * Llama's MLP half; returns its output, the caller frees the input. */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	uint32_t n2, r = gm_qwen3_infer_attention(e, l, f, &n2);

	return gm_llama_infer_mlp(e, f, &n2, &r);
}

/* Qwen3Model's embedding, rotary tables, final norm and return are
 * LlamaModel's (the same sequence in its forward): llama.c's. */
const struct gm_family gm_family_qwen3 = {
	.name = "qwen3",
	.shaped = true,
	/* Qwen3Config: vocab_size 151936, head_dim 128,
	 * tie_word_embeddings false */
	.defaults = {.ffn = ffn, .vocab = 151936, .head = GM_HEAD_CAUSAL_LM,
		     .head_dim = 128,
		     /* PEFT's q_proj, v_proj (as llama) */
		     .lora_targets = {"q_proj", "v_proj"}},
	.keys = GM_FK_HEAD_DIM,
	.linears = {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
		    "down_proj"},
	.layout = layout,
	.saved = saved,
	.mlp_grads = 3,
	/* attention_dropout 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs = GM_PROBS_TO_QUERY},
	.block = block,
	.adapter = true,
	.final_norm = gm_llama_final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = gm_llama_infer_embed,
	.infer_pre = gm_llama_infer_pre,
	.infer_layer = infer_layer,
	.infer_head = gm_llama_infer_head,
};
