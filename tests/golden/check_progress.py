#!/usr/bin/env python3
"""gpumem fit shows a progress line on a terminal (stderr a tty) and
nothing when stderr is piped; the table on stdout is the same.

usage: check_progress.py GPUMEM SPEC
"""
import os
import pty
import subprocess
import sys


def main():
    gpumem, spec = sys.argv[1], sys.argv[2]
    cmd = [gpumem, "fit", spec, "--gpu", "h200", "--gpu", "a100-40gb"]
    piped = subprocess.run(cmd, capture_output=True, text=True)
    errs = []
    if piped.returncode != 0 or piped.stderr:
        errs.append(f"piped: exit {piped.returncode}, stderr "
                    f"{piped.stderr!r}")
    master, slave = pty.openpty()
    r = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=slave)
    os.close(slave)
    out = r.stdout.read().decode()
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
    if b"gpumem fit: GPU 1 of 2" not in tty or not tty.endswith(b"\033[K"):
        errs.append(f"terminal: no progress line, or not cleared: {tty!r}")
    if out != piped.stdout:
        errs.append("the table differs on a terminal")
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
