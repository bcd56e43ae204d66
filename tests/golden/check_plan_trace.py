#!/usr/bin/env python3
"""gpumem plan --trace FILE: the RMM CSV it writes replays (gpumem replay,
no options: the trace's "# gpumem-replay:" line carries them) to the
plan's own simulated peak_reserved_bytes and peak_allocated_bytes; bad
paths are refused with exit 2, a message naming the option, and nothing
written.

usage: check_plan_trace.py GPUMEM SPEC [SPEC ...]
"""
import csv
import json
import os
import subprocess
import sys
import tempfile


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def check_spec(gpumem, spec, tmp):
    out = os.path.join(tmp, "t.csv")
    r = run([gpumem, "plan", spec, "--format", "json", "--trace", out])
    if r.returncode not in (0, 1):
        return [f"{spec}: plan --trace exit {r.returncode}: {r.stderr}"]
    plan = json.loads(r.stdout)["per_gpu"]
    # --trace implies the simulated model: the same figures as asking
    # for it
    r2 = run([gpumem, "plan", spec, "--format", "json",
              "--reserve-model", "simulated"])
    if json.loads(r2.stdout)["per_gpu"] != plan:
        return [f"{spec}: --trace changed the plan"]
    with open(out, newline="") as f:
        first = f.readline()
        rows = list(csv.reader(f))
    errs = []
    if not first.startswith("# gpumem-replay: "):
        errs.append(f"{spec}: first line {first!r}")
    if rows[0][:6] != ["Thread", "Time", "Action", "Pointer", "Size",
                       "Stream"]:
        errs.append(f"{spec}: header {rows[0]}")
    live = {}
    for row in rows[1:]:
        addr = int(row[3], 16)
        if row[2] == "allocate":
            if addr in live:
                errs.append(f"{spec}: {row[3]} allocated twice")
            live[addr] = int(row[4])
        elif live.pop(addr, None) is None:
            errs.append(f"{spec}: {row[3]} freed but not live")
    if live:
        errs.append(f"{spec}: {len(live)} allocations never freed")
    r = run([gpumem, "replay", out, "--format", "json"])
    k = "peak_reserved_bytes"
    oom = plan.get("out_of_memory")
    if oom:
        # The plan stops where the card is full after the cache was
        # freed and the request retried; replayed on the card the trace
        # names, the same request fails there (exit 1) with the same
        # bytes allocated and reserved. The plan's figures go on, on a
        # card grown by what was lacking: the trace's Reserved column.
        rep = json.loads(r.stdout) if r.stdout else {}
        f = rep.get("first_failure", {})
        if r.returncode != 1 or \
                f.get("size_bytes") != oom["requested_bytes"] or \
                f.get("reserved_bytes") != oom["reserved_bytes"] or \
                f.get("allocated_bytes") != oom["allocated_bytes"]:
            errs.append(f"{spec}: replay exit {r.returncode}, first "
                        f"failure {f}, plan {oom}")
        col = rows[0].index("Reserved")
        top = max(int(row[col]) for row in rows[1:])
        if top != plan[k]:
            errs.append(f"{spec}: trace Reserved peak {top}, plan "
                        f"{plan[k]}")
        return errs
    if r.returncode:
        return errs + [f"{spec}: replay exit {r.returncode}: {r.stderr}"]
    rep = json.loads(r.stdout)
    if rep[k] != plan[k]:
        errs.append(f"{spec}: {k}: replay {rep[k]}, plan {plan[k]}")
    # allocated: the live blocks' sizes, as PyTorch's allocated_bytes
    # counts them (a large block's unsplit remainder included): the
    # replay's figure exactly, at least the trace's requested peak
    k = "peak_allocated_bytes"
    if rep[k] != plan[k]:
        errs.append(f"{spec}: {k}: replay {rep[k]}, plan {plan[k]}")
    if plan[k] < rep["trace_peak_requested_bytes"]:
        errs.append(f"{spec}: {k} {plan[k]} below the requested peak "
                    f"{rep['trace_peak_requested_bytes']}")
    return errs


def check_bad(gpumem, spec, tmp):
    errs = []
    d = os.path.join(tmp, "bad")
    os.mkdir(d)
    for path, text in ((os.path.join(d, "no", "x.csv"),
                        "No such file or directory"),
                       (d, "Is a directory")):
        r = run([gpumem, "plan", spec, "--trace", path])
        if r.returncode != 2 or "--trace" not in r.stderr or \
                text not in r.stderr:
            errs.append(f"--trace {path}: exit {r.returncode}, stderr "
                        f"{r.stderr!r}")
        if os.listdir(d):
            errs.append(f"--trace {path}: left {os.listdir(d)}")
    r = run([gpumem, "plan", spec, "--trace"])
    if r.returncode != 2 or "--trace needs a value" not in r.stderr:
        errs.append(f"--trace without a value: exit {r.returncode}, "
                    f"{r.stderr!r}")
    return errs


def main():
    gpumem, specs = sys.argv[1], sys.argv[2:]
    errs = []
    with tempfile.TemporaryDirectory() as tmp:
        for s in specs:
            errs += check_spec(gpumem, s, tmp)
        errs += check_bad(gpumem, specs[0], tmp)
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
