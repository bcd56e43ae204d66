/*
 * loss.h - the loss over a language-model head's logits, as the
 * framework computes it (loss.c): its peak per logit and its allocation
 * program (step.h's gm_step.loss). A family points at one (family.h).
 *
 * Units: bytes; n is the logits' elements on one rank (tokens x vocab,
 * / the vocabulary's tensor-parallel degree), C the logits' bytes per
 * element (the compute dtype). No errors.
 */
#ifndef GM_LOSS_H
#define GM_LOSS_H

#include <stdbool.h>

struct gm_step;

struct gm_loss {
	/* Live bytes per logit at the backward's peak (log_softmax's
	 * backward: its saved output, the gradient nll_loss returns for it
	 * and the gradient it computes). */
	double (*per_logit)(double C, bool autocast);
	/* Whether a C-sized loss tensor is still live when the head's
	 * gradients appear. */
	bool (*live_at_head)(double C);
	/* Append the program to st->loss (st->n_loss is 0), setting
	 * st->n_loss_fwd where the forward's part ends. */
	void (*program)(struct gm_step *st, double n, double C,
			bool autocast);
};

/* transformers' ForCausalLMLoss (loss_utils.py): logits.float(), then
 * cross_entropy. */
extern const struct gm_loss gm_loss_causal_lm;

/* CrossEntropyLoss on the logits as they are (BertForMaskedLM). */
extern const struct gm_loss gm_loss_masked_lm;

#endif
