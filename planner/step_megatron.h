/*
 * step_megatron.h - the allocation sequence of a Megatron-LM training
 * step on one rank (step_megatron.c), replayed through the same
 * allocator core as PyTorch's (step.h: a struct gm_step whose megatron
 * member is set is emitted by gm_mg_emit() instead).
 *
 * Megatron-Core (NVIDIA/Megatron-LM d98e8a6) holds memory differently
 * from a PyTorch eager step, so it has its own emitter rather than flags
 * on step.c's: the model's parameters move into one contiguous buffer
 * per model chunk and its gradients live in another, allocated once and
 * never freed (megatron/core/distributed/param_and_grad_buffer.py,
 * _ParamAndGradBuffer.__init__); the optimizer's fp32 master copies are
 * built at construction and Adam's states at the first step; a layer's
 * weight gradients accumulate into that buffer in place (gradient
 * accumulation fusion); the pipeline runs Megatron's own 1F1B and
 * interleaved schedules (megatron/core/pipeline_parallel/schedules.py).
 *
 * Units: bytes (doubles, rounded up to whole bytes when emitted).
 */
#ifndef GM_STEP_MEGATRON_H
#define GM_STEP_MEGATRON_H

#include <stdbool.h>
#include <stdint.h>

#include "params.h"

struct gm_step_sink;

#define GM_MG_ACT 32
#define GM_MG_CHUNKS 64
#define GM_MG_GROUP_WS 8

/* One rank of one pipeline stage. */
struct gm_mg_step {
	unsigned steps;          /* training iterations to emit, >= 1 */
	unsigned steps_max;      /* then more until steady (gm_step_next) */
	/* the model as built (megatron/training/training.py get_model:
	 * directly on the GPU in the 16-bit dtype), per chunk: the layer
	 * tensors layers_chunk times, then the others of the chunk */
	unsigned chunks;         /* model chunks on the rank (vpp), >= 1 */
	uint64_t layers_chunk;   /* transformer layers per chunk, >= 1 */
	int n_layer_t;
	double layer_t[GM_PARAMS_MAX]; /* bytes of each layer tensor */
	int n_other_t;
	double other_t[GM_PARAMS_MAX]; /* embedding, final norm, output
					* layer on this rank, bytes (built
					* with chunk 0: the rank's total is
					* the same) */
	bool layer_x[GM_PARAMS_MAX];  /* layer tensor i is a routed
				       * expert's (megatron_moe.h) */
	double param_buf_x[GM_MG_CHUNKS]; /* per chunk: the experts'
					   * buffers (0: none) */
	double grad_buf_x[GM_MG_CHUNKS];
	double param_buf[GM_MG_CHUNKS]; /* per chunk: DDP's param_data
					 * (distributed optimizer only;
					 * 0: none), padded */
	double grad_buf[GM_MG_CHUNKS];  /* per chunk: DDP's grad_data */
	double master_frac;      /* fp32 master bytes per weight byte that
				  * this rank keeps (0 for fp32 weights) */
	double state_frac;       /* Adam's two states, likewise */
	double master_frac_x;    /* the same for the experts' tensors */
	double state_frac_x;
	double workspace;        /* one PyTorch cuBLAS workspace (one for
				  * the forward's thread, one for the
				  * autograd engine's) */
	double te_workspace;     /* Transformer Engine's GEMM workspace */
	double te_group_ws;      /* one of Transformer Engine's grouped
				  * GEMM workspaces (MoE experts; 0: none) */
	unsigned te_group_n;     /* how many, at most GM_MG_GROUP_WS */
	double global_buffer;    /* Megatron's global memory buffer (the
				  * allgather token dispatcher's gathered
				  * hidden states, the output layer's
				  * sequence-parallel all-gather; 0:
				  * none), kept from the first forward */
	/* the schedule */
	unsigned pp, rank;       /* pipeline stages, this one (0-based) */
	uint64_t m;              /* micro-batches per step, >= 1 */
	/* one micro-batch through one layer */
	int n_act;
	double act[GM_MG_ACT];   /* tensors the layer keeps for backward */
	double fwd_trans;        /* the forward's largest transient */
	double bwd_trans;        /* the backward's */
	double recompute;        /* full recompute: what the layer's
				  * recomputed forward holds in its backward
				  * (act[] is then its input only) */
	double stage_in;         /* micro-batch inputs of chunk 0 on stage 0
				  * (token ids, labels, position ids, loss
				  * mask, the embedding's dropout mask) */
	double stage_grad;       /* the gradient a chunk hands back (its
				  * input's), transient */
	double head_in;          /* last chunk of the last stage: the final
				  * norm's saved tensors, the output layer's
				  * input */
	double logits16;         /* the output layer's logits */
	double logits32;         /* their fp32 copy that the vocab-parallel
				  * cross entropy keeps (softmax) */
};

/*
 * The chunk that the k-th forward (backward false) or backward of a
 * rank runs under Megatron's schedule (schedules.py get_schedule_table
 * with microbatch_group_size_per_vp_stage = pp; the backward runs the
 * chunks in reverse). chunks 1: 0.
 */
unsigned gm_mg_chunk(unsigned pp, unsigned chunks, uint64_t m, uint64_t k,
		     bool backward);

/* Warm-up forwards of rank `rank` (schedules.py get_pp_rank_microbatches),
 * at most m * chunks. */
uint64_t gm_mg_warmup(unsigned pp, unsigned chunks, unsigned rank,
		      uint64_t m);

/* Micro-batches emitted per step: m, or fewer where later ones only
 * repeat the steady state (at least 3 groups of pp past the warm-up). */
uint64_t gm_mg_micro_emitted(const struct gm_mg_step *mg);

/*
 * Emit the sequence of mg to sink: the model, its buffers and master
 * copies, then `steps` steps, then frees of everything still live.
 * Returns 0, a sink's error, GM_EINVAL (an inconsistent description) or
 * GM_ENOMEM.
 */
int gm_mg_emit(const struct gm_mg_step *mg, const struct gm_step_sink *sink);

#endif
