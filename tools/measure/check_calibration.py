#!/usr/bin/env python3
"""check_calibration.py - the CI check of the planner against measurements.

    check_calibration.py GPUMEM MANIFEST MEASURED.json [MEASURED.json ...]

For every configuration measured on a real GPU, recompute `gpumem plan
--format json` and hold it to the bounds in calib.py (±5% each, median
±2% on the tuning and the held-out set, same fits verdict at every
catalog capacity). Exit 0 when all hold, 1 when one does not, 77 (meson's
"skipped") when no measurement file exists yet.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import calib  # noqa: E402


def main(argv):
    if len(argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    gpumem, manifest, files = argv[1], argv[2], argv[3:]
    present = [f for f in files if os.path.exists(f)]
    if not present:
        print("no measurements yet: " + ", ".join(files) + " (skipped)")
        return 77
    bad = 0
    for f in present:
        rows, problems, env = calib.compare(gpumem, manifest, f)
        print(f"## {f}: {env.get('gpu_name')}, torch {env.get('torch')}")
        print("\n".join(calib.table_lines(rows)))
        print()
        print("\n".join(calib.summary_lines(rows)))
        for p in problems:
            print(f"FAIL {p}")
        if not any("err" in r for r in rows):
            print(f"FAIL {f}: no configuration measured ok")
            bad += 1
        bad += len(problems)
    print(f"{bad} bound(s) violated" if bad else "all bounds hold")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
