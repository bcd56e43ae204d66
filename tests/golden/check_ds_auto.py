#!/usr/bin/env python3
"""A DeepSpeed JSON's "auto" plans as the number the HF Trainer writes for
it: `gpumem plan AUTO.yaml` and `gpumem plan NUMBER.yaml` (the same spec
whose JSON has the Trainer's value in place of "auto") must give the same
plan but for the name, and each "auto" whose value is an assumption is
said on stderr.

usage: check_ds_auto.py GPUMEM AUTO.yaml NUMBER.yaml NOTE
"""
import json
import subprocess
import sys


def plan(gpumem, spec):
    r = subprocess.run([gpumem, "plan", spec, "--format", "json"],
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"{spec}: exit {r.returncode}\n{r.stderr}")
    out = json.loads(r.stdout)
    out.pop("name", None)
    return out, r.stderr


def main():
    gpumem, auto, number, note = sys.argv[1:5]
    a, a_err = plan(gpumem, auto)
    n, _ = plan(gpumem, number)
    ok = True
    if a != n:
        for k in sorted(set(a) | set(n)):
            if a.get(k) != n.get(k):
                print(f"{k}: auto {a.get(k)!r} != number {n.get(k)!r}")
        ok = False
    if note not in a_err:
        print(f"stderr lacks {note!r}; it was:\n{a_err}")
        ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
