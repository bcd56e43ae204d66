#!/usr/bin/env python3
"""check_replay.py - the allocator core against PyTorch's own allocator.

    check_replay.py GPUMEM TRACE_DIR MEASURED.json [KNOWN.json]

Replays every committed allocation trace (TRACE_DIR/NAME.trace.jsonl.gz,
tracefile.py) with `gpumem replay` on the simulated card, using the
trace's segment addresses (tracefile.to_csv's `segment` lines), and holds
its peaks to what PyTorch's caching allocator measured in the same run
(MEASURED.json, configs[].peak_reserved_bytes / peak_allocated_bytes):

  peak reserved   within RESERVED_BOUND (the worst of the 2026 H200
                  traces within it, one process per configuration, is
                  +0.28%);
  peak allocated  within ALLOCATED_BOUND or ALLOCATED_SLACK bytes,
                  whichever is larger (PyTorch counts whole blocks, so a
                  large-pool block that kept an unsplit tail of up to
                  1 MiB counts it: where placement differs, as for the
                  weights' blocks, so does the count).

KNOWN.json ({"known": [{"name": TRACE, "why": TEXT}, ...]}) lists traces
whose replay misses its bound for a reason not yet fixed: each is printed
as KNOWN and not counted, and fails as STALE once it holds again.

Configurations whose measurement did not end "ok" (the OOM run, which
also gives segments back) are listed but not held to a bound.

Findings and the table: tools/bench/results/alloc-emulation.md. Exit 0
when all hold, 1 when one does not, 77 when there are no traces.
Standard library only.
"""

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracefile  # noqa: E402

RESERVED_BOUND = 0.005   # 0.5%
ALLOCATED_BOUND = 0.001  # 0.1%
ALLOCATED_SLACK = 8 << 20  # bytes: PyTorch's unsplit tails of up to 1 MiB
SUFFIX = ".trace.jsonl.gz"


def replay(gpumem, trace, tmp):
    """gpumem replay's JSON for one trace file."""
    csv = os.path.join(tmp, os.path.basename(trace)[:-len(SUFFIX)] + ".csv")
    tracefile.to_csv(trace, csv)
    out = subprocess.run([gpumem, "replay", csv, "--format", "json"],
                         capture_output=True, text=True, check=True).stdout
    os.unlink(csv)
    return json.loads(out)


def main(argv):
    if len(argv) not in (4, 5):
        print(__doc__, file=sys.stderr)
        return 2
    gpumem, tdir, measured = argv[1:4]
    known = {}
    if len(argv) == 5:
        with open(argv[4]) as f:
            known = {k["name"]: k["why"] for k in json.load(f)["known"]}
    names = sorted(f[:-len(SUFFIX)] for f in os.listdir(tdir)
                   if f.endswith(SUFFIX)) if os.path.isdir(tdir) else []
    if not names:
        print(f"no traces in {tdir} (skipped)")
        return 77
    meas = {c["name"]: c for c in json.load(open(measured))["configs"]}
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(2) as ex:
        outs = list(ex.map(lambda n: replay(
            gpumem, os.path.join(tdir, n + SUFFIX), tmp), names))
    bad = 0
    print("| trace | reserved err | bound | allocated err |")
    print("| --- | ---: | ---: | ---: |")
    for name, o in zip(names, outs):
        m = meas.get(name)
        if not m or not m.get("peak_reserved_bytes"):
            print(f"FAIL {name}: no measurement")
            bad += 1
            continue
        er = o["peak_reserved_bytes"] / m["peak_reserved_bytes"] - 1
        ea = o["peak_allocated_bytes"] / m["peak_allocated_bytes"] - 1
        da = o["peak_allocated_bytes"] - m["peak_allocated_bytes"]
        bound = RESERVED_BOUND
        flag = ""
        if m.get("status") != "ok":
            flag = f" (status {m.get('status')}: not checked)"
        elif abs(er) > bound or (abs(ea) > ALLOCATED_BOUND and
                                 abs(da) > ALLOCATED_SLACK):
            if name in known:
                flag = f" KNOWN ({known[name]})"
            else:
                flag = " FAIL"
                bad += 1
        elif name in known:
            flag = " STALE (holds now: take it off the known list)"
            bad += 1
        print(f"| {name} | {er:+.2%} | ±{bound:.1%} | {ea:+.3%} |{flag}")
    print(f"{bad} bound(s) violated" if bad else
          f"all bounds hold ({len(names)} traces)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
