#!/usr/bin/env python3
"""check_tensors.py - `gpumem plan --params` against transformers.

    check_tensors.py GPUMEM GOLDEN.json [CONFIG.json ...]

For every config.json (default: models/configs/*.json) plan a spec that
is only `model.hf_config: CONFIG` with `--params --format json`, and
require its parameter count to equal the golden's exactly and its list
of (name, shape, count) to equal named_parameters() as hf_tensors.py
recorded it from transformers (the version the golden names). A config
missing from the golden fails (run hf_tensors.py where torch is). A
config whose family this build of the planner does not have yet is
reported and not counted as a failure; every other refusal is one.
Standard library only.
"""

import glob
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def planner_tensors(gpumem, config, tmp):
    spec = os.path.join(tmp, "spec.yaml")
    with open(spec, "w") as f:
        f.write(f"model:\n  hf_config: {os.path.abspath(config)}\n")
    r = subprocess.run([gpumem, "plan", spec, "--params", "--format",
                        "json"], capture_output=True, text=True)
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["(no message)"])[0]
    return json.loads(r.stdout), None


def as_set(tensors):
    return {(t["name"], tuple(t["shape"])): t["count"] for t in tensors}


def compare(got, want):
    """The differences, as lines."""
    out = []
    if got["parameters"] != want["parameters"]:
        out.append(f"parameters {got['parameters']:,} != transformers' "
                   f"{want['parameters']:,}")
    g, w = as_set(got["tensors"]), as_set(want["tensors"])
    for k in sorted(set(w) - set(g)):
        out.append(f"missing {k[0]} {list(k[1])} x{w[k]}")
    for k in sorted(set(g) - set(w)):
        out.append(f"extra   {k[0]} {list(k[1])} x{g[k]}")
    for k in sorted(set(g) & set(w)):
        if g[k] != w[k]:
            out.append(f"count   {k[0]} {list(k[1])} x{g[k]} != x{w[k]}")
    return out


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    gpumem, golden = argv[1], argv[2]
    configs = argv[3:] or sorted(
        glob.glob(os.path.join(ROOT, "models", "configs", "*.json")))
    with open(golden) as f:
        doc = json.load(f)
    entries = doc["configs"]
    print(f"golden: transformers {doc['transformers']}, "
          f"torch {doc['torch']}")
    bad = checked = missing_family = 0
    with tempfile.TemporaryDirectory() as tmp:
        for path in configs:
            rel = os.path.relpath(os.path.abspath(path), ROOT)
            if rel not in entries:
                print(f"FAIL {rel}: not in {golden}; run "
                      f"tools/measure/hf_tensors.py")
                bad += 1
                continue
            got, err = planner_tensors(gpumem, path, tmp)
            if got is None and "which this build does not have" in err:
                print(f"NOT YET {rel}: {err}")
                missing_family += 1
                continue
            if got is None:
                print(f"FAIL {rel}: {err}")
                bad += 1
                continue
            diffs = compare(got, entries[rel])
            checked += 1
            if diffs:
                bad += 1
                print(f"FAIL {rel} ({entries[rel]['class']}):")
                for d in diffs:
                    print(f"  {d}")
            else:
                print(f"ok   {rel}: {got['parameters']:,} parameters, "
                      f"{len(got['tensors'])} tensor names "
                      f"({entries[rel]['class']})")
    print(f"{checked} configs checked, {bad} failed, {missing_family} "
          "of a family this build does not have")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
