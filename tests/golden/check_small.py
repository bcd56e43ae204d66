#!/usr/bin/env python3
"""Small command-line behaviours: a section's key given to --set without
its section is named with it; `plan -` reads the spec from standard
input (messages say <stdin>:line:col); a single-valued option given twice,
or --gpu with --set hardware.gpu, is a usage error; a bad GPUMEM_LOG is
warned about once (gpumem run's command gets the level in effect);
`gpus --format json` gives aliases as a list; tables mark the fp16
figures of cards without bf16 and print sizes in GiB; a write error on
stdout is one message and a non-zero exit.

usage: check_small.py GPUMEM SPEC
"""
import json
import os
import re
import subprocess
import sys


def run(args, stdin=None, env=None, stdout=subprocess.PIPE, cwd=None):
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(args, input=stdin, stdout=stdout, cwd=cwd,
                          stderr=subprocess.PIPE, text=True, env=e)


def main():
    g, spec = sys.argv[1], sys.argv[2]
    errs = []

    def want(cond, what, r=None):
        if not cond:
            errs.append(what + (f": exit {r.returncode}, stderr "
                                f"{r.stderr!r}" if r else ""))

    r = run([g, "plan", spec, "--set", "micro_batch_size=4"])
    want(r.returncode == 2 and "'training.micro_batch_size'" in r.stderr,
         "--set micro_batch_size suggests training.micro_batch_size", r)
    r = run([g, "plan", spec, "--set", "precision=fp32"])
    want(r.returncode == 2 and "'training.precision'" in r.stderr and
         "'inference.precision'" in r.stderr,
         "--set precision names both sections", r)
    text = open(spec).read()
    # a spec on standard input has no folder: its relative paths
    # (model.hf_config) are read from the current directory
    g = os.path.abspath(g)
    r = run([g, "plan", "-", "--format", "json"], stdin=text,
            cwd=os.path.dirname(os.path.abspath(spec)))
    f = run([g, "plan", spec, "--format", "json"])
    want(r.returncode == f.returncode and r.stdout and
         json.loads(r.stdout)["per_gpu"] == json.loads(f.stdout)["per_gpu"],
         "plan - reads the spec from standard input", r)
    r = run([g, "plan", "-"], stdin="name: x\nmodel:\n  layers: -1\n")
    want(r.returncode == 2 and "<stdin>:3:11:" in r.stderr,
         "plan - names <stdin>:line:col", r)
    for args in (["plan", spec, "--format", "json", "--format", "table"],
                 ["plan", spec, "--gpu", "h200", "--gpu", "l4"],
                 ["plan", spec, "--gpu", "h200", "--set",
                  "hardware.gpu=l4"],
                 ["fit", spec, "--gpu", "h200", "--set", "hardware.gpu=l4"],
                 ["fit", spec, "--format", "csv", "--format", "json"],
                 ["gpus", "--format", "csv", "--format", "json"],
                 # every option but --set (and fit's --gpu), every command
                 ["plan", spec, "--fraction", "0.5", "--fraction", "0.6"],
                 ["plan", spec, "--limit", "1GiB", "--limit", "2GiB"],
                 ["plan", spec, "--params", "--params"],
                 ["fit", spec, "--fraction", "0.5", "--fraction", "0.6"],
                 ["fit", spec, "--limit", "1GiB", "--limit", "2GiB"],
                 ["fit", spec, "--global-batch", "8", "--global-batch",
                  "16"],
                 ["run", "--fraction", "0.5", "--fraction", "0.6", "--",
                  "true"],
                 ["run", "--limit", "1GiB", "--limit", "2GiB", "--",
                  "true"],
                 ["run", "--no-pinned", "--no-pinned", "--", "true"],
                 ["replay", "--cap", "1GiB", "--cap", "2GiB", spec],
                 ["replay", "--segments", "--segments", spec],
                 ["verify", "--limit", "1MiB", "--limit", "2MiB"],
                 ["verify", "--quick", "--quick"],
                 ["report", "--format", "json", "--format", "csv", spec]):
        r = run([g] + args)
        want(r.returncode == 2 and r.stdout == "" and
             ("more than once" in r.stderr or "both name" in r.stderr),
             " ".join(args[:1] + args[2:]) + " is a usage error", r)
    r = run([g, "run", "--", "sh", "-c", "echo $GPUMEM_LOG"],
            env={"GPUMEM_LOG": "bogus"})
    want(r.stderr.count("GPUMEM_LOG=bogus") == 1 and
         r.stdout.strip() == "warn",
         "a bad GPUMEM_LOG is warned about once", r)
    r = run([g, "gpus", "--format", "json"])
    gpus = json.loads(r.stdout)
    want(all(isinstance(x["aliases"], list) for x in gpus),
         "gpus --format json: aliases is a list")
    r = run([g, "gpus"])
    v100 = [ln for ln in r.stdout.splitlines() if "V100-SXM2-32GB" in ln]
    h200 = [ln for ln in r.stdout.splitlines() if "NVIDIA H200 " in ln]
    want(v100 and "(fp16)" in v100[0] and h200 and "(fp16)" not in h200[0],
         "gpus table marks fp16 figures of cards without bf16")
    r = run([g, "fit", spec, "--gpu", "Tesla V100-SXM2-32GB"])
    want("125 (fp16)" in r.stdout, "fit table marks the fp16 figure", r)
    for args in (["plan", spec], ["fit", spec, "--gpu", "h200"], ["gpus"]):
        r = run([g] + args)
        bad = [ln for ln in r.stdout.splitlines()
               if re.search(r"\d (B|KiB|MiB)\b", ln)]
        want(not bad, " ".join(args[:1]) + " table prints sizes in GiB: "
             + repr(bad[:3]))
    for args in (["gpus"], ["gpus", "--format", "json"], ["plan", spec],
                 ["fit", spec, "--gpu", "h200"]):
        with open("/dev/full", "w") as full:
            r = run([g] + args, stdout=full)
        lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
        want(r.returncode != 0 and len(lines) == 1,
             " ".join(args[:1]) + " > /dev/full: one error, non-zero", r)
    # under task inference a LoRA spec's training section is ignored,
    # its adapter with it, with the section's warning (not an error)
    r = run([g, "plan", os.path.join(os.path.dirname(os.path.abspath(spec)),
                                     "llama-2-7b-lora.yaml"),
             "--set", "task=inference", "--gpu", "h100"])
    want(r.returncode == 0 and "training: ignored for task inference" in
         r.stderr, "LoRA spec under --set task=inference", r)
    # PyTorch's recipe plans one data-parallel rank unwrapped: the ZeRO
    # stage moves nothing there (FSDP's mixed-precision policy included)
    l7 = os.path.join(os.path.dirname(os.path.abspath(spec)),
                      "llama-2-7b.yaml")
    got = []
    for z in ("0", "3"):
        r = run([g, "plan", l7, "--gpu", "h100", "--format", "json",
                 "--set", "parallelism.data_parallel=1",
                 "--set", "parallelism.zero_stage=" + z])
        got.append(json.loads(r.stdout)["per_gpu"])
    want(got[0] == got[1], "plan at data_parallel 1: zero_stage 3 differs "
         "from 0", r)
    lora = os.path.join(os.path.dirname(os.path.abspath(spec)),
                        "llama-2-7b-lora.yaml")
    # a LoRA spec is modelled on one GPU only: min_gpus searches no more
    # ranks and says why it is none under a cap its base does not fit
    r = run([g, "fit", lora, "--gpu", "rtx-4090", "--fraction", "0.3",
             "--format", "json"])
    row = json.loads(r.stdout)["gpus"][0]
    want(row["min_gpus"] == 0 and row["min_gpus_none"] == "none on one GPU",
         "fit: LoRA's min_gpus none says one GPU", r)
    r = run([g, "fit", lora, "--gpu", "h100", "--format", "json"])
    row = json.loads(r.stdout)["gpus"][0]
    want(row["min_gpus"] == 1, "fit: LoRA on an H100: min_gpus 1", r)
    # a change that offloads to the host says how much host memory a
    # rank then needs (the plan's host_bytes)
    q3 = os.path.join(os.path.dirname(os.path.abspath(spec)), "..", "tests",
                      "data", "plan", "llama-2-7b-ds-auto.yaml")
    r = run([g, "plan", q3, "--gpu", "a10", "--set",
             "parallelism.offload_optimizer=none", "--set",
             "parallelism.zero_stage=3"])
    m = re.search(r"hint: fits with .*offload_optimizer=cpu .*host memory "
                  r"([\d.]+) GiB a rank\)", r.stderr)
    r2 = run([g, "plan", q3, "--gpu", "a10", "--format", "json",
              "--set", "parallelism.zero_stage=3",
              "--set", "parallelism.offload_optimizer=cpu"])
    host = json.loads(r2.stdout)["host_bytes"] / 2**30 if r2.stdout else -1
    want(m and abs(float(m.group(1)) - host) < 0.006,
         "an offloading hint gives the host memory of its plan", r)
    # inference where not even batch 1 fits one GPU: min gpus is at batch
    # 1, the tensor parallel the smallest change uses (not 'none' beside
    # an 8-GPU change that fits)
    l3 = os.path.join(os.path.dirname(os.path.abspath(spec)), "..", "tests",
                      "data", "plan", "llama-3-8b-infer.yaml")
    r = run([g, "fit", l3, "--gpu", "a100-40gb:1g.5gb", "--format", "json"])
    row = json.loads(r.stdout)["gpus"][0]
    ch = row.get("smallest_change") or {}
    want(row["max_micro_batch"] == 0 and row["min_gpus"] > 0 and
         row["min_gpus_micro_batch"] == 1 and
         (not ch or row["min_gpus"] <= ch.get("gpus", 0)),
         "fit: inference min gpus at batch 1 where none fits one GPU", r)
    # the analytic reserve has no closed forms for adapters or DeepSpeed:
    # refused, not planned unsharded
    for sp in (lora, q3):
        for cmd in ("plan", "fit"):
            r = run([g, cmd, sp, "--gpu", "h100", "--reserve-model",
                     "analytic"])
            want(r.returncode == 2 and "--reserve-model analytic: not "
                 "modelled for" in r.stderr,
                 cmd + " --reserve-model analytic refuses " + sp, r)
    # a value the DeepSpeed JSON's "auto" took is said where the spec is
    # then refused for it
    plan_dir = os.path.join(os.path.dirname(os.path.abspath(spec)), "..",
                            "tests", "data", "plan")
    dsa = ("name: t\nmodel:\n  architecture: llama\n  layers: 2\n"
           "  hidden_size: 4096\n  attention_heads: 32\ntraining:\n"
           "  framework: deepspeed\n  deepspeed_config: "
           "ds-zero2-offload-auto.json\nparallelism:\n  data_parallel: 8\n")
    r = run([os.path.abspath(g), "plan", "-", "--set",
             "training.global_batch_size=32"], stdin=dsa, cwd=plan_dir)
    want(r.returncode == 2 and "assumed 8 (TrainingArguments' default)" in
         r.stderr and "32 is not a multiple of micro_batch_size 8" in
         r.stderr, "a refused spec says the DeepSpeed value it assumed", r)
    # nothing searched fits and every lever's last step together is
    # refused (LoRA on more than one GPU): the widest change is the
    # widest the validator accepts, QLoRA at micro-batch 1 on one GPU
    r = run([g, "fit", lora, "--gpu", "a100-40gb:1g.5gb", "--format",
             "json"])
    w = json.loads(r.stdout)["gpus"][0].get("widest_change") or {}
    want(w.get("set") == ["training.micro_batch_size=1",
                          "training.adapter=qlora"] and w.get("gpus") == 1
         and w.get("headroom_bytes", 0) < 0,
         "fit: LoRA on a 1g.5gb slice has its widest change", r)
    # nothing searched fits and no lever has a step left (inference at
    # batch 1, tensor parallel 8): the hint names no empty change
    models = os.path.dirname(os.path.abspath(spec))
    ds = ("name: ds-inference\ntask: inference\nmodel:\n"
          "  hf_config: configs/deepseek-v3.json\n"
          "  parameters: 671026404352\ninference:\n  batch_size: 1\n"
          "  prompt_length: 2048\n  generate_length: 256\n"
          "  precision: bf16-true\nparallelism:\n  tensor_parallel: 8\n"
          "hardware:\n  gpu: NVIDIA H200\n")
    r = run([os.path.abspath(g), "plan", "-"], stdin=ds, cwd=models)
    want(r.returncode == 1 and "nothing searched fits" in r.stderr and
         "not even  (" not in r.stderr and "no change is left to try "
         "(8 GPUs, batch 1:" in r.stderr, "hint with no change left", r)
    # inference plans ignore the training parallelism keys, and say so
    # (tensor parallel is planned: no warning); a train spec's
    # inference section is said to be ignored, as the reverse is
    llama = ("name: l7\ntask: inference\nmodel:\n"
             "  hf_config: configs/llama-2-7b.json\ninference:\n"
             "  batch_size: 1\n  prompt_length: 256\n"
             "  generate_length: 16\n  precision: bf16-true\n"
             "hardware:\n  gpu: NVIDIA H200\n")
    sets = []
    for k in ("data_parallel=8", "zero_stage=3", "tensor_parallel=2"):
        sets += ["--set", "parallelism." + k]
    r = run([os.path.abspath(g), "plan", "-"] + sets, stdin=llama,
            cwd=models)
    for k in ("data_parallel", "zero_stage"):
        want(r.returncode == 0 and r.stderr.count(
             f"warning: --set parallelism.{k} is a training setting; "
             "inference ignores it") == 1, f"inference warns on {k}", r)
    want("tensor_parallel is a training" not in r.stderr,
         "inference plans tensor_parallel", r)
    r = run([os.path.abspath(g), "plan", "-"], cwd=models,
            stdin=llama + "parallelism:\n  zero_stage: 3\n")
    want("<stdin>:13:15: parallelism.zero_stage is a training setting" in
         r.stderr, "the warning names the spec's line", r)
    r = run([g, "plan", spec, "--set", "inference.batch_size=4"])
    want(r.returncode in (0, 1) and
         "--set inference: ignored for task train" in r.stderr,
         "a train spec's inference section is said to be ignored", r)
    # fp32 with FlashAttention: warned, with what is planned
    r = run([g, "plan", spec, "--set", "training.precision=fp32", "--set",
             "training.attention=flash"])
    want(r.returncode in (0, 1) and "FlashAttention runs only in fp16 or "
         "bf16" in r.stderr and "memory-efficient kernel" in r.stderr,
         "fp32 + flash is warned", r)
    r = run([g, "plan", spec, "--set", "training.precision=bf16-mixed",
             "--set", "training.attention=flash", "--gpu", "h200"])
    want("FlashAttention runs only" not in r.stderr,
         "bf16 + flash is not warned", r)
    # a --limit above the card never binds: said, with the bound used
    for cmd in (["plan"], ["fit"]):
        r = run([g] + cmd + [spec, "--gpu", "a100-80gb", "--limit",
                             "200GiB"])
        want("the cap 200.00 GiB is above NVIDIA A100-SXM4-80GB's usable "
             "memory (79.26 GiB, CUDA's total): it never binds, and the "
             "plan is against the card's 79.26 GiB" in r.stderr,
             cmd[0] + " --limit above the card", r)
    r = run([g, "fit", spec, "--limit", "40GiB"])
    want(re.search(r"warning: the cap 40.00 GiB is above the usable memory "
                   r"of \d+ of the \d+ GPUs planned", r.stderr),
         "fit over the catalog: one line for the GPUs a limit is above", r)
    r = run([g, "plan", spec, "--gpu", "a100-80gb", "--limit", "20GiB"])
    want("never binds" not in r.stderr, "a limit below the card binds", r)
    for e in errs:
        print(e)
    return 1 if errs else 0


if __name__ == "__main__":
    sys.exit(main())
