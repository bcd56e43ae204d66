/*
 * fit.h - sizing search over the memory model (fit.c): the largest
 * micro-batch that fits a GPU, gradient-accumulation steps for a global
 * batch, the fewest data-parallel GPUs that fit. Errors: 0 or GM_EINVAL
 * from gm_plan().
 */
#ifndef GM_FIT_H
#define GM_FIT_H

#include <stdint.h>

#include "model.h"

struct gm_fit {
	struct gm_plan_gpu gpu;
	uint64_t max_micro_batch;   /* 0: not even 1 fits */
	uint64_t global_batch;      /* 0: none given */
	uint64_t gradient_accumulation_steps; /* at max_micro_batch */
	uint64_t min_data_parallel; /* 0: no data-parallel degree fits */
	uint64_t min_gpus;          /* min_data_parallel x tp x pp */
	double device_used;         /* bytes at max_micro_batch (or 1) */
};

/* Largest value searched for micro-batch and data-parallel degree. */
#define GM_FIT_MAX 65536

/* Largest global batch (training.global_batch_size's bound too). */
#define GM_FIT_MAX_GLOBAL (1ULL << 30)

/*
 * Fit spec on gpu. global_batch 0 takes the spec's. Micro-batch, when
 * training with a global batch: the largest divisor of global / dp (at
 * most GM_FIT_MAX) that fits, so that micro x GA x dp = global exactly
 * (GA > 1 keeps gradients alive during forward, so memory is not
 * monotone across GA = 1); GM_EINVAL when global is not a multiple of
 * dp or above GM_FIT_MAX_GLOBAL. Otherwise (inference): a binary search
 * over [1, GM_FIT_MAX] for the largest that fits. Data parallel: at the spec's
 * micro-batch, the fewest ranks whose per-GPU plan fits; per-GPU memory
 * only falls with the degree from 2 on (ZeRO shards), so 1 is tried,
 * then a binary search over [2, GM_FIT_MAX]; with ZeRO 0 only 1 can
 * help, since each rank holds a full copy. The searches run on the
 * analytic reserve (GM_RESERVE_ANALYTIC: microseconds a plan); their
 * answers are then moved one step at a time (at most 64) until opts'
 * reserve model (analytic by default) agrees, and device_used is
 * opts'.
 */
int gm_fit(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	   const struct gm_model_opts *opts, uint64_t global_batch,
	   struct gm_fit *out, struct gm_diag *diag);

#endif
