#!/usr/bin/env python3
"""gpumem plan shows a progress line on a terminal (stderr a tty) while
it searches for a change that fits, overwritten in place and cleared
before the hint; nothing of it when stderr is piped; the report on
stdout and the hint are the same either way.

usage: check_plan_progress.py GPUMEM SPEC GPU   (a spec that does not fit)
"""
import os
import pty
import subprocess
import sys


def main():
    gpumem, spec, gpu = sys.argv[1], sys.argv[2], sys.argv[3]
    cmd = [gpumem, "plan", spec, "--gpu", gpu]
    piped = subprocess.run(cmd, capture_output=True)
    errs = []
    if piped.returncode != 1 or b"gpumem plan: hint:" not in piped.stderr:
        errs.append(f"piped: exit {piped.returncode}, no hint: "
                    f"{piped.stderr!r}")
    if b"\033" in piped.stderr or b"\r" in piped.stderr:
        errs.append(f"piped: a progress line: {piped.stderr!r}")
    master, slave = pty.openpty()
    r = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out = r.stdout.read()
    r.wait()
    tty = b""
    while True:
        try:
            b = os.read(master, 4096)
        except OSError:
            break
        if not b:
            break
        tty += b
    os.close(master)
    line = b"gpumem plan: looking for a change that fits: 1 plans so far"
    if line not in tty:
        errs.append(f"terminal: no progress line: {tty!r}")
    # cleared before the hint, which reads as it does piped
    hint = piped.stderr[piped.stderr.index(b"gpumem plan: hint:"):] \
        if b"gpumem plan: hint:" in piped.stderr else b"?"
    if b"\r\033[K" + hint.replace(b"\n", b"\r\n") not in tty:
        errs.append(f"terminal: the line is not cleared before the hint: "
                    f"{tty!r}")
    if out != piped.stdout or r.returncode != piped.returncode:
        errs.append("the report differs on a terminal")
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
