#!/usr/bin/env python3
"""test_replay_check.py - check_replay.py's bound and known list, with a
stand-in `gpumem replay` that answers fixed peaks (no GPU, no planner):
a replay at the measurement passes, one 1% off fails, a listed one 1% off
passes as KNOWN, and a listed one that holds fails as STALE. Run by meson
(suite calibration)."""

import gzip
import json
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
GIB = 2**30


def case(tmp, replayed, known, want, what):
    fake = os.path.join(tmp, "gpumem")
    with open(fake, "w") as f:
        f.write("#!/bin/sh\necho '%s'\n" % json.dumps(
            {"peak_reserved_bytes": replayed, "peak_allocated_bytes": GIB}))
    os.chmod(fake, stat.S_IRWXU)
    tdir = os.path.join(tmp, "traces")
    os.makedirs(tdir, exist_ok=True)
    with gzip.open(os.path.join(tdir, "t.trace.jsonl.gz"), "wt") as f:
        f.write(json.dumps({"name": "t", "initial": []}) + "\n")
        f.write(json.dumps(["alloc", 4096, GIB, 0, ""]) + "\n")
    meas = os.path.join(tmp, "measured.json")
    with open(meas, "w") as f:
        json.dump({"configs": [{"name": "t", "status": "ok",
                                "peak_reserved_bytes": 2 * GIB,
                                "peak_allocated_bytes": GIB}]}, f)
    args = [sys.executable, os.path.join(HERE, "check_replay.py"), fake,
            tdir, meas]
    if known is not None:
        kf = os.path.join(tmp, "known.json")
        with open(kf, "w") as f:
            json.dump({"known": [{"name": n, "why": "test"}
                                 for n in known]}, f)
        args.append(kf)
    r = subprocess.run(args, capture_output=True, text=True)
    ok = r.returncode == want
    print(f"{'ok  ' if ok else 'FAIL'} {what}: exit {r.returncode}, "
          f"expected {want}")
    if not ok:
        print(r.stdout + r.stderr)
    return 0 if ok else 1


def main():
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        bad += case(tmp, 2 * GIB, None, 0, "a replay at the measurement")
        bad += case(tmp, int(2.02 * GIB), None, 1, "a replay 1% off")
        bad += case(tmp, int(2.02 * GIB), ["t"], 0,
                    "a known replay 1% off")
        bad += case(tmp, 2 * GIB, ["t"], 1, "a known replay that holds")
    print(f"{bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
