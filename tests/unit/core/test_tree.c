/* Unit tests for core/tree.c: the treap against a sorted array. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>

#include "tree.h"

#define N 2000

static uint64_t rng = 88172645463325252ULL;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Reference lower bound: the smallest (size, addr) with size >= want. */
static struct gm_tnode *ref_lb(struct gm_tnode *nodes, const int *in,
			       uint64_t want)
{
	struct gm_tnode *best = NULL;

	for (int i = 0; i < N; i++) {
		struct gm_tnode *n = &nodes[i];

		if (!in[i] || n->size < want)
			continue;
		if (!best || n->size < best->size ||
		    (n->size == best->size && n->addr < best->addr))
			best = n;
	}
	return best;
}

static void random_ops_match_reference(void **state)
{
	static struct gm_tnode nodes[N];
	static int in[N];
	struct gm_tnode *root = NULL;

	(void)state;
	for (int i = 0; i < N; i++) {
		nodes[i].addr = 4096 + (uint64_t)i * 512;
		nodes[i].size = 512 * (1 + next() % 64); /* many equal sizes */
	}
	for (int step = 0; step < 20000; step++) {
		int i = (int)(next() % N);
		uint64_t want = 512 * (next() % 70);

		struct gm_tnode **at, *lb;

		if (step % 5 == 0 &&
		    (lb = gm_tree_lower_bound_at(&root, want, &at))) {
			/* remove the lower bound through its link */
			assert_ptr_equal(lb, ref_lb(nodes, in, want));
			assert_ptr_equal(*at, lb);
			gm_tree_remove_at(at, lb);
			i = (int)(lb - nodes);
		} else if (in[i])
			gm_tree_remove(&root, &nodes[i]);
		else
			gm_tree_insert(&root, &nodes[i]);
		in[i] = !in[i];
		assert_ptr_equal(gm_tree_lower_bound(root, want),
				 ref_lb(nodes, in, want));
	}
	{
		struct gm_tnode *mx = gm_tree_max(root), *r = NULL;

		for (int i = 0; i < N; i++)
			if (in[i] && (!r || nodes[i].size > r->size ||
				      (nodes[i].size == r->size &&
				       nodes[i].addr > r->addr)))
				r = &nodes[i];
		assert_ptr_equal(mx, r);
	}
}

/* The heap order on priorities and the key order hold everywhere;
 * returns the node count. */
static int check_shape(const struct gm_tnode *t, const struct gm_tnode *lo,
		       const struct gm_tnode *hi)
{
	if (!t)
		return 0;
	if (lo)
		assert_true(lo->size < t->size ||
			    (lo->size == t->size && lo->addr < t->addr));
	if (hi)
		assert_true(t->size < hi->size ||
			    (t->size == hi->size && t->addr < hi->addr));
	if (t->l)
		assert_true(t->l->prio <= t->prio);
	if (t->r)
		assert_true(t->r->prio <= t->prio);
	return 1 + check_shape(t->l, lo, t) + check_shape(t->r, t, hi);
}

/* replace and resize (in place or by remove + insert) against the same
 * sorted reference, shape checked after every step. */
static void replace_and_resize_match_reference(void **state)
{
	static struct gm_tnode nodes[N];
	static int in[N];
	struct gm_tnode *root = NULL;
	int count = 0, inplace_seen = 0;

	(void)state;
	for (int i = 0; i < N; i++) {
		nodes[i].addr = 4096 + (uint64_t)i * 512;
		nodes[i].size = 512 * (1 + next() % 64);
	}
	for (int step = 0; step < 20000; step++) {
		int i = (int)(next() % N), j = (int)(next() % N);
		uint64_t want = 512 * (next() % 70);
		unsigned op = (unsigned)(next() % 4);

		if (op == 0 && in[i] && !in[j] && i != j) {
			struct gm_tnode *pl = nodes[i].l, *pr = nodes[i].r;

			nodes[j].size = 512 * (1 + next() % 64);
			gm_tree_replace(&root, &nodes[i], &nodes[j]);
			inplace_seen += nodes[j].l == pl && nodes[j].r == pr &&
					(pl || pr);
			in[i] = 0;
			in[j] = 1;
		} else if (op == 1 && in[i]) {
			gm_tree_resize(&root, &nodes[i],
				       512 * (1 + next() % 64));
		} else if (in[i]) {
			gm_tree_remove(&root, &nodes[i]);
			in[i] = 0;
			count--;
		} else {
			gm_tree_insert(&root, &nodes[i]);
			in[i] = 1;
			count++;
		}
		assert_int_equal(check_shape(root, NULL, NULL), count);
		assert_ptr_equal(gm_tree_lower_bound(root, want),
				 ref_lb(nodes, in, want));
	}
	assert_true(inplace_seen > 0);
}

static void empty_tree(void **state)
{
	(void)state;
	assert_null(gm_tree_lower_bound(NULL, 1));
	assert_null(gm_tree_max(NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(random_ops_match_reference),
		cmocka_unit_test(replace_and_resize_match_reference),
		cmocka_unit_test(empty_tree),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
