/*
 * mixtral.c - the Mixtral family (family.h): MixtralForCausalLM of
 * transformers 5.x (src/transformers/models/mixtral/modeling_mixtral.py:
 * MixtralDecoderLayer, MixtralAttention (as Llama's), MixtralSparseMoeBlock
 * with MixtralTopKRouter and MixtralExperts, whose gate_up_proj and
 * down_proj are 3-D parameters of all experts).
 *
 * Routing is balanced: each of the `experts` experts gets tokens x
 * experts_per_token / experts tokens. A skewed router gives the most
 * loaded expert more: in inference its gathered input, gate_up and down
 * outputs grow with its token count (up to all tokens); the saved
 * tensors of training do not depend on the split (every token is in
 * experts_per_token batches either way), the per-expert transient does.
 * The plan reports the difference as skewed_router_extra_bytes
 * (model.c moe_skew()).
 * Training has no op-by-op block program yet: the replay runs the
 * analytic saved-tensor list below.
 */
#include "arch/family.h"

#include "activations.h"
#include "loss.h"
#include "params.h"
#include "step_emit.h"

/* MixtralConfig's defaults: intermediate_size 14336, vocab_size 32000,
 * num_local_experts 8, num_experts_per_tok 2. */
static uint64_t ffn(uint64_t hidden)
{
	(void)hidden;
	return 14336;
}

static int layout(const struct gm_spec_model *m, struct gm_param_layout *l,
		  struct gm_diag *diag)
{
	uint64_t h = m->hidden_size, d = h / m->attention_heads;
	uint64_t q = d * m->attention_heads, kv = d * m->kv_heads;
	uint64_t E = m->experts, F = m->moe_ffn_hidden_size;
	unsigned lin = GM_PT_LAYER | GM_PT_MATMUL | GM_PT_TP;

	(void)diag;
	gm_params_add(l, "embed_tokens", m->vocab_size, h,
		      GM_PT_EMBED | GM_PT_TP);
	gm_params_add(l, "layers.*.self_attn.q_proj", q, h, lin);
	gm_params_add(l, "layers.*.self_attn.k_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.v_proj", kv, h, lin);
	gm_params_add(l, "layers.*.self_attn.o_proj", h, q, lin);
	/* MixtralTopKRouter.weight (experts, hidden): replicated */
	gm_params_add(l, "layers.*.mlp.gate.weight", E, h,
		      GM_PT_LAYER | GM_PT_MATMUL);
	/* MixtralExperts: (experts, 2 x ffn, hidden), (experts, hidden,
	 * ffn), split over the ffn by tensor parallelism */
	gm_params_add3(l, "layers.*.mlp.experts.gate_up_proj", E, 2 * F, h,
		       lin);
	gm_params_add3(l, "layers.*.mlp.experts.down_proj", E, h, F, lin);
	gm_params_add(l, "layers.*.input_layernorm", h, 1, GM_PT_LAYER);
	gm_params_add(l, "layers.*.post_attention_layernorm", h, 1,
		      GM_PT_LAYER);
	gm_params_add(l, "norm", h, 1, GM_PT_HEAD);
	gm_params_lm_head(m, l);
	return 0;
}

/*
 * What a MixtralDecoderLayer keeps for backward, per token, with
 * balanced routing (each token is in experts_per_token experts' batches):
 * the attention as Llama's; post_attention_layernorm; the router's
 * input (its linear saves it; under autocast a 16-bit cast) and
 * softmax's fp32 output over the experts; per expert the linear's input
 * (the gathered hidden_states[token_idx], cast to 16 bits under
 * autocast), gate_up (SiLU saves the gate half, the product the up half:
 * both halves of one tensor), the SiLU output and the product (saved by
 * the product and down's linear), and down's output (saved by the
 * product with the fp32 routing weights). The backward's widest
 * transient: one expert's d(gate_up) and d(product), 3 ffn wide, over
 * its tokens.
 */
static void saved(struct gm_act_layer *l, const struct gm_act_style *st)
{
	double C = st->compute, k = st->topk, E = st->experts;

	gm_act_norm(l, st, true, 3, "q/k/v input");
	gm_act_attention(l, st, false);
	gm_act_norm(l, st, true, 1, "router input");
	gm_act_add(l, "router probabilities (fp32)", 4, 0)->one = E;
	gm_act_add(l, "expert inputs (gathered)", C, 0)->h = k;
	gm_act_add(l, "expert gate_up output", C, 0)->fe = 2 * k;
	gm_act_add(l, "expert SiLU output, product", C, 0)->fe = 2 * k;
	gm_act_add(l, "expert down output", C, 0)->h = k;
	l->transient.f = 0;
	l->transient.fe = E > 0 ? C * 3 * k / E : 0;
}

/*
 * MixtralSparseMoeBlock in inference over T tokens of hidden states n2:
 * the router (logits, their fp32 softmax, top-k values and indices), the
 * output buffer (zeros_like), the one-hot expert mask, then expert by
 * expert: torch.where's positions and token indices, the gathered input,
 * gate_up, SiLU, the product, down, the product with the fp32 routing
 * weights (fp32), its cast to the output dtype for index_add_. A loop
 * iteration's names live until the next rebinds them. Returns the
 * block's output.
 */
static uint32_t moe(struct gm_em *e, double T)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double c = in->c, E = in->experts, k = in->topk, H = in->hidden;
	double F = in->ffn_expert, tk = T * k;
	double hit = tk < E ? tk : E, n = tk / hit;
	uint32_t lg, lf = GM_EM_NONE, pr, tv, ti, out, mask;
	uint32_t pos = GM_EM_NONE, idx = GM_EM_NONE, cur = GM_EM_NONE;
	uint32_t gu = GM_EM_NONE, chs = GM_EM_NONE;

	lg = gm_em_alloc(e, T * E * c, GM_SK_TRANSIENT);     /* gate */
	if (c != 4)
		lf = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT); /* float */
	pr = gm_em_alloc(e, T * E * 4, GM_SK_TRANSIENT);     /* softmax */
	gm_em_free(e, &lf);
	tv = gm_em_alloc(e, tk * 4, GM_SK_TRANSIENT);        /* topk */
	ti = gm_em_alloc(e, tk * 8, GM_SK_TRANSIENT);
	gm_em_free(e, &pr);
	gm_em_free(e, &lg);
	out = gm_em_alloc(e, T * H * c, GM_SK_TRANSIENT);    /* zeros_like */
	mask = gm_em_alloc(e, tk * E * 8, GM_SK_TRANSIENT);  /* one_hot */
	for (double x = 0; x < hit; x++) {
		uint32_t np, ni, nc, ng, s, m, w, d, nh, cast;

		np = gm_em_alloc(e, n * 8, GM_SK_TRANSIENT);  /* where */
		ni = gm_em_alloc(e, n * 8, GM_SK_TRANSIENT);
		gm_em_free(e, &pos);
		gm_em_free(e, &idx);
		pos = np;
		idx = ni;
		nc = gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT); /* gather */
		gm_em_free(e, &cur);
		cur = nc;
		ng = gm_em_alloc(e, n * 2 * F * c, GM_SK_TRANSIENT);
		gm_em_free(e, &gu);                   /* gate, up rebound */
		gu = ng;
		s = gm_em_alloc(e, n * F * c, GM_SK_TRANSIENT);   /* act */
		m = gm_em_alloc(e, n * F * c, GM_SK_TRANSIENT);   /* * up */
		gm_em_free(e, &s);
		gm_em_free(e, &chs);
		w = gm_em_alloc(e, n * 4, GM_SK_TRANSIENT);   /* weights */
		d = gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT);   /* down */
		gm_em_free(e, &m);
		nh = gm_em_alloc(e, n * H * 4, GM_SK_TRANSIENT);  /* * w */
		gm_em_free(e, &d);
		gm_em_free(e, &w);
		chs = nh;
		cast = c != 4 ? gm_em_alloc(e, n * H * c, GM_SK_TRANSIENT) :
				GM_EM_NONE;                   /* .to() */
		gm_em_free(e, &cast);                     /* index_add_ */
	}
	gm_em_free(e, &cur);
	gm_em_free(e, &gu);
	gm_em_free(e, &pos);
	gm_em_free(e, &idx);
	gm_em_free(e, &chs);
	gm_em_free(e, &mask);
	gm_em_free(e, &tv);
	gm_em_free(e, &ti);
	return out;
}

/* One MixtralDecoderLayer in inference: the attention as Llama's, then
 * the sparse MoE block. */
static uint32_t infer_layer(struct gm_em *e, uint64_t l,
			    const struct gm_em_fwd *f)
{
	const struct gm_step_infer *in = gm_em_infer(e);
	double T = (double)f->T, c = in->c;
	double X = T * in->hidden * c, Q = T * in->q * c, K = T * in->kv * c;
	uint32_t n1, q, k, v, qe, ke, o, p, r, n2, mo, out;

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
	o = gm_em_alloc(e, Q, GM_SK_TRANSIENT);          /* sdpa */
	p = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* o_proj */
	gm_em_free(e, &o);
	gm_em_free(e, &qe);
	gm_em_free(e, &n1);
	r = gm_em_alloc(e, X, GM_SK_TRANSIENT);          /* residual + */
	gm_em_free(e, &p);
	n2 = gm_em_rms_norm(e, T);
	mo = moe(e, T);
	gm_em_free(e, &n2);
	out = gm_em_alloc(e, X, GM_SK_TRANSIENT);        /* residual + */
	gm_em_free(e, &mo);
	gm_em_free(e, &r);
	return out;
}

static int final_norm(struct gm_blk *b, int x)
{
	return gm_family_llama.final_norm(b, x);
}

static uint32_t infer_embed(struct gm_em *e, const struct gm_em_fwd *f,
			    struct gm_em_live *lv)
{
	return gm_family_llama.infer_embed(e, f, lv);
}

static void infer_pre(struct gm_em *e, double q, struct gm_em_live *lv)
{
	gm_family_llama.infer_pre(e, q, lv);
}

static uint32_t infer_head(struct gm_em *e, const struct gm_em_fwd *f,
			   struct gm_em_live *lv)
{
	return gm_family_llama.infer_head(e, f, lv);
}

const struct gm_family gm_family_mixtral = {
	.name = "mixtral",
	.shaped = true,
	.defaults = {.ffn = ffn, .vocab = 32000, .head = GM_HEAD_CAUSAL_LM,
		     .experts = 8, .experts_per_token = 2,
		     .lora_targets = {"q_proj", "v_proj"}},
	.keys = GM_FK_MOE,
	.layout = layout,
	.saved = saved,
	.mlp_grads = 3,
	.moe = true,
	/* attention_dropout 0; router_jitter_noise 0 */
	.dropout = false,
	.attn = {.mask = true, .softmax_fp32 = true, .probs_as_query = true},
	.block = NULL,
	.final_norm = final_norm,
	.embed_out = GM_EMBED_OUT_NAMED,
	.loss = &gm_loss_causal_lm,
	.infer_embed = infer_embed,
	.infer_pre = infer_pre,
	.infer_layer = infer_layer,
	.infer_head = infer_head,
};
