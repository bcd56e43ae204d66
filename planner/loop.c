/*
 * loop.c - the loop table (loop.h), one row per training.loop value.
 *
 *  - trainer: only the loss leaves the forward call. transformers 5.17
 *    Trainer.compute_loss returns `loss` and its `outputs` go out of
 *    scope as it returns, before training_step's backward; accelerate's
 *    `loss = model(**batch).loss` drops the output object at once.
 *    What the forward's outputs referenced (past_key_values) goes when
 *    the forward returns.
 *  - keep-outputs: the transformers documentation's native loop
 *    (`outputs = model(**batch); loss = outputs.loss; loss.backward();
 *    optimizer.step(); optimizer.zero_grad()`): Python rebinds `outputs`
 *    only when the next call has returned, so a forward's logits and
 *    past_key_values live through its backward and optimizer step and
 *    through the whole next forward (the loss included: the model
 *    computes it when given labels). The backward frees what autograd
 *    saved, not what `outputs` names.
 *  - lightning: Lightning 2.6.6's automatic optimization
 *    (lightning/pytorch/loops/optimization/automatic.py, Closure.closure):
 *    training_step runs, then zero_grad_fn, then backward_fn; the
 *    optimizer step calls the closure, so the last step's gradients
 *    (optimizer.zero_grad(), set_to_none=True by default: core/module.py
 *    optimizer_zero_grad) live through the next training_step's forward.
 *    With gradient accumulation zero_grad_fn exists only for the first
 *    batch of each accumulation window (_make_zero_grad_fn), which is
 *    the forward after which step.c frees them.
 *    training_step returns the loss, so the outputs go as with trainer.
 *    Its precision plugin (plugins/precision/amp.py,
 *    autocast_context_manager) runs torch.autocast with
 *    cache_enabled=False: the planner's autocast copies are the same
 *    bytes while every weight is cast once per forward (no checkpointing,
 *    no shared weights), which is not modelled separately here.
 */
#include "loop.h"

#include "arch/family.h"
#include "step.h"

static const struct gm_loop_rule rules[] = {
	[GM_LOOP_TRAINER] = {
		.name = "trainer",
		.source = "transformers 5.17 trainer.py Trainer.compute_loss"},
	[GM_LOOP_KEEP_OUTPUTS] = {
		.name = "keep-outputs", .keep_outputs = true,
		.source = "the transformers documentation's training loop "
			  "(outputs = model(**batch))"},
	[GM_LOOP_LIGHTNING] = {
		.name = "lightning", .grads_to_next_forward = true,
		.source = "lightning 2.6.6 loops/optimization/automatic.py "
			  "Closure.closure"},
};

const struct gm_loop_rule *gm_loop_rule(enum gm_loop l)
{
	if ((unsigned)l < sizeof(rules) / sizeof(rules[0]))
		return &rules[l];
	return &rules[GM_LOOP_TRAINER];
}

bool gm_loop_kv_cache(const struct gm_spec *s)
{
	const struct gm_family *f = gm_family(s->model.architecture);

	if (s->task != GM_TASK_TRAIN || !f->shaped || f->encoder ||
	    s->training.framework == GM_FW_MEGATRON)
		return false;
	if (s->training.use_cache == GM_CACHE_FALSE)
		return false;
	return s->training.activation_checkpointing != GM_CKPT_FULL;
}

void gm_loop_apply(const struct gm_loop_rule *r, const struct gm_spec *s,
		   struct gm_step *st)
{
	st->keep_outputs = r->keep_outputs;
	st->grads_to_next_forward = r->grads_to_next_forward;
	st->kv_cache = gm_loop_kv_cache(s);
}
