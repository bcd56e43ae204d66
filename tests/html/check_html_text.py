#!/usr/bin/env python3
"""The --html page's words, without a browser: "How the run is built"
says what plan's JSON planned (the recipe's name, the GPUs, the
framework, the adapter, FSDP's mixed precision, offload, experts,
inference), and the fit page's table says what fit's table says (the
"(fp16)" marker, one rounding rule, the smallest change, batch rather
than micro-batch for inference), its title GPU models, not a run's GPUs;
a row's bar at the table's figure and the usable memory beside the
capacity; a plan nothing searched fits says so with plan's hint.
usage: check_html_text.py GPUMEM SOURCE_ROOT"""
import html as htmllib
import json
import os
import re
import subprocess
import sys
import tempfile

G, ROOT = sys.argv[1], sys.argv[2]
errs = []
TMP = tempfile.mkdtemp(prefix="gm-html-text-")


def run(args):
    r = subprocess.run([G, *args], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{args}: exit {r.returncode}: {r.stderr}")
    return r.stdout


def page(args):
    out = os.path.join(TMP, "p.html")
    run(args + ["--html", out])
    return open(out, encoding="utf-8").read()


def text(h):
    return htmllib.unescape(re.sub(r"<[^>]*>", " ", h))


def section(h, title):
    m = re.search(r"<h2>%s</h2>(.*?)<h2>" % re.escape(title), h, re.S)
    return text(m.group(1)) if m else ""


def want(cond, what):
    if not cond:
        errs.append(what)


M = lambda *p: os.path.join(ROOT, *p)  # noqa: E731
PLANS = [
    # spec, --set, phrases the run's words must hold, phrases they must not
    (M("models", "llama-2-7b-lora.yaml"), [],
     ["PEFT LoRA", "frozen", "rank 16", "all-linear"], ["fp32 weights"]),
    (M("models", "llama-2-7b-qlora.yaml"), [],
     ["QLoRA", "NF4", "frozen", "rank 16"], ["fp32 weights"]),
    (M("tests", "data", "plan", "llama-2-7b-deepspeed.yaml"),
     ["parallelism.zero_stage=2"],
     ["DeepSpeed", "ZeRO-2", "optimizer offloaded to cpu",
      "fp32 master weights"], ["under torch.autocast", "(AMP",
                               "PyTorch's conventions"]),
    (M("models", "llama-2-7b.yaml"), [],
     ["FSDP2", "MixedPrecisionPolicy(param_dtype=bf16", "without autocast",
      "8 = data parallel 8"], ["under torch.autocast"]),
    (M("models", "llama-2-7b.yaml"),
     ["parallelism.fsdp_mixed_precision=autocast"],
     ["FSDP2", "under torch.autocast"], ["MixedPrecisionPolicy"]),
    (M("models", "mixtral-8x7b.yaml"), [],
     ["8 routed experts", "2 per token"], []),
    (M("tests", "data", "plan", "llama-2-7b-megatron.yaml"), [],
     ["Megatron-LM", "distributed optimizer", "main gradients"],
     ["under torch.autocast"]),
    (M("tests", "data", "plan", "llama-3-8b-infer.yaml"), [],
     ["inference", "KV cache", "batch 8"],
     ["micro-batch", "accumulation", "optimizer"]),
]
for spec, sets, has, hasnt in PLANS:
    extra = [a for s in sets for a in ("--set", s)]
    name = os.path.basename(spec) + " " + " ".join(sets)
    j = json.loads(run(["plan", spec, "--format", "json"] + extra))
    words = section(page(["plan", spec] + extra), "How the run is built")
    want(j["recipe"] in words, f"{name}: recipe {j['recipe']} not named")
    want(f"GPUs: {j['gpus']} = data parallel "
         f"{j['parallelism']['data_parallel']}" in words,
         f"{name}: the GPUs in all are not said")
    for w in has:
        want(w in words, f"{name}: '{w}' not in the run's words")
    for w in hasnt:
        want(w not in words, f"{name}: '{w}' in the run's words")

# fit: the cells as the table prints them, the smallest change
gpus = ["rtx-4090", "v100-32gb", "l40s"]
args = ["fit", M("models", "mixtral-8x7b.yaml")]
for g in gpus:
    args += ["--gpu", g]
h = page(args)
j = json.loads(run(args + ["--format", "json"]))
table = run(args)
t = text(h)
title = re.search(r"<title>(.*?)</title>", h).group(1)
want("3 GPU models" in title and "3 GPUs" not in title,
     f"fit title: {title!r}")
figures = section(h, "The figures")
want("(fp16)" in re.search(r"Tesla V100[^\n]*", figures).group(0),
     "fit page: V100's bf16 TFLOP/s without '(fp16)'")
# the table's TFLOP/s cell of the L40S row (cells are 2+ blanks apart)
head = re.split(r"\s{2,}", table.splitlines()[0].strip())
row = re.split(r"\s{2,}", re.search(r"^NVIDIA L40S .*$", table,
                                     re.M).group(0).strip())
tf = row[next(i for i, c in enumerate(head) if "TFLOP/s" in c)]
want(re.search(r"NVIDIA L40S [^\n]* %s " % re.escape(tf), figures),
     f"fit page: L40S's TFLOP/s differs from the table's {tf}")
for row in j["gpus"]:
    c = row.get("smallest_change")
    if c:
        s = " ".join("--set " + x for x in c["set"])
        want(s in t, f"fit page: {row['gpu']}'s change '{s}' missing")
want("none / -" not in t.replace("\u2013", "-"), "fit page: 'none / -'")
# outside the allocator: each card's figure, not the first row's
ctx = sorted({g["cuda_context_bytes"] for g in json.loads(run(
    ["gpus", "--format", "json"])) if g["name"] in
    [r["gpu"] for r in j["gpus"]]})
want(len(ctx) < 2 or "%.2f to %.2f GiB a GPU, by the card" %
     (ctx[0] / 2**30, ctx[-1] / 2**30) in t,
     f"fit page: outside the allocator not {ctx[0]}..{ctx[-1]} B")
# a row that fits as given: its change cell gives the spec's own
# micro-batch, and that plan's device used + headroom = the usable memory
# (the row's other cells are at its largest micro-batch)
args = ["fit", M("models", "mixtral-8x7b.yaml"), "--gpu", "h100",
        "--gpu", "h200"]
t = text(page(args))
given = re.findall(r"fits as given \(micro-batch (\d+): device used "
                   r"([\d.]+) GiB, headroom (-?[\d.]+) GiB\)", t)
want(len(given) == 2, f"fit page: {len(given)} 'fits as given' cells of 2")
for (mb, used, room), row in zip(given, json.loads(run(
        args + ["--format", "json"]))["gpus"]):
    u = row["usable_bytes"] / 2**30
    want(abs(float(used) + float(room) - u) < 0.015,
         f"fit page: {row['gpu']}: {used} + {room} GiB is not the usable "
         f"{u:.2f} GiB")
# a fraction gives each card its own cap: the page names no one cap
t = text(page(["fit", M("tests", "data", "plan", "llama-3-8b-infer.yaml"),
               "--gpu", "l40s", "--gpu", "h100", "--fraction", "0.5"]))
want("cap of" not in t and "each card's in the table's cap column" in t,
     "fit page under --fraction: one cap named for every card")
# a plan's figures that no bar shows, as its JSON has them
for spec, words, key in (
        (M("models", "llama-2-7b-lora.yaml"), "Trainable parameters: %d,",
         lambda j: j["trainable_parameters"]),
        (M("tests", "data", "plan", "llama-3-8b-infer.yaml"),
         "KV cache at the end: %.2f GiB",
         lambda j: j["per_gpu"]["kv_cache_bytes"] / 2**30),
        (M("tests", "data", "plan", "llama-2-7b-ds-auto.yaml"),
         "Host memory a rank: %.2f GiB", lambda j: j["host_bytes"] / 2**30)):
    j = json.loads(run(["plan", spec, "--format", "json"]))
    want(words % key(j) in text(page(["plan", spec])),
         f"plan page of {spec}: no '{words % key(j)}'")
# the fewest GPUs at another micro-batch than the row's says which
args = ["fit", M("models", "llama-2-7b.yaml"), "--gpu", "l4"]
row = json.loads(run(args + ["--format", "json"]))["gpus"][0]
want(row["min_gpus_micro_batch"] == row["max_micro_batch"] or
     "%d (at micro-batch %d)" % (row["min_gpus"], row["min_gpus_micro_batch"])
     in text(page(args)), "fit page: fewest GPUs without its micro-batch")
# inference fit: batch, no accumulation
h = text(page(["fit", M("tests", "data", "plan", "llama-3-8b-infer.yaml"),
               "--gpu", "h100", "--gpu", "l4"]))
want("micro-batch" not in h and "accumulation" not in h,
     "inference fit page speaks of micro-batches or accumulation")
want("largest batch" in h, "inference fit page: no 'largest batch'")

# a plan nothing searched fits: the page says so, with plan's hint
spec = M("models", "llama-3-70b.yaml")
r = subprocess.run([G, "plan", spec, "--gpu", "Tesla P4", "--html",
                    os.path.join(TMP, "n.html")], capture_output=True,
                   text=True)
t = " ".join(text(open(os.path.join(TMP, "n.html"),
                       encoding="utf-8").read()).split())
m = re.search(r"hint: (nothing searched fits.*)", r.stderr)
want(m and m.group(1).strip() in t,
     f"plan page (nothing fits): plan's hint {r.stderr!r} not on it")
want("No change gpumem searches fits" in t,
     "plan page (nothing fits): does not say no change fits")

# fit page: each row's figure is the one fit's table prints (at
# micro-batch 1 where none fits), beside the usable memory fit judges by
args = ["fit", M("models", "qwen2.5-7b.yaml"), "--gpu", "a100-80gb",
        "--gpu", "rtx-4090", "--set", "training.micro_batch_size=2",
        "--set", "training.activation_checkpointing=none",
        "--set", "parallelism.data_parallel=1",
        "--set", "parallelism.zero_stage=0"]
t = text(page(args))
j = json.loads(run(args + ["--format", "json"]))
for row in j["gpus"]:
    g = "%.2f" % (row["device_used_bytes"] / 2 ** 30)
    c = "%.2f" % (row["capacity_bytes"] / 2 ** 30)
    u = "%.2f" % (row["usable_bytes"] / 2 ** 30)
    want(f"none (at 1): {g} / {c}" in t,
         f"fit page: {row['gpu']}'s bar is not the table's {g} GiB")
    want(re.search(r"%s\s+%s\s+%s" % (re.escape(row["gpu"]), c, u), t),
         f"fit page: {row['gpu']}'s usable {u} GiB not beside capacity")

for e in errs:
    print("FAIL: " + e)
print(f"{len(errs)} failures")
sys.exit(1 if errs else 0)
