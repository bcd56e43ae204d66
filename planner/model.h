/*
 * model.h - the memory model: spec + GPU -> per-GPU bytes (model.c).
 *
 * Per GPU means the most loaded rank: data-parallel ranks are alike;
 * tensor-parallel ranks are alike; pipeline stages differ and each gets
 * its own figures (stages[]), the largest device_used wins per_gpu.
 *
 * Phases of a training step (peak_allocated is their max, not a sum):
 *  - forward-backward: weights + optimizer states + buffers + saved
 *    activations of every in-flight micro-batch + (all gradients when
 *    gradient accumulation > 1, else the head's gradient) + the autocast
 *    weight cache + max(logits and loss, one block's transient); without
 *    accumulation, also the end of backward if larger: the first
 *    block's saved tensors, autocast copies and transient with the
 *    gradients of every later block and of the head;
 *  - optimizer-step: weights + states + buffers + all gradients + the
 *    optimizer's temporaries (foreach: one state-sized tensor list).
 * Inference: weights + KV cache + one block's transient + logits.
 * Outside the allocator: CUDA context and libraries (per GPU, from the
 * catalog) and NCCL buffers per communicator.
 *
 * All sizes are bytes. Errors: 0 or GM_EINVAL (diag says why).
 */
#ifndef GM_MODEL_H
#define GM_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "params.h"
#include "run.h"
#include "spec.h"
#include "states.h"
#include "step.h"

struct gm_diag;

struct gm_plan_gpu;
/* The bound a plan must fit under (bytes): usable_bytes, else CUDA's
 * total, else nvidia-smi's total where a caller gave neither. */
uint64_t gm_plan_gpu_usable(const struct gm_plan_gpu *g);
/* Whether g's cap (cap_bytes) is above its usable memory: it never
 * binds, and the plan is against the card. */
bool gm_plan_gpu_cap_above_usable(const struct gm_plan_gpu *g);

/* What the model needs to know of a GPU (the CLI fills it from the
 * catalog). */
struct gm_plan_gpu {
	char name[128];
	uint64_t capacity_bytes;   /* total memory as nvidia-smi reports */
	uint64_t cuda_total_bytes; /* as cudaMemGetInfo reports; 0: not
				    * known */
	uint64_t usable_bytes;     /* what a process can get, the fit
				    * verdict's bound (gm_gpu_usable_bytes);
				    * 0: capacity_bytes */
	bool usable_estimated;     /* usable_bytes is an estimate */
	uint64_t cap_bytes;        /* per-process cap on the allocator's
				    * memory (cap.h); 0: none */
	uint64_t context_bytes;    /* CUDA context + libraries outside the
				    * framework's allocator */
	int sm_major;              /* compute capability major (9 = Hopper) */
	unsigned multiprocessors;  /* SMs; 0 when not known */
	unsigned threads_per_sm;   /* resident threads per SM; 0: not known */
	double bandwidth_gbps;     /* GB/s, for reports */
	double bf16_tflops;        /* dense, for reports */
};

/* How peak_reserved is predicted from the modelled allocations. */
enum gm_reserve_model {
	/* the step's allocation sequence replayed through the allocator
	 * core on its simulated backend (step.h): the default */
	GM_RESERVE_SIMULATED,
	/* PyTorch's rounding and segment rules applied to the peak phase's
	 * blocks plus a fragmentation share (reserve.h) */
	GM_RESERVE_ANALYTIC,
};

/* "simulated" / "analytic" -> *out; 0 or GM_EINVAL. */
int gm_reserve_model_parse(const char *s, enum gm_reserve_model *out);
const char *gm_reserve_model_name(enum gm_reserve_model m);

/* Knobs with physical meaning; gm_model_opts_default() sets them. */
struct gm_model_opts {
	enum gm_reserve_model reserve;
	enum gm_recipe recipe;     /* framework conventions (states.h) */
	bool paper;                /* Korthikanti's block (activations.h) */
	uint64_t nccl_comm_bytes;  /* NCCL buffers per communicator */
	uint64_t ddp_bucket_bytes; /* DDP bucket_cap_mb */
	/* GM_RESERVE_SIMULATED: sees the replay of stage trace_stage
	 * (gpumem plan --trace); NULL: none */
	const struct gm_step_observer *trace;
	unsigned trace_stage;
	/* Only `fits` is wanted (gm_fit()'s probes): a stage whose live
	 * bytes alone pass what the allocator may take is not replayed,
	 * and a replay ends at its first refused request; the figures of
	 * such a stage are then partial. `fits` is the same as without. */
	bool fits_only;
};

void gm_model_opts_default(struct gm_model_opts *o);

/* Where the peak is: a step's forward-backward or optimizer step, an
 * inference pass, or set-up (the model built and wrapped before the first
 * step, e.g. DeepSpeed's engine flattening the weights: init_peak). */
enum gm_phase { GM_PHASE_FWD_BWD, GM_PHASE_OPTIMIZER, GM_PHASE_INFERENCE,
		GM_PHASE_SETUP };

const char *gm_phase_name(enum gm_phase p);

/* Terms live at one moment; at the peak phase they sum to
 * peak_allocated. */
struct gm_parts {
	double weights, gradients, optimizer_states, activations, logits,
	       temporary, kv_cache, communication, workspace;
};

/* Each term is its largest size over the step (activations at the end
 * of forward, gradients after backward, ...); at_peak splits
 * peak_allocated itself. */
struct gm_terms {
	double weights, gradients, optimizer_states, activations, logits,
	       temporary, kv_cache, communication, workspace;
	double phase_allocated[2]; /* forward-backward, optimizer-step */
	enum gm_phase peak_phase;
	struct gm_parts at_peak;
	/* Each row's own largest over the step in the same sequence as
	 * at_peak (step.h gm_step_kind_row), where it was counted
	 * (has_largest); else the closed forms above stand for it. */
	struct gm_parts largest;
	bool has_largest;
	/* peak_allocated: the live blocks' sizes at their peak (PyTorch's
	 * allocated_bytes, what torch.cuda.max_memory_allocated() reports;
	 * the replay's, where one ran); peak_requested: the live bytes as
	 * requested at theirs (requested_bytes; what at_peak adds up to) */
	double peak_allocated, peak_requested, peak_reserved, cuda_context,
	       nccl, device_used;
	uint64_t layers;           /* blocks on this stage */
	uint64_t parameters;       /* parameters on this rank */
	uint64_t in_flight;        /* micro-batches in flight (1F1B) */
	double moe_skew;           /* mixture of experts: what a router
				    * sending every token of a micro-batch
				    * (a pass) to one expert adds to the
				    * balanced plan's per-expert tensors;
				    * 0 for dense models */
	/* GM_RESERVE_SIMULATED: what the replay found (peak_reserved is
	 * sim.peak_reserved; sim.peak_requested equals peak_allocated up
	 * to one byte per live allocation); zero otherwise. */
	struct gm_step_result sim;
};

#define GM_STAGES_MAX 128

struct gm_plan {
	char name[128];
	struct gm_plan_gpu gpu;
	uint64_t parameters;       /* the whole model */
	uint64_t trainable;        /* of them, trained: all but a frozen
				    * base's (training.adapter: the
				    * adapters', which parameters leaves
				    * out); 0 for inference */
	double parameters_mismatch; /* vs `parameters:` (params.h) */
	struct gm_terms per_gpu;   /* the most loaded stage */
	unsigned per_gpu_stage;    /* its index in stages[] */
	unsigned n_stages;
	struct gm_terms stages[GM_STAGES_MAX];
	char shape[160];           /* the step's batch shape in words:
				    * "micro-batch 1 x 1024 tokens (...)" */
	char recipe[96];           /* what was planned, in words a user
				    * knows (planner/recipe/) */
	double init_peak;          /* bytes on the GPU while the model is
				    * built and wrapped, before step 1 */
	double host;               /* host bytes per rank (offloaded states,
				    * pinned buffers) */
	bool fits;                 /* steady state and init_peak, each with
				    * cuda_context, within the card */
	int64_t headroom_bytes;    /* capacity - device_used */
	uint64_t gradient_accumulation_steps;
	struct gm_run run;         /* GPUs, sharding and batch (run.h) */
};

/*
 * Plan spec on gpu. opts may be NULL (defaults). Returns 0 or GM_EINVAL
 * (a spec the model cannot lay out, or more pipeline stages than
 * layers).
 */
int gm_plan(const struct gm_spec *spec, const struct gm_plan_gpu *gpu,
	    const struct gm_model_opts *opts, struct gm_plan *out,
	    struct gm_diag *diag);

/* cuBLAS workspace PyTorch allocates per (handle, stream), bytes:
 * CUBLAS_WORKSPACE_CONFIG ":4096:8" = 32 MiB on sm90, else ":4096:2:16:8"
 * = 8.125 MiB (aten/src/ATen/cuda/CublasHandlePool.cpp). */
uint64_t gm_cublas_workspace_bytes(int sm_major);

#endif
