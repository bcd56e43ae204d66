#!/usr/bin/env python3
"""alloc_train.py - PyTorch's caching allocator against gpumem's pool on
real training and generation, one GPU (tests/gpu/run-alloc-train.sh).

    alloc_train.py drive --build BUILD --out OUT [--rounds N] [--total-s S]
                         [--part-s S] [--workloads W,...] [--configs C,...]
                         [--stub | --tiny [--device cpu]]
    alloc_train.py child --workload W --config C --round R --out PART
                         [--device cuda|cpu] [--tiny] [--stub]
    alloc_train.py summarize --out OUT
    alloc_train.py plan [--rounds N]     (the runs, in order, one a line)
    alloc_train.py selftest              (drive with stub children, no GPU)

Workloads (WORKLOADS), each a run a user starts:
  llama-1b-bf16-mixed  a ~1B Llama (random init), fp32 weights, autocast
                       bfloat16, fused AdamW, batch 4 x 1024 tokens
  gpt2-fp16-mixed      GPT-2 (124M), fp32 weights, autocast float16 with
                       torch.amp.GradScaler, AdamW, batch 8 x 1024
  llama-1b-generate    the ~1B Llama in bfloat16, generate() greedy, batch
                       8, prompt 1024, 128 new tokens (transformers'
                       default cache); a step is one generate() call
Configurations (CONFIGS), the allocator under the same run:
  native          PyTorch's caching allocator as it comes
  expandable      the same with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  gpumem-plain    gpumem's pool through torch.cuda.memory.
                  CUDAPluggableAllocator (libgpumem-torch.so,
                  GPUMEM_MODE=cache), plain segments
  gpumem-virtual  the same with expandable_segments:True, which the pool
                  reads (virtual segments)

drive runs every (workload, configuration) once per round, each in its
own process (as a user's job starts), the configurations' order rotated
each round so that none always runs first; a part that ended ok or oom is
kept, so a second call with the same OUT goes on where the first stopped
(--total-s stops starting runs). Each run records its step times (warm-up
steps discarded), the peak reserved and allocated bytes (native:
torch.cuda.max_memory_reserved / max_memory_allocated over the whole
process; gpumem: the pool's report, GPUMEM_REPORT, over the whole
process, since memory_stats is not available through a pluggable
allocator), the device's used memory (cudaMemGetInfo total - free) after
every step, its maximum, and NVML's figure for the process at the end.
summarize writes OUT/alloc-train-results.json and OUT/alloc-train-results.md
(per workload: per configuration the median over every timed step of
every round, each round's median, the ratio to native, peak reserved and
device used).
"""

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

GiB = 1 << 30
HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS_JSON = "alloc-train-results.json"
RESULTS_MD = "alloc-train-results.md"

VSEG = "expandable_segments:True"

# name -> (environment, through the pluggable allocator, what it is)
CONFIGS = {
    "native": ({}, False, "PyTorch's caching allocator"),
    "expandable": ({"PYTORCH_CUDA_ALLOC_CONF": VSEG}, False,
                   "PyTorch's caching allocator, expandable_segments:True"),
    "gpumem-plain": ({"GPUMEM_MODE": "cache"}, True,
                     "gpumem's pool via CUDAPluggableAllocator, plain "
                     "segments"),
    "gpumem-virtual": ({"GPUMEM_MODE": "cache",
                        "PYTORCH_CUDA_ALLOC_CONF": VSEG}, True,
                       "gpumem's pool via CUDAPluggableAllocator, virtual "
                       "segments (expandable_segments:True)"),
}

# name -> (warm-up steps, timed steps, what it is)
WORKLOADS = {
    "llama-1b-bf16-mixed": (3, 10, "~1B Llama, bf16-mixed (autocast "
                            "bfloat16, fp32 weights), fused AdamW, batch "
                            "4 x 1024"),
    "gpt2-fp16-mixed": (3, 15, "GPT-2 124M, fp16-mixed with GradScaler, "
                        "AdamW, batch 8 x 1024"),
    "llama-1b-generate": (1, 3, "~1B Llama in bfloat16, generate() greedy, "
                          "batch 8, prompt 1024, 128 new tokens"),
}

# Variables of gpumem and PyTorch's allocator that a run must not inherit.
CLEAN = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "LD_PRELOAD")
KEEP_STATUS = ("ok", "oom")


def write_atomic(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".alloc-train-")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def names(arg, table, what):
    if not arg:
        return list(table)
    out = [x for x in arg.split(",") if x]
    for x in out:
        if x not in table:
            raise SystemExit(f"alloc_train.py: --{what} {x}: not one of "
                             f"{', '.join(table)}")
    return out


# ---------------------------------------------------------------- plan

def plan(rounds, workloads, configs):
    """The runs in the order they start: round by round, workload by
    workload, the configurations rotated by one each round."""
    runs = []
    n = len(configs)
    for r in range(1, rounds + 1):
        order = [configs[(i + r - 1) % n] for i in range(n)]
        for w in workloads:
            for c in order:
                runs.append((r, w, c))
    return runs


def part_name(r, w, c):
    return f"{w}--{c}--r{r}"


def run_env(base, config, build, report):
    """The environment of one run: base without any allocator setting,
    then the configuration's own."""
    env = {k: v for k, v in base.items()
           if k not in CLEAN and not k.startswith("GPUMEM_")}
    extra, pluggable, _ = CONFIGS[config]
    env.update(extra)
    if pluggable:
        env["GPUMEM_TORCH_LIB"] = os.path.join(
            build, "allocator", "preload", "libgpumem-torch.so")
        env["GPUMEM_REPORT"] = report
    lib = os.path.join(build, "lib")  # carried libyaml & co, if any
    env["LD_LIBRARY_PATH"] = lib + (":" + env["LD_LIBRARY_PATH"]
                                    if env.get("LD_LIBRARY_PATH") else "")
    env["PYTHONUNBUFFERED"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    env["HF_HUB_OFFLINE"] = "1"
    env["TRANSFORMERS_VERBOSITY"] = "error"
    return env


# --------------------------------------------------------------- drive

def report_keys(rep):
    """What a run's gpumem report says about its pool."""
    if not rep or not rep.get("devices"):
        return None
    d = rep["devices"][0]
    pool = d.get("pool", {})
    return {"mode": rep.get("mode"),
            "peak_reserved_bytes": d.get("peak_reserved_bytes"),
            "peak_allocated_bytes": d.get("peak_allocated_bytes"),
            "reserved_end_bytes": d.get("reserved_bytes"),
            "pool_virtual_segments": d.get("pool_virtual_segments"),
            "oom_count": d.get("oom_count"),
            "alloc_count": d.get("alloc_count"),
            "num_device_alloc": pool.get("num_device_alloc"),
            "num_device_free": pool.get("num_device_free"),
            "num_alloc_retries": pool.get("num_alloc_retries"),
            "fragmentation": d.get("fragmentation")}


def drive(args):
    out = os.path.abspath(args.out)
    parts = os.path.join(out, "parts")
    os.makedirs(parts, exist_ok=True)
    build = os.path.abspath(args.build)
    workloads = names(args.workloads, WORKLOADS, "workloads")
    configs = names(args.configs, CONFIGS, "configs")
    lib = os.path.join(build, "allocator", "preload", "libgpumem-torch.so")
    if not args.stub and any(CONFIGS[c][1] for c in configs) and \
            not os.path.exists(lib):
        raise SystemExit(f"alloc_train.py: no {lib} (build the project "
                         "with a C++ compiler first)")
    t0 = time.monotonic()
    rc = 0
    for r, w, c in plan(args.rounds, workloads, configs):
        name = part_name(r, w, c)
        part = os.path.join(parts, name + ".json")
        rec = load(part)
        if rec and rec.get("status") in KEEP_STATUS:
            continue
        if time.monotonic() - t0 >= args.total_s:
            print(f"# time budget spent before {name}", flush=True)
            rc = 1
            break
        report = os.path.join(parts, name + ".report.json")
        for p in (part, report):
            if os.path.exists(p):
                os.remove(p)
        cmd = [sys.executable, os.path.abspath(__file__), "child",
               "--workload", w, "--config", c, "--round", str(r),
               "--out", part]
        if args.stub:
            cmd.append("--stub")
        if args.tiny:  # a dry run of the real code, e.g. on CPU
            cmd += ["--tiny", "--device", args.device]
        t = time.monotonic()
        with open(os.path.join(parts, name + ".log"), "w") as log:
            try:
                p = subprocess.run(cmd, env=run_env(os.environ, c, build,
                                                    report),
                                   stdout=log, stderr=subprocess.STDOUT,
                                   timeout=args.part_s)
                code = p.returncode
            except subprocess.TimeoutExpired:
                code = "timeout"
        rec = load(part) or {"workload": w, "config": c, "round": r,
                             "status": "error",
                             "message": f"the run ended {code} without a "
                                        "record (see its .log)"}
        if CONFIGS[c][1]:
            rec["report"] = report_keys(load(report))
        rec["exit"] = code
        rec["wall_s"] = round(time.monotonic() - t, 2)
        write_atomic(part, rec)
        print(f"{name}: {rec['status']} {rec.get('median_step_s', '')} "
              f"{rec['wall_s']} s", flush=True)
    for r, w, c in plan(args.rounds, workloads, configs):
        rec = load(os.path.join(parts, part_name(r, w, c) + ".json"))
        if not rec or rec.get("status") != "ok":
            rc = 1
    seconds = os.path.join(out, "seconds.json")
    prev = load(seconds) or {"calls": []}
    prev["calls"].append(round(time.monotonic() - t0, 1))
    write_atomic(seconds, prev)
    summarize(out, args.rounds, workloads, configs)
    return rc


# --------------------------------------------------------------- child

def nvml_used():
    """This process's used memory on the GPU as NVML reports it (pynvml,
    else nvidia-smi), or None."""
    pid = os.getpid()
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == pid:
                return p.usedGpuMemory
    except Exception:  # noqa: BLE001 - a cross-check only
        pass
    try:
        text = subprocess.run(
            ["nvidia-smi", "--query-compute-apps=pid,used_memory",
             "--format=csv,noheader,nounits"], capture_output=True,
            text=True, timeout=20).stdout
        for line in text.splitlines():
            f = [x.strip() for x in line.split(",")]
            if len(f) == 2 and f[0] == str(pid):
                return int(f[1]) << 20  # MiB
    except (OSError, ValueError, subprocess.SubprocessError):
        pass
    return None


def versions(torch):
    from importlib import metadata
    out = {"torch": torch.__version__ if torch else None,
           "cuda_runtime": torch.version.cuda if torch else None}
    for pkg in ("transformers", "deepspeed", "peft", "bitsandbytes"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    try:
        with open("/proc/driver/nvidia/version") as f:
            out["driver"] = next((w for w in f.readline().split()
                                  if w[:1].isdigit() and "." in w), None)
    except OSError:
        out["driver"] = None
    return out


def llama_config(tiny):
    from transformers import LlamaConfig
    if tiny:
        return LlamaConfig(hidden_size=64, intermediate_size=128,
                           num_hidden_layers=2, num_attention_heads=4,
                           num_key_value_heads=4, vocab_size=512,
                           max_position_embeddings=128)
    return LlamaConfig(hidden_size=2048, intermediate_size=5632,
                       num_hidden_layers=16, num_attention_heads=16,
                       num_key_value_heads=16, vocab_size=32000,
                       max_position_embeddings=2048)


def build(torch, dev, cls, cfg, dtype):
    """The model made on the device in dtype (no CPU initialisation)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(dev):
            return cls(cfg)
    finally:
        torch.set_default_dtype(old)


def wl_llama_train(torch, dev, tiny):
    from transformers import LlamaForCausalLM
    cfg = llama_config(tiny)
    model = build(torch, dev, LlamaForCausalLM, cfg, torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4,
                            fused=dev == "cuda")
    b, s = (2, 32) if tiny else (4, 1024)
    x = torch.randint(0, cfg.vocab_size, (b, s), device=dev)

    def step():
        with torch.autocast(dev, dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model, step, {"batch": b, "seq": s, "precision": "bf16-mixed"}


def wl_gpt2(torch, dev, tiny):
    from transformers import GPT2Config, GPT2LMHeadModel
    cfg = GPT2Config(n_embd=64, n_layer=2, n_head=4, vocab_size=512,
                     n_positions=128) if tiny else GPT2Config()
    model = build(torch, dev, GPT2LMHeadModel, cfg, torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scaler = torch.amp.GradScaler(dev)
    b, s = (2, 32) if tiny else (8, 1024)
    x = torch.randint(0, cfg.vocab_size, (b, s), device=dev)

    def step():
        with torch.autocast(dev, dtype=torch.float16):
            loss = model(input_ids=x, labels=x).loss
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    return model, step, {"batch": b, "seq": s,
                         "precision": "fp16-mixed (GradScaler)"}


def wl_generate(torch, dev, tiny):
    from transformers import LlamaForCausalLM
    cfg = llama_config(tiny)
    model = build(torch, dev, LlamaForCausalLM, cfg, torch.bfloat16)
    model.eval()
    b, s, new = (2, 16, 8) if tiny else (8, 1024, 128)
    x = torch.randint(3, cfg.vocab_size, (b, s), device=dev)
    mask = torch.ones_like(x)

    def step():
        out = model.generate(input_ids=x, attention_mask=mask,
                             max_new_tokens=new, min_new_tokens=new,
                             do_sample=False, pad_token_id=0)
        assert out.shape[1] == s + new, out.shape
    return model, step, {"batch": b, "prompt": s, "new_tokens": new,
                         "precision": "bf16"}


WL_FN = {"llama-1b-bf16-mixed": wl_llama_train,
         "gpt2-fp16-mixed": wl_gpt2,
         "llama-1b-generate": wl_generate}


def stub_record(args):
    """A stand-in run for selftest: what a child saw of its environment,
    numbers that follow from the configuration, and for gpumem a report
    where the library would have written it."""
    i = list(CONFIGS).index(args.config)
    w = list(WORKLOADS).index(args.workload)
    warm, steps, _ = WORKLOADS[args.workload]
    base = 0.1 * (w + 1)
    times = [base * (1 + 0.01 * i) * (1 + 0.001 * k) for k in range(steps)]
    rec = {"status": "ok", "step_s": times,
           "median_step_s": statistics.median(times), "warmup_steps": warm,
           "device_used_max_bytes": (10 + i) * GiB,
           "device_used_end_bytes": (9 + i) * GiB,
           "nvml_used_bytes": (10 + i) * GiB,
           "seen_env": {k: os.environ.get(k) for k in
                        ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                         "GPUMEM_MODE", "GPUMEM_TORCH_LIB", "LD_PRELOAD")},
           "versions": {"torch": "stub", "transformers": "stub"}}
    if CONFIGS[args.config][1]:
        rep = {"kind": "gpumem-report", "mode": "cache", "devices": [{
            "peak_reserved_bytes": (8 + i) * GiB,
            "peak_allocated_bytes": 7 * GiB, "reserved_bytes": 8 * GiB,
            "pool_virtual_segments": "virtual" in args.config,
            "oom_count": 0, "alloc_count": 100, "fragmentation": 0.0,
            "pool": {"num_device_alloc": 3, "num_device_free": 1}}]}
        write_atomic(os.environ["GPUMEM_REPORT"], rep)
    else:
        rec.update(torch_peak_reserved_bytes=(8 + i) * GiB,
                   torch_peak_allocated_bytes=7 * GiB,
                   expandable_seen=args.config == "expandable")
    return rec


def child(args):
    rec = {"workload": args.workload, "config": args.config,
           "round": args.round, "pid": os.getpid()}
    if args.stub:
        rec.update(stub_record(args))
        write_atomic(args.out, rec)
        return 0
    import torch
    dev = args.device
    cuda = dev == "cuda"
    rec["versions"] = versions(torch)
    if CONFIGS[args.config][1] and cuda:
        a = torch.cuda.memory.CUDAPluggableAllocator(
            os.environ["GPUMEM_TORCH_LIB"], "gpumem_torch_malloc",
            "gpumem_torch_free")
        torch.cuda.memory.change_current_allocator(a)
    if cuda:
        rec["gpu"] = torch.cuda.get_device_name(0)
    rec["alloc_conf"] = os.environ.get("PYTORCH_CUDA_ALLOC_CONF")
    warm, steps, _ = WORKLOADS[args.workload]
    if args.tiny:
        warm, steps = 1, 2
    used = []
    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        model, step, meta = WL_FN[args.workload](torch, dev, args.tiny)
        rec.update(meta)
        rec["parameters"] = sum(p.numel() for p in model.parameters())
        times = []
        for k in range(warm + steps):
            if cuda:
                torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            if cuda:
                torch.cuda.synchronize()
            if k >= warm:
                times.append(time.perf_counter() - t)
            if cuda:
                free, total = torch.cuda.mem_get_info()
                used.append(total - free)
                rec["device_total_bytes"] = total
        rec.update(status="ok", step_s=times, warmup_steps=warm,
                   median_step_s=statistics.median(times))
    except getattr(torch, "OutOfMemoryError",
                   torch.cuda.OutOfMemoryError) as e:
        rec.update(status="oom", message=str(e).splitlines()[0][:400])
    except Exception as e:  # noqa: BLE001 - recorded, the rounds go on
        rec.update(status="error",
                   message=f"{type(e).__name__}: {str(e)[:400]}")
    rec["run_s"] = round(time.perf_counter() - t0, 2)
    if used:
        rec["device_used_max_bytes"] = max(used)
        rec["device_used_end_bytes"] = used[-1]
        rec["device_used_per_step_bytes"] = used
    if cuda:
        rec["nvml_used_bytes"] = nvml_used()
        if not CONFIGS[args.config][1]:
            # memory_stats and snapshots are the native allocator's only
            rec["torch_peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
            rec["torch_peak_allocated_bytes"] = \
                torch.cuda.max_memory_allocated()
            segs = torch.cuda.memory._snapshot().get("segments", [])
            rec["expandable_seen"] = any(s.get("is_expandable")
                                         for s in segs)
    write_atomic(args.out, rec)
    return 0 if rec["status"] in KEEP_STATUS else 1


# ----------------------------------------------------------- summarize

def peak_reserved(rec):
    """Peak reserved of a run and where it comes from."""
    if rec.get("report"):
        return rec["report"].get("peak_reserved_bytes"), "gpumem report"
    if rec.get("torch_peak_reserved_bytes") is not None:
        return rec["torch_peak_reserved_bytes"], "torch"
    return None, None


def peak_allocated(rec):
    if rec.get("report"):
        return rec["report"].get("peak_allocated_bytes")
    return rec.get("torch_peak_allocated_bytes")


def virtual_of(rec):
    """Whether the run really grew virtual / expandable segments."""
    if rec.get("report"):
        return rec["report"].get("pool_virtual_segments")
    return rec.get("expandable_seen")


def summarize(out, rounds=None, workloads=None, configs=None):
    parts_dir = os.path.join(out, "parts")
    recs = []
    for f in sorted(os.listdir(parts_dir)) if os.path.isdir(parts_dir) \
            else []:
        if f.endswith(".json") and not f.endswith(".report.json"):
            r = load(os.path.join(parts_dir, f))
            if r and "workload" in r and "config" in r:
                recs.append(r)
    workloads = workloads or [w for w in WORKLOADS
                              if any(r["workload"] == w for r in recs)]
    configs = configs or [c for c in CONFIGS
                          if any(r["config"] == c for r in recs)]
    env = {}
    for r in recs:
        if r.get("status") == "ok" and r.get("versions"):
            env = dict(r["versions"])
            if r.get("gpu"):
                env["gpu"] = r["gpu"]
            break
    seconds = load(os.path.join(out, "seconds.json")) or {}
    res = {"kind": "gpumem-alloc-train", "environment": env,
           "calls_s": seconds.get("calls", []),
           "rounds": rounds or max((r["round"] for r in recs), default=0),
           "configs": {c: {"env": CONFIGS[c][0],
                           "pluggable": CONFIGS[c][1],
                           "what": CONFIGS[c][2]} for c in configs},
           "workloads": {}}
    for w in workloads:
        rows = {}
        for c in configs:
            runs = sorted((r for r in recs if r["workload"] == w and
                           r["config"] == c), key=lambda r: r["round"])
            good = [r for r in runs if r.get("status") == "ok"]
            steps = [t for r in good for t in r["step_s"]]
            row = {"runs": len(runs), "runs_ok": len(good),
                   "steps": len(steps),
                   "statuses": [r.get("status") for r in runs],
                   "round_medians_s": [r["median_step_s"] for r in good]}
            if steps:
                row["median_step_s"] = statistics.median(steps)
            pr = [peak_reserved(r) for r in good]
            pr = [p for p in pr if p[0] is not None]
            if pr:
                row["peak_reserved_bytes"] = max(p[0] for p in pr)
                row["peak_reserved_source"] = pr[0][1]
            pa = [peak_allocated(r) for r in good]
            pa = [p for p in pa if p is not None]
            if pa:
                row["peak_allocated_bytes"] = max(pa)
            for k in ("device_used_max_bytes", "nvml_used_bytes"):
                v = [r[k] for r in good if r.get(k) is not None]
                if v:
                    row[k] = max(v)
            vs = {virtual_of(r) for r in good}
            row["virtual"] = vs.pop() if len(vs) == 1 else sorted(
                vs, key=str)
            if good and good[0].get("parameters"):
                row["parameters"] = good[0]["parameters"]
            rows[c] = row
        base = rows.get("native", {})
        for row in rows.values():
            for k, rk in (("median_step_s", "step_time_ratio"),
                          ("peak_reserved_bytes", "peak_reserved_ratio"),
                          ("device_used_max_bytes", "device_used_ratio")):
                if base.get(k) and row.get(k) is not None:
                    row[rk] = row[k] / base[k]
        res["workloads"][w] = {"what": WORKLOADS[w][2], "configs": rows}
    write_atomic(os.path.join(out, RESULTS_JSON), res)
    with open(os.path.join(out, RESULTS_MD), "w") as f:
        f.write(markdown(res))
    return res


def fmt(x, spec, scale=1):
    return "" if x is None else format(x / scale, spec)


def markdown(res):
    env = res["environment"]
    lines = ["# PyTorch's allocator against gpumem's pool on real "
             "training (tests/gpu/run-alloc-train.sh)", ""]
    for k in ("gpu", "driver", "cuda_runtime", "torch", "transformers",
              "deepspeed", "peft", "bitsandbytes"):
        lines.append(f"- {k}: {env.get(k)}")
    lines.append(f"- rounds: {res['rounds']}")
    lines.append("- seconds: " + " + ".join(str(s) for s in res["calls_s"]))
    lines += ["", "Configurations (each run its own process, the order "
              "rotated each round):", ""]
    for c, v in res["configs"].items():
        lines.append(f"- {c}: {v['what']}")
    lines += ["", "Median over every timed step of every round (warm-up "
              "steps discarded); ratio = configuration / native. Peak "
              "reserved over the whole process: torch.cuda."
              "max_memory_reserved() for native and expandable, the "
              "gpumem report's peak_reserved_bytes for gpumem (the pool; "
              "memory_stats is not available through a pluggable "
              "allocator); worst round. Device used: cudaMemGetInfo "
              "total - free after each step, the largest; NVML: the "
              "process's used memory at the end. virtual: expandable "
              "segments seen in PyTorch's snapshot, or the report's "
              "pool_virtual_segments.", ""]
    for w, wv in res["workloads"].items():
        lines += [f"## {w}", "", wv["what"] + ".", "",
                  "| configuration | runs | timed steps | median step s | "
                  "ratio to native | round medians s | peak reserved GiB | "
                  "reserved / native | peak allocated GiB | device used "
                  "GiB | used / native | NVML used GiB | virtual |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for c, r in wv["configs"].items():
            lines.append(
                f"| {c} | {r['runs_ok']}/{r['runs']} | {r['steps']} | "
                f"{fmt(r.get('median_step_s'), '.4f')} | "
                f"{fmt(r.get('step_time_ratio'), '.4f')} | "
                + " ".join(format(x, ".4f") for x in r["round_medians_s"])
                + f" | {fmt(r.get('peak_reserved_bytes'), '.2f', GiB)} | "
                f"{fmt(r.get('peak_reserved_ratio'), '.4f')} | "
                f"{fmt(r.get('peak_allocated_bytes'), '.2f', GiB)} | "
                f"{fmt(r.get('device_used_max_bytes'), '.2f', GiB)} | "
                f"{fmt(r.get('device_used_ratio'), '.4f')} | "
                f"{fmt(r.get('nvml_used_bytes'), '.2f', GiB)} | "
                f"{r.get('virtual')} |")
        bad = {c: r["statuses"] for c, r in wv["configs"].items()
               if r["runs_ok"] != r["runs"]}
        if bad:
            lines += ["", "Runs that did not end ok: " + "; ".join(
                f"{c} {s}" for c, s in bad.items()) + " (parts/*.log)."]
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------ selftest

def selftest():
    """drive with stub children: plan, environments, resuming, the
    report merge and the writer, all without torch or a GPU."""
    tmp = tempfile.mkdtemp(prefix="alloc-train-")
    try:
        build = os.path.join(tmp, "build")
        out = os.path.join(tmp, "out")
        ns = argparse.Namespace(build=build, out=out, rounds=2,
                                total_s=300.0, part_s=60.0, workloads="",
                                configs="", stub=True, tiny=False,
                                device="cuda")
        os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"
        os.environ["GPUMEM_LIMIT"] = "1GiB"
        os.environ["LD_PRELOAD"] = "/nonexistent/libx.so"
        assert drive(ns) == 0
        res = load(os.path.join(out, RESULTS_JSON))
        assert res["rounds"] == 2, res["rounds"]
        assert list(res["workloads"]) == list(WORKLOADS)
        for w, wv in res["workloads"].items():
            rows = wv["configs"]
            assert list(rows) == list(CONFIGS), rows.keys()
            for i, (c, r) in enumerate(rows.items()):
                warm, steps, _ = WORKLOADS[w]
                assert r["runs"] == r["runs_ok"] == 2, (w, c, r)
                assert r["steps"] == 2 * steps, r
                want = (1 + 0.01 * i) / 1.0
                assert abs(r["step_time_ratio"] - want) < 1e-3, (w, c, r)
                assert r["peak_reserved_bytes"] == (8 + i) * GiB, r
                assert r["peak_reserved_source"] == (
                    "gpumem report" if CONFIGS[c][1] else "torch"), r
                assert r["virtual"] is (c in ("expandable",
                                              "gpumem-virtual")), (c, r)
        # every child saw its configuration's environment and nothing else
        for f in os.listdir(os.path.join(out, "parts")):
            if not f.endswith(".json") or f.endswith(".report.json"):
                continue
            rec = load(os.path.join(out, "parts", f))
            seen, c = rec["seen_env"], rec["config"]
            extra, pluggable, _ = CONFIGS[c]
            assert seen["PYTORCH_CUDA_ALLOC_CONF"] == extra.get(
                "PYTORCH_CUDA_ALLOC_CONF"), (c, seen)
            assert seen["GPUMEM_MODE"] == extra.get("GPUMEM_MODE"), seen
            assert (seen["GPUMEM_TORCH_LIB"] or "").endswith(
                "/allocator/preload/libgpumem-torch.so") == pluggable, seen
            assert seen["LD_PRELOAD"] is None and \
                seen["PYTORCH_ALLOC_CONF"] is None, seen
        # the order: rotated each round, interleaved by workload
        p = plan(2, list(WORKLOADS), list(CONFIGS))
        assert len(p) == 2 * len(WORKLOADS) * len(CONFIGS)
        assert [c for r, w, c in p[:4]] == list(CONFIGS)
        assert [c for r, w, c in p[12:16]] == list(CONFIGS)[1:] + \
            list(CONFIGS)[:1], p[12:16]
        # a second call keeps the finished parts and redoes a failed one
        part = os.path.join(out, "parts", part_name(1, "gpt2-fp16-mixed",
                                                    "native") + ".json")
        rec = load(part)
        rec["status"] = "error"
        write_atomic(part, rec)
        before = os.path.getmtime(os.path.join(out, "parts", part_name(
            1, "llama-1b-generate", "native") + ".json"))
        assert drive(ns) == 0
        assert load(part)["status"] == "ok"
        assert os.path.getmtime(os.path.join(out, "parts", part_name(
            1, "llama-1b-generate", "native") + ".json")) == before
        assert len(load(os.path.join(out, "seconds.json"))["calls"]) == 2
        md = open(os.path.join(out, RESULTS_MD)).read()
        for s in ("## llama-1b-bf16-mixed", "| gpumem-virtual | 2/2 | 30 |",
                  "| native | 2/2 | 20 |", "- torch: stub", "| 1.0300 |"):
            assert s in md, (s, md)
        # the time budget: nothing more is started, exit 1
        shutil.rmtree(out)
        ns.total_s = 0
        assert drive(ns) == 1
        assert not [f for f in os.listdir(os.path.join(out, "parts"))
                    if f.endswith(".json")]
        bad = argparse.Namespace(**dict(vars(ns), workloads="bert"))
        try:
            drive(bad)
            raise AssertionError("--workloads bert accepted")
        except SystemExit as e:
            assert "--workloads bert" in str(e), e
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("alloc_train.py selftest: ok")
    return 0


# ---------------------------------------------------------------- main

def main(argv=None):
    ap = argparse.ArgumentParser(
        description=__doc__.split("\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    d = sub.add_parser("drive")
    d.add_argument("--build", required=True)
    d.add_argument("--out", required=True)
    d.add_argument("--rounds", type=int, default=3)
    d.add_argument("--total-s", type=float, default=520)
    d.add_argument("--part-s", type=float, default=150)
    d.add_argument("--workloads", default="")
    d.add_argument("--configs", default="")
    d.add_argument("--stub", action="store_true")
    d.add_argument("--tiny", action="store_true",
                   help="tiny models and 1 + 2 steps (a dry run)")
    d.add_argument("--device", default="cuda", choices=("cuda", "cpu"),
                   help="with --tiny: where the runs go")
    c = sub.add_parser("child")
    c.add_argument("--workload", required=True, choices=list(WORKLOADS))
    c.add_argument("--config", required=True, choices=list(CONFIGS))
    c.add_argument("--round", type=int, required=True)
    c.add_argument("--out", required=True)
    c.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    c.add_argument("--tiny", action="store_true")
    c.add_argument("--stub", action="store_true")
    s = sub.add_parser("summarize")
    s.add_argument("--out", required=True)
    p = sub.add_parser("plan")
    p.add_argument("--rounds", type=int, default=3)
    sub.add_parser("selftest")
    args = ap.parse_args(argv)
    if args.cmd == "drive":
        if args.rounds < 1:
            ap.error("--rounds: at least 1")
        return drive(args)
    if args.cmd == "child":
        return child(args)
    if args.cmd == "summarize":
        summarize(os.path.abspath(args.out))
        return 0
    if args.cmd == "plan":
        for r, w, cfg in plan(args.rounds, list(WORKLOADS), list(CONFIGS)):
            print(r, w, cfg)
        return 0
    return selftest()


if __name__ == "__main__":
    sys.exit(main())
