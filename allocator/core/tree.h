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

#include <stdint.h>

struct gm_tnode {
	struct gm_tnode *l, *r;
	uint64_t size; /* key, major */
	uint64_t addr; /* key, minor (unique) */
	uint32_t prio;
};

/* Insert n (size and addr set; the pair must be unique in the tree). */
void gm_tree_insert(struct gm_tnode **root, struct gm_tnode *n);

/* Remove n, which must be in the tree. */
void gm_tree_remove(struct gm_tnode **root, struct gm_tnode *n);

/* The smallest node with size >= size (lowest addr among equals). */
struct gm_tnode *gm_tree_lower_bound(struct gm_tnode *root, uint64_t size);

/* The largest node (NULL for an empty tree). */
struct gm_tnode *gm_tree_max(struct gm_tnode *root);

#endif
