/*
 * fit.h - sizing search over the memory model (fit.c): the largest
 * micro-batch that fits a GPU, gradient-accumulation steps for a global
 * batch, the fewest data-parallel GPUs that fit. Errors: 0 or GM_EINVAL
 * from gm_plan().
 */
#ifndef GM_FIT_H
#define GM_FIT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"

struct gm_fit {
	struct gm_plan_gpu gpu;
	uint64_t max_micro_batch;   /* 0: not even 1 fits */
	uint64_t global_batch;      /* 0: none given */
	uint64_t gradient_accumulation_steps; /* at max_micro_batch */
	uint64_t min_data_parallel; /* 0: no data-parallel degree fits */
	uint64_t min_gpus;          /* min_data_parallel x tp x pp */
	uint64_t min_gpus_micro_batch; /* the micro-batch min_gpus is at:
				     * the spec's, or max_micro_batch where
				     * the spec's fits at no degree; 0 with
				     * min_gpus 0 */
	double device_used;         /* bytes at max_micro_batch (or 1) */
	bool training;              /* the spec's task is training */
	unsigned zero_stage;        /* the ZeRO stage min_gpus searched at */
	bool one_gpu;               /* training on more than one GPU is not
				     * modelled for the spec (a PEFT
				     * adapter): min_gpus searched 1 only */
};

/*
 * What min_gpus 0 means, for a report: "none at ZeRO <stage>" (training:
 * no data-parallel degree fits at the spec's ZeRO stage; a change of
 * another lever may, see fit_search.h), "none on one GPU" (training where
 * more GPUs are not modelled, one_gpu) or "none" (inference: not even one
 * replica at batch 1); NULL when min_gpus is not 0.
 */
const char *gm_fit_min_gpus_none(const struct gm_fit *f, char *buf,
				 size_t len);

/* Largest value searched for micro-batch and data-parallel degree. */
#define GM_FIT_MAX 65536

/* Largest tensor-parallel degree searched (the smallest change's lever,
 * inference's min_gpus): one server of 8 GPUs, the first takeaway of
 * Narayanan et al., "Efficient Large-Scale Language Model Training on
 * GPU Clusters Using Megatron-LM" (SC'21, arXiv:2104.04473): tensor
 * parallel up to the GPUs of one server, pipeline across them. */
#define GM_FIT_TP_MAX 8

/* Largest global batch (training.global_batch_size's bound too). */
#define GM_FIT_MAX_GLOBAL (1ULL << 30)

/*
 * Fit spec on gpu. "Fits" is gm_plan()'s with opts (NULL: defaults,
 * the replay): every answer below was planned as fitting and its
 * neighbour as not, so gpumem plan agrees with gpumem fit. The analytic
 * reserve model only proposes where each search starts; probes plan
 * with opts' fits_only (model.h).
 *
 * Micro-batch, when training with a global batch (global_batch, or the
 * spec's when 0): the largest divisor of global / dp (at most
 * GM_FIT_MAX) that fits, so that micro x GA x dp = global exactly, the
 * next larger divisor not fitting (GA > 1 keeps gradients alive during
 * forward, so GA = 1, the largest divisor, is tried on its own first);
 * GM_EINVAL when global is not a multiple of dp or above
 * GM_FIT_MAX_GLOBAL. Otherwise: the largest in [1, GM_FIT_MAX] that
 * fits while the next does not. 0: not even 1 fits.
 *
 * Data parallel: at the spec's micro-batch (where that fits at no
 * degree: at max_micro_batch, so that min_gpus is never 0 next to a
 * micro-batch that fits), with the global batch as gm_plan() takes it,
 * the fewest ranks whose per-GPU plan fits, the one fewer not: 1, else
 * a search over [2, GM_FIT_MAX] (per-GPU memory from 2 on only falls
 * with the degree). Inference: min_gpus is one replica's, the smallest
 * tensor-parallel degree (the spec's, twice it, ... up to 8) whose plan
 * fits at the spec's batch (else at max_micro_batch), times pipeline
 * parallel; min_data_parallel 1. Errors: 0, GM_EINVAL or GM_ENOMEM.
 */
int gm_fit(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	   const struct gm_model_opts *opts, uint64_t global_batch,
	   struct gm_fit *out, struct gm_diag *diag);

/* Plans a search has made, for a progress line (gpumem fit). tick()
 * runs after each replayed probe; ctx is the caller's. */
struct gm_fit_progress {
	unsigned long plans;
	void (*tick)(struct gm_fit_progress *p);
	void *ctx;
};

/* gm_fit() that counts its plans in prog (may be NULL). */
int gm_fit_observed(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		    const struct gm_model_opts *opts, uint64_t global_batch,
		    struct gm_fit *out, struct gm_fit_progress *prog,
		    struct gm_diag *diag);

#endif
