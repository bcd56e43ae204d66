#!/usr/bin/env python3
"""gpumem fit plans its GPUs on several threads: over the whole catalog,
--jobs 1 and --jobs 2, 3 and 7 give the same stdout (table and JSON)
and exit status for every spec given.

usage: check_fit_jobs.py GPUMEM SPEC...
"""
import subprocess
import sys


def run(gpumem, spec, jobs, fmt):
    cmd = [gpumem, "fit", spec, "--format", fmt, "--jobs", str(jobs)]
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r.returncode, r.stdout


def main():
    gpumem, specs = sys.argv[1], sys.argv[2:]
    errs = []
    for spec in specs:
        for fmt, others in (("table", (3,)), ("json", (2, 7))):
            want = run(gpumem, spec, 1, fmt)
            if want[0] not in (0, 1) or not want[1]:
                errs.append(f"{spec} {fmt} --jobs 1: exit {want[0]}")
                continue
            for jobs in others:
                got = run(gpumem, spec, jobs, fmt)
                if got != want:
                    errs.append(f"{spec} {fmt}: --jobs {jobs} differs "
                                "from --jobs 1")
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
