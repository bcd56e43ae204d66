/*
 * optstep.h - what one torch.optim step allocates beyond the optimizer's
 * states, by implementation (training.optimizer_implementation; the
 * table and its sources: optstep.c). The states themselves are states.h's.
 *
 * A step visits the tensors of a parameter group in order
 * (named_parameters() for a model's own optimizer); b[i] below is the
 * bytes of one temporary of tensor i: its elements in the state's dtype
 * for Adam(W), 0 for SGD with or without momentum (weight_decay 0 and
 * maximize False, PyTorch's defaults: every implementation updates in
 * place) and for a tensor the step skips (no gradient). Units: bytes.
 */
#ifndef GM_OPTSTEP_H
#define GM_OPTSTEP_H

#include <stddef.h>

#include "spec.h"

struct gm_em;

/* One implementation's rule. */
struct gm_optstep_rule {
	const char *name;   /* training.optimizer_implementation's value */
	const char *source; /* the function that steps, file and version */
	/* the most temporary bytes live at once over b[0..n) */
	double (*peak)(const double *b, size_t n);
	/* its requests: allocate and free, in order */
	void (*emit)(struct gm_em *e, const double *b, size_t n);
};

/* The row of implementation i (every enum gm_opt_impl has one). */
const struct gm_optstep_rule *gm_optstep_rule(enum gm_opt_impl i);

/*
 * The for-loop's running peak over tensors visited one at a time: add
 * each tensor's b in order (0: not visited). peak is max over i of
 * b[i-1] + 2 b[i] (the tensor before's quotient still named while this
 * one's sqrt and quotient are live).
 */
struct gm_optstep_walk {
	double prev, peak;
	double at;          /* b of the tensor where peak was reached */
};
void gm_optstep_walk_add(struct gm_optstep_walk *w, double b);

#endif
