#!/usr/bin/env python3
"""make_calibration.py - write the calibration set: one fully spelled spec
per configuration under tests/data/calibration/specs/ and the manifest.

    make_calibration.py [--out tests/data/calibration] [--check]

The table below is the source; the files are generated so that every key
is spelled out (no defaults that the harness and the planner could read
differently). --check regenerates into memory and fails if the committed
files differ. Held-out configurations (never used to tune the planner):
heldout(name) = int(sha256(name)[:8], 16) % 3 == 0, a rule that keeps each
configuration's side when others are added.
"""

import argparse
import hashlib
import json
import os
import sys

GPU = "NVIDIA H200"

SHAPES = {
    # name: architecture, layers, hidden, ffn, heads, kv_heads, vocab,
    #       tied, max_positions; sources: HF model cards' config.json
    "gpt2-124m": ("gpt2", 12, 768, 3072, 12, 12, 50257, True, 1024),
    "gpt2-355m": ("gpt2", 24, 1024, 4096, 16, 16, 50257, True, 1024),
    "gpt2-1.5b": ("gpt2", 48, 1600, 6400, 25, 25, 50257, True, 1024),
    "bert-base": ("bert", 12, 768, 3072, 12, 12, 30522, True, 512),
    "bert-large": ("bert", 24, 1024, 4096, 16, 16, 30522, True, 512),
    # a small Llama (134M) and TinyLlama-1.1B's shape (grouped-query)
    "llama-134m": ("llama", 12, 768, 2048, 12, 12, 32000, False, 4096),
    "llama-1.1b": ("llama", 22, 2048, 5632, 32, 4, 32000, False, 4096),
    # a Qwen-sized vocabulary of 151,936 on a 0.46B Llama, tied
    "llama-0.5b-v152k": ("llama", 24, 1024, 2816, 16, 16, 151936, True,
                         4096),
    # OpenLLaMA-3B's shape, Llama-2-7B, Llama-2-13B
    "llama-3b": ("llama", 26, 3200, 8640, 32, 32, 32000, False, 4096),
    "llama-7b": ("llama", 32, 4096, 11008, 32, 32, 32000, False, 4096),
    "llama-13b": ("llama", 40, 5120, 13824, 40, 40, 32000, False, 4096),
}

# (config name, shape, head, task section)
# train: (precision, optimizer, checkpointing, attention, micro_batch,
#         sequence_length, global_batch or None)
# infer: ("infer", precision, batch, prompt, generate)
T = "train"
CONFIGS = [
    ("gpt2-124m-bf16mixed-adamw", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 8, 1024, None)),
    ("gpt2-124m-fp32-adamw", "gpt2-124m", "causal-lm",
     ("fp32", "adamw", "none", "sdpa", 8, 1024, None)),
    ("gpt2-124m-fp16mixed-adamw", "gpt2-124m", "causal-lm",
     ("fp16-mixed", "adamw", "none", "sdpa", 8, 1024, None)),
    ("gpt2-124m-bf16true-adamw", "gpt2-124m", "causal-lm",
     ("bf16-true", "adamw", "none", "sdpa", 8, 1024, None)),
    ("gpt2-124m-eager", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "adamw", "none", "eager", 8, 1024, None)),
    ("gpt2-124m-fullckpt-mb32", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 32, 1024, None)),
    ("gpt2-124m-selective-eager", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "adamw", "selective", "eager", 8, 1024, None)),
    ("gpt2-124m-sgd-seq256-mb64", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "sgd", "none", "sdpa", 64, 256, None)),
    ("gpt2-124m-cls-seq512", "gpt2-124m", "classification",
     ("bf16-mixed", "adamw", "none", "sdpa", 16, 512, None)),
    ("gpt2-124m-ga4", "gpt2-124m", "causal-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 8, 1024, 32)),
    ("gpt2-124m-infer-gen", "gpt2-124m", "causal-lm",
     ("infer", "bf16-true", 16, 512, 128)),
    ("gpt2-355m-flash-bf16true", "gpt2-355m", "causal-lm",
     ("bf16-true", "adamw", "none", "flash", 8, 1024, None)),
    ("gpt2-355m-fp16mixed-adam", "gpt2-355m", "causal-lm",
     ("fp16-mixed", "adam", "none", "sdpa", 8, 1024, None)),
    ("gpt2-355m-fp32-sgdm-eager", "gpt2-355m", "causal-lm",
     ("fp32", "sgd-momentum", "none", "eager", 4, 1024, None)),
    ("gpt2-355m-infer-fp32-forward", "gpt2-355m", "causal-lm",
     ("infer", "fp32", 8, 1024, 0)),
    ("gpt2-1.5b-bf16mixed-adamw-fullckpt", "gpt2-1.5b", "causal-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 8, 1024, None)),
    ("gpt2-1.5b-bf16true-sgdm", "gpt2-1.5b", "causal-lm",
     ("bf16-true", "sgd-momentum", "none", "sdpa", 4, 1024, None)),
    ("gpt2-1.5b-selective-sdpa", "gpt2-1.5b", "causal-lm",
     ("bf16-mixed", "adamw", "selective", "sdpa", 4, 1024, None)),
    ("bert-base-mlm-bf16mixed", "bert-base", "masked-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 32, 512, None)),
    ("bert-base-mlm-fp32-eager", "bert-base", "masked-lm",
     ("fp32", "adamw", "none", "eager", 16, 512, None)),
    ("bert-base-cls-fp16mixed-seq128-mb256", "bert-base", "classification",
     ("fp16-mixed", "adamw", "none", "sdpa", 256, 128, None)),
    ("bert-base-mlm-fullckpt-mb128", "bert-base", "masked-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 128, 512, None)),
    ("bert-base-infer-forward", "bert-base", "masked-lm",
     ("infer", "bf16-true", 64, 512, 0)),
    ("bert-large-mlm-bf16mixed", "bert-large", "masked-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 16, 512, None)),
    ("bert-large-cls-fp32-sgd", "bert-large", "classification",
     ("fp32", "sgd", "none", "sdpa", 32, 256, None)),
    ("bert-large-mlm-selective-eager", "bert-large", "masked-lm",
     ("bf16-mixed", "adamw", "selective", "eager", 16, 512, None)),
    ("llama-134m-bf16mixed-adamw", "llama-134m", "causal-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 8, 2048, None)),
    ("llama-134m-fp32-adam-seq512", "llama-134m", "causal-lm",
     ("fp32", "adam", "none", "sdpa", 8, 512, None)),
    ("llama-134m-eager-seq1024", "llama-134m", "causal-lm",
     ("bf16-mixed", "adamw", "none", "eager", 8, 1024, None)),
    ("llama-134m-bf16true-sgd-seq8192", "llama-134m", "causal-lm",
     ("bf16-true", "sgd", "none", "sdpa", 2, 8192, None)),
    ("llama-134m-fullckpt-seq16384", "llama-134m", "causal-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 1, 16384, None)),
    ("llama-1.1b-bf16mixed-adamw", "llama-1.1b", "causal-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None)),
    ("llama-1.1b-flash-bf16mixed", "llama-1.1b", "causal-lm",
     ("bf16-mixed", "adamw", "none", "flash", 4, 4096, None)),
    ("llama-1.1b-fp16mixed-adamw-fullckpt", "llama-1.1b", "causal-lm",
     ("fp16-mixed", "adamw", "full", "sdpa", 16, 2048, None)),
    ("llama-1.1b-eager-mb2", "llama-1.1b", "causal-lm",
     ("bf16-mixed", "adamw", "none", "eager", 2, 2048, None)),
    ("llama-1.1b-selective-sdpa", "llama-1.1b", "causal-lm",
     ("bf16-mixed", "adamw", "selective", "sdpa", 4, 2048, None)),
    ("llama-1.1b-bf16true-sgdm-ga8", "llama-1.1b", "causal-lm",
     ("bf16-true", "sgd-momentum", "none", "sdpa", 4, 2048, 32)),
    ("llama-1.1b-cls-bf16true-adamw", "llama-1.1b", "classification",
     ("bf16-true", "adamw", "none", "sdpa", 8, 1024, None)),
    ("llama-1.1b-infer-forward-prompt4096", "llama-1.1b", "causal-lm",
     ("infer", "bf16-true", 4, 4096, 0)),
    ("llama-0.5b-v152k-bf16mixed-adamw", "llama-0.5b-v152k", "causal-lm",
     ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None)),
    ("llama-0.5b-v152k-bf16true-adamw-fullckpt", "llama-0.5b-v152k",
     "causal-lm", ("bf16-true", "adamw", "full", "sdpa", 8, 2048, None)),
    ("llama-0.5b-v152k-infer-gen", "llama-0.5b-v152k", "causal-lm",
     ("infer", "bf16-true", 8, 1024, 64)),
    ("llama-3b-bf16mixed-adamw-fullckpt", "llama-3b", "causal-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 4, 2048, None)),
    ("llama-3b-fp32-sgdm-seq1024", "llama-3b", "causal-lm",
     ("fp32", "sgd-momentum", "none", "sdpa", 2, 1024, None)),
    ("llama-3b-infer-fp16-gen", "llama-3b", "causal-lm",
     ("infer", "fp16-true", 4, 1024, 64)),
    ("llama-7b-bf16true-adamw", "llama-7b", "causal-lm",
     ("bf16-true", "adamw", "none", "sdpa", 1, 2048, None)),
    ("llama-7b-bf16mixed-sgdm-fullckpt", "llama-7b", "causal-lm",
     ("bf16-mixed", "sgd-momentum", "full", "sdpa", 2, 4096, None)),
    ("llama-7b-fp32-sgd-fullckpt", "llama-7b", "causal-lm",
     ("fp32", "sgd", "full", "sdpa", 1, 1024, None)),
    ("llama-7b-infer-gen", "llama-7b", "causal-lm",
     ("infer", "bf16-true", 8, 2048, 64)),
    ("llama-13b-bf16true-sgd-fullckpt", "llama-13b", "causal-lm",
     ("bf16-true", "sgd", "full", "sdpa", 1, 2048, None)),
    ("llama-13b-bf16true-adamw-fullckpt", "llama-13b", "causal-lm",
     ("bf16-true", "adamw", "full", "sdpa", 1, 2048, None)),
    # expected not to fit one H200: fp32 weights, grads and Adam states
    ("llama-13b-bf16mixed-adamw-oom", "llama-13b", "causal-lm",
     ("bf16-mixed", "adamw", "full", "sdpa", 1, 2048, None)),
    ("llama-13b-infer-gen", "llama-13b", "causal-lm",
     ("infer", "bf16-true", 8, 2048, 32)),
]


# Several GPUs (measure_multi.py): (name, shape, head, train task,
# (data_parallel, tensor_parallel, zero_stage)). Each runs on dp x tp GPUs.
MULTI = []
for n in (2, 4):
    MULTI += [
        (f"llama-1.1b-ddp{n}", "llama-1.1b", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None), (n, 1, 0)),
        (f"llama-1.1b-zero1-dp{n}", "llama-1.1b", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None), (n, 1, 1)),
        (f"llama-1.1b-fsdp{n}", "llama-1.1b", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None), (n, 1, 3)),
        (f"llama-1.1b-tp{n}", "llama-1.1b", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 4, 2048, None), (1, n, 0)),
        (f"gpt2-355m-ddp{n}-fp32-sgdm", "gpt2-355m", "causal-lm",
         ("fp32", "sgd-momentum", "none", "sdpa", 8, 1024, None), (n, 1, 0)),
        (f"llama-7b-fsdp{n}-bf16true-fullckpt", "llama-7b", "causal-lm",
         ("bf16-true", "adamw", "full", "sdpa", 2, 2048, None), (n, 1, 3)),
        (f"llama-7b-tp{n}-bf16true-fullckpt", "llama-7b", "causal-lm",
         ("bf16-true", "adamw", "full", "sdpa", 2, 2048, None), (1, n, 0)),
        # added with one torchrun per configuration (measure_multi.py)
        (f"gpt2-124m-ddp{n}-bf16mixed-adamw", "gpt2-124m", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 16, 1024, None), (n, 1, 0)),
        (f"bert-base-mlm-ddp{n}-fp16mixed", "bert-base", "masked-lm",
         ("fp16-mixed", "adamw", "none", "sdpa", 32, 512, None), (n, 1, 0)),
        (f"llama-134m-fsdp{n}-fp32-sgdm", "llama-134m", "causal-lm",
         ("fp32", "sgd-momentum", "none", "sdpa", 8, 2048, None), (n, 1, 3)),
        (f"llama-0.5b-v152k-zero1-dp{n}-fullckpt", "llama-0.5b-v152k",
         "causal-lm",
         ("bf16-mixed", "adamw", "full", "sdpa", 8, 2048, None), (n, 1, 1)),
        (f"llama-3b-tp{n}-bf16mixed-fullckpt", "llama-3b", "causal-lm",
         ("bf16-mixed", "adamw", "full", "sdpa", 4, 2048, None), (1, n, 0)),
        (f"llama-3b-fsdp{n}-bf16true-sgd", "llama-3b", "causal-lm",
         ("bf16-true", "sgd", "none", "sdpa", 2, 4096, None), (n, 1, 3)),
        (f"gpt2-355m-fsdp{n}-bf16mixed", "gpt2-355m", "causal-lm",
         ("bf16-mixed", "adamw", "none", "sdpa", 16, 1024, None), (n, 1, 3)),
        (f"llama-7b-zero1-dp{n}-bf16true-fullckpt", "llama-7b", "causal-lm",
         ("bf16-true", "adamw", "full", "sdpa", 2, 2048, None), (n, 1, 1)),
        (f"llama-134m-ddp{n}-eager-seq2048", "llama-134m", "causal-lm",
         ("bf16-mixed", "adamw", "none", "eager", 4, 2048, None), (n, 1, 0)),
        (f"gpt2-124m-zero1-dp{n}-fp32-adamw", "gpt2-124m", "causal-lm",
         ("fp32", "adamw", "none", "sdpa", 8, 1024, None), (n, 1, 1)),
    ]


def heldout(name):
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 3 == 0


def spec_yaml(name, shape, head, task, par=(1, 1, 0)):
    arch, layers, h, ffn, heads, kv, vocab, tied, maxpos = SHAPES[shape]
    out = ["# Calibration configuration (generated by "
           f"tools/measure/make_calibration.py; edit the table there).",
           f"name: {name}",
           f"task: {'inference' if task[0] == 'infer' else 'train'}",
           "model:",
           f"  architecture: {arch}",
           f"  layers: {layers}",
           f"  hidden_size: {h}",
           f"  ffn_hidden_size: {ffn}",
           f"  attention_heads: {heads}",
           f"  kv_heads: {kv}",
           f"  vocab_size: {vocab}",
           f"  max_position_embeddings: {maxpos}"]
    if arch == "bert":
        out.append("  type_vocab_size: 2")
    out += [f"  tied_embeddings: {'true' if tied else 'false'}",
            f"  head: {head}"]
    if head == "classification":
        out.append("  num_labels: 2")
    if task[0] == "infer":
        _, prec, batch, prompt, gen = task
        kv_dtype = {"bf16-true": "bf16", "fp16-true": "fp16",
                    "fp32": "fp32"}[prec]
        out += ["inference:",
                f"  precision: {prec}",
                f"  batch_size: {batch}",
                f"  prompt_length: {prompt}",
                f"  generate_length: {gen}",
                f"  kv_cache_dtype: {kv_dtype}"]
    else:
        prec, opt, ckpt, attn, mb, seq, gbs = task
        out += ["training:",
                f"  micro_batch_size: {mb}"]
        if gbs:
            out.append(f"  global_batch_size: {gbs}")
        out += [f"  sequence_length: {seq}",
                f"  precision: {prec}",
                f"  optimizer: {opt}",
                f"  activation_checkpointing: {ckpt}",
                f"  attention: {attn}"]
    out += ["parallelism:",
            f"  data_parallel: {par[0]}",
            f"  tensor_parallel: {par[1]}",
            "  pipeline_parallel: 1",
            "  sequence_parallel: false",
            f"  zero_stage: {par[2]}"]
    if par[1] > 1:
        # measure_multi.py replicates the embedding and lm_head
        out.append("  tensor_parallel_vocab: replicated")
    if par[1] > 1 or par[2] == 3:
        # and builds the model whole before sharding it
        out.append("  built_whole: true")
    if par[2] == 3 and prec.endswith("-mixed"):
        # measure_multi.py runs FSDP2 under torch.autocast with fp32
        # unsharded parameters, not a MixedPrecisionPolicy
        out.append("  fsdp_mixed_precision: autocast")
    out += ["hardware:",
            f"  gpu: {GPU}", ""]
    return "\n".join(out)


def files():
    out = {}
    for sub, table in (("", [c + ((1, 1, 0),) for c in CONFIGS]),
                       ("multi/", MULTI)):
        manifest = {
            "format": "gpumem-calibration-manifest-1",
            "heldout_rule": "int(sha256(name)[:8], 16) % 3 == 0",
            "configs": []}
        names = set()
        for name, shape, head, task, par in table:
            assert name not in names, name
            names.add(name)
            out[f"{sub}specs/{name}.yaml"] = spec_yaml(name, shape, head,
                                                       task, par)
            manifest["configs"].append({"name": name,
                                        "spec": f"specs/{name}.yaml",
                                        "set": [], "heldout": heldout(name)})
        out[f"{sub}manifest.json"] = json.dumps(manifest, indent=1) + "\n"
    return out


def main():
    ap = argparse.ArgumentParser()
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(
        here, "..", "..", "tests", "data", "calibration"))
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()
    want = files()
    if args.check:
        bad = 0
        for rel, text in want.items():
            p = os.path.join(args.out, rel)
            try:
                with open(p) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                bad += 1
                print(f"differs from the generator: {p}")
        for sub in ("specs", "multi/specs"):
            d = os.path.join(args.out, sub)
            have = {f"{sub}/{f}" for f in os.listdir(d)} \
                if os.path.isdir(d) else set()
            for e in sorted(have - set(want)):
                bad += 1
                print(f"not in the generator's table: {e}")
        n = len(CONFIGS)
        h = sum(heldout(c[0]) for c in CONFIGS)
        print(f"{n} configurations, {h} held out")
        return 1 if bad else 0
    for rel, text in want.items():
        os.makedirs(os.path.dirname(os.path.join(args.out, rel)),
                    exist_ok=True)
        with open(os.path.join(args.out, rel), "w") as f:
            f.write(text)
    n = len(CONFIGS)
    print(f"wrote {n} configurations "
          f"({sum(heldout(c[0]) for c in CONFIGS)} held out) and "
          f"{len(MULTI)} for several GPUs to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
