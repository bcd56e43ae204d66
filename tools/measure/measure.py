#!/usr/bin/env python3
"""measure.py - measure what a gpumem spec really takes on one GPU.

    measure.py SPEC.yaml [--set KEY=VALUE ...] --out FILE.json
    measure.py --manifest tests/data/calibration/manifest.json --out FILE.json
    measure.py --manifest ... --check          (no GPU, no torch: validate)

Builds the Hugging Face model the spec describes with random weights,
directly on the GPU in its dtype, runs a few real training steps (or
inference with a KV cache) and records mem.max_memory_allocated(),
max_memory_reserved(), the device's used memory (cudaMemGetInfo total -
free) at the end of the steps, step time and versions. All configurations
run in one process, one after another; between them everything is freed,
the cache emptied and the peak statistics reset. Failures and OOMs are
recorded, not fatal. The exact spec-to-PyTorch mapping is in README.md.
"""

import argparse
import contextlib
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gmspec  # noqa: E402
import hfbuild  # noqa: E402
from hfbuild import Unsupported  # noqa: E402

FORMAT = "gpumem-measurements-1"
LR = 1e-5

# The device and its memory statistics: torch.cuda, or for --cpu-dry-run
# (which only exercises the code paths on tiny models) a stand-in of zeros.
DEV = "cuda"
mem = None


class CpuMem:
    def __getattr__(self, name):
        if name == "mem_get_info":
            return lambda: (0, 0)
        return lambda *a: 0


def log(msg):
    print(msg, flush=True)


def load_manifest(path):
    with open(path) as f:
        man = json.load(f)
    base = os.path.dirname(os.path.abspath(path))
    out = []
    for c in man["configs"]:
        out.append(dict(name=c["name"],
                        spec=os.path.normpath(os.path.join(base, c["spec"])),
                        spec_rel=c["spec"], set=c.get("set", []),
                        heldout=c.get("heldout", False),
                        memory_limit_bytes=c.get("memory_limit_bytes")))
    return out


def write_atomic(path, obj):
    d = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".measure-")
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, sort_keys=False)
        f.write("\n")
    os.replace(tmp, path)


# ---------------------------------------------------------------- versions

def driver_version():
    try:
        with open("/proc/driver/nvidia/version") as f:
            for word in f.readline().split():
                if word[:1].isdigit() and "." in word:
                    return word
    except OSError:
        pass
    try:
        return subprocess.run(
            ["nvidia-smi", "--query-gpu=driver_version",
             "--format=csv,noheader"], capture_output=True, text=True,
            timeout=20).stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return None


def environment(torch):
    import transformers
    props = torch.cuda.get_device_properties(0)
    free, total = mem.mem_get_info()
    return {
        "gpu_name": torch.cuda.get_device_name(0),
        "gpu_total_bytes": total,
        "gpu_total_global_mem_bytes": props.total_memory,
        "compute_capability": f"{props.major}.{props.minor}",
        "driver": driver_version(),
        "cuda_runtime": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "python": platform.python_version(),
        "pytorch_cuda_alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
        "cuda_module_loading": os.environ.get("CUDA_MODULE_LOADING"),
        "date": datetime.datetime.now(datetime.timezone.utc)
        .strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def nvml_process_used():
    """This process's used memory on GPU 0 as NVML (nvidia-smi) reports
    it, or None where pynvml or the process entry is missing: a cross-check
    of the cudaMemGetInfo figure."""
    try:
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(0)
        for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
            if p.pid == os.getpid():
                return p.usedGpuMemory
    except Exception:
        return None
    return None


# ---------------------------------------------------------------- one run

def torch_dtype(torch, name):
    return getattr(torch, hfbuild.TORCH_DTYPE[name])


def make_optimizer(torch, name, params, impl="foreach"):
    """The spec's optimizer with torch.optim defaults, in the
    implementation training.optimizer_implementation names (foreach:
    torch.optim's default on CUDA; fused=True; for-loop: foreach=False);
    lr does not change memory."""
    kw = {"foreach": {}, "fused": {"fused": True},
          "for-loop": {"foreach": False}}[impl]
    if name == "adamw":
        return torch.optim.AdamW(params, lr=LR, **kw)
    if name == "adam":
        return torch.optim.Adam(params, lr=LR, **kw)
    if name == "sgd":
        return torch.optim.SGD(params, lr=LR, **kw)
    if name == "sgd-momentum":
        return torch.optim.SGD(params, lr=LR, momentum=0.9, **kw)
    raise Unsupported(f"training.optimizer: {name}")


def input_ids(torch, spec, batch, length):
    m = spec["model"]
    high = m["vocab_size"]
    if m["head"] == "classification" and m["architecture"] != "bert":
        high -= 1  # the pad id (see hfbuild.config_kwargs) never appears
    g = torch.Generator(device=DEV).manual_seed(0)
    return torch.randint(0, high, (batch, length), device=DEV,
                         generator=g)


def train_batch(torch, spec):
    t, m = spec["training"], spec["model"]
    ids = input_ids(torch, spec, t["micro_batch_size"], t["sequence_length"])
    kw = {"input_ids": ids}
    if m["head"] == "classification":
        kw["labels"] = torch.randint(0, m["num_labels"],
                                     (t["micro_batch_size"],), device=DEV)
    else:
        kw["labels"] = ids  # causal LM shifts inside; MLM: every position
    if m["architecture"] != "bert":
        kw["use_cache"] = False
    return kw


class Stats:
    """Peaks over steps; per-step figures for the record."""

    def __init__(self, torch):
        self.torch = torch
        self.steps = []

    def step_done(self, seconds):
        self.steps.append({"time_s": round(seconds, 4),
                           "peak_allocated_bytes": mem.max_memory_allocated(),
                           "peak_reserved_bytes": mem.max_memory_reserved()})


def run_train(torch, spec, model, stats, steps, deadline, wrap=None,
              make_opt=None):
    """Training steps. wrap(model) -> the model to call (DDP, FSDP, ...);
    make_opt(name, params) -> the optimizer (ZeroRedundancyOptimizer)."""
    t = spec["training"]
    prec = t["precision"]
    ga = 1
    if t["global_batch_size"]:
        ga = t["global_batch_size"] // (t["micro_batch_size"] *
                                        spec["parallelism"]["data_parallel"])
    # Micro-batches 3..k of an accumulation repeat micro-batch 2 exactly
    # (same live tensors, same allocator state), so 2 stand for k.
    micro = min(ga, 2)
    model.train()
    if t["activation_checkpointing"] == "full":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    sel = None
    if t["activation_checkpointing"] == "selective":
        from selective import SelectiveAttention
        sel = SelectiveAttention(model)
    if wrap:
        model = wrap(model)
    opt = (make_opt or (lambda name, params: make_optimizer(
        torch, name, params)))(t["optimizer"], model.parameters())
    scaler = torch.amp.GradScaler(DEV) if prec == "fp16-mixed" else None
    if prec.endswith("-mixed"):
        autocast = torch.autocast(DEV, dtype=torch_dtype(
            torch, gmspec.PREC_DTYPE[prec]))
    else:
        autocast = contextlib.nullcontext()
    batch = train_batch(torch, spec)
    kernels = contextlib.nullcontext()
    if t["attention"] == "flash" and DEV == "cuda":
        # PyTorch's FlashAttention-2 kernel, and nothing else: an input
        # it cannot take raises instead of falling back.
        from torch.nn.attention import SDPBackend, sdpa_kernel
        kernels = sdpa_kernel([SDPBackend.FLASH_ATTENTION])
    with sel if sel else contextlib.nullcontext(), kernels:
        for step in range(steps):
            t0 = time.perf_counter()
            for _ in range(micro):
                with autocast:
                    loss = model(**batch).loss
                if ga > 1:
                    loss = loss / ga
                if scaler:
                    scaler.scale(loss).backward()
                else:
                    loss.backward()
                del loss
            if scaler:
                scaler.step(opt)
                scaler.update()
            else:
                opt.step()
            opt.zero_grad(set_to_none=True)
            mem.synchronize()
            stats.step_done(time.perf_counter() - t0)
            if sel and sel.calls == 0:
                raise Unsupported("training.activation_checkpointing: "
                                  "selective: this transformers' model does "
                                  "not call a wrappable attention function")
            if step >= 1 and time.monotonic() > deadline:
                break
    return {"gradient_accumulation_steps": ga,
            "micro_batches_per_step": micro}


def run_inference(torch, spec, model, stats, steps, deadline):
    i, m = spec["inference"], spec["model"]
    model.eval()
    ids = input_ids(torch, spec, i["batch_size"], i["prompt_length"])
    for step in range(steps):
        t0 = time.perf_counter()
        with torch.inference_mode():
            if i["generate_length"]:
                out = model.generate(
                    ids, attention_mask=torch.ones_like(ids),
                    max_new_tokens=i["generate_length"],
                    min_new_tokens=i["generate_length"], do_sample=False,
                    use_cache=True, pad_token_id=0)
            elif m["architecture"] == "bert":
                out = model(input_ids=ids)
            else:
                out = model(input_ids=ids, use_cache=True)
            mem.synchronize()
        del out
        stats.step_done(time.perf_counter() - t0)
        if step >= 1 and time.monotonic() > deadline:
            break
    return {}


def cleanup(torch):
    """Leave the allocator as a fresh process has it: garbage collected,
    cache emptied, and cuBLAS's workspaces (32 MiB and more per handle and
    stream, kept by the library for the process's life) released, so that
    the next configuration allocates its own as a fresh process would."""
    gc.collect()
    gc.collect()
    mem.synchronize()
    clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
    if clear and DEV == "cuda":
        clear()
    mem.empty_cache()
    mem.reset_peak_memory_stats()


def ran_record(mem, stats, nvml=None, none_without_steps=True):
    """The record's figures (bytes, seconds) once a configuration's steps
    ran, in the measurement files' key order: status ok, peak allocated
    and reserved since the last reset, device used at the reserved peak,
    what the allocator holds at the end and what lies outside it, and the
    per-step figures with the median step time (the first step left out
    where there are more). nvml() gives nvml_process_used_bytes (the key
    is left out without it). No step gives step_time_s None, or where
    none_without_steps is false raises statistics.StatisticsError."""
    # Used memory is read after the steps; the caching allocator only
    # gives segments back when a cudaMalloc fails (then reserved_end <
    # peak_reserved), so the used memory at the reserved peak is the
    # reading plus what was given back.
    free, total = mem.mem_get_info()
    reserved_end = mem.memory_reserved()
    peak_reserved = mem.max_memory_reserved()
    rec = dict(status="ok",
               peak_allocated_bytes=mem.max_memory_allocated(),
               peak_reserved_bytes=peak_reserved,
               device_used_bytes=total - free + peak_reserved - reserved_end,
               device_used_end_bytes=total - free)
    if nvml:
        rec["nvml_process_used_bytes"] = nvml()
    times = [s["time_s"] for s in stats.steps[1:] or stats.steps]
    rec.update(reserved_end_bytes=reserved_end,
               outside_allocator_bytes=total - free - reserved_end,
               steps=len(stats.steps),
               step_time_s=round(statistics.median(times), 4)
               if times or not none_without_steps else None,
               per_step=stats.steps)
    return rec


def oom_record(mem, e):
    """The record's figures (bytes) at the out-of-memory error e: its
    first line (400 characters at most), the peaks, device used now."""
    free, total = mem.mem_get_info()
    return dict(status="oom", message=str(e).splitlines()[0][:400],
                peak_allocated_bytes=mem.max_memory_allocated(),
                peak_reserved_bytes=mem.max_memory_reserved(),
                device_used_bytes=total - free)


def measure_one(torch, cfg, args, world_size=1, parallel=None):
    """Run one configuration; returns its record (never raises for a
    failure of the configuration itself). parallel(spec) -> (wrap,
    make_opt) for run_train, or raises Unsupported (measure_multi.py)."""
    rec = {"name": cfg["name"], "spec": cfg.get("spec_rel", cfg["spec"]),
           "set": cfg["set"], "heldout": cfg["heldout"]}
    try:
        spec = gmspec.load(cfg["spec"], cfg["set"])
        hfbuild.refuse_unrunnable(spec, world_size)
        wrap, make_opt = parallel(spec) if parallel else (None, None)
    except (gmspec.SpecError, Unsupported) as e:
        rec.update(status="refused", message=str(e))
        return rec
    rec["task"] = spec["task"]
    cleanup(torch)
    # a per-process cap: torch.cuda.set_per_process_memory_fraction of
    # the device's total (the caching allocator frees its cached blocks
    # and retries at it before it raises out of memory); the model is
    # built under it too
    limit = cfg.get("memory_limit_bytes")
    if limit:
        total = mem.mem_get_info()[1]
        rec["memory_limit_bytes"] = limit
        rec["memory_fraction"] = limit / total if total else None
        if total:
            mem.set_per_process_memory_fraction(limit / total)
    rec["leftover_allocated_bytes"] = mem.memory_allocated()
    rec["leftover_reserved_bytes"] = mem.memory_reserved()
    deadline = time.monotonic() + args.budget_s
    state = {}
    t0 = time.perf_counter()
    try:
        if spec["task"] == "train":
            prec = spec["training"]["precision"]
            attn = spec["training"]["attention"]
            if attn == "flash":  # sdpa held to its flash backend
                attn = "sdpa"
            dtype = "fp32" if prec.endswith("-mixed") or prec == "fp32" \
                else gmspec.PREC_DTYPE[prec]
        else:
            prec = spec["inference"]["precision"]
            attn = "sdpa"
            dtype = gmspec.PREC_DTYPE[prec]
        torch.manual_seed(0)
        state["model"] = hfbuild.build_model(spec, DEV,
                                             torch_dtype(torch, dtype), attn)
        rec["parameters"] = sum(p.numel() for p in
                                state["model"].parameters())
        mem.synchronize()
        rec["build_time_s"] = round(time.perf_counter() - t0, 3)
        rec["weights_allocated_bytes"] = mem.memory_allocated() - \
            rec["leftover_allocated_bytes"]
        # Measure the steps, not the construction: construction leaves
        # no free cached blocks once the cache is emptied.
        mem.empty_cache()
        mem.reset_peak_memory_stats()
        stats = Stats(torch)
        state["stats"] = stats
        if getattr(args, "trace_dir", None) and DEV == "cuda":
            import tracefile
            state["trace"] = tracefile.start(mem)
        if spec["task"] == "train":
            extra = run_train(torch, spec, state["model"], stats,
                              args.steps, deadline, wrap, make_opt)
        else:
            extra = run_inference(torch, spec, state["model"], stats,
                                  max(2, args.steps - 1), deadline)
        rec.update(extra)
        rec.update(ran_record(
            mem, stats, nvml_process_used if DEV == "cuda" else
            (lambda: None), none_without_steps=False))
    except Unsupported as e:
        rec.update(status="refused", message=str(e))
    except torch.OutOfMemoryError as e:
        rec.update(oom_record(mem, e))
    except Exception as e:  # recorded, the set goes on
        rec.update(status="error",
                   message=f"{type(e).__name__}: {str(e)[:400]}")
    finally:
        if limit:
            ms = mem.memory_stats() or {}
            rec["num_alloc_retries"] = ms.get("num_alloc_retries")
            rec["num_ooms"] = ms.get("num_ooms")
            mem.set_per_process_memory_fraction(1.0)
        if "trace" in state:
            import tracefile
            rec["trace_entries"] = tracefile.finish(
                mem, os.path.join(args.trace_dir, rec["name"] +
                                  getattr(args, "trace_suffix", "") +
                                  ".trace.jsonl.gz"),
                rec["name"], state["trace"])
        st = state.get("stats")
        if st and "per_step" not in rec:
            rec["per_step"] = st.steps
        state.clear()
        cleanup(torch)
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    return rec


# ------------------------------------------------------------ several GPUs

def nccl_rank(torch, dist, local):
    """Join the NCCL process group (120 s timeout) on CUDA device local,
    with the CUDA context made; returns (device, environment record). The
    memory statistics (mem) become torch.cuda's."""
    global mem
    torch.cuda.set_device(local)
    mem = torch.cuda
    dev = torch.device("cuda", local)
    dist.init_process_group("nccl", device_id=dev,
                            timeout=datetime.timedelta(seconds=120))
    torch.zeros(1, device=dev)
    return dev, environment(torch)


RANK_PEAKS = ("peak_allocated_bytes", "peak_reserved_bytes",
              "device_used_bytes")


def rank_summary(cfg, recs, extra=(), step_time=lambda v: v):
    """One configuration's record over its ranks' records recs: the
    manifest's name, spec, set, heldout and the keys extra of cfg; ok
    where every rank is, else oom where one is, else the first other
    status in sorted order; the first rank message; where ok the most
    loaded rank's peaks (bytes, what the planner predicts per GPU) and
    the largest step_time(step_time_s) (s); then every rank's record."""
    top = {"name": cfg["name"], "spec": cfg["spec_rel"],
           "set": cfg["set"], "heldout": cfg["heldout"]}
    for k in extra:
        top[k] = cfg[k]
    statuses = {r["status"] for r in recs}
    top["status"] = "ok" if statuses == {"ok"} else (
        "oom" if "oom" in statuses else sorted(statuses - {"ok"})[0])
    msgs = [r["message"] for r in recs if r.get("message")]
    if msgs:
        top["message"] = msgs[0]
    if top["status"] == "ok":
        for k in RANK_PEAKS:
            top[k] = max(r[k] for r in recs)
        top["step_time_s"] = max(step_time(r["step_time_s"]) for r in recs)
    top["ranks"] = recs
    return top


def log_summary(top, width):
    """Log rank_summary's record: name in width columns, status, peak
    allocated, peak reserved and device used (GiB), message."""
    log(f"  {top['name']:{width}s} {top['status']:7s} "
        f"{gib(top.get('peak_allocated_bytes'))} "
        f"{gib(top.get('peak_reserved_bytes'))} "
        f"{gib(top.get('device_used_bytes'))}"
        + (f"  {top.get('message')}" if top.get("message") else ""))


# ---------------------------------------------------------------- driver

def one_gpu(spec):
    """Raise Unsupported unless this harness runs spec on one GPU; the
    note for check_only's "ok" line."""
    hfbuild.refuse_unrunnable(spec, 1)
    return ""


def check_only(configs, refuse=one_gpu):
    """Validate every configuration without a GPU or torch: each loads and
    refuse(spec) (raises Unsupported, else returns a note) accepts it."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("PyYAML (python3-yaml) is not installed (skipped)")
        return 77
    bad = 0
    for c in configs:
        try:
            spec = gmspec.load(c["spec"], c["set"])
            note = refuse(spec)
            print(f"ok      {c['name']}{note}")
        except (gmspec.SpecError, Unsupported) as e:
            bad += 1
            print(f"REFUSED {c['name']}: {e}")
    return 1 if bad else 0


def task_of(cfg):
    """The spec's task ("train" or "inference"), or None where it does not
    load (measure_one records why)."""
    try:
        return gmspec.load(cfg["spec"], cfg["set"])["task"]
    except (gmspec.SpecError, OSError):
        return None


def part_done(path):
    """Whether result file path holds configurations that all ended ok,
    oom or refused (False when it cannot be read)."""
    try:
        with open(path) as f:
            cs = json.load(f)["configs"]
        return bool(cs) and all(c.get("status") in ("ok", "oom", "refused")
                                for c in cs)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def merge_parts(configs, parts, out, process):
    """Join result files of single-configuration runs into out: the
    environment and settings of the first readable one, every
    configuration in manifest order, the sum of their seconds, and
    settings.process = process. A part that cannot be read or is not a
    measurement file, and a configuration not in the manifest, are
    reported and left out; returns 1 if any was (0 otherwise). How many
    manifest entries have no measurement is reported, not an error."""
    doc, got, bad = None, {}, 0
    me = os.path.basename(sys.argv[0])
    names = {c["name"] for c in configs}
    for p in parts:
        try:
            with open(p) as f:
                d = json.load(f)
            if not isinstance(d, dict) or \
                    not isinstance(d.get("configs"), list) or \
                    not isinstance(d.get("settings"), dict):
                raise ValueError("not a measurement file (no configs "
                                 "and settings)")
        except (OSError, ValueError) as e:
            print(f"{me}: {p}: {e}", file=sys.stderr)
            bad = 1
            continue
        for c in d["configs"]:
            if c.get("name") in names:
                got[c["name"]] = c
            else:
                print(f"{me}: {p}: {c.get('name')!r} is not in the "
                      "manifest (left out)", file=sys.stderr)
                bad = 1
        if doc is None:
            doc = dict(d, configs=[], total_s=0.0)
        doc["total_s"] = round(doc["total_s"] + d.get("total_s", 0), 1)
    if doc is None:
        print(f"{me}: nothing to merge", file=sys.stderr)
        return 1
    doc["configs"] = [got[c["name"]] for c in configs if c["name"] in got]
    missing = len(configs) - len(doc["configs"])
    if missing:
        print(f"{me}: {len(doc['configs'])} of {len(configs)} "
              f"configurations in {out} ({missing} not measured)",
              file=sys.stderr)
    doc["settings"]["process"] = process
    write_atomic(out, doc)
    return bad


def gib(n):
    return f"{n / 2**30:7.2f}" if isinstance(n, int) else "      -"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("spec", nargs="*", help="spec files (YAML or JSON)")
    ap.add_argument("--set", action="append", default=[],
                    metavar="KEY=VALUE", help="override a spec key")
    ap.add_argument("--manifest", help="a calibration manifest (JSON)")
    ap.add_argument("--only", action="append", default=[],
                    help="run only this manifest entry (repeatable)")
    ap.add_argument("--out", help="the measurement file to write")
    ap.add_argument("--steps", type=int, default=3,
                    help="training steps per configuration (>= 2)")
    ap.add_argument("--budget-s", type=float, default=40,
                    help="per configuration: no new step after this")
    ap.add_argument("--total-budget-s", type=float, default=400,
                    help="no new configuration after this")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="run on the CPU without memory figures: only to "
                    "exercise the code on tiny models")
    ap.add_argument("--check", action="store_true",
                    help="only validate the specs (no GPU, no torch)")
    ap.add_argument("--resume", action="store_true",
                    help="keep the configurations already measured (ok, "
                    "oom, refused) in --out and run only the rest")
    ap.add_argument("--trace-dir", metavar="DIR",
                    help="record each configuration's allocation trace "
                    "into DIR/NAME.trace.jsonl.gz (tracefile.py)")
    ap.add_argument("--list", action="store_true",
                    help="print the manifest's configuration names, "
                    "inference first, one per line, and exit")
    ap.add_argument("--done", metavar="PART.json",
                    help="exit 0 when every configuration in this result "
                    "file ended ok, oom or refused (a runner keeps such a "
                    "part), 1 otherwise or when it cannot be read")
    ap.add_argument("--merge", nargs="+", metavar="PART.json",
                    help="join the files of single-configuration runs "
                    "(--only NAME each) into --out, in manifest order")
    args = ap.parse_args(argv)
    if args.done:
        return 0 if part_done(args.done) else 1
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    if args.steps < 2:
        ap.error("--steps: at least 2 (optimizer states appear in step 1)")

    configs = []
    if args.manifest:
        configs = load_manifest(args.manifest)
        if args.only:
            configs = [c for c in configs if c["name"] in args.only]
    for s in args.spec:
        configs.append(dict(name=os.path.splitext(os.path.basename(s))[0],
                            spec=s, set=args.set, heldout=False))
    if not configs:
        ap.error("give a SPEC or --manifest")
    if args.check:
        return check_only(configs)
    if args.list:
        for c in sorted(configs, key=lambda c: task_of(c) != "inference"):
            print(c["name"])
        return 0
    if not args.out:
        ap.error("--out is required")
    if args.merge:
        return merge_parts(configs, args.merge, args.out,
                           "one process per configuration")

    start = time.monotonic()
    global DEV, mem
    import torch
    if args.cpu_dry_run:
        DEV, mem = "cpu", CpuMem()
        env = {"gpu_name": "cpu dry run (no memory figures)",
               "torch": torch.__version__}
    else:
        if not torch.cuda.is_available():
            print("measure.py: no CUDA device", file=sys.stderr)
            return 77
        mem = torch.cuda
        torch.cuda.init()
        torch.zeros(1, device="cuda")
        env = environment(torch)
    mem.synchronize()
    free, total = mem.mem_get_info()
    doc = {"format": FORMAT, "environment": env,
           "baseline": {"device_used_after_init_bytes": total - free,
                        "import_s": round(time.monotonic() - start, 2)},
           "settings": {"steps": args.steps, "budget_s": args.budget_s,
                        "lr": LR},
           "configs": []}
    done = {}
    if args.resume and os.path.exists(args.out):
        with open(args.out) as f:
            old = json.load(f)
        if old.get("environment", {}).get("gpu_name") == env["gpu_name"]:
            done = {c["name"]: c for c in old.get("configs", [])
                    if c.get("status") in ("ok", "oom", "refused")}
            log(f"# resuming: {len(done)} configurations kept from "
                f"{args.out}")
    log(f"# {env['gpu_name']}, driver {env.get('driver')}, CUDA "
        f"{env.get('cuda_runtime')}, torch {env['torch']}, transformers "
        f"{env.get('transformers')}; {len(configs)} configurations")
    log(f"# {'name':34s} {'status':7s} {'alloc':>7s} {'reserv':>7s} "
        f"{'used':>7s} GiB   wall")
    # Inference first: the libraries' kernels load lazily and stay, so
    # an inference configuration measured after training ones would see
    # the training kernels' memory outside the allocator.
    configs.sort(key=lambda c: task_of(c) != "inference")
    for n, cfg in enumerate(configs):
        if cfg["name"] in done:
            doc["configs"].append(done[cfg["name"]])
            continue
        if time.monotonic() - start > args.total_budget_s:
            doc["configs"].append({"name": cfg["name"], "spec":
                                   cfg.get("spec_rel", cfg["spec"]),
                                   "set": cfg["set"],
                                   "heldout": cfg["heldout"],
                                   "status": "skipped",
                                   "message": "total time budget spent"})
            log(f"  {cfg['name']:34s} skipped (time budget)")
            continue
        rec = measure_one(torch, cfg, args)
        doc["configs"].append(rec)
        log(f"  {rec['name']:34s} {rec['status']:7s} "
            f"{gib(rec.get('peak_allocated_bytes'))} "
            f"{gib(rec.get('peak_reserved_bytes'))} "
            f"{gib(rec.get('device_used_bytes'))} "
            f"{rec.get('wall_s', 0):6.1f}s"
            + (f"  {rec['message']}" if rec.get("message") else ""))
        doc["total_s"] = round(time.monotonic() - start, 1)
        write_atomic(args.out, doc)
    doc["total_s"] = round(time.monotonic() - start, 1)
    write_atomic(args.out, doc)
    ok = sum(c["status"] == "ok" for c in doc["configs"])
    log(f"# {ok} ok of {len(configs)} in {doc['total_s']} s -> {args.out}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
