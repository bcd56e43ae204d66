/*
 * optstep.c - the optimizer step's temporaries by implementation
 * (optstep.h), read from PyTorch 2.11.0 torch/optim/adam.py (AdamW is
 * Adam with decoupled_weight_decay=True, torch/optim/adamw.py) and
 * torch/optim/sgd.py:
 *
 *  - foreach (_multi_tensor_adam; the default on CUDA tensors,
 *    optimizer.py _default_to_fused_or_foreach, use_fused=False): the
 *    moments are updated in place (_foreach_lerp_, _foreach_mul_,
 *    _foreach_addcmul_), then exp_avg_sq_sqrt = _foreach_sqrt(exp_avg_
 *    sqs) builds one new tensor per state tensor, divided and shifted in
 *    place, used by _foreach_addcdiv_ and freed as the function returns:
 *    one state-sized list for the whole group ("~ sizeof(params) more
 *    peak memory than the for-loop version", optimizer.py _foreach_doc).
 *  - for-loop (_single_tensor_adam, foreach=False): per tensor,
 *    denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps): the
 *    sqrt and the quotient are new tensors of the state's size, the sqrt
 *    goes as the division returns, and the last tensor's denom is named
 *    until the new one is bound: b[i-1] + 2 b[i] at most, each freed in
 *    turn.
 *  - fused (_fused_adam, fused=True): torch._fused_adamw_ / _fused_adam_
 *    update parameters and moments in one kernel per device and dtype;
 *    no temporary of a tensor's size. Its step counters are device
 *    tensors (_init_group: torch.zeros((), float32) per parameter, where
 *    foreach and for-loop keep them on the CPU): 4 B each, not planned.
 *  - SGD (_single_tensor_sgd, _multi_tensor_sgd, _fused_sgd): with
 *    weight_decay 0, maximize False and no Nesterov, none of the three
 *    makes a temporary (momentum buffers are its state); b is 0.
 * Gradient scaling (fp16-mixed) unscales in place in each
 * (torch._amp_foreach_non_finite_check_and_unscale_, torch/amp/
 * grad_scaler.py; fused optimizers take grad_scale and found_inf).
 */
#include "optstep.h"

#include "error.h"
#include "step_emit.h"

#include <stdlib.h>

static double peak_foreach(const double *b, size_t n)
{
	double s = 0;

	for (size_t i = 0; i < n; i++)
		s += b[i] > 0 ? b[i] : 0;
	return s;
}

/* All allocated in order, then all freed (the list goes as the
 * function returns). */
static void emit_foreach(struct gm_em *e, const double *b, size_t n)
{
	uint32_t *t = malloc((n ? n : 1) * sizeof(*t));

	if (!t) {
		gm_em_fail(e, GM_ENOMEM);
		return;
	}
	for (size_t i = 0; i < n; i++)
		t[i] = gm_em_alloc(e, b[i], GM_SK_OPT_TMP);
	for (size_t i = 0; i < n; i++)
		gm_em_free(e, &t[i]);
	free(t);
}

void gm_optstep_walk_add(struct gm_optstep_walk *w, double b)
{
	if (!(b > 0))
		return;
	if (w->prev + 2 * b > w->peak) {
		w->peak = w->prev + 2 * b;
		w->at = b;
	}
	w->prev = b;
}

static double peak_for_loop(const double *b, size_t n)
{
	struct gm_optstep_walk w = {0, 0, 0};

	for (size_t i = 0; i < n; i++)
		gm_optstep_walk_add(&w, b[i]);
	return w.peak;
}

/* sqrt, quotient, the sqrt freed, the last denom freed as the new one
 * is bound; the last one goes as the function returns. */
static void emit_for_loop(struct gm_em *e, const double *b, size_t n)
{
	uint32_t denom = GM_EM_NONE;

	for (size_t i = 0; i < n; i++) {
		uint32_t sq, q;
		if (!(b[i] > 0))
			continue;
		sq = gm_em_alloc(e, b[i], GM_SK_OPT_TMP);
		q = gm_em_alloc(e, b[i], GM_SK_OPT_TMP);
		gm_em_free(e, &sq);
		gm_em_free(e, &denom);
		denom = q;
	}
	gm_em_free(e, &denom);
}

static double peak_fused(const double *b, size_t n)
{
	(void)b;
	(void)n;
	return 0;
}

static void emit_fused(struct gm_em *e, const double *b, size_t n)
{
	(void)e;
	(void)b;
	(void)n;
}

static const struct gm_optstep_rule rules[] = {
	[GM_OPT_IMPL_FOREACH] = {
		"foreach", "torch 2.11.0 torch/optim/adam.py "
		"_multi_tensor_adam", peak_foreach, emit_foreach},
	[GM_OPT_IMPL_FUSED] = {
		"fused", "torch 2.11.0 torch/optim/adam.py _fused_adam",
		peak_fused, emit_fused},
	[GM_OPT_IMPL_FOR_LOOP] = {
		"for-loop", "torch 2.11.0 torch/optim/adam.py "
		"_single_tensor_adam", peak_for_loop, emit_for_loop},
};

const struct gm_optstep_rule *gm_optstep_rule(enum gm_opt_impl i)
{
	if ((unsigned)i < sizeof(rules) / sizeof(rules[0]))
		return &rules[i];
	return &rules[GM_OPT_IMPL_FOREACH];
}
