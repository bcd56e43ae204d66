#!/usr/bin/env python3
"""models/ says what it bundles: every bundled spec (models/*.yaml but
gpus.yaml) is named in models/README.md's "Bundled specs" section, and
every bundled config.json (models/configs/*.json) is read by a bundled
spec through model.hf_config (the shape is written once, as published).
Usage: check_models.py ROOT"""
import glob
import os
import re
import sys

root = sys.argv[1]
models = os.path.join(root, "models")
with open(os.path.join(models, "README.md")) as f:
    readme = f.read()
start = readme.find("### Bundled specs")
section = readme[start:] if start >= 0 else ""
named = set(re.findall(r"`([A-Za-z0-9_.-]+\.yaml)`", section))
used = set()
fails = []
specs = sorted(p for p in glob.glob(os.path.join(models, "*.yaml"))
               if os.path.basename(p) != "gpus.yaml")
for p in specs:
    base = os.path.basename(p)
    if base not in named:
        fails.append(f"models/{base}: not in models/README.md's "
                     "\"Bundled specs\" tables")
    with open(p) as f:
        for m in re.finditer(r"^\s*hf_config:\s*(\S+)", f.read(), re.M):
            used.add(os.path.normpath(os.path.join(models, m.group(1))))
for c in sorted(glob.glob(os.path.join(models, "configs", "*.json"))):
    if os.path.normpath(c) not in used:
        fails.append(f"models/configs/{os.path.basename(c)}: no bundled "
                     "spec reads it (model.hf_config)")
for f in fails:
    print("FAIL:", f)
print(f"{len(specs)} specs, {len(used)} configs read, {len(fails)} failed")
sys.exit(1 if fails else 0)
