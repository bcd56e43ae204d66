#!/usr/bin/env python3
"""hf_tensors.py - transformers' parameter tensors of every bundled
config.json, written as the golden file tests/data/hf-tensors.json.

    hf_tensors.py [--out FILE] [CONFIG.json ...]

Default configs: models/configs/*.json. Each is read with
transformers.AutoConfig.from_pretrained and built as the class its
"architectures" names, on the meta device (no memory, no weights, no
GPU). Recorded per config: the class, the parameter count as
sum(p.numel() for p in model.parameters()) (tied weights once), and
named_parameters() with the layer (and expert) indices written "*":
one entry per name and shape with how many tensors have it.

Needs torch and transformers (too heavy for CI): run it where they are
and commit the file; check_tensors.py compares `gpumem plan --params`
with it in CI without torch.
"""

import argparse
import glob
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
GOLDEN = os.path.join(ROOT, "tests", "data", "hf-tensors.json")


def collapse(named):
    """[(name, shape)] -> [{"name", "shape", "count"}], indices as "*",
    in the order of first appearance."""
    out, index = [], {}
    for name, shape in named:
        pattern = re.sub(r"(?<=\.)\d+(?=\.)", "*", name)
        key = (pattern, tuple(shape))
        if key not in index:
            index[key] = len(out)
            out.append({"name": pattern, "shape": list(shape), "count": 0})
        out[index[key]]["count"] += 1
    return out


def tensors_of(path):
    import torch
    import transformers
    cfg = transformers.AutoConfig.from_pretrained(path)
    cls = getattr(transformers, cfg.architectures[0])
    with torch.device("meta"):
        model = cls(cfg)
    named = [(n, tuple(p.shape)) for n, p in model.named_parameters()]
    total = sum(p.numel() for p in model.parameters())
    return {"class": cls.__name__, "parameters": total,
            "tensors": collapse(named)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("configs", nargs="*")
    ap.add_argument("--out", default=GOLDEN)
    args = ap.parse_args()
    import torch
    import transformers
    paths = args.configs or sorted(
        glob.glob(os.path.join(ROOT, "models", "configs", "*.json")))
    doc = {"format": "gpumem-hf-tensors-1", "torch": torch.__version__,
           "transformers": transformers.__version__, "configs": {}}
    for path in paths:
        rel = os.path.relpath(os.path.abspath(path), ROOT)
        ent = doc["configs"][rel] = tensors_of(path)
        print(f"{ent['parameters']:>16,d}  {ent['class']:32s} {rel}")
    with open(args.out + ".tmp", "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(args.out + ".tmp", args.out)
    print(f"{len(doc['configs'])} configs -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
