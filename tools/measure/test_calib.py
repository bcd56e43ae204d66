#!/usr/bin/env python3
"""test_calib.py - tests of the calibration check itself (no GPU, no
planner): a stand-in `gpumem` answers from a table, so each bound can be
shown to pass and to fail. Run by meson (suite calibration)."""

import json
import os
import stat
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import calib  # noqa: E402

GIB = 2**30

# The stand-in planner: a shell script that prints precomputed answers
# (fast: no interpreter start per call).
FAKE = r'''#!/bin/sh
d=$(dirname "$0")
if [ "$1" = gpus ]; then cat "$d/answers/gpus.json"; exit 0; fi
spec=$(basename "$2" .yaml)
gpu=
while [ $# -gt 0 ]; do [ "$1" = --gpu ] && gpu=$2; shift; done
f="$d/answers/$spec@$gpu.json"
cat "$f"
exit $(cat "$f.rc")
'''
CAPS = {"NVIDIA H200": 150 * 2**30, "Small": 8 * 2**30,
        "Edge": int(10.1 * 2**30)}


def setup(tmp, predictions, measured):
    fake = os.path.join(tmp, "gpumem")
    with open(fake, "w") as f:
        f.write(FAKE)
    os.chmod(fake, stat.S_IRWXU)
    ans = os.path.join(tmp, "answers")
    os.mkdir(ans)
    with open(os.path.join(ans, "gpus.json"), "w") as f:
        json.dump([{"name": n} for n in CAPS], f)
    for spec, p in predictions.items():
        for gpu, cap in CAPS.items():
            fits = p["used"] <= cap
            path = os.path.join(ans, f"{spec}@{gpu}.json")
            with open(path, "w") as f:
                json.dump({"name": spec, "gpu": gpu,
                           "gpu_capacity_bytes": cap, "fits": fits,
                           "per_gpu": {
                               "peak_allocated_bytes": p["reserved"],
                               "peak_reserved_bytes": p["reserved"],
                               "device_used_bytes": p["used"]}}, f)
            with open(path + ".rc", "w") as f:
                f.write("0" if fits else "1")
    configs = []
    for name in predictions:
        configs.append({"name": name, "spec": f"specs/{name}.yaml",
                        "set": [], "heldout": calib.heldout_rule(name)})
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump({"configs": configs}, f)
    with open(os.path.join(tmp, "measured.json"), "w") as f:
        json.dump({"environment": {"gpu_name": "NVIDIA H200",
                                   "gpu_total_bytes": 140 * GIB},
                   "configs": measured}, f)
    return fake


def run(tmp, fake, files=("measured.json",), known=None):
    opt = []
    if known is not None:
        opt = ["--known", os.path.join(tmp, "known.json")]
        with open(opt[1], "w") as f:
            json.dump({"known": [{"match": m, "why": "test"}
                                 for m in known]}, f)
    return subprocess.run(
        [sys.executable, os.path.join(HERE, "check_calibration.py")] + opt +
        [fake, os.path.join(tmp, "manifest.json")]
        + [os.path.join(tmp, f) for f in files],
        capture_output=True, text=True)


def rec(name, reserved, used, status="ok"):
    return {"name": name, "status": status, "peak_reserved_bytes": reserved,
            "device_used_bytes": used, "peak_allocated_bytes": reserved}


NAMES = [f"cfg-{i}" for i in range(9)]


def base_case(scale=1.0, oom_used=None):
    pred, meas = {}, []
    for i, n in enumerate(NAMES):
        r = (2 + i) * GIB
        meas.append(rec(n, r, r + GIB // 2))
        pred[n] = {"reserved": int(r * scale), "used": int((r + GIB // 2)
                                                            * scale)}
    pred["big"] = {"reserved": 200 * GIB,
                   "used": oom_used or 201 * GIB}
    meas.append({"name": "big", "status": "oom"})
    return pred, meas


def expect(code, pred, meas, what, files=("measured.json",), why=None,
           known=None):
    """Run the check; its exit must be `code` and, when `why` is given,
    every FAIL line must contain `why` (it failed for that reason)."""
    with tempfile.TemporaryDirectory() as tmp:
        fake = setup(tmp, pred, meas)
        r = run(tmp, fake, files, known)
        fails = [ln for ln in r.stdout.splitlines()
                 if ln.startswith("FAIL")]
        if r.returncode != code or (why and (
                not fails or any(why not in ln for ln in fails))):
            print(f"FAIL {what}: exit {r.returncode}, expected {code}"
                  f"{' for ' + repr(why) if why else ''}\n"
                  f"{r.stdout}{r.stderr}")
            return 1
        print(f"ok   {what}")
        return 0


def main():
    bad = 0
    pred, meas = base_case()
    bad += expect(0, pred, meas, "exact predictions pass")
    bad += expect(77, pred, meas, "no measurement file skips",
                  files=("missing.json",))
    pred, meas = base_case(1.015)
    bad += expect(0, pred, meas, "1.5% everywhere passes")
    pred, meas = base_case(1.03)
    bad += expect(1, pred, meas, "3% everywhere fails the median bound",
                  why="median")
    pred, meas = base_case()
    pred["cfg-3"]["used"] = int(meas[3]["device_used_bytes"] * 1.06)
    bad += expect(1, pred, meas, "one config 6% off fails",
                  why="cfg-3: device_used_bytes")
    pred, meas = base_case()
    pred["cfg-3"]["used"] = int(meas[3]["device_used_bytes"] * 0.96)
    bad += expect(0, pred, meas, "one config 4% off passes")
    bad += expect(1, pred, meas, "a known miss that holds now fails",
                  why="STALE", known=["cfg-3:"])
    pred["cfg-3"]["used"] = int(meas[3]["device_used_bytes"] * 1.06)
    bad += expect(0, pred, meas, "a known miss is not counted",
                  known=["cfg-3:"])
    pred["cfg-4"]["used"] = int(meas[4]["device_used_bytes"] * 1.06)
    bad += expect(1, pred, meas, "a miss not on the list still fails",
                  why="cfg-4:", known=["cfg-3:", "median"])
    pred, meas = base_case(oom_used=100 * GIB)
    bad += expect(1, pred, meas, "an OOM predicted to fit fails",
                  why="big: did not fit")
    # The stand-in catalog has a 10.1 GiB card ("Edge").
    pred, meas = base_case()
    meas[5] = rec("cfg-5", 9 * GIB, int(9.8 * GIB))
    pred["cfg-5"] = {"reserved": 9 * GIB, "used": int(10.25 * GIB)}
    bad += expect(1, pred, meas, "crossing a capacity 3% from the "
                  "measurement, 4.6% off, fails the fits check",
                  why="at Edge")
    meas[5] = rec("cfg-5", 9 * GIB, int(10.0 * GIB))
    pred["cfg-5"] = {"reserved": 9 * GIB, "used": int(10.2 * GIB)}
    bad += expect(0, pred, meas, "crossing a capacity within the 2% band "
                  "passes")
    print(f"{len(NAMES)} configs per case; {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
