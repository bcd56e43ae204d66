"""calib - compare `gpumem plan` with committed measurements.

Shared by check_calibration.py (the CI check) and error_table.py (the
error tables of tests/data/calibration/README.md). Standard library only: runs wherever the planner builds.

The bounds, for every configuration measured "ok":
  err(x) = (predicted x - measured x) / measured x
  1. |err| <= 5% for peak_reserved_bytes and for device_used_bytes;
  2. the median of |err| <= 2%, per metric, over the tuning set and over
     the held-out set separately;
  3. fits at every catalog capacity: with M the measured and P the
     predicted device_used_bytes and C each catalog GPU's
     usable_bytes (what a process can get: CUDA's total, the bound of the
     plan's own verdict; gpu_capacity_bytes in plans without it), (M <= C) == (P <= C) unless C lies in the band
     |C - M| <= 2% of M (the same side of every capacity, except where
     the capacity is closer to the measurement than the median target);
     and the planner's own `fits` on the measured GPU is true.
For a configuration measured "oom" (it did not fit the measured GPU, whose
usable total is T = environment.gpu_total_bytes): the planner's `fits` on
that GPU is false and P >= 98% of T.
"""

import json
import os
import statistics
import subprocess

BOUND = 0.05
MEDIAN_BOUND = 0.02
BAND = 0.02
METRICS = ("peak_reserved_bytes", "device_used_bytes")


class PlanError(Exception):
    pass


# Extra arguments for every `gpumem plan` (error_table.py --reserve-model)
PLAN_ARGS = []


def plan(gpumem, spec, sets=(), gpu=None):
    cmd = [gpumem, "plan", spec, "--format", "json"] + PLAN_ARGS
    for s in sets:
        cmd += ["--set", s]
    if gpu:
        cmd += ["--gpu", gpu]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise PlanError(f"{' '.join(cmd)}: exit {r.returncode}: "
                        f"{r.stderr.strip()[:300]}")
    try:
        return json.loads(r.stdout)
    except json.JSONDecodeError as e:
        raise PlanError(f"{' '.join(cmd)}: not JSON ({e})") from None


def catalog_names(gpumem):
    """Names of the catalog's GPUs from `gpumem gpus --format json`
    (a list of objects with "name", or an object holding such a list)."""
    r = subprocess.run([gpumem, "gpus", "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise PlanError(f"gpumem gpus: exit {r.returncode}: "
                        f"{r.stderr.strip()[:300]}")
    doc = json.loads(r.stdout)
    if isinstance(doc, dict):
        lists = [v for v in doc.values() if isinstance(v, list)]
        doc = lists[0] if lists else []
    return [g["name"] for g in doc if isinstance(g, dict) and "name" in g]


def heldout_rule(name):
    import hashlib
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 3 == 0


def load_manifest(path):
    with open(path) as f:
        man = json.load(f)
    return {c["name"]: c for c in man["configs"]}


def compare(gpumem, manifest_path, measured_path):
    """Returns (rows, problems, env): one row per measured configuration,
    a list of bound violations (strings), the measurement environment."""
    with open(measured_path) as f:
        meas = json.load(f)
    env = meas.get("environment", {})
    gpu = env.get("gpu_name")
    man = load_manifest(manifest_path)
    base = os.path.dirname(os.path.abspath(manifest_path))
    problems = []
    for name, c in man.items():
        if c.get("heldout") != heldout_rule(name):
            problems.append(f"{name}: manifest heldout flag differs from "
                            "the rule")
    capacities = {}
    try:
        names = catalog_names(gpumem)
    except (PlanError, json.JSONDecodeError) as e:
        problems.append(str(e))
        names = []
    rows = []
    for rec in meas["configs"]:
        name = rec["name"]
        row = {"name": name, "status": rec["status"],
               "message": rec.get("message")}
        rows.append(row)
        if name not in man:
            problems.append(f"{name}: measured but not in the manifest")
            continue
        c = man[name]
        row["heldout"] = c["heldout"]
        if rec["status"] not in ("ok", "oom"):
            continue
        spec = os.path.join(base, c["spec"])
        try:
            p = plan(gpumem, spec, c.get("set", []), gpu)
        except PlanError as e:
            problems.append(f"{name}: {e}")
            row["status"] = "plan-failed"
            continue
        per = p.get("per_gpu", {})
        row["predicted"] = {k: per.get(k) for k in
                            METRICS + ("peak_allocated_bytes",)}
        row["fits"] = p.get("fits")
        pu = per.get("device_used_bytes")
        if rec["status"] == "oom":
            total = env.get("gpu_total_bytes", 0)
            if p.get("fits") is not False or pu is None or \
                    pu < (1 - BAND) * total:
                problems.append(f"{name}: did not fit the {gpu} "
                                f"(out of memory) but the plan says fits="
                                f"{p.get('fits')}, device_used {pu}")
            continue
        row["measured"] = {k: rec.get(k) for k in
                           METRICS + ("peak_allocated_bytes",)}
        row["err"] = {}
        for k in METRICS:
            m, q = rec.get(k), per.get(k)
            if not isinstance(q, int) or not m:
                problems.append(f"{name}: plan has no {k}")
                continue
            e = (q - m) / m
            row["err"][k] = e
            if abs(e) > BOUND:
                problems.append(f"{name}: {k} predicted {q}, measured {m}: "
                                f"{e:+.2%} (bound ±{BOUND:.0%})")
        if p.get("fits") is not True:
            problems.append(f"{name}: ran on the {gpu} but the plan says "
                            f"fits={p.get('fits')}")
        m = rec.get("device_used_bytes")
        if isinstance(pu, int) and m:
            for g in names:
                if g not in capacities:
                    try:
                        capacities[g] = plan(gpumem, spec, c.get("set", []),
                                             g)
                        capacities[g] = capacities[g].get(
                            "usable_bytes",
                            capacities[g].get("gpu_capacity_bytes"))
                    except PlanError as e:
                        problems.append(str(e))
                        capacities[g] = None
                cap = capacities[g]
                if not isinstance(cap, int):
                    continue
                if (m <= cap) != (pu <= cap) and abs(cap - m) > BAND * m:
                    problems.append(
                        f"{name}: at {g} ({cap} bytes) measured "
                        f"{'fits' if m <= cap else 'does not fit'} "
                        f"({m}) but predicted {pu}")
    for k in METRICS:
        for held in (False, True):
            errs = [abs(r["err"][k]) for r in rows
                    if r.get("heldout") == held and k in r.get("err", {})]
            if errs and statistics.median(errs) > MEDIAN_BOUND:
                problems.append(
                    f"median |error| of {k} over the "
                    f"{'held-out' if held else 'tuning'} set is "
                    f"{statistics.median(errs):.2%} (bound "
                    f"{MEDIAN_BOUND:.0%})")
    return rows, problems, env


def gib(n):
    return f"{n / 2**30:.2f}" if isinstance(n, int) else "-"


def pct(e):
    return f"{e:+.1%}" if isinstance(e, float) else "-"


def summary_lines(rows):
    out = ["| set | configs | reserved: median \\|err\\| | reserved: max "
           "\\|err\\| | used: median \\|err\\| | used: max \\|err\\| |",
           "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for label, sel in (("tuning", False), ("held-out", True), ("all", None)):
        rs = [r for r in rows if "err" in r and
              (sel is None or r.get("heldout") == sel)]
        cells = [label, str(len(rs))]
        for k in METRICS:
            errs = [abs(r["err"][k]) for r in rs if k in r["err"]]
            cells += [f"{statistics.median(errs):.2%}" if errs else "-",
                      f"{max(errs):.2%}" if errs else "-"]
        out.append("| " + " | ".join(cells) + " |")
    return out


def table_lines(rows):
    out = ["| configuration | set | reserved measured GiB | predicted | "
           "error | used measured GiB | predicted | error |",
           "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        held = "held-out" if r.get("heldout") else "tuning"
        if "err" not in r:
            note = r["status"]
            if r["status"] == "oom":
                note += f" (plan: fits={r.get('fits')})"
            out.append(f"| {r['name']} | {held} | {note} | | | | | |")
            continue
        m, p, e = r["measured"], r["predicted"], r["err"]
        out.append("| " + " | ".join([
            r["name"], held,
            gib(m["peak_reserved_bytes"]), gib(p["peak_reserved_bytes"]),
            pct(e.get("peak_reserved_bytes")),
            gib(m["device_used_bytes"]), gib(p["device_used_bytes"]),
            pct(e.get("device_used_bytes"))]) + " |")
    return out
