#!/usr/bin/env python3
"""gpumem fit's smallest change that fits, checked against gpumem plan.

For bundled specs that do not fit a card: the change fit names (its
`--set` strings) is the one this test expects; pasted into gpumem plan
it plans as fitting with the figures fit printed; the smaller changes
before it (each earlier lever on its own at its furthest step, the
step before the answer's on the answer's lever) plan as not fitting;
gpumem plan's hint on stderr names the same change. Where nothing
fits, fit says so and its widest change plans as not fitting. The JSON
keys are the ones planner/README.md documents.

usage: check_fit_change.py GPUMEM MODELS_DIR
"""
import json
import subprocess
import sys

CHANGE_KEYS = ["set", "gpus", "micro_batch", "gradient_accumulation_steps",
               "peak_allocated_bytes", "peak_reserved_bytes",
               "device_used_bytes", "headroom_bytes"]

# (spec, --set given, GPU, the change expected (None: nothing fits),
#  changes that must not fit: smaller ones the search passed over)
CASES = [
    # activations: full checkpointing fits where selective (sdpa keeps
    # no attention scores to drop) and a smaller micro-batch do not
    ("gpt2-large.yaml", [], "NVIDIA H200 MIG 1g.18gb",
     ["training.activation_checkpointing=full"],
     [["training.activation_checkpointing=selective"],
      ["training.micro_batch_size=1", "training.global_batch_size=4"]]),
    # eager attention keeps the scores: selective checkpointing drops
    # them and fits; micro-batch 1 with 2 accumulation steps does not
    ("gpt2-large.yaml", ["training.attention=eager",
                         "training.micro_batch_size=2"], "NVIDIA L4",
     ["training.activation_checkpointing=selective"],
     [["training.micro_batch_size=1", "training.global_batch_size=2"]]),
    # PyTorch's ZeRO-2 (FSDP2, reshard_after_forward=False) shards the
    # parameters too: over 4 data-parallel ranks of TP 8 x PP 8 stage 2
    # fits where full checkpointing alone does not
    ("gpt3-175b-finetune.yaml", [], "NVIDIA A100-SXM4-40GB",
     ["parallelism.zero_stage=2"],
     [["training.activation_checkpointing=full"]]),
    # Megatron-LM: zero_stage is refused there, its distributed
    # optimizer shards the fp32 master weights and Adam's states
    ("llama-2-7b.yaml", ["training.framework=megatron",
                         "parallelism.zero_stage=0"],
     "NVIDIA A100-SXM4-80GB", ["parallelism.distributed_optimizer=true"],
     [[]]),
    # DeepSpeed on one GPU: ZeRO-3 alone holds every state; the
    # optimizer's on the host fit an L4, a T4 needs the parameters there
    # too
    ("llama-2-7b.yaml", ["training.framework=deepspeed",
                         "parallelism.data_parallel=1",
                         "training.global_batch_size=1"],
     "NVIDIA L4", ["parallelism.offload_optimizer=cpu"],
     [["training.activation_checkpointing=full"]]),
    ("llama-2-7b.yaml", ["training.framework=deepspeed",
                         "parallelism.data_parallel=1",
                         "training.global_batch_size=1"],
     "Tesla T4", ["parallelism.offload_optimizer=cpu",
                  "parallelism.offload_parameters=cpu"],
     [["parallelism.offload_optimizer=cpu"]]),
    # DeepSpeed ZeRO-2 with the optimizer on the host, one GPU: stage 3
    # on the same GPU (no flat 16-bit copy of the parameters at set-up)
    # fits before a second GPU is asked for
    ("llama-2-7b.yaml", ["training.framework=deepspeed",
                         "parallelism.data_parallel=1",
                         "parallelism.zero_stage=2",
                         "parallelism.offload_optimizer=cpu"],
     "NVIDIA GeForce RTX 4090", ["parallelism.zero_stage=3"],
     [["parallelism.zero_stage=2", "parallelism.data_parallel=2"]]),
    # a DeepSpeed JSON's gradient_accumulation_steps: the global batch
    # it gives (4 x 4 x 8 = 128) is written, or the JSON would shrink it
    # with the micro-batch
    ("../tests/data/plan/llama-2-7b-deepspeed.yaml",
     ["training.micro_batch_size=4"], "Tesla T4",
     ["training.micro_batch_size=2", "training.global_batch_size=128"],
     [[]]),
    # more GPUs: the 8 of the spec do not fit, 16 do (the global batch
    # 64 at micro-batch 1 allows 16, not 9..15)
    ("llama-2-13b-8x-v100.yaml", [], "Tesla V100-SXM2-32GB",
     ["parallelism.data_parallel=16"], [[]]),
    # a smaller micro-batch, the global batch kept
    ("gpt2.yaml", [], "NVIDIA GeForce GTX 1080 Ti",
     ["training.micro_batch_size=4", "training.global_batch_size=8"],
     [["training.micro_batch_size=8", "training.global_batch_size=8"]]),
    # an adapter: one GPU under DDP, tensor parallel 8 does not fit, LoRA
    # (PEFT's defaults) does
    ("llama-2-7b.yaml", ["parallelism.data_parallel=1",
                         "parallelism.zero_stage=0",
                         "training.global_batch_size=8"],
     "NVIDIA H200 MIG 1g.18gb", ["training.adapter=lora"],
     [["parallelism.tensor_parallel=8"], ["parallelism.data_parallel=8"],
      ["training.micro_batch_size=1"]]),
    # on the GPUs as given before more GPUs: on one A100-40GB, tensor
    # parallel 4 (three more GPUs) fits too, but LoRA fits on the one
    ("llama-2-7b.yaml", ["parallelism.data_parallel=1",
                         "parallelism.zero_stage=0"],
     "NVIDIA A100-SXM4-40GB", ["training.adapter=lora"], [[]]),
    # inference: a smaller batch
    ("llama-3-8b.yaml", ["task=inference", "inference.batch_size=8",
                         "inference.prompt_length=4096",
                         "inference.generate_length=512"],
     "NVIDIA L4", ["inference.batch_size=5"],
     [["inference.batch_size=6"]]),
    # a custom model of a parameter count: no tensor parallel (no shape
    # to split), and at 1 layer nothing else fits 8 H100s
    ("../tests/data/plan/custom-7b-fsdp.yaml", [], "NVIDIA H100 80GB HBM3",
     "none", []),
    # nothing fits: Llama-3-70B on 7.5 GiB, even over 64 ranks with
    # tensor parallel 8 (the global batch 64 bounds data parallel)
    ("llama-3-70b.yaml", [], "Tesla P4", "none", []),
]


def run(gpumem, args, want=(0, 1)):
    r = subprocess.run([gpumem] + args, capture_output=True, text=True)
    if r.returncode not in want:
        raise RuntimeError(f"{args}: exit {r.returncode}: {r.stderr}")
    return r


def sets(kv):
    out = []
    for s in kv:
        out += ["--set", s]
    return out


def plan(gpumem, path, kv, gpu):
    r = run(gpumem, ["plan", path, "--gpu", gpu, "--format", "json"] +
            sets(kv))
    return json.loads(r.stdout), r.stderr


def check(gpumem, models, spec, kv, gpu, want, smaller):
    errs = []
    path = models + "/" + spec
    name = f"{spec} {kv} on {gpu}"
    r = run(gpumem, ["fit", path, "--gpu", gpu, "--format", "json"] +
            sets(kv))
    row = json.loads(r.stdout)["gpus"][0]
    for k in ("fits_as_given", "smallest_change"):
        if k not in row:
            return [f"{name}: no '{k}' in fit's row"]
    if row["fits_as_given"] is not False:
        return [f"{name}: fits as given; the case is meant not to"]
    ch = row["smallest_change"]
    _, hint = plan(gpumem, path, kv, gpu)
    if want == "none":
        if ch is not None:
            return [f"{name}: fit found {ch['set']}, want nothing"]
        wide = row.get("widest_change")
        if not wide or list(wide) != CHANGE_KEYS:
            return [f"{name}: widest_change {wide}"]
        p, _ = plan(gpumem, path, kv + wide["set"], gpu)
        if p["fits"] or p["headroom_bytes"] != wide["headroom_bytes"]:
            errs.append(f"{name}: widest {wide['set']} plans fits "
                        f"{p['fits']} headroom {p['headroom_bytes']}, "
                        f"fit said {wide['headroom_bytes']}")
        if "hint: nothing searched fits" not in hint:
            errs.append(f"{name}: plan's hint: {hint!r}")
        return errs
    if ch is None:
        return [f"{name}: fit found nothing"]
    if list(ch) != CHANGE_KEYS:
        errs.append(f"{name}: keys {list(ch)}, want {CHANGE_KEYS}")
    if want is not None and ch["set"] != want:
        errs.append(f"{name}: change {ch['set']}, want {want}")
    p, _ = plan(gpumem, path, kv + ch["set"], gpu)
    got = {"fits": p["fits"], "headroom_bytes": p["headroom_bytes"],
           "gradient_accumulation_steps": p["gradient_accumulation_steps"],
           "peak_allocated_bytes": p["per_gpu"]["peak_allocated_bytes"],
           "peak_reserved_bytes": p["per_gpu"]["peak_reserved_bytes"],
           "device_used_bytes": p["per_gpu"]["device_used_bytes"]}
    said = dict((k, ch[k]) for k in got if k != "fits")
    said["fits"] = True
    if got != said:
        errs.append(f"{name}: plan with {ch['set']} gives {got}, fit "
                    f"said {said}")
    for s in smaller:
        q, _ = plan(gpumem, path, kv + s, gpu)
        if q["fits"]:
            errs.append(f"{name}: the smaller change {s} fits too")
    line = "hint: fits with " + " ".join("--set " + s for s in ch["set"])
    if line not in hint:
        errs.append(f"{name}: plan's hint {hint!r} lacks {line!r}")
    return errs


def main():
    gpumem, models = sys.argv[1], sys.argv[2]
    errs = []
    for c in CASES:
        try:
            errs += check(gpumem, models, *c)
        except RuntimeError as e:
            errs.append(str(e))
    for e in errs:
        print(e)
    print(f"{len(CASES)} cases, {len(errs)} problems")
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
