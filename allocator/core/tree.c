/* tree.c - intrusive treap keyed by (size, addr); see tree.h. */
#include "tree.h"

#include <stddef.h>

/* (size, addr) as one 128-bit number: the tree's order is its order
 * (a GCC and Clang type: __extension__ keeps -Wpedantic quiet). */
__extension__ typedef unsigned __int128 key128;

static inline key128 key_of(uint64_t size, uint64_t addr)
{
	return (key128)size << 64 | addr;
}

/* a < b in (size, addr) order (one wide compare, no branch). */
static inline int less(const struct gm_tnode *a, const struct gm_tnode *b)
{
	return key_of(a->size, a->addr) < key_of(b->size, b->addr);
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

	if (!n->prio)
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

/* Unlink n, which *link points at: merge its children (all of l is
 * below all of r) by priority. */
static void unlink_at(struct gm_tnode **link, struct gm_tnode *n)
{
	struct gm_tnode *a = n->l, *b = n->r;

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

void gm_tree_remove_at(struct gm_tnode **at, struct gm_tnode *n)
{
	unlink_at(at, n);
}

void gm_tree_remove(struct gm_tnode **root, struct gm_tnode *n)
{
	struct gm_tnode **link = root;

	while (*link != n)
		link = less(n, *link) ? &(*link)->l : &(*link)->r;
	unlink_at(link, n);
}

/* (size, addr) < b in the tree's order. */
static inline int key_less(uint64_t size, uint64_t addr,
			   const struct gm_tnode *b)
{
	return key_of(size, addr) < key_of(b->size, b->addr);
}

/*
 * The link that points at old (found by its key) and whether a node
 * keyed (size, addr) would sit in old's place: above old's in-order
 * predecessor and below its successor. The neighbours are the last
 * nodes the walk left to the right (predecessor) or to the left
 * (successor), or the extreme nodes of old's subtrees.
 */
static struct gm_tnode **locate(struct gm_tnode **root,
				const struct gm_tnode *old, uint64_t size,
				uint64_t addr, int *fits)
{
	struct gm_tnode **link = root, *pred = NULL, *succ = NULL, *t;

	while (*link != old) {
		if (less(old, *link)) {
			succ = *link;
			link = &(*link)->l;
		} else {
			pred = *link;
			link = &(*link)->r;
		}
	}
	for (t = old->l; t; t = t->r)
		pred = t;
	for (t = old->r; t; t = t->l)
		succ = t;
	*fits = (!pred || less(pred, &(struct gm_tnode){.size = size,
							.addr = addr})) &&
		(!succ || key_less(size, addr, succ));
	return link;
}

void gm_tree_replace(struct gm_tnode **root, struct gm_tnode *old,
		     struct gm_tnode *n)
{
	int fits;
	struct gm_tnode **link = locate(root, old, n->size, n->addr, &fits);

	if (!fits) {
		unlink_at(link, old);
		gm_tree_insert(root, n);
		return;
	}
	/* swap priorities: no two nodes ever share one (inherited copies
	 * would pile up and unbalance the tree) */
	fits = (int)(n->prio ? n->prio : prio_of(n->addr));
	n->l = old->l;
	n->r = old->r;
	n->prio = old->prio;
	old->prio = (uint32_t)fits;
	*link = n;
	old->l = old->r = NULL;
}

void gm_tree_resize(struct gm_tnode **root, struct gm_tnode *n,
		    uint64_t size)
{
	int fits;
	struct gm_tnode **link = locate(root, n, size, n->addr, &fits);

	if (!fits) {
		unlink_at(link, n);
		n->size = size;
		gm_tree_insert(root, n);
		return;
	}
	n->size = size;
}

struct gm_tnode *gm_tree_max(struct gm_tnode *root)
{
	if (!root)
		return NULL;
	while (root->r)
		root = root->r;
	return root;
}
