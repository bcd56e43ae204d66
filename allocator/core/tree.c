/* tree.c - intrusive treap keyed by (size, addr); see tree.h. */
#include "tree.h"

#include <stddef.h>

/* a < b in (size, addr) order. */
static int less(const struct gm_tnode *a, const struct gm_tnode *b)
{
	if (a->size != b->size)
		return a->size < b->size;
	return a->addr < b->addr;
}

/* Priority from the address: a 64-bit mix (splitmix64's finaliser,
 * Steele et al., OOPSLA 2014), so no random state is kept. */
static uint32_t prio_of(uint64_t addr)
{
	uint64_t z = addr + 0x9e3779b97f4a7c15ULL;

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return (uint32_t)(z ^ (z >> 31));
}

void gm_tree_insert(struct gm_tnode **root, struct gm_tnode *n)
{
	struct gm_tnode **link = root, **lo, **hi, *t;

	n->prio = prio_of(n->addr);
	while (*link && (*link)->prio >= n->prio)
		link = less(n, *link) ? &(*link)->l : &(*link)->r;
	/* Split the subtree at *link around n. */
	t = *link;
	lo = &n->l;
	hi = &n->r;
	while (t) {
		if (less(t, n)) {
			*lo = t;
			lo = &t->r;
			t = t->r;
		} else {
			*hi = t;
			hi = &t->l;
			t = t->l;
		}
	}
	*lo = NULL;
	*hi = NULL;
	*link = n;
}

void gm_tree_remove(struct gm_tnode **root, struct gm_tnode *n)
{
	struct gm_tnode **link = root, *a, *b;

	while (*link != n)
		link = less(n, *link) ? &(*link)->l : &(*link)->r;
	/* Merge the children (all of l is below all of r). */
	a = n->l;
	b = n->r;
	while (a && b) {
		if (a->prio > b->prio) {
			*link = a;
			link = &a->r;
			a = a->r;
		} else {
			*link = b;
			link = &b->l;
			b = b->l;
		}
	}
	*link = a ? a : b;
	n->l = n->r = NULL;
}

struct gm_tnode *gm_tree_lower_bound(struct gm_tnode *root, uint64_t size)
{
	struct gm_tnode *best = NULL;

	while (root) {
		if (root->size >= size) {
			best = root;
			root = root->l;
		} else {
			root = root->r;
		}
	}
	return best;
}

struct gm_tnode *gm_tree_max(struct gm_tnode *root)
{
	if (!root)
		return NULL;
	while (root->r)
		root = root->r;
	return root;
}
