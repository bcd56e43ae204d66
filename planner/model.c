/*
 * model.c - the memory model (see model.h for the phases). Every term
 * names its source; the estimates say so. What depends on the model's
 * family comes from its table entry (planner/arch/family.h).
 */
#include "model.h"

#include "activations.h"
#include "arch/family.h"
#include "block.h"
#include "loop.h"
#include "loss.h"
#include "megatron_moe.h"
#include "model_megatron.h"
#include "error.h"
#include "recipe.h"
#include "reserve.h"
#include "step_adapter.h"
#include "units.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void gm_model_opts_default(struct gm_model_opts *o)
{
	memset(o, 0, sizeof(*o));
	/* The replay by default: on the H200 calibration set (tests/data/
	 * calibration/pending, fresh-state measurement) it predicts peak
	 * reserved with median |error| 1.5% tuning / 0.95% held-out against
	 * the analytic model's 4.0% / 3.4% (error_table.py --reserve-model),
	 * in milliseconds a plan instead of microseconds. gm_fit() searches
	 * on the analytic model and checks its answers with this one. */
	o->reserve = GM_RESERVE_SIMULATED;
	o->recipe = GM_RECIPE_TORCH;
	/* NCCL's device memory per communicator, outside the caching
	 * allocator. Measured: 2x H200 over NVLink, NCCL 2.28.9, torch
	 * 2.11, one torchrun per configuration: outside_allocator_bytes of
	 * the 10 DDP, ZeRO-1 and FSDP configurations of the tuning set
	 * (tests/data/calibration/multi/measured-h200x2.json; one
	 * communicator) is 1591-1615 MiB, the same on both ranks, median
	 * 1603 MiB; the H200's training context (models/gpus.yaml, 767 MiB)
	 * leaves 836 MiB. A probe (tools/bench/results/nccl-probe.md)
	 * saw a communicator's set-up take 840 MiB and later collectives
	 * of every kind nothing more. The buffers alone (NCCL_BUFFSIZE,
	 * 4 MiB per channel and peer: NCCL's environment variables
	 * documentation) are a fraction of it; public NCCL reports show
	 * communicators of 0.5-1.6 GB. More peers take more: a lower bound
	 * for larger groups. */
	o->nccl_comm_bytes = 836 * GM_MiB;
	/* DistributedDataParallel bucket_cap_mb = 25 (torch docs). */
	o->ddp_bucket_bytes = 25 * GM_MiB;
}

int gm_reserve_model_parse(const char *s, enum gm_reserve_model *out)
{
	if (!strcmp(s, "simulated"))
		*out = GM_RESERVE_SIMULATED;
	else if (!strcmp(s, "analytic"))
		*out = GM_RESERVE_ANALYTIC;
	else
		return GM_EINVAL;
	return 0;
}

const char *gm_reserve_model_name(enum gm_reserve_model m)
{
	return m == GM_RESERVE_ANALYTIC ? "analytic" : "simulated";
}

const char *gm_phase_name(enum gm_phase p)
{
	switch (p) {
	case GM_PHASE_FWD_BWD:
		return "forward-backward";
	case GM_PHASE_OPTIMIZER:
		return "optimizer-step";
	case GM_PHASE_SETUP:
		return "set-up";
	default:
		return "inference";
	}
}

uint64_t gm_cublas_workspace_bytes(int sm_major)
{
	if (sm_major == 9)
		return 4096 * GM_KiB * 8;
	return 4096 * GM_KiB * 2 + 16 * GM_KiB * 8;
}

/* Everything one stage needs, computed once. */
struct ctx {
	const struct gm_spec *spec;
	const struct gm_family *fam;
	const struct gm_param_layout *pl;
	const struct gm_model_opts *o;
	struct gm_state_bytes sb;   /* per parameter, sharded */
	struct gm_state_bytes full; /* per parameter, unsharded */
	double t, d;
	double tv;                  /* the vocabulary's TP divisor: t, or 1
				     * when tensor_parallel_vocab is
				     * replicated */
	unsigned p, r;              /* stages, this stage */
	uint64_t layers, ga;
	bool first, last;
	double ws;                  /* cuBLAS workspace */
	const struct gm_plan_gpu *gpu;
	uint64_t alloc_cap;         /* what the caching allocator may take:
				     * the card less context and NCCL */
	double unshard;             /* FSDP: bytes of an unsharded parameter
				     * element (full.weights, or 2 under
				     * MixedPrecisionPolicy) */
};

/* The TP divisor of pt: t for a tensor split over the ranks, 1 for a
 * replicated one (the embedding and head under tensor_parallel_vocab:
 * replicated). */
static double tdiv(const struct ctx *c, const struct gm_ptensor *pt)
{
	if (!(pt->flags & GM_PT_TP))
		return 1;
	return pt->flags & (GM_PT_EMBED | GM_PT_HEAD) ? c->tv : c->t;
}

static uint64_t stage_layers(uint64_t L, unsigned p, unsigned r);

/* The first block of this stage. */
static uint64_t stage_first(const struct ctx *c)
{
	uint64_t first = 0;

	for (unsigned i = 0; i < c->r; i++)
		first += stage_layers(c->pl->layers, c->p, i);
	return first;
}

/* Blocks of this stage whose MLP is dense: those below
 * model.dense_layers (first_k_dense_replace) in the whole model. */
static uint64_t dense_blocks(const struct ctx *c)
{
	uint64_t first = stage_first(c), k = c->spec->model.dense_layers;

	if (k <= first)
		return 0;
	return k - first < c->layers ? k - first : c->layers;
}

/* Elements of pt on this stage and TP rank (1 tensor group). */
static double stage_elems(const struct ctx *c, const struct gm_ptensor *pt,
			  double *count)
{
	double n = (double)pt->rows * (double)pt->cols;

	*count = 1;
	n /= tdiv(c, pt);
	if (pt->flags & GM_PT_LAYER) {
		*count = (double)c->layers;
		/* a group in some blocks only (DeepSeek's dense and routed
		 * MLPs): its elements on this stage's blocks (the stages
		 * keep whole blocks, stage_layers()); step_params() gives
		 * them to the blocks that hold them */
		if (pt->hi)
			return n * (double)gm_ptensor_blocks(
				pt, stage_first(c), c->layers);
		return n * *count;
	}
	if (pt->flags & GM_PT_TIED) /* Megatron keeps a copy on the last
				     * stage when p > 1 */
		return c->p > 1 && c->last ? n : 0;
	if (pt->flags & GM_PT_EMBED)
		return c->first ? n : 0;
	if (pt->flags & GM_PT_HEAD)
		return c->last ? n : 0;
	return n;
}

/* Adafactor (transformers' Adafactor, beta1=None): a factored second
 * moment, rows + cols elements for a matrix, the full size for a
 * vector. Elements per stage rank. */
static double adafactor_elems(const struct ctx *c)
{
	double e = 0, cnt;

	for (int i = 0; i < c->pl->n; i++) {
		const struct gm_ptensor *pt = &c->pl->t[i];
		double n = stage_elems(c, pt, &cnt);

		if (!n)
			continue;
		if (pt->rows > 1 && pt->cols > 1)
			e += ((double)pt->rows / tdiv(c, pt) +
			      (double)pt->cols) * cnt;
		else
			e += n;
	}
	return e;
}

/* Layers on stage r: L/p each, the first L%p stages one more. */
static uint64_t stage_layers(uint64_t L, unsigned p, unsigned r)
{
	return L / p + (r < L % p ? 1 : 0);
}

/* One head's width (elements): model.head_dim, else hidden_size /
 * attention_heads. */
static double head_dim(const struct gm_spec_model *m)
{
	if (m->head_dim)
		return (double)m->head_dim;
	return (double)m->hidden_size / (double)m->attention_heads;
}

/* q_proj's output width (elements): heads x head_dim, which is
 * hidden_size unless model.head_dim decouples them (Qwen3Attention). */
static double q_width(const struct gm_spec_model *m)
{
	if (m->head_dim)
		return (double)m->head_dim * (double)m->attention_heads;
	return (double)m->hidden_size;
}

static void layer_dims(const struct ctx *c, struct gm_act_dims *d,
		       double s, double b)
{
	const struct gm_spec_model *m = &c->spec->model;
	double hd = head_dim(m);

	d->h = (double)m->hidden_size;
	d->q = q_width(m);
	d->kv = hd * (double)m->kv_heads;
	d->f = (double)m->ffn_hidden_size;
	d->fe = (double)m->moe_ffn_hidden_size;
	d->a = (double)m->attention_heads;
	d->s = s;
	d->b = b;
	d->t = c->t;
	d->sp = c->spec->parallelism.sequence_parallel;
}

/* The share of blocks whose MLP is routed (all but model.dense_layers). */
static double moe_frac(const struct gm_spec_model *m)
{
	if (!m->layers || m->dense_layers >= m->layers)
		return 0;
	return (double)(m->layers - m->dense_layers) / (double)m->layers;
}

static void layer_list(const struct ctx *c, struct gm_act_layer *l,
		       bool training)
{
	struct gm_act_style st = {
		.fam = c->fam,
		.attn = c->spec->training.attention,
		.autocast = c->full.autocast,
		/* the family's Hugging Face default dropout */
		.dropout = training && c->fam->dropout,
		.compute = c->full.compute,
		.residual = c->full.residual,
		.experts = (double)c->spec->model.experts,
		.topk = (double)c->spec->model.experts_per_token,
		.moe_frac = moe_frac(&c->spec->model),
		.model = &c->spec->model,
	};

	if (!training)
		st.attn = GM_ATTN_SDPA;
	if (c->o->paper)
		gm_act_layer_paper(l);
	else
		gm_act_layer_hf(l, &st);
}

/* Add a tensor-group list's per-tensor blocks (weights-like). */
static void add_param_blocks(const struct ctx *c, struct gm_blocks *bs,
			     double bytes_per, double copies, bool churn,
			     bool matmul_only)
{
	for (int i = 0; i < c->pl->n; i++) {
		const struct gm_ptensor *pt = &c->pl->t[i];
		double cnt, n = stage_elems(c, pt, &cnt);

		if (!n || (matmul_only && !(pt->flags & GM_PT_MATMUL)))
			continue;
		gm_blocks_add(bs, n / cnt * bytes_per, cnt * copies, churn);
	}
}

static double matmul_elems(const struct ctx *c)
{
	double e = 0, cnt;

	for (int i = 0; i < c->pl->n; i++)
		if (c->pl->t[i].flags & GM_PT_MATMUL) {
			double n = stage_elems(c, &c->pl->t[i], &cnt);
			/* a tied lm_head casts the embedding weight */
			if (c->pl->t[i].flags & GM_PT_TIED && c->last)
				n = (double)c->pl->t[i].rows *
				    c->pl->t[i].cols / c->tv;
			e += n;
		}
	return e;
}

/* Whether the stage is PyTorch's ZeRO-2: FSDP2 fully_shard with
 * reshard_after_forward=False (recipe/pytorch.c). */
static bool pytorch_keep(const struct ctx *c)
{
	return c->spec->training.framework == GM_FW_PYTORCH &&
	       c->o->recipe == GM_RECIPE_TORCH &&
	       c->spec->parallelism.zero_stage == 2 && c->d > 1;
}

/*
 * Whether FSDP runs under MixedPrecisionPolicy: zero_stage 2 or 3 with a
 * *-mixed precision under framework pytorch and
 * fsdp_mixed_precision param-dtype (torch/distributed/fsdp/
 * _fully_shard/_fsdp_api.py, MixedPrecisionPolicy), on more than one
 * data-parallel rank (on one, PyTorch's recipe plans the model unwrapped:
 * recipe/pytorch.c).
 */
static bool fsdp_param_dtype(const struct gm_spec *sp)
{
	enum gm_precision p = sp->training.precision;

	return sp->task == GM_TASK_TRAIN && sp->parallelism.zero_stage >= 2 &&
	       gm_spec_data_parallel(sp) > 1 &&
	       sp->training.framework == GM_FW_PYTORCH &&
	       (p == GM_PREC_BF16_MIXED || p == GM_PREC_FP16_MIXED) &&
	       sp->parallelism.fsdp_mixed_precision == GM_FSDP_MP_PARAM_DTYPE;
}

/* Whether the run trains a PEFT adapter over a frozen base. */
static bool adapter_on(const struct ctx *c)
{
	return c->spec->task == GM_TASK_TRAIN &&
	       c->spec->training.adapter != GM_ADAPTER_NONE;
}

/* Largest FSDP unit (one block, or the root: embeddings + head). */
static double largest_unit(const struct ctx *c)
{
	double root = (double)(c->pl->embed + c->pl->head);
	double blk = (double)c->pl->per_layer;

	root /= c->tv;
	blk /= c->t;
	return root > blk ? root : blk;
}

/* What the recipe table needs of the stage in c (terms T). */
static void recipe_in(const struct ctx *c, const struct gm_terms *T,
		      struct gm_recipe_in *in)
{
	const struct gm_spec *sp = c->spec;

	memset(in, 0, sizeof(*in));
	in->params = (double)T->parameters;
	in->trainable = in->params;
	in->matmul_params = matmul_elems(c);
	in->largest_layer = largest_unit(c);
	in->precision = sp->training.precision;
	/* the build does not depend on the optimizer; Adafactor's states
	 * are per tensor shape (above) */
	in->optimizer = sp->training.optimizer == GM_OPT_ADAFACTOR
			       ? GM_OPT_SGD : sp->training.optimizer;
	in->dp = (uint64_t)c->d;
	in->zero = sp->parallelism.zero_stage;
	in->built_whole = sp->parallelism.built_whole;
	for (int i = 0; in->built_whole && i < c->pl->n; i++) {
		double cnt;
		in->built_params += stage_elems(c, &c->pl->t[i], &cnt) *
				    tdiv(c, &c->pl->t[i]);
	}
	in->fsdp_mp = sp->parallelism.fsdp_mixed_precision;
	in->distributed_optimizer = sp->parallelism.distributed_optimizer;
	in->offload_optimizer = sp->parallelism.offload_optimizer;
	in->offload_parameters = sp->parallelism.offload_parameters;
	in->ds = sp->deepspeed.loaded ? &sp->deepspeed : NULL;
}

/*
 * The recipe's name, host bytes and build peak (planner/recipe/) for the
 * stage in c whose terms are T. Inference: the weights loaded.
 */
static void recipe_row(const struct ctx *c, const struct gm_terms *T,
		       struct gm_plan *out)
{
	const struct gm_spec *sp = c->spec;
	struct gm_recipe_in in;
	struct gm_recipe_states rs;
	struct gm_diag diag;

	out->run.wrap = GM_WRAP_INFERENCE;
	if (sp->task != GM_TASK_TRAIN) {
		snprintf(out->recipe, sizeof(out->recipe), "pytorch-inference-%s",
			 gm_precision_name(sp->inference.precision));
		out->init_peak = T->weights;
		out->host = 0;
		return;
	}
	recipe_in(c, T, &in);
	if (adapter_on(c)) {
		struct gm_adapter_in ai = {
			.adapter = sp->training.adapter,
			.precision = sp->training.precision,
			.optimizer = sp->training.optimizer,
			.base_params = in.params,
			.matmul_params = in.matmul_params,
			.adapter_params = gm_adapter_layer_params(
				c->pl, &sp->training) * (double)c->layers,
			.kbit_prepared = true};
		for (int i = 0; i < c->pl->n; i++) {
			const struct gm_ptensor *pt = &c->pl->t[i];
			double n = (double)pt->rows * (double)pt->cols;
			if (!gm_adapter_quantized(&sp->training, pt))
				continue;
			ai.quantized += n * (double)c->layers;
			ai.quantized_bytes += gm_nf4_bytes(pt->rows *
							   pt->cols) *
					      (double)c->layers;
			if (n > ai.largest_linear)
				ai.largest_linear = n;
		}
		if (!gm_recipe_adapter(&ai, &rs, &diag)) {
			snprintf(out->recipe, sizeof(out->recipe), "%s",
				 rs.name);
			out->run.wrap = rs.wrap;
			out->init_peak = rs.init_peak;
			out->host = rs.host;
			return;
		}
	}
	if (gm_recipe_states(sp->training.framework, &in, &rs, &diag)) {
		snprintf(out->recipe, sizeof(out->recipe), "%s",
			 gm_framework_name(sp->training.framework));
		out->run.wrap = sp->training.framework == GM_FW_DEEPSPEED ?
				GM_WRAP_DEEPSPEED :
				sp->training.framework == GM_FW_MEGATRON ?
				GM_WRAP_MEGATRON : in.dp > 1 ? GM_WRAP_DDP :
				GM_WRAP_SINGLE;
		out->init_peak = T->weights;
		return;
	}
	out->run.wrap = rs.wrap;
	snprintf(out->recipe, sizeof(out->recipe), "%s", rs.name);
	out->init_peak = rs.init_peak;
	out->host = rs.host;
}

/* What the loop keeps, where it is not the default, appended to the
 * recipe's name: "-keep-outputs" or "-lightning" (training.loop, the
 * PyTorch loop's), "-kv-cache" (past_key_values built in training,
 * planner/loop.c; DeepSpeed's engine too). */
static void recipe_loop(const struct gm_spec *sp, char *buf, size_t len)
{
	size_t n = strlen(buf);

	if (sp->task != GM_TASK_TRAIN)
		return;
	if (sp->training.framework == GM_FW_PYTORCH &&
	    sp->training.loop != GM_LOOP_TRAINER && n < len)
		n += (size_t)snprintf(buf + n, len - n, "-%s",
				      gm_loop_name(sp->training.loop));
	if (gm_loop_kv_cache(sp) && n < len)
		snprintf(buf + n, len - n, "-kv-cache");
}

/* Logits and loss at the backward peak, bytes per token on one rank
 * (vocab-parallel /t): the family's loss (loss.h) per logit. */
static double logits_per_token(const struct ctx *c)
{
	const struct gm_spec_model *m = &c->spec->model;

	if (m->head == GM_HEAD_CLASSIFICATION || !m->vocab_size)
		return 0;
	return (double)m->vocab_size *
	       c->fam->loss->per_logit(c->full.compute, c->full.autocast) /
	       c->tv;
}

/* The logits and loss tensors in the order PyTorch allocates and frees
 * them (step.h's loss program: the family's loss), over tok tokens. */
static void loss_program(const struct ctx *c, struct gm_step *st,
			 double tok)
{
	const struct gm_spec_model *m = &c->spec->model;
	double n = tok * (double)m->vocab_size / c->tv;

	st->n_loss = 0;
	if (m->head == GM_HEAD_CLASSIFICATION || !m->vocab_size || !c->last)
		return;
	c->fam->loss->program(st, n, c->full.compute, c->full.autocast);
}

/*
 * The block's allocation program (block.h) from the spec's shapes, per
 * tensor-parallel rank; with head, the final norm's instead. Returns 0,
 * or GM_ERANGE when it does not fit, GM_EINVAL when the model has no
 * final norm (the aggregates are used then).
 */
static int block_program(const struct ctx *c, struct gm_step_block *blk,
			 double s, double b, bool head, bool in_no_grad,
			 bool moe_layer)
{
	const struct gm_spec *sp = c->spec;
	const struct gm_spec_model *m = &sp->model;
	double hd = head_dim(m);
	enum gm_ckpt ck = sp->training.activation_checkpointing;
	struct gm_step_shape sh = {
		.fam = c->fam,
		.eager = sp->training.attention == GM_ATTN_EAGER,
		.autocast = c->full.autocast,
		/* the family's Hugging Face default dropout (the
		 * measurement harness keeps it) */
		.dropout = c->fam->dropout,
		.ckpt = ck == GM_CKPT_FULL ? GM_STEP_CKPT_FULL :
			ck == GM_CKPT_SELECTIVE ? GM_STEP_CKPT_SELECTIVE :
			GM_STEP_CKPT_NONE,
		.tok = s * b, .seq = s,
		.hidden = (double)m->hidden_size,
		.q = q_width(m) / c->t,
		.kv = hd * (double)m->kv_heads / c->t,
		.ffn = (double)m->ffn_hidden_size / c->t,
		.heads = (double)m->attention_heads / c->t,
		.head_dim = hd,
		.c = c->full.compute, .r = c->full.residual,
		.bf16 = sp->training.precision == GM_PREC_BF16_MIXED ||
			sp->training.precision == GM_PREC_BF16_TRUE,
		.experts = (double)m->experts,
		.topk = (double)m->experts_per_token,
		.ffn_expert = (double)m->moe_ffn_hidden_size / c->t,
		.ffn_shared = (double)m->shared_experts *
			      (double)m->moe_ffn_hidden_size / c->t,
		.moe_layer = moe_layer,
		.q_lora = (double)m->q_lora_rank,
		.kv_lora = (double)m->kv_lora_rank,
		.rope_dim = (double)m->qk_rope_head_dim,
		.nope_dim = (double)m->qk_nope_head_dim,
		.v_dim = (double)m->v_head_dim,
		.qkv_bias = m->qkv_bias,
		.kv_cache = gm_loop_kv_cache(sp),
		.adapter = &sp->training,
		.in_no_grad = in_no_grad,
		/* QLoRA: prepare_model_for_kbit_training enables
		 * checkpointing with gradient_checkpointing_kwargs {}, so
		 * torch.utils.checkpoint's reentrant default (the H200
		 * trace: CheckpointFunction.backward re-runs each block) */
		.reentrant = sp->training.adapter == GM_ADAPTER_QLORA &&
			     ck == GM_CKPT_FULL,
		.sms = c->gpu->multiprocessors,
		.sm_threads = c->gpu->threads_per_sm};

	return head ? gm_block_head_build(&sh, blk) : gm_block_build(&sh, blk);
}

/* Gradient accumulation: micro-batches emitted per step in the replay
 * (step.h): the in-flight ones, then two more that repeat the steady
 * state. */
#define STEP_MICRO_EXTRA 2

/*
 * The parameter tensors of the stage for the replay (step.h), sized as
 * the terms above: weights, gradients, autocast copies (cache_b bytes per
 * matmul element, 0 without autocast), optimizer states and temporaries
 * (tmp_b bytes per element; Adafactor: per tensor, 3 x fp32).
 */
static void step_params(const struct ctx *c, struct gm_step *st,
			double cache_b, double tmp_b)
{
	const struct gm_spec *sp = c->spec;
	unsigned zero = sp->task == GM_TASK_TRAIN ?
			sp->parallelism.zero_stage : 0;
	bool ada = sp->task == GM_TASK_TRAIN &&
		   sp->training.optimizer == GM_OPT_ADAFACTOR;
	int tied = -1;
	int k = (int)lround(c->full.optimizer / 4);

	uint64_t first = stage_first(c), dense = dense_blocks(c);
	bool mixed = dense > 0 && dense < c->layers;

	k = k < 1 ? 1 : k > GM_STEP_STATES ? GM_STEP_STATES : k;
	for (int i = 0; i < c->pl->n; i++)
		if (c->pl->t[i].flags & GM_PT_TIED)
			tied = i;
	st->n_param = 0;
	st->span_split = mixed ? dense : 0;
	for (int i = 0; i < c->pl->n; i++) {
		const struct gm_ptensor *pt = &c->pl->t[i];
		struct gm_step_param *q = &st->p[st->n_param];
		double cnt, n = stage_elems(c, pt, &cnt), per = n / cnt;
		double whole = (double)pt->rows * (double)pt->cols /
			       tdiv(c, pt);
		bool tied_head = (pt->flags & GM_PT_TIED) && c->last;
		enum gm_step_span span = GM_STEP_SPAN_ALL;

		if (!n && !tied_head)
			continue;
		/* a group in the dense blocks only, or in the routed ones
		 * only, of a stage that holds both: one block's tensor,
		 * held by those blocks alone */
		if ((pt->flags & GM_PT_LAYER) && pt->hi && mixed) {
			uint64_t lo = gm_ptensor_blocks(pt, first, dense);
			uint64_t hi = gm_ptensor_blocks(pt, first + dense,
							c->layers - dense);
			if (lo == dense && !hi)
				span = GM_STEP_SPAN_LOW;
			else if (!lo && hi == c->layers - dense)
				span = GM_STEP_SPAN_HIGH;
			if (span != GM_STEP_SPAN_ALL)
				per = whole;
		}
		memset(q, 0, sizeof(*q));
		q->span = span;
		q->where = pt->flags & GM_PT_LAYER ? GM_STEP_LAYER :
			   pt->flags & GM_PT_EMBED ? GM_STEP_EMBED :
			   GM_STEP_HEAD;
		q->weight = per * c->sb.weights;
		if (sp->task == GM_TASK_TRAIN &&
		    gm_adapter_quantized(&sp->training, pt))
			q->weight = gm_nf4_bytes((uint64_t)per);
		q->grad = per * c->sb.gradients;
		/* what a block program's GM_BOP_PGRAD matches (step.h); a
		 * group in some of the stage's blocks only that no span
		 * names is spread over them here, so it gets its gradient
		 * after the block */
		if ((pt->flags & GM_PT_LAYER) &&
		    (!pt->hi || span != GM_STEP_SPAN_ALL ||
		     fabs(n - whole * cnt) < 0.5))
			q->elems = whole;
		/* parallelism.built_whole: the model built whole on each
		 * rank, then sharded by FSDP2 and tensor parallel's
		 * parallelize_module (as tools/measure/measure_multi.py
		 * does) */
		if (sp->task == GM_TASK_TRAIN &&
		    sp->parallelism.built_whole) {
			double f = (zero >= 3 || pytorch_keep(c) ? c->d : 1) *
				   tdiv(c, pt);
			q->built = f > 1 ? q->weight * f : 0;
		}
		/* the head's matmul gradient appears at the loss; a tied
		 * lm_head's is the embedding's, which then has none of its
		 * own on this stage */
		q->grad_at_loss = (pt->flags & GM_PT_HEAD) &&
				  (pt->flags & GM_PT_MATMUL);
		if (q->grad_at_loss && !n)
			q->grad = whole * c->sb.gradients;
		if (tied >= 0 && (pt->flags & GM_PT_EMBED) && c->last &&
		    c->first && pt->rows == c->pl->t[tied].rows &&
		    pt->cols == c->pl->t[tied].cols &&
		    (pt->flags & GM_PT_TP))
			q->grad_shared = true;
		if (pt->flags & GM_PT_MATMUL)
			q->cache = (tied_head ? whole : per) * cache_b;
		if (pt->flags & GM_PT_BIAS)
			q->bcache = per * cache_b;
		if (sp->task == GM_TASK_TRAIN && ada && n) {
			double b = c->full.weights / (zero >= 1 ? c->d : 1);
			if (pt->rows > 1 && pt->cols > 1) {
				q->state[0] = (double)pt->rows /
					      tdiv(c, pt) * b;
				q->state[1] = (double)pt->cols * b;
				q->n_state = 2;
			} else {
				q->state[0] = per * b;
				q->n_state = 1;
			}
			q->opt_tmp = per * 4;
		} else if (sp->task == GM_TASK_TRAIN && n) {
			if (c->sb.optimizer > 0) {
				q->n_state = k;
				for (int j = 0; j < k; j++)
					q->state[j] = per * c->sb.optimizer /
						      k;
			}
			q->opt_tmp = per * tmp_b;
		}
		st->n_param++;
	}
}

/* The data-parallel buffers of the stage as the model sizes them (comm
 * bytes in all): DDP's buckets of ddp_bucket_bytes, ZeRO-2's one unit of
 * gradients, ZeRO-3's two gathered units and one reduce-scatter. */
static void step_comm(const struct ctx *c, struct gm_step *st, double comm)
{
	unsigned zero = c->spec->parallelism.zero_stage;
	double bucket = (double)c->o->ddp_bucket_bytes, u;

	st->n_comm = 0;
	if (!(comm > 0))
		return;
	if (zero <= 1 && c->spec->task == GM_TASK_TRAIN) {
		/* DDP (ZeRO-1 = DDP + ZeroRedundancyOptimizer): its buffers
		 * from the parameter list (step.c) */
		st->ddp = true;
		st->ddp_bcast_cap = 250.0 * GM_MiB;
		st->ddp_first_cap = 1.0 * GM_MiB;
		st->ddp_cap = bucket;
		if (zero == 1)
			st->zero1_d = (unsigned)c->d;
		return;
	}
	if ((zero == 3 || (zero == 2 && pytorch_keep(c))) &&
	    c->spec->task == GM_TASK_TRAIN) {
		/* FSDP2: its buffers from the parameter list (step.c);
		 * PyTorch's ZeRO-2 keeps each block unsharded from its
		 * forward to its post-backward */
		st->fsdp = true;
		st->fsdp_keep = zero == 2;
		st->fsdp_d = c->d;
		st->fsdp_unshard = c->unshard / c->full.weights;
		return;
	}
	if (zero <= 1 && bucket > 0) {
		double n = floor(comm / bucket);
		st->comm[0].bytes = bucket;
		st->comm[0].count = (uint64_t)n;
		st->comm[1].bytes = comm - n * bucket;
		st->comm[1].count = 1;
		st->n_comm = 2;
	} else if (zero == 3) {
		u = largest_unit(c);
		st->comm[0].bytes = u * c->unshard;
		st->comm[0].count = 2;
		st->comm[1].bytes = u * c->full.gradients;
		st->comm[1].count = 1;
		st->n_comm = 2;
	} else {
		st->comm[0].bytes = comm;
		st->comm[0].count = 1;
		st->n_comm = 1;
	}
}

/* What every emission of st shares: the stage's workspace and layers,
 * two steps (or passes), then more until the replay is steady (the
 * second one is, unless a release of the cache changed the pool). */
static void step_frame(const struct ctx *c, struct gm_step *st)
{
	st->workspace = c->ws;
	st->layers = c->layers;
	st->steps = 2;
	st->steps_max = GM_STEP_STEADY_MAX;
}

/* After a replay: the peak of allocated bytes is the blocks' (PyTorch's
 * allocated_bytes counts each block's size, a request's rounding and a
 * large block's unsplit remainder included; CUDACachingAllocator.cpp,
 * PyTorch 2.11.0), at least the peak of the requests. */
static void replay_allocated(struct gm_terms *T)
{
	T->peak_requested = T->peak_allocated;
	if (T->sim.peak_allocated > T->peak_allocated)
		T->peak_allocated = T->sim.peak_allocated;
}

/* Replay st (step.h) into T: peak_reserved from the allocator core. */
static void step_replay(const struct ctx *c, struct gm_step *st,
			struct gm_terms *T)
{
	step_frame(c, st);
	if (c->o->fits_only && T->peak_allocated > (double)c->alloc_cap) {
		/* reserved >= allocated: it cannot fit, no replay needed */
		memset(&T->sim, 0, sizeof(T->sim));
		T->sim.out_of_memory = true;
		return;
	}
	if (c->o->fits_only ?
	    gm_step_replay_fits(st, c->alloc_cap ? c->alloc_cap : 512,
				&T->sim) :
	    gm_step_replay_observed(st, c->alloc_cap ? c->alloc_cap : 512,
				    &T->sim, c->r == c->o->trace_stage ?
				    c->o->trace : NULL)) {
		/* host memory ran out: keep the analytic figure */
		memset(&T->sim, 0, sizeof(T->sim));
		return;
	}
	T->peak_reserved = T->sim.peak_reserved;
	replay_allocated(T);
}

/* A sequence's rows at their own largest (gm_step_peak row_max) into
 * T->largest: the same rows as at_peak, so no row at the peak exceeds
 * its largest. */
static void rows_largest(const struct gm_step_peak *pk, struct gm_terms *T)
{
	const double *r = pk->row_max;

	T->largest = (struct gm_parts){
		.weights = r[GM_SR_WEIGHTS], .gradients = r[GM_SR_GRADIENTS],
		.optimizer_states = r[GM_SR_OPTIMIZER],
		.activations = r[GM_SR_ACTIVATIONS], .logits = r[GM_SR_LOGITS],
		.temporary = r[GM_SR_TEMPORARY], .kv_cache = r[GM_SR_KV],
		.communication = r[GM_SR_COMM],
		.workspace = r[GM_SR_WORKSPACE]};
	T->has_largest = true;
}

/*
 * With a block program (block.h) and the simulated reserve model, the
 * step's peak of live bytes is the sequence's, as for inference:
 * peak_allocated, each phase's figure and the terms at the peak are read
 * off gm_step_peak() (the terms above stay the per-term maxima the
 * report lists). The analytic reserve model keeps the closed-form peak
 * above (the aggregated block of activations.c).
 */
static void peak_terms(const struct gm_step_peak *pk, struct gm_terms *T)
{
	const double *k = pk->kind;

	T->phase_allocated[0] = 0;
	for (int ph = GM_SP_SETUP; ph <= GM_SP_BACKWARD; ph++)
		if (pk->phase_peak[ph] > T->phase_allocated[0])
			T->phase_allocated[0] = pk->phase_peak[ph];
	T->phase_allocated[1] = pk->phase_peak[GM_SP_OPTIMIZER];
	T->peak_allocated = pk->peak;
	/* allocations before the first step's phase are the set-up's (the
	 * replay emits the model's build and wrapping first) */
	T->peak_phase = pk->phase == GM_SP_OPTIMIZER ? GM_PHASE_OPTIMIZER :
			pk->phase == GM_SP_SETUP ? GM_PHASE_SETUP :
			GM_PHASE_FWD_BWD;
	rows_largest(pk, T);
	T->at_peak = (struct gm_parts){
		.weights = k[GM_SK_WEIGHT],
		.gradients = k[GM_SK_GRAD] + k[GM_SK_REDUCE],
		.optimizer_states = k[GM_SK_STATE],
		.activations = k[GM_SK_ACT], .logits = k[GM_SK_LOGITS],
		.kv_cache = k[GM_SK_KV],
		.temporary = k[GM_SK_TRANSIENT] + k[GM_SK_CACHE] +
			     k[GM_SK_OPT_TMP] + k[GM_SK_RTMP],
		.communication = k[GM_SK_COMM] + k[GM_SK_GATHER] +
				 k[GM_SK_RCOMM],
		.workspace = k[GM_SK_WORKSPACE]};
}

static void sequence_peak(const struct ctx *c, struct gm_step *st,
			  struct gm_terms *T)
{
	struct gm_step_peak pk;

	step_frame(c, st);
	if (gm_step_peak(st, GM_STEP_ALL | GM_STEP_NOGROUP, &pk))
		return; /* host memory ran out: the analytic figures stay */
	peak_terms(&pk, T);
}

/* sequence_peak() then step_replay() (not fits_only) from one emission
 * of st (gm_step_replay_peak): the same figures. */
static void sequence_peak_replay(const struct ctx *c, struct gm_step *st,
				 struct gm_terms *T)
{
	struct gm_step_peak pk;
	int prc;

	step_frame(c, st);
	if (gm_step_replay_peak(st, c->alloc_cap ? c->alloc_cap : 512,
				&T->sim, c->r == c->o->trace_stage ?
				c->o->trace : NULL, &pk, &prc))
		/* host memory ran out: keep the analytic figure */
		memset(&T->sim, 0, sizeof(T->sim));
	else
		T->peak_reserved = T->sim.peak_reserved;
	if (!prc)
		peak_terms(&pk, T);
	replay_allocated(T);
}

/* The terms of one training stage, as train_stage() computes them in
 * order, each function one memory term (bytes on the stage's most loaded
 * rank, per micro-batch where it says so). */
struct train {
	double s, b, tok;           /* sequence, micro-batch, their tokens */
	double P;                   /* parameters on the stage and rank */
	struct gm_act_layer l;      /* one block's saved tensors */
	struct gm_act_dims d;
	double layer_saved;         /* what one block keeps for backward */
	double head_saved;          /* the final norm's and lm_head's inputs */
	double emb;                 /* the embedding's saved tensors */
	double act;                 /* every saved activation, x in flight */
	double trans;               /* one block's transient */
	double lg, lg_last, held;   /* logits and loss (loss.h) */
	double cache;               /* autocast's weight copies */
	double comm;                /* data-parallel buffers */
	double ws;                  /* cuBLAS workspaces */
	double opt_tmp;             /* the optimizer step's temporaries */
	struct gm_optstep_walk opt_loop; /* for-loop: its walk (optstep.h) */
	double grads_fb;            /* gradients live in the backward */
	double tail, tail_grads, tail_tmp; /* the end of the backward */
	struct gm_blocks fb, op;    /* the analytic reserve's blocks */
};

/* Model states (states.c); Adafactor from its factored shapes. Also the
 * stage's parameters, layers and micro-batches in flight. */
static void train_states(const struct ctx *c, struct gm_terms *T,
			 struct train *x)
{
	const struct gm_spec *sp = c->spec;
	unsigned zero = sp->parallelism.zero_stage;
	double cnt;

	for (int i = 0; i < c->pl->n; i++)
		x->P += stage_elems(c, &c->pl->t[i], &cnt);
	T->parameters = (uint64_t)llround(x->P);
	T->layers = c->layers;
	/* 1F1B: stage r holds p - r micro-batches (Narayanan et al. 2021;
	 * Korthikanti 4.2), at most the step's micro-batch count. */
	T->in_flight = c->p - c->r;
	if (T->in_flight > c->ga)
		T->in_flight = c->ga;
	if (!T->in_flight)
		T->in_flight = 1;

	T->weights = x->P * c->sb.weights;
	T->gradients = x->P * c->sb.gradients;
	if (sp->training.optimizer == GM_OPT_ADAFACTOR)
		T->optimizer_states = adafactor_elems(c) * c->full.weights /
				      (zero >= 1 ? c->d : 1);
	else
		T->optimizer_states = x->P * c->sb.optimizer;
}

/* Activations per micro-batch (activations.c), x in flight. */
static void train_activations(const struct ctx *c, struct gm_terms *T,
			      struct train *x)
{
	const struct gm_spec *sp = c->spec;

	layer_list(c, &x->l, true);
	layer_dims(c, &x->d, x->s, x->b);
	x->layer_saved = gm_act_layer_saved(&x->l, &x->d, sp->training.
					    activation_checkpointing);
	if (!c->fam->shaped)
		/* a model without a layout (custom): the measured figure,
		 * bytes saved per token of the micro-batch over the whole
		 * model (models/README.md), spread evenly over its layers */
		x->layer_saved = sp->model.activation_bytes_per_token *
				 x->tok / (double)c->pl->layers;
	if (c->last && logits_per_token(c) > 0)
		/* final norm + lm_head input (cast): R h + C h, SEQ */
		x->head_saved = x->tok * x->d.h * (c->full.residual +
						   c->full.compute) /
				(x->d.sp ? c->t : 1);
	if (c->first)
		/* int64 input ids and labels (8 B each per token), plus
		 * what the family's embedding saves per element (its
		 * dropout mask, an embedding LayerNorm's input). */
		x->emb = 16 * x->tok + (c->fam->embed_mask +
					(c->fam->embed_norm ?
					 c->full.residual : 0)) *
					x->tok * x->d.h;
	x->act = (x->layer_saved * (double)c->layers + x->emb) *
		 (double)T->in_flight + x->head_saved;
	T->activations = x->act;
}

/* Transient of one block; full checkpointing recomputes one block's
 * complete saved set during backward. */
static void train_transient(const struct ctx *c, struct train *x)
{
	enum gm_ckpt ck = c->spec->training.activation_checkpointing;

	x->trans = gm_act_layer_transient(&x->l, &x->d);
	if (ck == GM_CKPT_FULL)
		x->trans += gm_act_layer_saved(&x->l, &x->d, GM_CKPT_NONE);
	else if (ck == GM_CKPT_SELECTIVE)
		x->trans += gm_act_layer_saved(&x->l, &x->d, GM_CKPT_NONE) -
			    gm_act_layer_saved(&x->l, &x->d,
					       GM_CKPT_SELECTIVE);
}

/* Logits and loss (the family's loss): at log_softmax's backward, and
 * the loss tensor still live when the head's gradients appear. */
static void train_logits(const struct ctx *c, struct gm_terms *T,
			 struct train *x)
{
	x->lg = c->last ? x->tok * logits_per_token(c) : 0;
	x->lg_last = x->lg > 0 &&
		     c->fam->loss->live_at_head(c->full.compute) ?
		     x->tok * (double)c->spec->model.vocab_size / c->tv *
		     c->full.compute : 0;
	x->held = 0;
	T->logits = x->lg;
}

/* The autocast weight cache: a 16-bit copy of every matmul weight, saved
 * by the linears until their backward (torch.autocast cache_enabled).
 * Under FSDP2 too: autocast casts the unsharded parameters, which are
 * leaves, so each cast is cached until the backward (the 2x H200 traces:
 * every block's 16-bit casts, full size, freed in backward). */
static void train_cache(const struct ctx *c, struct train *x)
{
	x->cache = c->full.autocast ? matmul_elems(c) * c->full.compute : 0;
}

/* Data-parallel buffers: DDP keeps bucket copies of all gradients
 * (gradient_as_bucket_view=False, the default); ZeRO-2 reduces one
 * unit's gradients at a time; ZeRO-3 (FSDP) gathers the current and the
 * prefetched unit and reduce-scatters one (fsdp.rst). Then the cuBLAS
 * workspaces: one for the forward's thread, one for the autograd
 * engine's device thread (step.c). */
static void train_comm(const struct ctx *c, struct gm_terms *T,
		       struct train *x)
{
	unsigned zero = c->spec->parallelism.zero_stage;

	if (c->d > 1 && zero <= 1)
		x->comm = x->P * c->full.gradients;
	else if (pytorch_keep(c))
		/* every unit unsharded at the end of the forward, one
		 * unit's gradients reduce-scattered */
		x->comm = x->P * c->unshard +
			  largest_unit(c) * c->full.gradients;
	else if (c->d > 1 && zero == 2)
		x->comm = largest_unit(c) * c->full.gradients;
	else if (c->d > 1)
		x->comm = largest_unit(c) * (2 * c->unshard +
					     c->full.gradients);
	T->communication = x->comm;
	x->ws = 2 * c->ws;
	T->workspace = x->ws;
}

/* Bytes of layout tensor pt's for-loop temporary on this rank, in block
 * blk (UINT64_MAX: pt as a tensor of the model's own): its elements
 * there (tensor parallel /t; FSDP2 /d, each parameter a DTensor shard;
 * ZeRO-1's optimizer steps whole parameters) x tb. 0: none there. */
static double loop_tensor(const struct ctx *c, const struct gm_ptensor *pt,
			  uint64_t blk, double tb)
{
	unsigned zero = c->spec->parallelism.zero_stage;
	double cnt, n;

	if (pt->flags & GM_PT_LAYER) {
		if (blk == UINT64_MAX || !gm_ptensor_blocks(pt, blk, 1))
			return 0;
		n = (double)pt->rows * (double)pt->cols / tdiv(c, pt);
	} else {
		if (blk != UINT64_MAX)
			return 0;
		n = stage_elems(c, pt, &cnt);
	}
	return n * tb / (zero >= 2 ? c->d : 1);
}

/* The for-loop's walk (optstep.h) over the rank's tensors in
 * named_parameters() order: the model's own before the first block
 * tensor (the embeddings), each block's, the rest (final norm, head). */
static struct gm_optstep_walk for_loop_walk(const struct ctx *c, double tb)
{
	struct gm_optstep_walk w = {0, 0, 0};
	int n = c->pl->n, first = n;
	uint64_t b0 = stage_first(c);

	for (int i = 0; i < n; i++)
		if (c->pl->t[i].flags & GM_PT_LAYER) {
			first = i;
			break;
		}
	for (int i = 0; i < first; i++)
		gm_optstep_walk_add(&w, loop_tensor(c, &c->pl->t[i],
						    UINT64_MAX, tb));
	for (uint64_t l = 0; l < c->layers; l++)
		for (int i = first; i < n; i++)
			gm_optstep_walk_add(&w, loop_tensor(c, &c->pl->t[i],
							    b0 + l, tb));
	for (int i = first; i < n; i++)
		gm_optstep_walk_add(&w, loop_tensor(c, &c->pl->t[i],
						    UINT64_MAX, tb));
	return w;
}

/* Optimizer temporaries of torch.optim's Adam(W) by implementation
 * (optstep.h): foreach builds sqrt(exp_avg_sq) as a new tensor list, one
 * state-sized copy; the for-loop two of one tensor while the last one's
 * quotient lives; fused none. SGD and 8-bit Adam work in place;
 * Adafactor's loop holds about 3 fp32 copies of the largest tensor
 * (update, grad^2, approximated moment). */
static void train_opt_tmp(const struct ctx *c, struct train *x)
{
	const struct gm_spec *sp = c->spec;
	unsigned zero = sp->parallelism.zero_stage;
	enum gm_opt_impl im = sp->training.optimizer_implementation;
	double cnt;

	if ((sp->training.optimizer == GM_OPT_ADAM ||
	     sp->training.optimizer == GM_OPT_ADAMW) &&
	    im == GM_OPT_IMPL_FOR_LOOP) {
		x->opt_loop = for_loop_walk(c, c->full.weights);
		x->opt_tmp = x->opt_loop.peak;
	} else if (sp->training.optimizer == GM_OPT_ADAM ||
		   sp->training.optimizer == GM_OPT_ADAMW)
		x->opt_tmp = im == GM_OPT_IMPL_FOREACH ?
			     x->P * c->full.weights / (zero >= 1 ? c->d : 1) :
			     gm_optstep_rule(im)->peak(NULL, 0);
	else if (sp->training.optimizer == GM_OPT_ADAFACTOR) {
		double big = 0;
		for (int i = 0; i < c->pl->n; i++) {
			double e = stage_elems(c, &c->pl->t[i], &cnt) / cnt;
			big = e > big ? e : big;
		}
		x->opt_tmp = 3 * big * 4;
	} else
		x->opt_tmp = 0;
}

/* The optimizer's bytes per element of an fp32 adapter tensor (states,
 * foreach temporary) as for a model trained in fp32 (states.c). */
static struct gm_state_bytes adapter_bytes(const struct ctx *c)
{
	return gm_state_bytes(GM_RECIPE_TORCH, GM_PREC_FP32,
			      c->spec->training.optimizer);
}

/* A PEFT adapter (step_adapter.h): the model states add the adapters'
 * fp32 weights, gradients and optimizer states to the frozen base's
 * weights; the optimizer's temporaries and autocast's cached casts are
 * the adapters' alone. */
static void train_adapter(const struct ctx *c, struct gm_terms *T,
			  struct train *x)
{
	struct gm_state_bytes ab = adapter_bytes(c);
	double A;

	if (!adapter_on(c))
		return;
	A = gm_adapter_layer_params(c->pl, &c->spec->training) *
	    (double)c->layers;
	T->weights += A * ab.weights +
		      gm_adapter_quantized_delta(c->pl, &c->spec->training,
						 c->sb.weights) *
		      (double)c->layers;
	T->gradients = A * ab.gradients;
	T->optimizer_states = A * ab.optimizer;
	if (x->opt_tmp > 0 && c->spec->training.optimizer_implementation ==
	    GM_OPT_IMPL_FOR_LOOP) {
		x->opt_loop = gm_adapter_for_loop_walk(c->pl,
						       &c->spec->training,
						       c->layers, ab.weights);
		x->opt_tmp = x->opt_loop.peak;
	} else {
		x->opt_tmp = x->opt_tmp > 0 ? A * ab.weights : 0;
	}
	x->cache = c->full.autocast ? A * c->full.compute : 0;
}

/* Gradients live during the forward and backward: all of them with
 * accumulation; without, the head's weight gradient that appears at the
 * loss (a tied lm_head's is the embedding's whole gradient). */
static void train_grads(const struct ctx *c, struct gm_terms *T,
			struct train *x)
{
	double cnt;

	x->grads_fb = c->ga > 1 ? T->gradients : 0;
	if (c->ga > 1 || !c->last)
		return;
	for (int i = 0; i < c->pl->n; i++) {
		const struct gm_ptensor *pt = &c->pl->t[i];
		double n = stage_elems(c, pt, &cnt);
		if (!(pt->flags & GM_PT_HEAD) || !(pt->flags & GM_PT_MATMUL))
			continue;
		if (!n && (pt->flags & GM_PT_TIED))
			n = (double)pt->rows * pt->cols / tdiv(c, pt);
		x->grads_fb += n * c->sb.gradients;
	}
}

/* Without accumulation, the end of backward: the first block's saved
 * tensors, autocast copies and transient are still live while every
 * later block has its gradients (and the head its own); the embeddings'
 * gradients come after. Larger than the loss peak when a block's
 * gradients outweigh its activations (small micro-batches). */
static void train_tail(const struct ctx *c, struct train *x)
{
	double lg_elems = 0, lcache = 0, cnt;

	x->tail = 0;
	if (c->ga > 1 || c->layers <= 1)
		return;
	for (int i = 0; i < c->pl->n; i++) {
		const struct gm_ptensor *pt = &c->pl->t[i];
		double n = stage_elems(c, pt, &cnt);
		if (!(pt->flags & GM_PT_LAYER))
			continue;
		lg_elems += n / cnt;
		if (pt->flags & GM_PT_MATMUL)
			lcache += n / cnt;
	}
	lcache = c->full.autocast ? lcache * c->full.compute : 0;
	x->tail_grads = x->grads_fb + (double)(c->layers - 1) * lg_elems *
			c->sb.gradients;
	x->tail = x->emb + x->layer_saved + lcache + x->trans + x->tail_grads;
	x->tail_tmp = lcache + x->trans;
}

/* Blocks of each phase for the analytic reserve (reserve.h). */
static void train_blocks(const struct ctx *c, struct gm_terms *T,
			 struct train *x)
{
	enum gm_ckpt ck = c->spec->training.activation_checkpointing;
	struct gm_blocks *both[2] = {&x->fb, &x->op};

	for (int k = 0; k < 2; k++) {
		struct gm_blocks *bs = both[k];
		add_param_blocks(c, bs, c->sb.weights, 1, false, false);
		if (T->optimizer_states > 0)
			gm_blocks_add(bs, T->optimizer_states /
				      (double)(c->layers + 1),
				      (double)c->layers + 1, false);
		if (x->comm > 0)
			gm_blocks_add(bs, (double)c->o->ddp_bucket_bytes,
				      ceil(x->comm / c->o->ddp_bucket_bytes),
				      false);
		gm_blocks_add(bs, c->ws, 2, false);
	}
	if (x->grads_fb > 0)
		gm_blocks_add(&x->fb, x->grads_fb / (double)(c->layers + 1),
			      (double)c->layers + 1, c->ga <= 1);
	if (ck == GM_CKPT_FULL)
		gm_blocks_add(&x->fb, x->layer_saved,
			      (double)c->layers * T->in_flight, true);
	else
		for (int i = 0; i < x->l.n; i++)
			if (ck == GM_CKPT_NONE ||
			    !(x->l.t[i].flags & GM_AT_CORE))
				gm_blocks_add(&x->fb, gm_act_tensor_bytes(
					&x->l.t[i], &x->d), (double)c->layers *
					T->in_flight, true);
	gm_blocks_add(&x->fb, x->emb + x->head_saved, T->in_flight, true);
	if (x->cache > 0)
		add_param_blocks(c, &x->fb, c->full.compute, 1, true, true);
	if (x->lg > x->trans + x->held)
		gm_blocks_add(&x->fb, x->lg / 4, 4, true);
	else
		gm_blocks_add(&x->fb, x->trans + x->held, 1, true);
	add_param_blocks(c, &x->op, c->sb.gradients, 1, false, false);
	if (x->opt_tmp > 0 && x->opt_loop.at > 0) { /* for-loop */
		gm_blocks_add(&x->op, x->opt_loop.at, 2, true);
		gm_blocks_add(&x->op, x->opt_tmp - 2 * x->opt_loop.at, 1,
			      true);
	} else if (x->opt_tmp > 0) {
		gm_blocks_add(&x->op, x->opt_tmp / (double)(c->layers + 1),
			      (double)c->layers + 1, true);
	}
}

/* The closed-form peak of each phase and the terms at the larger one.
 * The loss and the last block's backward, three moments (the order of
 * the loss program): log_softmax's backward with every loss tensor (lg)
 * before the head's gradients exist; the head's gradients (grads_fb
 * without accumulation) with the one loss tensor still live then
 * (lg_last); the last block's transient with them. */
static void train_peak(const struct ctx *c, struct gm_terms *T,
		       const struct train *x)
{
	struct gm_parts mid_parts = {0};
	double fb_mid;
	double hg = c->ga <= 1 ? x->grads_fb : 0, base = x->grads_fb - hg;
	double m_a = x->lg, m_b = x->lg_last + hg;
	double m_c = x->trans + x->held + hg;
	double mid = m_a >= m_b && m_a >= m_c ? m_a : m_b >= m_c ? m_b : m_c;

	T->phase_allocated[0] = x->act + base + x->cache + mid;
	fb_mid = T->phase_allocated[0];
	if (mid == m_a) {
		mid_parts.gradients = base;
		mid_parts.logits = x->lg;
		mid_parts.temporary = x->cache;
	} else if (mid == m_b) {
		mid_parts.gradients = x->grads_fb;
		mid_parts.logits = x->lg_last;
		mid_parts.temporary = x->cache;
	} else {
		mid_parts.gradients = x->grads_fb;
		mid_parts.logits = x->held;
		mid_parts.temporary = x->cache + x->trans;
	}
	if (x->tail > T->phase_allocated[0])
		T->phase_allocated[0] = x->tail;
	T->phase_allocated[0] += T->weights + T->optimizer_states + x->comm +
				 x->ws;
	T->phase_allocated[1] = T->weights + T->optimizer_states + x->comm +
				x->ws + T->gradients + x->opt_tmp;
	T->temporary = x->cache + (x->trans > x->opt_tmp ? x->trans :
				   x->opt_tmp);
	T->at_peak = (struct gm_parts){
		.weights = T->weights, .optimizer_states = T->optimizer_states,
		.communication = x->comm, .workspace = x->ws};
	if (T->phase_allocated[0] >= T->phase_allocated[1]) {
		T->peak_phase = GM_PHASE_FWD_BWD;
		T->peak_allocated = T->phase_allocated[0];
		if (x->tail > fb_mid) {
			T->at_peak.gradients = x->tail_grads;
			T->at_peak.activations = x->emb + x->layer_saved;
			T->at_peak.temporary = x->tail_tmp;
		} else {
			T->at_peak.gradients = mid_parts.gradients;
			T->at_peak.activations = x->act;
			T->at_peak.logits = mid_parts.logits;
			T->at_peak.temporary = mid_parts.temporary;
		}
	} else {
		T->peak_phase = GM_PHASE_OPTIMIZER;
		T->peak_allocated = T->phase_allocated[1];
		T->at_peak.gradients = T->gradients;
		T->at_peak.temporary = x->opt_tmp;
	}
}

/* Whether block program p takes past_key_values' K and V (HOLD ops). */
static bool holds_cache(const struct gm_step_block *p)
{
	for (int i = 0; i < p->n; i++)
		if (p->op[i].op == GM_BOP_HOLD)
			return true;
	return false;
}

/*
 * What the training loop keeps (loop.h) on the step st of x's shapes:
 * the loop's rule and, where the forward builds past_key_values and the
 * block has no program that takes them, one block's cached K and V
 * (each tok x kv heads x head_dim per tensor-parallel rank) in the keys'
 * dtype: the rotary output's, fp32 under autocast with fp32 residual
 * (cos and sin come in the residual dtype and promote), copies under
 * autocast (the attention saves its own 16-bit casts), else the tensors
 * the attention saved.
 */
static void loop_step(const struct ctx *c, struct gm_step *st,
		      const struct train *x, bool prog)
{
	const struct gm_spec_model *m = &c->spec->model;
	double key = c->full.autocast ? fmax(c->full.compute,
					     c->full.residual) :
		     c->full.compute;

	gm_loop_apply(gm_loop_rule(c->spec->training.loop), c->spec, st);
	if (!st->kv_cache)
		return;
	st->kv_copies = c->full.autocast;
	if (!prog || !holds_cache(&st->blk))
		st->kv_block = x->tok * head_dim(m) * (double)m->kv_heads /
			       c->t * key;
}

/* Bytes of one block's cached K and V in st (the program's HOLD ids,
 * or kv_block each). */
static double cache_per_block(const struct gm_step *st)
{
	const struct gm_step_block *p = &st->blk;
	double b = 0;

	if (st->kv_block > 0)
		return 2 * st->kv_block;
	for (int i = 0; i < p->n_fwd; i++) {
		if (p->op[i].op != GM_BOP_HOLD)
			continue;
		for (int j = i; j-- > 0;)
			if (p->op[j].op == GM_BOP_ALLOC &&
			    p->op[j].id == p->op[i].id) {
				b += p->op[j].bytes;
				break;
			}
	}
	return b;
}

/* The closed-form terms of what the loop keeps: the cache at its
 * largest (every block's K and V; with keep-outputs the last forward's
 * too, until the next one returns) and the kept logits (the loss
 * program's first tensor) on top of the loss's own. */
static void loop_terms(const struct gm_step *st, struct gm_terms *T)
{
	if (st->kv_cache)
		T->kv_cache = (st->keep_outputs ? 2 : 1) * (double)T->layers *
			      cache_per_block(st);
	for (int i = 0; st->keep_outputs && i < st->n_loss; i++)
		if (st->loss[i].alloc && st->loss[i].id == 0) {
			T->logits += st->loss[i].bytes;
			break;
		}
}

/* Whether the loop keeps anything the closed-form terms do not hold. */
static bool loop_keeps(const struct gm_step *st)
{
	return st->keep_outputs || st->kv_cache || st->grads_to_next_forward;
}

/* Whether the stage trains under DeepSpeed's engine (step_ds.h). */
static bool ds_engine(const struct ctx *c)
{
	return c->spec->task == GM_TASK_TRAIN &&
	       c->spec->training.framework == GM_FW_DEEPSPEED;
}

/*
 * DeepSpeed: the engine's description for the step (step_ds.h), from
 * the run's DeepSpeed JSON (or DeepSpeedZeroConfig's defaults); the
 * parameters keep no optimizer states of their own (the engine emits
 * its partitions). Model-state rows from the recipe (deepspeed.c).
 */
static void ds_describe(const struct ctx *c, struct gm_terms *T,
			struct gm_step *st)
{
	const struct gm_spec *sp = c->spec;
	const struct gm_spec_deepspeed *ds = sp->deepspeed.loaded ?
		&sp->deepspeed : gm_ds_defaults();
	enum gm_optimizer o = sp->training.optimizer;
	struct gm_recipe_in in;
	struct gm_recipe_states rs;
	struct gm_diag diag;

	st->ds = (struct gm_step_ds){
		.on = true, .stage = sp->parallelism.zero_stage, .d = c->d,
		.b = c->full.weights, .master = c->full.master > 0,
		.states = gm_optimizer_elem_states(o),
		/* torch.optim's foreach Adam(W) as the client optimizer;
		 * the JSON's optimizer is DeepSpeed's FusedAdam or
		 * DeepSpeedCPUAdam (engine.py _configure_basic_optimizer),
		 * which step in place */
		.adam_tmp = (o == GM_OPT_ADAM || o == GM_OPT_ADAMW) &&
			       gm_spec_origin_of(sp, "training.optimizer") !=
				       GM_SPEC_DEEPSPEED,
		.bucket = (double)ds->reduce_bucket_size,
		.contiguous = ds->contiguous_gradients,
		.overlap = sp->deepspeed.loaded ? ds->overlap_comm :
			   sp->parallelism.zero_stage == 3,
		.sub_group = (double)ds->sub_group_size,
		.max_live = (double)ds->max_live_parameters,
		.prefetch = (double)ds->prefetch_bucket_size,
		.max_reuse = (double)ds->max_reuse_distance,
		.persist = (double)ds->param_persistence_threshold,
		.off_opt = sp->parallelism.offload_optimizer == GM_OFFLOAD_CPU,
		.off_param = sp->parallelism.offload_parameters ==
			     GM_OFFLOAD_CPU,
		/* parallelism.built_whole false: zero.Init (what Hugging
		 * Face's integration uses with stage 3) */
		.zero_init = sp->parallelism.zero_stage == 3 &&
			     !sp->parallelism.built_whole};
	for (int i = 0; i < st->n_param; i++) {
		st->p[i].n_state = 0;
		st->p[i].opt_tmp = 0;
	}
	st->n_comm = 0;
	recipe_in(c, T, &in);
	if (gm_recipe_deepspeed(&in, &rs, &diag))
		return;
	T->weights = rs.weights;
	T->gradients = rs.gradients;
	T->optimizer_states = rs.optimizer;
}

/* The step's allocation sequence (step.h) from the terms, its peak of
 * live bytes where it has programs, and the reserve: replayed, or the
 * analytic model's from the blocks. */
static void train_sequence(const struct ctx *c, struct gm_terms *T,
			   const struct train *x)
{
	const struct gm_spec *sp = c->spec;
	unsigned zero = sp->parallelism.zero_stage;
	enum gm_ckpt ck = sp->training.activation_checkpointing;
	bool seq, fused;
	struct gm_step st = {
		.training = true, .ga = c->ga,
		.in_flight = T->in_flight,
		.micro_max = T->in_flight + STEP_MICRO_EXTRA,
		.emb_saved = x->emb, .head_saved = x->head_saved,
		.trans = x->trans, .logits_held = x->held,
		.logits_piece = (x->lg - x->held) / 3,
		.opt_tmp_per_tensor = sp->training.optimizer ==
				      GM_OPT_ADAFACTOR,
		.opt_impl = sp->training.optimizer_implementation};
	/* sequence parallelism (Megatron's; no Hugging Face counterpart to
	 * read the op order from) keeps the aggregated block */
	uint64_t dense = dense_blocks(c);
	bool moe = c->fam->moe && dense < c->layers;
	bool prog = c->fam->shaped && !c->o->paper && !x->d.sp &&
		    !block_program(c, &st.blk, x->s, x->b, false, false, moe);

	/* a stage whose first blocks are dense (model.dense_layers) and
	 * the others routed: the dense blocks' own program */
	if (prog && moe && dense > 0) {
		if (adapter_on(c) ||
		    block_program(c, &st.blk0, x->s, x->b, false, false,
				  false))
			prog = false;
		st.blk0_layers = dense;
		if (st.blk0.n_ids > st.blk.n_ids)
			st.blk.n_ids = st.blk0.n_ids;
	}
	/* the final norm op by op where there is one */
	if (prog && x->head_saved > 0 &&
	    !block_program(c, &st.head, x->s, x->b, true, false, false))
		st.head_saved = 0;
	/* LoRA: the frozen embedding's output does not require grad, so the
	 * first block's ops on it alone record nothing (PeftModel.__init__
	 * calls enable_input_require_grads only on a model already
	 * checkpointing, peft_model.py _prepare_model_for_gradient_
	 * checkpointing; the H200 trace of lora-llama-1.1b-r16-qv: the
	 * first block's input_layernorm keeps none of its 64 MiB fp32
	 * copy) */
	if (prog && c->first && adapter_on(c) &&
	    c->spec->training.adapter == GM_ADAPTER_LORA &&
	    block_program(c, &st.blk0, x->s, x->b, false, true, moe))
		prog = false;
	/* the embedding output: how long the model's forward names it
	 * (the family's embed_out: LlamaModel and GPT2Model keep
	 * inputs_embeds until their forward returns; the H200 traces free
	 * it after the final norm; GPT-2's block input is the dropout of
	 * inputs_embeds + position_embeds) */
	if (prog && c->first && c->fam->embed_out == GM_EMBED_OUT_SUM) {
		st.emb_named = x->tok * x->d.h * c->full.residual;
		st.emb_sum = st.emb_named;
		st.emb_pos = x->s * x->d.h * c->full.residual;
	} else if (prog && c->first &&
		   c->fam->embed_out == GM_EMBED_OUT_NAMED) {
		st.emb_in_named = true;
	}

	step_params(c, &st, c->full.autocast ? c->full.compute : 0,
		    x->opt_tmp > 0 ? c->full.weights /
		    (zero >= 1 ? c->d : 1) : 0);
	if (adapter_on(c) && prog) {
		struct gm_state_bytes ab = adapter_bytes(c);
		if (gm_adapter_step_params(&st, &sp->training, ab.optimizer,
					   (int)lround(ab.optimizer / 4),
					   x->opt_tmp > 0 ? ab.weights : 0,
					   c->full.autocast ?
					   c->full.compute : 0))
			prog = false;
		st.head_unsaved = true;
	}
	if (prog)
		st.trans = 0;
	else if (ck == GM_CKPT_FULL || !c->fam->shaped)
		st.act[st.n_act++] = x->layer_saved;
	else
		for (int i = 0; i < x->l.n; i++)
			if (ck == GM_CKPT_NONE ||
			    !(x->l.t[i].flags & GM_AT_CORE))
				st.act[st.n_act++] =
					gm_act_tensor_bytes(&x->l.t[i], &x->d);
	loss_program(c, &st, x->tok);
	loop_step(c, &st, x, prog);
	loop_terms(&st, T);
	if (ds_engine(c))
		ds_describe(c, T, &st);
	else
		step_comm(c, &st, x->comm);
	/* the analytic reserve model (gm_fit()'s searches) keeps the
	 * closed-form peak: microseconds, not the sequence's milliseconds;
	 * with the replay, block programs and the distributed sequences
	 * (FSDP units, ZeRO-1 partition, TP) give the peak of live bytes */
	seq = c->o->reserve == GM_RESERVE_SIMULATED &&
	      (prog || st.fsdp || st.zero1_d || st.ds.on || c->t > 1 ||
	       loop_keeps(&st));
	/* the replay below counts the peak too where it always runs */
	fused = seq && !c->o->fits_only;
	if (fused)
		sequence_peak_replay(c, &st, T);
	else if (seq)
		sequence_peak(c, &st, T);
	/* with an adapter the saved tensors and transients are the
	 * program's (a frozen base keeps far less than activations.c's
	 * lists): each term's largest is the sequence's own */
	if (adapter_on(c) && prog && c->o->reserve == GM_RESERVE_SIMULATED) {
		struct gm_step_peak pk;
		if (!gm_step_peak(&st, (1u << GM_SK_ACT) | GM_STEP_NOGROUP,
				  &pk))
			T->activations = pk.peak;
		if (!gm_step_peak(&st, (1u << GM_SK_TRANSIENT) |
				  (1u << GM_SK_CACHE) | (1u << GM_SK_OPT_TMP) |
				  GM_STEP_NOGROUP, &pk))
			T->temporary = pk.peak;
	}
	if (c->o->reserve == GM_RESERVE_ANALYTIC) {
		double r0 = gm_reserved_from_allocated(&x->fb);
		double r1 = gm_reserved_from_allocated(&x->op);
		T->peak_reserved = r0 > r1 ? r0 : r1;
	} else if (!fused) {
		step_replay(c, &st, T);
	}
}

/*
 * Mixture of experts: the plan routes tokens evenly (each expert gets
 * tok x experts_per_token / experts); this is what a router that sends
 * every token of the micro-batch (the pass) to one expert would add.
 * transformers 5.17 runs the experts as one grouped matmul over all
 * (token, expert) rows in training and in inference alike (arch/moe.c:
 * PreTrainedModel.get_correct_experts_implementation picks grouped_mm
 * wherever it can dispatch), except generate()'s decode forwards, which
 * GenerationMixin._optimize_model_for_decode runs as batched_mm (one
 * copy of its expert's weights per row), and none of those tensors
 * depends on how the rows split between experts: 0 bytes, for either
 * task. (The eager
 * per-expert loop, where grouped_mm cannot dispatch, would gather the
 * one expert's tok rows at once.)
 */
static double moe_skew(const struct ctx *c, double tok, bool training)
{
	(void)c;
	(void)tok;
	(void)training;
	return 0;
}

/*
 * training.framework megatron: the stage's model states and sequence
 * from model_megatron.c (Megatron-Core's buffers, layers and schedule),
 * then each term's largest, the peak and the reserve read off that
 * sequence as for the other recipes.
 */
static void megatron_stage(const struct ctx *c, struct gm_terms *T)
{
	struct gm_mg_in in = {
		.spec = c->spec, .pl = c->pl, .t = c->t, .d = c->d,
		.p = c->p, .r = c->r, .layers = c->layers, .m = c->ga,
		.workspace = c->ws, .sm_major = c->gpu->sm_major};
	struct gm_mg_step mg;
	struct gm_step st = {.training = true};
	struct gm_step_peak pk;
	const unsigned kinds[] = {GM_SK_ACT, GM_SK_LOGITS, GM_SK_TRANSIENT};
	double *term[] = {&T->activations, &T->logits, &T->temporary};

	gm_mg_stage(&in, &mg, T);
	st.megatron = &mg;
	for (int i = 0; i < 3; i++)
		if (!gm_step_peak(&st, (1u << kinds[i]) | GM_STEP_NOGROUP,
				  &pk))
			*term[i] = pk.peak;
	T->workspace = 2 * mg.workspace + mg.te_workspace +
		       mg.te_group_n * mg.te_group_ws;
	T->communication = mg.global_buffer;
	sequence_peak(c, &st, T);
	if (c->o->reserve == GM_RESERVE_ANALYTIC) {
		struct gm_blocks bs = {0};
		if (!gm_step_peak(&st, GM_STEP_ALL, &pk))
			for (int j = 0; j < pk.n_group; j++)
				gm_blocks_add(&bs, pk.group[j].bytes,
					      pk.group[j].count,
					      pk.group[j].kind == GM_SK_ACT ||
					      pk.group[j].kind ==
					      GM_SK_TRANSIENT ||
					      pk.group[j].kind == GM_SK_LOGITS);
		T->peak_reserved = gm_reserved_from_allocated(&bs);
	} else {
		step_replay(c, &st, T);
	}
	if (T->peak_reserved < T->peak_allocated)
		T->peak_reserved = T->peak_allocated;
}

/* One training stage: its terms one by one, then the sequence. */
static void train_stage(const struct ctx *c, struct gm_terms *T)
{
	struct train x = {0};

	if (c->spec->training.framework == GM_FW_MEGATRON) {
		megatron_stage(c, T);
		return;
	}

	x.s = (double)c->spec->training.sequence_length;
	x.b = (double)c->spec->training.micro_batch_size;
	x.tok = x.s * x.b;
	train_states(c, T, &x);
	train_activations(c, T, &x);
	train_transient(c, &x);
	train_logits(c, T, &x);
	train_cache(c, &x);
	train_comm(c, T, &x);
	train_opt_tmp(c, &x);
	train_adapter(c, T, &x);
	train_grads(c, T, &x);
	train_tail(c, &x);
	train_blocks(c, T, &x);
	train_peak(c, T, &x);
	train_sequence(c, T, &x);
	T->moe_skew = moe_skew(c, x.tok, true);
	if (T->peak_reserved < T->peak_allocated)
		T->peak_reserved = T->peak_allocated;
}

static double kv_bytes(enum gm_kv_dtype k)
{
	switch (k) {
	case GM_KV_FP32:
		return 4;
	case GM_KV_FP8:
	case GM_KV_INT8:
		return 1;
	default:
		return 2;
	}
}

/* The shapes of one inference pass on this stage (step.h). */
static void infer_shapes(const struct ctx *c, struct gm_step_infer *in)
{
	const struct gm_spec_inference *si = &c->spec->inference;
	const struct gm_spec_model *m = &c->spec->model;
	double hd = head_dim(m);

	memset(in, 0, sizeof(*in));
	in->fam = c->fam;
	in->first = c->first;
	in->last = c->last;
	in->lm_head = m->head != GM_HEAD_CLASSIFICATION && m->vocab_size;
	in->batch = si->batch_size;
	in->prompt = si->prompt_length;
	/* an encoder has no cache to generate with: one forward pass */
	in->generate = c->fam->encoder ? 0 : si->generate_length;
	in->hidden = (double)m->hidden_size;
	in->q = q_width(m) / c->t;
	in->kv = hd * (double)m->kv_heads / c->t;
	in->ffn = (double)m->ffn_hidden_size / c->t;
	in->ffn_expert = (double)m->moe_ffn_hidden_size / c->t;
	in->experts = (double)m->experts;
	in->topk = (double)m->experts_per_token;
	in->vocab = (double)m->vocab_size / c->tv;
	in->head_dim = hd;
	in->window = m->sliding_window;
	in->c = c->full.compute;
	in->kvb = kv_bytes(si->kv_cache_dtype);
	in->kv_v = in->kv;
	in->layer0 = stage_first(c);
	if (c->fam->infer_shapes)
		c->fam->infer_shapes(m, (double)c->t, in);
}

/*
 * Inference: the weights, the cuBLAS workspace, and what one pass
 * allocates, emitted tensor by tensor (step.c: every activation of each
 * block with its exact size, the KV cache that transformers'
 * DynamicCache grows by torch.cat, the logits: every position for a
 * plain forward pass, the last one while generating (logits_to_keep=1),
 * then generate()'s fp32 copies). peak_allocated is the peak of that
 * sequence's live bytes, its terms what is live then.
 */
static void infer_stage(const struct ctx *c, struct gm_terms *T)
{
	struct gm_step st = {.training = false, .ga = 1, .in_flight = 1,
			     .micro_max = 1, .steps = 1};
	struct gm_step_peak pk, tr;
	struct gm_blocks bs = {0};
	double P = 0, cnt, kv_end;
	uint64_t len;

	for (int i = 0; i < c->pl->n; i++)
		P += stage_elems(c, &c->pl->t[i], &cnt);
	T->parameters = (uint64_t)llround(P);
	T->layers = c->layers;
	T->in_flight = 1;
	T->weights = P * c->sb.weights;
	T->workspace = c->ws;
	infer_shapes(c, &st.inf);
	len = st.inf.prompt + (st.inf.generate ? st.inf.generate - 1 : 0);
	/* a sliding window: from the first decode step on each layer holds
	 * the window's W positions (W - 1 kept and the new one, in the
	 * cat's output); after the prefill, the whole prompt (step.c,
	 * gm_em_kv_append), the cache's largest then */
	if (st.inf.window && st.inf.generate > 1)
		len = fmax(fmin((double)len, (double)st.inf.window),
			   (double)st.inf.prompt);
	kv_end = c->fam->encoder ? 0 :
		 (double)c->layers * (double)(st.inf.batch * len) *
		 (st.inf.kv + st.inf.kv_v) * st.inf.kvb;
	step_params(c, &st, 0, 0);
	st.workspace = c->ws;
	st.layers = c->layers;
	st.inf.last_decode_only = true;
	if (gm_step_peak(&st, GM_STEP_ALL, &pk)) {
		/* host memory ran out: the weights and the cache at least */
		memset(&pk, 0, sizeof(pk));
		pk.kind[GM_SK_KV] = kv_end;
	} else {
		rows_largest(&pk, T);
		T->largest.weights = T->weights;
		T->largest.workspace = T->workspace;
	}
	/* the term at its largest: the cache after the last decode step
	 * (the peak may come before, at the prefill's logits) */
	T->kv_cache = fmax(kv_end, pk.kind[GM_SK_KV]);
	T->moe_skew = moe_skew(c, (double)(st.inf.batch * st.inf.prompt),
			       false);
	T->logits = pk.kind[GM_SK_LOGITS];
	T->temporary = pk.kind[GM_SK_TRANSIENT];
	T->peak_phase = GM_PHASE_INFERENCE;
	T->at_peak = (struct gm_parts){
		.weights = T->weights, .kv_cache = pk.kind[GM_SK_KV],
		.logits = T->logits, .temporary = T->temporary,
		.workspace = T->workspace};
	T->peak_allocated = T->weights + T->workspace + pk.kind[GM_SK_KV] +
			    T->logits + T->temporary;
	if (c->o->reserve == GM_RESERVE_ANALYTIC) {
		/* The segments the blocks' working set took stay cached
		 * (PyTorch frees none while cudaMalloc succeeds): at the
		 * peak, the weights, the cache and the head's tensors
		 * (logits: larger than any cached block, so in a segment of
		 * their own) come on top of the largest working set of
		 * transients, not of what of it is still live. */
		if (gm_step_peak(&st, 1u << GM_SK_TRANSIENT, &tr))
			tr.n_group = 0;
		add_param_blocks(c, &bs, c->sb.weights, 1, false, false);
		gm_blocks_add(&bs, c->ws, 1, false);
		for (int j = 0; j < pk.n_group; j++)
			if (pk.group[j].kind == GM_SK_KV ||
			    pk.group[j].kind == GM_SK_LOGITS)
				gm_blocks_add(&bs, pk.group[j].bytes,
					      pk.group[j].count,
					      pk.group[j].kind != GM_SK_KV);
		for (int j = 0; j < tr.n_group; j++)
			if (tr.group[j].kind == GM_SK_TRANSIENT)
				gm_blocks_add(&bs, tr.group[j].bytes,
					      tr.group[j].count, true);
		T->peak_reserved = gm_reserved_from_allocated(&bs);
	} else {
		/* every decode step: the pool's answers depend on them all */
		st.inf.last_decode_only = false;
		step_replay(c, &st, T);
	}
	if (T->peak_reserved < T->peak_allocated)
		T->peak_reserved = T->peak_allocated;
}

/*
 * The batch shape a plan is for, and where an unwritten length came
 * from (gm__spec_defaults: sequence_length and prompt_length default to
 * model.max_position_embeddings, else 2048), so that a user sees why a
 * config.json's 131072 positions make the plan large.
 */
static void shape_describe(const struct gm_spec *spec, char *buf,
			   size_t len)
{
	bool infer = spec->task == GM_TASK_INFERENCE;
	const char *key = infer ? "inference.prompt_length"
				: "training.sequence_length";
	const char *from = "";

	if (!gm_spec_given(spec, key))
		from = spec->model.max_position_embeddings ?
		       " (default: model.max_position_embeddings)" :
		       " (default 2048)";
	if (infer)
		snprintf(buf, len, "batch %llu x %llu prompt tokens%s + %llu "
			 "generated",
			 (unsigned long long)spec->inference.batch_size,
			 (unsigned long long)spec->inference.prompt_length,
			 from,
			 (unsigned long long)spec->inference.generate_length);
	else
		snprintf(buf, len, "micro-batch %llu x %llu tokens%s",
			 (unsigned long long)spec->training.micro_batch_size,
			 (unsigned long long)spec->training.sequence_length,
			 from);
}

int gm_plan(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	    const struct gm_model_opts *opts, struct gm_plan *out,
	    struct gm_diag *diag)
{
	struct gm_model_opts def;
	struct gm_param_layout pl;
	const struct gm_spec_parallel *par = &spec->parallelism;
	struct ctx c = {0};
	enum gm_precision prec;
	const uint64_t usable = gm_plan_gpu_usable(gpu);
	unsigned best = 0;
	int rc;

	if (!opts) {
		gm_model_opts_default(&def);
		opts = &def;
	}
	memset(out, 0, sizeof(*out));
	rc = gm_params_layout(&spec->model, &pl, diag);
	if (rc)
		return rc;
	/* Megatron-Core builds its own MoE layer (megatron_moe.h) */
	gm_mg_moe_layout(spec, &pl);
	snprintf(out->name, sizeof(out->name), "%s", spec->name);
	shape_describe(spec, out->shape, sizeof(out->shape));
	out->gpu = *gpu;
	out->parameters = pl.from_shape ? pl.total :
			  (uint64_t)llround(spec->model.parameters);
	out->parameters_mismatch = gm_params_mismatch(&spec->model, &pl);
	out->trainable = spec->task != GM_TASK_TRAIN ? 0 :
			 spec->training.adapter != GM_ADAPTER_NONE ?
			 (uint64_t)llround(gm_adapter_layer_params(
				 &pl, &spec->training) *
				 (double)pl.layers) : out->parameters;

	c.spec = spec;
	c.fam = gm_family(spec->model.architecture);
	c.pl = &pl;
	c.o = opts;
	c.t = par->tensor_parallel ? (double)par->tensor_parallel : 1;
	c.d = (double)gm_spec_data_parallel(spec);
	c.tv = par->tp_vocab == GM_TPV_REPLICATED ? 1 : c.t;
	c.p = par->pipeline_parallel ? (unsigned)par->pipeline_parallel : 1;
	if (c.p > GM_STAGES_MAX || c.p > pl.layers)
		return gm_diag_set(diag, GM_EINVAL,
				   "parallelism.pipeline_parallel: %u stages "
				   "for %llu layers", c.p,
				   (unsigned long long)pl.layers);
	prec = spec->task == GM_TASK_TRAIN ? spec->training.precision
					   : spec->inference.precision;
	c.full = gm_state_bytes(opts->recipe, prec,
				spec->task == GM_TASK_TRAIN ?
				spec->training.optimizer : GM_OPT_SGD);
	if (spec->task == GM_TASK_TRAIN &&
	    spec->training.framework == GM_FW_DEEPSPEED)
		/* DeepSpeed's engine: a 16-bit module (no autocast) whose
		 * fp32 masters the optimizer keeps (step_ds.c) */
		c.full = gm_state_bytes(GM_RECIPE_DEEPSPEED, prec,
					spec->training.optimizer);
	if (spec->task == GM_TASK_TRAIN)
		/* a PEFT adapter: the frozen base's bytes (step_adapter.h);
		 * the adapters' own come with train_adapter() */
		gm_adapter_base_bytes(&spec->training, &c.full);
	c.unshard = c.full.weights;
	if (fsdp_param_dtype(spec)) {
		/* FSDP2 MixedPrecisionPolicy(param_dtype=16-bit,
		 * reduce_dtype=fp32): fp32 shards, gradients and states as
		 * *-mixed; the unsharded parameters 16-bit and no autocast,
		 * so the forward and backward run as *-true (activations,
		 * residual stream and logits in 16 bits; inputs cast at
		 * each unit: cast_forward_inputs) */
		c.full.autocast = false;
		c.full.residual = c.full.compute;
		c.unshard = c.full.compute;
	}
	/* PyTorch's ZeRO-2 is FSDP2 (recipe/pytorch.c): its parameters
	 * are sharded as ZeRO-3's, only kept unsharded longer */
	c.sb = gm_state_shard(c.full, spec->task != GM_TASK_TRAIN ? 0 :
			      par->zero_stage == 2 &&
			      spec->training.framework == GM_FW_PYTORCH &&
			      opts->recipe == GM_RECIPE_TORCH ? 3 :
			      par->zero_stage, (unsigned long)c.d);
	if (spec->task == GM_TASK_TRAIN &&
	    spec->training.framework == GM_FW_DEEPSPEED)
		c.sb = c.full; /* the module's tensors as built; the engine
				* partitions them (step_ds.c) */
	c.ws = (double)gm_cublas_workspace_bytes(gpu->sm_major);
	c.gpu = gpu;
	c.ga = 1;
	if (spec->task == GM_TASK_TRAIN && spec->training.global_batch_size) {
		uint64_t per = spec->training.micro_batch_size * (uint64_t)c.d;
		c.ga = per ? (spec->training.global_batch_size + per - 1) / per
			   : 1;
		if (!c.ga)
			c.ga = 1;
	}
	out->gradient_accumulation_steps = c.ga;
	out->n_stages = c.p;
	for (c.r = 0; c.r < c.p; c.r++) {
		struct gm_terms *T = &out->stages[c.r];
		/* inference replicas do not communicate: no DP group.
		 * DeepSpeed's engine has one on a single rank too
		 * (engine.py: init_distributed with NCCL, the parameters'
		 * broadcast in _configure_distributed_model, its
		 * all-reduces and barriers on the data-parallel group) */
		unsigned comms = (spec->task == GM_TASK_TRAIN &&
				  (c.d > 1 || ds_engine(&c))) +
				 (c.t > 1) + (c.p > 1);

		c.layers = stage_layers(pl.layers, c.p, c.r);
		c.first = c.r == 0;
		c.last = c.r + 1 == c.p;
		{
			double out_of = (double)gpu->context_bytes +
				comms * (double)opts->nccl_comm_bytes;
			c.alloc_cap = (double)usable > out_of ?
				usable - (uint64_t)out_of : 1;
		}
		if (spec->task == GM_TASK_TRAIN)
			train_stage(&c, T);
		else
			infer_stage(&c, T);
		if (!T->peak_requested) /* no replay */
			T->peak_requested = T->peak_allocated;
		T->nccl = comms * (double)opts->nccl_comm_bytes;
		T->cuda_context = (double)gpu->context_bytes + T->nccl;
		T->device_used = T->peak_reserved + T->cuda_context;
		if (T->device_used > out->stages[best].device_used)
			best = c.r;
	}
	out->per_gpu = out->stages[best];
	out->per_gpu_stage = best;
	c.r = best;
	c.layers = stage_layers(pl.layers, c.p, c.r);
	c.first = c.r == 0;
	c.last = c.r + 1 == c.p;
	recipe_row(&c, &out->per_gpu, out);
	recipe_loop(spec, out->recipe, sizeof(out->recipe));
	gm_run_from_spec(spec, out->gradient_accumulation_steps,
			 out->run.wrap, &out->run);
	out->fits = out->per_gpu.device_used <= (double)usable &&
		    out->init_peak + out->per_gpu.cuda_context <=
			    (double)usable;
	for (unsigned i = 0; i < c.p; i++)
		out->fits &= !out->stages[i].sim.out_of_memory;
	{
		/* in double, then saturated: a huge plan must not overflow */
		double h = (double)usable - out->per_gpu.device_used;
		out->headroom_bytes = h <= -0x1p63 ? INT64_MIN :
				      h >= 0x1p63 ? INT64_MAX :
				      (int64_t)llround(h);
	}
	return 0;
}
