/*
 * fit_search.h - the smallest change that makes a spec fit a GPU
 * (fit_search.c): when `gpumem plan` says "does not fit", the changes a
 * user would try, searched in the order a user would try them, each
 * planned with the same definition of "fits" as gpumem plan and
 * gpumem fit (gm_plan_capped() with the caller's options). Errors: 0,
 * GM_EINVAL from planning the spec as given, GM_ENOMEM.
 */
#ifndef GM_FIT_SEARCH_H
#define GM_FIT_SEARCH_H

#include <stdbool.h>
#include <stdint.h>

#include "fit.h"
#include "model.h"

/*
 * What a user changes, in the order the search prefers them (a change
 * of an earlier lever is "smaller"). Each lever lists its steps from the
 * spec's value, the smallest first.
 */
enum gm_fit_lever {
	GM_FL_MICRO_BATCH,     /* training.micro_batch_size smaller, the
				* gradient-accumulation steps up, the
				* global batch kept; inference.batch_size
				* smaller */
	GM_FL_CHECKPOINTING,   /* training.activation_checkpointing:
				* selective, then full */
	GM_FL_ZERO,            /* parallelism.zero_stage up to 3, with
				* data_parallel above 1 */
	GM_FL_DIST_OPTIMIZER,  /* parallelism.distributed_optimizer
				* (Megatron-LM's ZeRO-1), the same */
	GM_FL_OFFLOAD,         /* DeepSpeed: offload_optimizer cpu, then
				* offload_parameters cpu too (ZeRO-3) */
	GM_FL_DATA_PARALLEL,   /* more data-parallel ranks */
	GM_FL_TENSOR_PARALLEL, /* tensor_parallel x2, x4, ... up to 8 */
	GM_FL_ADAPTER,         /* training.adapter: lora, then qlora */
	GM_FL_N
};

/* The lever in words ("activation checkpointing"). */
const char *gm_fit_lever_name(enum gm_fit_lever l);

/* --set strings a change may need: two per lever, and as many that
 * the caller gives (pre). */
#define GM_FIT_CHANGE_SETS (4 * GM_FL_N)
#define GM_FIT_SET_LEN 80

/* One plan's figures, as gpumem plan prints them (bytes). */
struct gm_fit_figures {
	uint64_t micro_batch;  /* training micro-batch or inference batch */
	uint64_t gradient_accumulation_steps;
	uint64_t global_batch; /* training.global_batch_size; 0: none */
	uint64_t gpus;         /* data x tensor x pipeline parallel */
	double peak_allocated, peak_reserved, device_used;
	double host;           /* host memory a rank needs (offload) */
	int64_t headroom_bytes;
};

struct gm_fit_change {
	bool training;                /* task train (else inference) */
	bool fits_as_given;           /* no search was needed */
	bool found;                   /* a change fits */
	struct gm_fit_figures given;  /* the spec as given */
	/* found: the change as "KEY=VALUE" (what --set takes): pre's,
	 * then the levers' in lever order; and its plan's figures */
	unsigned n_sets;
	char sets[GM_FIT_CHANGE_SETS][GM_FIT_SET_LEN];
	unsigned levers;              /* bit 1 << lever per lever changed */
	unsigned tried;               /* the same per lever the search
				       * could move (the task takes it, it
				       * has a step the validator accepts) */
	struct gm_fit_figures change;
	bool widest;                  /* not found: sets, levers and change
				       * are the widest change searched
				       * (every lever at its last step),
				       * which does not fit either */
	unsigned long plans;          /* plans the search made */
	char refused[512];            /* not "": the spec with pre is
				       * refused (why); nothing searched */
};

/*
 * Where spec does not fit gpu: the smallest change that fits. Changes
 * are tried by the number of levers they move (one lever before two),
 * then in lever order (enum gm_fit_lever), then by each lever's steps,
 * smallest first; a numeric lever's (micro-batch, data parallel) edge
 * is bisected: the answer's step plans as fitting and the step before
 * it as not. A change a lever would make is planned only where
 * gm_spec_apply() and gm_spec_check_modelled() accept the spec it
 * gives, so no change names a value `gpumem plan` refuses. opts: as
 * gm_fit()'s (NULL: defaults). given: the caller's plan of spec on gpu
 * with opts, reused (NULL, or with pre: planned here). pre: n_pre (at most
 * GM_FIT_CHANGE_SETS / 2) --set strings the caller plans the spec with
 * (gpumem fit --global-batch N: "training.global_batch_size=N"), applied
 * before the search and listed first in the change, so that it pastes
 * as the whole difference; where the spec with them is refused,
 * out->refused says why and nothing is searched. prog: as
 * gm_fit_observed()'s (may be NULL). *out is filled on success;
 * out->found false with out->fits_as_given false and out->refused "":
 * no change searched fits.
 */
int gm_fit_change(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
		  const struct gm_model_opts *opts,
		  const struct gm_plan *given, const char *const *pre,
		  int n_pre, struct gm_fit_change *out,
		  struct gm_fit_progress *prog, struct gm_diag *diag);

#endif
