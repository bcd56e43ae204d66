/*
 * list.h - the model families the planner knows: one line each, the
 * table every other part reads (family.h describes an entry; one file
 * per family in planner/arch/ fills it; planner/README.md, "How to add a
 * model family").
 *
 * X(ID, SYMBOL, NAME): ID names enum gm_arch's value GM_ARCH_<ID>,
 * SYMBOL the family's `const struct gm_family gm_family_<SYMBOL>` (in
 * planner/arch/<SYMBOL>.c), NAME its model.architecture spelling.
 * The order is the enum's: append, never reorder.
 */
#ifndef GM_ARCH_LIST_H
#define GM_ARCH_LIST_H

#define GM_FAMILIES(X)                 \
	X(LLAMA, llama, "llama")          \
	X(GPT2, gpt2, "gpt2")             \
	X(BERT, bert, "bert")             \
	X(CUSTOM, custom, "custom")       \
	X(MIXTRAL, mixtral, "mixtral")    \
	X(GPT_NEOX, gpt_neox, "gpt-neox") \
	X(QWEN3, qwen3, "qwen3")          \
	X(QWEN3_MOE, qwen3_moe, "qwen3-moe") \
	X(DEEPSEEK_V3, deepseek_v3, "deepseek-v3")

#define GM_ARCH_ENUM_(id, sym, name) GM_ARCH_##id,
enum gm_arch { GM_FAMILIES(GM_ARCH_ENUM_) GM_ARCH_N };
#undef GM_ARCH_ENUM_

/* model.architecture's spellings, indexed by enum gm_arch (family.c). */
extern const char *const gm_arch_names[GM_ARCH_N];

#endif
