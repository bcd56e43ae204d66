/*
 * catalog.c - lookups in a GPU catalog (see catalog.h). No libyaml and no
 * CUDA: linked into the preload library too. The built-in table and
 * gm_catalog_builtin() are generated from models/gpus.yaml
 * (gen_catalog.c); the YAML loader is catalog_yaml.c.
 */
#include "catalog_internal.h"

#include "error.h"
#include "text.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* Storage of a loaded catalog: every block it allocated. */
struct gm__catalog_store {
	void **ptrs;
	size_t len, cap;
};

int gm__catalog_keep(struct gm_catalog *cat, void *ptr)
{
	struct gm__catalog_store *s = cat->owned;

	if (!ptr)
		return GM_ENOMEM;
	if (!s) {
		s = calloc(1, sizeof(*s));
		if (!s)
			goto fail;
		cat->owned = s;
	}
	if (s->len == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		void **p = realloc(s->ptrs, cap * sizeof(*p));
		if (!p)
			goto fail;
		s->ptrs = p;
		s->cap = cap;
	}
	s->ptrs[s->len++] = ptr;
	return 0;
fail:
	free(ptr);
	return GM_ENOMEM;
}

void gm_catalog_free(struct gm_catalog *cat)
{
	struct gm__catalog_store *s;

	if (!cat || !cat->owned)
		return;
	s = cat->owned;
	for (size_t i = 0; i < s->len; i++)
		free(s->ptrs[i]);
	free(s->ptrs);
	free(s);
	cat->owned = NULL;
	cat->gpus = NULL;
	cat->n = 0;
	cat->archs = NULL;
	cat->n_archs = 0;
}

/* Words that carry no information in a GPU name. */
static bool noise_word(const char *w, size_t n)
{
	static const char *const words[] = {"nvidia", "tesla", "geforce"};

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strlen(words[i]) == n && strncasecmp(w, words[i], n) == 0)
			return true;
	return false;
}

char *gm__catalog_normalize(char *out, size_t len, const char *name)
{
	size_t o = 0;
	const char *p = name;

	if (len == 0)
		return out;
	while (*p) {
		const char *w = p;
		size_t n = 0;

		while (*p && isalnum((unsigned char)*p)) {
			p++;
			n++;
		}
		if (n == 0) {
			p++; /* a separator */
			continue;
		}
		if (noise_word(w, n))
			continue;
		for (size_t i = 0; i < n && o + 1 < len; i++)
			out[o++] = (char)tolower((unsigned char)w[i]);
	}
	out[o] = '\0';
	return out;
}

static const struct gm_catalog *cat_or_builtin(const struct gm_catalog *cat)
{
	return cat ? cat : gm_catalog_builtin();
}

/* Candidate j of gpu: 0 is the name, 1.. the aliases. */
static const char *candidate(const struct gm_gpu *g, size_t j)
{
	return j == 0 ? g->name : g->aliases[j - 1];
}

const struct gm_gpu *gm_catalog_find(const struct gm_catalog *cat,
				     const char *name)
{
	char want[GM__CATALOG_NORM_MAX], have[GM__CATALOG_NORM_MAX];

	cat = cat_or_builtin(cat);
	if (!name || !*name)
		return NULL;
	for (size_t i = 0; i < cat->n; i++)
		if (strcmp(cat->gpus[i].name, name) == 0)
			return &cat->gpus[i];
	for (size_t i = 0; i < cat->n; i++)
		for (size_t j = 0; j <= cat->gpus[i].n_aliases; j++)
			if (strcasecmp(candidate(&cat->gpus[i], j), name) == 0)
				return &cat->gpus[i];
	gm__catalog_normalize(want, sizeof(want), name);
	if (!*want)
		return NULL;
	for (size_t i = 0; i < cat->n; i++) {
		for (size_t j = 0; j <= cat->gpus[i].n_aliases; j++) {
			gm__catalog_normalize(have, sizeof(have),
					      candidate(&cat->gpus[i], j));
			if (strcmp(want, have) == 0)
				return &cat->gpus[i];
		}
	}
	return NULL;
}

const struct gm_gpu *gm_catalog_find_pci(const struct gm_catalog *cat,
					 uint32_t pci_device_id)
{
	cat = cat_or_builtin(cat);
	if (pci_device_id == 0)
		return NULL;
	for (size_t i = 0; i < cat->n; i++)
		if (cat->gpus[i].pci_device_id == pci_device_id)
			return &cat->gpus[i];
	return NULL;
}

bool gm_gpu_is_mig(const struct gm_gpu *gpu)
{
	return strcmp(gpu->form_factor, "MIG") == 0;
}

/* How one GPU ranks as a suggestion: lower is better. */
struct rank {
	const char *text; /* its best-matching name or alias (ranked on) */
	unsigned misses; /* 0 when it contains the word, else 1 */
	unsigned distance;
	size_t index;
};

static bool rank_before(const struct rank *a, const struct rank *b)
{
	if (a->misses != b->misses)
		return a->misses < b->misses;
	if (a->distance != b->distance)
		return a->distance < b->distance;
	return a->index < b->index;
}

/* The best candidate of one GPU for the normalized word, into r. */
/* The normalized card and profile of a slice's name ("a100-80gb:3g.40gb":
 * "a10080gb", "3g40gb"); false for a name without ':'. */
static bool slice_parts(const char *name, char *card, char *prof, size_t len)
{
	const char *colon = strchr(name, ':');
	char head[GM__CATALOG_NORM_MAX];

	if (!colon || (size_t)(colon - name) >= sizeof(head))
		return false;
	memcpy(head, name, (size_t)(colon - name));
	head[colon - name] = '\0';
	gm__catalog_normalize(card, len, head);
	gm__catalog_normalize(prof, len, colon + 1);
	return *card && *prof;
}

/* r: g's best name for want (normalized). A slice's name asked as
 * CARD:PROFILE (wcard, wprof; "" when the name has no ':') contains it
 * when its profile is that profile and its card's name contains CARD
 * ("a100:3g.40gb" is a100-80gb:3g.40gb's). */
static void rank_gpu(const struct gm_gpu *g, size_t index, const char *want,
		     const char *wcard, const char *wprof, struct rank *r)
{
	char have[GM__CATALOG_NORM_MAX], card[GM__CATALOG_NORM_MAX];
	char prof[GM__CATALOG_NORM_MAX];

	r->text = NULL;
	r->index = index;
	for (size_t j = 0; j <= g->n_aliases; j++) {
		struct rank c = {candidate(g, j), 1, 0, index};

		gm__catalog_normalize(have, sizeof(have), c.text);
		c.misses = strstr(have, want) ? 0 : 1;
		c.distance = gm_text_distance(want, have);
		if (c.misses && *wprof &&
		    slice_parts(c.text, card, prof, sizeof(card)) &&
		    !strcmp(prof, wprof) && strstr(card, wcard)) {
			c.misses = 0;
			c.distance = gm_text_distance(wcard, card);
		}
		if (!r->text || rank_before(&c, r))
			*r = c;
	}
}

/*
 * Suggestions: the GPUs with a name containing the normalized word when
 * there are any ("a100" lists every A100), else those within
 * max(2, len / 3) edits of it (gm_text_distance, Levenshtein; the bound
 * of gm_text_suggest), ordered by (distance, catalog order), each
 * written as its short name (the first alias, the `gpus` table's column)
 * whichever of its names matched best. MIG slices
 * only when the name looks like one (has ':' or "mig"), so "a100" lists
 * the cards, not their slices.
 */
size_t gm_catalog_suggest(const struct gm_catalog *cat, const char *name,
			  const char **out, size_t max)
{
	char want[GM__CATALOG_NORM_MAX], wcard[GM__CATALOG_NORM_MAX];
	char wprof[GM__CATALOG_NORM_MAX];
	struct rank best[16];
	size_t n = 0, limit;
	bool slices;

	cat = cat_or_builtin(cat);
	if (!name || max == 0)
		return 0;
	if (max > sizeof(best) / sizeof(best[0]))
		max = sizeof(best) / sizeof(best[0]);
	gm__catalog_normalize(want, sizeof(want), name);
	if (!*want)
		return 0;
	limit = strlen(want) / 3;
	if (limit < 2)
		limit = 2;
	slices = strchr(name, ':') || strcasestr(name, "mig");
	if (!slice_parts(name, wcard, wprof, sizeof(wcard)))
		wcard[0] = wprof[0] = '\0';
	for (size_t i = 0; i < cat->n; i++) {
		struct rank r;
		size_t at;

		if (!slices && gm_gpu_is_mig(&cat->gpus[i]))
			continue;
		rank_gpu(&cat->gpus[i], i, want, wcard, wprof, &r);
		if (r.misses && r.distance > limit)
			continue;
		/* Containing matches push out the merely close ones. */
		if (r.misses && n > 0 && !best[0].misses)
			continue;
		if (!r.misses && n > 0 && best[0].misses)
			n = 0;
		for (at = n; at > 0 && rank_before(&r, &best[at - 1]); at--)
			;
		if (at >= max)
			continue;
		if (n < max)
			n++;
		memmove(&best[at + 1], &best[at], (n - 1 - at) * sizeof(r));
		best[at] = r;
	}
	for (size_t i = 0; i < n; i++) {
		const struct gm_gpu *g = &cat->gpus[best[i].index];

		out[i] = g->n_aliases ? g->aliases[0] : g->name;
	}
	return n;
}

/*
 * Smallest known genuine total (nvidia-smi in either ECC mode, R4xx
 * drivers, CUDA's total), less tolerance: the floor of the undersized
 * check. The totals differ by ECC mode and driver era, and CUDA's total
 * is NVML's total less NVML's reserved part (the nvidia-smi outputs the
 * catalog's sources cite).
 */
uint64_t gm_gpu_min_total(const struct gm_gpu *gpu)
{
	uint64_t m = gpu->total_bytes;
	const uint64_t other[] = {gpu->total_other_ecc_bytes,
				  gpu->total_legacy_bytes,
				  gpu->cuda_total_bytes};

	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (other[i] && other[i] < m)
			m = other[i];
	return (uint64_t)((double)m * (1.0 - gpu->tolerance));
}

unsigned gm_gpu_threads_per_sm(const struct gm_gpu *gpu)
{
	enum { ANY_MINOR = 100 };
	static const struct {
		unsigned major, minor, threads;
	} table[] = {
		{6, 0, 2048}, {6, 1, 2048}, {7, 0, 2048}, {7, 5, 1024}, {8, 0, 2048}, {8, 6, 1536},
		{8, 7, 2048}, {8, 9, 1536}, {9, 0, 2048},
		{10, ANY_MINOR, 2048}, {12, ANY_MINOR, 1536},
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (table[i].major == gpu->cc_major &&
		    (table[i].minor == ANY_MINOR ||
		     table[i].minor == gpu->cc_minor))
			return table[i].threads;
	return 0;
}

/* The largest total - cuda_total over cat's measured whole cards of
 * architecture arch (NULL: any); 0 when none is measured. */
static uint64_t largest_reserved(const struct gm_catalog *cat,
				 const char *arch)
{
	uint64_t r = 0;

	for (size_t i = 0; i < cat->n; i++) {
		const struct gm_gpu *g = &cat->gpus[i];

		if (!g->cuda_total_bytes || gm_gpu_is_mig(g) ||
		    g->cuda_total_bytes > g->total_bytes ||
		    (arch && strcmp(g->architecture, arch) != 0))
			continue;
		if (g->total_bytes - g->cuda_total_bytes > r)
			r = g->total_bytes - g->cuda_total_bytes;
	}
	return r;
}

uint64_t gm_gpu_usable_bytes(const struct gm_catalog *cat,
			     const struct gm_gpu *gpu, bool *estimated)
{
	uint64_t r, u;
	bool dummy;

	if (!estimated)
		estimated = &dummy;
	*estimated = false;
	if (gpu->cuda_total_bytes)
		return gpu->cuda_total_bytes;
	*estimated = true;
	if (gm_gpu_is_mig(gpu))
		return gpu->total_bytes;
	if (!cat)
		cat = gm_catalog_builtin();
	r = largest_reserved(cat, gpu->architecture);
	if (!r)
		r = largest_reserved(cat, NULL);
	u = gpu->total_bytes > r ? gpu->total_bytes - r : 0;
	if (gpu->total_legacy_bytes && gpu->total_legacy_bytes < u)
		u = gpu->total_legacy_bytes;
	return u;
}
