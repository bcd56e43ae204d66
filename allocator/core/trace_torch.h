/*
 * trace_torch.h - PyTorch memory-history lines for the trace reader
 * (trace_torch.c; the format is described in trace.h). Internal to
 * trace.c.
 */
#ifndef GM_TRACE_TORCH_H
#define GM_TRACE_TORCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct gm_diag;
struct gm_trace;
struct gm_trace_event;

/* Append e to t, stamped with line; GM_EINVAL past the bound on events,
 * GM_ENOMEM (trace.c). */
int gm__trace_push(struct gm_trace *t, const struct gm_trace_event *e,
		   const char *name, unsigned long line, struct gm_diag *diag);

/* The first line, a JSON object: its "initial" blocks become
 * allocations. 0, GM_EINVAL ("name:line:column: ..."), GM_ENOMEM. */
int gm__trace_torch_header(struct gm_trace *t, const char *text, size_t len,
			   const char *name, unsigned long line,
			   struct gm_diag *diag);

/*
 * Entry lines [action, address, size, stream, frames], gathered into one
 * YAML stream of documents ("--- LINE") and parsed by one parser per
 * batch (a parser per line costs more than the replay). *segment_free is
 * set for "segment_free" / "segment_unmap".
 */
struct gm__torch_batch {
	char *text;
	size_t len, cap;
	uint32_t *line; /* file line of each document */
	size_t n, lcap;
	bool segment_free;
};

/* Add one entry line (parsed at the next flush, or now when the batch
 * is full). 0, GM_EINVAL ("name:line:column: ..."), GM_ENOMEM. */
int gm__trace_torch_entry(struct gm__torch_batch *b, struct gm_trace *t,
			  const char *text, size_t len, const char *name,
			  unsigned long line, struct gm_diag *diag);

/* Parse the lines gathered; the batch is then empty. */
int gm__trace_torch_flush(struct gm__torch_batch *b, struct gm_trace *t,
			  const char *name, struct gm_diag *diag);

void gm__trace_torch_batch_free(struct gm__torch_batch *b);

#endif
