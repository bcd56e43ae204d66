/*
 * tree.h - an intrusive treap of free blocks ordered by (size, address)
 * (tree.c), the core's best-fit index.
 *
 * A treap (Seidel and Aragon, "Randomized search trees", Algorithmica
 * 1996) with each node's priority a hash of its address: expected depth
 * O(log n), no rebalancing state, deterministic. The order (size, addr)
 * is PyTorch's BlockComparatorSize without the stream (each stream has
 * its own tree): lower_bound(size) is the best fit, lowest address first
 * among equal sizes.
 *
 * Nodes are embedded in the caller's structs; the tree never allocates.
 * Units: bytes. Not thread safe (the owning arena's lock protects it).
 */
#ifndef GM_TREE_H
#define GM_TREE_H

#include <stddef.h>
#include <stdint.h>

struct gm_tnode {
	struct gm_tnode *l, *r;
	uint64_t size; /* key, major */
	uint64_t addr; /* key, minor (unique) */
	uint32_t prio; /* 0 = hash the address at insert */
};

/* Insert n (size and addr set; the pair must be unique in the tree).
 * n->prio: the caller's random priority, or 0 for one hashed from the
 * address (kept in the node afterwards). */
void gm_tree_insert(struct gm_tnode **root, struct gm_tnode *n);

/* Remove n, which must be in the tree. */
void gm_tree_remove(struct gm_tnode **root, struct gm_tnode *n);

/*
 * n (key set, not in the tree) takes the place of old (in the tree, key
 * intact); old leaves the tree. When n's key falls between old's
 * in-order neighbours, n is linked where old was, in O(1) after the
 * walk to old, and the two swap priorities (the heap order holds, and
 * priorities stay distinct random values); else old is removed and n
 * inserted. The allocator's split and merge re-key one block this way.
 */
void gm_tree_replace(struct gm_tnode **root, struct gm_tnode *old,
		     struct gm_tnode *n);

/* Change the size of n (in the tree) to size, as gm_tree_replace. */
void gm_tree_resize(struct gm_tnode **root, struct gm_tnode *n,
		    uint64_t size);

/* The smallest node with size >= size (lowest addr among equals).
 * Inline: it is on every allocation's path (tools/bench/alloc_icount). */
static inline struct gm_tnode *gm_tree_lower_bound(struct gm_tnode *root,
						   uint64_t size)
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

/* gm_tree_lower_bound that also gives the link pointing at the node
 * found, for gm_tree_remove_at (no second walk). */
static inline struct gm_tnode *gm_tree_lower_bound_at(struct gm_tnode **root,
						      uint64_t size,
						      struct gm_tnode ***at)
{
	struct gm_tnode **link = root, *best = NULL;

	*at = NULL;
	while (*link) {
		if ((*link)->size >= size) {
			best = *link;
			*at = link;
			link = &best->l;
		} else {
			link = &(*link)->r;
		}
	}
	return best;
}

/* Remove n, which *at points at (from gm_tree_lower_bound_at, with the
 * tree unchanged since). */
void gm_tree_remove_at(struct gm_tnode **at, struct gm_tnode *n);

/* The largest node (NULL for an empty tree). */
struct gm_tnode *gm_tree_max(struct gm_tnode *root);

#endif
