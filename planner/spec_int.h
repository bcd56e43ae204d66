/*
 * spec_int.h - internals shared by spec.c (reading, the key table,
 * --set) and spec_rules.c (defaults and cross-key validation). Not for
 * use outside planner/spec*.c.
 *
 * Every key of the schema has an id (its index in gm__spec_keys[]);
 * struct gm_spec.where[id] records where its value came from. Errors are
 * returned by the one convention (error.h) with a one-line diag message
 * "file:line:column: KEY: message" or "--set KEY: message".
 */
#ifndef GM_SPEC_INT_H
#define GM_SPEC_INT_H

#include <stddef.h>

#include "spec.h"

enum gm__spec_key {
	GM_K_NAME,
	GM_K_TASK,
	GM_K_MODEL,
	GM_K_ARCH,
	GM_K_LAYERS,
	GM_K_HIDDEN,
	GM_K_FFN,
	GM_K_HEADS,
	GM_K_KV_HEADS,
	GM_K_VOCAB,
	GM_K_MAX_POS,
	GM_K_TYPE_VOCAB,
	GM_K_TIED,
	GM_K_HEAD,
	GM_K_NUM_LABELS,
	GM_K_PARAMETERS,
	GM_K_ACT_PER_TOKEN,
	GM_K_QKV_BIAS,
	GM_K_ADD_BIAS_LINEAR,
	GM_K_HEAD_DIM,
	GM_K_SLIDING_WINDOW,
	GM_K_EXPERTS,
	GM_K_EXPERTS_PER_TOKEN,
	GM_K_SHARED_EXPERTS,
	GM_K_MOE_FFN,
	GM_K_DENSE_LAYERS,
	GM_K_Q_LORA_RANK,
	GM_K_KV_LORA_RANK,
	GM_K_QK_ROPE_HEAD_DIM,
	GM_K_QK_NOPE_HEAD_DIM,
	GM_K_V_HEAD_DIM,
	GM_K_HF_CONFIG,
	GM_K_TRAINING,
	GM_K_MICRO_BATCH,
	GM_K_GLOBAL_BATCH,
	GM_K_SEQ_LEN,
	GM_K_PRECISION,
	GM_K_OPTIMIZER,
	GM_K_OPT_IMPL,
	GM_K_CKPT,
	GM_K_ATTENTION,
	GM_K_FRAMEWORK,
	GM_K_DS_CONFIG,
	GM_K_LOOP,
	GM_K_USE_CACHE,
	GM_K_ADAPTER,
	GM_K_LORA_RANK,
	GM_K_LORA_TARGETS,
	GM_K_INFERENCE,
	GM_K_INF_PRECISION,
	GM_K_BATCH,
	GM_K_PROMPT,
	GM_K_GENERATE,
	GM_K_KV_DTYPE,
	GM_K_PARALLELISM,
	GM_K_DP,
	GM_K_TP,
	GM_K_PP,
	GM_K_SP,
	GM_K_ZERO,
	GM_K_TP_VOCAB,
	GM_K_BUILT_WHOLE,
	GM_K_FSDP_MP,
	GM_K_OFFLOAD_OPT,
	GM_K_OFFLOAD_PARAM,
	GM_K_DIST_OPT,
	GM_K_VPP,
	GM_K_EP,
	GM_K_ETP,
	GM_K_MOE_DISPATCHER,
	GM_K_HARDWARE,
	GM_K_GPU,
	GM_K_COUNT
};

/* The value kinds of the schema. */
enum gm__spec_kind {
	GM_KIND_MAP,  /* a section: a mapping of further keys */
	GM_KIND_STR,  /* a string, stored in a char[len] */
	GM_KIND_U64,  /* a decimal integer in min..max, in a uint64_t */
	GM_KIND_U32,  /* a decimal integer in min..max, in an unsigned */
	GM_KIND_NUM,  /* a positive number ("13.0e9"), stored in a double */
	GM_KIND_BOOL, /* true/false (also yes/no, on/off), in a bool */
	GM_KIND_ENUM, /* one of names[], stored as the index in an enum */
	GM_KIND_LIST, /* training.lora_targets: a list of words (or one
		       * word), stored by gm__spec_set_list() */
};

struct gm__spec_keydef {
	const char *name;            /* as spelled in YAML */
	int parent;                  /* section's id, -1 at the top level */
	enum gm__spec_kind kind;
	size_t off;                  /* offsetof(struct gm_spec, field) */
	size_t len;                  /* GM_KIND_STR: buffer size */
	unsigned min, max;           /* GM_KIND_U64 / U32 bounds */
	const char *const *names;    /* GM_KIND_ENUM */
	size_t n_names;
};

extern const struct gm__spec_keydef gm__spec_keys[GM_K_COUNT];

/* The dotted name of a key ("model.layers"); buf of at least 64 bytes. */
const char *gm__spec_dotted(int id, char *buf, size_t len);

/* The id of a dotted key ("model.layers"), or -1. */
int gm__spec_find(const char *dotted);

/* State of one gm_spec_load() call. */
struct gm__spec_ctx {
	struct gm_spec *spec;
	struct gm_diag *diag;
	const char *path;             /* as messages name it */
	bool from_stdin;              /* path "-": read standard input */
	const char *set_key;          /* the --set being applied, or NULL */
	unsigned root_line, root_col; /* the top-level mapping (1-based) */
};

/*
 * The path of file key id names (model.hf_config,
 * training.deepspeed_config): relative to the spec file's directory
 * when the spec file gave it; as written when --set gave it (relative
 * to the working directory, as a shell's path is) or when absolute.
 * Returns false when it does not fit in len bytes.
 */
bool gm__spec_path(const struct gm_spec *s, int id, const char *value,
		   char *out, size_t len);

/*
 * Blame key id for a broken rule: the message is prefixed with where
 * the key's value came from (the file position, or "--set KEY"), or
 * with its section's position when the value is a default. Returns
 * GM_EINVAL.
 */
int gm__spec_blame(struct gm__spec_ctx *c, int id, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Fill every key not given with its documented default (spec_rules.c). */
void gm__spec_defaults(struct gm_spec *spec);

/* Cross-key validation after defaults (spec_rules.c). 0 or GM_EINVAL. */
int gm__spec_validate(struct gm__spec_ctx *c);

/*
 * Read training.deepspeed_config (dsconfig.c) after the spec's own keys:
 * fills what the spec leaves out, the spec's DeepSpeed section with
 * DeepSpeed's defaults, and refuses a JSON value that contradicts a key
 * written in the spec file. 0 or GM_EINVAL/GM_EIO/GM_ENOMEM.
 */
int gm__spec_deepspeed(struct gm__spec_ctx *c);

#endif
