#!/usr/bin/env python3
"""Every allocation trace the project ships replays with `gpumem replay`
as it is, no options: RMM CSV (plain or gzip) and PyTorch memory-history
recordings (tools/measure/tracefile.py). A file under the source
directories that looks like a trace by its name (.csv, .csv.gz, .jsonl,
.jsonl.gz) is one, unless NOT_TRACES says why not. The recordings also
replay to the same figures as their RMM CSV conversion (tracefile.to_csv,
which check_replay.py used), for the smallest few.

usage: check_shipped_traces.py GPUMEM SOURCE_ROOT
"""
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

SUFFIXES = (".csv", ".csv.gz", ".jsonl", ".jsonl.gz")
DIRS = ("tests", "tools", "models", "planner", "allocator")
NOT_TRACES = {
    "tests/golden/gpus.csv": "gpumem gpus --format csv, the catalog",
    "tests/fuzz/corpus": "fuzzer seeds, bad input by design",
}
SAME = ("events", "allocations", "frees", "peak_allocated_bytes",
        "peak_reserved_bytes", "fragmentation", "trace_peak_requested_bytes")


def shipped(root):
    out = []
    for d in DIRS:
        for base, dirs, files in os.walk(os.path.join(root, d)):
            rel = os.path.relpath(base, root)
            dirs[:] = [x for x in dirs if os.path.join(rel, x)
                       not in NOT_TRACES]
            for f in files:
                r = os.path.join(rel, f)
                if f.endswith(SUFFIXES) and r not in NOT_TRACES:
                    out.append(r)
    return sorted(out)


def replay(gpumem, path):
    p = subprocess.run([gpumem, "replay", path, "--format", "json"],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def main(argv):
    gpumem, root = argv[1], argv[2]
    sys.path.insert(0, os.path.join(root, "tools", "measure"))
    import tracefile
    traces = shipped(root)
    with ThreadPoolExecutor(2) as ex:
        outs = list(ex.map(lambda r: replay(gpumem, os.path.join(root, r)),
                           traces))
    bad = 0
    for rel, (rc, out, err) in zip(traces, outs):
        if rc != 0 or json.loads(out)["events"] == 0:
            print(f"FAIL {rel}: exit {rc}, {err.strip()[:300]}")
            bad += 1
    recordings = sorted((r for r in traces if ".jsonl" in r),
                        key=lambda r: os.path.getsize(os.path.join(root, r)))
    with tempfile.TemporaryDirectory() as tmp:
        for rel in recordings[:4]:
            csv = os.path.join(tmp, "t.csv")
            tracefile.to_csv(os.path.join(root, rel), csv)
            rc, out, err = replay(gpumem, csv)
            direct = json.loads(outs[traces.index(rel)][1])
            conv = json.loads(out) if rc == 0 else {}
            for k in SAME:
                if direct.get(k) != conv.get(k):
                    print(f"FAIL {rel}: {k} {direct.get(k)}, as CSV "
                          f"{conv.get(k)}")
                    bad += 1
    print(f"{len(traces)} traces, {len(recordings)} recordings: "
          f"{bad} failure(s)")
    return 1 if bad or not traces else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
