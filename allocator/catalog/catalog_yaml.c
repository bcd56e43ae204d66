/*
 * catalog_yaml.c - read a GPU catalog file (models/gpus.yaml schema) with
 * libyaml: gm_catalog_load() (see catalog.h). The same loader serves the
 * build-time generator (gen_catalog.c) and `--catalog FILE` at run time.
 *
 * Every entry is checked; the first fault is returned as GM_EINVAL with
 * "path:line:column: message" (1-based, libyaml marks are 0-based).
 * Units in the file: MiB for *_mib keys (as nvidia-smi prints them),
 * GB/s, TFLOP/s, "80 GB" style for marketed; stored in bytes.
 */
#include "catalog_internal.h"

#include "error.h"
#include "text.h"
#include "units.h"
#include "yaml_check.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <yaml.h>

struct arch {
	const char *name;
	uint64_t context, inference;
	const char *measured_on;
	const char *source;
	yaml_node_t *node;
};

struct ctx {
	const char *path;
	const char *buf; /* the file's bytes */
	size_t len;
	yaml_document_t *doc;
	struct gm_diag *diag;
	struct gm_catalog *cat;
	struct arch *archs;
	size_t n_archs;
	/* archs by name: open addressing, slot = index + 1, 0 = empty */
	size_t *arch_slots, n_arch_slots;
	/* the built-in catalog: 'multiprocessors' is required */
	bool builtin;
	/* where each GPU was declared, for duplicate messages */
	yaml_node_t **gpu_nodes;
	/* gm_catalog_load_over(): the catalog the file adds to, and its
	 * architectures, which the file's GPUs may name */
	const struct gm_catalog *base;
	struct arch *base_archs;
	size_t n_base_archs;
};

__attribute__((format(printf, 3, 4)))
static int fail(struct ctx *c, const yaml_node_t *node, const char *fmt, ...)
{
	char msg[768], text[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	/* Values quoted in the message may hold control characters
	 * ("\e[2J" in a double-quoted YAML string). */
	gm_text_escape(text, sizeof(text), msg);
	return gm_diag_set(c->diag, GM_EINVAL, "%s:%zu:%zu: %s", c->path,
			   node ? node->start_mark.line + 1 : 1,
			   node ? node->start_mark.column + 1 : 1, text);
}

static const char *scalar(const yaml_node_t *n)
{
	return (const char *)n->data.scalar.value;
}

/* A copy of s owned by the catalog, or NULL when out of memory. */
static const char *keep_str(struct ctx *c, const char *s)
{
	char *d = strdup(s);

	return gm__catalog_keep(c->cat, d) == 0 ? d : NULL;
}

/* ==== Scalars ==== */

static int want_scalar(struct ctx *c, yaml_node_t *n, const char *key)
{
	if (n->type != YAML_SCALAR_NODE)
		return fail(c, n, "'%s' must be a single value", key);
	return 0;
}

static int get_str(struct ctx *c, yaml_node_t *n, const char *key,
		   bool empty_ok, const char **out)
{
	int rc = want_scalar(c, n, key);

	if (rc)
		return rc;
	if (!empty_ok && scalar(n)[0] == '\0')
		return fail(c, n, "'%s' must not be empty", key);
	*out = keep_str(c, scalar(n));
	return *out ? 0 : gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
}

/* An unsigned integer, decimal or 0x-hex, at most max. */
static int get_uint(struct ctx *c, yaml_node_t *n, const char *key,
		    uint64_t max, uint64_t *out)
{
	const char *s;
	char *end;
	unsigned long long v;
	int rc = want_scalar(c, n, key);

	if (rc)
		return rc;
	s = scalar(n);
	if (s[0] == '-')
		return fail(c, n, "'%s' must not be negative, got '%s'", key,
			    s);
	if (!(s[0] >= '0' && s[0] <= '9'))
		return fail(c, n, "'%s' must be a whole number, got '%s'",
			    key, s);
	errno = 0;
	v = strtoull(s, &end, 0);
	if (*end != '\0')
		return fail(c, n, "'%s' must be a whole number, got '%s'",
			    key, s);
	if (errno == ERANGE || v > max)
		return fail(c, n, "'%s' is too large: %s (at most %llu)", key,
			    s, (unsigned long long)max);
	*out = v;
	return 0;
}

/* A finite number in [lo, hi]. */
static int get_real(struct ctx *c, yaml_node_t *n, const char *key,
		    double lo, double hi, double *out)
{
	const char *s;
	char *end;
	double v;
	int rc = want_scalar(c, n, key);

	if (rc)
		return rc;
	s = scalar(n);
	errno = 0;
	v = strtod(s, &end);
	if (end == s || *end != '\0' || errno == ERANGE || !isfinite(v))
		return fail(c, n, "'%s' must be a number, got '%s'", key, s);
	if (v < lo || v > hi)
		return fail(c, n, "'%s' must be between %g and %g, got %s",
			    key, lo, hi, s);
	*out = v;
	return 0;
}

static int get_bool(struct ctx *c, yaml_node_t *n, const char *key,
		    bool *out)
{
	int rc = want_scalar(c, n, key);

	if (rc)
		return rc;
	if (strcmp(scalar(n), "true") == 0)
		*out = true;
	else if (strcmp(scalar(n), "false") == 0)
		*out = false;
	else
		return fail(c, n, "'%s' must be true or false, got '%s'", key,
			    scalar(n));
	return 0;
}

/* ==== Mappings with known keys ==== */

/*
 * Check that n is a mapping whose keys are all scalars from keys[] and
 * none repeats; vals[i] gets the value node of keys[i] (or NULL).
 * what names the mapping in messages ("GPU entry").
 */
static int map_fields(struct ctx *c, yaml_node_t *n, const char *what,
		      const char *const *keys, size_t nkeys,
		      yaml_node_t **vals)
{
	memset(vals, 0, nkeys * sizeof(*vals));
	if (n->type != YAML_MAPPING_NODE)
		return fail(c, n, "%s must be a mapping of keys to values",
			    what);
	for (yaml_node_pair_t *p = n->data.mapping.pairs.start;
	     p < n->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);
		size_t i;

		if (k->type != YAML_SCALAR_NODE)
			return fail(c, k, "%s: keys must be plain words",
				    what);
		for (i = 0; i < nkeys; i++)
			if (strcmp(keys[i], scalar(k)) == 0)
				break;
		if (i == nkeys) {
			const char *hint = gm_text_suggest(scalar(k), keys,
							   nkeys);
			if (hint)
				return fail(c, k, "unknown key '%s' in %s; "
					    "did you mean '%s'?",
					    scalar(k), what, hint);
			return fail(c, k, "unknown key '%s' in %s",
				    scalar(k), what);
		}
		if (vals[i])
			return fail(c, k, "duplicate key '%s' (first at "
				    "line %zu)", scalar(k),
				    vals[i]->start_mark.line + 1);
		vals[i] = v;
	}
	return 0;
}

static int require(struct ctx *c, yaml_node_t *map, const char *what,
		   const char *const *keys, yaml_node_t **vals,
		   const bool *required, size_t nkeys)
{
	for (size_t i = 0; i < nkeys; i++)
		if (required[i] && !vals[i])
			return fail(c, map, "%s is missing '%s'", what,
				    keys[i]);
	return 0;
}

/* ==== architectures: ==== */

enum { A_NAME, A_CTX, A_INF, A_MEASURED, A_SOURCE, A_N };
static const char *const arch_keys[A_N] = {
	"name", "cuda_context_mib", "cuda_context_inference_mib",
	"measured_on", "source"};
static const bool arch_required[A_N] = {true, true, true, false, true};

/* Largest MiB figure accepted (1 PiB): catches typos in bytes. */
#define MIB_MAX ((uint64_t)1 << 30)
/* Most SMs accepted: 188 on the largest card listed; catches typos. */
#define SMS_MAX 1024

/* FNV-1a of an architecture name. */
static size_t name_hash(const char *name)
{
	uint64_t h = 14695981039346656037ULL;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++)
		h = (h ^ *p) * 1099511628211ULL;
	return (size_t)h;
}

/* The architecture called name among those loaded so far, or NULL;
 * with slot non-NULL, *slot gets where name is or would go. */
static struct arch *arch_find(struct ctx *c, const char *name, size_t *slot)
{
	size_t mask = c->n_arch_slots - 1, at;

	if (!c->arch_slots) /* no 'architectures' (gm_catalog_load_over) */
		return NULL;
	for (at = name_hash(name) & mask; c->arch_slots[at]; at = (at + 1) & mask) {
		struct arch *a = &c->archs[c->arch_slots[at] - 1];

		if (strcmp(a->name, name) == 0)
			break;
	}
	if (slot)
		*slot = at;
	return c->arch_slots[at] ? &c->archs[c->arch_slots[at] - 1] : NULL;
}

static int load_arch(struct ctx *c, yaml_node_t *n, struct arch *a)
{
	yaml_node_t *v[A_N];
	int rc;

	rc = map_fields(c, n, "architecture entry", arch_keys, A_N, v);
	if (!rc)
		rc = require(c, n, "architecture entry", arch_keys, v,
			     arch_required, A_N);
	if (!rc)
		rc = get_str(c, v[A_NAME], "name", false, &a->name);
	if (!rc) {
		size_t slot;
		const struct arch *first = arch_find(c, a->name, &slot);

		if (first)
			rc = fail(c, v[A_NAME], "architecture '%s' is listed "
				  "twice (first at line %zu)", a->name,
				  first->node->start_mark.line + 1);
		else
			c->arch_slots[slot] = (size_t)(a - c->archs) + 1;
	}
	if (!rc)
		rc = get_uint(c, v[A_CTX], "cuda_context_mib", MIB_MAX,
			      &a->context);
	if (!rc)
		rc = get_uint(c, v[A_INF], "cuda_context_inference_mib",
			      MIB_MAX, &a->inference);
	a->measured_on = "";
	if (!rc && v[A_MEASURED])
		rc = get_str(c, v[A_MEASURED], "measured_on", true,
			     &a->measured_on);
	if (!rc)
		rc = get_str(c, v[A_SOURCE], "source", false, &a->source);
	a->context <<= 20;
	a->inference <<= 20;
	a->node = n;
	return rc;
}

static int load_archs(struct ctx *c, yaml_node_t *seq)
{
	size_t n;
	int rc;

	if (seq->type != YAML_SEQUENCE_NODE)
		return fail(c, seq, "'architectures' must be a list");
	n = (size_t)(seq->data.sequence.items.top -
		     seq->data.sequence.items.start);
	c->archs = calloc(n ? n : 1, sizeof(*c->archs));
	c->n_arch_slots = 16;
	while (c->n_arch_slots < 2 * n)
		c->n_arch_slots *= 2;
	c->arch_slots = calloc(c->n_arch_slots, sizeof(*c->arch_slots));
	if (!c->archs || !c->arch_slots)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		yaml_node_t *it = yaml_document_get_node(
			c->doc, seq->data.sequence.items.start[i]);
		rc = load_arch(c, it, &c->archs[i]);
		if (rc)
			return rc;
		c->n_archs++;
	}
	return 0;
}

/* ==== gpus: ==== */

enum {
	G_NAME, G_ALIASES, G_ARCH, G_CC, G_SMS, G_PCI, G_FORM, G_MARKETED,
	G_TOTAL, G_OTHER_ECC, G_LEGACY, G_CUDA_TOTAL, G_TOTAL_EST, G_ECC,
	G_MEMTYPE, G_BW, G_TFLOPS, G_FP16, G_CTX, G_INF, G_TOL, G_SOURCE,
	G_NOTES, G_N
};
static const char *const gpu_keys[G_N] = {
	"name", "aliases", "architecture", "compute_capability",
	"multiprocessors", "pci_device_id", "form_factor", "marketed",
	"total_mib",
	"total_other_ecc_mib", "total_legacy_mib", "cuda_total_mib",
	"total_estimate", "ecc_default_on", "memory_type", "bandwidth_gbps",
	"bf16_tflops", "bf16_is_fp16", "cuda_context_mib",
	"cuda_context_inference_mib", "tolerance", "source", "notes"};
static const bool gpu_required[G_N] = {
	[G_NAME] = true, [G_ALIASES] = true, [G_ARCH] = true,
	[G_CC] = true, [G_MARKETED] = true, [G_TOTAL] = true,
	[G_ECC] = true, [G_MEMTYPE] = true, [G_BW] = true,
	[G_TFLOPS] = true, [G_TOL] = true, [G_SOURCE] = true};

static const char *const mem_types[] = {
	"HBM2", "HBM2e", "HBM3", "HBM3e", "GDDR5", "GDDR5X",
	"GDDR6", "GDDR6X", "GDDR7"};
#define N_MEM_TYPES (sizeof(mem_types) / sizeof(mem_types[0]))

static int get_mib(struct ctx *c, yaml_node_t *n, const char *key,
		   uint64_t *bytes)
{
	uint64_t mib = 0;
	int rc = 0;

	*bytes = 0;
	if (n)
		rc = get_uint(c, n, key, MIB_MAX, &mib);
	if (!rc && n && mib == 0)
		rc = fail(c, n, "'%s' must be more than 0%s", key,
			  strcmp(key, "total_mib") == 0 ? ""
			  : " (leave it out when not known)");
	*bytes = mib << 20;
	return rc;
}

static int get_cc(struct ctx *c, yaml_node_t *n, struct gm_gpu *g)
{
	unsigned maj, min;
	int used = 0;
	int rc = want_scalar(c, n, "compute_capability");

	if (rc)
		return rc;
	if (sscanf(scalar(n), "%u.%u%n", &maj, &min, &used) != 2 ||
	    scalar(n)[used] != '\0' || maj == 0 || maj > 99 || min > 9)
		return fail(c, n, "'compute_capability' must look like "
			    "\"9.0\", got '%s'", scalar(n));
	g->cc_major = maj;
	g->cc_minor = min;
	return 0;
}

/*
 * 'multiprocessors': optional in a user's file (0 = not known), required
 * in the built-in catalog; when given, 1 to SMS_MAX.
 */
static int get_sms(struct ctx *c, yaml_node_t *map, yaml_node_t *n,
		   struct gm_gpu *g)
{
	uint64_t v = 0;
	int rc;

	g->multiprocessors = 0;
	if (!n && c->builtin)
		return fail(c, map, "GPU entry is missing 'multiprocessors' "
			    "(required in the built-in catalog)");
	if (!n)
		return 0;
	rc = get_uint(c, n, "multiprocessors", SMS_MAX, &v);
	if (!rc && v == 0)
		rc = fail(c, n, "'multiprocessors' must be more than 0 "
			  "(leave it out when not known)");
	g->multiprocessors = (unsigned)v;
	return rc;
}

static int get_memtype(struct ctx *c, yaml_node_t *n, struct gm_gpu *g)
{
	const char *hint;
	int rc = want_scalar(c, n, "memory_type");

	if (rc)
		return rc;
	for (size_t i = 0; i < N_MEM_TYPES; i++) {
		if (strcmp(scalar(n), mem_types[i]) == 0) {
			g->memory_type = mem_types[i];
			return 0;
		}
	}
	hint = gm_text_suggest(scalar(n), mem_types, N_MEM_TYPES);
	return fail(c, n, "unknown memory_type '%s' (one of HBM2, "
		    "HBM2e, HBM3, HBM3e, GDDR5, GDDR5X, GDDR6, GDDR6X, "
		    "GDDR7)%s%s%s", scalar(n), hint ? "; did you mean '" : "",
		    hint ? hint : "", hint ? "'?" : "");
}

static int get_marketed(struct ctx *c, yaml_node_t *n, struct gm_gpu *g)
{
	int rc = get_str(c, n, "marketed", false, &g->marketed);

	if (rc)
		return rc;
	if (gm_size_parse(g->marketed, &g->marketed_bytes) != 0 ||
	    g->marketed_bytes == 0)
		return fail(c, n, "'marketed' must be a size such as "
			    "\"80 GB\", got '%s'", g->marketed);
	return 0;
}

static int get_arch(struct ctx *c, yaml_node_t *n, struct gm_gpu *g,
		    const struct arch **out)
{
	const char *names[32];
	size_t nn = 0;
	const char *hint;
	int rc = want_scalar(c, n, "architecture");

	if (rc)
		return rc;
	/* The file's own by hash; the catalog it adds to (a few) in turn. */
	*out = arch_find(c, scalar(n), NULL);
	for (size_t i = 0; !*out && i < c->n_base_archs; i++)
		if (strcmp(c->base_archs[i].name, scalar(n)) == 0)
			*out = &c->base_archs[i];
	if (*out) {
		g->architecture = (*out)->name;
		return 0;
	}
	for (size_t i = 0; i < c->n_archs + c->n_base_archs && nn < 32; i++)
		names[nn++] = i < c->n_archs ? c->archs[i].name
					     : c->base_archs[i - c->n_archs].name;
	hint = gm_text_suggest(scalar(n), names, nn);
	if (hint)
		return fail(c, n, "unknown architecture '%s'; did you mean "
			    "'%s'? (or list it under 'architectures')",
			    scalar(n), hint);
	return fail(c, n, "unknown architecture '%s'; list it under "
		    "'architectures'", scalar(n));
}

static int get_aliases(struct ctx *c, yaml_node_t *n, struct gm_gpu *g)
{
	const char **a;
	size_t cnt;

	if (n->type != YAML_SEQUENCE_NODE)
		return fail(c, n, "'aliases' must be a list, e.g. [h200]");
	cnt = (size_t)(n->data.sequence.items.top -
		       n->data.sequence.items.start);
	a = calloc(cnt + 1, sizeof(*a));
	if (gm__catalog_keep(c->cat, a) != 0)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t i = 0; i < cnt; i++) {
		yaml_node_t *it = yaml_document_get_node(
			c->doc, n->data.sequence.items.start[i]);
		char norm[GM__CATALOG_NORM_MAX];
		int rc = get_str(c, it, "aliases", false, &a[i]);

		if (rc)
			return rc;
		if (!*gm__catalog_normalize(norm, sizeof(norm), a[i]))
			return fail(c, it, "alias '%s' has no letters or "
				    "digits besides nvidia/tesla/geforce",
				    a[i]);
	}
	g->aliases = a;
	g->n_aliases = cnt;
	return 0;
}

/* Fill the context fields from the architecture or the entry. */
static int set_context(struct ctx *c, yaml_node_t **v, struct gm_gpu *g,
		       const struct arch *a)
{
	int rc = 0;

	g->cuda_context_bytes = a->context;
	g->cuda_context_inference_bytes = a->inference;
	g->cuda_context_source = a->source;
	g->cuda_context_estimate = strcmp(a->measured_on, g->name) != 0;
	if (v[G_CTX] || v[G_INF]) {
		if (!v[G_CTX] || !v[G_INF])
			return fail(c, v[G_CTX] ? v[G_CTX] : v[G_INF],
				    "give both cuda_context_mib and "
				    "cuda_context_inference_mib, or neither");
		rc = get_mib(c, v[G_CTX], "cuda_context_mib",
			     &g->cuda_context_bytes);
		if (!rc)
			rc = get_mib(c, v[G_INF], "cuda_context_inference_mib",
				     &g->cuda_context_inference_bytes);
		g->cuda_context_source = g->source;
	}
	return rc;
}

static int load_gpu(struct ctx *c, yaml_node_t *n, struct gm_gpu *g)
{
	yaml_node_t *v[G_N];
	const struct arch *a = NULL;
	uint64_t pci = 0;
	int rc;

	rc = map_fields(c, n, "GPU entry", gpu_keys, G_N, v);
	if (!rc)
		rc = require(c, n, "GPU entry", gpu_keys, v, gpu_required,
			     G_N);
	if (!rc)
		rc = get_str(c, v[G_NAME], "name", false, &g->name);
	if (!rc)
		rc = get_aliases(c, v[G_ALIASES], g);
	if (!rc)
		rc = get_arch(c, v[G_ARCH], g, &a);
	if (!rc)
		rc = get_cc(c, v[G_CC], g);
	if (!rc)
		rc = get_sms(c, n, v[G_SMS], g);
	if (!rc && v[G_PCI])
		rc = get_uint(c, v[G_PCI], "pci_device_id", 0xffff, &pci);
	g->pci_device_id = (uint32_t)pci;
	g->form_factor = "";
	if (!rc && v[G_FORM])
		rc = get_str(c, v[G_FORM], "form_factor", true,
			     &g->form_factor);
	if (!rc)
		rc = get_marketed(c, v[G_MARKETED], g);
	if (!rc)
		rc = get_mib(c, v[G_TOTAL], "total_mib", &g->total_bytes);
	if (!rc)
		rc = get_mib(c, v[G_OTHER_ECC], "total_other_ecc_mib",
			     &g->total_other_ecc_bytes);
	if (!rc)
		rc = get_mib(c, v[G_LEGACY], "total_legacy_mib",
			     &g->total_legacy_bytes);
	if (!rc)
		rc = get_mib(c, v[G_CUDA_TOTAL], "cuda_total_mib",
			     &g->cuda_total_bytes);
	if (!rc && g->cuda_total_bytes > g->total_bytes)
		rc = fail(c, v[G_CUDA_TOTAL], "'cuda_total_mib' cannot be "
			  "more than 'total_mib'");
	if (!rc && v[G_TOTAL_EST])
		rc = get_bool(c, v[G_TOTAL_EST], "total_estimate",
			      &g->total_estimate);
	if (!rc)
		rc = get_bool(c, v[G_ECC], "ecc_default_on",
			      &g->ecc_default_on);
	if (!rc)
		rc = get_memtype(c, v[G_MEMTYPE], g);
	if (!rc)
		rc = get_real(c, v[G_BW], "bandwidth_gbps", 1, 1e6,
			      &g->bandwidth_gbps);
	if (!rc)
		rc = get_real(c, v[G_TFLOPS], "bf16_tflops", 0, 1e6,
			      &g->bf16_tflops);
	if (!rc && v[G_FP16])
		rc = get_bool(c, v[G_FP16], "bf16_is_fp16",
			      &g->bf16_is_fp16);
	if (!rc)
		rc = get_real(c, v[G_TOL], "tolerance", 0, 0.2,
			      &g->tolerance);
	if (!rc)
		rc = get_str(c, v[G_SOURCE], "source", false, &g->source);
	g->notes = "";
	if (!rc && v[G_NOTES])
		rc = get_str(c, v[G_NOTES], "notes", true, &g->notes);
	if (!rc)
		rc = set_context(c, v, g, a);
	return rc;
}

/* Where candidate j (0 = name) of GPU i was written, for messages. */
static yaml_node_t *candidate_node(struct ctx *c, size_t i, size_t j)
{
	const char *const key = j == 0 ? "name" : "aliases";
	yaml_node_t *m = c->gpu_nodes[i];

	for (yaml_node_pair_t *p = m->data.mapping.pairs.start;
	     p < m->data.mapping.pairs.top; p++) {
		yaml_node_t *k = yaml_document_get_node(c->doc, p->key);
		yaml_node_t *v = yaml_document_get_node(c->doc, p->value);

		if (strcmp(scalar(k), key) != 0)
			continue;
		if (j == 0)
			return v;
		return yaml_document_get_node(
			c->doc, v->data.sequence.items.start[j - 1]);
	}
	return m;
}

static const char *cand(const struct gm_gpu *g, size_t j)
{
	return j == 0 ? g->name : g->aliases[j - 1];
}

/* One name or alias of GPU i (j = 0: its name), normalized. */
struct cand_ref {
	char norm[GM__CATALOG_NORM_MAX];
	size_t i, j;
};

/* By normalized form, then in the order the file gives them. */
static int cand_cmp(const void *pa, const void *pb)
{
	const struct cand_ref *a = pa, *b = pb;
	int d = strcmp(a->norm, b->norm);

	if (d)
		return d;
	if (a->i != b->i)
		return a->i < b->i ? -1 : 1;
	return a->j < b->j ? -1 : a->j > b->j;
}

/* PCI device ids by value, then by entry. */
static int pci_cmp(const void *pa, const void *pb)
{
	const size_t *a = pa, *b = pb;

	if (a[0] != b[0])
		return a[0] < b[0] ? -1 : 1;
	return a[1] < b[1] ? -1 : a[1] > b[1];
}

/*
 * Names and aliases must identify one GPU: no normalized form may be
 * shared by two entries (gm_catalog_find() would be ambiguous), and no
 * PCI device id may repeat. Sorted, so a catalog of n names costs
 * n log n; the fault reported is the first in file order (a name or
 * alias that an earlier entry already has, named with that entry).
 */
static int check_unique(struct ctx *c, const struct gm_gpu *gpus, size_t n)
{
	struct cand_ref *refs, *bad = NULL, *first = NULL;
	size_t total = 0, at = 0, (*pci)[2], npci = 0;
	int rc = 0;

	for (size_t i = 0; i < n; i++)
		total += gpus[i].n_aliases + 1;
	refs = calloc(total, sizeof(*refs));
	pci = calloc(n ? n : 1, sizeof(*pci));
	if (!refs || !pci) {
		free(refs);
		free(pci);
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		for (size_t j = 0; j <= gpus[i].n_aliases; j++, at++) {
			gm__catalog_normalize(refs[at].norm,
					      sizeof(refs[at].norm),
					      cand(&gpus[i], j));
			refs[at].i = i;
			refs[at].j = j;
		}
		if (gpus[i].pci_device_id) {
			pci[npci][0] = gpus[i].pci_device_id;
			pci[npci++][1] = i;
		}
	}
	qsort(refs, total, sizeof(*refs), cand_cmp);
	for (size_t g = 0; g < total;) {
		size_t e = g + 1;

		while (e < total && !strcmp(refs[e].norm, refs[g].norm))
			e++;
		/* The first of the group from a later entry than the
		 * group's first is the one the file order meets first. */
		for (size_t k = g + 1; k < e; k++) {
			if (refs[k].i == refs[g].i)
				continue;
			if (!bad || refs[k].i < bad->i ||
			    (refs[k].i == bad->i && refs[k].j < bad->j)) {
				bad = &refs[k];
				first = &refs[g];
			}
			break;
		}
		g = e;
	}
	qsort(pci, npci, sizeof(*pci), pci_cmp);
	size_t pci_bad = SIZE_MAX, pci_first = 0;
	for (size_t k = 1; k < npci; k++) {
		if (pci[k][0] != pci[k - 1][0])
			continue;
		size_t f = k - 1;

		while (f > 0 && pci[f - 1][0] == pci[k][0])
			f--;
		if (pci[k][1] < pci_bad) {
			pci_bad = pci[k][1];
			pci_first = pci[f][1];
		}
	}
	/* Entries are checked in file order: a name fault in an entry
	 * comes before a PCI fault of a later one, and within one entry
	 * names come first. */
	if (bad && (pci_bad == SIZE_MAX || bad->i <= pci_bad))
		rc = fail(c, candidate_node(c, bad->i, bad->j),
			  "'%s' also names '%s' (line %zu)",
			  cand(&gpus[bad->i], bad->j), gpus[first->i].name,
			  candidate_node(c, first->i, first->j)
				  ->start_mark.line + 1);
	else if (pci_bad != SIZE_MAX)
		rc = fail(c, c->gpu_nodes[pci_bad],
			  "pci_device_id 0x%04x is also '%s'",
			  (unsigned)gpus[pci_bad].pci_device_id,
			  gpus[pci_first].name);
	free(refs);
	free(pci);
	return rc;
}

static int load_gpus(struct ctx *c, yaml_node_t *seq)
{
	struct gm_gpu *gpus;
	size_t n;
	int rc;

	if (seq->type != YAML_SEQUENCE_NODE)
		return fail(c, seq, "'gpus' must be a list");
	n = (size_t)(seq->data.sequence.items.top -
		     seq->data.sequence.items.start);
	if (n == 0)
		return fail(c, seq, "'gpus' lists no GPU");
	gpus = calloc(n, sizeof(*gpus));
	c->gpu_nodes = calloc(n, sizeof(*c->gpu_nodes));
	if (gm__catalog_keep(c->cat, gpus) != 0 || !c->gpu_nodes)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t i = 0; i < n; i++) {
		c->gpu_nodes[i] = yaml_document_get_node(
			c->doc, seq->data.sequence.items.start[i]);
		rc = load_gpu(c, c->gpu_nodes[i], &gpus[i]);
		if (rc)
			return rc;
	}
	rc = check_unique(c, gpus, n);
	if (rc)
		return rc;
	c->cat->gpus = gpus;
	c->cat->n = n;
	return 0;
}

/* ==== The file ==== */

/*
 * 1-based line and column (in bytes) of byte offset off of the file:
 * libyaml gives only an offset for encoding errors.
 */
static void offset_position(const struct ctx *c, size_t off, size_t *line,
			    size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < c->len; i++) {
		if (c->buf[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int parse_error(struct ctx *c, const yaml_parser_t *p)
{
	const yaml_mark_t *m = &p->problem_mark;

	if (p->error == YAML_MEMORY_ERROR)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	if (p->error == YAML_READER_ERROR) {
		size_t line, col;

		offset_position(c, p->problem_offset, &line, &col);
		return gm_diag_set(c->diag, GM_EINVAL,
				   "%s:%zu:%zu: not UTF-8 text (%s)",
				   c->path, line, col,
				   p->problem ? p->problem : "bad bytes");
	}
	/* a tab where YAML wants indentation: said as the spec loader
	 * says it */
	if (c->buf && m->index < c->len && c->buf[m->index] == '\t')
		return gm_diag_set(c->diag, GM_EINVAL, "%s:%zu:%zu: YAML "
				   "syntax error: tabs are not allowed, indent "
				   "with spaces", c->path, m->line + 1,
				   m->column + 1);
	return gm_diag_set(c->diag, GM_EINVAL, "%s:%zu:%zu: YAML syntax "
			   "error: %s%s%s", c->path, m->line + 1,
			   m->column + 1, p->problem ? p->problem : "",
			   p->context ? " " : "",
			   p->context ? p->context : "");
}

/* The file's architectures as the catalog keeps them (cat->archs). */
static int keep_archs(struct ctx *c)
{
	struct gm_gpu_arch *out = calloc(c->n_archs ? c->n_archs : 1,
				     sizeof(*out));

	if (gm__catalog_keep(c->cat, out) != 0)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t i = 0; i < c->n_archs; i++)
		out[i] = (struct gm_gpu_arch){
			.name = c->archs[i].name,
			.cuda_context_bytes = c->archs[i].context,
			.cuda_context_inference_bytes = c->archs[i].inference,
			.measured_on = c->archs[i].measured_on,
			.source = c->archs[i].source};
	c->cat->archs = out;
	c->cat->n_archs = c->n_archs;
	return 0;
}

/* base's architectures in the loader's form, for get_arch(). */
static int base_archs(struct ctx *c)
{
	const struct gm_catalog *b = c->base;

	c->base_archs = calloc(b->n_archs ? b->n_archs : 1,
			       sizeof(*c->base_archs));
	if (!c->base_archs)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t i = 0; i < b->n_archs; i++)
		c->base_archs[i] = (struct arch){
			.name = b->archs[i].name,
			.context = b->archs[i].cuda_context_bytes,
			.inference = b->archs[i].cuda_context_inference_bytes,
			.measured_on = b->archs[i].measured_on,
			.source = b->archs[i].source};
	c->n_base_archs = b->n_archs;
	return 0;
}

static bool same_name(const char *x, const char *y)
{
	char a[GM__CATALOG_NORM_MAX], b[GM__CATALOG_NORM_MAX];

	return strcmp(gm__catalog_normalize(a, sizeof(a), x),
		      gm__catalog_normalize(b, sizeof(b), y)) == 0;
}

/*
 * The file's GPU (index in the file) that replaces base GPU g, or -1:
 * the one of the same normalized name.
 */
static long replacement(const struct ctx *c, const struct gm_gpu *g)
{
	for (size_t i = 0; i < c->cat->n; i++)
		if (same_name(c->cat->gpus[i].name, g->name))
			return (long)i;
	return -1;
}

/*
 * A name, alias or PCI id of the file's GPUs that also identifies a base
 * GPU the file does not replace is an error at the file's entry.
 */
static int check_over(struct ctx *c)
{
	const struct gm_catalog *b = c->base;
	const struct gm_gpu *f = c->cat->gpus;

	for (size_t k = 0; k < b->n; k++) {
		const struct gm_gpu *g = &b->gpus[k];

		if (replacement(c, g) >= 0)
			continue;
		for (size_t i = 0; i < c->cat->n; i++) {
			for (size_t j = 0; j <= f[i].n_aliases; j++)
				for (size_t l = 0; l <= g->n_aliases; l++)
					if (same_name(cand(&f[i], j),
						      cand(g, l)))
						return fail(c,
							candidate_node(c, i, j),
							"'%s' also names '%s' "
							"(built-in catalog)",
							cand(&f[i], j),
							g->name);
			if (f[i].pci_device_id &&
			    f[i].pci_device_id == g->pci_device_id)
				return fail(c, c->gpu_nodes[i],
					    "pci_device_id 0x%04x is also '%s' "
					    "(built-in catalog)",
					    (unsigned)f[i].pci_device_id,
					    g->name);
		}
	}
	return 0;
}

/*
 * cat = base's GPUs, each replaced in place by the file's entry of its
 * name, then the file's other GPUs; likewise the architectures.
 */
static int merge_over(struct ctx *c)
{
	const struct gm_catalog *b = c->base;
	size_t nf = c->cat->n, n = 0, na = 0;
	struct gm_gpu *all = calloc(b->n + nf, sizeof(*all));
	struct gm_gpu_arch *archs;
	bool *used;
	int rc = check_over(c);

	if (rc) {
		free(all);
		return rc;
	}
	if (gm__catalog_keep(c->cat, all) != 0)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	used = calloc(nf ? nf : 1, sizeof(*used));
	if (!used)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t k = 0; k < b->n; k++) {
		long i = replacement(c, &b->gpus[k]);

		if (i >= 0)
			used[i] = true;
		all[n++] = i >= 0 ? c->cat->gpus[i] : b->gpus[k];
	}
	for (size_t i = 0; i < nf; i++)
		if (!used[i])
			all[n++] = c->cat->gpus[i];
	free(used);

	archs = calloc(b->n_archs + c->cat->n_archs + 1, sizeof(*archs));
	if (gm__catalog_keep(c->cat, archs) != 0)
		return gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	for (size_t k = 0; k < b->n_archs; k++) {
		archs[na] = b->archs[k];
		for (size_t i = 0; i < c->cat->n_archs; i++)
			if (strcmp(c->cat->archs[i].name, b->archs[k].name) == 0)
				archs[na] = c->cat->archs[i];
		na++;
	}
	for (size_t i = 0; i < c->cat->n_archs; i++) {
		bool known = false;

		for (size_t k = 0; k < b->n_archs; k++)
			known |= strcmp(c->cat->archs[i].name,
					b->archs[k].name) == 0;
		if (!known)
			archs[na++] = c->cat->archs[i];
	}
	c->cat->gpus = all;
	c->cat->n = n;
	c->cat->archs = archs;
	c->cat->n_archs = na;
	return 0;
}

enum { R_ARCHS, R_GPUS, R_N };
static const char *const root_keys[R_N] = {"architectures", "gpus"};

static int load_doc(struct ctx *c)
{
	yaml_node_t *root = yaml_document_get_root_node(c->doc);
	yaml_node_t *v[R_N];
	int rc;

	if (!root)
		return gm_diag_set(c->diag, GM_EINVAL, "%s:1:1: empty "
				   "catalog file (expected 'architectures' "
				   "and 'gpus')", c->path);
	rc = map_fields(c, root, "the catalog", root_keys, R_N, v);
	if (rc)
		return rc;
	if (!v[R_ARCHS] && !c->base)
		return fail(c, root, "the catalog is missing "
			    "'architectures'");
	if (!v[R_GPUS])
		return fail(c, root, "the catalog is missing 'gpus'");
	rc = c->base ? base_archs(c) : 0;
	if (!rc && v[R_ARCHS])
		rc = load_archs(c, v[R_ARCHS]);
	if (!rc)
		rc = keep_archs(c);
	if (!rc)
		rc = load_gpus(c, v[R_GPUS]);
	if (!rc && c->base)
		rc = merge_over(c);
	return rc;
}

static int load(struct gm_catalog *cat, const char *path, bool builtin,
		const struct gm_catalog *base, struct gm_diag *diag);

int gm_catalog_load(struct gm_catalog *cat, const char *path,
		    struct gm_diag *diag)
{
	return load(cat, path, false, NULL, diag);
}

int gm_catalog_load_over(struct gm_catalog *cat, const char *path,
			 const struct gm_catalog *base, struct gm_diag *diag)
{
	return load(cat, path, false, base ? base : gm_catalog_builtin(),
		    diag);
}

/*
 * The bounds of a catalog file: models/gpus.yaml is 26 KB, three levels
 * deep, without anchors. Checked before the document is built
 * (yaml_check.h says why).
 */
#define GM_CATALOG_MAX_FILE (4u << 20)
static const struct gm_yaml_limits catalog_limits = {
	.max_depth = 16,
	.max_anchors = 1024,
	.max_aliases = 1024,
	.depth_hint = "a catalog is a mapping of lists of GPU entries",
};

/* Read the whole file (at most GM_CATALOG_MAX_FILE bytes) into c->buf,
 * growing the buffer as it fills. */
static int read_all(struct ctx *c)
{
	FILE *fp = fopen(c->path, "rb");
	size_t cap = 64 << 10, got = 0;
	char *buf = NULL;
	int rc = 0;

	if (!fp)
		return gm_diag_set(c->diag, GM_EIO, "%s: %s", c->path,
				   strerror(errno));
	buf = malloc(cap);
	while (!rc && buf) {
		got += fread(buf + got, 1, cap - got, fp);
		if (ferror(fp))
			rc = gm_diag_set(c->diag, GM_EIO, "%s: cannot read: %s",
					 c->path, strerror(errno));
		else if (got > GM_CATALOG_MAX_FILE)
			rc = gm_diag_set(c->diag, GM_EINVAL, "%s: larger than "
					 "%u bytes; not a GPU catalog", c->path,
					 GM_CATALOG_MAX_FILE);
		else if (feof(fp))
			break;
		else if (got == cap) {
			char *more = realloc(buf, cap * 2);

			if (!more)
				break;
			buf = more;
			cap *= 2;
		}
	}
	if (!rc && !buf)
		rc = gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	else if (!rc && !feof(fp))
		rc = gm_diag_set(c->diag, GM_ENOMEM, "out of memory");
	fclose(fp);
	if (rc) {
		free(buf);
		return rc;
	}
	c->buf = buf;
	c->len = got;
	return 0;
}

int gm__catalog_load(struct gm_catalog *cat, const char *path, bool builtin,
		     struct gm_diag *diag)
{
	return load(cat, path, builtin, NULL, diag);
}

static int load(struct gm_catalog *cat, const char *path, bool builtin,
		const struct gm_catalog *base, struct gm_diag *diag)
{
	struct ctx c = {.path = path, .diag = diag, .cat = cat,
			.builtin = builtin, .base = base};
	struct gm_yaml_fault f;
	yaml_parser_t parser;
	yaml_document_t doc;
	int rc;

	memset(cat, 0, sizeof(*cat));
	rc = read_all(&c);
	if (rc)
		return rc;
	rc = gm_yaml_scan(c.buf, c.len, &catalog_limits, &f);
	if (rc) {
		rc = rc == 1 ? gm_diag_set(diag, GM_EINVAL, "%s:%u:%u: %s",
					   path, f.line, f.col, f.msg)
			     : gm_diag_set(diag, rc, "out of memory");
		free((char *)c.buf);
		return rc;
	}
	if (!yaml_parser_initialize(&parser)) {
		free((char *)c.buf);
		return gm_diag_set(diag, GM_ENOMEM, "out of memory");
	}
	yaml_parser_set_input_string(&parser, (const unsigned char *)c.buf,
				     c.len);
	if (!yaml_parser_load(&parser, &doc)) {
		rc = parse_error(&c, &parser);
		goto out_parser;
	}
	c.doc = &doc;
	rc = load_doc(&c);
	yaml_document_delete(&doc);
out_parser:
	yaml_parser_delete(&parser);
	free((char *)c.buf);
	free(c.archs);
	free(c.arch_slots);
	free(c.base_archs);
	free(c.gpu_nodes);
	if (rc)
		gm_catalog_free(cat);
	return rc;
}
