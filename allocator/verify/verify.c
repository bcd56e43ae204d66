/*
 * verify.c - the test plan, the verdict and the report of gpumem verify
 * (verify.h). Backend-independent: the same code judges a real GPU, a
 * VMM-aliased fake and an emulated card.
 */
#include "verify.h"

#include "emit.h"
#include "error.h"
#include "units.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Tolerances of the report check (the nvidia-smi and
 * deviceQuery outputs models/gpus.yaml cites):
 * NVML's total matches the catalog within ~0.5% on R5xx+ drivers; CUDA's
 * total is NVML's minus the reserved part, 0.4-0.9% less on HBM parts. */
/* A lost tail shorter than this is a fault, not a missing capacity. */
#define GM_TAIL_MIN_BYTES (1ULL << 20)

const char *gm_verify_verdict_name(enum gm_verify_verdict v)
{
	switch (v) {
	case GM_VERDICT_OK: return "ok";
	case GM_VERDICT_UNDERSIZED: return "undersized";
	case GM_VERDICT_FAULTY: return "faulty";
	default: return "error";
	}
}

void gm_verify_note(struct gm_verify_result *r, const char *fmt, ...)
{
	va_list ap;

	if (r->nnotes >= GM_VERIFY_MAX_NOTES)
		return;
	va_start(ap, fmt);
	vsnprintf(r->notes[r->nnotes++], sizeof(r->notes[0]), fmt, ap);
	va_end(ap);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ==== The engine ==== */

/* One pass as the plan lists it. */
struct plan_step {
	const char *name;
	enum { OP_WRITE, OP_VERIFY, OP_WALK_WRITE, OP_WALK_VERIFY,
	       OP_SLEEP } op;
	int kind;
	int konst;      /* 0: 0, 1: ~0, 2: random, 3: ~random */
	int next_kind;  /* verify: write this pattern too (or GM_VP_NONE) */
	int next_konst;
};

static const struct plan_step quick_plan[] = {
	{"unique-write", OP_WRITE, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"unique-verify", OP_VERIFY, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
};

/* Walking ones first (cheap, names a missing address bit directly), then
 * unique values and their complement, then moving inversions with
 * ones/zeros and a random word (cuda_memtest tests 0, 1, 2, 4). */
static const struct plan_step full_plan[] = {
	{"walk-write", OP_WALK_WRITE, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"walk-verify", OP_WALK_VERIFY, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"unique-write", OP_WRITE, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"unique-verify", OP_VERIFY, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"complement-write", OP_WRITE, GM_VP_UNIQUE_INV, 0, GM_VP_NONE, 0},
	{"complement-verify", OP_VERIFY, GM_VP_UNIQUE_INV, 0, GM_VP_NONE, 0},
	{"zeros-write", OP_WRITE, GM_VP_CONST, 0, GM_VP_NONE, 0},
	{"zeros-verify-ones-write", OP_VERIFY, GM_VP_CONST, 0, GM_VP_CONST, 1},
	{"ones-verify", OP_VERIFY, GM_VP_CONST, 1, GM_VP_NONE, 0},
	{"random-write", OP_WRITE, GM_VP_CONST, 2, GM_VP_NONE, 0},
	{"random-verify-inverse-write", OP_VERIFY, GM_VP_CONST, 2,
	 GM_VP_CONST, 3},
	{"inverse-verify", OP_VERIFY, GM_VP_CONST, 3, GM_VP_NONE, 0},
};

static const struct plan_step fade_plan[] = {
	{"fade-write", OP_WRITE, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"fade-hold", OP_SLEEP, 0, 0, GM_VP_NONE, 0},
	{"fade-verify", OP_VERIFY, GM_VP_UNIQUE, 0, GM_VP_NONE, 0},
	{"fade-complement-write", OP_WRITE, GM_VP_UNIQUE_INV, 0, GM_VP_NONE,
	 0},
	{"fade-complement-hold", OP_SLEEP, 0, 0, GM_VP_NONE, 0},
	{"fade-complement-verify", OP_VERIFY, GM_VP_UNIQUE_INV, 0, GM_VP_NONE,
	 0},
};

static uint64_t konst_of(int which, uint64_t seed)
{
	uint64_t r = gm_vp_mix(seed + 1);

	switch (which) {
	case 1: return ~0ULL;
	case 2: return r;
	case 3: return ~r;
	default: return 0;
	}
}

/* A seed for this run: top bit set, so that decoding zeros (or all ones
 * under the complement) lands far outside any tested range. */
static uint64_t pick_seed(uint64_t seed, int device)
{
	if (!seed) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		seed = gm_vp_mix((uint64_t)ts.tv_sec * 1000000000ULL +
				 (uint64_t)ts.tv_nsec) ^
		       ((uint64_t)getpid() << 20) ^ (uint64_t)(device + 1);
	}
	return seed | 1ULL << 63;
}

/* Fold one verify pass's errors into the result. */
static void absorb(struct gm_verify_result *r, const struct gm_ve *e,
		   const char *pass)
{
	unsigned keep = e->nrec < GM_VE_RECORDS ? (unsigned)e->nrec
						: GM_VE_RECORDS;

	if (!e->bad)
		return;
	r->errors += e->bad;
	r->alias_errors += e->alias;
	r->flip_errors += e->flip;
	r->garbage_errors += e->garbage;
	if (e->first_bad * 8 < r->first_bad_offset)
		r->first_bad_offset = e->first_bad * 8;
	if (e->alias && (r->alias_stride_bytes == 0 ||
			 e->alias_min_dist * 8 < r->alias_stride_bytes))
		r->alias_stride_bytes = e->alias_min_dist * 8;
	r->alias_bits |= e->alias_xor << 3;
	r->flip_bits |= e->flip_bits;
	for (int b = 0; b < 64; b++)
		r->bit_hist[b] += e->bit_hist[b];
	for (unsigned i = 0; i < keep && r->nrec < GM_VE_RECORDS; i++) {
		r->rec[r->nrec] = e->rec[i];
		snprintf(r->rec_pass[r->nrec], sizeof(r->rec_pass[0]), "%s",
			 pass);
		r->nrec++;
	}
}

/* Run one step over all chunks; fills *pass, and *e for verify steps. */
static int run_step(const struct gm_vbackend *be, const struct gm_vchunk *c,
		    size_t n, const struct plan_step *s, uint64_t seed,
		    uint64_t total, const struct gm_verify_opts *o,
		    struct gm_verify_pass *pass, struct gm_ve *e,
		    struct gm_diag *d)
{
	uint64_t ws = s->op == OP_WALK_WRITE || s->op == OP_WALK_VERIFY
			      ? gm_vp_walk_seed(seed)
			      : seed;
	double t0;
	int rc;

	snprintf(pass->name, sizeof(pass->name), "%s", s->name);
	gm_ve_init(e);
	if (s->op == OP_SLEEP) {
		t0 = now_s();
		sleep(o->bit_fade_s);
		pass->seconds = now_s() - t0;
		return 0;
	}
	rc = be->begin(be->ctx, d);
	if (rc)
		return rc;
	t0 = now_s();
	for (size_t i = 0; i < n && !rc; i++) {
		switch (s->op) {
		case OP_WRITE:
			rc = be->write(be->ctx, &c[i], s->kind, seed,
				       konst_of(s->konst, seed), d);
			break;
		case OP_VERIFY:
			rc = be->verify(be->ctx, &c[i], s->kind, seed,
					konst_of(s->konst, seed), s->next_kind,
					konst_of(s->next_konst, seed), total,
					d);
			break;
		default:
			rc = be->walk(be->ctx, &c[i],
				      s->op == OP_WALK_VERIFY, ws, total, d);
		}
	}
	if (!rc)
		rc = be->sync(be->ctx, e, d);
	pass->seconds = now_s() - t0;
	if (s->op == OP_WALK_WRITE || s->op == OP_WALK_VERIFY)
		pass->bytes = 8 * (uint64_t)gm_vp_walk_count(total);
	else
		pass->bytes = total * 8 *
			      (s->op == OP_VERIFY && s->next_kind >= 0 ? 2 : 1);
	pass->bad = e->bad;
	return rc;
}

static int run_plan(const struct gm_vbackend *be, const struct gm_vchunk *c,
		    size_t n, const struct plan_step *plan, size_t steps,
		    const struct gm_verify_opts *o, struct gm_verify_result *r,
		    uint64_t total, struct gm_diag *d)
{
	struct gm_ve e;
	int rc;

	for (size_t i = 0; i < steps; i++) {
		struct gm_verify_pass *p;
		const struct plan_step *s = &plan[i];

		if (r->npasses >= GM_VERIFY_MAX_PASSES)
			break;
		p = &r->passes[r->npasses++];
		memset(p, 0, sizeof(*p));
		rc = run_step(be, c, n, s, r->seed, total, o, p, &e, d);
		if (rc)
			return rc;
		if (s->op == OP_VERIFY || s->op == OP_WALK_VERIFY)
			absorb(r, &e, s->name);
		/* The capacity evidence: a wrong tail in the unique pass
		 * (every word from first_bad on is wrong) is memory that is
		 * not there. */
		if (s->op == OP_VERIFY && s->kind == GM_VP_UNIQUE &&
		    e.bad && e.last_bad == total - 1 &&
		    e.bad == total - e.first_bad)
			r->lost_tail_bytes = e.bad * 8;
		if (s->op == OP_VERIFY && e.bad * 8 > r->worst_bad_bytes)
			r->worst_bad_bytes = e.bad * 8;
		if (o->progress)
			o->progress(o->progress_arg, r->device, s->name,
				    r->npasses, r->planned_passes);
	}
	return 0;
}

int gm_verify_run(const struct gm_vbackend *be, const struct gm_vchunk *c,
		  size_t n, const struct gm_verify_opts *o,
		  struct gm_verify_result *r, struct gm_diag *d)
{
	uint64_t total = 0;
	double secs = 0, moved = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		if (c[i].base != total || c[i].words % 2)
			return gm_diag_set(d, GM_EINVAL,
					   "verify: chunk %zu is misplaced", i);
		total += c[i].words;
	}
	r->tested_bytes = total * 8;
	r->seed = pick_seed(o->seed ? o->seed : r->seed, r->device);
	r->first_bad_offset = UINT64_MAX;
	r->planned_passes = o->level == GM_VERIFY_QUICK
				    ? 2
				    : (int)(sizeof(full_plan) /
					    sizeof(full_plan[0]));
	if (o->bit_fade_s)
		r->planned_passes += 6;
	if (total == 0)
		return gm_diag_set(d, GM_EDEVNOMEM,
				   "verify: no memory to test");
	if (o->level == GM_VERIFY_QUICK)
		rc = run_plan(be, c, n, quick_plan, 2, o, r, total, d);
	else
		rc = run_plan(be, c, n, full_plan,
			      sizeof(full_plan) / sizeof(full_plan[0]), o, r,
			      total, d);
	if (!rc && o->bit_fade_s)
		rc = run_plan(be, c, n, fade_plan, 6, o, r, total, d);
	if (rc)
		return rc;
	r->verified_bytes = r->tested_bytes - r->worst_bad_bytes;
	r->write_gbps = r->verify_gbps = 0;
	for (int i = 0; i < r->npasses; i++) {
		const struct gm_verify_pass *p = &r->passes[i];
		double g;

		if (strncmp(p->name, "walk", 4) == 0 ||
		    strstr(p->name, "hold") || p->seconds <= 0)
			continue;
		secs += p->seconds;
		moved += (double)p->bytes;
		g = (double)p->bytes / p->seconds / 1e9;
		if (strstr(p->name, "-write") && !strstr(p->name, "verify")) {
			if (r->write_gbps == 0 || g < r->write_gbps)
				r->write_gbps = g;
		} else if (!strstr(p->name, "-write")) {
			if (r->verify_gbps == 0 || g < r->verify_gbps)
				r->verify_gbps = g;
		}
	}
	r->seconds = secs;
	r->bandwidth_gbps = secs > 0 ? moved / secs / 1e9 : 0;
	return 0;
}

/* ==== The verdict ==== */

static void bits_text(char *buf, size_t len, uint64_t bits)
{
	size_t o = 0;

	buf[0] = '\0';
	for (int b = 0; b < 64 && o + 4 < len; b++)
		if (bits >> b & 1)
			o += snprintf(buf + o, len - o, "%s%d", o ? "," : "",
				      b);
}

/* Report vs claim; returns true when it makes the card undersized. */
static bool judge_report(struct gm_verify_result *r)
{
	const struct gm_verify_ident *id = &r->id;
	double tol = id->nvml ? GM_CLAIM_TOL_NVML : GM_CLAIM_TOL_CUDA;
	char a[32], b[32];

	if (!r->claimed_bytes || !r->reported_bytes)
		return false;
	if (r->claimed_min_bytes) {
		/* the catalog knows every genuine total (both ECC modes,
		 * old drivers, CUDA's) and its own tolerance */
		if (r->reported_bytes >= r->claimed_min_bytes)
			return false;
	} else if ((double)r->reported_bytes >=
		   r->claimed_bytes * (1.0 - tol)) {
		return false;
	}
	gm_size_format(a, sizeof(a), r->reported_bytes);
	gm_size_format(b, sizeof(b), r->claimed_bytes);
	if (id->mig == 1) {
		gm_verify_note(r, "MIG mode is on: the device reports %s "
				  "of its %s (not a fault)", a, b);
		return false;
	}
	if (id->ecc == 1 && id->gddr &&
	    (double)r->reported_bytes >=
		    r->claimed_bytes * 15.0 / 16.0 * (1.0 - tol)) {
		gm_verify_note(r, "ECC is on: GDDR memory gives 1/16 to ECC, "
				  "so %s of %s is expected", a, b);
		return false;
	}
	if (r->claimed_estimate) {
		gm_verify_note(r, "the driver reports %s; the catalog guesses "
				  "%s for this model (not seen on a real card)",
			       a, b);
		return false;
	}
	snprintf(r->reason, sizeof(r->reason),
		 "the driver reports %s but the card is sold as %s (%s)", a, b,
		 r->claimed_source);
	return true;
}

/*
 * Rules, in order:
 *  1. the check did not run -> error;
 *  2. aliasing seen -> undersized: writes to one offset land on another;
 *     real size = bytes that held their own values (verified_bytes);
 *  3. a lost tail in the unique pass (>= 1 MiB) -> undersized, real size
 *     = where the tail begins;
 *  4. any other wrong word -> faulty;
 *  5. NVML health (pending page retirement, failed row remap, >= 63
 *     retired pages: DCGM's limits,
 *     NVIDIA/DCGM nvvs/src/Software.cpp and
 *     common/DcgmGPUHardwareLimits.h) -> faulty;
 *  6. the driver reports less than claimed (beyond tolerance, not
 *     explained by MIG or ECC on GDDR) -> undersized;
 *  7. else ok.
 */
void gm_verify_judge(struct gm_verify_result *r)
{
	const struct gm_verify_ident *id = &r->id;
	char a[32], b[32], bits[200];

	if (r->err) {
		r->verdict = GM_VERDICT_ERROR;
		snprintf(r->reason, sizeof(r->reason), "%.500s", r->errmsg);
		return;
	}
	if (id->nvml && r->reported_bytes && id->cuda_total_bytes &&
	    (double)id->cuda_total_bytes <
		    (double)(id->nvml_total_bytes - id->nvml_reserved_bytes) *
			    0.99)
		gm_verify_note(r, "CUDA reports less than NVML's total minus "
				  "reserved: a layer (vGPU, HAMi, a memory "
				  "cap) sits between");
	if (r->alias_errors) {
		r->verdict = GM_VERDICT_UNDERSIZED;
		r->real_bytes = r->verified_bytes;
		gm_size_format(a, sizeof(a), r->real_bytes);
		gm_size_format(b, sizeof(b), r->alias_stride_bytes);
		bits_text(bits, sizeof(bits), r->alias_bits);
		snprintf(r->reason, sizeof(r->reason),
			 "addresses alias: writes land %s apart (address "
			 "bits %s); about %s is real", b, bits, a);
		return;
	}
	if (r->lost_tail_bytes >= GM_TAIL_MIN_BYTES) {
		r->verdict = GM_VERDICT_UNDERSIZED;
		r->real_bytes = r->tested_bytes - r->lost_tail_bytes;
		gm_size_format(a, sizeof(a), r->real_bytes);
		snprintf(r->reason, sizeof(r->reason),
			 "every write beyond %s is lost", a);
		return;
	}
	if (r->errors) {
		r->verdict = GM_VERDICT_FAULTY;
		bits_text(bits, sizeof(bits), r->flip_bits);
		snprintf(r->reason, sizeof(r->reason),
			 "%llu wrong read%s: %llu flipped bit%s (data bits "
			 "%s), %llu garbage; first at offset 0x%llx",
			 (unsigned long long)r->errors,
			 r->errors == 1 ? "" : "s",
			 (unsigned long long)r->flip_errors,
			 r->flip_errors == 1 ? "" : "s",
			 r->flip_errors ? bits : "-",
			 (unsigned long long)r->garbage_errors,
			 (unsigned long long)r->first_bad_offset);
		return;
	}
	if (id->retired_pending > 0 || id->remap_failed > 0 ||
	    id->retired_sbe + id->retired_dbe >= 63) {
		r->verdict = GM_VERDICT_FAULTY;
		snprintf(r->reason, sizeof(r->reason),
			 "NVML: retired pages %d+%d (pending %d), row remap "
			 "failure %d",
			 id->retired_sbe, id->retired_dbe, id->retired_pending,
			 id->remap_failed);
		return;
	}
	if (id->remap_pending > 0)
		gm_verify_note(r, "a row remap is pending: reset the GPU to "
				  "apply it");
	if (judge_report(r)) {
		r->verdict = GM_VERDICT_UNDERSIZED;
		return;
	}
	r->verdict = GM_VERDICT_OK;
	gm_size_format(a, sizeof(a), r->verified_bytes);
	snprintf(r->reason, sizeof(r->reason),
		 "%s written and read back without error in %d passes", a,
		 r->npasses);
}

int gm_verify_exit_code(const struct gm_verify_result *r, size_t n)
{
	int code = GM_EXIT_OK;

	for (size_t i = 0; i < n; i++) {
		if (r[i].verdict == GM_VERDICT_ERROR)
			return GM_EXIT_DEVICE;
		if (r[i].verdict != GM_VERDICT_OK)
			code = GM_EXIT_NO;
	}
	return code;
}

/* ==== The report ==== */

static void set_hex(struct gm_val *o, const char *key, uint64_t v)
{
	char buf[24];

	snprintf(buf, sizeof(buf), "0x%llx", (unsigned long long)v);
	gm_obj_set_str(o, key, buf);
}

static struct gm_val *bit_list(uint64_t bits)
{
	struct gm_val *a = gm_val_arr();

	for (int b = 0; b < 64 && a; b++)
		if (bits >> b & 1)
			gm_arr_push(a, gm_val_uint((uint64_t)b));
	return a;
}

static struct gm_val *tri(int v)
{
	return v < 0 ? gm_val_null() : gm_val_bool(v > 0);
}

static struct gm_val *count(int v)
{
	return v < 0 ? gm_val_null() : gm_val_uint((uint64_t)v);
}

static struct gm_val *nvml_obj(const struct gm_verify_ident *id)
{
	struct gm_val *o = gm_val_obj();

	gm_obj_set_bool(o, "present", id->nvml);
	if (!id->nvml) {
		gm_obj_set_str(o, "error", id->nvml_error);
		return o;
	}
	gm_obj_set_uint(o, "total_bytes", id->nvml_total_bytes);
	gm_obj_set_uint(o, "reserved_bytes", id->nvml_reserved_bytes);
	gm_obj_set(o, "ecc", tri(id->ecc));
	gm_obj_set(o, "mig", tri(id->mig));
	gm_obj_set(o, "retired_pages_sbe", count(id->retired_sbe));
	gm_obj_set(o, "retired_pages_dbe", count(id->retired_dbe));
	gm_obj_set(o, "retired_pages_pending", tri(id->retired_pending));
	gm_obj_set(o, "remapped_rows_correctable", count(id->remap_corrected));
	gm_obj_set(o, "remapped_rows_uncorrectable",
		   count(id->remap_uncorrected));
	gm_obj_set(o, "remapped_rows_pending", tri(id->remap_pending));
	gm_obj_set(o, "remapped_rows_failure", tri(id->remap_failed));
	return o;
}

static struct gm_val *device_obj(const struct gm_verify_result *r, bool flat,
				 bool reason)
{
	const struct gm_verify_ident *id = &r->id;
	struct gm_val *o = gm_val_obj();
	struct gm_val *a;

	gm_obj_set_int(o, "device", r->device);
	gm_obj_set_str(o, "name", id->name);
	gm_obj_set_uint(o, "claimed_bytes", r->claimed_bytes);
	gm_obj_set_uint(o, "reported_bytes", r->reported_bytes);
	gm_obj_set_uint(o, "verified_bytes", r->verified_bytes);
	gm_obj_set_uint(o, "errors", r->errors);
	gm_obj_set_str(o, "verdict", gm_verify_verdict_name(r->verdict));
	gm_obj_set_real(o, "bandwidth_gbps", r->bandwidth_gbps);
	if (flat) {
		gm_obj_set_uint(o, "tested_bytes", r->tested_bytes);
		/* 0: no estimate (JSON leaves the key out): the table's "-",
		 * CSV's empty cell */
		if (r->real_bytes)
			gm_obj_set_uint(o, "real_bytes", r->real_bytes);
		else
			gm_obj_set(o, "real_bytes", gm_val_null());
		if (reason)
			gm_obj_set_str(o, "reason", r->reason);
		return o;
	}
	gm_obj_set_str(o, "reason", r->reason);
	gm_obj_set_str(o, "kind", r->kind);
	gm_obj_set_str(o, "bus_id", id->bus_id);
	if (id->pci_device_id)
		set_hex(o, "pci_device_id", id->pci_device_id);
	if (id->pci_subsystem_id)
		set_hex(o, "pci_subsystem_id", id->pci_subsystem_id);
	gm_obj_set_str(o, "claimed_source", r->claimed_source);
	if (r->catalog_name[0])
		gm_obj_set_str(o, "catalog_name", r->catalog_name);
	if (r->claimed_min_bytes)
		gm_obj_set_uint(o, "claimed_min_bytes", r->claimed_min_bytes);
	gm_obj_set_uint(o, "cuda_total_bytes", id->cuda_total_bytes);
	gm_obj_set_uint(o, "free_bytes", r->free_bytes);
	gm_obj_set_uint(o, "allocated_bytes", r->allocated_bytes);
	gm_obj_set_uint(o, "unallocated_bytes", r->unallocated_bytes);
	gm_obj_set_uint(o, "chunks", r->chunks);
	gm_obj_set_uint(o, "tested_bytes", r->tested_bytes);
	if (r->real_bytes)
		gm_obj_set_uint(o, "real_bytes", r->real_bytes);
	if (r->emulate_scale > 1)
		gm_obj_set_uint(o, "emulate_scale", r->emulate_scale);
	gm_obj_set_uint(o, "alias_errors", r->alias_errors);
	gm_obj_set_uint(o, "flipped_bit_errors", r->flip_errors);
	gm_obj_set_uint(o, "garbage_errors", r->garbage_errors);
	if (r->errors)
		set_hex(o, "first_bad_offset", r->first_bad_offset);
	if (r->alias_errors) {
		gm_obj_set_uint(o, "alias_stride_bytes", r->alias_stride_bytes);
		gm_obj_set(o, "aliased_address_bits", bit_list(r->alias_bits));
	}
	if (r->flip_errors) {
		gm_obj_set(o, "flipped_bits", bit_list(r->flip_bits));
	}
	gm_obj_set_real(o, "write_gbps", r->write_gbps);
	gm_obj_set_real(o, "verify_gbps", r->verify_gbps);
	gm_obj_set_real(o, "seconds", r->seconds);
	if (r->wall_seconds > 0)
		gm_obj_set_real(o, "wall_seconds", r->wall_seconds);
	set_hex(o, "seed", r->seed);
	if (id->driver_version[0])
		gm_obj_set_str(o, "driver_version", id->driver_version);
	if (id->driver_cuda_version)
		gm_obj_set_int(o, "cuda_driver_version",
			       id->driver_cuda_version);
	if (id->cc_major) {
		char cc[16];

		snprintf(cc, sizeof(cc), "%d.%d", id->cc_major, id->cc_minor);
		gm_obj_set_str(o, "compute_capability", cc);
	}
	gm_obj_set(o, "nvml", nvml_obj(id));
	a = gm_val_arr();
	for (int i = 0; i < r->nnotes; i++)
		gm_arr_push(a, gm_val_str(r->notes[i]));
	gm_obj_set(o, "notes", a);
	a = gm_val_arr();
	for (int i = 0; i < r->npasses; i++) {
		const struct gm_verify_pass *p = &r->passes[i];
		struct gm_val *po = gm_val_obj();

		gm_obj_set_str(po, "name", p->name);
		gm_obj_set_uint(po, "moved_bytes", p->bytes);
		gm_obj_set_real(po, "seconds", p->seconds);
		gm_obj_set_real(po, "gbps", p->seconds > 0
			? (double)p->bytes / p->seconds / 1e9 : 0);
		gm_obj_set_uint(po, "errors", p->bad);
		gm_arr_push(a, po);
	}
	gm_obj_set(o, "passes", a);
	a = gm_val_arr();
	for (unsigned i = 0; i < r->nrec; i++) {
		struct gm_val *ro = gm_val_obj();

		gm_obj_set_str(ro, "pass", r->rec_pass[i]);
		set_hex(ro, "offset", r->rec[i].index * 8);
		set_hex(ro, "expected", r->rec[i].expected);
		set_hex(ro, "actual", r->rec[i].actual);
		gm_arr_push(a, ro);
	}
	gm_obj_set(o, "error_records", a);
	return o;
}

struct gm_val *gm_verify_report(const struct gm_verify_result *r, size_t n,
				const char *host)
{
	struct gm_val *root = gm_val_obj();
	struct gm_val *devs = gm_val_arr();

	gm_obj_set_str(root, "kind", "gpumem-verify");
	gm_obj_set_str(root, "host", host);
	for (size_t i = 0; i < n; i++)
		gm_arr_push(devs, device_obj(&r[i], false, true));
	gm_obj_set(root, "devices", devs);
	return root;
}

struct gm_val *gm_verify_summary(const struct gm_verify_result *r, size_t n,
				 bool reason)
{
	struct gm_val *rows = gm_val_arr();

	for (size_t i = 0; i < n; i++)
		gm_arr_push(rows, device_obj(&r[i], true, reason));
	return rows;
}
