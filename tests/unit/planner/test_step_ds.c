/* Unit tests for planner/step_ds.c: DeepSpeed's engine in the step
 * emitter, each rule against the source it comes from (DeepSpeed 0.19.6
 * deepspeed/runtime/..., the functions named in step_ds.c) on a small
 * described step: what lives at the start of each phase, by kind. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "error.h"
#include "step.h"

#define MAXID 4096
#define MiB (1024.0 * 1024.0)

/* A sink that keeps the live bytes per kind, their peaks, and a picture
 * of them when each phase of each step begins. */
struct rec {
	double bytes[MAXID];
	int kind[MAXID];
	unsigned char live[MAXID];
	double live_kind[GM_SK_N], peak_kind[GM_SK_N], peak;
	uint64_t allocs[GM_SK_N];
	double last_rtmp;       /* bytes of the last GM_SK_RTMP of step 1 */
	unsigned step;
	double at[3][GM_SP_N][GM_SK_N]; /* step (0: set-up), phase, kind */
	int bad;
	int empties;            /* empty_cache() calls */
	unsigned empty_step;    /* the step of the last one */
};

static double total(const double *k)
{
	double t = 0;

	for (int i = 0; i < GM_SK_N; i++)
		t += k[i];
	return t;
}

static int r_alloc(void *ctx, uint32_t id, uint64_t bytes,
		   enum gm_step_kind k)
{
	struct rec *r = ctx;

	if (id >= MAXID || r->live[id] || !bytes) {
		r->bad++;
		return GM_EINVAL;
	}
	r->live[id] = 1;
	r->bytes[id] = (double)bytes;
	r->kind[id] = k;
	r->allocs[k]++;
	if (k == GM_SK_RTMP && r->step == 1)
		r->last_rtmp = (double)bytes;
	r->live_kind[k] += (double)bytes;
	if (r->live_kind[k] > r->peak_kind[k])
		r->peak_kind[k] = r->live_kind[k];
	if (total(r->live_kind) > r->peak)
		r->peak = total(r->live_kind);
	return 0;
}

static int r_free(void *ctx, uint32_t id)
{
	struct rec *r = ctx;

	if (id >= MAXID || !r->live[id]) {
		r->bad++;
		return GM_EINVAL;
	}
	r->live[id] = 0;
	r->live_kind[r->kind[id]] -= r->bytes[id];
	return 0;
}

static int r_empty(void *ctx)
{
	struct rec *r = ctx;

	r->empties++;
	r->empty_step = r->step;
	return 0;
}

static void r_step(void *ctx, unsigned s)
{
	((struct rec *)ctx)->step = s;
}

static void r_phase(void *ctx, enum gm_step_phase ph)
{
	struct rec *r = ctx;

	if (r->step < 3)
		memcpy(r->at[r->step][ph], r->live_kind,
		       sizeof(r->live_kind));
}

/* P = 8 MiB embedding + 2 blocks x (16 + 4 MiB) + 8 MiB head = 56 MiB of
 * bf16 elements (2 bytes each): 28 Mi elements. */
#define EMB (8 * MiB)
#define BIG (16 * MiB)
#define SMALL (4 * MiB)
#define HEAD (8 * MiB)
#define P_BYTES (EMB + 2 * (BIG + SMALL) + HEAD)
#define P_ELEMS (P_BYTES / 2)

static void describe(struct gm_step *st, unsigned stage, double d)
{
	static const struct {
		enum gm_step_where w;
		double bytes;
		bool at_loss;
	} t[] = {{GM_STEP_EMBED, EMB, false}, {GM_STEP_LAYER, BIG, false},
		 {GM_STEP_LAYER, SMALL, false}, {GM_STEP_HEAD, HEAD, true}};

	memset(st, 0, sizeof(*st));
	st->training = true;
	st->steps = 2;
	st->layers = 2;
	st->ga = st->in_flight = st->micro_max = 1;
	st->n_param = 4;
	for (int i = 0; i < 4; i++) {
		st->p[i].where = t[i].w;
		st->p[i].weight = st->p[i].grad = t[i].bytes;
		st->p[i].grad_at_loss = t[i].at_loss;
	}
	st->n_act = 1;
	st->act[0] = 1 * MiB;
	st->ds = (struct gm_step_ds){
		.on = true, .stage = stage, .d = d, .b = 2, .master = true,
		.states = 2, .adam_tmp = true,
		.bucket = 5 * MiB,        /* elements: 10 MiB of bf16 */
		.contiguous = true, .overlap = stage == 3,
		.sub_group = 1e9, .max_live = 1e9, .max_reuse = 1e9,
		.persist = 1e5};
}

static void emit(const struct gm_step *st, struct rec *r)
{
	struct gm_step_sink sk = {.ctx = r, .alloc = r_alloc,
				  .free = r_free, .step = r_step,
				  .phase = r_phase, .empty_cache = r_empty};

	memset(r, 0, sizeof(*r));
	assert_int_equal(gm_step_emit(st, &sk), 0);
	assert_int_equal(r->bad, 0);
	/* every allocation freed once */
	assert_true(total(r->live_kind) < 0.5);
}

/*
 * Stage 3 keeps the IPG bucket (reduce_bucket_size elements) and
 * grad_partitions_flat_buffer (P/d elements, 16-bit) for the whole run
 * (stage3.py _setup_for_real_optimizer); stage 2 allocates its bucket at
 * the first gradient hook (setup_buckets), its 16-bit partition at the
 * first reduction (copy_grads_in_partition) and frees both by the end
 * of the step (the bucket after the backward, the partition once cast
 * to fp32 in step()). So at one rank ZeRO-3 holds 2 P + 2 bucket bytes
 * more in its forward than ZeRO-2: why it peaks above it.
 */
static void zero3_keeps_bucket_and_partition(void **state)
{
	static struct gm_step st;
	static struct rec r2, r3;
	double comm3, grad3;

	(void)state;
	describe(&st, 2, 1);
	emit(&st, &r2);
	describe(&st, 3, 1);
	emit(&st, &r3);
	/* step 2's forward begins: nothing of the reduction lives under
	 * ZeRO-2 */
	assert_true(r2.at[2][GM_SP_FORWARD][GM_SK_COMM] < 0.5);
	assert_true(r2.at[2][GM_SP_FORWARD][GM_SK_GRAD] < 0.5);
	comm3 = r3.at[2][GM_SP_FORWARD][GM_SK_COMM];
	grad3 = r3.at[2][GM_SP_FORWARD][GM_SK_GRAD];
	assert_true(comm3 == 5 * MiB * 2);
	assert_true(grad3 == P_BYTES);
	/* the same masters and states otherwise: 12 bytes per element */
	assert_true(r2.at[2][GM_SP_FORWARD][GM_SK_STATE] == 12 * P_ELEMS);
	assert_true(r3.at[2][GM_SP_FORWARD][GM_SK_STATE] == 12 * P_ELEMS);
	assert_true(r3.peak > r2.peak);
}

/*
 * Stage 0 under FP16_UnfusedOptimizer (fp16/unfused_optimizer.py):
 * initialize_optimizer_states steps the optimizer on zero gradients, so
 * the fp32 masters and both Adam states exist before the first step
 * (12 bytes per element); DeepSpeedZeroOptimizer (stage_1_and_2.py)
 * only gives the fp32 partition a zero gradient: its states come at the
 * first step (4 bytes per element after set-up, 12 after the step).
 */
static void states_before_the_first_step(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 0, 1);
	emit(&st, &r);
	assert_true(r.at[1][GM_SP_FORWARD][GM_SK_STATE] == 12 * P_ELEMS);
	/* one master per parameter tensor (4 tensors, 2 of them per block) */
	assert_int_equal(r.allocs[GM_SK_STATE], 3 * 6);
	describe(&st, 2, 1);
	emit(&st, &r);
	assert_true(r.at[1][GM_SP_FORWARD][GM_SK_STATE] == 4 * P_ELEMS);
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_STATE] == 12 * P_ELEMS);
}

/*
 * ZeRO-1 without overlap_comm (stage_1_and_2.py process_gradients: only
 * setup_buckets at the hook) keeps every 16-bit gradient until the end
 * of the backward; ZeRO-2 copies each one into the bucket and frees it
 * (reduce_independent_p_g_buckets_and_remove_grads): at most the head's
 * gradient and one block's live at once.
 */
static void zero1_keeps_gradients_to_the_end(void **state)
{
	static struct gm_step st;
	static struct rec r1, r2;

	(void)state;
	describe(&st, 1, 1);
	emit(&st, &r1);
	describe(&st, 2, 1);
	emit(&st, &r2);
	/* the 16-bit partition (GRAD kind too) comes after: the peak of
	 * GRAD under ZeRO-1 holds all gradients */
	assert_true(r1.peak_kind[GM_SK_GRAD] >= P_BYTES);
	assert_true(r2.peak_kind[GM_SK_GRAD] <= P_BYTES + HEAD + BIG + SMALL);
	assert_true(r2.peak_kind[GM_SK_GRAD] < r1.peak_kind[GM_SK_GRAD]);
}

/*
 * offload_optimizer cpu: no fp32 master, state or fp32 gradient on the
 * GPU (they are DeepSpeedCPUAdam's, in pinned host memory); stage 1/2
 * keep one 16-bit buffer of the largest parameter for the copies to the
 * host (stage_1_and_2.py __init__ with cpu_offload).
 */
static void offload_keeps_nothing_of_the_optimizer(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 2, 1);
	st.ds.off_opt = true;
	emit(&st, &r);
	assert_true(r.peak_kind[GM_SK_STATE] < 0.5);
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_COMM] == BIG);
	describe(&st, 3, 1);
	st.ds.off_opt = true;
	emit(&st, &r);
	assert_true(r.peak_kind[GM_SK_STATE] < 0.5);
	/* the bucket stays, the gradient partition is the host's */
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_COMM] == 5 * MiB * 2);
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_GRAD] < 0.5);
}

/*
 * Stage 3's set-up defragments (zero/utils.py defragment: the
 * partitions to the host, empty_cache(), one flat buffer), unless
 * offload_param keeps them there; its reduction runs on a stream of its
 * own: the bucket's flat copy (GM_SK_RCOMM; none for a bucket of one
 * gradient that splits evenly, which reduce_scatter_coalesced reduces
 * in place, comm/coalesced_collectives.py) and, under
 * offload_optimizer, per gradient of n elements a 16-bit copy, the fp64
 * copy of the norm (8 n) and the fp32 copy for the host (4 n), the
 * first two live together (GM_SK_RTMP), as the H200 traces of
 * ds-zero3-llama-1.1b-bf16 and ds-zero3-offload-llama-1.1b-bf16 show.
 * Stage 2 does none of it.
 */
static void zero3_reduce_stream_and_defragment(void **state)
{
	static struct gm_step st;
	static struct rec r;
	/* the largest gradient: a block's 16 MiB of bf16, 8 Mi elements */
	const double n = BIG / 2;

	(void)state;
	describe(&st, 3, 1);
	emit(&st, &r);
	assert_int_equal(r.empties, 1);
	assert_int_equal(r.empty_step, 0);          /* in the set-up */
	/* 5 Mi elements a bucket: every gradient alone in one */
	assert_int_equal(r.allocs[GM_SK_RCOMM], 0);
	assert_int_equal(r.allocs[GM_SK_RTMP], 0);
	assert_int_equal(r.allocs[GM_SK_COMM], 1);  /* the bucket alone */
	/* 12 Mi: [head 4, block 1's 2], [block 1's 8, block 0's 2],
	 * [block 0's 8, embedding 4] a step, one copy at a time */
	describe(&st, 3, 1);
	st.ds.bucket = 12 * MiB;
	emit(&st, &r);
	assert_int_equal(r.allocs[GM_SK_RCOMM], 3 * 2);
	assert_true(r.peak_kind[GM_SK_RCOMM] == (BIG + EMB));

	describe(&st, 3, 1);
	st.ds.off_opt = true;
	emit(&st, &r);
	assert_int_equal(r.empties, 1);
	/* 6 gradients a step (embedding, 2 x 2 block tensors, head), 3
	 * copies each, 2 steps */
	assert_int_equal(r.allocs[GM_SK_RTMP], 6 * 3 * 2);
	assert_true(r.peak_kind[GM_SK_RTMP] == 2 * n + 8 * n);

	describe(&st, 3, 1);
	st.ds.off_opt = true;
	st.ds.off_param = true;
	emit(&st, &r);
	assert_int_equal(r.empties, 0);

	describe(&st, 2, 1);
	emit(&st, &r);
	assert_int_equal(r.empties, 0);
	assert_int_equal(r.allocs[GM_SK_RCOMM] + r.allocs[GM_SK_RTMP], 0);
}

/*
 * A tied lm_head (the embedding's gradient is the head's, which holds no
 * weight of its own): the shared parameter's hook runs once autograd has
 * accumulated both uses, after the embedding's backward, with the whole
 * gradient's elements (the H200 trace of
 * ds-zero3-offload-all-qwen3-0.6b-bf16: the 1187 MiB fp64 copy of its
 * 151936 x 1024 gradient last, after every block's).
 */
static void zero3_tied_head_last(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 3, 1);
	st.ds.off_opt = true;
	st.p[0].grad_shared = true;
	st.p[3].weight = 0;
	st.p[3].grad = EMB;
	emit(&st, &r);
	/* 5 gradients a step (the tied head, 2 x 2 block tensors), 3
	 * copies each, 2 steps; the last the head's fp32 copy */
	assert_int_equal(r.allocs[GM_SK_RTMP], 5 * 3 * 2);
	assert_true(r.last_rtmp == 4 * (EMB / 2));
	/* untied: the head's first, the embedding's last */
	describe(&st, 3, 1);
	st.ds.off_opt = true;
	st.p[3].grad = HEAD / 2;
	st.p[3].weight = HEAD / 2;
	emit(&st, &r);
	assert_int_equal(r.allocs[GM_SK_RTMP], 6 * 3 * 2);
	assert_true(r.last_rtmp == 4 * (EMB / 2));
}

/*
 * Sub-groups (stage3.py _create_fp16_sub_groups): parameters in module
 * order until a group holds sub_group_size elements; one fp32 master
 * each. With 6 Mi elements: embedding 4 Mi + block 0's 8 Mi closes the
 * first group (12 Mi), block 0's 2 Mi + block 1's 8 Mi the second, the
 * rest (2 + 4 Mi) the last.
 */
static void sub_groups(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 3, 1);
	st.ds.sub_group = 6 * MiB;
	emit(&st, &r);
	/* three masters with two states each */
	assert_int_equal(r.allocs[GM_SK_STATE], 3 * 3);
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_STATE] == 12 * P_ELEMS);
}

/*
 * Gathering over d = 2 (partitioned_param_coordinator.py): a unit's full
 * 16-bit parameters while it runs; once the first step recorded the
 * order (is_complete_trace), release_sub_module keeps what is used again
 * within stage3_max_reuse_distance elements: with a large distance the
 * blocks stay gathered from their forward to their backward in step 2,
 * not in step 1; with 0, never.
 */
static void zero3_gathers_and_reuse(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 3, 2);
	emit(&st, &r);
	assert_true(r.allocs[GM_SK_GATHER] > 0);
	/* the flat 16-bit partitions are half the parameters */
	assert_true(r.at[2][GM_SP_FORWARD][GM_SK_WEIGHT] == P_BYTES / 2);
	/* when the backward of step 1 begins only the root is gathered (embedding and
	 * head, kept for the backward); in step 2 the blocks too */
	assert_true(r.at[1][GM_SP_BACKWARD][GM_SK_GATHER] == EMB + HEAD);
	assert_true(r.at[2][GM_SP_BACKWARD][GM_SK_GATHER] == P_BYTES);
	describe(&st, 3, 2);
	st.ds.max_reuse = 0;
	emit(&st, &r);
	assert_true(r.at[2][GM_SP_BACKWARD][GM_SK_GATHER] == EMB + HEAD);
	/* one rank, parameters on the GPU: the partition is the
	 * parameter, nothing is gathered */
	describe(&st, 3, 1);
	emit(&st, &r);
	assert_int_equal(r.allocs[GM_SK_GATHER], 0);
}

/*
 * Stage 3's prefetch once the trace is complete (step_ds.c prefetch(),
 * partitioned_param_coordinator.py fetch_sub_module): the fetch queue
 * runs ahead while fewer than stage3_max_live_parameters elements are
 * gathered; a block whose backward use it passes while the block is
 * still gathered is not released after its forward
 * (__most_recent_step_id_param_fetched_for), whatever the reuse
 * distance: with max_reuse_distance 0 every block is still gathered
 * when step 2's backward begins. With max_live_parameters already
 * reached by the root (8 Mi elements) nothing is prefetched, as
 * without a prefetch bucket.
 */
static void zero3_prefetch_keeps_blocks(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 3, 2);
	st.ds.max_reuse = 0;
	st.ds.prefetch = 5e7;
	emit(&st, &r);
	assert_true(r.at[1][GM_SP_BACKWARD][GM_SK_GATHER] == EMB + HEAD);
	assert_true(r.at[2][GM_SP_BACKWARD][GM_SK_GATHER] == P_BYTES);
	st.ds.max_live = 8 * MiB / 2;
	emit(&st, &r);
	assert_true(r.at[2][GM_SP_BACKWARD][GM_SK_GATHER] == EMB + HEAD);
	/* offload_param at one rank gathers as at two */
	describe(&st, 3, 1);
	st.ds.off_param = true;
	st.ds.max_reuse = 0;
	st.ds.prefetch = 5e7;
	emit(&st, &r);
	assert_true(r.at[2][GM_SP_BACKWARD][GM_SK_GATHER] == P_BYTES);
}

/* Stage 0's all-reduce (engine.py allreduce_no_retain): a bucket closes
 * once its elements exceed reduce_bucket_size; here 5 Mi elements: the
 * embedding (4 Mi) with block 0's 8 Mi, then ..., each flattened copy a
 * transient after the backward. */
static void zero0_allreduce_buckets(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 0, 1);
	emit(&st, &r);
	/* per step: [emb + blk0 big] 24 MiB, [blk0 small + blk1 big]
	 * 20 MiB, [blk1 small + head] 12 MiB */
	assert_int_equal(r.allocs[GM_SK_COMM], 2 * 3);
	assert_true(r.peak_kind[GM_SK_COMM] == EMB + BIG);
}

/* Stage 1/2's setup_buckets (stage_1_and_2.py): one buffer of
 * reduce_bucket_size elements with contiguous_gradients, a second with
 * overlap_comm (double buffering), none without either; all freed by
 * the end of the backward. */
static void zero2_bucket_buffers(void **state)
{
	static struct gm_step st;
	static struct rec r;

	(void)state;
	describe(&st, 2, 1);
	emit(&st, &r);
	assert_true(r.peak_kind[GM_SK_COMM] == 5 * MiB * 2);
	describe(&st, 2, 1);
	st.ds.overlap = true;
	emit(&st, &r);
	assert_true(r.peak_kind[GM_SK_COMM] == 2 * 5 * MiB * 2);
	assert_true(r.at[2][GM_SP_OPTIMIZER][GM_SK_COMM] < 0.5);
	describe(&st, 2, 1);
	st.ds.contiguous = false;
	emit(&st, &r);
	assert_int_equal(r.allocs[GM_SK_COMM], 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(zero3_keeps_bucket_and_partition),
		cmocka_unit_test(zero3_reduce_stream_and_defragment),
		cmocka_unit_test(zero3_tied_head_last),
		cmocka_unit_test(states_before_the_first_step),
		cmocka_unit_test(zero1_keeps_gradients_to_the_end),
		cmocka_unit_test(offload_keeps_nothing_of_the_optimizer),
		cmocka_unit_test(sub_groups),
		cmocka_unit_test(zero3_gathers_and_reuse),
		cmocka_unit_test(zero3_prefetch_keeps_blocks),
		cmocka_unit_test(zero0_allreduce_buckets),
		cmocka_unit_test(zero2_bucket_buffers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
