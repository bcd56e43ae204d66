/*
 * step_ds.h - DeepSpeed's engine in the step emitter (step_ds.c): what
 * deepspeed.initialize() allocates on the GPU for each ZeRO stage, what
 * its gradient hooks and its optimizer step allocate, and what ZeRO-3
 * gathers, as DeepSpeed 0.19 does it (step_ds.c cites the functions).
 *
 * The model's forward and backward stay step.c's (a 16-bit module: no
 * autocast, 16-bit activations and gradients); step.c calls the hooks
 * below at its FSDP points (the model built, a unit's forward, a unit's
 * pre- and post-backward, the optimizer step, the teardown) when
 * gm_step.ds.on is set. Units: bytes, except where a field says
 * elements (as DeepSpeed's config counts them).
 */
#ifndef GM_STEP_DS_H
#define GM_STEP_DS_H

#include <stdbool.h>
#include <stdint.h>

/* The engine the step runs under (gm_step.ds). */
struct gm_step_ds {
	bool on;
	unsigned stage;         /* ZeRO stage 0 .. 3 */
	double d;               /* data-parallel degree, >= 1 */
	double b;               /* bytes of a model element (2: fp16/bf16) */
	bool master;            /* fp32 master weights (a 16-bit model) */
	double states;          /* optimizer states per element (Adam 2,
				 * momentum SGD 1, SGD 0), fp32 each */
	bool adam_tmp;          /* torch.optim Adam(W) as the client
				 * optimizer: fp32 temporaries at its step
				 * as gm_step.opt_impl says (foreach: one
				 * per element; fused: none) */
	double bucket;          /* reduce_bucket_size, elements */
	bool contiguous;        /* contiguous_gradients */
	bool overlap;           /* overlap_comm */
	double sub_group;       /* sub_group_size, elements (stage 3) */
	double max_live;        /* stage3_max_live_parameters, elements */
	double prefetch;        /* stage3_prefetch_bucket_size, elements
				 * (0: no prefetch) */
	double max_reuse;       /* stage3_max_reuse_distance, elements */
	double persist;         /* stage3_param_persistence_threshold */
	bool off_opt, off_param; /* offload_optimizer / offload_param cpu */
	bool zero_init;         /* stage 3: built under zero.Init, each
				 * parameter partitioned as it is built
				 * (else built whole, then partitioned) */
};

struct gm_em;

/* deepspeed.initialize() after the model was built: the optimizer's
 * set-up for the stage. */
void gm_ds_setup(struct gm_em *e);
/* Stage 3: unit u's parameters fetched in the forward (the root, u =
 * layers, first: the step begins), or block u's in the pre-backward. */
void gm_ds_fetch(struct gm_em *e, uint64_t u);
void gm_ds_fetch_bwd(struct gm_em *e, uint64_t u);
/* Stage 3: unit u's forward ended (its parameters may be released). */
void gm_ds_release_fwd(struct gm_em *e, uint64_t u);
/* Unit u's gradients are ready (u == layers: the root's, the last):
 * the gradient hooks move them into the buckets and partitions. */
void gm_ds_post_backward(struct gm_em *e, uint64_t u);
/* engine.step(): the optimizer's step for the stage. */
void gm_ds_optimizer(struct gm_em *e);
/* Teardown: frees every tensor of the engine and its state. */
void gm_ds_free(struct gm_em *e);

#endif
