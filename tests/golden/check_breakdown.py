#!/usr/bin/env python3
"""Breakdown rows say what they are: per_gpu.at_peak holds what each
term holds at the peak (they add up to peak_requested, the requests
live then; peak_allocated counts the blocks they hold, at least that), and the table
prints those rows under a heading that says so, the closed-form terms
under one that says they are not the peak's. A custom model's activation_bytes_per_token counts:
the saved activations are bytes per token x tokens of the micro-batch
(micro_batch_size x sequence_length) over the whole model, plus the
int64 input ids and labels (16 B a token); for inference it is refused.

usage: check_breakdown.py GPUMEM MODELS_DIR CUSTOM_SPEC
"""
import glob
import json
import os
import subprocess
import sys

TERMS = ["weights", "gradients", "optimizer_states", "activations",
         "logits", "temporary", "kv_cache", "communication", "workspace"]


def plan(gpumem, spec, args=(), fmt="json"):
    r = subprocess.run([gpumem, "plan", spec, "--format", fmt] + list(args),
                       capture_output=True, text=True)
    return r, (json.loads(r.stdout) if fmt == "json" and
               r.returncode in (0, 1) else None)


def main():
    gpumem, models, custom = sys.argv[1:4]
    errs = []
    specs = [f for f in sorted(glob.glob(models + "/*.yaml"))
             if not f.endswith("gpus.yaml")] + [custom]
    for f in specs:
        _, p = plan(gpumem, f)
        if p is None:
            errs.append(f"{f}: no plan")
            continue
        g = p["per_gpu"]
        if "at_peak" not in g:
            errs.append(f"{f}: no per_gpu.at_peak")
            continue
        # one definition per row: no row at the peak exceeds the same
        # row at its own largest (per_gpu.largest; the closed forms of
        # per_gpu where a plan has none)
        top = g.get("largest", g)
        for t in TERMS:
            if g["at_peak"][t + "_bytes"] > top[t + "_bytes"] + 16:
                errs.append(f"{os.path.basename(f)}: {t} at the peak "
                            f"{g['at_peak'][t + '_bytes']} exceeds its "
                            f"own largest {top[t + '_bytes']}")
        s = sum(g["at_peak"][t + "_bytes"] for t in TERMS)
        if abs(s - g["peak_requested_bytes"]) > 16:
            errs.append(f"{os.path.basename(f)}: at_peak sums to {s}, "
                        f"peak requested {g['peak_requested_bytes']}")
        if g["peak_allocated_bytes"] < g["peak_requested_bytes"]:
            errs.append(f"{os.path.basename(f)}: peak allocated "
                        f"{g['peak_allocated_bytes']} below peak "
                        f"requested {g['peak_requested_bytes']}")
    r, _ = plan(gpumem, custom, fmt="table")
    if "per gpu at the peak:" not in r.stdout or \
            "each term at its own largest over the step (not at the peak):" \
            not in r.stdout:
        errs.append("table: the breakdowns' headings do not say what "
                    "they are:\n" + r.stdout)
    # activation_bytes_per_token counts, linearly
    mb, seq = 2, 2048
    acts = []
    for v in (100000, 200000, 400000):
        _, p = plan(gpumem, custom, [
            "--set", f"model.activation_bytes_per_token={v}",
            "--set", f"training.micro_batch_size={mb}",
            "--set", f"training.sequence_length={seq}"])
        want = v * mb * seq + 16 * mb * seq
        got = p["per_gpu"]["activations_bytes"]
        acts.append(got)
        if got != want:
            errs.append(f"activation_bytes_per_token {v}: activations "
                        f"{got}, want {want}")
    r, _ = plan(gpumem, custom, ["--set", "task=inference"])
    if r.returncode != 2 or "activation_bytes_per_token" not in r.stderr:
        errs.append(f"inference with activation_bytes_per_token: exit "
                    f"{r.returncode} {r.stderr!r}")
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
