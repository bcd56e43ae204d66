#!/usr/bin/env python3
"""check_trace_weights.py - the replay builds the model tensor by tensor.

    check_trace_weights.py GPUMEM [CONFIG.json ...]

For every config.json (default: models/configs/*.json), a short run of the
model (the dense blocks model.dense_layers names and one block after them,
at least two blocks; bf16-true, one GPU) is planned twice: `--params
--format json` (the parameter tensors, which the meson test hf-tensors
holds equal to transformers' named_parameters()) and `--trace`, for
training and for inference. The sizes of the trace's `setup/weight`
allocations must be those tensors' bytes (elements x 2), one allocation
per tensor, as PyTorch makes them when the model is built on the device.
A block whose tensors differ from another's (DeepSeek-V3's dense and
routed blocks) must hold its own. Standard library only.
Every bias, a LayerNorm's included, is a tensor of its own (GPT-2, BERT).
"""

import collections
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import glob

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))


def layers_for(config):
    with open(config) as f:
        c = json.load(f)
    dense = int(c.get("first_k_dense_replace") or 0)
    return max(2, dense + 1)


def spec_text(config, task, layers):
    s = (f"task: {task}\nmodel:\n  hf_config: {os.path.abspath(config)}\n"
         f"  layers: {layers}\n")
    if task == "train":
        s += ("training:\n  optimizer: sgd\n  precision: bf16-true\n"
              "  micro_batch_size: 1\n  sequence_length: 128\n")
    else:
        s += ("inference:\n  precision: bf16-true\n  batch_size: 1\n"
              "  prompt_length: 128\n  generate_length: 2\n")
    return s + "hardware:\n  gpu: NVIDIA H200\n"


def run(gpumem, args):
    r = subprocess.run([gpumem] + args, capture_output=True, text=True)
    return r


def expected(gpumem, spec):
    r = run(gpumem, ["plan", spec, "--params", "--format", "json"])
    if r.returncode != 0:
        return None, (r.stderr.strip().splitlines() or ["?"])[0]
    c = collections.Counter()
    for t in json.loads(r.stdout)["tensors"]:
        c[math.prod(t["shape"]) * 2] += t["count"]
    return c, None


def traced(gpumem, spec, trace):
    r = run(gpumem, ["plan", spec, "--trace", trace, "--format", "json"])
    if r.returncode not in (0, 1) or not os.path.exists(trace):
        return None, (r.stderr.strip().splitlines() or ["?"])[0]
    c = collections.Counter()
    with open(trace) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        for row in rows:
            if row["Action"] == "allocate" and row["Tag"] == "setup/weight":
                c[int(row["Size"])] += 1
    return c, None


def diff(got, want):
    out = []
    for size in sorted(set(got) | set(want)):
        if got[size] != want[size]:
            out.append(f"{size} B: {got[size]} allocations, "
                       f"{want[size]} tensors")
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    gpumem = argv[1]
    configs = argv[2:] or sorted(
        glob.glob(os.path.join(ROOT, "models", "configs", "*.json")))
    bad = checked = 0
    with tempfile.TemporaryDirectory() as tmp:
        for config in configs:
            rel = os.path.relpath(os.path.abspath(config), ROOT)
            layers = layers_for(config)
            for task in ("train", "inference"):
                spec = os.path.join(tmp, "spec.yaml")
                with open(spec, "w") as f:
                    f.write(spec_text(config, task, layers))
                trace = os.path.join(tmp, "trace.csv")
                if os.path.exists(trace):
                    os.remove(trace)
                want, err = expected(gpumem, spec)
                got, err2 = (None, None) if want is None else \
                    traced(gpumem, spec, trace)
                if want is None or got is None:
                    if task == "train" and "inference" in (err or err2 or ""):
                        continue
                    print(f"FAIL {rel} {task}: {err or err2}")
                    bad += 1
                    continue
                checked += 1
                d = diff(got, want)
                if d:
                    bad += 1
                    print(f"FAIL {rel} {task} ({layers} blocks):")
                    for line in d:
                        print(f"  {line}")
                else:
                    print(f"ok   {rel} {task} ({layers} blocks): "
                          f"{sum(want.values())} tensors")
    print(f"{checked} runs checked, {bad} failed")
    return 1 if bad or not checked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
