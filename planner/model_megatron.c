/*
 * model_megatron.c - a Megatron-LM stage (model_megatron.h), from
 * Megatron-Core at NVIDIA/Megatron-LM d98e8a6 with the Transformer
 * Engine layer spec Megatron trains with by default
 * (megatron/core/models/gpt/gpt_layer_specs.py,
 * get_gpt_layer_with_transformer_engine_spec). Korthikanti et al. 2022
 * ("Reducing Activation Recomputation in Large Transformer Models",
 * section 4.1 and Table 2) is the method: every tensor a layer keeps for
 * its backward, counted per tensor-parallel rank, the residual stream
 * divided by t under sequence parallelism; the tensors are Megatron's
 * own fused layers', not the paper's (no separate LayerNorm, fused
 * QKV, flash attention, gated MLP, no dropout where the model has none).
 */
#include "model_megatron.h"

#include "megatron_moe.h"
#include "recipe.h"

#include <math.h>
#include <string.h>

uint64_t gm_mg_padded_vocab(uint64_t v, uint64_t t)
{
	uint64_t mult = 128 * (t ? t : 1);

	return (v + mult - 1) / mult * mult;
}

/* The model's shape as Megatron builds it. */
struct mg_shape {
	double tok, s, h, q, kv, f, a, t, tsp, c;
	bool gated, rope, layernorm, dropout, eager;
	bool moe;     /* routed experts in every layer (megatron_moe.c) */
	bool qknorm;  /* q and k RMSNorm per head (qwen3-moe:
		       * --qk-layernorm) */
	enum gm_ckpt ck;
};

static void shape_of(const struct gm_mg_in *in, struct mg_shape *x)
{
	const struct gm_spec *sp = in->spec;
	const struct gm_spec_model *m = &sp->model;
	double hd = m->head_dim ? (double)m->head_dim :
		    (double)m->hidden_size / (double)m->attention_heads;
	bool gpt2 = m->architecture == GM_ARCH_GPT2;

	x->s = (double)sp->training.sequence_length;
	x->tok = x->s * (double)sp->training.micro_batch_size;
	x->h = (double)m->hidden_size;
	x->q = hd * (double)m->attention_heads;
	x->kv = hd * (double)m->kv_heads;
	x->f = (double)m->ffn_hidden_size;
	x->a = (double)m->attention_heads;
	x->t = in->t;
	x->tsp = sp->parallelism.sequence_parallel ? in->t : 1;
	x->c = sp->training.precision == GM_PREC_FP32 ? 4 : 2;
	/* Llama as Megatron's Llama recipes run it (--swiglu,
	 * --normalization RMSNorm, --position-embedding-type rope,
	 * --attention-dropout 0 --hidden-dropout 0); GPT-2 as Megatron's
	 * GPT defaults (GeLU, LayerNorm, learned positions, dropout 0.1) */
	x->gated = !gpt2;
	x->rope = !gpt2;
	x->layernorm = gpt2;
	x->dropout = gpt2;
	/* --attention-backend unfused: scores materialized; else fused
	 * (flash / cuDNN) attention */
	x->eager = sp->training.attention == GM_ATTN_EAGER;
	x->ck = sp->training.activation_checkpointing;
	x->moe = m->experts > 0;
	x->qknorm = m->architecture == GM_ARCH_QWEN3_MOE;
}

/* The residual stream's bytes per token on one rank (seq-split under
 * sequence parallelism). */
static double resid(const struct mg_shape *x)
{
	return x->h * x->c / x->tsp;
}

/* A norm's per-token statistics (fp32 rsigma, and mu for LayerNorm). */
static double norm_stats(const struct mg_shape *x)
{
	return (x->layernorm ? 8.0 : 4.0) / x->tsp;
}

int gm_mg_layer_saved(const struct gm_mg_in *in, double *act,
		      double *fwd_trans, double *bwd_trans,
		      double *recompute)
{
	struct mg_shape x;
	double T, full_fwd = 0, ft, bt, bt2, moe_fwd = 0, moe_bwd = 0;
	double tmp[GM_MG_ACT];
	int n = 0;

	shape_of(in, &x);
	T = x.tok;
	/* linear_qkv, TELayerNormColumnParallelLinear (Transformer Engine
	 * LayerNormLinear): its input, the normalized output the GEMM
	 * reads (the local shard under sequence parallelism: it
	 * all-gathers again in backward), the norm's statistics */
	tmp[n++] = T * resid(&x);
	tmp[n++] = T * resid(&x);
	tmp[n++] = T * norm_stats(&x);
	/* its output, one [s, b, (q + 2 kv) / t] tensor that
	 * get_query_key_value_tensors splits into views (attention.py);
	 * the fused rotary embedding (apply_rope_fusion) returns new q and
	 * k and saves only the frequencies; value stays a view of it */
	tmp[n++] = T * (x.q + 2 * x.kv) / x.t * x.c;
	/* --qk-layernorm (TENorm on each head of q and k,
	 * attention.py SelfAttention q_layernorm / k_layernorm): their
	 * inputs are views of that output, their fp32 statistics new; the
	 * outputs go to the rotary embedding */
	if (x.qknorm)
		tmp[n++] = T * (x.q + x.kv) / (x.q / x.a) / x.t * 4;
	if (x.rope) {
		tmp[n++] = T * x.q / x.t * x.c;
		tmp[n++] = T * x.kv / x.t * x.c;
	}
	/* core attention: its output (linear_proj's input too); fused
	 * attention keeps the fp32 softmax statistics per head and token
	 * (TEDotProductAttention), which selective recompute (the
	 * checkpointed core_attn) drops */
	tmp[n++] = T * x.q / x.t * x.c;
	if (!x.eager && x.ck == GM_CKPT_NONE)
		tmp[n++] = T * x.a / x.t * 4;
	if (x.eager && x.ck == GM_CKPT_NONE) {
		/* unfused: the key and value expanded to every query head
		 * (repeat_interleave for grouped-query attention), the
		 * softmax output, and with attention dropout its mask and
		 * output: the paper's 5 a s^2 b term */
		if (x.kv < x.q)
			tmp[n++] = 2 * T * x.q / x.t * x.c;
		tmp[n++] = T * x.a / x.t * x.s * x.c;
		if (x.dropout) {
			tmp[n++] = T * x.a / x.t * x.s;
			tmp[n++] = T * x.a / x.t * x.s * x.c;
		}
	}
	/* self_attn_bda: the hidden dropout's mask */
	if (x.dropout)
		tmp[n++] = T * x.h / x.tsp;
	if (x.moe) {
		/* the MoE layer over the rank's sequence-parallel tokens
		 * (megatron_moe.c) */
		struct gm_mg_moe_in mi = {
			.spec = in->spec, .tok = T / x.tsp, .c = x.c,
			.layernorm = x.layernorm, .gated = x.gated};
		n = gm_mg_moe_saved(&mi, tmp, n, GM_MG_ACT - 1, &moe_fwd,
				    &moe_bwd);
	} else {
		/* linear_fc1 (LayerNormLinear again): input, normalized
		 * output, statistics */
		tmp[n++] = T * resid(&x);
		tmp[n++] = T * resid(&x);
		tmp[n++] = T * norm_stats(&x);
		/* the fused activation (bias_swiglu_impl /
		 * bias_gelu_impl) saves fc1's output, linear_fc2 the
		 * activation's */
		tmp[n++] = T * (x.gated ? 2 : 1) * x.f / x.t * x.c;
		tmp[n++] = T * x.f / x.t * x.c;
	}
	if (x.dropout)
		tmp[n++] = T * x.h / x.tsp;

	for (int i = 0; i < n; i++)
		full_fwd += tmp[i];
	/* forward transients (estimates from the kernels' outputs): the
	 * all-gathered normalized input of a column-parallel GEMM under
	 * sequence parallelism; unfused attention's scores before the
	 * softmax (fp32 with --attention-softmax-in-fp32) */
	ft = x.tsp > 1 ? T * x.h * x.c : 0;
	if (x.eager && T * x.a / x.t * x.s * 4 > ft)
		ft = T * x.a / x.t * x.s * 4;
	/* backward: the MLP's gradients at once (fc2's input gradient,
	 * fc1's output gradient, the incoming gradient, and the gathered
	 * input of fc1's weight gradient under sequence parallelism) */
	bt = T * x.c * ((x.gated ? 3 : 2) * x.f / x.t + x.h / x.tsp +
			(x.tsp > 1 ? x.h : 0));
	if (x.moe) {
		bt = moe_bwd;
		if (moe_fwd > ft)
			ft = moe_fwd;
	}
	/* the attention's: dq, dk, dv and the output's gradient */
	bt2 = T * x.c * ((2 * x.q + 2 * x.kv) / x.t + x.h / x.tsp);
	if (bt2 > bt)
		bt = bt2;
	*fwd_trans = ft;
	*bwd_trans = bt;
	*recompute = 0;
	if (x.ck == GM_CKPT_FULL) {
		/* --recompute-granularity full --recompute-method uniform
		 * --recompute-num-layers 1: each layer keeps its input
		 * (tensor_parallel.checkpoint in transformer_block.py
		 * _checkpointed_forward); its backward re-runs the forward */
		act[0] = T * resid(&x);
		*recompute = full_fwd;
		return 1;
	}
	memcpy(act, tmp, (size_t)n * sizeof(*act));
	return n;
}

/* Elements of pt on stage r and one tensor-parallel rank, with the
 * vocabulary padded as Megatron pads it. */
static double stage_elems(const struct gm_mg_in *in,
			  const struct gm_ptensor *pt, bool *layer)
{
	const struct gm_spec_model *m = &in->spec->model;
	bool first = in->r == 0, last = in->r + 1 == in->p;
	double rows = (double)pt->rows;

	if (m->vocab_size && pt->rows == m->vocab_size &&
	    (pt->flags & (GM_PT_EMBED | GM_PT_HEAD | GM_PT_TIED)))
		rows = (double)gm_mg_padded_vocab(m->vocab_size,
						  (uint64_t)in->t);
	rows *= (double)pt->cols;
	if (pt->flags & GM_PT_TP)
		rows /= in->t;
	/* the rank's experts of each MoE layer: experts / expert_parallel
	 * (megatron/core/transformer/moe/moe_layer.py, num_local_experts),
	 * their weights' ffn width / expert tensor parallel
	 * (TEColumnParallelGroupedLinear fc1, TERowParallelGroupedLinear
	 * fc2; biases only at expert tensor parallel 1, spec_rules.c) */
	if (gm_mg_moe_expert(pt)) {
		rows /= (double)in->spec->parallelism.expert_parallel;
		if (pt->flags & GM_PT_MATMUL)
			rows /= (double)gm_spec_expert_tensor_parallel(
				in->spec);
	}
	*layer = pt->flags & GM_PT_LAYER;
	if (*layer)
		return rows;
	/* tied: the last stage keeps its own copy of the word embedding
	 * for the output layer when p > 1 (shared_embedding_or_output_
	 * weight); on one stage it is the embedding itself */
	if (pt->flags & GM_PT_TIED)
		return in->p > 1 && last ? rows : 0;
	if (pt->flags & GM_PT_EMBED)
		return first ? rows : 0;
	if (pt->flags & GM_PT_HEAD)
		return last ? rows : 0;
	return rows;
}

/* Elements of a DDP buffer holding tensors of n elements each
 * (_ParamAndGradBuffer): with the distributed optimizer each parameter
 * starts on a 64-element boundary and the (single, without
 * --overlap-grad-reduce) bucket ends on a multiple of lcm(d, 128)
 * (megatron/core/optimizer/param_layout.py pad_param_start,
 * pad_bucket_end). */
static double buffer_elems(const double *n, int k, uint64_t reps,
			   const double *other, int ko, bool dist, double d)
{
	double sum = 0, div;
	uint64_t a = (uint64_t)d, b = 128, g;

	for (uint64_t r = 0; r < reps; r++)
		for (int i = 0; i < k; i++)
			sum += dist ? ceil(n[i] / 64) * 64 : n[i];
	for (int i = 0; i < ko; i++)
		sum += dist ? ceil(other[i] / 64) * 64 : other[i];
	if (!dist)
		return sum;
	while (b) { /* gcd(d, 128) */
		g = a % b;
		a = b;
		b = g;
	}
	div = (double)((uint64_t)d / a * 128);
	return ceil(sum / div) * div;
}

void gm_mg_stage(const struct gm_mg_in *in, struct gm_mg_step *mg,
		 struct gm_terms *T)
{
	const struct gm_spec *sp = in->spec;
	const struct gm_spec_parallel *par = &sp->parallelism;
	enum gm_precision pr = sp->training.precision;
	bool dist = par->distributed_optimizer;
	bool fp16 = pr == GM_PREC_FP16_MIXED || pr == GM_PREC_FP16_TRUE;
	bool fp32 = pr == GM_PREC_FP32;
	double wb = fp32 ? 4 : 2, gb = fp16 ? 2 : 4;
	double le[GM_PARAMS_MAX], oe[GM_PARAMS_MAX], P = 0, lsum = 0, osum = 0;
	double ld[GM_PARAMS_MAX], lx[GM_PARAMS_MAX], xsum = 0;
	int nd = 0, nx = 0;
	unsigned v = par->virtual_pipeline_stages > 1 ?
		     (unsigned)par->virtual_pipeline_stages : 1;
	struct mg_shape x;
	double d = in->d > 1 ? in->d : 1, ws = 0;
	/* the expert data-parallel group that shares the rank's experts:
	 * world / (expert tensor x expert x pipeline parallel) =
	 * d x t / (etp x ep) (parallel_state.py initialize_model_parallel,
	 * expert_data_parallel_size); the distributed optimizer shards the
	 * experts' states over it */
	double ep = par->expert_parallel > 1 ? (double)par->expert_parallel : 1;
	double etp = (double)gm_spec_expert_tensor_parallel(sp);
	double dx = d * (in->t > 1 ? in->t : 1) / (ep * etp);

	memset(mg, 0, sizeof(*mg));
	shape_of(in, &x);
	for (int i = 0; i < in->pl->n; i++) {
		bool layer;
		double n = stage_elems(in, &in->pl->t[i], &layer);
		if (layer) {
			mg->layer_x[mg->n_layer_t] =
				gm_mg_moe_expert(&in->pl->t[i]);
			if (mg->layer_x[mg->n_layer_t])
				lx[nx++] = n;
			else
				ld[nd++] = n;
			le[mg->n_layer_t++] = n;
		} else if (n > 0)
			oe[mg->n_other_t++] = n;
	}
	mg->steps = 2;
	mg->steps_max = GM_STEP_STEADY_MAX;
	mg->chunks = v;
	mg->layers_chunk = in->layers / v ? in->layers / v : 1;
	for (int i = 0; i < mg->n_layer_t; i++) {
		mg->layer_t[i] = le[i] * wb;
		lsum += le[i];
	}
	for (int i = 0; i < nx; i++)
		xsum += lx[i];
	xsum *= (double)mg->layers_chunk * v;
	for (int i = 0; i < mg->n_other_t; i++) {
		mg->other_t[i] = oe[i] * wb;
		osum += oe[i];
	}
	P = lsum * (double)mg->layers_chunk * v + osum;
	T->parameters = (uint64_t)llround(P);
	T->layers = in->layers;
	T->weights = T->gradients = 0;
	/* DDP groups the parameters by (dtype, grad dtype, expert
	 * parallel) into separate buffers (distributed_data_parallel.py
	 * group_params_for_buffers, expert_parallel_buffers): the dense
	 * ones padded for d, the experts' for their group */
	for (unsigned c = 0; c < v; c++) {
		double n = buffer_elems(ld, nd, mg->layers_chunk,
					oe, c == 0 ? mg->n_other_t : 0, dist, d);
		double nxe = nx ? buffer_elems(lx, nx, mg->layers_chunk, oe, 0,
					       dist, dx) : 0;
		mg->grad_buf[c] = n * gb;
		mg->param_buf[c] = dist ? n * wb : 0;
		mg->grad_buf_x[c] = nxe * gb;
		mg->param_buf_x[c] = dist ? nxe * wb : 0;
		T->weights += dist ? (n + nxe) * wb : 0;
		T->gradients += (n + nxe) * gb;
	}
	if (!dist)
		T->weights = P * wb;
	/* the optimizer (optimizer.py, distrib_optimizer.py): fp32
	 * masters of 16-bit parameters, fp16's fp32 main gradients, Adam's
	 * exp_avg and exp_avg_sq in fp32; this rank's shard with the
	 * distributed optimizer */
	mg->master_frac = (fp32 ? 0 : 4 / wb) / (dist ? d : 1);
	mg->state_frac = ((fp16 ? 4 : 0) + 8) / wb / (dist ? d : 1);
	mg->master_frac_x = (fp32 ? 0 : 4 / wb) / (dist ? dx : 1);
	mg->state_frac_x = ((fp16 ? 4 : 0) + 8) / wb / (dist ? dx : 1);
	T->optimizer_states = (P - xsum) * wb * (mg->master_frac +
						 mg->state_frac) +
			      xsum * wb * (mg->master_frac_x +
					   mg->state_frac_x);
	/* cuBLAS: PyTorch's handle for the forward's thread and for the
	 * autograd engine's (model.c), and Transformer Engine's own GEMM
	 * workspace (transformer_engine/pytorch/module/base.py
	 * get_cublas_workspace_size_bytes: 32 MiB on Hopper and later,
	 * 4 MiB before), allocated with the first forward */
	ws = in->workspace;
	mg->workspace = ws;
	mg->te_workspace = (in->sm_major >= 9 ? 32.0 : 4.0) * 1024 * 1024;
	/* the experts' grouped GEMM (--moe-grouped-gemm, TEGroupedMLP:
	 * Transformer Engine's GroupedLinear) runs on its own cuBLAS
	 * workspaces, one per compute stream, 4 streams, 32 MiB + 1 KiB
	 * each on Hopper and later (transformer_engine/pytorch/
	 * cpp_extensions/gemm.py get_cublas_workspace with grouped_gemm,
	 * get_cublas_workspace_size_bytes; common/util/multi_stream.cpp
	 * num_compute_streams; NVIDIA/TransformerEngine d0067d0) */
	if (x.moe) {
		mg->te_group_n = 4;
		mg->te_group_ws = in->sm_major >= 9 ? 32.0 * 1024 * 1024 + 1024
						    : 4.0 * 1024 * 1024;
	}
	/* the schedule */
	mg->pp = in->p;
	mg->rank = in->r;
	mg->m = in->m ? in->m : 1;
	T->in_flight = gm_megatron_in_flight(in->p, v, in->r, mg->m);
	mg->n_act = gm_mg_layer_saved(in, mg->act, &mg->fwd_trans,
				      &mg->bwd_trans, &mg->recompute);
	/* stage 0: the micro-batch's tokens, position ids (int64), labels
	 * (int64) and loss mask (fp32) from get_batch, and the embedding
	 * dropout's mask */
	if (in->r == 0)
		mg->stage_in = x.tok * 28 + (x.dropout ? x.tok * x.h / x.tsp
							 : 0);
	mg->stage_grad = x.tok * resid(&x);
	if (in->r + 1 == in->p) {
		uint64_t V = gm_mg_padded_vocab(sp->model.vocab_size,
						(uint64_t)in->t);
		/* final_layernorm: its input and statistics; output_layer
		 * (ColumnParallelLinear): its input */
		mg->head_in = x.tok * (2 * resid(&x) + norm_stats(&x));
		mg->logits16 = x.tok * (double)V / in->t * x.c;
		mg->logits32 = x.tok * (double)V / in->t * 4;
	}
	if (x.moe) {
		struct gm_mg_moe_in mi = {
			.spec = sp, .tok = x.tok / x.tsp, .c = x.c,
			.layernorm = x.layernorm, .gated = x.gated};
		T->moe_skew = gm_mg_moe_skew(&mi);
		mg->global_buffer = gm_mg_moe_buffer(&mi);
	}
	/* Megatron's global memory buffer (megatron/core/utils.py
	 * GlobalMemoryBuffer, "mpu"): one tensor of the largest request,
	 * kept. Besides the allgather dispatcher's gather, output_layer
	 * (ColumnParallelLinear) all-gathers its sequence-parallel input
	 * into it, forward and backward (tensor_parallel/layers.py
	 * LinearWithGradAccumulationAndAsyncCommunication): the micro-
	 * batch's tokens x hidden on the last stage */
	if (in->r + 1 == in->p && x.tsp > 1 &&
	    x.tok * x.h * x.c > mg->global_buffer)
		mg->global_buffer = x.tok * x.h * x.c;
}
