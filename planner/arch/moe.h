/*
 * moe.h - the routed mixture-of-experts MLP that the MoE families
 * (mixtral.c, qwen3_moe.c, deepseek_v3.c) share: a top-k router over
 * `experts` experts stored as 3-D parameters (gate_up_proj, down_proj),
 * run by transformers' grouped_mm experts forward (moe.c says which
 * version and what it saves).
 */
#ifndef GM_ARCH_MOE_H
#define GM_ARCH_MOE_H

#include <stdint.h>

struct gm_act_layer;
struct gm_act_style;
struct gm_em;

/*
 * Training: append to l what the router and the experts save for
 * backward, after the norm in front of them (the caller lists it with
 * gm_act_norm(..., 1, "router input")), and set the MLP's transient.
 */
void gm_moe_saved(struct gm_act_layer *l, const struct gm_act_style *st);

/*
 * Inference over T tokens whose MLP input the caller holds: the router
 * and the experts' per-expert loop. Returns the MLP's output (T x hidden
 * in the activation dtype); frees everything else it allocated.
 */
uint32_t gm_moe_infer(struct gm_em *e, double T);

#endif
