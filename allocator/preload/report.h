/*
 * report.h - the preload library's reports (report.c).
 *
 * A JSON report (GPUMEM_REPORT) written at exit and on SIGUSR1, built
 * with the output layer (emit.h), and a Prometheus text file
 * (GPUMEM_PROMETHEUS) rewritten by a background thread about once a
 * second while something changed. Both files are replaced atomically.
 * Writing happens on that thread or at exit, never inside a hook or a
 * signal handler (the SIGUSR1 handler only wakes the thread).
 * Processes that never asked for device memory write nothing (merely
 * querying devices does not count), so launchers, shells and helpers do
 * not overwrite a rank's report; only devices allocated on are listed.
 * Errors: the writers return 0 or GM_EIO / GM_ENOMEM and say why on
 * stderr (at warn level).
 */
#ifndef GM_PL_REPORT_H
#define GM_PL_REPORT_H

#include <stdio.h>

struct gm_val;

/* The report tree; reason: "exit", "signal" or "request". */
struct gm_val *gm_pl_report_build(const char *reason);

/* Write the JSON report to GPUMEM_REPORT (expanded); 0 when unset. */
int gm_pl_report_write(const char *reason);

/* Print the Prometheus text format to out. */
void gm_pl_prom_print(FILE *out);

/* Rewrite GPUMEM_PROMETHEUS (expanded); 0 when unset. */
int gm_pl_prom_write(void);

/* Start the reporting thread and the SIGUSR1 handler, once. */
void gm_pl_reporter_start(void);

/* At exit: stop the thread, write the final files. */
void gm_pl_reporter_exit(void);

/* In a fork child: the thread is gone; forget it. */
void gm_pl_reporter_child(void);

#endif
