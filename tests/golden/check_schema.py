#!/usr/bin/env python3
"""plan's and fit's machine-readable output: the run's shape (GPUs in
all, each degree, sharding, batch) in JSON and in the table header;
kind and version; a fixed CSV column set per command, the one
planner/README.md ("Output schema") lists, whatever the spec (pipeline
stages, one --set or two in a change); fit's JSON an object.
usage: check_schema.py GPUMEM SOURCE_ROOT"""
import csv
import io
import json
import os
import subprocess
import sys

G, ROOT = sys.argv[1], sys.argv[2]
MODELS = os.path.join(ROOT, "models")
PLAN = os.path.join(ROOT, "tests", "data", "plan")
errs = []


def run(*args):
    r = subprocess.run([G, *args], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{args}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def want(cond, what):
    if not cond:
        errs.append(what)


def documented(prefix):
    """The column line of planner/README.md that starts with prefix."""
    for line in open(os.path.join(ROOT, "planner", "README.md")):
        if line.startswith("    " + prefix):
            return line.strip().split(",")
    return None


def header(text):
    return next(csv.reader(io.StringIO(text)))


def rows(text):
    return list(csv.DictReader(io.StringIO(text)))


# 1. The shape of llama-2-7b's run: 8 FSDP ranks, global batch 64.
spec = os.path.join(MODELS, "llama-2-7b.yaml")
p = json.loads(run("plan", spec, "--gpu", "h100", "--format", "json"))
want(p.get("kind") == "gpumem-plan" and p.get("version") == 1,
     f"plan json kind/version: {p.get('kind')} {p.get('version')}")
want(p.get("gpus") == 8, f"plan json gpus {p.get('gpus')}, want 8")
par = p.get("parallelism", {})
want(par.get("data_parallel") == 8 and par.get("zero_stage") == 3 and
     par.get("fsdp") is True and
     par.get("fsdp_mixed_precision") == "param-dtype",
     f"plan json parallelism {par}")
b = p.get("batch", {})
want(b == {"micro_batch": 1, "gradient_accumulation_steps": 8,
           "global_batch": 64, "sequence_length": 4096},
     f"plan json batch {b}")
t = run("plan", spec, "--gpu", "h100")
want("\ngpus                         8 = data parallel 8 x tensor parallel 1 "
     "x pipeline parallel 1\n" in t, "table: no 'gpus 8 = ...' line")
want("ZeRO-3 (FSDP2 fully_shard)" in t, "table: no ZeRO-3 / FSDP2")
want("global batch 64 sequences = micro-batch 1 x 8 accumulation steps x 8 "
     "data-parallel ranks" in t, "table: no global batch")
one = json.loads(run("plan", spec, "--gpu", "h100", "--set",
                     "parallelism.data_parallel=1", "--format", "json"))
want(one["gpus"] == 1 and one["parallelism"]["fsdp"] is False,
     "one GPU: gpus 1, no FSDP")
# inference: batch, prompt, generated; no accumulation
inf = json.loads(run("plan", os.path.join(PLAN, "llama-3-8b-infer.yaml"),
                     "--format", "json"))
want(set(inf["batch"]) == {"batch", "prompt_length", "generate_length"},
     f"inference batch keys {sorted(inf['batch'])}")
# DeepSpeed with offload and a pipeline spec name their shape
ds = json.loads(run("plan", os.path.join(PLAN, "llama-2-7b-deepspeed.yaml"),
                    "--format", "json"))
want(ds["recipe"].startswith("deepspeed-zero") and
     ds["parallelism"]["fsdp"] is False, "deepspeed: fsdp false")

# 2. plan CSV: one column set, the README's, with and without stages.
cols = documented("kind,version,row,")
want(cols is not None, "planner/README.md lists no plan CSV columns")
flat = run("plan", spec, "--format", "csv")
pp = run("plan", os.path.join(PLAN, "llama-2-13b-v100-pp.yaml"),
         "--format", "csv")
want(header(flat) == cols, "plan csv columns differ from the README's")
want(header(pp) == cols, "plan csv columns change with pipeline stages")
r = rows(pp)
want(len(r) == 1 + int(r[0]["pipeline_parallel"]) and
     r[0]["row"] == "per_gpu" and all(x["row"] == "stage" for x in r[1:]),
     f"plan csv: {len(r)} rows for the pipeline")
want(rows(flat)[0]["gpus"] == "8", "plan csv gpus")

# 3. fit: JSON an object, CSV columns fixed (a change of two --set
# strings on the L4, none on the H100).
fcols = documented("kind,version,name,global_batch,")
want(fcols is not None, "planner/README.md lists no fit CSV columns")
g2 = os.path.join(MODELS, "gpt2-large.yaml")
l4 = run("fit", g2, "--gpu", "l4", "--format", "csv")
h100 = run("fit", g2, "--gpu", "h100", "--format", "csv")
want(header(l4) == fcols and header(h100) == fcols,
     "fit csv columns depend on the answers or differ from the README's")
want(len(rows(l4)[0]["smallest_change_set"].split()) == 2,
     "fit csv: the L4's change has two --set strings")
f = json.loads(run("fit", g2, "--gpu", "l4", "--global-batch", "8",
                   "--format", "json"))
want(isinstance(f, dict) and f.get("kind") == "gpumem-fit" and
     f.get("version") == 1 and f.get("global_batch") == 8 and
     f.get("spec") == g2 and isinstance(f.get("gpus"), list) and
     f["gpus"][0]["gpu"] == "NVIDIA L4",
     f"fit json: {str(f)[:200]}")

# 4. Tables head GB/s as GB/s (bandwidth_gbps holds 10^9 bytes a second).
for args in (("fit", g2, "--gpu", "h100"), ("gpus",)):
    out = run(*args)
    want("gbps" not in out and "bandwidth GB/s" in out,
         f"{args[0]} table: bandwidth not headed GB/s")

for e in errs:
    print("FAIL: " + e)
print(f"{len(errs)} failures")
sys.exit(1 if errs else 0)
