/*
 * deepspeed.c - the DeepSpeed recipe (DeepSpeed 0.19.6, commit edaa722):
 * the engine's model states per ZeRO stage, its buckets and offload.
 *
 * With fp16 or bf16 enabled the module is 16-bit (engine.py,
 * get_data_types: model dtype; gradients accumulate in it unless
 * data_types.grad_accum_dtype says otherwise, which the config reader
 * refuses) and the optimizer keeps fp32 master weights:
 *  - stage 0 (engine.py _configure_fp16_optimizer: FP16_UnfusedOptimizer,
 *    runtime/fp16/unfused_optimizer.py, for a torch.optim optimizer;
 *    FP16_Optimizer for DeepSpeed's FusedAdam): 16-bit parameters and gradients,
 *    an fp32 flat master copy, Adam's two fp32 states, and at the step
 *    each gradient cast to fp32 and flattened (step); all-reduce in buckets of
 *    reduce_bucket_size elements.
 *  - stages 1 and 2 (runtime/zero/stage_1_and_2.py,
 *    DeepSpeedZeroOptimizer): the 16-bit parameters flattened into one
 *    buffer per group (flatten_dense_tensors_aligned, a copy while the
 *    originals live: the build's peak), an fp32 partition of it
 *    (single_partition_of_fp32_groups), Adam over the partition, and at
 *    each step the partition's gradients flattened and cast to fp32
 *    (step: flat_grad_partition.to(fp32)). Stage 1 keeps whole 16-bit gradients; stage 2 keeps a
 *    16-bit partition (grads_in_partition, contiguous_gradients) filled
 *    through the IPG buffers (two of reduce_bucket_size elements with
 *    overlap_comm, else one; reduce_independent_p_g_buckets_and_remove_
 *    grads).
 *  - stage 3 (runtime/zero/stage3.py, DeepSpeedZeroOptimizer_Stage3;
 *    partitioned_param_coordinator.py): 16-bit parameter partitions,
 *    the fp32 partition and Adam, a flat 16-bit gradient partition
 *    buffer (grad_partitions_flat_buffer), one IPG bucket of
 *    reduce_bucket_size elements, the flattened and fp32 gradients of
 *    one sub-group at the step (sub_group_size, 1e9 elements); the layer being computed is
 *    gathered whole with its prefetched successors up to
 *    stage3_prefetch_bucket_size elements, at most
 *    stage3_max_live_parameters in all, and its whole 16-bit gradient
 *    exists until it is reduce-scattered.
 * offload_optimizer cpu moves the fp32 partition, Adam's states and the
 * fp32 gradient partition to pinned host memory (DeepSpeedCPUAdam steps
 * there); offload_param cpu (stage 3) moves the 16-bit parameter
 * partitions there too. zero.Init (what Hugging Face's integration uses
 * with stage 3) builds each parameter partitioned; without it the whole
 * model is built first. nvme offload is refused (planner/spec_rules.c):
 * its swap buffers are not modelled yet. The step's allocation sequence
 * is planner/step_ds.c's; these rows are its model-state figures.
 */
#include <stdio.h>

#include "error.h"
#include "recipe.h"
#include "states.h"

/* DeepSpeedZeroConfig's defaults when no JSON was read. */
static const struct gm_spec_deepspeed ds_default = {
	.reduce_bucket_size = 500000000,
	.allgather_bucket_size = 500000000,
	.prefetch_bucket_size = 50000000,
	.max_live_parameters = 1000000000,
	.param_persistence_threshold = 100000,
	.sub_group_size = 1000000000,
	.max_reuse_distance = 1000000000,
	.contiguous_gradients = true,
};

const struct gm_spec_deepspeed *gm_ds_defaults(void)
{
	return &ds_default;
}


static double min2(double a, double b)
{
	return a < b ? a : b;
}

static double max2(double a, double b)
{
	return a > b ? a : b;
}

static void name(struct gm_recipe_states *o, const struct gm_recipe_in *in)
{
	bool oo = in->offload_optimizer == GM_OFFLOAD_CPU;
	bool op = in->offload_parameters == GM_OFFLOAD_CPU;

	snprintf(o->name, sizeof(o->name), "deepspeed-zero%u%s-%s", in->zero,
		 oo && op ? "-offload-optimizer-parameters"
		 : oo     ? "-offload-optimizer"
		 : op     ? "-offload-parameters" : "",
		 gm_precision_name(in->precision));
	o->wrap = GM_WRAP_DEEPSPEED;
}

int gm_recipe_deepspeed(const struct gm_recipe_in *in,
			struct gm_recipe_states *o, struct gm_diag *diag)
{
	const struct gm_spec_deepspeed *ds = in->ds ? in->ds : &ds_default;
	bool half = in->precision != GM_PREC_FP32;
	double b = half ? 2 : 4;                /* module element bytes */
	double P = in->params, T = in->trainable, U = in->largest_layer;
	double d = in->dp > 1 ? (double)in->dp : 1;
	double adam, bucket = (double)ds->reduce_bucket_size * b;
	bool off_opt = in->offload_optimizer == GM_OFFLOAD_CPU;
	bool off_par = in->offload_parameters == GM_OFFLOAD_CPU;

	*o = (struct gm_recipe_states){0};
	if (in->precision == GM_PREC_FP16_TRUE ||
	    in->precision == GM_PREC_BF16_TRUE)
		return gm_diag_set(diag, GM_EINVAL, "DeepSpeed keeps fp32 "
				   "master weights: *-mixed, not *-true");
	if (in->optimizer != GM_OPT_ADAM && in->optimizer != GM_OPT_ADAMW &&
	    in->optimizer != GM_OPT_SGD && in->optimizer != GM_OPT_SGD_MOMENTUM)
		return gm_diag_set(diag, GM_EINVAL, "DeepSpeed with '%s' is not "
				   "in the recipe table",
				   gm_optimizer_name(in->optimizer));
	if (in->offload_optimizer == GM_OFFLOAD_NVME ||
	    in->offload_parameters == GM_OFFLOAD_NVME)
		return gm_diag_set(diag, GM_EINVAL, "nvme offload is not in the "
				   "recipe table");
	adam = gm_optimizer_elem_states(in->optimizer) * 4;
	name(o, in);
	if (in->zero == 0) {
		o->weights = b * P;
		o->gradients = b * T;
		o->master = half ? 4 * T : 0;
		o->optimizer = o->master + adam * T;
		/* step: each .grad cast to fp32, then flattened */
		o->step = half ? 8 * T : 0;
		o->buffers = d > 1 ? min2(bucket, b * T) : 0;
		o->init_peak = b * P + o->master;
		return 0;
	}
	if (in->zero <= 2) {
		o->weights = b * P;
		o->master = 4 * T / d;
		o->optimizer = o->master + adam * T / d;
		/* step: the partition's gradients flattened, then cast to
		 * the fp32 gradient of the master partition */
		o->step = (half ? b + 4 : 4) * T / d;
		if (in->zero == 1) {
			o->gradients = b * T;
		} else {
			o->gradients = b * T / d;
			if (ds->contiguous_gradients)
				o->buffers = bucket * (ds->overlap_comm ? 2 : 1);
		}
		/* the flatten copies the 16-bit parameters while they live,
		 * then the fp32 partition and its zero gradient
		 * (initialize_optimizer_states) */
		o->init_peak = 2 * b * P + 4 * T / d + 4 * T / d;
		if (off_opt) {
			o->host = o->optimizer + o->step;
			o->optimizer = o->master = o->step = 0;
			if (in->zero == 2)
				o->gradients = 0; /* copied to pinned host */
			o->init_peak = 2 * b * P;
		}
		return 0;
	}
	/* stage 3 */
	o->weights = b * P / d;
	o->gradients = b * T / d;
	o->master = half ? 4 * T / d : 0;
	o->optimizer = o->master + adam * T / d;
	/* step, one sub-group at a time (_prepare_fp32_grad_for_sub_group:
	 * its gradients flattened, then cast to fp32) */
	o->step = (half ? b + 4 : 4) * min2((double)ds->sub_group_size, T / d);
	o->buffers = ds->contiguous_gradients ? bucket : 0;
	o->gathered = b * min2(U + (double)ds->prefetch_bucket_size,
			       max2(U, (double)ds->max_live_parameters)) +
		      b * U;
	/* zero.Init: each parameter partitioned as it is built; else the
	 * whole module first (in the spec's build dtype, fp32) */
	o->init_peak = in->built_whole ? 4 * P + b * P / d
				       : b * P / d + 4 * U;
	if (off_opt) {
		o->host += o->optimizer + 4 * T / d + o->gradients;
		o->optimizer = o->master = o->step = o->gradients = 0;
	}
	if (off_par) {
		o->host += o->weights;
		o->weights = 0;
		if (!in->built_whole)
			o->init_peak = 4 * U;
	}
	return 0;
}

/* Python's int() of a non-negative double: truncation. */
static int64_t py_int(double x)
{
	return (int64_t)x;
}

void gm_ds_estimate_zero2(int64_t total_params, int64_t gpus_per_node,
			  int64_t nodes, bool cpu_offload,
			  double additional_buffer_factor, int64_t *cpu_mem,
			  int64_t *gpu_mem)
{
	int64_t total_gpus = nodes * gpus_per_node;
	double cpu;

	if (cpu_offload) {
		*gpu_mem = 2 * total_params;
		cpu = (double)total_params *
		      (double)(4 * total_gpus > 16 ? 4 * total_gpus : 16) *
		      additional_buffer_factor;
	} else {
		*gpu_mem = 2 * total_params +
			   py_int(18.0 * (double)total_params /
				  (double)total_gpus);
		cpu = (double)total_params * 4.0 * (double)gpus_per_node *
		      additional_buffer_factor;
	}
	*cpu_mem = py_int(cpu);
}

void gm_ds_estimate_zero3(int64_t total_params, int64_t largest_layer_params,
			  int64_t gpus_per_node, int64_t nodes,
			  bool cpu_offload, bool cpu_offload_params,
			  bool zero_init, double additional_buffer_factor,
			  int64_t *cpu_mem, int64_t *gpu_mem,
			  int64_t *largest_layer_memory)
{
	int64_t total_gpus = nodes * gpus_per_node;
	double gpus_factor = 1.0 / (double)nodes;
	double tp = (double)total_params, f = additional_buffer_factor;
	int64_t llm = 4 * largest_layer_params;
	double cpu, g = (double)gpus_per_node;

	if (cpu_offload) {
		if (cpu_offload_params) {
			*gpu_mem = llm;
			cpu = zero_init ? tp * 18 * gpus_factor * f
					: tp * max2(4 * g, 18 * gpus_factor) * f;
		} else {
			*gpu_mem = llm + py_int(2.0 * tp / (double)total_gpus);
			cpu = zero_init ? tp * 16 * gpus_factor * f
					: tp * max2(4 * g, 16 * gpus_factor) * f;
		}
	} else {
		*gpu_mem = llm + py_int(18.0 * tp / (double)total_gpus);
		cpu = zero_init ? (double)largest_layer_params * 4 * g * f
				: tp * 4 * g * f;
	}
	*cpu_mem = py_int(cpu);
	*largest_layer_memory = llm;
}
