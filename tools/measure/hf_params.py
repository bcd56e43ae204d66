#!/usr/bin/env python3
"""hf_params.py - Hugging Face's parameter count of every spec's model,
written as the golden file tests/data/hf-params.json.

    hf_params.py [--update] [SPEC ...]

Builds each spec's transformers model on the meta device (no memory, no
weights, no GPU; a 70B model takes a second) through the same mapping as
the harness (hfbuild.py) and counts its parameters, tied weights once.
Default specs: models/*.yaml, tests/data/calibration/specs/*.yaml and
tools/measure/shapes/*.yaml (well-known shapes). Entries are keyed by the
shape (gmspec.shape_key), so a spec that changes its shape needs a new
entry. --update merges into the existing file instead of rewriting it.

Needs torch and transformers (a 5 GB install from PyPI, too heavy for CI):
run it where they are (the GPU machine, or a venv here) and commit the
file; check_params.py then compares `gpumem plan`'s parameters with it
in CI without torch.
"""

import argparse
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)

import gmspec  # noqa: E402
import hfbuild  # noqa: E402

GOLDEN = os.path.join(ROOT, "tests", "data", "hf-params.json")


def default_specs():
    pats = ["models/*.yaml", "tests/data/calibration/specs/*.yaml",
            "tools/measure/shapes/*.yaml"]
    out = []
    for p in pats:
        out += sorted(glob.glob(os.path.join(ROOT, p)))
    return [s for s in out if os.path.basename(s) != "gpus.yaml"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("specs", nargs="*")
    ap.add_argument("--update", action="store_true")
    ap.add_argument("--out", default=GOLDEN)
    args = ap.parse_args()
    import torch
    import transformers
    doc = {"format": "gpumem-hf-params-1", "entries": {}}
    if args.update and os.path.exists(args.out):
        with open(args.out) as f:
            doc = json.load(f)
    doc["torch"] = torch.__version__
    doc["transformers"] = transformers.__version__
    for path in args.specs or default_specs():
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        try:
            spec = gmspec.load(path)
            cls = hfbuild.model_class_name(spec)
        except (gmspec.SpecError, hfbuild.Unsupported) as e:
            print(f"skip {rel}: {e}")
            continue
        key = gmspec.shape_key(spec)
        ent = doc["entries"].get(key)
        if ent is None:
            n = hfbuild.count_parameters(spec)
            ent = doc["entries"][key] = {"class": cls, "parameters": n,
                                         "specs": []}
        if rel not in ent["specs"]:
            ent["specs"].append(rel)
            ent["specs"].sort()
        print(f"{ent['parameters']:>16,d}  {cls:32s} {rel}")
    doc["entries"] = dict(sorted(doc["entries"].items()))
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"{len(doc['entries'])} shapes -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
