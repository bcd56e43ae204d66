/*
 * dsconfig.c - training.deepspeed_config: the run's own DeepSpeed JSON
 * read into the spec (gm__spec_deepspeed(), declared in spec_int.h).
 *
 * Which value wins, for each spec key the JSON can say:
 *   --set  >  the spec file  >  the JSON  >  DeepSpeed's default  >  the
 *   spec's own default.
 * A value written in the JSON that differs from the same key written in
 * the spec file is an error at the JSON's line:column (the run would
 * not be the one planned); a --set over it is a what-if and wins.
 *
 * The keys and their defaults follow DeepSpeed v0.19.6:
 * deepspeed/runtime/zero/config.py (DeepSpeedZeroConfig),
 * deepspeed/runtime/zero/offload_config.py (offload devices),
 * deepspeed/runtime/config.py and constants.py (batch keys, fp16, bf16,
 * optimizer).
 *
 * "auto" (the Hugging Face integration's placeholder: DeepSpeed alone
 * takes no "auto" for a batch key) is filled as transformers 5.17
 * integrations/deepspeed.py fills it (HfTrainerDeepSpeedConfig,
 * trainer_config_process and trainer_config_finalize), with the spec's
 * keys standing for the TrainingArguments: the batch keys from
 * training.micro_batch_size / global_batch_size, fp16/bf16.enabled from
 * training.precision, the hidden-size keys from model.hidden_size
 * (auto_hidden()). Where the spec does not write the key the Trainer's
 * value comes from, its default is assumed and recorded
 * (spec->deepspeed.assumed, worded by gm_spec_ds_assumed()). The other
 * "auto"s the Trainer fills have no effect on memory (gradient_clipping,
 * optimizer.params, scheduler.params); the rest it leaves, and
 * DeepSpeed's config models drop an "auto" for their defaults
 * (runtime/config_utils.py, DeepSpeedConfigModel.__init__).
 * Keys that change memory in ways the planner does not model are
 * refused by name; keys without an effect on memory (logging,
 * schedulers, checkpoint I/O) are accepted.
 *
 * The file is read by json.c with what DeepSpeed's own reader takes
 * beyond JSON that users write: comments ('#', '//', block) and
 * trailing commas. DeepSpeedConfig.__init__ (deepspeed/runtime/config.py,
 * v0.19.6) reads a path with hjson.load and refuses a key given twice
 * (config_utils.py, dict_raise_error_on_duplicate_keys), so json.c
 * refuses duplicates too; hjson refuses NaN and Infinity, and so does
 * json.c. The rest of Hjson (quoteless keys and strings, commas left
 * out, single quotes) is refused with a JSON syntax error.
 *
 * Errors: 0, GM_EINVAL (diag "JSON:LINE:COLUMN: KEY: message"), GM_EIO,
 * GM_ENOMEM.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "json.h"
#include "spec_int.h"
#include "text.h"

/* What the reader does with a key's value. */
enum ds_act {
	DS_ANY,        /* no effect on memory: any value (sections too) */
	DS_SECTION,    /* an object of further keys */
	DS_IGNORE_BOOL, DS_IGNORE_INT, DS_IGNORE_NUM, DS_IGNORE_STR,
	DS_MICRO, DS_GAS, DS_TRAIN_BATCH,
	DS_FP16, DS_BF16,               /* fp16.enabled, bf16.enabled */
	DS_STAGE, DS_CONTIG, DS_OVERLAP,
	DS_REDUCE_BUCKET, DS_ALLGATHER_BUCKET, DS_PREFETCH, DS_MAX_LIVE,
	DS_PERSIST, DS_SUB_GROUP, DS_REUSE,
	DS_OFF_OPT, DS_OFF_PARAM,       /* offload_*.device */
	DS_OPT_TYPE,                    /* optimizer.type */
	DS_REFUSE_TRUE,  /* a bool whose true is not modelled */
	DS_LEGACY_OFF_OPT,   /* cpu_offload: true = offload_optimizer cpu */
	DS_LEGACY_OFF_PARAM, /* cpu_offload_param: true = offload_param cpu */
	DS_REFUSE_ABOVE1, /* an integer above 1 is not modelled */
	DS_REFUSE_BELOW1, /* a number below 1 is not modelled (ratio) */
	DS_REFUSE_SET,   /* any value other than null is not modelled */
};

struct ds_key {
	const char *name;
	int parent;       /* index of its section, -1 at the top */
	enum ds_act act;
};

/* Section indices in the table below. */
enum { S_FP16 = 3, S_BF16 = 4, S_ZERO = 5, S_OFF_OPT = 6, S_OFF_PARAM = 7,
       S_OPT = 8, S_ACT = 9, S_TYPES = 10 };

static const struct ds_key ds_keys[] = {
	/* runtime/config.py, constants.py */
	{"train_batch_size", -1, DS_TRAIN_BATCH},
	{"train_micro_batch_size_per_gpu", -1, DS_MICRO},
	{"gradient_accumulation_steps", -1, DS_GAS},
	[S_FP16] = {"fp16", -1, DS_SECTION},
	[S_BF16] = {"bf16", -1, DS_SECTION},
	[S_ZERO] = {"zero_optimization", -1, DS_SECTION},
	[S_OFF_OPT] = {"offload_optimizer", S_ZERO, DS_SECTION},
	[S_OFF_PARAM] = {"offload_param", S_ZERO, DS_SECTION},
	[S_OPT] = {"optimizer", -1, DS_SECTION},
	[S_ACT] = {"activation_checkpointing", -1, DS_SECTION},
	[S_TYPES] = {"data_types", -1, DS_SECTION},
	{"enabled", S_FP16, DS_FP16},
	{"auto_cast", S_FP16, DS_REFUSE_TRUE},
	{"loss_scale", S_FP16, DS_IGNORE_NUM},
	{"initial_scale_power", S_FP16, DS_IGNORE_INT},
	{"loss_scale_window", S_FP16, DS_IGNORE_INT},
	{"hysteresis", S_FP16, DS_IGNORE_INT},
	{"consecutive_hysteresis", S_FP16, DS_IGNORE_BOOL},
	{"min_loss_scale", S_FP16, DS_IGNORE_NUM},
	{"fp16_master_weights_and_grads", S_FP16, DS_REFUSE_TRUE},
	{"enabled", S_BF16, DS_BF16},
	{"immediate_grad_update", S_BF16, DS_IGNORE_BOOL},
	{"check_grad_overflow", S_BF16, DS_IGNORE_BOOL},
	/* runtime/zero/config.py, DeepSpeedZeroConfig */
	{"stage", S_ZERO, DS_STAGE},
	{"contiguous_gradients", S_ZERO, DS_CONTIG},
	{"reduce_scatter", S_ZERO, DS_IGNORE_BOOL},
	{"reduce_bucket_size", S_ZERO, DS_REDUCE_BUCKET},
	{"use_multi_rank_bucket_allreduce", S_ZERO, DS_IGNORE_BOOL},
	{"allgather_partitions", S_ZERO, DS_IGNORE_BOOL},
	{"allgather_bucket_size", S_ZERO, DS_ALLGATHER_BUCKET},
	{"overlap_comm", S_ZERO, DS_OVERLAP},
	{"load_from_fp32_weights", S_ZERO, DS_IGNORE_BOOL},
	{"elastic_checkpoint", S_ZERO, DS_IGNORE_BOOL},
	{"sub_group_size", S_ZERO, DS_SUB_GROUP},
	{"stage3_prefetch_bucket_size", S_ZERO, DS_PREFETCH},
	{"stage3_param_persistence_threshold", S_ZERO, DS_PERSIST},
	{"stage3_model_persistence_threshold", S_ZERO, DS_IGNORE_INT},
	{"stage3_max_live_parameters", S_ZERO, DS_MAX_LIVE},
	{"stage3_max_reuse_distance", S_ZERO, DS_REUSE},
	{"stage3_gather_16bit_weights_on_model_save", S_ZERO, DS_IGNORE_BOOL},
	{"stage3_gather_fp16_weights_on_model_save", S_ZERO, DS_IGNORE_BOOL},
	{"stage3_module_granularity_threshold", S_ZERO, DS_IGNORE_INT},
	{"ignore_unused_parameters", S_ZERO, DS_IGNORE_BOOL},
	{"round_robin_gradients", S_ZERO, DS_IGNORE_BOOL},
	{"memory_efficient_linear", S_ZERO, DS_IGNORE_BOOL},
	{"zero_hpz_partition_size", S_ZERO, DS_REFUSE_ABOVE1},
	{"zero_quantized_weights", S_ZERO, DS_REFUSE_TRUE},
	{"zero_quantized_nontrainable_weights", S_ZERO, DS_REFUSE_TRUE},
	{"zero_quantized_gradients", S_ZERO, DS_REFUSE_TRUE},
	{"mics_shard_size", S_ZERO, DS_REFUSE_ABOVE1},
	/* deprecated: DeepSpeedZeroConfig's new_param_fn turns a true into
	 * the offload section's device cpu */
	{"cpu_offload", S_ZERO, DS_LEGACY_OFF_OPT},
	{"cpu_offload_param", S_ZERO, DS_LEGACY_OFF_PARAM},
	{"zenflow", S_ZERO, DS_REFUSE_SET},
	/* runtime/zero/offload_config.py */
	{"device", S_OFF_OPT, DS_OFF_OPT},
	{"nvme_path", S_OFF_OPT, DS_IGNORE_STR},
	{"buffer_count", S_OFF_OPT, DS_IGNORE_INT},
	{"pin_memory", S_OFF_OPT, DS_IGNORE_BOOL},
	{"pipeline_read", S_OFF_OPT, DS_IGNORE_BOOL},
	{"pipeline_write", S_OFF_OPT, DS_IGNORE_BOOL},
	{"fast_init", S_OFF_OPT, DS_IGNORE_BOOL},
	{"ratio", S_OFF_OPT, DS_REFUSE_BELOW1},
	{"device", S_OFF_PARAM, DS_OFF_PARAM},
	{"nvme_path", S_OFF_PARAM, DS_IGNORE_STR},
	{"buffer_count", S_OFF_PARAM, DS_IGNORE_INT},
	{"buffer_size", S_OFF_PARAM, DS_IGNORE_INT},
	{"max_in_cpu", S_OFF_PARAM, DS_IGNORE_INT},
	{"pin_memory", S_OFF_PARAM, DS_IGNORE_BOOL},
	{"type", S_OPT, DS_OPT_TYPE},
	{"params", S_OPT, DS_ANY},
	/* runtime/activation_checkpointing/config.py */
	{"partition_activations", S_ACT, DS_REFUSE_TRUE},
	{"cpu_checkpointing", S_ACT, DS_REFUSE_TRUE},
	{"contiguous_memory_optimization", S_ACT, DS_REFUSE_TRUE},
	{"number_checkpoints", S_ACT, DS_IGNORE_INT},
	{"synchronize_checkpoint_boundary", S_ACT, DS_IGNORE_BOOL},
	{"profile", S_ACT, DS_IGNORE_BOOL},
	{"grad_accum_dtype", S_TYPES, DS_REFUSE_SET},
	/* no effect on device memory */
	{"scheduler", -1, DS_ANY},
	{"gradient_clipping", -1, DS_IGNORE_NUM},
	{"steps_per_print", -1, DS_IGNORE_INT},
	{"wall_clock_breakdown", -1, DS_IGNORE_BOOL},
	{"prescale_gradients", -1, DS_IGNORE_BOOL},
	{"gradient_predivide_factor", -1, DS_IGNORE_NUM},
	{"zero_allow_untested_optimizer", -1, DS_IGNORE_BOOL},
	{"zero_force_ds_cpu_optimizer", -1, DS_IGNORE_BOOL},
	{"communication_data_type", -1, DS_IGNORE_STR},
	{"dump_state", -1, DS_IGNORE_BOOL},
	{"memory_breakdown", -1, DS_IGNORE_BOOL},
	{"tensorboard", -1, DS_ANY},
	{"wandb", -1, DS_ANY},
	{"csv_monitor", -1, DS_ANY},
	{"comet", -1, DS_ANY},
	{"comms_logger", -1, DS_ANY},
	{"flops_profiler", -1, DS_ANY},
	{"checkpoint", -1, DS_ANY},
	{"aio", -1, DS_ANY},
	{"elasticity", -1, DS_ANY},
	{"autotuning", -1, DS_ANY},
	/* change memory in ways the planner does not model */
	{"amp", -1, DS_REFUSE_SET},
	{"torch_autocast", -1, DS_REFUSE_SET},
	{"sparse_attention", -1, DS_REFUSE_SET},
	{"compression_training", -1, DS_REFUSE_SET},
	{"pipeline", -1, DS_REFUSE_SET},
	{"sequence_parallel_size", -1, DS_REFUSE_ABOVE1},
};

#define N_DS (sizeof(ds_keys) / sizeof(ds_keys[0]))

/* The reader's state: the spec being filled and the JSON's values. */
struct ds_read {
	struct gm__spec_ctx *c;
	const char *path;
	/* batch keys, 0 = not given */
	uint64_t micro, gas, tbs;
	const struct gm_json_node *micro_n, *gas_n, *tbs_n;
	int fp16, bf16;          /* -1 not given, else 0/1 */
	const struct gm_json_node *fp16_n, *bf16_n;
	/* the keys written "auto" that the HF Trainer fills; NULL = not */
	const struct gm_json_node *micro_auto, *gas_auto, *fp16_auto, *bf16_auto;
	const struct gm_json_node *rbs_auto, *prefetch_auto, *persist_auto;
};

static char *dotted(int id, char *buf, size_t len)
{
	if (ds_keys[id].parent < 0)
		snprintf(buf, len, "%s", ds_keys[id].name);
	else if (ds_keys[ds_keys[id].parent].parent < 0)
		snprintf(buf, len, "%s.%s", ds_keys[ds_keys[id].parent].name,
			 ds_keys[id].name);
	else
		snprintf(buf, len, "%s.%s.%s",
			 ds_keys[ds_keys[ds_keys[id].parent].parent].name,
			 ds_keys[ds_keys[id].parent].name, ds_keys[id].name);
	return buf;
}

static int vfail(struct ds_read *r, unsigned line, unsigned col, int id,
		 const char *fmt, va_list ap)
{
	char msg[640], key[128];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	if (id < 0)
		return gm_diag_set(r->c->diag, GM_EINVAL, "%s:%u:%u: %s",
				   r->path, line, col, msg);
	return gm_diag_set(r->c->diag, GM_EINVAL, "%s:%u:%u: %s: %s", r->path,
			   line, col, dotted(id, key, sizeof(key)), msg);
}

/* "JSON:LINE:COLUMN: KEY: message" at value n (KEY: table entry id, or
 * none when id < 0); GM_EINVAL. */
static int fail(struct ds_read *r, const struct gm_json_node *n, int id,
		const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct ds_read *r, const struct gm_json_node *n, int id,
		const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(r, n->line, n->column, id, fmt, ap);
	va_end(ap);
	return rc;
}

/* The same at the member name of n. */
static int fail_key(struct ds_read *r, const struct gm_json_node *n, int id,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail_key(struct ds_read *r, const struct gm_json_node *n, int id,
		    const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = vfail(r, n->key_line, n->key_column, id, fmt, ap);
	va_end(ap);
	return rc;
}

static bool is_auto(const struct gm_json_node *v)
{
	return v->type == GM_JSON_STRING && !strcmp(v->text, "auto");
}

static bool is_null(const struct gm_json_node *v)
{
	return v->type == GM_JSON_NULL;
}

/* A JSON boolean. */
static int get_bool(struct ds_read *r, const struct gm_json_node *v, int id,
		    bool *out)
{
	if (v->type != GM_JSON_BOOL)
		return fail(r, v, id, "expected true or false");
	*out = v->boolean;
	return 0;
}

/*
 * A JSON number that is a whole count (DeepSpeed's pydantic fields
 * accept 5e8 and 500000000 alike), 0..2^53.
 */
static int get_count(struct ds_read *r, const struct gm_json_node *v, int id,
		     uint64_t *out)
{
	double d = v->number;

	if (v->type != GM_JSON_NUMBER)
		return fail(r, v, id, "expected a number");
	if (!isfinite(d) || d < 0 || d != floor(d) || d > 9007199254740992.0)
		return fail(r, v, id, "expected a whole number of at least 0, "
			    "got %s", v->text);
	*out = (uint64_t)d;
	return 0;
}

static int get_number(struct ds_read *r, const struct gm_json_node *v, int id,
		      double *out)
{
	if (v->type != GM_JSON_NUMBER)
		return fail(r, v, id, "expected a number");
	*out = v->number;
	if (!isfinite(*out))
		return fail(r, v, id, "expected a number, got %s", v->text);
	return 0;
}

/*
 * Put a JSON value into spec key `key` unless the spec says otherwise:
 * a --set wins, the spec file must agree (else an error naming both),
 * a default is replaced. same: the JSON value equals the spec's.
 */
static int adopt(struct ds_read *r, const struct gm_json_node *v, int id, int key,
		 bool same, const char *json_words, const char *spec_words)
{
	struct gm_spec_where *w = &r->c->spec->where[key];
	char sk[64];

	if (w->origin == GM_SPEC_SET)
		return 1; /* --set wins; nothing to store */
	if (w->origin == GM_SPEC_FILE) {
		if (same)
			return 1;
		return fail(r, v, id, "%s contradicts %s %s at %s:%u:%u; "
			    "write it in one place", json_words,
			    gm__spec_dotted(key, sk, sizeof(sk)), spec_words,
			    r->c->path, w->line, w->column);
	}
	w->origin = GM_SPEC_DEEPSPEED;
	w->line = v->line;
	w->column = v->column;
	return 0; /* the caller stores the value */
}

static int adopt_u64(struct ds_read *r, const struct gm_json_node *v, int id, int key,
		     uint64_t *field, uint64_t val)
{
	char a[32], b[32];
	int rc;

	snprintf(a, sizeof(a), "%llu", (unsigned long long)val);
	snprintf(b, sizeof(b), "%llu", (unsigned long long)*field);
	rc = adopt(r, v, id, key, *field == val, a, b);
	if (rc < 0)
		return rc;
	if (rc == 0)
		*field = val;
	return 0;
}

static int adopt_enum(struct ds_read *r, const struct gm_json_node *v, int id, int key,
		      int *field, int val, const char *(*name)(int))
{
	int rc = adopt(r, v, id, key, *field == val, name(val), name(*field));

	if (rc < 0)
		return rc;
	if (rc == 0)
		*field = val;
	return 0;
}

static const char *prec_name(int p) { return gm_precision_name(p); }
static const char *stage_name(int z)
{
	static const char *const n[] = {"0", "1", "2", "3"};

	return z >= 0 && z < 4 ? n[z] : "?";
}
static const char *off_name(int o) { return gm_offload_name(o); }
static const char *opt_name(int o) { return gm_optimizer_name(o); }

static int offload(struct ds_read *r, const struct gm_json_node *v, int id, int key,
		   enum gm_offload *field)
{
	static const char *const dev[] = {"none", "cpu", "nvme"};

	for (int i = 0; v->type == GM_JSON_STRING && i < 3; i++) {
		if (!strcmp(v->text, dev[i]))
			return adopt_enum(r, v, id, key, (int *)field, i,
					  off_name);
	}
	return fail(r, v, id, "expected \"none\", \"cpu\" or \"nvme\"");
}

/*
 * optimizer.type: DeepSpeed's names (runtime/config.py, *_OPTIMIZER
 * constants; case-insensitive as get_optimizer_name() lowers them).
 * Only Adam and AdamW are planned; the others keep other states.
 */
static int opt_type(struct ds_read *r, const struct gm_json_node *v, int id)
{
	const char *s = v->text;
	struct gm_spec *sp = r->c->spec;
	int o;

	if (v->type != GM_JSON_STRING)
		return fail(r, v, id, "expected a name such as \"AdamW\"");
	if (!strcasecmp(s, "adam"))
		o = GM_OPT_ADAM;
	else if (!strcasecmp(s, "adamw"))
		o = GM_OPT_ADAMW;
	else
		return fail(r, v, id, "\"%s\" is not modelled yet (Adam and "
			    "AdamW are)", s);
	return adopt_enum(r, v, id, GM_K_OPTIMIZER, (int *)&sp->training.optimizer,
			  o, opt_name);
}

static int refuse(struct ds_read *r, const struct gm_json_node *v, int id,
		  const char *what)
{
	return fail(r, v, id, "%s is not modelled yet by gpumem; remove it to "
		    "plan without it", what);
}

/* A feature section ("amp": {"enabled": ...}): refused unless it says
 * "enabled": false. */
static int enabled_refuse(struct ds_read *r, const struct gm_json_node *v, int id)
{
	const struct gm_json_node *e = gm_json_get(v, "enabled");
	bool b = true;

	if (e && get_bool(r, e, id, &b))
		return GM_EINVAL;
	return b ? refuse(r, v, id, "this feature") : 0;
}

/* A key written "auto": remembered where the HF Trainer fills it. */
static int auto_value(struct ds_read *r, const struct gm_json_node *v, int id)
{
	switch (ds_keys[id].act) {
	case DS_MICRO: r->micro_auto = v; break;
	case DS_GAS: r->gas_auto = v; break;
	case DS_FP16: r->fp16_auto = v; break;
	case DS_BF16: r->bf16_auto = v; break;
	case DS_REDUCE_BUCKET: r->rbs_auto = v; break;
	case DS_PREFETCH: r->prefetch_auto = v; break;
	case DS_PERSIST: r->persist_auto = v; break;
	default: break; /* train_batch_size: derived in batch() */
	}
	return 0;
}

/* One key: value of the JSON, by the table's action. */
static int value(struct ds_read *r, const struct gm_json_node *v, int id)
{
	struct gm_spec *sp = r->c->spec;
	struct gm_spec_deepspeed *ds = &sp->deepspeed;
	uint64_t u = 0;
	double d = 0;
	bool b = false;
	int rc;

	if (ds_keys[id].act == DS_ANY)
		return 0;
	if (ds_keys[id].act != DS_SECTION && is_auto(v))
		return auto_value(r, v, id);
	if (ds_keys[id].act != DS_SECTION && is_null(v))
		return 0;
	if (ds_keys[id].act != DS_SECTION && ds_keys[id].act != DS_REFUSE_SET &&
	    (v->type == GM_JSON_OBJECT || v->type == GM_JSON_ARRAY))
		return fail(r, v, id, "expected a single value, not %s",
			    gm_json_type_name(v->type));
	switch (ds_keys[id].act) {
	case DS_ANY:
	case DS_SECTION:
		return 0;
	case DS_IGNORE_BOOL:
		return get_bool(r, v, id, &b);
	case DS_IGNORE_INT:
		return get_count(r, v, id, &u);
	case DS_IGNORE_NUM:
		return get_number(r, v, id, &d);
	case DS_IGNORE_STR:
		return v->type == GM_JSON_STRING
			       ? 0 : fail(r, v, id, "expected a string");
	case DS_MICRO:
	case DS_GAS:
	case DS_TRAIN_BATCH:
		if ((rc = get_count(r, v, id, &u)))
			return rc;
		if (!u)
			return fail(r, v, id, "must be at least 1");
		if (ds_keys[id].act == DS_MICRO)
			r->micro = u, r->micro_n = v;
		else if (ds_keys[id].act == DS_GAS)
			r->gas = u, r->gas_n = v;
		else
			r->tbs = u, r->tbs_n = v;
		return 0;
	case DS_FP16:
	case DS_BF16:
		if ((rc = get_bool(r, v, id, &b)))
			return rc;
		if (ds_keys[id].act == DS_FP16)
			r->fp16 = b, r->fp16_n = v;
		else
			r->bf16 = b, r->bf16_n = v;
		return 0;
	case DS_STAGE:
		if ((rc = get_count(r, v, id, &u)))
			return rc;
		if (u > 3)
			return fail(r, v, id, "must be 0, 1, 2 or 3");
		return adopt_enum(r, v, id, GM_K_ZERO,
				  (int *)&sp->parallelism.zero_stage, (int)u,
				  stage_name);
	case DS_CONTIG:
		if ((rc = get_bool(r, v, id, &b)))
			return rc;
		ds->contiguous_gradients = b;
		return 0;
	case DS_OVERLAP:
		if ((rc = get_bool(r, v, id, &b)))
			return rc;
		ds->overlap_comm = b;
		ds->overlap_comm_given = true;
		return 0;
	case DS_REDUCE_BUCKET:
		return get_count(r, v, id, &ds->reduce_bucket_size);
	case DS_ALLGATHER_BUCKET:
		return get_count(r, v, id, &ds->allgather_bucket_size);
	case DS_PREFETCH:
		return get_count(r, v, id, &ds->prefetch_bucket_size);
	case DS_MAX_LIVE:
		return get_count(r, v, id, &ds->max_live_parameters);
	case DS_PERSIST:
		return get_count(r, v, id, &ds->param_persistence_threshold);
	case DS_SUB_GROUP:
		return get_count(r, v, id, &ds->sub_group_size);
	case DS_REUSE:
		return get_count(r, v, id, &ds->max_reuse_distance);
	case DS_OFF_OPT:
		return offload(r, v, id, GM_K_OFFLOAD_OPT,
			       &sp->parallelism.offload_optimizer);
	case DS_OFF_PARAM:
		return offload(r, v, id, GM_K_OFFLOAD_PARAM,
			       &sp->parallelism.offload_parameters);
	case DS_OPT_TYPE:
		return opt_type(r, v, id);
	case DS_REFUSE_TRUE:
		if ((rc = get_bool(r, v, id, &b)))
			return rc;
		return b ? refuse(r, v, id, "true") : 0;
	case DS_LEGACY_OFF_OPT:
	case DS_LEGACY_OFF_PARAM:
		if ((rc = get_bool(r, v, id, &b)))
			return rc;
		if (!b)
			return 0;
		{
			bool opt = ds_keys[id].act == DS_LEGACY_OFF_OPT;

			return adopt_enum(r, v, id, opt ? GM_K_OFFLOAD_OPT :
					  GM_K_OFFLOAD_PARAM, (int *)(opt ?
					  &sp->parallelism.offload_optimizer :
					  &sp->parallelism.offload_parameters),
					  GM_OFFLOAD_CPU, off_name);
		}
	case DS_REFUSE_ABOVE1:
		if ((rc = get_count(r, v, id, &u)))
			return rc;
		return u > 1 ? refuse(r, v, id, "a value above 1") : 0;
	case DS_REFUSE_BELOW1:
		if ((rc = get_number(r, v, id, &d)))
			return rc;
		return d < 1 ? refuse(r, v, id, "partial offload (below 1)")
			     : 0;
	case DS_REFUSE_SET:
		if (v->type == GM_JSON_OBJECT)
			return enabled_refuse(r, v, id);
		return refuse(r, v, id, "this setting");
	}
	return 0;
}

static int walk(struct ds_read *r, const struct gm_json_node *map,
		int section);

/* The table entry of key `name` in section, or -1. */
static int find(int section, const char *name)
{
	for (size_t i = 0; i < N_DS; i++) {
		if (ds_keys[i].name && ds_keys[i].parent == section &&
		    !strcmp(ds_keys[i].name, name))
			return (int)i;
	}
	return -1;
}

static int unknown(struct ds_read *r, const struct gm_json_node *k,
		   int section)
{
	const char *cands[N_DS], *near;
	char sec[128] = "";
	size_t n = 0;

	for (size_t i = 0; i < N_DS; i++) {
		if (ds_keys[i].name && ds_keys[i].parent == section)
			cands[n++] = ds_keys[i].name;
	}
	near = gm_text_suggest(k->key, cands, n);
	if (section >= 0)
		snprintf(sec, sizeof(sec), " in %s",
			 dotted(section, (char[96]){0}, 96));
	if (near)
		return fail_key(r, k, -1, "unknown DeepSpeed key \"%s\"%s; did "
				"you mean \"%s\"?", k->key, sec, near);
	return fail_key(r, k, -1, "unknown DeepSpeed key \"%s\"%s (not in "
			"DeepSpeed 0.19's configuration, or not one gpumem "
			"reads)", k->key, sec);
}

/* The members of object map (section: its table entry, -1 the root);
 * json.c has refused a member given twice, as DeepSpeed does. */
static int walk(struct ds_read *r, const struct gm_json_node *map, int section)
{
	for (size_t i = 0; i < map->n; i++) {
		const struct gm_json_node *v = &map->kids[i];
		int id = find(section, v->key), rc;

		if (id < 0)
			return unknown(r, v, section);
		if (ds_keys[id].act == DS_SECTION) {
			if (is_null(v) || is_auto(v))
				continue;
			if (v->type != GM_JSON_OBJECT)
				return fail(r, v, id, "expected an object "
					    "({ ... })");
			rc = walk(r, v, id);
		} else {
			rc = value(r, v, id);
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* Record that the "auto" at v took an assumed TrainingArguments value. */
static void assume(struct ds_read *r, const struct gm_json_node *v, int id,
		   enum gm_ds_auto_arg arg)
{
	struct gm_spec_deepspeed *ds = &r->c->spec->deepspeed;
	struct gm_ds_assumed *a;

	if (ds->n_assumed >= sizeof(ds->assumed) / sizeof(ds->assumed[0]))
		return;
	a = &ds->assumed[ds->n_assumed++];
	a->arg = arg;
	dotted(id, a->key, sizeof(a->key));
	a->line = v->line;
	a->column = v->column;
}

/*
 * fp16.enabled / bf16.enabled "auto": the Trainer writes args.fp16 and
 * args.bf16 (trainer_config_process), for which training.precision
 * stands (fp16-* / bf16-*). When the spec does not write it, an
 * explicit true in the JSON decides (the run's arguments must agree
 * with it, or the Trainer stops on the mismatch), else TrainingArguments'
 * defaults, bf16 and fp16 False (transformers 5.17 training_args.py),
 * are assumed: both disabled, fp32.
 */
static int auto_precision(struct ds_read *r)
{
	struct gm_spec *sp = r->c->spec;
	bool written = sp->where[GM_K_PRECISION].origin != GM_SPEC_DEFAULT;
	int p = written ? (int)sp->training.precision : GM_PREC_FP32;
	bool any_true = r->fp16 == 1 || r->bf16 == 1;
	bool f16 = p == GM_PREC_FP16_MIXED || p == GM_PREC_FP16_TRUE;
	bool b16 = p == GM_PREC_BF16_MIXED || p == GM_PREC_BF16_TRUE;
	const struct gm_json_node *at = r->bf16_auto ? r->bf16_auto :
					r->fp16_auto;
	int id;

	if (!at)
		return 0;
	if (!written && any_true)
		f16 = b16 = false;
	if (r->fp16_auto)
		r->fp16 = f16;
	if (r->bf16_auto)
		r->bf16 = b16;
	if (written || any_true)
		return 0;
	id = find(r->bf16_auto ? S_BF16 : S_FP16, "enabled");
	assume(r, at, id, GM_DS_AUTO_PRECISION);
	return adopt_enum(r, at, id, GM_K_PRECISION,
			  (int *)&sp->training.precision, GM_PREC_FP32,
			  prec_name);
}

/*
 * fp16 / bf16: DeepSpeed's 16-bit training with fp32 master weights in
 * the optimizer, which the spec names *-mixed; neither enabled is fp32
 * (runtime/config.py: both default to disabled). at: the value written
 * in the JSON that decides; an "auto" decides nothing of its own.
 */
static int precision(struct ds_read *r)
{
	struct gm_spec *sp = r->c->spec;
	const struct gm_json_node *at = r->bf16_n ? r->bf16_n : r->fp16_n;
	int p = GM_PREC_FP32, rc;

	/* a --set over the JSON is a what-if and wins (models/README.md,
	 * "Which value wins") */
	if (sp->where[GM_K_PRECISION].origin == GM_SPEC_SET)
		return 0;
	if ((rc = auto_precision(r)))
		return rc;
	if (r->fp16 == 1 && r->bf16 == 1 && r->fp16_n && r->bf16_n)
		return fail(r, r->bf16_n, -1, "bf16.enabled and "
			    "fp16.enabled are both true; DeepSpeed takes one");
	/* one of them true by an "auto" the spec's precision filled: the
	 * one written true decides, against the spec below */
	if (r->fp16 == 1 && (r->bf16 != 1 || r->fp16_n))
		p = GM_PREC_FP16_MIXED, at = r->fp16_n;
	else if (r->bf16 == 1)
		p = GM_PREC_BF16_MIXED, at = r->bf16_n;
	if (!at && (r->fp16_auto || r->bf16_auto))
		return 0; /* training.precision, written or assumed */
	if (!at) {
		/* left out: DeepSpeed's default fills only a default */
		if (sp->where[GM_K_PRECISION].origin == GM_SPEC_DEFAULT) {
			sp->training.precision = GM_PREC_FP32;
			sp->where[GM_K_PRECISION].origin = GM_SPEC_DEEPSPEED;
		}
		return 0;
	}
	return adopt_enum(r, at, find(at == r->bf16_n ? S_BF16 : S_FP16,
				      "enabled"), GM_K_PRECISION,
			  (int *)&sp->training.precision, p, prec_name);
}

/*
 * The batch keys (runtime/config.py, _configure_train_batch_size):
 * train_batch_size = micro * gradient_accumulation_steps * data
 * parallel; any two give the third. The spec's global_batch_size is
 * train_batch_size.
 */
static int batch(struct ds_read *r)
{
	struct gm_spec *sp = r->c->spec;
	uint64_t dp = sp->where[GM_K_DP].origin ? sp->parallelism.data_parallel
						 : 1;
	uint64_t micro = r->micro, tbs = r->tbs, gas = r->gas;
	bool gas_assumed = false;
	int rc;

	/* "auto": the Trainer's per_device_train_batch_size
	 * (trainer_config_process), which training.micro_batch_size stands
	 * for; where the spec does not write it, TrainingArguments' default
	 * (transformers 5.17 training_args.py), which DeepSpeed then checks
	 * the other batch keys against */
	if (r->micro_auto) {
		if (sp->where[GM_K_MICRO_BATCH].origin == GM_SPEC_DEFAULT) {
			assume(r, r->micro_auto, 1, GM_DS_AUTO_MICRO);
			rc = adopt_u64(r, r->micro_auto, 1, GM_K_MICRO_BATCH,
				       &sp->training.micro_batch_size,
				       GM_DS_TRAINER_MICRO_BATCH);
			if (rc)
				return rc;
		}
		micro = sp->training.micro_batch_size;
	}
	/* "auto" beside a train_batch_size written: the Trainer's
	 * gradient_accumulation_steps, filled before DeepSpeed checks the
	 * batch keys (trainer_config_process: fill_match refuses a
	 * train_batch_size other than world_size *
	 * per_device_train_batch_size * gradient_accumulation_steps): the
	 * spec's global_batch_size / (micro * data parallel), or
	 * TrainingArguments' 1 where the spec does not write it */
	if (r->gas_auto && tbs) {
		uint64_t g = sp->training.global_batch_size;

		if (sp->where[GM_K_GLOBAL_BATCH].origin == GM_SPEC_DEFAULT) {
			assume(r, r->gas_auto, 2, GM_DS_AUTO_GAS);
			gas_assumed = true;
			gas = 1;
		} else if (micro && g % (micro * dp) == 0) {
			gas = g / (micro * dp);
		}
	}

	if (micro && gas && tbs && tbs != micro * gas * dp) {
		uint64_t want = tbs % (micro * gas) ? 0 :
				tbs / (micro * gas);
		char hint[96] = "";

		/* DeepSpeed's data parallel is the launcher's world size,
		 * which parallelism.data_parallel stands for */
		if (gas_assumed && tbs % (micro * dp) == 0)
			snprintf(hint, sizeof(hint), " (training."
				 "global_batch_size: %llu makes the Trainer's "
				 "gradient_accumulation_steps %llu)",
				 (unsigned long long)tbs,
				 (unsigned long long)(tbs / (micro * dp)));
		else if (want && !sp->where[GM_K_DP].origin)
			snprintf(hint, sizeof(hint), " (the spec writes no "
				 "parallelism.data_parallel: %llu GPUs make "
				 "it whole)", (unsigned long long)want);
		else if (want)
			snprintf(hint, sizeof(hint), " (parallelism."
				 "data_parallel %llu makes it whole)",
				 (unsigned long long)want);
		return fail(r, r->tbs_n, 0, "%llu is not "
			    "train_micro_batch_size_per_gpu %llu * "
			    "gradient_accumulation_steps %llu * data_parallel "
			    "%llu%s", (unsigned long long)tbs,
			    (unsigned long long)micro,
			    (unsigned long long)gas,
			    (unsigned long long)dp, hint);
	}
	if (!micro && tbs && gas) {
		if (tbs % (gas * dp))
			return fail(r, r->tbs_n, 0, "%llu is not a multiple of "
				    "gradient_accumulation_steps %llu * "
				    "data_parallel %llu",
				    (unsigned long long)tbs,
				    (unsigned long long)gas,
				    (unsigned long long)dp);
		micro = tbs / (gas * dp);
	}
	if (micro && !r->micro_auto) {
		rc = adopt_u64(r, r->micro_n ? r->micro_n : r->tbs_n, 1,
			       GM_K_MICRO_BATCH,
			       &sp->training.micro_batch_size, micro);
		if (rc)
			return rc;
	}
	if (!tbs && r->gas)
		tbs = sp->training.micro_batch_size * r->gas * dp;
	if (tbs) {
		rc = adopt_u64(r, r->tbs_n ? r->tbs_n : r->gas_n, 0,
			       GM_K_GLOBAL_BATCH,
			       &sp->training.global_batch_size, tbs);
		if (rc)
			return rc;
	}
	/* "auto": the Trainer's gradient_accumulation_steps
	 * (trainer_config_process), which global_batch_size stands for;
	 * TrainingArguments' default, 1, where the spec does not write it */
	if (r->gas_auto && !gas_assumed &&
	    sp->where[GM_K_GLOBAL_BATCH].origin == GM_SPEC_DEFAULT)
		assume(r, r->gas_auto, 2, GM_DS_AUTO_GAS);
	return 0;
}

/*
 * reduce_bucket_size, stage3_prefetch_bucket_size and
 * stage3_param_persistence_threshold "auto" (transformers 5.17
 * integrations/deepspeed.py, trainer_config_finalize): hidden_size^2,
 * and under ZeRO-3 int(0.9 * hidden_size^2) and 10 * hidden_size
 * elements, from the model config's hidden_size (model.hidden_size
 * here). Below stage 3 the two stage-3 keys stay "auto", which
 * DeepSpeedZeroConfig drops for its defaults. A model without a
 * hidden size is refused, as the Trainer refuses it.
 */
static int auto_hidden(struct ds_read *r)
{
	struct gm_spec *sp = r->c->spec;
	struct gm_spec_deepspeed *ds = &sp->deepspeed;
	uint64_t h = sp->model.hidden_size;
	const struct gm_json_node *first = r->rbs_auto ? r->rbs_auto
				 : r->prefetch_auto ? r->prefetch_auto
				 : r->persist_auto;

	if (!first)
		return 0;
	if (!h)
		return fail(r, first, -1, "\"auto\" is filled by the HF "
			    "Trainer from the model's hidden_size, and this "
			    "spec gives no model.hidden_size; write a number");
	if (r->rbs_auto)
		ds->reduce_bucket_size = h * h;
	if (sp->parallelism.zero_stage != 3)
		return 0;
	/* Python's 0.9 * h * h, left to right in doubles, truncated */
	if (r->prefetch_auto)
		ds->prefetch_bucket_size = (uint64_t)(0.9 * (double)h *
						      (double)h);
	if (r->persist_auto)
		ds->param_persistence_threshold = 10 * h;
	return 0;
}

/* DeepSpeed's defaults (runtime/zero/config.py, DeepSpeedZeroConfig). */
static void zero_defaults(struct gm_spec_deepspeed *ds)
{
	ds->reduce_bucket_size = 500000000;
	ds->allgather_bucket_size = 500000000;
	ds->prefetch_bucket_size = 50000000;
	ds->max_live_parameters = 1000000000;
	ds->param_persistence_threshold = 100000;
	ds->sub_group_size = 1000000000;
	ds->max_reuse_distance = 1000000000;
	ds->contiguous_gradients = true;
}

int gm__spec_deepspeed(struct gm__spec_ctx *c)
{
	struct gm_spec *sp = c->spec;
	struct gm_spec_deepspeed *ds = &sp->deepspeed;
	struct ds_read r = {.c = c, .fp16 = -1, .bf16 = -1};
	struct gm_json *j = NULL;
	int rc;

	zero_defaults(ds);
	memset(ds->assumed, 0, sizeof(ds->assumed));
	ds->n_assumed = 0;
	if (!sp->training.deepspeed_config[0])
		return 0;
	if (!gm__spec_path(sp, GM_K_DS_CONFIG, sp->training.deepspeed_config,
			   ds->path, sizeof(ds->path)))
		return gm__spec_blame(c, GM_K_DS_CONFIG, "the path is too long");
	rc = gm_json_tree_load(ds->path, GM_JSON_COMMENTS |
			       GM_JSON_TRAILING_COMMAS, &j, c->diag);
	if (rc == GM_EIO) {
		char why[1024];

		gm_text_copy(why, sizeof(why), c->diag->msg);
		return gm__spec_blame(c, GM_K_DS_CONFIG, "%s", why);
	}
	if (rc)
		return rc;
	r.path = ds->path;
	ds->loaded = true;
	if (j->root->type != GM_JSON_OBJECT)
		rc = fail(&r, j->root, -1, "a DeepSpeed config is a JSON "
			  "object ({ ... }), not %s",
			  gm_json_type_name(j->root->type));
	if (!rc)
		rc = walk(&r, j->root, -1);
	if (!rc)
		rc = precision(&r);
	if (!rc)
		rc = batch(&r);
	if (!rc)
		rc = auto_hidden(&r);
	if (!rc && !ds->overlap_comm_given)
		ds->overlap_comm = sp->parallelism.zero_stage == 3;
	gm_json_tree_free(j);
	return rc;
}

/* The words of one TrainingArguments value the Trainer takes. */
static const char *const assumed_arg[] = {
	[GM_DS_AUTO_MICRO] = "per_device_train_batch_size",
	[GM_DS_AUTO_GAS] = "gradient_accumulation_steps",
	[GM_DS_AUTO_PRECISION] = "bf16 / fp16",
};

char *gm_spec_ds_assumed(const struct gm_spec *spec, unsigned i, char *buf,
			 size_t len)
{
	const struct gm_ds_assumed *a;
	char val[96];

	if (!len)
		return buf;
	buf[0] = 0;
	if (i >= spec->deepspeed.n_assumed || i >= sizeof(spec->deepspeed.assumed) /
						   sizeof(spec->deepspeed.assumed[0]))
		return buf;
	a = &spec->deepspeed.assumed[i];
	switch (a->arg) {
	case GM_DS_AUTO_MICRO:
		snprintf(val, sizeof(val), "%d (TrainingArguments' default)",
			 GM_DS_TRAINER_MICRO_BATCH);
		break;
	case GM_DS_AUTO_GAS:
		snprintf(val, sizeof(val), "1 (as without "
			 "training.global_batch_size)");
		break;
	case GM_DS_AUTO_PRECISION:
		snprintf(val, sizeof(val), "False for both (TrainingArguments' "
			 "default): training.precision fp32");
		break;
	}
	snprintf(buf, len, "%s:%u:%u: %s: \"auto\" is the HF Trainer's %s, "
		 "which the spec does not write; assumed %s",
		 spec->deepspeed.path, a->line, a->column, a->key,
		 assumed_arg[a->arg], val);
	return buf;
}
