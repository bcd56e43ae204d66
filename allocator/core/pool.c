/*
 * pool.c - the caching device-memory allocator (see pool.h).
 *
 * Structure. A pool owns arenas, one per stream (created on first use).
 * An arena owns segments; a segment is cut into blocks that are linked
 * in address order (prev/next, boundary tags as in dlmalloc and
 * PyTorch's Block). Free blocks sit in the arena's treap (tree.h) per
 * size class; fully free segments also sit in a second treap so another
 * stream can take a whole segment. Live blocks are found by address in
 * their arena's hash map, under the arena's lock; a free finds the arena
 * through a read-mostly radix of 2 MiB chunks (hint_get), so threads on
 * different streams share no lock and no written cache line (PyTorch
 * shards one pointer map for the same reason: pytorch/pytorch PR 118550,
 * lock contention with many threads).
 *
 * Locks, in the only order they nest: arena lock alone;
 * pool->slow_lock then arena locks: one at a time, or every arena at
 * once (a "window", window_lock: only under slow_lock). Nobody waits
 * for slow_lock or a second arena lock while holding an arena lock.
 *
 * Counters: bytes and counts per arena under its lock (summed when read);
 * reserved bytes and the segment count also as pool-wide atomics. The
 * peaks of allocated and active bytes are exact across arenas through
 * credit (allocated_up): a pool-wide bound on allocated bytes that the
 * fast path touches only now and then, and a window that reads the true
 * total whenever the bound could pass the peak.
 */
#include "pool.h"

#include "backend.h"
#include "emit.h"
#include "error.h"
#include "tree.h"
#include "units.h"

#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/*
 * Constants from PyTorch's c10/cuda/CUDACachingAllocator.cpp (read at
 * pytorch/pytorch@001074d, a 2.x version; the PyTorch functions named in
 * this file are in it): kMinBlockSize 512,
 * kSmallSize 1 MiB, kSmallBuffer 2 MiB, kMinLargeAlloc 10 MiB,
 * kLargeBuffer 20 MiB, kRoundLarge 2 MiB.
 */
#define MIN_BLOCK 512ULL
#define SMALL_SIZE GM_MiB
#define SMALL_BUFFER (2 * GM_MiB)
#define MIN_LARGE_ALLOC (10 * GM_MiB)
#define LARGE_BUFFER (20 * GM_MiB)
#define ROUND_LARGE (2 * GM_MiB)
#define MAX_REQUEST ((uint64_t)1 << 60)

#define ARENA_SLOTS 1024

/* The free path's radix from address to arena: chunks of 2^HINT_CHUNK
 * bytes, levels of HINT_L0, HINT_L1, HINT_L2 bits (64-bit addresses). */
#define HINT_CHUNK 21
#define HINT_L0 13
#define HINT_L1 15
#define HINT_L2 15

enum { POOL_SMALL, POOL_LARGE, NPOOLS };
enum { B_FREE, B_ALLOC, B_PENDING, B_HOLE /* virtual: unmapped granules */ };

/* Per-arena statistics (PyTorch memory_stats names). */
enum {
	S_ALLOC_B, S_REQ_B, S_ACTIVE_B, S_ISPLIT_B,
	S_ALLOCS, S_ACTIVE, S_ISPLIT, NSTAT
};

struct blk {
	struct gm_tnode node; /* node.size: block size; node.addr: start */
	struct blk *prev, *next; /* address neighbours in the segment */
	struct seg *seg;
	uint64_t requested;
	uint8_t state;
	uint8_t split_counted; /* counted in inactive_split */
	uint16_t nuses, capuses;
	uintptr_t *uses;       /* record_stream() streams */
	uint64_t *events;      /* one per use while pending */
	struct blk *link;      /* pending list / spare list */
};

struct seg {
	struct gm_tnode node; /* in the empty tree: size, addr */
	uint64_t va_size;     /* virtual: reserved range; else = size */
	struct arena *arena;
	struct blk *first, *last;
	struct seg *sprev, *snext;
	struct seg *pprev, *pnext; /* the arena's segments of this pool */
	uint32_t nused;       /* allocated + pending blocks */
	uint64_t used;        /* their bytes */
	uint64_t mapped;      /* virtual: bytes mapped (size - holes) */
	uint64_t free_seq;    /* arena free_seq when it became empty */
	uint8_t pool, virt, in_empty;
};

/* Live blocks of one arena by start address (open addressing, linear
 * probing; key 0 = empty slot). */
struct aslot {
	uint64_t key;
	struct blk *b;
};

struct amap {
	struct aslot *slot;
	size_t cap, n;
	unsigned shift; /* 64 - log2(cap) */
};

/* The total of increases is cur + dec (both start at 0 and only
 * astat_add/astat_sub change them): one add fewer per update. */
struct astat {
	uint64_t cur, peak, dec;
};

struct arena {
	atomic_int lock;
	uintptr_t stream;
	struct gm_tnode *free_tree[NPOOLS];
	struct gm_tnode *empty_tree[NPOOLS];
	struct gm_tnode *hole_tree[NPOOLS]; /* B_HOLE blocks (virtual) */
	struct seg *segs;
	struct seg *psegs[NPOOLS]; /* the same, per pool (pprev, pnext) */
	struct seg *vseg[NPOOLS];
	/* Stream safety for other streams: frees are numbered; done_seq is
	 * the highest number known complete on the device. */
	uint64_t free_seq, done_seq, event_seq, event;
	bool event_live;
	struct blk *pending; /* freed with record_stream() events */
	struct blk *spare;   /* unused block structs */
	/* A carve whose tree update is deferred (carve_at): lazy was
	 * handed out, its node still in the free tree at *lazy_at standing
	 * for the free block it was cut from; lazy_rest (or NULL) is the
	 * split-off rest, not in the tree yet. Settled (tree_settle) before
	 * anything else reads or changes the arena's free trees. */
	struct blk *lazy, *lazy_rest;
	struct gm_tnode **lazy_at;
	struct amap map;     /* live blocks by address */
	/* st[S_ACTIVE_B] and st[S_ACTIVE] keep only their peaks: active =
	 * allocated + pending (record_stream frees awaiting events), so
	 * their current values are st[S_ALLOC_B/S_ALLOCS].cur + pend_b/n
	 * and their decreases st[...].dec - pend_b/n (active_cur) */
	struct astat st[NSTAT];
	uint64_t pend_b, pend_n;
	/* bytes this arena may allocate without touching p->granted
	 * (allocated_up); 0 while the pool has one arena */
	uint64_t credit;
	uint32_t calm;       /* direct-mode allocations since a new peak */
	bool want_credit;    /* calm enough: leave direct mode (credit_mode) */
	uint64_t hist[GM_POOL_HIST_BUCKETS];
};


struct gstat {
	_Atomic uint64_t cur, peak, inc, dec;
};

struct gm_pool {
	struct gm_backend *be;
	struct gm_pool_options opt;
	uint64_t cap;       /* effective cap on reserved bytes */
	bool has_cap;       /* cap below the device total was asked */
	uint64_t total;
	uint64_t max_split; /* UINT64_MAX = unlimited */
	/* read-mostly from here to hint[] (the fast path reads them) */
	_Atomic(struct arena *) arenas[ARENA_SLOTS];
	_Atomic unsigned n_arenas; /* arenas created (streams seen) */
	/* false while the pool has one arena: allocated and active bytes
	 * are then only counted in that arena (exact, under its lock) and
	 * the pool-wide atomics are skipped; set, with the arena's counts
	 * folded in, under its lock before a second arena is published. */
	_Atomic bool multi;
	/* set and cleared only in windows: the arenas hold no credit and
	 * granted is exactly the allocated bytes (allocated_up) */
	_Atomic bool direct;
	/* With several arenas (see allocated_up): granted = allocated bytes
	 * + every arena's credit, an upper bound on allocated bytes, kept
	 * <= peak_alloc, and granted + pending <= peak_active, outside
	 * windows. Written now and then on the fast path: a line of its
	 * own. */
	_Alignas(64) _Atomic uint64_t granted;
	/* exact peaks with several arenas; written only in windows */
	_Alignas(64) _Atomic uint64_t peak_alloc, peak_active;
	_Alignas(64) _Atomic uint64_t pending; /* freed, awaiting events */
	/* written on slow paths only */
	_Alignas(64) struct gstat reserved, segments;
	_Atomic uint64_t retries, ooms, limit_rej, dev_alloc, dev_free, xstream;
	pthread_mutex_t slow_lock; /* arena creation, OOM record, windows */
	struct gm_pool_oom last_oom;
	/* every arena in creation order (appended under slow_lock) */
	struct arena *list[ARENA_SLOTS];
	/* chunk (2 MiB) -> arena that last took a segment or mapping
	 * there: the first arena a free looks in (hint_get) */
	_Alignas(64)
	_Atomic(void *) hint[1u << HINT_L0];
};

/* ==== Small helpers ==== */

/*
 * The arena locks: a spin-then-sleep lock (Drepper, "Futexes Are
 * Tricky", 2011, mutex 3; the shape of glibc's adaptive mutex).
 * States: 0 free, 1 held, 2 held and a thread may sleep on it. Taking a
 * free lock is one compare-and-swap, releasing one exchange (a futex
 * wake only when state 2 was seen). A waiter spins reading the word
 * (no writes while it is held, so the holder's line is not stolen by
 * every spinner) for up to SPIN_LIMIT pauses, a few tens of
 * microseconds: critical sections are a few tree operations long and
 * never call the device except on the virtual-segment slow path, so a
 * waiter normally gets the lock while spinning, and only a long wait
 * (a preempted holder, the device path) sleeps in the kernel instead of
 * burning a core. The former test-and-set lock with sched_yield()
 * collapsed with 8 threads on one stream (tools/bench/results/
 * alloc-cpu.md).
 */
#define SPIN_LIMIT 1000

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

static void lk_sleep(atomic_int *l)
{
#ifdef __linux__
	syscall(SYS_futex, l, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
#else
	(void)l;
	sched_yield();
#endif
}

static void lk_wake(atomic_int *l)
{
#ifdef __linux__
	syscall(SYS_futex, l, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#else
	(void)l;
#endif
}

static __attribute__((noinline)) void lk_slow(atomic_int *l)
{
	int c;

	for (int i = 0; i < SPIN_LIMIT; i++) {
		c = atomic_load_explicit(l, memory_order_relaxed);
		if (c == 0 && atomic_compare_exchange_weak_explicit(l, &c, 1,
				memory_order_acquire, memory_order_relaxed))
			return;
		cpu_relax();
	}
	/* sleep; whoever takes the lock from here on marks it 2, so the
	 * release that wakes us is never skipped */
	while (atomic_exchange_explicit(l, 2, memory_order_acquire))
		lk_sleep(l);
}

/* The uncontended case inline: one compare-and-swap, no call. */
static inline __attribute__((always_inline)) void lk(atomic_int *l)
{
	int c = 0;

	if (__builtin_expect(!atomic_compare_exchange_strong_explicit(l, &c,
			1, memory_order_acquire, memory_order_relaxed), 0))
		lk_slow(l);
}

static inline void ulk(atomic_int *l)
{
	if (__builtin_expect(atomic_exchange_explicit(l, 0,
			memory_order_release) == 2, 0))
		lk_wake(l);
}

static void gstat_add(struct gstat *s, uint64_t n)
{
	uint64_t v = atomic_fetch_add_explicit(&s->cur, n,
					       memory_order_relaxed) + n;
	uint64_t pk = atomic_load_explicit(&s->peak, memory_order_relaxed);

	atomic_fetch_add_explicit(&s->inc, n, memory_order_relaxed);
	while (v > pk && !atomic_compare_exchange_weak_explicit(&s->peak,
			&pk, v, memory_order_relaxed, memory_order_relaxed))
		;
}

static void peak_max(_Atomic uint64_t *peak, uint64_t v)
{
	uint64_t pk = atomic_load_explicit(peak, memory_order_relaxed);

	while (v > pk && !atomic_compare_exchange_weak_explicit(peak, &pk, v,
			memory_order_relaxed, memory_order_relaxed))
		;
}

/*
 * Allocated bytes across arenas, with exact peaks, without a pool-wide
 * write on every allocate and free (which, as one atomic counter,
 * serialized 8 threads on one cache line: 1.2-1.6 us a pair on 16 cores,
 * tools/bench/results/alloc-cpu.md). The scheme is a distributed
 * counter with a threshold, the peak:
 *  - each arena holds credit, bytes it may allocate without asking: a
 *    free adds its bytes to the arena's credit, an allocation spends it;
 *  - granted = allocated + all credit >= allocated; an allocation that
 *    lacks credit adds the shortfall to granted, only if granted stays
 *    <= the allocated peak and granted + pending <= the active peak;
 *  - so outside windows allocated <= granted <= peak: no allocation can
 *    make a new peak unseen. When the shortfall does not fit, the
 *    allocation is counted in a window (alloc_window): every arena
 *    locked, the true totals summed, the peaks raised to them, all
 *    credit folded back (granted = allocated).
 * While allocations keep making new peaks (a model's first step), every
 * one of them would need a window; a window that finds a new peak
 * switches to direct mode instead: no credit, granted = allocated
 * exactly, updated by every allocate and free with the peaks raised at
 * once (one atomic add, as a plain counter), until an arena has made
 * CALM_OPS allocations without a new peak (credit_mode). 256: a window
 * locks every arena (about a dozen contended atomics with 8 streams),
 * so windows stay below one per 256 allocations of an arena whose
 * peaks keep rising (a random walk of allocated bytes does so often).
 * Credit above CREDIT_MAX goes back to granted (down to half of it), so
 * idle arenas do not hoard headroom and force needless windows.
 * CREDIT_MAX, 16 MiB, from a simulation of alloc_bench's pattern (8
 * threads, sizes log-uniform 512 B .. 32 MiB): 1, 4, 16, 64 MiB gave
 * 0.68, 0.43, 0.20, 0.26 writes of granted and 0.0001, 0.0001, 0.003,
 * 0.018 windows a pair (the one counter: 2 writes a pair).
 * With a single arena (p->multi false, read under the arena's lock) its
 * own counters are the pool's and nothing is done here.
 */
#define CREDIT_MAX (16 * GM_MiB)
#define CALM_OPS 256

/* The shortfall s of an allocation on a, from granted. False: it would
 * pass a peak (a window must count it). Caller holds a->lock. */
static __attribute__((noinline)) bool grant(struct gm_pool *p,
					    struct arena *a, uint64_t s)
{
	uint64_t pk = atomic_load_explicit(&p->peak_alloc,
					   memory_order_relaxed);
	uint64_t pka = atomic_load_explicit(&p->peak_active,
					    memory_order_relaxed);
	uint64_t g = atomic_load_explicit(&p->granted, memory_order_acquire);

	do {
		/* read after granted: a record_stream free adds to pending
		 * before it takes from granted (allocated_to_pending), so
		 * bytes missed here are still in g */
		uint64_t pend = atomic_load_explicit(&p->pending,
						     memory_order_relaxed);

		if (g > pk || s > pk - g || pend > pka || g > pka - pend ||
		    s > pka - pend - g)
			return false;
	} while (!atomic_compare_exchange_weak_explicit(&p->granted, &g,
			g + s, memory_order_acq_rel, memory_order_acquire));
	a->credit = 0;
	return true;
}

/* allocated_up() in direct mode: the plain counter. Caller holds
 * a->lock. */
static __attribute__((noinline)) bool allocated_direct(struct gm_pool *p,
							struct arena *a,
							uint64_t n)
{
	uint64_t v = atomic_fetch_add_explicit(&p->granted, n,
					       memory_order_acq_rel) + n;
	uint64_t pk = atomic_load_explicit(&p->peak_alloc,
					   memory_order_relaxed);

	if (v > pk) {
		peak_max(&p->peak_alloc, v);
		a->calm = 0;
	} else if (++a->calm >= CALM_OPS) {
		a->want_credit = true;
	}
	peak_max(&p->peak_active, v + atomic_load_explicit(&p->pending,
						memory_order_relaxed));
	return true;
}

/*
 * allocated_up() of a single_thread pool: direct mode for good (set by
 * go_multi; nothing leaves it), each update with plain loads and
 * stores, so granted stays the exact allocated bytes and the peaks
 * move as allocated_direct() moves them.
 */
static inline void allocated_plain(struct gm_pool *p, uint64_t n)
{
	uint64_t v = atomic_load_explicit(&p->granted,
					  memory_order_relaxed) + n;

	atomic_store_explicit(&p->granted, v, memory_order_relaxed);
	if (v > atomic_load_explicit(&p->peak_alloc, memory_order_relaxed))
		atomic_store_explicit(&p->peak_alloc, v, memory_order_relaxed);
	v += atomic_load_explicit(&p->pending, memory_order_relaxed);
	if (v > atomic_load_explicit(&p->peak_active, memory_order_relaxed))
		atomic_store_explicit(&p->peak_active, v,
				      memory_order_relaxed);
}

/* Count n allocated bytes of arena a against the pool; false when a
 * window must (nothing counted then). Caller holds a->lock, or st: the
 * pool is single_thread (then always true). */
static inline __attribute__((always_inline)) bool
allocated_up(struct gm_pool *p, struct arena *a, uint64_t n, bool st)
{
	if (!atomic_load_explicit(&p->multi, memory_order_relaxed))
		return true;
	if (st) {
		allocated_plain(p, n);
		return true;
	}
	if (n <= a->credit) {
		a->credit -= n;
		return true;
	}
	if (__builtin_expect(atomic_load_explicit(&p->direct,
			memory_order_relaxed), 0))
		return allocated_direct(p, a, n);
	return grant(p, a, n - a->credit);
}

/* n allocated bytes of arena a were freed. Caller holds a->lock (st:
 * as allocated_up). */
static inline __attribute__((always_inline)) void
allocated_down(struct gm_pool *p, struct arena *a, uint64_t n, bool st)
{
	if (!atomic_load_explicit(&p->multi, memory_order_relaxed))
		return;
	if (st) {
		atomic_store_explicit(&p->granted, atomic_load_explicit(
				&p->granted, memory_order_relaxed) - n,
				memory_order_relaxed);
		return;
	}
	if (__builtin_expect(atomic_load_explicit(&p->direct,
			memory_order_relaxed), 0)) {
		atomic_fetch_sub_explicit(&p->granted, n,
					  memory_order_release);
		return;
	}
	a->credit += n;
	if (a->credit > CREDIT_MAX) {
		atomic_fetch_sub_explicit(&p->granted,
					  a->credit - CREDIT_MAX / 2,
					  memory_order_release);
		a->credit = CREDIT_MAX / 2;
	}
}

/* n allocated bytes became pending (record_stream): active bytes are
 * unchanged, so granted + pending must not grow: pending first, then
 * granted (grant() reads them in the other order). Caller holds the
 * block's arena's lock. */
static void allocated_to_pending(struct gm_pool *p, uint64_t n)
{
	atomic_fetch_add(&p->pending, n);
	if (atomic_load_explicit(&p->multi, memory_order_relaxed))
		atomic_fetch_sub_explicit(&p->granted, n,
					  memory_order_release);
}

static void gstat_sub(struct gstat *s, uint64_t n)
{
	atomic_fetch_sub_explicit(&s->cur, n, memory_order_relaxed);
	atomic_fetch_add_explicit(&s->dec, n, memory_order_relaxed);
}

static void astat_add(struct arena *a, int i, uint64_t n)
{
	struct astat *s = &a->st[i];

	s->cur += n;
	if (s->cur > s->peak)
		s->peak = s->cur;
}

static void astat_sub(struct arena *a, int i, uint64_t n)
{
	a->st[i].cur -= n;
	a->st[i].dec += n;
}

/* Active bytes and blocks went up with allocated ones: their peaks. */
static inline void active_peak(struct arena *a)
{
	uint64_t b = a->st[S_ALLOC_B].cur + a->pend_b;
	uint64_t n = a->st[S_ALLOCS].cur + a->pend_n;

	if (b > a->st[S_ACTIVE_B].peak)
		a->st[S_ACTIVE_B].peak = b;
	if (n > a->st[S_ACTIVE].peak)
		a->st[S_ACTIVE].peak = n;
}

/* An arena's active bytes (k = S_ACTIVE_B) or blocks (S_ACTIVE) as a
 * full astat (see struct arena). */
static struct astat active_cur(const struct arena *a, int k)
{
	int base = k == S_ACTIVE_B ? S_ALLOC_B : S_ALLOCS;
	uint64_t pend = k == S_ACTIVE_B ? a->pend_b : a->pend_n;

	return (struct astat){.cur = a->st[base].cur + pend,
			      .peak = a->st[k].peak,
			      .dec = a->st[base].dec - pend};
}

static unsigned log2_floor(uint64_t v)
{
	return 63u - (unsigned)__builtin_clzll(v);
}

static unsigned hist_bucket(uint64_t size)
{
	unsigned b = log2_floor(size);

	return b < GM_POOL_HIST_BUCKETS ? b : GM_POOL_HIST_BUCKETS - 1;
}

static uint64_t round_up(uint64_t v, uint64_t m)
{
	return (v + m - 1) / m * m;
}

/* ==== Size policy ==== */

/*
 * PyTorch round_size: at least 512 B, a multiple of
 * 512 B; with roundup_power2_divisions d > 1, sizes above 1 MiB round up
 * to the next of d equal steps between powers of two (1200 with 4
 * divisions of [1024, 2048) gives 1280). The 1 MiB start is PyTorch's
 * kRoundUpPowerOfTwoStart (c10/core/AllocatorConfig.cpp).
 */
static inline uint64_t round_size(const struct gm_pool *pool, uint64_t size)
{
	unsigned d = pool->opt.roundup_power2_divisions;

	if (size < MIN_BLOCK)
		return MIN_BLOCK;
	if (d > 1 && size > SMALL_SIZE) {
		uint64_t floor2 = (uint64_t)1 << log2_floor(size);
		uint64_t step = floor2 / d;

		if (size == floor2)
			return size;
		if (step < MIN_BLOCK)
			step = MIN_BLOCK;
		return round_up(size, step);
	}
	return round_up(size, MIN_BLOCK);
}

uint64_t gm_pool_round_size(const struct gm_pool *pool, uint64_t size)
{
	return round_size(pool, size);
}

/* ==== What a new segment can serve ==== */

static uint64_t segment_size(const struct gm_pool *p, uint64_t rounded);

/* The largest request in [lo, hi] whose new segment fits in room, when
 * the segment size grows with the request over that range; 0 if none. */
static uint64_t servable_in(const struct gm_pool *p, uint64_t lo,
			    uint64_t hi, uint64_t room)
{
	uint64_t best = 0;

	while (lo <= hi) {
		uint64_t mid = lo + (hi - lo) / 2;

		if (segment_size(p, round_size(p, mid)) <= room) {
			best = mid;
			lo = mid + 1;
		} else {
			hi = mid - 1;
		}
	}
	return best;
}

uint64_t gm_pool_servable(const struct gm_pool *p, uint64_t room)
{
	uint64_t best, mid;

	if (p->opt.no_cache || p->opt.virtual_segments)
		return servable_in(p, 1, room, room);
	/* Three ranges of get_allocation_size (segment_size): small
	 * requests (2 MiB segments), the shared 20 MiB segments, and large
	 * ones; within each the segment grows with the request. */
	best = servable_in(p, MIN_LARGE_ALLOC, room, room);
	if (best)
		return best;
	mid = servable_in(p, SMALL_SIZE + 1, MIN_LARGE_ALLOC - 1, room);
	if (mid)
		return mid;
	return servable_in(p, 1, SMALL_SIZE, room);
}

/* PyTorch get_pool: rounded sizes <= 1 MiB use the small pool. */
static int pool_of(uint64_t rounded)
{
	return rounded <= SMALL_SIZE ? POOL_SMALL : POOL_LARGE;
}

/*
 * PyTorch get_allocation_size: small requests get a
 * 2 MiB segment, 1-10 MiB requests share 20 MiB segments, larger ones
 * their own segment rounded up to 2 MiB. Without caching: the request.
 */
static uint64_t segment_size(const struct gm_pool *p, uint64_t rounded)
{
	if (p->opt.no_cache)
		return rounded;
	if (rounded <= SMALL_SIZE)
		return SMALL_BUFFER;
	if (rounded < MIN_LARGE_ALLOC)
		return LARGE_BUFFER;
	return round_up(rounded, ROUND_LARGE);
}

/*
 * PyTorch should_split: small pool (and expandable
 * segments) split when at least 512 B remain; large pool only when the
 * request is below max_split_size and more than 1 MiB would remain, so
 * the large pool is not littered with slivers.
 */
static bool should_split(const struct gm_pool *p, const struct blk *b,
			 uint64_t rounded)
{
	uint64_t rest = b->node.size - rounded;

	if (b->seg->pool == POOL_SMALL || b->seg->virt)
		return rest >= MIN_BLOCK;
	return rounded < p->max_split && rest > SMALL_SIZE;
}

/*
 * PyTorch get_free_block oversize rules: a request
 * below max_split_size never takes a block at or above it, and a request
 * above it takes one at most kLargeBuffer (20 MiB) larger.
 */
static bool fit_ok(const struct gm_pool *p, uint64_t rounded, uint64_t bsize)
{
	if (p->max_split == UINT64_MAX)
		return true;
	if (rounded < p->max_split && bsize >= p->max_split)
		return false;
	if (rounded >= p->max_split && bsize >= rounded + LARGE_BUFFER)
		return false;
	return true;
}

/* ==== Address map (per arena: open addressing, linear probing) ==== */

/*
 * The slot of a key: Fibonacci hashing (Knuth, TAOCP vol. 3, 6.4,
 * multiplicative hashing by 2^64 / golden ratio, top bits kept). Block
 * addresses are multiples of 512 that cluster in arithmetic runs; the
 * golden-ratio multiplier spreads such runs evenly over the table (the
 * three-distance theorem), in one multiply. (Low bits of a multiply, as
 * tried first, left 16-probe chains; fmix64 cost ~10 instructions.)
 */
static inline size_t amap_home(const struct amap *m, uint64_t key)
{
	return (size_t)(((key >> 9) * 0x9e3779b97f4a7c15ULL) >> m->shift);
}

/* Grow a map to twice its slots. Caller holds the arena's lock. */
static int amap_grow(struct amap *m)
{
	struct amap g = {.cap = m->cap ? m->cap * 2 : 256, .n = m->n};

	g.slot = calloc(g.cap, sizeof(*g.slot));
	if (!g.slot)
		return GM_ENOMEM;
	g.shift = 64u - (unsigned)__builtin_ctzll(g.cap);
	for (size_t i = 0; i < m->cap; i++) {
		size_t j;

		if (!m->slot[i].key)
			continue;
		j = amap_home(&g, m->slot[i].key);
		while (g.slot[j].key)
			j = (j + 1) & (g.cap - 1);
		g.slot[j] = m->slot[i];
	}
	free(m->slot);
	*m = g;
	return 0;
}

/* Add live block b. Returns 0 or GM_ENOMEM. Caller holds the lock. */
static inline __attribute__((always_inline)) int amap_insert(struct amap *m,
							   struct blk *b)
{
	uint64_t key = b->node.addr;
	size_t i;

	/* load at most 1/2: linear probing's expected probe count stays
	 * near 1.5 (Knuth, TAOCP vol. 3, 6.4) */
	if ((m->n + 1) * 2 > m->cap && amap_grow(m))
		return GM_ENOMEM;
	i = amap_home(m, key);
	while (m->slot[i].key)
		i = (i + 1) & (m->cap - 1);
	m->slot[i].key = key;
	m->slot[i].b = b;
	m->n++;
	return 0;
}

/* The slot holding key, or NULL. Caller holds the lock. */
static inline struct aslot *amap_find(const struct amap *m, uint64_t key)
{
	size_t mask, i;

	if (!m->cap || !key)
		return NULL;
	mask = m->cap - 1;
	for (i = amap_home(m, key); m->slot[i].key; i = (i + 1) & mask)
		if (m->slot[i].key == key)
			return &m->slot[i];
	return NULL;
}

/* Remove key and return its block (NULL if absent). Backward-shift
 * deletion keeps probe chains intact without tombstones. Caller holds
 * the lock. */
static inline struct blk *amap_take(struct amap *m, uint64_t key)
{
	struct aslot *at = amap_find(m, key);
	struct blk *b;
	size_t i, j, mask;

	if (!at)
		return NULL;
	b = at->b;
	m->n--;
	mask = m->cap - 1;
	i = (size_t)(at - m->slot);
	for (j = (i + 1) & mask; m->slot[j].key; j = (j + 1) & mask) {
		size_t home = amap_home(m, m->slot[j].key);

		/* Move j to the hole at i unless its home lies in (i, j]. */
		if (((j - home) & mask) >= ((j - i) & mask)) {
			m->slot[i] = m->slot[j];
			i = j;
		}
	}
	m->slot[i].key = 0;
	return b;
}

/* ==== Address to arena (hints) ==== */

/*
 * The arena that last took a segment (or a virtual mapping) covering
 * addr's 2 MiB chunk, or NULL. Only a hint: a chunk two segments share
 * may name the other's arena, and the caller then searches every arena
 * (find_live). Lock-free: nodes are published once and freed only by
 * gm_pool_destroy; arenas live as long as the pool.
 */
static inline struct arena *hint_get(struct gm_pool *p, uint64_t addr)
{
	uint64_t c = addr >> HINT_CHUNK;
	_Atomic(void *) *l1, *l2;

	l1 = atomic_load_explicit(&p->hint[c >> (HINT_L1 + HINT_L2)],
				  memory_order_acquire);
	if (!l1)
		return NULL;
	l2 = atomic_load_explicit(&l1[(c >> HINT_L2) &
				      ((1u << HINT_L1) - 1)],
				  memory_order_acquire);
	if (!l2)
		return NULL;
	return atomic_load_explicit(&l2[c & ((1u << HINT_L2) - 1)],
				    memory_order_acquire);
}

/* *slot's node of n entries, created (zeroed) if absent; NULL when out
 * of host memory (the hint is then skipped: frees search). */
static _Atomic(void *) *hint_node(_Atomic(void *) *slot, size_t n)
{
	_Atomic(void *) *node = atomic_load_explicit(slot,
						    memory_order_acquire);
	void *expect = NULL;

	if (node)
		return node;
	node = calloc(n, sizeof(*node));
	if (!node)
		return NULL;
	if (!atomic_compare_exchange_strong(slot, &expect, (void *)node)) {
		free(node);
		return expect;
	}
	return node;
}

/* Name arena a for every chunk [addr, addr + size) touches. */
static void hint_set(struct gm_pool *p, uint64_t addr, uint64_t size,
		     struct arena *a)
{
	uint64_t c, last;

	if (!size)
		return;
	last = (addr + size - 1) >> HINT_CHUNK;
	for (c = addr >> HINT_CHUNK; c <= last; c++) {
		_Atomic(void *) *l1, *l2;

		l1 = hint_node(&p->hint[c >> (HINT_L1 + HINT_L2)],
			       (size_t)1 << HINT_L1);
		l2 = l1 ? hint_node(&l1[(c >> HINT_L2) &
					((1u << HINT_L1) - 1)],
				    (size_t)1 << HINT_L2) : NULL;
		if (!l2)
			return;
		atomic_store_explicit(&l2[c & ((1u << HINT_L2) - 1)], a,
				      memory_order_release);
	}
}

static void hint_free(struct gm_pool *p)
{
	for (size_t i = 0; i < (1u << HINT_L0); i++) {
		_Atomic(void *) *l1 = atomic_load(&p->hint[i]);

		if (!l1)
			continue;
		for (size_t k = 0; k < (1u << HINT_L1); k++)
			if (atomic_load_explicit(&l1[k], memory_order_relaxed))
				free(atomic_load(&l1[k]));
		free(l1);
	}
}

/* ==== Arenas ==== */

/* The first slot arena_find() looks at for stream (Fibonacci hashing,
 * as amap_home; 10 bits: ARENA_SLOTS). */
static inline unsigned arena_home(uintptr_t stream)
{
	return (unsigned)(((uint64_t)stream * 0x9e3779b97f4a7c15ULL) >> 54);
}

static struct arena *arena_find(struct gm_pool *p, uintptr_t stream,
				unsigned *slot)
{
	unsigned h = arena_home(stream);

	for (unsigned i = 0; i < ARENA_SLOTS; i++) {
		unsigned k = (h + i) % ARENA_SLOTS;
		struct arena *a = atomic_load_explicit(&p->arenas[k],
						       memory_order_acquire);

		if (!a) {
			*slot = k;
			return NULL;
		}
		if (a->stream == stream)
			return a;
	}
	*slot = ARENA_SLOTS;
	return NULL;
}

/*
 * A second arena is about to be published: the only arena's allocated
 * bytes and peaks become the pool-wide bound and peaks (allocated_up),
 * switched on under that arena's lock so no update of it is lost.
 * Caller holds slow_lock (the documented nesting).
 */
static void go_multi(struct gm_pool *p)
{
	struct arena *a = p->list[0];

	if (!a) {
		if (p->opt.single_thread)
			atomic_store(&p->direct, true);
		atomic_store(&p->multi, true);
		return;
	}
	lk(&a->lock);
	a->credit = 0;
	atomic_store(&p->granted, a->st[S_ALLOC_B].cur);
	atomic_store(&p->peak_alloc, a->st[S_ALLOC_B].peak);
	atomic_store(&p->peak_active, a->st[S_ACTIVE_B].peak);
	if (p->opt.single_thread) /* counted exactly: allocated_plain */
		atomic_store(&p->direct, true);
	atomic_store(&p->multi, true);
	ulk(&a->lock);
}

/* arena_get() past its first probe: the search, and the arena made
 * when the stream has none. */
static __attribute__((noinline)) struct arena *arena_make(struct gm_pool *p,
							 uintptr_t stream)
{
	struct arena *a;
	unsigned slot;

	a = arena_find(p, stream, &slot);
	if (a)
		return a;
	pthread_mutex_lock(&p->slow_lock);
	a = arena_find(p, stream, &slot);
	if (!a && slot < ARENA_SLOTS) {
		/* own cache lines: arenas of different streams share none */
		a = aligned_alloc(64, round_up(sizeof(*a), 64));
		if (a) {
			memset(a, 0, sizeof(*a));
			a->stream = stream;
			if (!atomic_load(&p->multi) &&
			    atomic_load(&p->n_arenas))
				go_multi(p);
			p->list[atomic_load(&p->n_arenas)] = a;
			atomic_store_explicit(&p->arenas[slot], a,
					      memory_order_release);
			atomic_fetch_add(&p->n_arenas, 1);
		}
	}
	pthread_mutex_unlock(&p->slow_lock);
	return a;
}

/* The arena of stream, created on first use. NULL: out of host memory or
 * more than ARENA_SLOTS streams. Inline: its first probe finds the
 * stream's arena on every call but the first (arena_find's order). */
static inline __attribute__((always_inline)) struct arena *
arena_get(struct gm_pool *p, uintptr_t stream)
{
	struct arena *a = atomic_load_explicit(&p->arenas[arena_home(stream)],
					       memory_order_acquire);

	if (__builtin_expect(a && a->stream == stream, 1))
		return a;
	return arena_make(p, stream);
}

static struct arena *arena_at(struct gm_pool *p, unsigned i)
{
	return atomic_load_explicit(&p->arenas[i], memory_order_acquire);
}

static void lk_arena(struct arena *a);

/* A window: slow_lock, then every arena's lock (settled), so nothing
 * changes anywhere until window_unlock(). Caller holds no lock. */
static void window_lock(struct gm_pool *p)
{
	pthread_mutex_lock(&p->slow_lock);
	for (unsigned i = 0; i < atomic_load(&p->n_arenas); i++)
		lk_arena(p->list[i]);
}

static void window_unlock(struct gm_pool *p)
{
	for (unsigned i = 0; i < atomic_load(&p->n_arenas); i++)
		ulk(&p->list[i]->lock);
	pthread_mutex_unlock(&p->slow_lock);
}

/*
 * In a window: the exact allocated and active bytes; the pool-wide
 * peaks raised to them (or, reset, set to them); every arena's credit
 * folded back (granted = allocated), which restores allocated_up's
 * bounds.
 */
static bool window_settle(struct gm_pool *p, bool reset)
{
	uint64_t t = 0, pend = 0;
	bool raised;

	for (unsigned i = 0; i < atomic_load(&p->n_arenas); i++) {
		struct arena *a = p->list[i];

		t += a->st[S_ALLOC_B].cur;
		pend += a->pend_b;
		a->credit = 0;
	}
	atomic_store(&p->granted, t);
	if (reset) {
		atomic_store(&p->peak_alloc, t);
		atomic_store(&p->peak_active, t + pend);
		return false;
	}
	raised = t > atomic_load(&p->peak_alloc);
	peak_max(&p->peak_alloc, t);
	peak_max(&p->peak_active, t + pend);
	return raised;
}

/*
 * Leave direct mode (allocated_up) once arena a has been calm: a window
 * that finds granted exact already and switches credit back on.
 * Caller holds no lock.
 */
static void credit_mode(struct gm_pool *p)
{
	window_lock(p);
	window_settle(p, false);
	atomic_store(&p->direct, false);
	for (unsigned i = 0; i < atomic_load(&p->n_arenas); i++) {
		p->list[i]->calm = 0;
		p->list[i]->want_credit = false;
	}
	window_unlock(p);
}

/*
 * The live block that starts at addr, with its arena's lock held (*ap)
 * on return; removed from the arena's map when take. NULL (no lock
 * held) when no arena has one. The hinted arena first; if the hint
 * misses, every arena in turn (one lock at a time): a live block stays
 * in its arena's map from before its address is returned until its
 * free, so the search cannot miss it.
 */
static struct blk *find_live(struct gm_pool *p, uint64_t addr, bool take,
			     struct arena **ap)
{
	struct arena *h = hint_get(p, addr), *a;
	struct blk *b;

	for (unsigned i = 0; i <= ARENA_SLOTS; i++) {
		a = i == 0 ? h : arena_at(p, i - 1);
		if (!a || (i && a == h))
			continue;
		lk(&a->lock);
		if (take) {
			b = amap_take(&a->map, addr);
		} else {
			struct aslot *sl = amap_find(&a->map, addr);

			b = sl ? sl->b : NULL;
		}
		if (b) {
			*ap = a;
			return b;
		}
		ulk(&a->lock);
	}
	return NULL;
}

/* ==== Blocks ==== */

static struct blk *blk_new(struct arena *a)
{
	struct blk *b = a->spare;

	uint32_t prio;

	if (b) {
		/* the struct keeps its treap priority (tree.h: priorities
		 * move between nodes but never duplicate); blk_put left
		 * uses, events and their counts empty, so only the fields
		 * a block in use reads are reset (no memset of it all) */
		a->spare = b->link;
		prio = b->node.prio;
		b->node = (struct gm_tnode){.prio = prio};
		b->prev = b->next = b->link = NULL;
		b->requested = 0;
		b->state = B_FREE;
		b->split_counted = 0;
		return b;
	}
	return calloc(1, sizeof(*b));
}

/* Forget b's record_stream() uses and their events (all destroyed or
 * never recorded by now): a block that is free again, and whatever
 * reuses its memory, starts with none. */
static void uses_clear(struct blk *b)
{
	if (!b->uses && !b->events)
		return;
	free(b->uses);
	free(b->events);
	b->uses = NULL;
	b->events = NULL;
	b->nuses = b->capuses = 0;
}

static void blk_put(struct arena *a, struct blk *b)
{
	uses_clear(b);
	b->link = a->spare;
	a->spare = b;
}

static bool is_split(const struct blk *b)
{
	return b->prev || b->next;
}

/* Put a free block into its arena's size tree (and count it in
 * inactive_split when its segment holds other blocks). */
static void tree_put(struct arena *a, struct blk *b)
{
	gm_tree_insert(&a->free_tree[b->seg->pool], &b->node);
	b->split_counted = is_split(b);
	if (b->split_counted) {
		astat_add(a, S_ISPLIT_B, b->node.size);
		astat_add(a, S_ISPLIT, 1);
	}
}

/* Stop counting free block b in inactive_split (it leaves the tree). */
static void split_uncount(struct arena *a, struct blk *b)
{
	if (b->split_counted) {
		astat_sub(a, S_ISPLIT_B, b->node.size);
		astat_sub(a, S_ISPLIT, 1);
		b->split_counted = 0;
	}
}

/* Count free block b in inactive_split if its segment holds others. */
static void split_count(struct arena *a, struct blk *b)
{
	b->split_counted = is_split(b);
	if (b->split_counted) {
		astat_add(a, S_ISPLIT_B, b->node.size);
		astat_add(a, S_ISPLIT, 1);
	}
}

static void tree_take(struct arena *a, struct blk *b)
{
	gm_tree_remove(&a->free_tree[b->seg->pool], &b->node);
	split_uncount(a, b);
}

static void empty_put(struct arena *a, struct seg *s)
{
	gm_tree_insert(&a->empty_tree[s->pool], &s->node);
	s->in_empty = 1;
}

static void empty_take(struct arena *a, struct seg *s)
{
	if (!s->in_empty)
		return;
	gm_tree_remove(&a->empty_tree[s->pool], &s->node);
	s->in_empty = 0;
}

/* Count carved block b as allocated in its arena's statistics. */
static inline void count_alloc(struct arena *a, struct blk *b)
{
	astat_add(a, S_ALLOC_B, b->node.size);
	astat_add(a, S_REQ_B, b->requested);
	astat_add(a, S_ALLOCS, 1);
	active_peak(a);
	a->hist[hist_bucket(b->node.size)]++;
}

/*
 * Hand out rounded bytes from free block b (in the tree). Splits off the
 * rest as a new free block when should_split() says so; if the block
 * struct for the rest cannot be had, the whole block is handed out (the
 * accounting stays exact). at: the tree link pointing at b (from
 * best_fit_at, tree unchanged since) or NULL to search for it. Caller
 * holds a->lock, with the arena settled (tree_settle). Returns b.
 *
 * With at, the tree update (unlink b, insert the rest) is deferred: b's
 * node stays in the tree, standing for the block it was cut from, until
 * tree_settle() runs it before the next use of the arena's trees, or
 * until b itself is freed first, which gives back exactly that block
 * (free_undo: no tree work at all). The treap's shape then differs from
 * an eager update's, never its keys: best fit and every placement are
 * the same. Statistics change at once either way.
 *
 * Returns true; false when the pool-wide count needs a window
 * (allocated_up): b is then carved (owned by the caller, in no tree
 * and no map) but not yet counted as allocated, and the caller counts
 * it with count_alloc() in alloc_window(). st: the pool is single_thread
 * and the caller holds no lock (the fast path).
 */
static void carve_cut(struct gm_pool *p, struct arena *a, struct blk *b,
		      struct gm_tnode **at, uint64_t rounded,
		      uint64_t requested)
{
	struct seg *s = b->seg;
	struct blk *r = NULL;

	if (should_split(p, b, rounded))
		r = blk_new(a);
	if (at) {
		a->lazy = b;
		a->lazy_at = at;
		a->lazy_rest = r;
	} else {
		gm_tree_remove(&a->free_tree[s->pool], &b->node);
	}
	split_uncount(a, b);
	if (r) {
		r->node.addr = b->node.addr + rounded;
		r->node.size = b->node.size - rounded;
		r->seg = s;
		r->state = B_FREE;
		r->prev = b;
		r->next = b->next;
		if (b->next)
			b->next->prev = r;
		else
			s->last = r;
		b->next = r;
		b->node.size = rounded;
		if (!at)
			gm_tree_insert(&a->free_tree[s->pool], &r->node);
		split_count(a, r);
	}
	b->state = B_ALLOC;
	b->requested = requested;
	s->used += b->node.size;
	if (s->nused++ == 0)
		empty_take(a, s);
}

static inline __attribute__((always_inline)) bool
carve_at(struct gm_pool *p, struct arena *a, struct blk *b,
	 struct gm_tnode **at, uint64_t rounded, uint64_t requested, bool st)
{
	carve_cut(p, a, b, at, rounded, requested);
	if (!allocated_up(p, a, b->node.size, st))
		return false;
	count_alloc(a, b);
	return true;
}

/* Run a deferred carve's tree update (carve_at). Caller holds a->lock. */
static void tree_settle(struct arena *a)
{
	struct blk *b = a->lazy;

	if (!b)
		return;
	a->lazy = NULL;
	gm_tree_remove_at(a->lazy_at, &b->node);
	if (a->lazy_rest)
		gm_tree_insert(&a->free_tree[b->seg->pool],
			       &a->lazy_rest->node);
}

/* Take a->lock with the arena's trees settled (every path but the
 * allocate and free fast paths, which settle themselves). */
static void lk_arena(struct arena *a)
{
	lk(&a->lock);
	tree_settle(a);
}

/* carve_at() of a block whose tree link is not at hand (slow paths). */
static bool carve(struct gm_pool *p, struct arena *a, struct blk *b,
		  uint64_t rounded, uint64_t requested)
{
	return carve_at(p, a, b, NULL, rounded, requested, false);
}

/* Best fit in arena a (PyTorch get_free_block); caller holds a->lock.
 * *at: the tree link to the block, for carve_at. */
static inline __attribute__((always_inline)) struct blk *
best_fit_at(struct gm_pool *p, struct arena *a, int pool, uint64_t rounded,
	    struct gm_tnode ***at)
{
	struct gm_tnode *n = gm_tree_lower_bound_at(&a->free_tree[pool],
						    rounded, at);

	if (!n || !fit_ok(p, rounded, n->size))
		return NULL;
	return (struct blk *)n;
}

static struct blk *best_fit(struct gm_pool *p, struct arena *a, int pool,
			    uint64_t rounded)
{
	struct gm_tnode **at;

	return best_fit_at(p, a, pool, rounded, &at);
}

/* ==== Segments ==== */

/*
 * Charge n bytes of reserved memory against the cap, exactly: the
 * compare-and-swap loop never lets the counter pass the cap, and the
 * test "n > cap - cur" cannot underflow because cur <= cap always holds
 * (unlike "cur + n > cap", which can wrap). *level gets the
 * reserved bytes this charge brought the pool to, for reserve_commit().
 */
static int reserve_charge(struct gm_pool *p, uint64_t n, uint64_t *level)
{
	uint64_t cur = atomic_load_explicit(&p->reserved.cur,
					    memory_order_relaxed);

	do {
		if (p->has_cap && n > p->cap - cur) {
			atomic_fetch_add(&p->limit_rej, 1);
			return GM_ELIMIT;
		}
		if (n > UINT64_MAX - cur)
			return GM_ELIMIT;
	} while (!atomic_compare_exchange_weak_explicit(&p->reserved.cur,
			&cur, cur + n, memory_order_relaxed,
			memory_order_relaxed));
	*level = cur + n;
	return 0;
}

/* The device gave the charged bytes: count them in the total and the
 * peak (only now, so a refused request never raises the peak). */
static void reserve_commit(struct gm_pool *p, uint64_t n, uint64_t level)
{
	uint64_t pk = atomic_load(&p->reserved.peak);

	atomic_fetch_add(&p->reserved.inc, n);
	while (level > pk && !atomic_compare_exchange_weak(&p->reserved.peak,
							   &pk, level))
		;
}

/* The device refused: give the charge back. */
static void reserve_undo(struct gm_pool *p, uint64_t n)
{
	atomic_fetch_sub(&p->reserved.cur, n);
}

static void reserve_release(struct gm_pool *p, uint64_t n)
{
	atomic_fetch_sub(&p->reserved.cur, n);
	atomic_fetch_add(&p->reserved.dec, n);
}

/*
 * A new plain segment of segment_size(rounded) bytes, with its single
 * free block, not yet in any arena. Returns 0, GM_ELIMIT, GM_EDEVNOMEM,
 * GM_ENOMEM or GM_EDEVICE; nothing is left charged on failure.
 */
static int seg_new(struct gm_pool *p, struct arena *a, int pool,
		   uint64_t rounded, struct seg **out)
{
	uint64_t size = segment_size(p, rounded), addr = 0, level;
	struct seg *s;
	struct blk *b;
	int err;

	s = calloc(1, sizeof(*s));
	b = calloc(1, sizeof(*b));
	if (!s || !b) {
		err = GM_ENOMEM;
		goto fail;
	}
	err = reserve_charge(p, size, &level);
	if (err)
		goto fail;
	err = p->be->ops->seg_alloc(p->be, size, &addr);
	if (err) {
		reserve_undo(p, size);
		goto fail;
	}
	reserve_commit(p, size, level);
	atomic_fetch_add(&p->dev_alloc, 1);
	gstat_add(&p->segments, 1);
	s->node.addr = addr;
	s->node.size = size;
	s->va_size = size;
	s->pool = (uint8_t)pool;
	s->first = s->last = b;
	b->node.addr = addr;
	b->node.size = size;
	b->seg = s;
	b->state = B_FREE;
	*out = s;
	return 0;
fail:
	free(s);
	free(b);
	return err;
}

/* Put s first in its arena's list of segments of its pool. */
static void seg_plink(struct arena *a, struct seg *s)
{
	s->pprev = NULL;
	s->pnext = a->psegs[s->pool];
	if (s->pnext)
		s->pnext->pprev = s;
	a->psegs[s->pool] = s;
}

/* Add a segment (all free, one block) to arena a. Caller holds a->lock. */
static void seg_adopt(struct gm_pool *p, struct arena *a, struct seg *s)
{
	s->arena = a;
	hint_set(p, s->node.addr, s->node.size, a);
	s->sprev = NULL;
	s->snext = a->segs;
	if (a->segs)
		a->segs->sprev = s;
	a->segs = s;
	seg_plink(a, s);
	tree_put(a, s->first);
	if (!s->virt)
		empty_put(a, s);
}

/* Remove an empty plain segment from arena a. Caller holds a->lock. */
static void seg_unlink(struct arena *a, struct seg *s)
{
	empty_take(a, s);
	tree_take(a, s->first);
	if (s->sprev)
		s->sprev->snext = s->snext;
	else
		a->segs = s->snext;
	if (s->snext)
		s->snext->sprev = s->sprev;
	s->sprev = s->snext = NULL;
	if (s->pprev)
		s->pprev->pnext = s->pnext;
	else
		a->psegs[s->pool] = s->pnext;
	if (s->pnext)
		s->pnext->pprev = s->pprev;
	s->pprev = s->pnext = NULL;
}

/* Return an unlinked empty plain segment to the backend. */
static int seg_destroy(struct gm_pool *p, struct seg *s)
{
	int err = p->be->ops->seg_free(p->be, s->node.addr, s->node.size);

	atomic_fetch_add(&p->dev_free, 1);
	reserve_release(p, s->node.size);
	gstat_sub(&p->segments, 1);
	free(s->first);
	free(s);
	return err;
}

/* ==== Stream safety ==== */

/*
 * True when every free on arena o numbered <= seq has completed on the
 * device, so its memory may serve another stream. RMM records an event
 * on every deallocate and waits on it before another stream steals the
 * block (rapidsai/rmm@5d50a37
 * stream_ordered_memory_resource.hpp); its own comment notes that cudaEventRecord
 * "has significant overhead on deallocations". Here frees are numbered
 * and an event is recorded on o's stream only when another stream wants
 * its memory: it covers every free made before it, and it is queried,
 * never waited on. Caller holds o->lock.
 */
static bool frees_done(struct gm_pool *p, struct arena *o, uint64_t seq)
{
	const struct gm_backend_ops *ops = p->be->ops;

	if (o->done_seq >= seq)
		return true;
	if (!o->event_live) {
		if (ops->event_record(p->be, o->stream, &o->event))
			return false;
		o->event_seq = o->free_seq;
		o->event_live = true;
	}
	if (ops->event_query(p->be, o->event))
		return false;
	o->done_seq = o->event_seq;
	ops->event_destroy(p->be, o->event);
	o->event_live = false;
	return o->done_seq >= seq;
}

/*
 * Take a fully free plain segment that fits rounded from another
 * stream's arena, once that stream's work before the frees is done.
 * PyTorch never reuses a block on another stream without empty_cache; this moves the segment without a device call.
 */
static struct seg *steal(struct gm_pool *p, struct arena *self, int pool,
			 uint64_t rounded)
{
	/* one stream only (the planner's replay): nothing to scan */
	if (atomic_load(&p->n_arenas) < 2)
		return NULL;
	for (unsigned i = 0; i < ARENA_SLOTS; i++) {
		struct arena *o = arena_at(p, i);
		struct gm_tnode *n;
		struct seg *s;

		if (!o || o == self || !o->empty_tree[pool])
			continue;
		lk_arena(o);
		n = gm_tree_lower_bound(o->empty_tree[pool], rounded);
		s = (struct seg *)n;
		if (s && fit_ok(p, rounded, s->node.size) &&
		    frees_done(p, o, s->free_seq)) {
			seg_unlink(o, s);
			ulk(&o->lock);
			atomic_fetch_add(&p->xstream, 1);
			return s;
		}
		ulk(&o->lock);
	}
	return NULL;
}

/* Complete pending (record_stream) frees whose events are done. Caller
 * holds a->lock. */
static void free_block(struct gm_pool *p, struct arena *a, struct blk *b);

static void process_events(struct gm_pool *p, struct arena *a, bool wait)
{
	struct blk **link = &a->pending;

	while (*link) {
		struct blk *b = *link;
		bool done = true;

		for (unsigned i = 0; i < b->nuses; i++) {
			if (!b->events[i])
				continue;
			if (wait)
				p->be->ops->event_sync(p->be, b->events[i]);
			else if (p->be->ops->event_query(p->be, b->events[i])) {
				done = false;
				continue;
			}
			p->be->ops->event_destroy(p->be, b->events[i]);
			b->events[i] = 0;
		}
		if (!done) {
			link = &b->link;
			continue;
		}
		*link = b->link;
		b->link = NULL;
		a->pend_b -= b->node.size;
		a->pend_n--;
		atomic_fetch_sub(&p->pending, b->node.size);
		free_block(p, a, b);
	}
}

/* ==== Virtual segments ==== */

/*
 * Policy (PyTorch's expandable segments, ExpandableSegment, plus one
 * step PyTorch lacks). Each arena has one virtual segment per pool: a
 * reserved address range of 1 1/8 of the device, as PyTorch's, whose
 * blocks tile [addr, addr + size); beyond size nothing is mapped. A
 * block is free (mapped, in the free tree), live, pending, or a hole:
 * whole granules given back to the device (in the hole tree). Live and
 * free blocks only ever lie on mapped granules; reserved bytes are the
 * mapped bytes.
 *
 * When no free block fits, granules are mapped: into the hole (or the
 * end of the segment) that needs the fewest new granules, the lower
 * address on a tie (PyTorch maps "at the lowest address that fits" so
 * split blocks merge again). PyTorch unmaps only on empty_cache or
 * before an OOM, so free granules in the middle of a segment stay
 * mapped and its reserved bytes run up to 1.12 x allocated on a real
 * trace (tools/bench/results/alloc-h200.md, vocab150k-train). Here,
 * before mapping, if the segment would then map more than 1/64 above
 * what its live blocks and the request need (RECLAIM_SLACK), every whole
 * granule of its free blocks is unmapped first (vseg_reclaim): physical
 * memory goes back before more is taken, so the peak stays near the
 * live bytes (the target: peak reserved <= 1.03 x peak
 * allocated). Unmapping waits for the stream first, because cuMemUnmap
 * does not synchronize (PyTorch's note, 1.10); the wait is paid only on
 * this slow path and only when the slack is exceeded, so a steady
 * training loop that fits in its mapped memory never waits.
 */
#define RECLAIM_SLACK 64

static struct blk *merge_free(struct arena *a, struct blk *b);

static uint64_t round_down(uint64_t v, uint64_t m)
{
	return v / m * m;
}

/* Link n into s's block list right after prev (NULL: at the front). */
static void blk_link_after(struct seg *s, struct blk *prev, struct blk *n)
{
	n->prev = prev;
	n->next = prev ? prev->next : s->first;
	if (n->next)
		n->next->prev = n;
	else
		s->last = n;
	if (prev)
		prev->next = n;
	else
		s->first = n;
}

static void blk_unlink(struct seg *s, struct blk *b)
{
	if (b->prev)
		b->prev->next = b->next;
	else
		s->first = b->next;
	if (b->next)
		b->next->prev = b->prev;
	else
		s->last = b->prev;
}

/* Merge hole h with neighbouring holes; h is not in the hole tree yet.
 * Puts the result in the tree. Caller holds a->lock. */
static void hole_put(struct arena *a, struct blk *h)
{
	struct seg *s = h->seg;
	struct gm_tnode **t = &a->hole_tree[s->pool];
	struct blk *n;

	if ((n = h->prev) && n->state == B_HOLE) {
		gm_tree_remove(t, &n->node);
		n->node.size += h->node.size;
		blk_unlink(s, h);
		blk_put(a, h);
		h = n;
	}
	if ((n = h->next) && n->state == B_HOLE) {
		gm_tree_remove(t, &n->node);
		h->node.size += n->node.size;
		blk_unlink(s, n);
		blk_put(a, n);
	}
	gm_tree_insert(t, &h->node);
}

/*
 * Unmap every whole granule that lies inside a free block of virtual
 * segment s, turning it into a hole (partial granules at a free block's
 * ends stay mapped: a live neighbour uses the rest of them), then drop
 * holes at the end of the segment. Caller holds a->lock and has waited
 * for the work that preceded the frees. Returns 0 or GM_EDEVICE /
 * GM_ENOMEM (what was unmapped so far stays correctly accounted).
 */
static int vseg_reclaim(struct gm_pool *p, struct arena *a, struct seg *s)
{
	uint64_t g = p->be->granule_bytes;
	struct blk *b, *next;

	for (b = s->first; b; b = next) {
		uint64_t lo, hi, end = b->node.addr + b->node.size;
		struct blk *h, *r = NULL;

		next = b->next;
		if (b->state != B_FREE)
			continue;
		lo = round_up(b->node.addr, g);
		hi = round_down(end, g);
		if (hi <= lo)
			continue;
		/* block structs first, so nothing fails after unmapping */
		h = lo > b->node.addr ? blk_new(a) : b;
		if (h && hi < end && !(r = blk_new(a))) {
			if (h != b)
				blk_put(a, h);
			return GM_ENOMEM;
		}
		if (!h)
			return GM_ENOMEM;
		if (p->be->ops->va_unmap(p->be, lo, hi - lo)) {
			if (h != b)
				blk_put(a, h);
			if (r)
				blk_put(a, r);
			return GM_EDEVICE;
		}
		atomic_fetch_add(&p->dev_free, 1);
		reserve_release(p, hi - lo);
		s->mapped -= hi - lo;
		tree_take(a, b);
		if (h != b) {
			b->node.size = lo - b->node.addr;
			h->seg = s;
			blk_link_after(s, b, h);
		}
		h->node.addr = lo;
		h->node.size = hi - lo;
		h->state = B_HOLE;
		if (r) {
			r->node.addr = hi;
			r->node.size = end - hi;
			r->seg = s;
			r->state = B_FREE;
			blk_link_after(s, h, r);
			tree_put(a, r);
		}
		if (h != b)
			tree_put(a, b);
		hole_put(a, h);
	}
	/* holes at the end: the segment simply ends earlier */
	while ((b = s->last) && b->state == B_HOLE) {
		gm_tree_remove(&a->hole_tree[s->pool], &b->node);
		s->node.size -= b->node.size;
		blk_unlink(s, b);
		blk_put(a, b);
	}
	if ((b = s->last) && b->state == B_FREE) {
		tree_take(a, b); /* recount inactive_split */
		tree_put(a, b);
	}
	return 0;
}

/* Arena a's virtual segment of pool, reserved on first use. Caller
 * holds a->lock. NULL with *err set on failure. */
static struct seg *vseg_get(struct gm_pool *p, struct arena *a, int pool,
			    int *err)
{
	uint64_t g = p->be->granule_bytes, va, addr;
	struct seg *s = a->vseg[pool];

	if (s)
		return s;
	/* 1 1/8 of the device's own memory (PyTorch: totalGlobalMem), not
	 * of a capped view of it: a cap is met by the charge, never by the
	 * address range running out */
	va = p->be->total_bytes > p->total ? p->be->total_bytes : p->total;
	va = round_up(va + va / 8, g);
	s = calloc(1, sizeof(*s));
	if (!s) {
		*err = GM_ENOMEM;
		return NULL;
	}
	*err = p->be->ops->va_reserve(p->be, va, &addr);
	if (*err) {
		free(s);
		return NULL;
	}
	s->node.addr = addr;
	s->va_size = va;
	s->virt = 1;
	s->pool = (uint8_t)pool;
	s->arena = a;
	s->snext = a->segs;
	if (a->segs)
		a->segs->sprev = s;
	a->segs = s;
	seg_plink(a, s);
	a->vseg[pool] = s;
	gstat_add(&p->segments, 1);
	return s;
}

/*
 * Map [at, at + n) of segment s (whole granules, inside a hole or just
 * past the end), charged against the cap first. Caller holds a->lock.
 */
static int vseg_map(struct gm_pool *p, struct seg *s, uint64_t at,
		    uint64_t n)
{
	uint64_t level;
	int err = reserve_charge(p, n, &level);

	if (err)
		return err;
	err = p->be->ops->va_map(p->be, at, n);
	if (err) {
		reserve_undo(p, n);
		return err;
	}
	reserve_commit(p, n, level);
	atomic_fetch_add(&p->dev_alloc, 1);
	s->mapped += n;
	hint_set(p, at, n, s->arena);
	return 0;
}

/* The free block just before b (b a hole, or NULL for the end of s),
 * or NULL. */
static struct blk *free_before(const struct seg *s, const struct blk *b)
{
	struct blk *pv = b ? b->prev : s->last;

	return pv && pv->state == B_FREE ? pv : NULL;
}

/* Bytes to map after free block fb (may be NULL) to hold rounded. */
static uint64_t map_need(const struct blk *fb, uint64_t rounded, uint64_t g)
{
	uint64_t have = fb ? fb->node.size : 0;

	return have >= rounded ? 0 : round_up(rounded - have, g);
}

/*
 * Map granules so that a free block of at least rounded bytes exists in
 * arena a's virtual segment of pool (policy above), and return it (in
 * the free tree); NULL with *err set. Caller holds a->lock.
 */
static struct blk *vseg_grow(struct gm_pool *p, struct arena *a, int pool,
			     uint64_t rounded, int *err)
{
	uint64_t g = p->be->granule_bytes, need_end, need_hole = 0, n, at;
	struct seg *s = vseg_get(p, a, pool, err);
	struct gm_tnode *hn;
	struct blk *h = NULL, *f = NULL;

	if (!s)
		return NULL;
	/* (a free block may fit that fit_ok() refused: max_split_size) */
	need_end = map_need(free_before(s, NULL), rounded, g);
	if (!need_end)
		return free_before(s, NULL);
	if (s->mapped + need_end > s->used + rounded +
	    (s->used + rounded) / RECLAIM_SLACK) {
		uint64_t ev;

		/* wait for the stream's work, as PyTorch before unmapping */
		if (p->be->ops->event_record(p->be, a->stream, &ev) == 0) {
			p->be->ops->event_sync(p->be, ev);
			p->be->ops->event_destroy(p->be, ev);
		} else {
			p->be->ops->synchronize(p->be);
		}
		vseg_reclaim(p, a, s);
		need_end = map_need(free_before(s, NULL), rounded, g);
	}
	hn = gm_tree_lower_bound(a->hole_tree[pool], round_up(rounded, g));
	if (hn) {
		h = (struct blk *)hn;
		need_hole = map_need(free_before(s, h), rounded, g);
		if (!need_hole)
			return free_before(s, h);
	}
	if (h && need_hole <= need_end) {
		n = need_hole;
		at = h->node.addr;
		if (n < h->node.size && !(f = blk_new(a))) {
			*err = GM_ENOMEM;
			return NULL;
		}
		*err = vseg_map(p, s, at, n);
		if (*err) {
			if (n < h->node.size)
				blk_put(a, f);
			return NULL;
		}
		gm_tree_remove(&a->hole_tree[pool], &h->node);
		if (n < h->node.size) {
			f->seg = s;
			blk_link_after(s, h->prev, f);
			h->node.addr += n;
			h->node.size -= n;
			gm_tree_insert(&a->hole_tree[pool], &h->node);
		} else {
			f = h;
		}
		f->node.addr = at;
		f->node.size = n;
		f->state = B_FREE;
		f = merge_free(a, f);
		return f;
	}
	n = need_end;
	if (n > s->va_size - s->node.size) {
		*err = GM_EDEVNOMEM;
		return NULL;
	}
	at = s->node.addr + s->node.size;
	f = blk_new(a);
	if (!f) {
		*err = GM_ENOMEM;
		return NULL;
	}
	*err = vseg_map(p, s, at, n);
	if (*err) {
		blk_put(a, f);
		return NULL;
	}
	s->node.size += n;
	f->seg = s;
	f->node.addr = at;
	f->node.size = n;
	f->state = B_FREE;
	blk_link_after(s, s->last, f);
	f = merge_free(a, f);
	return f;
}

/* ==== Free ==== */

/*
 * Merge free block b with its free neighbours (PyTorch try_merge_blocks;
 * a hole is never a free neighbour: only blocks of one mapped state
 * merge, as PyTorch's) and put the result in the free tree (counted
 * in inactive_split as tree_put). b is not in the tree; free neighbours
 * are, and the merged block takes a neighbour's place there in O(1)
 * when its order allows (gm_tree_replace / gm_tree_resize). Stats
 * change in the order of take, take, put. Caller holds a->lock.
 * Returns the merged block.
 */
static struct blk *merge_free(struct arena *a, struct blk *b)
{
	struct gm_tnode **tree = &a->free_tree[b->seg->pool];
	struct seg *s = b->seg;
	struct blk *pv = b->prev, *n = b->next;

	if (!pv || pv->state != B_FREE)
		pv = NULL;
	if (!n || n->state != B_FREE)
		n = NULL;
	if (pv)
		split_uncount(a, pv);
	if (n)
		split_uncount(a, n);
	if (pv) {
		uint64_t size = pv->node.size + b->node.size;

		pv->next = b->next;
		if (b->next)
			b->next->prev = pv;
		else
			s->last = pv;
		blk_put(a, b);
		b = pv;
		if (n) {
			gm_tree_remove(tree, &n->node);
			size += n->node.size;
			b->next = n->next;
			if (n->next)
				n->next->prev = b;
			else
				s->last = b;
			blk_put(a, n);
		}
		/* the merged block keeps pv's place when its order allows */
		gm_tree_resize(tree, &b->node, size);
	} else if (n) {
		b->node.size += n->node.size;
		b->next = n->next;
		if (n->next)
			n->next->prev = b;
		else
			s->last = b;
		gm_tree_replace(tree, &n->node, &b->node);
		blk_put(a, n);
	} else {
		gm_tree_insert(tree, &b->node);
	}
	split_count(a, b);
	return b;
}

/* The end of a free: count it (stream safety) and, when the segment
 * became empty, offer it to other streams or, with caching off, give it
 * back. Caller holds a->lock. */
static void free_done(struct gm_pool *p, struct arena *a, struct seg *s)
{
	a->free_seq++;
	if (--s->nused == 0 && !s->virt) {
		s->free_seq = a->free_seq;
		empty_put(a, s);
		if (p->opt.no_cache) {
			seg_unlink(a, s);
			seg_destroy(p, s);
		}
	}
}

/*
 * Return block b to its arena's free tree, merging free neighbours
 * (PyTorch free_block). With caching off, a segment that becomes empty
 * goes back to the backend at once. Caller holds a->lock; b is no longer
 * counted as allocated or active.
 */
static void free_block(struct gm_pool *p, struct arena *a, struct blk *b)
{
	struct seg *s = b->seg;

	uses_clear(b);
	b->state = B_FREE;
	s->used -= b->node.size;
	merge_free(a, b);
	free_done(p, a, s);
}

/*
 * True when freeing b undoes the arena's deferred carve exactly: b is
 * the block handed out, its rest (if any) is still its free next
 * neighbour, and nothing else would merge (free neighbours are always
 * merged, so this holds whenever nothing happened in between).
 */
static bool undo_ok(const struct arena *a, const struct blk *b)
{
	const struct blk *r = a->lazy_rest, *n;

	if (b != a->lazy || b->nuses)
		return false;
	if (b->prev && b->prev->state == B_FREE)
		return false;
	if (r && b->next != r)
		return false;
	n = r ? r->next : b->next;
	return !n || n->state != B_FREE;
}

/*
 * free_block() of the block of the deferred carve (undo_ok): the block
 * it was cut from comes back whole, as merge_free would make it, with
 * the same statistics in the same order; its node never left the tree.
 */
static void free_undo(struct gm_pool *p, struct arena *a, struct blk *b)
{
	struct seg *s = b->seg;
	struct blk *r = a->lazy_rest;

	a->lazy = NULL;
	b->state = B_FREE;
	s->used -= b->node.size;
	if (r) {
		split_uncount(a, r);
		b->node.size += r->node.size;
		b->next = r->next;
		if (r->next)
			r->next->prev = b;
		else
			s->last = b;
		blk_put(a, r);
	}
	split_count(a, b);
	free_done(p, a, s);
}

/* free_block(), through free_undo() when it applies. Caller holds
 * a->lock (trees not necessarily settled). */
static void release_block(struct gm_pool *p, struct arena *a, struct blk *b)
{
	if (a->lazy && undo_ok(a, b)) {
		free_undo(p, a, b);
		return;
	}
	tree_settle(a);
	free_block(p, a, b);
}

/* The arena locks of the fast paths: none in a single_thread pool. */
static inline __attribute__((always_inline)) void lk_if(bool st,
							 atomic_int *l)
{
	if (!st)
		lk(l);
}

static inline __attribute__((always_inline)) void ulk_if(bool st,
							  atomic_int *l)
{
	if (!st)
		ulk(l);
}

/* gm_pool_free(); st: the pool is single_thread. */
static inline __attribute__((always_inline)) int
pool_free(struct gm_pool *pool, uint64_t addr, bool st)
{
	struct arena *a = hint_get(pool, addr);
	struct blk *b = NULL;

	if (a) {
		lk_if(st, &a->lock);
		b = amap_take(&a->map, addr);
		if (!b)
			ulk_if(st, &a->lock);
	}
	if (!b) {
		b = find_live(pool, addr, true, &a);
		if (b && st) /* find_live locks; the fast path does not */
			ulk(&a->lock);
	}
	if (!b)
		return GM_ENOTFOUND;
	astat_sub(a, S_ALLOC_B, b->node.size);
	astat_sub(a, S_REQ_B, b->requested);
	astat_sub(a, S_ALLOCS, 1);
	a->hist[hist_bucket(b->node.size)]--;
	if (b->nuses) {
		tree_settle(a); /* b's node may stand for a free block */
		/* PyTorch insert_events: one event per other stream. */
		b->events = calloc(b->nuses, sizeof(*b->events));
		for (unsigned i = 0; b->events && i < b->nuses; i++)
			if (pool->be->ops->event_record(pool->be, b->uses[i],
							&b->events[i]))
				b->events[i] = 0;
		if (!b->events) /* no host memory: be safe, wait now */
			pool->be->ops->synchronize(pool->be);
		else {
			allocated_to_pending(pool, b->node.size);
			a->pend_b += b->node.size;
			a->pend_n++;
			b->state = B_PENDING;
			b->link = a->pending;
			a->pending = b;
			ulk_if(st, &a->lock);
			return 0;
		}
	}
	allocated_down(pool, a, b->node.size, st);
	release_block(pool, a, b);
	ulk_if(st, &a->lock);
	return 0;
}

int gm_pool_free(struct gm_pool *pool, uint64_t addr)
{
	if (pool->opt.single_thread)
		return pool_free(pool, addr, true);
	return pool_free(pool, addr, false);
}

int gm_pool_record_stream(struct gm_pool *pool, uint64_t addr,
			  uintptr_t stream)
{
	struct arena *a;
	struct blk *b = find_live(pool, addr, false, &a);
	int err = 0;

	if (!b)
		return GM_ENOTFOUND;
	if (stream == a->stream)
		goto out;
	for (unsigned i = 0; i < b->nuses; i++)
		if (b->uses[i] == stream)
			goto out;
	if (b->nuses == b->capuses) {
		unsigned cap = b->capuses ? b->capuses * 2u : 2u;

		if (cap > UINT16_MAX) {
			err = GM_ENOMEM;
			goto out;
		}
		uintptr_t *u = realloc(b->uses, cap * sizeof(*u));

		if (!u) {
			err = GM_ENOMEM;
			goto out;
		}
		b->uses = u;
		b->capuses = (uint16_t)cap;
	}
	b->uses[b->nuses++] = stream;
out:
	ulk(&a->lock);
	return err;
}

/* ==== Allocate ==== */

/* Fill the OOM report after a failure (under slow_lock). */
static void record_oom(struct gm_pool *p, int err, uint64_t size,
		       uint64_t rounded, uintptr_t stream)
{
	struct gm_pool_stats st;
	struct gm_pool_oom *o = &p->last_oom;
	uint64_t headroom = 0, dev_free = 0;

	gm_pool_get_stats(p, &st);
	atomic_fetch_add(&p->ooms, 1);
	if (p->be->ops->mem_free)
		p->be->ops->mem_free(p->be, &dev_free);
	pthread_mutex_lock(&p->slow_lock);
	memset(o, 0, sizeof(*o));
	o->err = err;
	o->requested_bytes = size;
	o->rounded_bytes = rounded;
	o->stream = stream;
	o->allocated_bytes = st.allocated_bytes.current;
	o->reserved_bytes = st.reserved_bytes.current;
	o->free_cached_bytes = st.free_bytes;
	o->largest_free_bytes = st.largest_free_bytes;
	o->cap_bytes = p->cap;
	o->device_free_bytes = dev_free;
	/* Bytes that could still be had: under the cap and on the device. */
	if (o->reserved_bytes < p->cap)
		headroom = p->cap - o->reserved_bytes;
	if (headroom > dev_free && p->be->ops->mem_free)
		headroom = dev_free;
	o->kind = st.free_bytes >= rounded ||
			  (headroom <= UINT64_MAX - st.free_bytes &&
			   headroom + st.free_bytes >= rounded) ?
			  GM_OOM_FRAGMENTATION : GM_OOM_SHORTAGE;
	pthread_mutex_unlock(&p->slow_lock);
}

/*
 * Get memory for rounded bytes in arena a when its tree has no fit:
 * another stream's free segment, a new segment (or more granules), then
 * the same after releasing every cached segment (PyTorch's
 * DeviceCachingAllocator::malloc slow path). Returns the block handed out, with
 * a->lock NOT held (*counted false: not yet counted, see carve_at), or
 * NULL with *err set.
 */
static struct blk *alloc_slow(struct gm_pool *p, struct arena *a, int pool,
			      uint64_t size, uint64_t rounded, int *err,
			      bool *counted, bool try_only)
{
	struct seg *s = NULL;
	struct blk *b;

	for (int attempt = 0; attempt < 2; attempt++) {
		if (p->opt.virtual_segments && !p->opt.no_cache) {
			lk_arena(a);
			b = best_fit(p, a, pool, rounded);
			if (!b)
				b = vseg_grow(p, a, pool, rounded, err);
			if (b) {
				*counted = carve(p, a, b, rounded, size);
				ulk(&a->lock);
				return b;
			}
			ulk(&a->lock);
		} else {
			if (!p->opt.no_cache && !p->opt.no_cross_stream)
				s = steal(p, a, pool, rounded);
			if (!s)
				*err = seg_new(p, a, pool, rounded, &s);
			if (s) {
				lk_arena(a);
				seg_adopt(p, a, s);
				b = s->first;
				*counted = carve(p, a, b, rounded, size);
				ulk(&a->lock);
				return b;
			}
		}
		if (*err != GM_ELIMIT && *err != GM_EDEVNOMEM)
			return NULL;
		if (attempt == 0) {
			if (try_only) /* gm_pool_alloc_try: stop here */
				return NULL;
			atomic_fetch_add(&p->retries, 1);
			gm_pool_release_cached(p);
		}
	}
	return NULL;
}

/* Undo a counted allocation of b (its map insert failed). Caller holds
 * a->lock. */
static __attribute__((noinline, cold)) void alloc_undo(struct gm_pool *p,
							struct arena *a,
							struct blk *b)
{
	astat_sub(a, S_ALLOC_B, b->node.size);
	astat_sub(a, S_REQ_B, b->requested);
	astat_sub(a, S_ALLOCS, 1);
	a->hist[hist_bucket(b->node.size)]--;
	allocated_down(p, a, b->node.size, false);
	release_block(p, a, b);
}

/*
 * Put carved and counted block b into its arena's map of live blocks;
 * on failure (GM_ENOMEM) undo the allocation. Caller holds a->lock.
 */
static inline __attribute__((always_inline)) int map_in(struct gm_pool *p,
							 struct arena *a,
							 struct blk *b)
{
	int err = amap_insert(&a->map, b);

	if (__builtin_expect(err, 0))
		alloc_undo(p, a, b);
	return err;
}

/*
 * Count carved block b of arena a (carve_at returned false: its
 * shortfall would pass a peak) with every arena locked, so the peaks are
 * raised to the exact totals the moment it is counted: the allocation
 * takes effect here. Caller holds no lock. Returns map_in()'s result.
 */
static int alloc_window(struct gm_pool *p, struct arena *a, struct blk *b,
			uint64_t *addr)
{
	int err;

	window_lock(p);
	count_alloc(a, b);
	err = map_in(p, a, b);
	if (window_settle(p, false)) /* a new peak: direct mode */
		atomic_store(&p->direct, true);
	window_unlock(p);
	if (!err)
		*addr = b->node.addr;
	return err;
}

/* gm_pool_alloc() (gm_pool_alloc_try() where try_only); st: the pool
 * is single_thread. */
static inline __attribute__((always_inline)) int
pool_alloc(struct gm_pool *pool, uint64_t size, uintptr_t stream,
	   uint64_t *addr, bool try_only, bool st)
{
	struct gm_tnode **at;
	struct arena *a;
	struct blk *b;
	uint64_t rounded;
	bool counted = true, calm;
	int pl, err = 0;

	*addr = 0;
	if (!size || size > MAX_REQUEST)
		return GM_EINVAL;
	rounded = round_size(pool, size);
	pl = pool_of(rounded);
	a = arena_get(pool, stream);
	if (!a)
		return GM_ENOMEM;
	lk_if(st, &a->lock);
	tree_settle(a);
	if (a->pending)
		process_events(pool, a, false);
	b = pool->opt.no_cache ? NULL : best_fit_at(pool, a, pl, rounded, &at);
	if (!b) {
		ulk_if(st, &a->lock);
		b = alloc_slow(pool, a, pl, size, rounded, &err, &counted,
			       try_only);
		if (!b) {
			if (!try_only &&
			    (err == GM_ELIMIT || err == GM_EDEVNOMEM))
				record_oom(pool, err, size, rounded, stream);
			return err;
		}
		if (!counted)
			return alloc_window(pool, a, b, addr);
		lk_if(st, &a->lock);
	} else if (!carve_at(pool, a, b, at, rounded, size, st)) {
		ulk_if(st, &a->lock);
		return alloc_window(pool, a, b, addr);
	}
	err = map_in(pool, a, b);
	/* a single_thread pool stays in direct mode (allocated_plain) */
	calm = !st && a->want_credit;
	ulk_if(st, &a->lock);
	if (__builtin_expect(calm, 0))
		credit_mode(pool);
	if (!err)
		*addr = b->node.addr;
	return err;
}

int gm_pool_alloc(struct gm_pool *pool, uint64_t size, uintptr_t stream,
		  uint64_t *addr)
{
	if (pool->opt.single_thread)
		return pool_alloc(pool, size, stream, addr, false, true);
	return pool_alloc(pool, size, stream, addr, false, false);
}

int gm_pool_alloc_try(struct gm_pool *pool, uint64_t size, uintptr_t stream,
		      uint64_t *addr)
{
	if (pool->opt.single_thread)
		return pool_alloc(pool, size, stream, addr, true, true);
	return pool_alloc(pool, size, stream, addr, true, false);
}

/* ==== Release ==== */

int gm_pool_release_cached(struct gm_pool *pool)
{
	int err = 0, e;

	/* Like PyTorch's release_cached_blocks: wait for outstanding work
	 * first (unmapping does not synchronize by itself, 1.10). */
	if (pool->be->ops->synchronize(pool->be))
		err = GM_EDEVICE;
	for (unsigned i = 0; i < ARENA_SLOTS; i++) {
		struct arena *a = arena_at(pool, i);

		if (!a)
			continue;
		lk_arena(a);
		if (a->pending)
			process_events(pool, a, true);
		if (a->event_live) {
			pool->be->ops->event_destroy(pool->be, a->event);
			a->event_live = false;
		}
		a->done_seq = a->free_seq;
		for (int pl = 0; pl < NPOOLS; pl++) {
			struct gm_tnode *n;

			while ((n = a->empty_tree[pl])) {
				struct seg *s = (struct seg *)n;

				seg_unlink(a, s);
				e = seg_destroy(pool, s);
				if (e && !err)
					err = GM_EDEVICE;
			}
			if (a->vseg[pl]) {
				e = vseg_reclaim(pool, a, a->vseg[pl]);
				if (e && !err)
					err = GM_EDEVICE;
			}
		}
		ulk(&a->lock);
	}
	return err;
}

/* ==== Create / destroy ==== */

int gm_pool_create(struct gm_pool **out, struct gm_backend *be,
		   const struct gm_pool_options *opt, struct gm_diag *diag)
{
	struct gm_pool_options dflt = {0};
	struct gm_pool *p;
	uint64_t cap;

	*out = NULL;
	if (!opt)
		opt = &dflt;
	if (!be || !be->ops)
		return gm_diag_set(diag, GM_EINVAL, "no backend");
	if (opt->cap_fraction < 0 || opt->cap_fraction > 1 ||
	    opt->cap_fraction != opt->cap_fraction)
		return gm_diag_set(diag, GM_EINVAL,
				   "cap fraction %g is not in (0, 1]",
				   opt->cap_fraction);
	if (opt->roundup_power2_divisions > 1 &&
	    (opt->roundup_power2_divisions &
	     (opt->roundup_power2_divisions - 1)))
		return gm_diag_set(diag, GM_EINVAL,
				   "roundup_power2_divisions %u is not a "
				   "power of 2", opt->roundup_power2_divisions);
	if (opt->virtual_segments &&
	    (!be->ops->va_reserve || !be->ops->va_map ||
	     !be->ops->va_unmap || !be->ops->va_release ||
	     !be->granule_bytes))
		return gm_diag_set(diag, GM_ENOTSUP,
				   "the %s backend has no virtual segments",
				   be->name ? be->name : "chosen");
	p = aligned_alloc(64, round_up(sizeof(*p), 64));
	if (!p)
		return gm_diag_set(diag, GM_ENOMEM, "out of host memory");
	memset(p, 0, sizeof(*p));
	p->be = be;
	p->opt = *opt;
	p->total = opt->device_total_bytes ? opt->device_total_bytes :
					     be->total_bytes;
	cap = p->total;
	if (opt->cap_fraction > 0) {
		/* PyTorch setMemoryFraction: fraction * total (1.8). */
		long double c = (long double)opt->cap_fraction * p->total;

		cap = c >= (long double)UINT64_MAX ? UINT64_MAX : (uint64_t)c;
		p->has_cap = true;
	}
	if (opt->cap_bytes && (!p->has_cap || opt->cap_bytes < cap)) {
		cap = opt->cap_bytes;
		p->has_cap = true;
	}
	if (p->has_cap && cap == 0) {
		free(p);
		return gm_diag_set(diag, GM_EINVAL, "the cap comes to 0 bytes");
	}
	if (!cap)
		cap = UINT64_MAX; /* backend without a known total */
	p->cap = cap;
	p->max_split = opt->max_split_bytes ? opt->max_split_bytes :
					      UINT64_MAX;
	pthread_mutex_init(&p->slow_lock, NULL);
	*out = p;
	return 0;
}

void gm_pool_destroy(struct gm_pool *pool)
{
	const struct gm_backend_ops *ops;

	if (!pool)
		return;
	ops = pool->be->ops;
	ops->synchronize(pool->be);
	for (unsigned i = 0; i < ARENA_SLOTS; i++) {
		struct arena *a = arena_at(pool, i);
		struct seg *s, *sn;
		struct blk *b, *bn;

		if (!a)
			continue;
		if (a->event_live)
			ops->event_destroy(pool->be, a->event);
		for (b = a->pending; b; b = b->link)
			for (unsigned k = 0; b->events && k < b->nuses; k++)
				if (b->events[k])
					ops->event_destroy(pool->be,
							   b->events[k]);
		for (s = a->segs; s; s = sn) {
			sn = s->snext;
			if (s->virt) {
				if (s->node.size)
					ops->va_unmap(pool->be, s->node.addr,
						      s->node.size);
				ops->va_release(pool->be, s->node.addr,
						s->va_size);
			} else {
				ops->seg_free(pool->be, s->node.addr,
					      s->node.size);
			}
			for (b = s->first; b; b = bn) {
				bn = b->next;
				free(b->uses);
				free(b->events);
				free(b);
			}
			free(s);
		}
		for (b = a->spare; b; b = bn) {
			bn = b->link;
			free(b);
		}
		free(a->map.slot);
		free(a);
	}
	hint_free(pool);
	pthread_mutex_destroy(&pool->slow_lock);
	free(pool);
}

/* ==== Statistics and reports ==== */

static void gstat_read(struct gstat *g, struct gm_pool_stat *s)
{
	s->current = atomic_load(&g->cur);
	s->peak = atomic_load(&g->peak);
	s->allocated = atomic_load(&g->inc);
	s->freed = atomic_load(&g->dec);
}

static void astat_sum(struct gm_pool_stat *s, const struct astat *a)
{
	s->current += a->cur;
	s->peak += a->peak;
	s->allocated += a->cur + a->dec;
	s->freed += a->dec;
}

/*
 * Read in a window (every arena locked at once: one consistent moment).
 * Reserved bytes and the segment count come from pool-wide atomics; the
 * peaks of allocated and active bytes, with several arenas, from the
 * pool-wide peaks (exact, allocated_up). The other counters are kept
 * per arena and summed: their current and totals are exact; their peak
 * is exact with one stream and otherwise the sum of per-stream peaks.
 */
void gm_pool_get_stats(struct gm_pool *pool, struct gm_pool_stats *st)
{
	uint64_t largest = 0;

	memset(st, 0, sizeof(*st));
	window_lock(pool);
	for (unsigned i = 0; i < atomic_load(&pool->n_arenas); i++) {
		struct arena *a = pool->list[i];
		struct astat ab, an;

		ab = active_cur(a, S_ACTIVE_B);
		an = active_cur(a, S_ACTIVE);
		astat_sum(&st->allocated_bytes, &a->st[S_ALLOC_B]);
		astat_sum(&st->active_bytes, &ab);
		astat_sum(&st->requested_bytes, &a->st[S_REQ_B]);
		astat_sum(&st->inactive_split_bytes, &a->st[S_ISPLIT_B]);
		astat_sum(&st->allocations, &a->st[S_ALLOCS]);
		astat_sum(&st->active, &an);
		astat_sum(&st->inactive_split, &a->st[S_ISPLIT]);
		for (unsigned k = 0; k < GM_POOL_HIST_BUCKETS; k++)
			st->histogram[k] += a->hist[k];
		for (int pl = 0; pl < NPOOLS; pl++) {
			struct gm_tnode *n = gm_tree_max(a->free_tree[pl]);

			if (n && n->size > largest)
				largest = n->size;
		}
	}
	/* one arena: its sums above are exact; else the pool-wide peaks */
	if (atomic_load(&pool->multi)) {
		st->allocated_bytes.peak = atomic_load(&pool->peak_alloc);
		st->active_bytes.peak = atomic_load(&pool->peak_active);
	}
	window_unlock(pool);
	gstat_read(&pool->reserved, &st->reserved_bytes);
	gstat_read(&pool->segments, &st->segments);
	st->num_alloc_retries = atomic_load(&pool->retries);
	st->num_ooms = atomic_load(&pool->ooms);
	st->num_limit_rejections = atomic_load(&pool->limit_rej);
	st->num_device_alloc = atomic_load(&pool->dev_alloc);
	st->num_device_free = atomic_load(&pool->dev_free);
	st->num_cross_stream_reuse = atomic_load(&pool->xstream);
	st->free_bytes = st->reserved_bytes.current > st->active_bytes.current ?
		st->reserved_bytes.current - st->active_bytes.current : 0;
	st->largest_free_bytes = largest;
	/* BFC / RMM arena: 1 - largest free / total free (4, 2.3). */
	st->fragmentation = st->free_bytes ?
		1.0 - (double)largest / (double)st->free_bytes : 0.0;
	if (st->fragmentation < 0)
		st->fragmentation = 0;
	st->cap_bytes = pool->cap;
	st->device_total_bytes = pool->total;
}

void gm_pool_reset_peaks(struct gm_pool *pool)
{
	struct gstat *g[] = {&pool->reserved, &pool->segments};

	window_lock(pool);
	for (unsigned i = 0; i < sizeof(g) / sizeof(g[0]); i++)
		atomic_store(&g[i]->peak, atomic_load(&g[i]->cur));
	for (unsigned i = 0; i < atomic_load(&pool->n_arenas); i++) {
		struct arena *a = pool->list[i];

		for (int k = 0; k < NSTAT; k++)
			a->st[k].peak = a->st[k].cur;
		a->st[S_ACTIVE_B].peak = active_cur(a, S_ACTIVE_B).cur;
		a->st[S_ACTIVE].peak = active_cur(a, S_ACTIVE).cur;
	}
	window_settle(pool, true);
	window_unlock(pool);
}

uint64_t gm_pool_reserved(const struct gm_pool *pool)
{
	return atomic_load(&((struct gm_pool *)pool)->reserved.cur);
}

bool gm_pool_is_small(const struct gm_pool *pool, uint64_t size)
{
	return size && size <= MAX_REQUEST && !pool->opt.no_cache &&
	       !pool->opt.virtual_segments &&
	       pool_of(round_size(pool, size)) == POOL_SMALL;
}

/* round_size() keeps sizes of 1 .. SMALL_SIZE at most SMALL_SIZE (a
 * multiple of 512; divisions apply above it only) and rounds larger
 * ones up, so the small sizes are exactly 1 .. SMALL_SIZE. */
uint64_t gm_pool_small_max(const struct gm_pool *pool)
{
	if (pool->opt.no_cache || pool->opt.virtual_segments)
		return 0;
	return SMALL_SIZE;
}

size_t gm_pool_small_state(struct gm_pool *pool, uintptr_t stream,
			   uint64_t *buf, size_t cap)
{
	unsigned slot;
	struct arena *a = arena_find(pool, stream, &slot);
	size_t n = 0;

#define PUT(v) do { if (n < cap) buf[n] = (v); n++; } while (0)
	if (!a)
		return 0;
	lk_arena(a);
	for (const struct seg *s = a->psegs[POOL_SMALL]; s; s = s->pnext) {
		size_t nb = 0;

		for (const struct blk *b = s->first; b; b = b->next)
			nb++;
		PUT(s->node.addr);
		PUT(s->node.size);
		PUT(nb);
		for (const struct blk *b = s->first; b; b = b->next) {
			PUT(b->node.addr);
			PUT(b->node.size);
			PUT(b->state);
		}
	}
	ulk(&a->lock);
#undef PUT
	return n;
}

size_t gm_pool_state(struct gm_pool *pool, uint64_t *buf, size_t cap)
{
	size_t n = 0;

#define PUT(v) do { if (n < cap) buf[n] = (v); n++; } while (0)
	window_lock(pool);
	PUT(atomic_load(&pool->n_arenas));
	for (unsigned i = 0; i < atomic_load(&pool->n_arenas); i++) {
		const struct arena *a = pool->list[i];

		PUT(a->stream);
		for (const struct seg *s = a->segs; s; s = s->snext) {
			size_t nb = 0;

			for (const struct blk *b = s->first; b; b = b->next)
				nb++;
			PUT(s->node.addr);
			PUT(s->node.size);
			PUT(s->va_size);
			PUT(s->pool | (uint64_t)s->virt << 8 |
			    (uint64_t)s->in_empty << 16);
			PUT(nb);
			for (const struct blk *b = s->first; b; b = b->next) {
				PUT(b->node.addr);
				PUT(b->node.size);
				PUT(b->state);
			}
		}
		PUT(UINT64_MAX); /* the arena's end */
	}
	window_unlock(pool);
#undef PUT
	return n;
}

uint64_t gm_pool_releases(const struct gm_pool *pool)
{
	struct gm_pool *p = (struct gm_pool *)pool;

	return atomic_load(&p->retries) + atomic_load(&p->dev_free);
}

uint64_t gm_pool_device_calls(const struct gm_pool *pool)
{
	struct gm_pool *p = (struct gm_pool *)pool;

	return atomic_load(&p->dev_alloc) + atomic_load(&p->dev_free) +
	       atomic_load(&p->retries) + atomic_load(&p->ooms) +
	       atomic_load(&p->limit_rej) + atomic_load(&p->xstream);
}

bool gm_pool_virtual(const struct gm_pool *pool)
{
	return pool->opt.virtual_segments;
}

uint64_t gm_pool_cap(const struct gm_pool *pool)
{
	return pool->cap;
}

void gm_pool_last_oom(struct gm_pool *pool, struct gm_pool_oom *oom)
{
	pthread_mutex_lock(&pool->slow_lock);
	*oom = pool->last_oom;
	pthread_mutex_unlock(&pool->slow_lock);
}

int gm_pool_lookup(struct gm_pool *pool, uint64_t addr, uint64_t *base,
		   uint64_t *size)
{
	int err = GM_ENOTFOUND;
	struct arena *la;
	struct blk *lb = find_live(pool, addr, false, &la);

	/* the start of a live block (the preload library's check after
	 * every allocation): from the arena's map */
	if (lb) {
		if (base)
			*base = lb->node.addr;
		if (size)
			*size = lb->node.size;
		ulk(&la->lock);
		return 0;
	}
	/* inside a block: walk the segments */
	for (unsigned i = 0; i < ARENA_SLOTS && err; i++) {
		struct arena *a = arena_at(pool, i);

		if (!a)
			continue;
		lk(&a->lock);
		for (struct seg *s = a->segs; s && err; s = s->snext) {
			if (addr < s->node.addr ||
			    addr - s->node.addr >= s->node.size)
				continue;
			for (struct blk *b = s->first; b; b = b->next) {
				if (addr - b->node.addr >= b->node.size ||
				    addr < b->node.addr)
					continue;
				if (b->state == B_ALLOC) {
					if (base)
						*base = b->node.addr;
					if (size)
						*size = b->node.size;
					err = 0;
				}
				break;
			}
		}
		ulk(&a->lock);
	}
	return err;
}

static void set_stat(struct gm_val *o, const char *key,
		     const struct gm_pool_stat *s, bool bytes)
{
	char k[96];

	snprintf(k, sizeof(k), bytes ? "%s_bytes" : "%s", key);
	gm_obj_set_uint(o, k, s->current);
	snprintf(k, sizeof(k), bytes ? "peak_%s_bytes" : "peak_%s", key);
	gm_obj_set_uint(o, k, s->peak);
}

struct gm_val *gm_pool_stats_val(const struct gm_pool_stats *st)
{
	struct gm_val *o = gm_val_obj(), *h;

	if (!o)
		return NULL;
	set_stat(o, "allocated", &st->allocated_bytes, true);
	set_stat(o, "reserved", &st->reserved_bytes, true);
	set_stat(o, "active", &st->active_bytes, true);
	set_stat(o, "requested", &st->requested_bytes, true);
	set_stat(o, "inactive_split", &st->inactive_split_bytes, true);
	set_stat(o, "allocations", &st->allocations, false);
	set_stat(o, "segments", &st->segments, false);
	set_stat(o, "active_blocks", &st->active, false);
	set_stat(o, "inactive_split_blocks", &st->inactive_split, false);
	gm_obj_set_uint(o, "free_bytes", st->free_bytes);
	gm_obj_set_uint(o, "largest_free_bytes", st->largest_free_bytes);
	gm_obj_set_real(o, "fragmentation", st->fragmentation);
	gm_obj_set_uint(o, "cap_bytes", st->cap_bytes);
	gm_obj_set_uint(o, "device_total_bytes", st->device_total_bytes);
	gm_obj_set_uint(o, "num_alloc_retries", st->num_alloc_retries);
	gm_obj_set_uint(o, "num_ooms", st->num_ooms);
	gm_obj_set_uint(o, "num_limit_rejections", st->num_limit_rejections);
	gm_obj_set_uint(o, "num_device_alloc", st->num_device_alloc);
	gm_obj_set_uint(o, "num_device_free", st->num_device_free);
	gm_obj_set_uint(o, "num_cross_stream_reuse",
			st->num_cross_stream_reuse);
	h = gm_val_arr();
	for (unsigned k = 0; h && k < GM_POOL_HIST_BUCKETS; k++) {
		struct gm_val *e;

		if (!st->histogram[k])
			continue;
		e = gm_val_obj();
		gm_obj_set_uint(e, "min_size_bytes", (uint64_t)1 << k);
		gm_obj_set_uint(e, "blocks", st->histogram[k]);
		gm_arr_push(h, e);
	}
	gm_obj_set(o, "histogram", h);
	return o;
}

static const char *state_name(int state)
{
	switch (state) {
	case B_ALLOC: return "active_allocated";
	case B_PENDING: return "active_pending_free";
	case B_HOLE: return "unmapped";
	default: return "inactive";
	}
}

struct gm_val *gm_pool_snapshot(struct gm_pool *pool)
{
	struct gm_val *root = gm_val_obj(), *segs = gm_val_arr();

	gm_obj_set(root, "segments", segs);
	for (unsigned i = 0; root && segs && i < ARENA_SLOTS; i++) {
		struct arena *a = arena_at(pool, i);

		if (!a)
			continue;
		lk(&a->lock);
		for (struct seg *s = a->segs; s; s = s->snext) {
			struct gm_val *so = gm_val_obj(), *bl = gm_val_arr();
			uint64_t used = 0;

			gm_obj_set_uint(so, "address", s->node.addr);
			gm_obj_set_uint(so, "stream", a->stream);
			gm_obj_set_str(so, "pool", s->pool == POOL_SMALL ?
				       "small" : "large");
			gm_obj_set_bool(so, "virtual", s->virt);
			/* virtual: mapped bytes (what reserved counts); its
			 * blocks also list the holes, state "unmapped" */
			gm_obj_set_uint(so, "total_size_bytes",
					s->virt ? s->mapped : s->node.size);
			for (struct blk *b = s->first; b; b = b->next) {
				struct gm_val *bo = gm_val_obj();

				if (b->state == B_ALLOC)
					used += b->node.size;
				gm_obj_set_uint(bo, "address", b->node.addr);
				gm_obj_set_uint(bo, "size_bytes", b->node.size);
				gm_obj_set_uint(bo, "requested_size_bytes",
						b->state == B_FREE ? 0 :
						b->requested);
				gm_obj_set_str(bo, "state",
					       state_name(b->state));
				gm_arr_push(bl, bo);
			}
			gm_obj_set_uint(so, "allocated_size_bytes", used);
			gm_obj_set(so, "blocks", bl);
			gm_arr_push(segs, so);
		}
		ulk(&a->lock);
	}
	return root;
}

static const char *oom_kind_name(enum gm_oom_kind k)
{
	switch (k) {
	case GM_OOM_SHORTAGE: return "shortage";
	case GM_OOM_FRAGMENTATION: return "fragmentation";
	default: return "none";
	}
}

struct gm_val *gm_pool_oom_val(const struct gm_pool_oom *oom)
{
	struct gm_val *o = gm_val_obj();

	gm_obj_set_str(o, "kind", oom_kind_name(oom->kind));
	gm_obj_set_str(o, "error", oom->err ? gm_err_name(oom->err) : "");
	gm_obj_set_uint(o, "requested_bytes", oom->requested_bytes);
	gm_obj_set_uint(o, "rounded_bytes", oom->rounded_bytes);
	gm_obj_set_uint(o, "stream", oom->stream);
	gm_obj_set_uint(o, "allocated_bytes", oom->allocated_bytes);
	gm_obj_set_uint(o, "reserved_bytes", oom->reserved_bytes);
	gm_obj_set_uint(o, "free_cached_bytes", oom->free_cached_bytes);
	gm_obj_set_uint(o, "largest_free_bytes", oom->largest_free_bytes);
	gm_obj_set_uint(o, "cap_bytes", oom->cap_bytes);
	gm_obj_set_uint(o, "device_free_bytes", oom->device_free_bytes);
	return o;
}

char *gm_pool_oom_format(const struct gm_pool_oom *oom, char *buf,
			 size_t len)
{
	char req[32], fr[32], lg[32], al[32], rs[32], cp[32];

	gm_size_format(req, sizeof(req), oom->rounded_bytes);
	gm_size_format(fr, sizeof(fr), oom->free_cached_bytes);
	gm_size_format(lg, sizeof(lg), oom->largest_free_bytes);
	gm_size_format(al, sizeof(al), oom->allocated_bytes);
	gm_size_format(rs, sizeof(rs), oom->reserved_bytes);
	gm_size_format(cp, sizeof(cp), oom->cap_bytes);
	if (oom->kind == GM_OOM_FRAGMENTATION)
		snprintf(buf, len,
			 "out of memory (%s): tried to allocate %s on stream "
			 "0x%" PRIxPTR "; %s allocated, %s reserved of a %s "
			 "cap; %s free in the pool and below the cap would "
			 "cover it, but the largest free block is %s: "
			 "fragmentation (try virtual segments)",
			 oom->err == GM_ELIMIT ? "cap" : "device", req,
			 oom->stream, al, rs, cp, fr, lg);
	else
		snprintf(buf, len,
			 "out of memory (%s): tried to allocate %s on stream "
			 "0x%" PRIxPTR "; %s allocated, %s reserved of a %s "
			 "cap, %s free in the pool: a real shortage",
			 oom->err == GM_ELIMIT ? "cap" : "device", req,
			 oom->stream, al, rs, cp, fr);
	return buf;
}
