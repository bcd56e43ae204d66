/*
 * params.c - parameter layouts (see params.h): the totals over a
 * family's tensors (each family's layout op in planner/arch/ lists them
 * from its transformers modeling file). Checked by the unit tests
 * against the counts `sum(p.numel() for p in model.parameters())` prints:
 * GPT-2 124,439,808; Llama-2-7B 6,738,415,616; BERT-base MLM 109,514,298.
 */
#include "params.h"

#include "arch/family.h"
#include "error.h"

#include <math.h>
#include <string.h>

void gm_params_add(struct gm_param_layout *l, const char *name,
		   uint64_t rows, uint64_t cols, unsigned flags)
{
	if (l->n >= GM_PARAMS_MAX)
		return; /* cannot happen with the families' layouts */
	l->t[l->n++] = (struct gm_ptensor){name, rows, cols, flags, 0, 0, 0};
}

void gm_params_add3(struct gm_param_layout *l, const char *name,
		    uint64_t groups, uint64_t rows, uint64_t cols,
		    unsigned flags)
{
	gm_params_add(l, name, groups * rows, cols, flags);
	if (l->n > 0 && !strcmp(l->t[l->n - 1].name, name))
		l->t[l->n - 1].groups = groups;
}

void gm_params_blocks(struct gm_param_layout *l, uint64_t lo, uint64_t hi)
{
	struct gm_ptensor *pt;

	if (l->n <= 0)
		return;
	pt = &l->t[l->n - 1];
	if (hi > l->layers)
		hi = l->layers;
	if (lo > hi)
		lo = hi;
	/* in no block: an empty range hi 0 would not mean */
	pt->lo = lo < hi ? lo : UINT64_MAX;
	pt->hi = lo < hi ? hi : UINT64_MAX;
}

uint64_t gm_ptensor_blocks(const struct gm_ptensor *pt, uint64_t first,
			   uint64_t n)
{
	uint64_t lo = first, hi = first + n;

	if (!pt->hi)
		return n;
	lo = pt->lo > lo ? pt->lo : lo;
	hi = pt->hi < hi ? pt->hi : hi;
	return hi > lo ? hi - lo : 0;
}

/* The causal models' head (after the final norm): lm_head, tied to the
 * input embedding where model.tied_embeddings says so, or for
 * head: classification ...ForSequenceClassification's score (no
 * bias). */
void gm_params_lm_head(const struct gm_spec_model *m,
		       struct gm_param_layout *l)
{
	uint64_t h = m->hidden_size, v = m->vocab_size;
	unsigned lm = GM_PT_HEAD | GM_PT_MATMUL | GM_PT_TP;

	if (m->head == GM_HEAD_CLASSIFICATION) {
		gm_params_add(l, "score", m->num_labels, h,
			      GM_PT_HEAD | GM_PT_MATMUL);
		return;
	}
	gm_params_add(l, "lm_head", v, h,
		      lm | (m->tied_embeddings ? GM_PT_TIED : 0));
}

uint64_t gm_ptensor_elems(const struct gm_param_layout *l,
			  const struct gm_ptensor *pt)
{
	uint64_t n = pt->rows * pt->cols;

	return pt->flags & GM_PT_LAYER ? n * gm_ptensor_blocks(pt, 0,
							       l->layers) : n;
}

/* Elements of the largest block: blocks differ only where a tensor group
 * starts (its lo) or at block 0. */
static uint64_t largest_block(const struct gm_param_layout *l)
{
	uint64_t best = 0;

	for (int j = -1; j < l->n; j++) {
		uint64_t b = j < 0 ? 0 : l->t[j].lo, sum = 0;

		if (j >= 0 && (!l->t[j].hi || b >= l->layers))
			continue;
		for (int i = 0; i < l->n; i++) {
			const struct gm_ptensor *pt = &l->t[i];
			if ((pt->flags & GM_PT_LAYER) &&
			    !(pt->flags & GM_PT_TIED) &&
			    gm_ptensor_blocks(pt, b, 1))
				sum += pt->rows * pt->cols;
		}
		best = sum > best ? sum : best;
	}
	return best;
}

int gm_params_layout(const struct gm_spec_model *m,
		     struct gm_param_layout *l, struct gm_diag *diag)
{
	const struct gm_family *fam = gm_family(m->architecture);
	int rc;

	memset(l, 0, sizeof(*l));
	l->layers = m->layers;
	if (fam->shaped) {
		if (!m->hidden_size || !m->attention_heads || !m->layers ||
		    !m->kv_heads)
			return gm_diag_set(diag, GM_EINVAL,
					   "model: layers, hidden_size and "
					   "attention_heads are needed");
		l->from_shape = true;
	}
	rc = fam->layout(m, l, diag);
	if (rc)
		return rc;
	l->per_layer = largest_block(l);
	for (int i = 0; i < l->n; i++) {
		const struct gm_ptensor *pt = &l->t[i];
		uint64_t n = gm_ptensor_elems(l, pt);

		if (pt->flags & GM_PT_TIED)
			continue;
		l->total += n;
		if (pt->flags & GM_PT_LAYER)
			continue;
		if (pt->flags & GM_PT_EMBED)
			l->embed += n;
		else if (pt->flags & GM_PT_HEAD)
			l->head += n;
	}
	return 0;
}

double gm_params_mismatch(const struct gm_spec_model *m,
			  const struct gm_param_layout *l)
{
	if (!l->from_shape || !(m->parameters > 0) || !l->total)
		return 0;
	return fabs(m->parameters - (double)l->total) / (double)l->total;
}
