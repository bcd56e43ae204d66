#!/usr/bin/env python3
"""check_capped.py - runs under a per-process memory cap, planned and measured.

    check_capped.py GPUMEM MANIFEST [MEASURED] [--check]

MANIFEST is a calibration manifest whose configurations carry
memory_limit_bytes (tests/data/calibration/pending/capped): each ran under
torch.cuda.set_per_process_memory_fraction(limit / total) on one H200
(tools/measure/measure.py), where PyTorch's caching allocator frees its
cached blocks and retries before it raises out of memory. Each is planned
with `gpumem plan SPEC --gpu h200 --limit LIMIT --format json`, which
replays the run with the allocator held to the cap (planner/cap.h).

Prints one row per configuration: the cap, the plan's verdict (fits, or
out of memory with the request it fails at), its peak allocated and
reserved bytes, and where MEASURED (measure.py's output) has the run, its
status (ok, oom), peaks and allocator retries. With --check the verdicts
must agree for every measured run: exit 1 where one does not, 77 without
a measured file (nothing to compare).
"""
import json
import os
import subprocess
import sys


def gib(b):
    return "%.2f" % (b / 2**30) if b is not None else "-"


def planned(gpumem, spec, sets, limit):
    args = [gpumem, "plan", spec, "--gpu", "h200", "--limit",
            "%dB" % limit, "--format", "json"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit("%s: exit %d: %s" % (" ".join(args), r.returncode,
                                             r.stderr.strip()))
    p = json.loads(r.stdout)
    g = p["per_gpu"]
    oom = g.get("out_of_memory")
    return {"fits": p["fits"], "peak_allocated": g["peak_allocated_bytes"],
            "peak_reserved": g["peak_reserved_bytes"],
            "oom_request": oom["requested_bytes"] if oom else None}


def main(argv):
    check = "--check" in argv
    argv = [a for a in argv if a != "--check"]
    if len(argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    gpumem, manifest = argv[0], argv[1]
    with open(manifest) as f:
        man = json.load(f)
    base = os.path.dirname(os.path.abspath(manifest))
    runs = {}
    if len(argv) == 3 and os.path.exists(argv[2]):
        with open(argv[2]) as f:
            runs = {r["name"]: r for r in json.load(f)["configs"]}
    if check and not runs:
        print("no measured runs to compare (skipped)")
        return 77
    bad = 0
    print("| configuration | cap GiB | planned | allocated | reserved "
          "| measured | allocated | reserved | retries |")
    print("| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for c in man["configs"]:
        limit = c["memory_limit_bytes"]
        p = planned(gpumem, os.path.join(base, c["spec"]), c.get("set", []),
                    limit)
        verdict = "fits" if p["fits"] else \
            "oom at %s GiB" % gib(p["oom_request"])
        m = runs.get(c["name"])
        if m and m.get("status") in ("ok", "oom"):
            agree = (m["status"] == "ok") == p["fits"]
            bad += not agree
            seen = (m["status"], gib(m.get("peak_allocated_bytes")),
                    gib(m.get("peak_reserved_bytes")),
                    str(m.get("num_alloc_retries", "-")))
            mark = "" if agree else " **differs**"
        else:
            seen = (m.get("status", "-") if m else "not run", "-", "-", "-")
            mark = ""
        print("| %s | %s | %s | %s | %s | %s%s | %s | %s | %s |" % (
            c["name"], gib(limit), verdict, gib(p["peak_allocated"]),
            gib(p["peak_reserved"]), seen[0], mark, seen[1], seen[2],
            seen[3]))
    if check and bad:
        print("%d verdicts differ" % bad)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
