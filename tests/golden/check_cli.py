#!/usr/bin/env python3
"""Run a gpumem command from an empty temporary directory (so it cannot
lean on the source tree) and check its exit status, its stdout against a
golden file, and that its stderr contains a text.

usage: check_cli.py [--exit N] [--stdout FILE] [--stderr TEXT]
                    [--empty-stderr] -- CMD ARG...
"""
import argparse
import difflib
import os
import subprocess
import sys
import tempfile


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--exit", type=int, default=0)
    ap.add_argument("--stdout")
    ap.add_argument("--stderr")
    ap.add_argument("--empty-stderr", action="store_true")
    ap.add_argument("cmd", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.cmd[1:] if a.cmd and a.cmd[0] == "--" else a.cmd
    if os.sep in cmd[0]:
        cmd[0] = os.path.abspath(cmd[0])
    with tempfile.TemporaryDirectory() as cwd:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    # the source tree's path (fit's JSON names the spec as given) is
    # <ROOT> in the goldens, so that they hold in any checkout
    root = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    got = r.stdout.replace(root, "<ROOT>")
    ok = True
    if r.returncode != a.exit:
        print(f"exit status {r.returncode}, want {a.exit}")
        ok = False
    if a.stdout is not None:
        with open(a.stdout) as f:
            want = f.read()
        if got != want:
            print("stdout differs from " + a.stdout + ":")
            sys.stdout.writelines(difflib.unified_diff(
                want.splitlines(True), got.splitlines(True),
                "golden", "got"))
            ok = False
    if a.stderr is not None and a.stderr not in r.stderr:
        print(f"stderr lacks {a.stderr!r}")
        ok = False
    if a.empty_stderr and r.stderr:
        print("stderr is not empty")
        ok = False
    if not ok:
        print("stderr was:\n" + r.stderr)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
