/*
 * trace_torch.h - PyTorch memory-history lines for the trace reader
 * (trace_torch.c; the format is described in trace.h). Internal to
 * trace.c.
 */
#ifndef GM_TRACE_TORCH_H
#define GM_TRACE_TORCH_H

#include <stdbool.h>
#include <stddef.h>

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

/* One entry line [action, address, size, stream, frames]; sets
 * *segment_free for "segment_free" / "segment_unmap". */
int gm__trace_torch_entry(struct gm_trace *t, const char *text, size_t len,
			  const char *name, unsigned long line,
			  bool *segment_free, struct gm_diag *diag);

#endif
