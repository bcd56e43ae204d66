/*
 * emu.c - an emulated card in host memory, for testing every verdict
 * without a GPU (like f3probe's --debug-real-size/--debug-fake-size).
 *
 * The card reports `reported` bytes (what the driver would say) but holds
 * only `real` bytes of storage. Word index i beyond real either aliases
 * onto i mod real (mode wrap: high address bits not decoded), or is lost
 * (mode drop: reads give zeros; mode garbage: reads give noise). bad_bits
 * places stuck bits through the real storage. The passes run here are
 * the kernels' loops over the same pattern.h functions, one thread.
 */
#include "verify.h"

#include "error.h"
#include "units.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Chunk size of the emulated allocation: several chunks even for small
 * cards, so the chunked code path is the one tested. */
#define GM_EMU_CHUNK_BYTES (8ULL << 20)

struct emu_stuck {
	uint64_t word;
	uint64_t mask;
	uint64_t value; /* the bit's stuck value, in place */
};

struct emu_card {
	const struct gm_verify_emu *p;
	uint64_t *mem;
	uint64_t real_words;
	struct emu_stuck *stuck;
	unsigned nstuck;
	struct gm_ve e;
};

/* ==== Parsing ==== */

/* A size key: claimed=, real= and reported= are each a card capacity,
 * read by one rule (gm_claimed_size_parse: GB = GiB, the seller's), so
 * claimed=80GB,real=80GB is a card with all it claims. */
static int parse_size_key(const char *key, const char *val, uint64_t *out,
			  struct gm_diag *d)
{
	int rc = gm_claimed_size_parse(val, out);

	if (rc) {
		char why[256];

		gm_size_error(val, why, sizeof(why));
		return gm_diag_set(d, rc, "--emulate: %s='%s' is not a size: "
				   "%s", key, val, why);
	}
	/* a card below 1 MiB written without a unit is a forgotten unit */
	if (*out && gm_size_bare_small(val))
		return gm_diag_set(d, GM_EINVAL, "--emulate: %s='%s' has no "
				   "unit (a card's capacity: write e.g. %sGB or "
				   "%sGiB)", key, val, val, val);
	if (*out % 16)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate: %s='%s' must be a multiple of "
				   "16 bytes",
				   key, val);
	return 0;
}

static int parse_flag_key(const char *key, const char *val, int *out,
			  struct gm_diag *d)
{
	if (strcmp(val, "1") == 0 || strcmp(val, "on") == 0 ||
	    strcmp(val, "yes") == 0)
		*out = 1;
	else if (strcmp(val, "0") == 0 || strcmp(val, "off") == 0 ||
		 strcmp(val, "no") == 0)
		*out = 0;
	else
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate: %s='%s' is not 0/1 (on/off)",
				   key, val);
	return 0;
}

static int parse_pair(char *item, struct gm_verify_emu *emu, struct gm_diag *d)
{
	char *eq = strchr(item, '=');
	const char *key = item, *val;
	int flag = 0, rc;

	if (!eq)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate: '%s' is not KEY=VALUE", item);
	*eq = '\0';
	val = eq + 1;
	if (strcmp(key, "claimed") == 0)
		return parse_size_key(key, val, &emu->claimed_bytes, d);
	if (strcmp(key, "real") == 0)
		return parse_size_key(key, val, &emu->real_bytes, d);
	if (strcmp(key, "reported") == 0)
		return parse_size_key(key, val, &emu->reported_bytes, d);
	if (strcmp(key, "mode") == 0) {
		if (strcmp(val, "wrap") == 0)
			emu->mode = GM_EMU_WRAP;
		else if (strcmp(val, "drop") == 0)
			emu->mode = GM_EMU_DROP;
		else if (strcmp(val, "garbage") == 0)
			emu->mode = GM_EMU_GARBAGE;
		else
			return gm_diag_set(d, GM_EINVAL,
					   "--emulate: mode='%s' is not one of "
					   "wrap, drop, garbage",
					   val);
		return 0;
	}
	if (strcmp(key, "bad_bits") == 0) {
		char *end;
		unsigned long n = strtoul(val, &end, 10);

		if (!*val || *end || n > 4096 || val[0] == '-')
			return gm_diag_set(d, GM_EINVAL,
					   "--emulate: bad_bits='%s' is not a "
					   "count from 0 to 4096",
					   val);
		emu->bad_bits = (unsigned)n;
		return 0;
	}
	if (strcmp(key, "name") == 0) {
		if (!*val || strlen(val) >= sizeof(emu->name))
			return gm_diag_set(d, GM_EINVAL,
					   "--emulate: name must have 1 to %zu "
					   "characters",
					   sizeof(emu->name) - 1);
		strcpy(emu->name, val);
		return 0;
	}
	if (strcmp(key, "nvml") == 0 || strcmp(key, "ecc") == 0 ||
	    strcmp(key, "gddr") == 0 || strcmp(key, "mig") == 0) {
		rc = parse_flag_key(key, val, &flag, d);
		if (rc)
			return rc;
		if (key[0] == 'n')
			emu->nvml = flag;
		else if (key[0] == 'e')
			emu->ecc = flag;
		else if (key[0] == 'g')
			emu->gddr = flag;
		else
			emu->mig = flag;
		return 0;
	}
	return gm_diag_set(d, GM_EINVAL,
			   "--emulate: unknown key '%s' (claimed, real, "
			   "reported, mode, bad_bits, name, nvml, ecc, gddr, "
			   "mig)",
			   key);
}

int gm_verify_emu_parse(const char *text, struct gm_verify_emu *emu,
			struct gm_diag *d)
{
	char buf[512], *save = NULL, *item, *items[64];
	int rc, nitems = 0;

	memset(emu, 0, sizeof(*emu));
	emu->nvml = true;
	emu->ecc = -1;
	emu->mig = -1;
	snprintf(emu->name, sizeof(emu->name), "gpumem emulated card");
	if (strlen(text) >= sizeof(buf))
		return gm_diag_set(d, GM_EINVAL, "--emulate: too long");
	if (!*text || text[0] == ',' || text[strlen(text) - 1] == ',' ||
	    strstr(text, ",,"))
		return gm_diag_set(d, GM_EINVAL, "--emulate: '%s' has an "
				   "empty item (KEY=VALUE,KEY=VALUE,...)",
				   text);
	strcpy(buf, text);
	for (item = strtok_r(buf, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		size_t klen = strcspn(item, "=");

		/* Each key once: a repeated key is a typo, not an override. */
		for (int k = 0; k < nitems; k++)
			if (strcspn(items[k], "=") == klen &&
			    !strncmp(items[k], item, klen))
				return gm_diag_set(d, GM_EINVAL, "--emulate: "
						   "'%.*s' is given twice",
						   (int)klen, item);
		if (nitems < 64)
			items[nitems++] = item;
		rc = parse_pair(item, emu, d);
		if (rc)
			return rc;
	}
	if (!emu->claimed_bytes)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate: claimed=SIZE is required and "
				   "must not be 0");
	if (!emu->reported_bytes)
		emu->reported_bytes = emu->claimed_bytes;
	if (!emu->real_bytes)
		emu->real_bytes = emu->reported_bytes;
	{
		const struct {
			const char *key;
			uint64_t v;
		} k[] = {{"claimed", emu->claimed_bytes},
			 {"reported", emu->reported_bytes},
			 {"real", emu->real_bytes}};

		for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
			if (k[i].v > GM_EMU_MAX_BYTES)
				return gm_diag_set(d, GM_ERANGE, "--emulate: "
					"%s= is above %llu TiB, the largest "
					"card emulated", k[i].key,
					(unsigned long long)
					(GM_EMU_MAX_BYTES >> 40));
	}
	if (emu->real_bytes > emu->reported_bytes)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate: real= must not exceed reported="
				   " (or claimed= when reported= is not given)");
	return 0;
}

/* ==== The emulated memory ==== */

static uint64_t emu_noise(uint64_t i)
{
	return gm_vp_mix(i * 0x9e3779b97f4a7c15ULL + 0x1234567ULL);
}

/* Storage slot of word i, or UINT64_MAX when the word has none. */
static uint64_t emu_slot(const struct emu_card *c, uint64_t i)
{
	if (i < c->real_words)
		return i;
	if (c->p->mode == GM_EMU_WRAP)
		return i % c->real_words;
	return UINT64_MAX;
}

static uint64_t emu_read(const struct emu_card *c, uint64_t i)
{
	uint64_t s = emu_slot(c, i);

	if (s != UINT64_MAX)
		return c->mem[s];
	return c->p->mode == GM_EMU_GARBAGE ? emu_noise(i) : 0;
}

static void emu_write(struct emu_card *c, uint64_t i, uint64_t v)
{
	uint64_t s = emu_slot(c, i);

	if (s != UINT64_MAX)
		c->mem[s] = v;
}

/* Stuck cells cannot hold the other value: force them after each op. */
static void emu_enforce(struct emu_card *c)
{
	for (unsigned k = 0; k < c->nstuck; k++) {
		uint64_t *w = &c->mem[c->stuck[k].word];

		*w = (*w & ~c->stuck[k].mask) | c->stuck[k].value;
	}
}

/* N stuck bits spread evenly through real storage, at varied bit
 * positions, alternately stuck at 0 and at 1. */
static int emu_place_stuck(struct emu_card *c)
{
	unsigned n = c->p->bad_bits;

	if (!n)
		return 0;
	c->stuck = calloc(n, sizeof(*c->stuck));
	if (!c->stuck)
		return GM_ENOMEM;
	for (unsigned k = 0; k < n; k++) {
		unsigned bit = (k * 13 + 5) % 64;

		c->stuck[k].word = (k + 1) * c->real_words / (n + 1);
		c->stuck[k].mask = 1ULL << bit;
		c->stuck[k].value = k % 2 ? c->stuck[k].mask : 0;
	}
	c->nstuck = n;
	return 0;
}

/* ==== The backend: the kernels' loops on the CPU ==== */

static int emu_begin(void *ctx, struct gm_diag *d)
{
	struct emu_card *c = ctx;

	gm_ve_init(&c->e);
	return 0;
}

static int emu_write_op(void *ctx, const struct gm_vchunk *ch, int kind,
			uint64_t seed, uint64_t konst, struct gm_diag *d)
{
	struct emu_card *c = ctx;

	for (uint64_t w = 0; w < ch->words; w++) {
		uint64_t i = ch->base + w;

		emu_write(c, i, gm_vp_value(kind, seed, konst, i));
	}
	emu_enforce(c);
	return 0;
}

static int emu_verify_op(void *ctx, const struct gm_vchunk *ch, int kind,
			 uint64_t seed, uint64_t konst, int next_kind,
			 uint64_t next_konst, uint64_t total,
			 struct gm_diag *d)
{
	struct emu_card *c = ctx;
	struct gm_ve_acc a;

	gm_ve_acc_init(&a);
	for (uint64_t w = 0; w < ch->words; w++) {
		uint64_t i = ch->base + w;
		uint64_t x = gm_vp_value(kind, seed, konst, i);
		uint64_t got = emu_read(c, i);

		if (got != x)
			gm_ve_classify(&a, &c->e, i, x, got, kind, seed, total);
		if (next_kind >= 0)
			emu_write(c, i, gm_vp_value(next_kind, seed,
						    next_konst, i));
	}
	gm_ve_flush(&c->e, &a);
	emu_enforce(c);
	return 0;
}

static int emu_walk_op(void *ctx, const struct gm_vchunk *ch, int verify,
		       uint64_t seed, uint64_t total, struct gm_diag *d)
{
	struct emu_card *c = ctx;
	struct gm_ve_acc a;
	int npos = gm_vp_walk_count(total);

	gm_ve_acc_init(&a);
	for (int pos = 0; pos < npos; pos++) {
		uint64_t w = gm_vp_walk_index(pos);
		uint64_t x = gm_vp_value(GM_VP_UNIQUE, seed, 0, w);
		uint64_t got;

		if (w < ch->base || w >= ch->base + ch->words)
			continue;
		if (!verify) {
			emu_write(c, w, x);
			continue;
		}
		got = emu_read(c, w);
		if (got != x)
			gm_ve_classify(&a, &c->e, w, x, got, GM_VP_UNIQUE,
				       seed, total);
	}
	gm_ve_flush(&c->e, &a);
	emu_enforce(c);
	return 0;
}

static int emu_sync(void *ctx, struct gm_ve *out, struct gm_diag *d)
{
	struct emu_card *c = ctx;

	if (out)
		*out = c->e;
	return 0;
}

/* The identity an emulated card reports (no writing needed). */
static void emu_ident(const struct gm_verify_emu *p, struct gm_verify_ident *id)
{
	memset(id, 0, sizeof(*id));
	snprintf(id->name, sizeof(id->name), "%s", p->name);
	snprintf(id->bus_id, sizeof(id->bus_id), "emulated");
	id->cuda_total_bytes = p->reported_bytes;
	id->cuda_free_bytes = p->reported_bytes;
	id->ecc = p->ecc;
	id->mig = p->mig;
	id->gddr = p->gddr;
	id->retired_sbe = id->retired_dbe = id->retired_pending = -1;
	id->remap_corrected = id->remap_uncorrected = -1;
	id->remap_pending = id->remap_failed = -1;
	id->nvml = p->nvml;
	if (!p->nvml) {
		snprintf(id->nvml_error, sizeof(id->nvml_error),
			 "NVML not available (emulated card without NVML)");
		id->ecc = id->mig = -1;
		return;
	}
	id->nvml_total_bytes = p->reported_bytes;
	id->retired_sbe = id->retired_dbe = id->retired_pending = 0;
	id->remap_corrected = id->remap_uncorrected = 0;
	id->remap_pending = id->remap_failed = 0;
}

/* A run at 1/scale, back at full size (verify.h): byte counts, offsets
 * and aliased address bits times scale; counts of words as run. */
static void scale_up(struct gm_verify_result *r, uint64_t scale)
{
	unsigned shift = 0;

	while ((1ULL << shift) < scale)
		shift++;
	r->emulate_scale = (unsigned)scale;
	r->tested_bytes *= scale;
	r->verified_bytes *= scale;
	r->worst_bad_bytes *= scale;
	r->lost_tail_bytes *= scale;
	r->alias_stride_bytes *= scale;
	r->alias_bits <<= shift;
	if (r->first_bad_offset != UINT64_MAX)
		r->first_bad_offset *= scale;
	for (unsigned i = 0; i < r->nrec; i++)
		r->rec[i].index *= scale;
	for (int i = 0; i < r->npasses; i++)
		r->passes[i].bytes *= scale;
	gm_verify_note(r, "emulated at 1/%llu scale: the passes ran over "
		       "%llu MiB, sizes and offsets are shown at full size, "
		       "error counts as run", (unsigned long long)scale,
		       (unsigned long long)(r->tested_bytes / scale >> 20));
}

int gm_verify_emulated(const struct gm_verify_emu *p,
		       const struct gm_verify_opts *o,
		       struct gm_verify_result *r, struct gm_diag *d)
{
	struct emu_card card = {.p = p};
	struct gm_vbackend be = {
		.ctx = &card, .begin = emu_begin, .write = emu_write_op,
		.verify = emu_verify_op, .walk = emu_walk_op,
		.sync = emu_sync,
	};
	struct gm_vchunk *chunks = NULL;
	uint64_t tested = p->reported_bytes, base = 0, scale = 1;
	size_t n = 0, cap;
	int rc;

	memset(r, 0, sizeof(*r));
	r->device = -1;
	snprintf(r->kind, sizeof(r->kind), "emulated");
	emu_ident(p, &r->id);
	gm_verify_claims(r, o->claimed_bytes ? o->claimed_bytes
					     : p->claimed_bytes);
	if (!o->claimed_bytes)
		snprintf(r->claimed_source, sizeof(r->claimed_source),
			 "emulate");
	if (o->max_bytes && o->max_bytes < tested)
		tested = o->max_bytes & ~15ULL;
	r->free_bytes = p->reported_bytes;
	r->allocated_bytes = tested;
	/* the scale holds both the range tested and the card's real memory
	 * in host memory (a --limit below a large card tests part of it) */
	while ((tested > p->real_bytes ? tested : p->real_bytes) / scale >
	       GM_EMU_FULL_BYTES)
		scale *= 2;
	tested = tested / scale & ~15ULL;
	card.real_words = (p->real_bytes / scale / 8) & ~1ULL;
	if (!card.real_words)
		card.real_words = 2;
	card.mem = calloc(card.real_words, 8);
	cap = tested / GM_EMU_CHUNK_BYTES + 1;
	chunks = calloc(cap, sizeof(*chunks));
	if (!card.mem || !chunks || emu_place_stuck(&card)) {
		rc = gm_diag_set(d, GM_ENOMEM,
				 "--emulate: cannot hold %llu bytes in host "
				 "memory",
				 (unsigned long long)p->real_bytes);
		goto out;
	}
	while (base < tested / 8) {
		uint64_t words = tested / 8 - base;

		if (words > GM_EMU_CHUNK_BYTES / 8)
			words = GM_EMU_CHUNK_BYTES / 8;
		chunks[n].addr = base;
		chunks[n].words = words;
		chunks[n].base = base;
		base += words;
		n++;
	}
	r->chunks = (unsigned)n;
	rc = gm_verify_run(&be, chunks, n, o, r, d);
	if (rc) {
		r->err = rc;
		snprintf(r->errmsg, sizeof(r->errmsg), "%s", d->msg);
	}
	if (scale > 1)
		scale_up(r, scale);
	gm_verify_judge(r);
	rc = 0;
out:
	free(card.mem);
	free(card.stuck);
	free(chunks);
	return rc;
}

int gm_verify_vmm_parse(const char *text, uint64_t *claimed, uint64_t *real,
			struct gm_diag *d)
{
	char buf[256], *save = NULL, *item;
	int rc;

	*claimed = *real = 0;
	if (strlen(text) >= sizeof(buf))
		return gm_diag_set(d, GM_EINVAL, "--emulate-vmm: too long");
	strcpy(buf, text);
	for (item = strtok_r(buf, ",", &save); item;
	     item = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(item, '=');

		if (eq)
			*eq = '\0';
		if (eq && strcmp(item, "claimed") == 0)
			rc = parse_size_key("claimed", eq + 1, claimed, d);
		else if (eq && strcmp(item, "real") == 0)
			rc = parse_size_key("real", eq + 1, real, d);
		else
			rc = gm_diag_set(d, GM_EINVAL,
					 "--emulate-vmm: '%s' is not "
					 "claimed=SIZE or real=SIZE",
					 item);
		if (rc)
			return rc;
	}
	if (!*claimed || !*real || *real > *claimed)
		return gm_diag_set(d, GM_EINVAL,
				   "--emulate-vmm: needs claimed=SIZE,real=SIZE "
				   "with 0 < real <= claimed");
	return 0;
}
