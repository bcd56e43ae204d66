#!/usr/bin/env python3
"""check_params.py - `gpumem plan`'s parameter count against Hugging Face.

    check_params.py GPUMEM GOLDEN.json SPEC|DIR ...

For every spec (custom architectures excepted) look its shape up in the
golden file written by hf_params.py (Hugging Face's count on the meta
device) and require `gpumem plan SPEC --format json`'s "parameters" to be
exactly equal. A shape missing from the golden file fails too (run
hf_params.py --update where torch is installed). Exit 77 while the
program has no `plan` subcommand yet. Needs PyYAML (python3-yaml).
"""

import glob
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gmspec  # noqa: E402


def main(argv):
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    gpumem, golden = argv[1], argv[2]
    specs = []
    for a in argv[3:]:
        specs += sorted(glob.glob(os.path.join(a, "*.yaml"))) \
            if os.path.isdir(a) else [a]
    r = subprocess.run([gpumem, "plan", "--help"], capture_output=True)
    if r.returncode != 0:
        print("gpumem has no plan subcommand yet (skipped)")
        return 77
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("PyYAML (python3-yaml) is not installed (skipped)")
        return 77
    with open(golden) as f:
        entries = json.load(f)["entries"]
    bad = checked = 0
    for path in specs:
        if os.path.basename(path) == "gpus.yaml":
            continue
        try:
            spec = gmspec.load(path)
        except gmspec.SpecError as e:
            print(f"FAIL {path}: {e}")
            bad += 1
            continue
        if spec["model"]["architecture"] == "custom":
            continue
        key = gmspec.shape_key(spec)
        if key not in entries:
            print(f"FAIL {path}: shape not in {golden}; run "
                  f"tools/measure/hf_params.py --update {path}")
            bad += 1
            continue
        want = entries[key]["parameters"]
        # The count does not depend on the GPU; shapes may name none.
        r = subprocess.run([gpumem, "plan", path, "--format", "json",
                            "--gpu", "NVIDIA H200"],
                           capture_output=True, text=True)
        try:
            got = json.loads(r.stdout).get("parameters")
        except json.JSONDecodeError:
            got = None
        checked += 1
        if got != want:
            print(f"FAIL {path}: plan says {got} parameters, Hugging Face's "
                  f"{entries[key]['class']} has {want}"
                  + (f" ({r.stderr.strip()[:200]})" if got is None else ""))
            bad += 1
        else:
            print(f"ok   {path}: {want}")
    print(f"{checked} specs checked, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
