#!/usr/bin/env python3
"""The plan's replay frees the caching allocator's cache and retries
before it fails, as PyTorch does: reserved never passes the card while a
run gets through, and a run that cannot get through says where it stops
(out_of_memory: the request, what was allocated and reserved then, at
most the card) and how much card it needs with those retries, not what
an unlimited card would cache.

usage: check_retry.py GPUMEM MODELS_DIR
"""
import json
import subprocess
import sys

GEN = ["--set", "task=inference", "--set", "inference.precision=fp16-true",
       "--set", "inference.prompt_length=2048",
       "--set", "inference.generate_length=2048",
       "--set", "parallelism.data_parallel=1",
       "--set", "parallelism.zero_stage=0", "--gpu", "a100-80gb"]


def plan(gpumem, spec, args):
    r = subprocess.run([gpumem, "plan", spec, "--format", "json"] + args,
                       capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"plan {spec} {args}: exit {r.returncode}: "
                         f"{r.stderr}")
    p = json.loads(r.stdout)
    if (r.returncode == 0) != p["fits"]:
        raise SystemExit(f"plan {spec} {args}: exit {r.returncode} but "
                         f"fits {p['fits']}")
    return p


def main():
    gpumem, models = sys.argv[1], sys.argv[2]
    errs = []
    spec = models + "/llama-2-13b.yaml"
    for b, fits in ((4, True), (14, True), (15, False), (16, False)):
        p = plan(gpumem, spec, GEN + ["--set", f"inference.batch_size={b}"])
        g = p["per_gpu"]
        cap = p["gpu_capacity_bytes"] - g["cuda_context_bytes"]
        if p["fits"] != fits:
            errs.append(f"batch {b}: fits {p['fits']}, want {fits}")
        if fits and g["peak_reserved_bytes"] > cap:
            errs.append(f"batch {b}: reserved {g['peak_reserved_bytes']} "
                        f"passes the card's {cap}")
        if not fits:
            oom = g.get("out_of_memory")
            if not oom:
                errs.append(f"batch {b}: no out_of_memory")
                continue
            if not oom["allocated_bytes"] <= oom["reserved_bytes"] <= cap:
                errs.append(f"batch {b}: out_of_memory {oom}")
            # the card it needs: live bytes plus what cannot be freed,
            # not an unlimited card's cache (1968 GiB at batch 15 before)
            if g["peak_reserved_bytes"] > 1.25 * g["peak_allocated_bytes"]:
                errs.append(f"batch {b}: reserved "
                            f"{g['peak_reserved_bytes']} for allocated "
                            f"{g['peak_allocated_bytes']}")
    # training too: a step that does not fit stops where it stops
    p = plan(gpumem, models + "/llama-2-13b-8x-v100.yaml", [])
    g = p["per_gpu"]
    cap = p["gpu_capacity_bytes"] - g["cuda_context_bytes"]
    if p["fits"] or "out_of_memory" not in g or \
            g["out_of_memory"]["reserved_bytes"] > cap:
        errs.append(f"llama-2-13b-8x-v100: fits {p['fits']}, "
                    f"{g.get('out_of_memory')}")
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
