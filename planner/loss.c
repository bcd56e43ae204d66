/*
 * loss.c - the loss programs (loss.h).
 *
 * The logits and loss tensors in the order PyTorch allocates and frees
 * them, read off the H200 traces (tests/data/calibration/traces,
 * tools/measure/trace_compare.py):
 *  - causal LM (transformers' ForCausalLMLoss): forward: logits (C), with
 *    C < 4 their fp32 copy (logits.float()), log_softmax's fp32 output
 *    (saved); the copy, then the logits are freed (the harness keeps
 *    only the loss). Backward: nll_loss's fp32 gradient, log_softmax's
 *    fp32 input gradient; the first and the saved output are freed; with
 *    C < 4 the gradient cast back to C (the copy's backward) and the
 *    fp32 one freed; the last one is freed after the head's weight
 *    gradient (and the backward's cuBLAS workspace: step.c).
 *  - BertForMaskedLM (CrossEntropyLoss on the logits): under autocast
 *    (L = 4, fp32 log_softmax) the forward also keeps a C-sized tensor
 *    for the backward (the autocast cast of cross_entropy's input); its
 *    backward frees the saved output before the C-sized gradients.
 *    Without autocast, as the causal fp32 case with C-sized tensors.
 *
 * The peak per logit: ForCausalLMLoss upcasts, so all three tensors at
 * log_softmax's backward are fp32, 12 B, whatever the precision (the
 * 16-bit logits and their fp32 copy die with the forward: 10 B in
 * fp16/bf16, 8 B in fp32, less than 12). CrossEntropyLoss runs
 * log_softmax on the logits with autocast's fp32 output dtype
 * (fp32_set_opt_dtype, no fp32 copy of the input) or in their own dtype
 * without autocast, and its input gradient has the logits' dtype: 2 L + C
 * with L = 4 under autocast, else C. Measured: GPT-2 124M fp32 /
 * bf16-mixed / bf16-true and BERT fp32 / bf16-mixed MLM configurations of
 * tests/data/calibration/measured-h200.json (12, 12, 12, 12, 10 B).
 */
#include "loss.h"

#include "step.h"

static void lop(struct gm_step *st, bool alloc, int id, double bytes)
{
	if (st->n_loss < GM_STEP_LOSS_OPS)
		st->loss[st->n_loss++] = (struct gm_step_lossop){alloc,
			(unsigned char)id, bytes};
}

static double causal_per_logit(double C, bool autocast)
{
	(void)C;
	(void)autocast;
	return 12;
}

/* log_softmax's fp32 input gradient of an fp32 model; 16-bit models
 * free theirs first */
static bool causal_live_at_head(double C)
{
	return C >= 4;
}

static void causal_program(struct gm_step *st, double n, double C,
			   bool autocast)
{
	(void)autocast;
	lop(st, true, 0, n * C);                /* logits */
	if (C < 4)
		lop(st, true, 1, n * 4);        /* logits.float() */
	lop(st, true, 2, n * 4);
	lop(st, false, 1, 0);
	lop(st, false, 0, 0);
	st->n_loss_fwd = st->n_loss;
	lop(st, true, 3, n * 4);                /* nll_loss gradient */
	lop(st, true, 4, n * 4);                /* log_softmax gradient */
	lop(st, false, 3, 0);
	lop(st, false, 2, 0);
	if (C < 4) {                            /* cast back to the logits' */
		lop(st, true, 5, n * C);        /* dtype, freed after the */
		lop(st, false, 4, 0);           /* head's weight gradient */
	}
}

const struct gm_loss gm_loss_causal_lm = {
	.per_logit = causal_per_logit,
	.live_at_head = causal_live_at_head,
	.program = causal_program,
};

static double masked_per_logit(double C, bool autocast)
{
	double L = autocast ? 4 : C;

	return 2 * L + C;
}

/* the C-sized log_softmax gradient */
static bool masked_live_at_head(double C)
{
	(void)C;
	return true;
}

static void masked_program(struct gm_step *st, double n, double C,
			   bool autocast)
{
	if (autocast) {
		lop(st, true, 0, n * C);        /* logits */
		lop(st, true, 1, n * C);        /* kept for backward */
		lop(st, true, 2, n * 4);        /* log_softmax output */
		lop(st, false, 0, 0);
		st->n_loss_fwd = st->n_loss;
		lop(st, true, 3, n * 4);        /* nll_loss gradient */
		lop(st, false, 2, 0);
		lop(st, true, 4, n * C);        /* log_softmax gradient */
		lop(st, false, 3, 0);
		lop(st, true, 5, n * C);        /* through the cast */
		lop(st, false, 4, 0);
		lop(st, false, 1, 0);
		return;
	}
	lop(st, true, 0, n * C);                /* logits */
	lop(st, true, 2, n * C);                /* log_softmax output */
	lop(st, false, 1, 0);
	lop(st, false, 0, 0);
	st->n_loss_fwd = st->n_loss;
	lop(st, true, 3, n * C);
	lop(st, true, 4, n * C);
	lop(st, false, 3, 0);
	lop(st, false, 2, 0);
}

const struct gm_loss gm_loss_masked_lm = {
	.per_logit = masked_per_logit,
	.live_at_head = masked_live_at_head,
	.program = masked_program,
};
