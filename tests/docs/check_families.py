#!/usr/bin/env python3
"""Outside planner/arch/, the planner names a model family (GM_ARCH_<ID>
but GM_ARCH_N) only in the files planner/README.md's "Adding a model
family" names as the exceptions; every other stage reads the family
table. Usage: check_families.py ROOT"""
import os
import re
import sys

root = sys.argv[1]
planner = os.path.join(root, "planner")
with open(os.path.join(planner, "README.md")) as f:
    text = f.read()
start = text.find("## Adding a model family")
guide = text[start:text.find("\n## ", start + 1)] if start >= 0 else ""
allowed = set(re.findall(r"`([a-z_]+\.[ch])`", guide))
fails = []
files = [os.path.join(d, n) for d, _, ns in os.walk(planner)
         if os.path.relpath(d, planner).split(os.sep)[0] != "arch"
         for n in ns if n.endswith((".c", ".h"))]
for p in sorted(files):
    with open(p) as f:
        names = sorted(set(re.findall(r"\bGM_ARCH_(?!N\b)[A-Z0-9_]+\b",
                                      f.read())))
    base = os.path.basename(p)
    if names and base not in allowed:
        fails.append(f"{os.path.relpath(p, root)} names {', '.join(names)}: read the "
                     "family table, or name the file in planner/README.md's "
                     "\"Adding a model family\"")
for f in fails:
    print("FAIL:", f)
print(f"{len(allowed)} files named as exceptions, {len(fails)} failed")
sys.exit(1 if fails else 0)
