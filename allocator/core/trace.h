/*
 * trace.h - allocation traces: RMM's CSV log reader and the replayer
 * (trace.c).
 *
 * Format (rapidsai/rmm logging_resource_adaptor): a
 * header line naming the columns Thread, Time, Action, Pointer, Size,
 * Stream in any order, then one event per line. Action is "allocate",
 * "free" or "allocate failure" (kept, not replayed), or, our additions,
 * "empty_cache": the recorded program called torch.cuda.empty_cache()
 * (the replay's pool releases its cached segments there; Pointer and
 * Size 0), and
 * "segment": the recorded allocator took a segment of Size bytes at
 * Pointer for the allocation that follows (PyTorch's segment_alloc); a
 * replay on the simulated backend places its next segment of that size
 * there (gm_sim_place_next), so blocks of equal size tie-break by
 * address as they did on the device. Time is either
 * microseconds (a number) or RMM's "HH:MM:SS.ffffff". Pointer and
 * Stream are hex (with or without 0x) or decimal; Size is decimal
 * bytes. Files ending in .gz (or any gzip stream) are read through
 * zlib. Blank lines and lines starting with '#' are skipped, except one
 * "# gpumem-replay: OPTIONS" line before the header: the replay options
 * the trace was made with (gpumem plan --trace writes it; kept in
 * gm_trace.options for the caller). Lines end in LF or CR LF; a CR
 * inside a line (CR-only line endings) is an error.
 *
 * A trace may also be a PyTorch memory-history recording as
 * tools/measure/tracefile.py writes it (first line a JSON object with
 * "initial": [[address, size], ...], then one JSON array [action,
 * address, size, stream, frames] a line, PyTorch's actions of
 * torch.cuda.memory._record_memory_history): the initial blocks become
 * allocations, "alloc" / "free_completed" allocations and frees,
 * "segment_alloc" segment hints (none when the trace has a
 * "segment_free" or "segment_unmap"); the other actions are read and
 * not replayed (trace_torch.c).
 *
 * Bounds (struct gm_trace_limits, defaults GM_TRACE_LIMITS): a line of
 * at most 16 MiB, 2^27 lines, 2^25 events (1.5 GiB of events, 2 GiB of
 * pointer maps in the replay); a gzip stream may not expand more than
 * 250 times once past 64 MiB (the shipped traces compress 10 to 61
 * times; a stream of zeros about 1,000).
 * gm_trace_read holds one line at a time, not the file.
 *
 * Errors: GM_EINVAL with "file:line:column: message" in diag, GM_EIO,
 * GM_ENOMEM. Units: bytes; time in nanoseconds.
 */
#ifndef GM_TRACE_H
#define GM_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_backend;
struct gm_diag;
struct gm_pool_options;

enum gm_trace_action {
	GM_TRACE_ALLOC,
	GM_TRACE_FREE,
	GM_TRACE_ALLOC_FAILURE,
	GM_TRACE_SEGMENT,
	GM_TRACE_EMPTY_CACHE,
};

struct gm_trace_limits {
	size_t max_line;        /* bytes of one line */
	unsigned long max_lines;
	size_t max_events;
	unsigned max_ratio;     /* decompressed / compressed bytes */
	uint64_t ratio_after;   /* decompressed bytes before max_ratio holds */
};

#define GM_TRACE_LIMITS {16u << 20, 1ul << 27, (size_t)1 << 25, 250u, \
			 (uint64_t)64 << 20}

/* Set the bounds of the readers below (NULL: GM_TRACE_LIMITS); for
 * tests, which reach them with small inputs. Not thread safe. */
void gm_trace_set_limits(const struct gm_trace_limits *l);

struct gm_trace_event {
	uint64_t time_ns;
	uint64_t ptr;
	uint64_t size;
	uint64_t stream;
	uint64_t thread;
	enum gm_trace_action action;
	uint32_t line;               /* of the file, 1-based */
};

struct gm_trace {
	struct gm_trace_event *ev;
	size_t n, cap;
	char *options;          /* text after "# gpumem-replay:", or NULL */
	uint32_t options_line;
};

/* Read a trace file (plain or gzip). */
int gm_trace_read(const char *path, struct gm_trace *t, struct gm_diag *diag);

/* Parse CSV text of len bytes; name is used in messages. */
int gm_trace_parse(const char *text, size_t len, const char *name,
		   struct gm_trace *t, struct gm_diag *diag);

void gm_trace_free(struct gm_trace *t);

/* The first allocation the replay could not serve. */
struct gm_replay_failure {
	uint32_t line;            /* of the trace file; 0 = none failed */
	int err;                  /* gm_pool_alloc's GM_E* */
	uint64_t size;            /* bytes asked */
	uint64_t allocated_bytes; /* the pool's, when it failed */
	uint64_t reserved_bytes;
};

struct gm_replay_result {
	uint64_t events;             /* lines replayed */
	uint64_t allocations;
	uint64_t frees;
	uint64_t failed_allocations; /* the pool said out of memory (or the
				      * size is above its largest request) */
	uint64_t stream_limit_allocations; /* refused: a stream past the
					    * pool's 1,024 (or no host
					    * memory) */
	uint64_t failed_frees;       /* free of a pointer whose allocation
				      * failed in the replay */
	uint64_t unmatched_frees;    /* free of a pointer never live */
	uint64_t duplicate_allocations; /* a live pointer allocated again */
	uint64_t trace_peak_allocated_bytes; /* from the trace itself:
					      * the most bytes its live
					      * allocations asked for,
					      * served or not */
	struct gm_replay_failure first_failure;
	uint64_t peak_allocated_bytes;
	uint64_t peak_reserved_bytes;
	double fragmentation;        /* at the first peak of reserved */
	double ns_per_op;            /* host time per allocate or free */
	uint64_t num_device_alloc;
	uint64_t num_device_free;
	uint64_t num_alloc_retries;
};

/*
 * Replay t through a fresh pool with options opt over backend be, one
 * event after the other in file order (RMM's REPLAY_BENCH keeps the
 * global order too). "segment" events are address hints for a
 * simulated backend (be->name "sim"; ignored otherwise). Runs twice: once timed, once to read the
 * fragmentation whenever reserved bytes reach a new peak (so the timing
 * excludes that reading). be must have room for the trace, or the
 * allocations that do not fit count as failed. Returns 0, GM_ENOMEM,
 * GM_EINVAL (options) with diag.
 */
int gm_replay(const struct gm_trace *t, struct gm_backend *be,
	      const struct gm_pool_options *opt, struct gm_replay_result *r,
	      struct gm_diag *diag);

/* One growth of reserved bytes during a replay: the pool took a new
 * segment (or mapped granules) to serve the allocation t->ev[event]. */
struct gm_replay_growth {
	size_t event;     /* index into t->ev (CSV data line event + 1) */
	uint64_t size;    /* the allocation's size, as asked */
	uint64_t bytes;   /* reserved bytes added */
	uint64_t reserved_bytes; /* reserved bytes after it */
};

/*
 * Replay t once, untimed, as gm_replay, and list every allocation that
 * grew reserved bytes, in order (for comparing segment creation with a
 * real allocator's trace, e.g. PyTorch's segment_alloc entries). *out
 * (free() it) gets *n entries. Returns 0, GM_ENOMEM, GM_EINVAL.
 */
int gm_replay_growths(const struct gm_trace *t, struct gm_backend *be,
		      const struct gm_pool_options *opt,
		      struct gm_replay_growth **out, size_t *n,
		      struct gm_diag *diag);

#endif
