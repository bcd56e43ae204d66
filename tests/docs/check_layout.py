#!/usr/bin/env python3
"""The repository's top level holds only what the project keeps there:
planner/, allocator/, models/, tools/, tests/, meson.build, README.md,
meson_options.txt, LICENSE and dot-entries. Checks the tracked files
(git ls-files); exits 77 (skip) outside a git checkout.
Usage: check_layout.py ROOT"""
import subprocess
import sys

ALLOWED = {"planner", "allocator", "models", "tools", "tests", "meson.build",
           "README.md", "meson_options.txt", "LICENSE"}

root = sys.argv[1]
try:
    out = subprocess.run(["git", "-C", root, "ls-files"], capture_output=True,
                         text=True, timeout=60)
except (OSError, subprocess.TimeoutExpired) as e:
    print("skip: git: %s" % e)
    sys.exit(77)
if out.returncode != 0:
    print("skip: not a git checkout: %s" % out.stderr.strip())
    sys.exit(77)
tops = sorted({p.split("/", 1)[0] for p in out.stdout.splitlines() if p})
stray = [t for t in tops if t not in ALLOWED and not t.startswith(".")]
for t in stray:
    print("FAIL: %s at the top level (allowed: %s and dot-entries)" %
          (t, ", ".join(sorted(ALLOWED))))
print("%d top-level entries, %d stray" % (len(tops), len(stray)))
sys.exit(1 if stray else 0)
