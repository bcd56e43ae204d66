#!/usr/bin/env python3
"""error_table.py - the planner's error against measurements, as markdown.

    error_table.py [--gpumem build/tools/gpumem/gpumem]
                   [--manifest tests/data/calibration/manifest.json]
                   [--summary-only] [--reserve-model analytic|simulated]
                   [MEASURED.json]

Prints the summary (median and largest |error| of peak_reserved_bytes and
device_used_bytes, tuning vs held-out) and the per-configuration table,
ready to paste into tests/data/calibration/README.md. Any bound violations follow as a list.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import calib  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("measured", nargs="?", default=os.path.join(
        ROOT, "tests", "data", "calibration", "measured-h200.json"))
    ap.add_argument("--gpumem", default=os.path.join(
        ROOT, "build", "tools", "gpumem", "gpumem"))
    ap.add_argument("--manifest", default=os.path.join(
        ROOT, "tests", "data", "calibration", "manifest.json"))
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--reserve-model", choices=("analytic", "simulated"),
                    help="passed to gpumem plan (default: plan's own)")
    args = ap.parse_args()
    if args.reserve_model:
        calib.PLAN_ARGS[:] = ["--reserve-model", args.reserve_model]
    rows, problems, env = calib.compare(args.gpumem, args.manifest,
                                        args.measured)
    print(f"Measured on {env.get('gpu_name')} (driver {env.get('driver')}, "
          f"CUDA {env.get('cuda_runtime')}, torch {env.get('torch')}, "
          f"transformers {env.get('transformers')}); error = (predicted - "
          "measured) / measured.\n")
    print("\n".join(calib.summary_lines(rows)))
    if not args.summary_only:
        print()
        print("\n".join(calib.table_lines(rows)))
    if problems:
        print("\nOutside the bounds:\n")
        for p in problems:
            print(f"- {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
