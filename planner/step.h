/*
 * step.h - the allocation sequence of modelled training steps or
 * inference passes, and its replay through the allocator core (step.c).
 *
 * The memory model (model.c) fills a struct gm_step from its terms: the
 * bytes of every parameter tensor of the stage (shapes from params.c),
 * of every saved activation of a block, of the transients, logits,
 * buffers. gm_step_emit() turns it into the allocate/free calls PyTorch
 * would issue, in order, for `steps` steps (see step.c for the order and
 * where it follows the model's simplifications); gm_step_replay() drives
 * the caching allocator core (allocator/core/pool.h) on its simulated
 * backend with them and reads the peak reserved bytes: the planner's
 * peak_reserved_bytes (ARCHITECTURE.md, "One engine").
 *
 * Units: bytes (double in the description, as the model computes them;
 * each request is rounded up to a whole byte when emitted). Errors: 0 or
 * a negative GM_E* (GM_ENOMEM host memory, GM_EDEVNOMEM / GM_ELIMIT from
 * the pool, GM_EINVAL an inconsistent description).
 */
#ifndef GM_STEP_H
#define GM_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "activations.h"
#include "params.h"
#include "step_ds.h"

/* What an allocation holds (for tests and reports). GATHER: FSDP's
 * all-gather output, REDUCE: its reduce-scatter output (the sharded
 * gradient); each is allocated on its own CUDA stream, as FSDP2 does
 * (all_gather_stream, reduce_scatter_stream), so the caching allocator
 * reuses their blocks only for that stream. */
enum gm_step_kind {
	GM_SK_WEIGHT, GM_SK_WORKSPACE, GM_SK_COMM, GM_SK_STATE, GM_SK_GRAD,
	GM_SK_ACT, GM_SK_CACHE, GM_SK_TRANSIENT, GM_SK_LOGITS, GM_SK_OPT_TMP,
	GM_SK_KV, GM_SK_GATHER, GM_SK_REDUCE,
	/* on a reduce stream of its own (DeepSpeed ZeRO-3's
	 * reduce_and_partition_stream): the reduce-scatter's flat input
	 * (row communication), the gradient copies made there (row
	 * temporary) */
	GM_SK_RCOMM, GM_SK_RTMP, GM_SK_N
};

/* The stream an allocation of kind k is made on: 0 the default one, 1
 * FSDP's all-gather stream, 2 a reduce stream (FSDP's reduce-scatter
 * outputs, DeepSpeed ZeRO-3's reduce work). */
unsigned gm_step_kind_stream(enum gm_step_kind k);

/* Which part of a step an allocation belongs to (for traces). */
enum gm_step_phase {
	GM_SP_SETUP, GM_SP_FORWARD, GM_SP_LOSS, GM_SP_BACKWARD,
	GM_SP_OPTIMIZER, GM_SP_INFER, GM_SP_TEARDOWN, GM_SP_N
};

/* The report's rows (model.h struct gm_parts), in its order: each kind
 * belongs to one (gm_step_kind_row), the one definition both of the
 * report's sections use. */
enum gm_step_row {
	GM_SR_WEIGHTS, GM_SR_GRADIENTS, GM_SR_OPTIMIZER, GM_SR_ACTIVATIONS,
	GM_SR_LOGITS, GM_SR_TEMPORARY, GM_SR_KV, GM_SR_COMM, GM_SR_WORKSPACE,
	GM_SR_N
};

/* The row of kind k: weights (parameters as allocated: shards, and
 * FSDP's unsharded copies on the default stream), gradients (with
 * FSDP's unsharded gradients and reduce-scatter outputs), optimizer
 * states, activations (saved for backward, recomputed ones included),
 * logits, temporary (transients, autocast's weight cache, the
 * optimizer's temporaries), kv cache, communication (bucket copies,
 * all-gather outputs), workspace. */
enum gm_step_row gm_step_kind_row(enum gm_step_kind k);

/* Short names ("weight", ...; "forward", ...) for traces. */
const char *gm_step_kind_name(enum gm_step_kind k);
const char *gm_step_phase_name(enum gm_step_phase p);

/* Where a parameter tensor sits in the forward order. */
enum gm_step_where { GM_STEP_EMBED, GM_STEP_LAYER, GM_STEP_HEAD };

/* Which of the stage's blocks hold a LAYER tensor: every one, or only
 * those below gm_step.span_split (DeepSeek-V3's dense MLP, in the first
 * model.dense_layers blocks), or only those from it on (its routed
 * experts and router). */
enum gm_step_span { GM_STEP_SPAN_ALL, GM_STEP_SPAN_LOW, GM_STEP_SPAN_HIGH };

#define GM_STEP_STATES 4

/* One step of the loss's allocation program (see gm_step.loss). */
struct gm_step_lossop {
	bool alloc;     /* allocate slot id (else free it) */
	unsigned char id; /* 0 .. GM_STEP_LOSS_IDS - 1 */
	double bytes;   /* alloc: bytes */
};

#define GM_STEP_LOSS_OPS 16
#define GM_STEP_LOSS_IDS 8

/* One parameter tensor of the stage (a LAYER tensor: one per block). */
struct gm_step_param {
	enum gm_step_where where;
	bool grad_at_loss;   /* its gradient appears at the loss (the head's
			      * matmul weights) */
	bool grad_shared;    /* its gradient is another tensor's (the input
			      * embedding tied to lm_head on one stage) */
	double weight, grad, cache, opt_tmp; /* bytes of each (0: none) */
	double bcache;       /* bytes of a trainable linear bias's autocast
			      * copy (cached like a weight's, saved by no
			      * node: freed when the forward's autocast
			      * context exits, or the recompute's), 0:
			      * none */
	double elems;        /* elements of one block's tensor on this
			      * tensor-parallel rank, unsharded (the
			      * block program's GM_BOP_PGRAD names it) */
	double built;        /* bytes as the model was built, before a
			      * parallel wrapper sharded it (FSDP2's
			      * fully_shard, tensor parallel's
			      * parallelize_module); 0: built as it is */
	double state[GM_STEP_STATES];        /* optimizer state tensors */
	int n_state;
	bool added;          /* added to the built model (a PEFT adapter's
			      * lora_A / lora_B): allocated after every
			      * tensor of the model, layer by layer */
	enum gm_step_span span; /* the blocks that hold it (a block
				 * outside holds none of it: sizes above
				 * are one holding block's) */
};

/*
 * Inference: the shapes of one pass on this rank, from which step.c
 * emits every tensor of a Hugging Face forward (and of generate()) that
 * scales with the batch, the sequence or the vocabulary, with its exact
 * size. Widths are per tensor-parallel rank (q = heads x head_dim, kv =
 * kv heads x head_dim, ffn, vocab divided by the degree; hidden not).
 */
struct gm_family;
struct gm_mg_step;

struct gm_step_infer {
	const struct gm_family *fam; /* the model's family (its inference
				      * layer, embedding and head) */
	bool first, last;       /* this stage embeds / holds the head */
	bool lm_head;           /* logits over the vocabulary (else a
				 * classifier's, negligible) */
	bool last_decode_only;  /* emit the prefill and only the last
				 * decode step (the same peak of live
				 * bytes, far fewer calls: gm_step_peak) */
	uint64_t batch, prompt; /* prompt: tokens of the forward pass */
	uint64_t generate;      /* new tokens (0: one forward pass) */
	double hidden, q, kv, ffn, vocab, head_dim;
	double ffn_expert;      /* MoE: one expert's MLP width */
	double experts, topk;   /* MoE: routed experts, experts per token
				 * (0: a dense MLP) */
	double c;               /* bytes per activation element */
	double kvb;             /* bytes per KV-cache element */
	double kv_v;            /* elements per token of the cache's value
				 * tensor (kv: of its key tensor); kv unless
				 * the family's infer_shapes sets it */
	uint64_t layer0;        /* this stage's first block in the model */
	uint64_t window;        /* a sliding window's tokens (every layer
				 * a DynamicSlidingWindowLayer); 0: none */
	/* Multi-head latent attention (family infer_shapes; heads and
	 * ffn_shared per tensor-parallel rank, the latent widths whole) */
	struct {
		double heads, q_lora, kv_lora, rope, nope, v;
		double ffn_shared;      /* the shared experts' MLP width */
		uint64_t dense_layers;  /* blocks 0 .. dense_layers - 1
					 * have a dense MLP */
	} mla;
};

/*
 * Training: one block's allocation program (planner/block.c builds it
 * from the shapes with a small autograd tape; step.c runs it for every
 * block and micro-batch). ops[0 .. n_fwd) are the forward, ops[n_fwd ..
 * n) the backward. Ids are the block's own (GM_BLK_*: its input, its
 * output, their gradients; the rest local); each (micro-batch, block)
 * has its own set.
 *  ALLOC id bytes: a tensor; FREE id: released (in backward: the saved
 *  tensor's original and its recomputed copy);
 *  DROP id: the last Python reference of a tensor autograd saved: freed
 *  here when the block does not keep it (full checkpointing: every DROP;
 *  selective: those with core set), else it lives until its FREE in the
 *  backward;
 *  RECOMPUTE: selective checkpointing re-runs the forward's core ops
 *  (the attention function) here; full checkpointing re-runs the whole
 *  forward at the start of the backward instead;
 *  HOLD id: an object outside the block takes a reference to the tensor
 *  (the DynamicCache past_key_values, gm_step.kv_cache): the program's
 *  own FREE / DROP of it then only drops the program's reference, and
 *  the tensor lives until the training loop lets the cache go too
 *  (gm_step.keep_outputs).
 *  PGRAD id elements (backward only): a weight's gradient of that many
 *  elements is made here (the mm / grouped_mm node, or under autocast
 *  the weight's cast back): step.c allocates the gradient of the block's
 *  first parameter of that size that has none from this backward yet
 *  (gm_step_param.elems; equal-sized weights are interchangeable for
 *  the allocator), or, where one exists from an earlier micro-batch,
 *  the product under id, which the program frees once AccumulateGrad
 *  added it (torch 2.11 torch/csrc/autograd/functions/accumulate_grad.h
 *  accumulateGrad: the first gradient is stolen, later ones added in
 *  place). Parameters no PGRAD names get theirs after the block.
 *  WCAST elements (forward only): under autocast a linear casts its
 *  weight of that many elements here, before its input (torch.autocast
 *  caches the copy of a leaf parameter until the forward's autocast
 *  context exits): step.c allocates the autocast copy of the block's
 *  first parameter of that size it has not cast in this block's
 *  forward (or recompute); where the program's WCASTs do not name
 *  every parameter with a copy, all of them are made at the block's
 *  start instead.
 *  BCAST elements (forward only): the same for a linear's bias
 *  (gm_step_param.bcache), where autocast casts it: before the weight
 *  for F.linear, after the input for GPT-2's Conv1D (addmm); the copy
 *  is freed where the autocast context exits.
 * core marks the ops of the attention function (tools/measure/
 * selective.py wraps exactly that function in torch.utils.checkpoint).
 */
enum gm_step_bop { GM_BOP_ALLOC, GM_BOP_FREE, GM_BOP_DROP, GM_BOP_RECOMPUTE,
		   GM_BOP_HOLD, GM_BOP_PGRAD, GM_BOP_WCAST, GM_BOP_BCAST };

enum { GM_BLK_IN, GM_BLK_OUT, GM_BLK_GOUT, GM_BLK_GIN, GM_BLK_FIRST };

struct gm_step_blockop {
	unsigned char op;       /* enum gm_step_bop */
	unsigned char kind;     /* enum gm_step_kind of an ALLOC */
	unsigned char core;
	unsigned short id;
	double bytes;
};

#define GM_STEP_BLOCK_OPS 640
#define GM_STEP_LORA_MAX 8
#define GM_STEP_BLOCK_IDS 384

enum gm_step_ckpt { GM_STEP_CKPT_NONE, GM_STEP_CKPT_FULL,
		    GM_STEP_CKPT_SELECTIVE };

struct gm_step_block {
	int n, n_fwd;           /* 0: no program (the aggregates act[],
				 * trans are used) */
	int n_ids;              /* ids used, <= GM_STEP_BLOCK_IDS */
	enum gm_step_ckpt ckpt;
	double in_bytes;        /* the first block's input (the embedding
				 * output), allocated by the forward */
	double gout_bytes;      /* the last block's output gradient */
	double mask_bytes;      /* the model's attention mask, allocated
				 * before the first block's forward and
				 * freed after the last one's */
	double mask_fn_bytes;   /* the mask function's (s, s) bool, made
				 * before the mask and freed once it is */
	int gin_id;             /* the id of the input's gradient at the
				 * end of the backward (GM_BLK_GOUT of the
				 * block before) */
	bool reentrant;         /* full checkpointing is reentrant
				 * (CheckpointFunction): the backward
				 * re-runs the whole forward, its output
				 * kept to the block's backward's end */
	int n_lora;             /* the LoRA adapters the program applies:
				 * each linear's in and out features */
	struct {
		double in, out;
	} lora[GM_STEP_LORA_MAX];
	struct gm_step_blockop op[GM_STEP_BLOCK_OPS];
};

/* The shapes planner/block.c builds a block program from, per tensor-
 * parallel rank (q, kv, ffn, heads divided by the degree). */
struct gm_step_shape {
	const struct gm_family *fam; /* the model's family (its block) */
	bool eager;             /* eager attention (else sdpa / flash) */
	bool autocast;          /* torch.autocast: casts before matmuls */
	bool dropout;           /* training dropout p > 0 (the family's
				 * default) */
	bool qkv_bias;          /* q/k/v biases (model.qkv_bias) */
	bool kv_cache;          /* the forward builds past_key_values
				 * (planner/loop.h): the block calls
				 * gm_blk_kv_cache() */
	enum gm_step_ckpt ckpt;
	double tok, seq;        /* tokens of the micro-batch, sequence */
	double hidden, q, kv, ffn, heads, head_dim;
	double c, r;            /* compute, residual bytes per element */
	bool bf16;              /* the 16-bit dtype is bfloat16 (else
				 * float16) */
	/* MoE families: the routed experts (model.experts), the top-k
	 * (experts_per_token), one expert's FFN width per tensor-parallel
	 * rank (moe_ffn_hidden_size / t), the shared experts' FFN width
	 * (shared_experts x moe_ffn_hidden_size / t); moe_layer: this
	 * block's MLP is routed (else dense, of width ffn) */
	double experts, topk, ffn_expert, ffn_shared;
	bool moe_layer;
	/* multi-head latent attention (GM_FK_MLA): q_lora_rank (0: one
	 * q_proj), kv_lora_rank, qk_rope_head_dim, qk_nope_head_dim,
	 * v_head_dim */
	double q_lora, kv_lora, rope_dim, nope_dim, v_dim;
	/* training.adapter lora (NULL or adapter none: every weight
	 * trains): the base weights are frozen, and the linears a family's
	 * block names (gm_blk_linear_named) that match lora_targets carry
	 * LoRA's two matmuls of rank lora_rank (planner/step_adapter.c) */
	const struct gm_spec_training *adapter;
	bool reentrant;         /* full checkpointing by torch.utils.
				 * checkpoint(use_reentrant=True) */
	bool in_no_grad;        /* the block input does not require grad
				 * (the first block under a frozen
				 * embedding): ops on it alone record no
				 * autograd node */
	unsigned sms, sm_threads; /* the GPU's multiprocessors, resident
				   * threads per one (0: not known), for
				   * reduction staging (reduce.h) */
};

struct gm_step {
	bool training;
	unsigned steps;         /* steps (or passes) to emit, >= 1 */
	unsigned steps_max;     /* then more, up to this many, until the
				 * sink finds them steady (gm_step_next);
				 * <= steps: none */
	uint64_t layers;        /* blocks on this stage, >= 1 */
	uint64_t ga;            /* micro-batches per step, >= 1 */
	uint64_t in_flight;     /* micro-batches in flight (1F1B), >= 1 */
	uint64_t micro_max;     /* micro-batches emitted per step (<= ga;
				 * later ones repeat the second) */
	int n_param;
	struct gm_step_param p[GM_PARAMS_MAX];
	int n_act;
	double act[GM_ACT_MAX]; /* saved per block and micro-batch */
	double emb_saved;       /* input ids, labels, embedding saves */
	double emb_named;       /* an embedding output the base model's
				 * forward names until it returns (GPT-2's
				 * inputs_embeds), 0: none */
	double emb_sum;         /* GPT-2: inputs_embeds + position_embeds,
				 * freed once the first block's input (its
				 * dropout) exists; the eager mask is made
				 * before that dropout */
	double emb_pos;         /* GPT-2: position_embeds (wpe's (1, s, h)
				 * output), named until the base model's
				 * forward returns; 0: none */
	bool emb_in_named;      /* the first block's input is that named
				 * output (Llama's inputs_embeds): it lives
				 * to the forward's end */
	double head_saved;      /* final norm and lm_head inputs */
	bool head_unsaved;      /* lm_head does not save its input (a
				 * frozen lm_head needs only its weight for
				 * the input's gradient): the head program's
				 * output is freed where the model's forward
				 * returns, after the loss */
	double trans;           /* one block's transient (fwd and bwd) */
	struct gm_step_block blk; /* when blk.n > 0: the block's program
				   * instead of act[] and trans */
	struct gm_step_block blk0; /* when blk0.n > 0 (and blk.n > 0): the
				    * first blocks' own program (its input
				    * does not require grad: a frozen
				    * embedding; or the dense blocks before
				    * the routed ones), n_ids <= blk.n_ids */
	uint64_t blk0_layers;   /* the blocks blk0 runs (0: the first) */
	uint64_t span_split;    /* the first block of GM_STEP_SPAN_HIGH
				 * tensors, the end of GM_STEP_SPAN_LOW's */
	struct gm_step_block head; /* when head.n > 0 (and blk.n > 0): the
				    * final norm's program (block.h) instead
				    * of head_saved */
	double logits_held;     /* training: logits in the compute dtype */
	double logits_piece;    /* training: each of the 3 fp32 tensors of
				 * the loss (copy, log_softmax, gradients) */
	/* training, when n_loss > 0 (then logits_held and logits_piece are
	 * not used): the logits and loss tensors as PyTorch allocates and
	 * frees them, loss[0 .. n_loss_fwd) at the end of the forward,
	 * loss[n_loss_fwd .. n_loss) at the start of the backward; what is
	 * still live then is freed after the head's gradients */
	int n_loss, n_loss_fwd;
	struct gm_step_lossop loss[GM_STEP_LOSS_OPS];
	/*
	 * What the training loop keeps across a forward's end (planner/
	 * loop.h; step.c, "The training loop"): keep_outputs: the logits
	 * (loss program id 0) and the cache of one forward live until the
	 * next forward has returned; else the cache goes when the forward
	 * returns. kv_cache: the blocks' DynamicCache (HOLD ops of a block
	 * program; without a program, kv_block bytes for each of K and V
	 * per block, copies under autocast, else the saved K and V
	 * themselves). grads_to_next_forward: zero_grad runs after the
	 * next forward, before its backward (Lightning's closure), so a
	 * step's gradients live through the next forward.
	 */
	bool keep_outputs, kv_cache, kv_copies, grads_to_next_forward;
	double kv_block;
	bool opt_tmp_per_tensor; /* Adafactor: 3 temporaries per tensor,
				  * freed before the next; else opt_impl's */
	enum gm_opt_impl opt_impl; /* torch.optim's implementation: p[].opt_tmp
				    * as one foreach list over all tensors
				    * (slot order), one tensor at a time in
				    * named_parameters() order (for-loop), or
				    * none (fused); planner/optstep.h */
	int n_comm;
	struct {
		double bytes;
		uint64_t count;
	} comm[3];              /* data-parallel buffers (persistent):
				 * count alike of bytes each */
	double workspace;       /* cuBLAS workspace */
	/*
	 * DistributedDataParallel (torch/nn/parallel/distributed.py with
	 * find_unused_parameters=False, gradient_as_bucket_view=False;
	 * then n_comm is 0): at construction _sync_module_states
	 * broadcasts the weights through coalesced buffers of about
	 * ddp_bcast_cap bytes, and _ddp_init_helper builds ONE bucket of
	 * every gradient (bucket_size_limits = [sys.maxsize]: the order
	 * is not known yet); the forward of the second step rebuilds the
	 * buckets in the order the gradients became ready, the first of
	 * ddp_first_cap bytes (dist._DEFAULT_FIRST_BUCKET_BYTES), the
	 * others of ddp_cap (bucket_cap_mb), and frees the single one.
	 */
	bool ddp;
	double ddp_bcast_cap, ddp_first_cap, ddp_cap;
	/*
	 * FSDP2 fully_shard per block, then on the root (the embedding,
	 * final norm and head), reshard_after_forward (ZeRO-3) over
	 * fsdp_d ranks: p[].weight / grad / state are the shards; step.c
	 * emits the unsharded parameters and gradients, the all-gather
	 * and reduce-scatter buffers (see "FSDP2" there).
	 */
	bool fsdp;
	bool fsdp_keep;         /* reshard_after_forward=False (PyTorch's
				 * ZeRO-2): a block stays unsharded from its
				 * forward to its post-backward */
	double fsdp_d;
	/* bytes of an unsharded parameter (and of its unsharded gradient)
	 * per byte of its shard's element: 1 when FSDP unshards in the
	 * parameters' own dtype; 0.5 under MixedPrecisionPolicy
	 * (param_dtype 16-bit over fp32 shards), whose reduce-scatter input
	 * stays in reduce_dtype fp32, the shards' dtype. 0 = 1. */
	double fsdp_unshard;
	/*
	 * ZeroRedundancyOptimizer over zero1_d ranks (2 .. 256; else the
	 * even split of p[].state): p[].state and opt_tmp are the even
	 * shares; step.c gives the most loaded rank's whole tensors
	 * instead (see "ZeRO-1" there).
	 */
	unsigned zero1_d;
	struct gm_step_infer inf; /* inference: the pass's shapes */
	/* DeepSpeed's engine (step_ds.h; ds.on false: none). p[].weight and
	 * grad are then the 16-bit tensors as built, n_state 0: the engine
	 * emits its partitions, masters and states itself. */
	struct gm_step_ds ds;
	/* Megatron-LM: when set, the step is this one, emitted by
	 * gm_mg_emit() (step_megatron.h), and the fields above are unused */
	const struct gm_mg_step *megatron;
};

/* Receives the sequence. id: a slot, reused after its free. */
struct gm_step_sink {
	void *ctx;
	int (*alloc)(void *ctx, uint32_t id, uint64_t bytes,
		     enum gm_step_kind kind);
	int (*free)(void *ctx, uint32_t id);
	void (*step)(void *ctx, unsigned step); /* a step begins; may be
						 * NULL */
	void (*phase)(void *ctx, enum gm_step_phase ph); /* may be NULL */
	/* torch.cuda.empty_cache(): the cached segments released; may be
	 * NULL (a sink that keeps no pool) */
	int (*empty_cache)(void *ctx);
	/* Where each step's repeated calls begin: keep the sink's state,
	 * and with compare, return 1 when no more steps are needed (it
	 * equals the one kept last, or the sink has its answer: a replay
	 * that ran out of memory), 0 else, < 0 an error. May be NULL (no
	 * state). */
	int (*steady)(void *ctx, bool compare);
};

/*
 * The step loop of an emitter whose steps from the second on make the
 * same calls (in the same order, with the same sizes and kinds):
 * gm_step_next() before step s says whether to emit it: every one up to
 * steps, then more, up to steps_max, while the sink's state at a step's
 * start differs from the one at the last step's (and the sink has no
 * answer yet), so that the steps replayed reach the steady state (under a card too small, PyTorch's
 * release of its cache and retry leaves a pool that the next step finds
 * otherwise). gm_step_mark() where step s's repeated calls begin (after
 * what only that step does); it keeps the state for the first
 * comparison. *err: the emitter's error, set from the sink's.
 */
#define GM_STEP_STEADY_MAX 8 /* steps a replay goes to, at most */

bool gm_step_next(const struct gm_step_sink *sink, unsigned s, unsigned steps,
		  unsigned steps_max, int *err);
/*
 * An emitter's stack of free ids (the last one is taken next) put in one
 * order, the lowest taken first, where each step from the second on
 * begins: two steps that begin with the same ids live then give their
 * tensors the same ids, and the replay's checkpoints inside a step
 * (which id holds which block) can find the step repeating the last.
 * A sink sees ids only as names, so no figure depends on it.
 */
void gm_step_ids_order(uint32_t *free_ids, uint32_t n);
void gm_step_mark(const struct gm_step_sink *sink, unsigned s, unsigned steps,
		  unsigned steps_max, int *err);

/*
 * Emit the sequence of st to sink: persistent tensors, then st->steps
 * steps, then frees of everything still live (so every allocation is
 * freed once). Returns 0, a sink's error, GM_EINVAL or GM_ENOMEM.
 */
int gm_step_emit(const struct gm_step *st, const struct gm_step_sink *sink);

/* The peak of live bytes of a sequence, without the pool. */
#define GM_STEP_GROUPS 64

struct gm_step_peak {
	double peak;            /* live bytes as requested (of the kinds
				 * asked for), at most */
	double kind[GM_SK_N];   /* of which each kind */
	double row_max[GM_SR_N]; /* each row's own largest live bytes over
				  * the sequence (gm_step_kind_row) */
	enum gm_step_phase phase; /* the phase it is reached in */
	double phase_peak[GM_SP_N]; /* the peak inside each phase */
	int n_group;            /* the live allocations then, grouped by
				 * size and kind (the largest groups first
				 * when there are more than GM_STEP_GROUPS) */
	struct {
		double bytes, count;
		enum gm_step_kind kind;
	} group[GM_STEP_GROUPS];
};

/*
 * Emit st to a counting sink and return the peak of the live bytes of
 * the kinds in the bit mask kinds (1 << GM_SK_x; GM_STEP_ALL: all), the
 * first moment it is reached, with what is live then. Returns 0,
 * GM_EINVAL or GM_ENOMEM.
 */
#define GM_STEP_ALL ((1u << GM_SK_N) - 1)
/* or'ed into kinds: skip the grouping (one emission instead of two) */
#define GM_STEP_NOGROUP (1u << 31)

int gm_step_peak(const struct gm_step *st, unsigned kinds,
		 struct gm_step_peak *out);

/* What a replay found. */
struct gm_step_result {
	double peak_reserved;   /* the pool's peak reserved bytes */
	unsigned peak_reserved_step; /* step (pass) in which it was reached,
				      * 0 = before the first step */
	double peak_requested;  /* live bytes as requested, peak */
	double peak_allocated;  /* live blocks' sizes, peak: PyTorch's
				 * allocated_bytes (the block a request got,
				 * remainders it did not split off included;
				 * c10/cuda/CUDACachingAllocator.cpp, 2.11.0),
				 * what max_memory_allocated() reports */
	uint64_t live_at_peak;  /* live allocations at peak_requested */
	uint64_t allocations;   /* allocate calls */
	unsigned steps;         /* steps (passes) replayed: st->steps, or
				 * more until steady (gm_step_next) */
	/* A request failed on the card even after the pool freed its cache
	 * and retried: where the run would stop with an out-of-memory
	 * error. The replay then went on on a card grown by what was
	 * lacking (card_needed), so the peaks are those of that card. */
	bool out_of_memory;
	double oom_requested;   /* the first refused request */
	double oom_allocated;   /* live bytes (rounded) then */
	double oom_reserved;    /* reserved then: what the card held */
	double card_needed;     /* the simulated card's final capacity */
	uint64_t served;        /* requests answered from a recorded cycle
				 * instead of the pool (step.c; the other
				 * figures are those of the full replay) */
	uint64_t skipped;       /* calls (allocations and frees) counted but
				 * not replayed: the rest of a step shown to
				 * repeat the last one's (step.c, struct
				 * rp_ck; the figures are the full replay's) */
};

/*
 * Replay st through a gm_pool (PyTorch's policy, no cap) on a simulated
 * card of capacity_bytes (what the allocator may take: the card less the
 * CUDA context; 0: 1 PiB). Reserved never exceeds the card: when a
 * segment does not fit, the pool frees its cached blocks and retries,
 * as PyTorch does. A request that still fails is recorded
 * (out_of_memory) and the card grown by what it lacked, so the figures
 * say how much card the step needs with those retries. Returns 0 or a
 * negative GM_E*.
 */
int gm_step_replay(const struct gm_step *st, uint64_t capacity_bytes,
		   struct gm_step_result *out);

/*
 * gm_step_replay() that only answers whether the step gets through on
 * the card: it ends at the first refused request (out_of_memory set, the
 * other figures those reached until then). For sizing searches.
 */
int gm_step_replay_fits(const struct gm_step *st, uint64_t capacity_bytes,
			struct gm_step_result *out);

struct gm_sim_options;
struct gm_pool_options;

/* What an observer learns beyond the pool call. */
struct gm_step_event {
	enum gm_step_kind kind;   /* of the allocation (freed or made) */
	enum gm_step_phase phase; /* of the step when it happened */
	unsigned step;            /* 0 = before the first */
	uint64_t reserved;        /* the pool's reserved bytes after it */
};

/*
 * Sees every pool call of a replay (gpumem plan --trace writes them as
 * RMM CSV): begin() before the replay, then one
 * event per allocate (alloc true) or free, with the pool's address, the
 * requested bytes and info. event() returns 0 or a negative GM_E*, which ends
 * the replay.
 */
struct gm_step_observer {
	void *ctx;
	/* so, po: the simulated card and pool options of this replay */
	int (*begin)(void *ctx, const struct gm_sim_options *so,
		     const struct gm_pool_options *po);
	int (*event)(void *ctx, bool alloc, uint64_t addr, uint64_t bytes,
		     const struct gm_step_event *info);
	/* the pool released its cached segments (the step called
	 * torch.cuda.empty_cache()); may be NULL */
	int (*empty_cache)(void *ctx, const struct gm_step_event *info);
};

/* gm_step_replay() with an observer (obs may be NULL). */
int gm_step_replay_observed(const struct gm_step *st,
			    uint64_t capacity_bytes,
			    struct gm_step_result *out,
			    const struct gm_step_observer *obs);

/*
 * gm_step_replay_observed(st, capacity_bytes, out, obs) and
 * gm_step_peak(st, GM_STEP_ALL | GM_STEP_NOGROUP, peak) from one
 * emission of st (the counting sink is fed the replay's calls): the same
 * figures, events and return codes as the two calls (the replay's
 * returned, the count's in *peak_rc), the emitter run once.
 */
int gm_step_replay_peak(const struct gm_step *st, uint64_t capacity_bytes,
			struct gm_step_result *out,
			const struct gm_step_observer *obs,
			struct gm_step_peak *peak, int *peak_rc);

/*
 * The replay with every request made on the pool (the others answer a
 * repeated run of small-pool requests from a record when that is
 * provably the pool's answer: step.c, "Serving a repeated run"): as
 * gm_step_replay_fits() when fits_only, else as
 * gm_step_replay_observed(). For tests that both give the same figures
 * and events.
 */
int gm_step_replay_plain(const struct gm_step *st, uint64_t capacity_bytes,
			 bool fits_only, struct gm_step_result *out,
			 const struct gm_step_observer *obs);

#endif
