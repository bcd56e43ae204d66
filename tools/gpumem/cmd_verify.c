/*
 * cmd_verify.c - gpumem verify: parse the options, run the verifier
 * (allocator/verify), print the report. No logic of its own.
 */
#include "cmd.h"

#include "cu.h"
#include "emit.h"
#include "error.h"
#include "nvml.h"
#include "units.h"
#include "verify.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define GM_VERIFY_MAX_DEVICES 64

static void help(FILE *out)
{
	fprintf(out,
		"Usage: gpumem verify [OPTIONS]\n\n"
		"Check each card's real capacity and health: what it claims "
		"(--claimed or the\nGPU catalog), what the driver reports "
		"(CUDA, NVML), then write and read back\nevery byte that can "
		"be allocated with values unique to each address.\n\n"
		"Options:\n"
		"  --device N|all|N,M,...  devices to test, concurrently "
		"(default: all)\n"
		"  --claimed SIZE          capacity the card is sold as "
		"(80GB, 141GB, 80GiB;\n"
		"                          GB here is the maker's: 80GB = "
		"80GiB)\n"
		"  --quick                 2 passes: write a value unique to "
		"each address,\n"
		"                          then read every one back (capacity;\n"
		"                          about half of stuck bits: --full finds all)\n"
		"  --full                  + complement, walking ones, moving "
		"inversions (default)\n"
		"  --bit-fade SECONDS      also hold a pattern this long, then "
		"check it (and its\n"
		"                          complement)\n"
		"  --limit SIZE            test at most SIZE per device\n"
		"  --seed N                pattern seed, 0 to 2^64-1 (0 or "
		"none: random; the\n"
		"                          top bit is always set)\n"
		"  --format FORMAT         table (default), json, yaml or csv\n"
		"  --output FILE           also write the JSON report to FILE "
		"(%%h = host name)\n"
		"  --no-progress           no progress bar on stderr\n"
		"  --emulate SPEC          test an emulated card in host "
		"memory instead:\n"
		"      claimed=SIZE,real=SIZE[,mode=wrap|drop|garbage]"
		"[,bad_bits=N]\n"
		"      [,reported=SIZE][,name=TEXT][,nvml=0|1][,ecc=0|1]"
		"[,gddr=0|1][,mig=0|1]\n"
		"                          (cards above 512 MiB run at a "
		"stated scale, e.g. 1/256;\n"
		"                          every SIZE is a card's: GB = GiB, "
		"as for --claimed)\n"
		"  --emulate-vmm claimed=SIZE,real=SIZE\n"
		"                          a real fake on the GPU of --device: "
		"real bytes mapped\n"
		"                          again and again over claimed bytes "
		"of addresses\n"
		"                          (multiples of the allocation "
		"granularity, 2 MiB)\n"
		"  -h, --help              this help\n\n"
		"Verdicts: ok, undersized (aliasing, lost writes, or the driver "
		"reports less than\nclaimed), faulty (flipped bits, garbage, "
		"NVML health).\n"
		"Exit codes: 0 all ok, 1 a card is undersized or faulty, 2 bad "
		"usage, 3 driver error.\n"
		"--output is opened before the test (a bad path fails at "
		"once); if writing it\nfails at the end, a failed card's 1 "
		"still wins over 2.\n");
}

/* ==== Progress bar (stderr, only on a terminal) ==== */

struct progress {
	pthread_mutex_t lock;
	int ndev;
	int done[GM_VERIFY_MAX_DEVICES];
	int total[GM_VERIFY_MAX_DEVICES];
};

static void on_progress(void *arg, int device, const char *pass, int done,
			int total)
{
	struct progress *p = arg;
	int sum = 0, all = 0, slot = device < 0 ? 0 : device;
	char bar[41];

	pthread_mutex_lock(&p->lock);
	if (slot < GM_VERIFY_MAX_DEVICES) {
		p->done[slot] = done;
		p->total[slot] = total;
	}
	for (int i = 0; i < GM_VERIFY_MAX_DEVICES; i++) {
		sum += p->done[i];
		all += p->total[i];
	}
	for (int i = 0; i < 40; i++)
		bar[i] = all && i < 40 * sum / all ? '#' : '.';
	bar[40] = '\0';
	fprintf(stderr, "\rverify [%s] %3d%%  %-28s", bar,
		all ? 100 * sum / all : 0, pass);
	pthread_mutex_unlock(&p->lock);
}

/* ==== Options ==== */

struct args {
	struct gm_verify_opts o;
	int devs[GM_VERIFY_MAX_DEVICES];
	int ndevs; /* 0 = all */
	enum gm_format format;
	const char *output;
	const char *emulate;
	const char *vmm;
	bool no_progress;
	bool device_given;
};

static int parse_devices(const char *text, struct args *a)
{
	char buf[256], *save = NULL, *tok;

	if (strcmp(text, "all") == 0) {
		a->ndevs = 0;
		return 0;
	}
	if (strlen(text) >= sizeof(buf) || !*text || text[0] == ',' ||
	    text[strlen(text) - 1] == ',' || strstr(text, ",,"))
		return GM_EINVAL;
	strcpy(buf, text);
	a->ndevs = 0;
	for (tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		char *end;
		long v = strtol(tok, &end, 10);

		if (*end || end == tok || v < 0 || v > 1023 ||
		    a->ndevs >= GM_VERIFY_MAX_DEVICES)
			return GM_EINVAL;
		a->devs[a->ndevs++] = (int)v;
	}
	return a->ndevs ? 0 : GM_EINVAL;
}

/* Returns -1 to go on, or an exit code. */
static int parse_args(int argc, char **argv, struct args *a)
{
	enum { O_CLAIMED = 256, O_QUICK, O_FULL, O_FORMAT, O_EMULATE,
	       O_VMM, O_LIMIT, O_SEED, O_FADE, O_OUTPUT, O_NOPROG, O_DEVICE };
	static const struct option opts[] = {
		{"device", required_argument, NULL, O_DEVICE},
		{"claimed", required_argument, NULL, O_CLAIMED},
		{"quick", no_argument, NULL, O_QUICK},
		{"full", no_argument, NULL, O_FULL},
		{"format", required_argument, NULL, O_FORMAT},
		{"emulate", required_argument, NULL, O_EMULATE},
		{"emulate-vmm", required_argument, NULL, O_VMM},
		{"limit", required_argument, NULL, O_LIMIT},
		{"seed", required_argument, NULL, O_SEED},
		{"bit-fade", required_argument, NULL, O_FADE},
		{"output", required_argument, NULL, O_OUTPUT},
		{"no-progress", no_argument, NULL, O_NOPROG},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	struct gm_diag d = {{0}};
	bool quick = false, full = false;
	uint64_t seen = 0;
	char *end;
	int c;

	opterr = 0;
	optind = 1;
	while ((c = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		if (gm_cmd_once("verify", &seen, c, opts, NULL))
			return GM_EXIT_USAGE;
		switch (c) {
		case 'h':
			help(stdout);
			return GM_EXIT_OK;
		case O_DEVICE:
			a->device_given = true;
			if (parse_devices(optarg, a))
				return gm_cmd_usage_error("verify",
					"--device: '%s' is not N, N,M,... or "
					"all", optarg);
			break;
		case O_CLAIMED:
			if (gm_claimed_size_parse(optarg, &a->o.claimed_bytes) ||
			    !a->o.claimed_bytes) {
				char why[256];

				gm_size_error(optarg, why, sizeof(why));
				return gm_cmd_usage_error("verify",
					"--claimed: '%s' is not a size such as "
					"80GB or 80GiB: %s", optarg, why);
			}
			if (gm_size_bare_small(optarg))
				return gm_cmd_usage_error("verify",
					"--claimed: '%s' has no unit (a card's "
					"capacity: write e.g. %sGB or %sGiB)",
					optarg, optarg, optarg);
			break;
		case O_QUICK:
			quick = true;
			break;
		case O_FULL:
			full = true;
			break;
		case O_FORMAT:
			if (gm_format_parse(optarg, &a->format, &d))
				return gm_cmd_usage_error("verify", "%s",
							  d.msg);
			break;
		case O_EMULATE:
			a->emulate = optarg;
			break;
		case O_VMM:
			a->vmm = optarg;
			break;
		case O_LIMIT:
			if (gm_size_parse(optarg, &a->o.max_bytes))
				return gm_cmd_size_error("verify", "--limit",
							 optarg);
			if (a->o.max_bytes < 16)
				return gm_cmd_usage_error("verify",
					"--limit: '%s' is below 16 bytes",
					optarg);
			break;
		case O_SEED:
			errno = 0;
			a->o.seed = strtoull(optarg, &end, 0);
			if (*end || end == optarg || optarg[0] == '-' ||
			    errno == ERANGE)
				return gm_cmd_usage_error("verify",
					"--seed: '%s' is not a number from 0 "
					"to 2^64-1", 
					optarg);
			break;
		case O_FADE: {
			long v = strtol(optarg, &end, 10);

			if (*end || end == optarg || v < 1 || v > 86400)
				return gm_cmd_usage_error("verify",
					"--bit-fade: '%s' is not seconds from "
					"1 to 86400", optarg);
			a->o.bit_fade_s = (unsigned)v;
			break;
		}
		case O_OUTPUT:
			if (!*optarg)
				return gm_cmd_usage_error("verify",
					"--output: empty file name");
			a->output = optarg;
			break;
		case O_NOPROG:
			a->no_progress = true;
			break;
		case ':':
		default:
			return gm_cmd_option_error("verify", c, argv, opts);
		}
	}
	if (optind < argc)
		return gm_cmd_usage_error("verify", "unexpected argument '%s'",
					  argv[optind]);
	if (quick && full)
		return gm_cmd_usage_error("verify",
			"--quick and --full exclude each other");
	if (a->emulate && a->vmm)
		return gm_cmd_usage_error("verify",
			"--emulate and --emulate-vmm exclude each other");
	if (a->emulate && a->device_given)
		return gm_cmd_usage_error("verify",
			"--device and --emulate exclude each other (the "
			"emulated card is in host memory)");
	if (a->vmm && a->ndevs > 1)
		return gm_cmd_usage_error("verify",
			"--emulate-vmm takes one --device");
	a->o.level = quick ? GM_VERIFY_QUICK : GM_VERIFY_FULL;
	return -1;
}

/* --output FILE with %h replaced by the host name: open it (before the
 * test, so that a bad path fails at once). */
static int open_output(const char *pattern, const char *host,
		       struct gm_file *f, struct gm_diag *d)
{
	char path[4096];
	size_t o = 0;

	for (const char *p = pattern; *p && o + 1 < sizeof(path); p++) {
		if (p[0] == '%' && p[1] == 'h') {
			o += snprintf(path + o, sizeof(path) - o, "%s", host);
			p++;
		} else {
			path[o++] = *p;
		}
	}
	path[o < sizeof(path) ? o : sizeof(path) - 1] = '\0';
	return gm_file_begin(f, path, d);
}

static void print_table(const struct gm_verify_result *r, size_t n)
{
	struct gm_val *rows = gm_verify_summary(r, n, false);

	gm_emit_sized(stdout, rows, GM_FORMAT_TABLE);
	gm_val_free(rows);
	for (size_t i = 0; i < n; i++) {
		printf("\n%s %s: %s: %s\n",
		       r[i].device >= 0 ? "device" : "emulated", r[i].id.name,
		       gm_verify_verdict_name(r[i].verdict), r[i].reason);
		if (!r[i].id.nvml && r[i].verdict != GM_VERDICT_ERROR)
			printf("  note: %s\n", r[i].id.nvml_error);
		for (int k = 0; k < r[i].nnotes; k++)
			printf("  note: %s\n", r[i].notes[k]);
	}
}

static int run_devices(struct args *a, struct gm_verify_result **out,
		       size_t *nout, struct gm_diag *d)
{
	struct gm_cu cu;
	int count = 0, rc;
	size_t n;

	rc = gm_cu_open(&cu, NULL, d);
	if (!rc)
		rc = gm_verify_device_count(&cu, &count, d);
	if (rc)
		goto out;
	if (a->ndevs == 0) {
		a->ndevs = count < GM_VERIFY_MAX_DEVICES
				   ? count : GM_VERIFY_MAX_DEVICES;
		for (int i = 0; i < a->ndevs; i++)
			a->devs[i] = i;
	}
	n = a->vmm ? 1 : (size_t)a->ndevs;
	*out = calloc(n, sizeof(**out));
	if (!*out) {
		rc = gm_diag_set(d, GM_ENOMEM, "out of host memory");
		goto out;
	}
	*nout = n;
	if (a->vmm) {
		uint64_t claimed, real;

		rc = gm_verify_vmm_parse(a->vmm, &claimed, &real, d);
		if (!rc)
			rc = gm_verify_vmm_fake(&cu, a->devs[0], claimed, real,
						&a->o, *out, d);
	} else {
		rc = gm_verify_devices(&cu, a->devs, n, &a->o, *out, d);
	}
out:
	gm_cu_close(&cu);
	return rc;
}

/* nvml.error of a record with no device: the loader's reason when NVML
 * cannot be opened, else that it was not read. */
static void nvml_reason(struct gm_verify_ident *id)
{
	struct gm_nvml nvml;
	struct gm_diag nd = {{0}};

	if (gm_nvml_open(&nvml, NULL, &nd)) {
		snprintf(id->nvml_error, sizeof(id->nvml_error), "%.500s",
			 nd.msg);
		return;
	}
	gm_nvml_close(&nvml);
	snprintf(id->nvml_error, sizeof(id->nvml_error),
		 "NVML loaded, not read: no device was checked");
}

/*
 * The check could not run at all (no driver, no device): the report
 * still says so, as one device -1 with verdict "error" and the message
 * (so that a sweep over many nodes does not lose this one), in --output
 * and on stdout for --format json / yaml. Returns GM_EXIT_DEVICE.
 */
static int error_record(const struct args *a, struct gm_file *out,
			const char *host, int err, const char *msg)
{
	struct gm_verify_result r;
	struct gm_val *report;
	struct gm_diag d;
	int erc;

	memset(&r, 0, sizeof(r));
	r.device = -1;
	snprintf(r.kind, sizeof(r.kind), "gpu");
	r.first_bad_offset = UINT64_MAX;
	r.claimed_bytes = a->o.claimed_bytes;
	r.err = err;
	snprintf(r.errmsg, sizeof(r.errmsg), "%s", msg);
	nvml_reason(&r.id);
	gm_verify_judge(&r);
	report = gm_verify_report(&r, 1, host);
	if (a->format == GM_FORMAT_JSON || a->format == GM_FORMAT_YAML)
		gm_emit_sized(stdout, report, a->format);
	if (out->fp) {
		erc = report ? gm_emit(out->fp, report, GM_FORMAT_JSON) :
		      GM_ENOMEM;
		if (gm_file_end(out, erc == 0, &d) || erc)
			fprintf(stderr, "gpumem verify: %.900s: cannot write "
				"the report\n", out->path);
	}
	gm_val_free(report);
	return GM_EXIT_DEVICE;
}

int gm_cmd_verify(int argc, char **argv)
{
	struct args a = {.format = GM_FORMAT_TABLE};
	struct progress prog = {.lock = PTHREAD_MUTEX_INITIALIZER};
	struct gm_verify_result *res = NULL;
	struct gm_diag d = {{0}};
	struct gm_val *report = NULL;
	struct gm_file out = {0};
	char host[256] = "localhost";
	size_t n = 0;
	int rc, code;

	rc = parse_args(argc, argv, &a);
	if (rc >= 0)
		return rc;
	gethostname(host, sizeof(host) - 1);
	if (a.output && open_output(a.output, host, &out, &d)) {
		fprintf(stderr, "gpumem verify: --output: %s\n", d.msg);
		return GM_EXIT_USAGE;
	}
	if (!a.no_progress && isatty(STDERR_FILENO)) {
		a.o.progress = on_progress;
		a.o.progress_arg = &prog;
	}
	if (a.emulate) {
		struct gm_verify_emu emu;

		rc = gm_verify_emu_parse(a.emulate, &emu, &d);
		if (rc) {
			gm_file_end(&out, false, &d);
			return gm_cmd_usage_error("verify", "%s", d.msg);
		}
		res = calloc(1, sizeof(*res));
		n = 1;
		rc = res ? gm_verify_emulated(&emu, &a.o, res, &d)
			 : gm_diag_set(&d, GM_ENOMEM, "out of host memory");
	} else {
		rc = run_devices(&a, &res, &n, &d);
	}
	if (a.o.progress)
		fprintf(stderr, "\r%80s\r", "");
	if (rc) {
		fprintf(stderr, "gpumem verify: %s\n", d.msg);
		free(res);
		if (rc == GM_EINVAL) {
			gm_file_end(&out, false, &d);
			return GM_EXIT_USAGE;
		}
		return error_record(&a, &out, host, rc, d.msg);
	}
	report = gm_verify_report(res, n, host);
	if (a.format == GM_FORMAT_TABLE)
		print_table(res, n);
	else if (a.format == GM_FORMAT_CSV) {
		struct gm_val *rows = gm_verify_summary(res, n, true);

		gm_emit(stdout, rows, GM_FORMAT_CSV);
		gm_val_free(rows);
	} else
		gm_emit(stdout, report, a.format);
	code = gm_verify_exit_code(res, n);
	if (out.fp) {
		int erc = gm_emit(out.fp, report, GM_FORMAT_JSON);

		if (gm_file_end(&out, erc == 0, &d) || erc) {
			if (erc)
				snprintf(d.msg, sizeof(d.msg), "%.900s: cannot "
					 "write the report", out.path);
			fprintf(stderr, "gpumem verify: %s\n", d.msg);
			/* A failed card (1) is the more important answer. */
			if (code == GM_EXIT_OK)
				code = GM_EXIT_USAGE;
		}
	}
	gm_val_free(report);
	free(res);
	return code;
}
