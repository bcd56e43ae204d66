/*
 * plan_bench.c - host time of the planner (not a test): gm_plan() on a
 * Llama-2-7B spec and an 80-layer (Llama-2-70B) spec with each reserve
 * model (simulated: the step replayed through the allocator core;
 * analytic), 10,000 configurations (micro-batch, sequence,
 * checkpointing, ZeRO, TP varied) on the analytic model that gm_fit()'s
 * searches use, and one gm_fit(). Prints medians of 7 runs.
 */
#include "fit.h"
#include "model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static struct gm_spec base(void)
{
	struct gm_spec s;

	memset(&s, 0, sizeof(s));
	strcpy(s.name, "bench");
	s.model = (struct gm_spec_model){
		.architecture = GM_ARCH_LLAMA, .layers = 32,
		.hidden_size = 4096, .ffn_hidden_size = 11008,
		.attention_heads = 32, .kv_heads = 32, .vocab_size = 32000};
	s.training = (struct gm_spec_training){
		.micro_batch_size = 1, .sequence_length = 4096,
		.precision = GM_PREC_BF16_MIXED, .optimizer = GM_OPT_ADAMW};
	s.parallelism = (struct gm_spec_parallel){
		.data_parallel = 1, .tensor_parallel = 1, .pipeline_parallel = 1,
		.virtual_pipeline_stages = 1,
		.expert_parallel = 1,
		/* FSDP as tools/measure runs it (the traces) */
		.fsdp_mixed_precision = GM_FSDP_MP_AUTOCAST};
	return s;
}

/* Median host time of one gm_plan() of s with reserve model m, seconds. */
static double time_plan(const struct gm_spec *s, const struct gm_plan_gpu *g,
			enum gm_reserve_model m, int n, long *sink)
{
	static struct gm_plan p;
	struct gm_model_opts o;
	double t[7];

	gm_model_opts_default(&o);
	o.reserve = m;
	for (int r = 0; r < 7; r++) {
		double t0 = now();
		for (int i = 0; i < n; i++) {
			gm_plan(s, g, &o, &p, NULL);
			*sink += p.fits;
		}
		t[r] = (now() - t0) / n;
	}
	qsort(t, 7, sizeof(double), cmp);
	return t[3];
}

int main(void)
{
	struct gm_plan_gpu g = {.name = "NVIDIA H200",
				.capacity_bytes = 143771ULL << 20,
				.context_bytes = 760ULL << 20, .sm_major = 9};
	static struct gm_plan p;
	struct gm_spec s = base(), big = base();
	struct gm_model_opts an, sim;
	struct gm_fit f;
	double fit_t[7];
	long sink = 0;

	big.model.layers = 80;
	big.model.hidden_size = 8192;
	big.model.ffn_hidden_size = 28672;
	big.model.attention_heads = 64;
	big.model.kv_heads = 8;
	big.parallelism.data_parallel = 8;
	big.parallelism.zero_stage = 3;
	gm_model_opts_default(&sim);
	sim.reserve = GM_RESERVE_SIMULATED;
	gm_plan(&s, &g, &sim, &p, NULL);
	printf("plan (Llama-2-7B, one configuration), simulated: median "
	       "%.2f us (%llu allocations replayed)\n",
	       time_plan(&s, &g, GM_RESERVE_SIMULATED, 20, &sink) * 1e6,
	       (unsigned long long)p.per_gpu.sim.allocations);
	printf("plan (Llama-2-7B, one configuration), analytic: median "
	       "%.2f us\n",
	       time_plan(&s, &g, GM_RESERVE_ANALYTIC, 1000, &sink) * 1e6);
	gm_plan(&big, &g, &sim, &p, NULL);
	printf("plan (80 layers, Llama-2-70B, ZeRO-3 x 8), simulated: "
	       "median %.2f us (%llu allocations replayed)\n",
	       time_plan(&big, &g, GM_RESERVE_SIMULATED, 5, &sink) * 1e6,
	       (unsigned long long)p.per_gpu.sim.allocations);
	printf("plan (80 layers, Llama-2-70B, ZeRO-3 x 8), analytic: "
	       "median %.2f us\n",
	       time_plan(&big, &g, GM_RESERVE_ANALYTIC, 1000, &sink) * 1e6);
	gm_model_opts_default(&an);
	an.reserve = GM_RESERVE_ANALYTIC;
	for (int r = 0; r < 7; r++) {
		double t0 = now();
		for (int i = 0; i < 10000; i++) {
			struct gm_spec c = base();
			c.training.micro_batch_size = 1 + i % 8;
			c.training.sequence_length = 512u << (i / 8 % 4);
			c.training.activation_checkpointing = i / 32 % 3;
			c.parallelism.zero_stage = i / 96 % 4;
			c.parallelism.data_parallel = 8;
			c.parallelism.tensor_parallel = 1u << (i / 384 % 3);
			gm_plan(&c, &g, &an, &p, NULL);
			sink += p.fits;
		}
		fit_t[r] = now() - t0;
	}
	qsort(fit_t, 7, sizeof(double), cmp);
	printf("10,000 configurations planned (analytic, fit's search): "
	       "median %.1f ms\n", fit_t[3] * 1e3);
	{
		double t0 = now();
		gm_fit(&s, &g, NULL, 1024, &f, NULL);
		printf("one gm_fit() search (micro-batch + GPUs; default "
		       "options: analytic): %.1f us\n",
		       (now() - t0) * 1e6);
	}
	return sink < 0;
}
