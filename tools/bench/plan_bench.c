/*
 * plan_bench.c - host time of the planner (not a test): gm_plan() on a
 * Llama-2-7B spec, and gm_fit() over 10,000 configurations (micro-batch,
 * sequence, checkpointing, ZeRO, TP varied). Prints medians of 7 runs.
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
	s.parallelism = (struct gm_spec_parallel){1, 1, 1, false, 0};
	return s;
}

int main(void)
{
	struct gm_plan_gpu g = {.name = "NVIDIA H200",
				.capacity_bytes = 143771ULL << 20,
				.context_bytes = 760ULL << 20, .sm_major = 9};
	static struct gm_plan p;
	struct gm_spec s = base();
	struct gm_fit f;
	double plan_t[7], fit_t[7];
	long sink = 0;

	for (int r = 0; r < 7; r++) {
		double t0 = now();
		for (int i = 0; i < 1000; i++) {
			gm_plan(&s, &g, NULL, &p, NULL);
			sink += p.fits;
		}
		plan_t[r] = (now() - t0) / 1000;
		t0 = now();
		for (int i = 0; i < 10000; i++) {
			struct gm_spec c = base();
			c.training.micro_batch_size = 1 + i % 8;
			c.training.sequence_length = 512u << (i / 8 % 4);
			c.training.activation_checkpointing = i / 32 % 3;
			c.parallelism.zero_stage = i / 96 % 4;
			c.parallelism.data_parallel = 8;
			c.parallelism.tensor_parallel = 1u << (i / 384 % 3);
			gm_plan(&c, &g, NULL, &p, NULL);
			sink += p.fits;
		}
		fit_t[r] = now() - t0;
	}
	qsort(plan_t, 7, sizeof(double), cmp);
	qsort(fit_t, 7, sizeof(double), cmp);
	printf("plan (Llama-2-7B, one configuration): median %.2f us\n",
	       plan_t[3] * 1e6);
	printf("10,000 configurations planned: median %.1f ms\n",
	       fit_t[3] * 1e3);
	{
		double t0 = now();
		gm_fit(&s, &g, NULL, 1024, &f, NULL);
		printf("one gm_fit() search (micro-batch + GPUs): %.1f us\n",
		       (now() - t0) * 1e6);
	}
	return sink < 0;
}
