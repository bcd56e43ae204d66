#!/usr/bin/env python3
"""test_frameworks.py - measure_frameworks.py without GPUs, torch,
DeepSpeed or Megatron-Core: the pending DeepSpeed and Megatron manifests
load and their runners accept every configuration; every spec is planned
by `gpumem plan` or refused only as "not modelled yet"; the DeepSpeed
JSON and Megatron's arguments built from a spec are the ones it says; what
cannot be run is refused; the Megatron runner, driven through stub torch
and megatron.core modules, builds one chunk per virtual stage with the
right pipeline ends and runs the schedule with the micro-batch count,
and the DeepSpeed runner, through stub modules, builds ZeRO-3 under
zero.Init (unless built whole) and steps the engine from the JSON;
measure_loops.py's trainer runner, through a stub transformers, passes
TrainingArguments the manifest's optim (none where the entry has none,
"sgd" for an sgd spec) and its manifest refuses optim off the trainer; the
records the harnesses share (measure.py ran_record, oom_record,
rank_summary) have their keys, order and values.

    test_frameworks.py [GPUMEM]    (run by meson, suite calibration)"""

import os
import subprocess
import sys
import types

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gmspec  # noqa: E402
import measure  # noqa: E402
import measure_frameworks as mf  # noqa: E402
from hfbuild import Unsupported  # noqa: E402

PENDING = os.path.join(HERE, "..", "..", "tests", "data", "calibration",
                       "pending")
MANIFESTS = [os.path.join(PENDING, d, "manifest.json")
             for d in ("ds-multi", "megatron")]
FAIL = []


def expect(cond, what):
    if not cond:
        FAIL.append(what)
        print("FAIL", what)


def spec_of(cfg, *sets):
    return gmspec.load(cfg["spec"], list(cfg["set"]) + list(sets))


def refused(fn, *a):
    try:
        fn(*a)
    except Unsupported as e:
        return str(e)
    return None


def test_manifests(gpumem):
    for path in MANIFESTS:
        configs = mf.load_manifest(path)
        expect(len(configs) >= 8, f"{path}: {len(configs)} configurations")
        held = sum(c["heldout"] for c in configs)
        expect(0 < held < len(configs), f"{path}: {held} held out")
        expect({c["gpus"] for c in configs} == {2, 4},
               f"{path}: 2- and 4-GPU configurations")
        for c in configs:
            spec = spec_of(c)
            expect(refused(mf.refuse, spec, c["runner"], c["gpus"]) is None,
                   f"{c['name']}: refused by its runner")
            if not gpumem:
                continue
            p = subprocess.run([gpumem, "plan", c["spec"]],
                               capture_output=True, text=True)
            ok = p.returncode == 0 or (p.returncode == 2 and
                                       "not modelled yet" in p.stderr)
            expect(ok, f"{c['name']}: gpumem plan exit {p.returncode}: "
                   f"{p.stderr.strip()[:300]}")


def by_name(name):
    for path in MANIFESTS:
        for c in mf.load_manifest(path):
            if c["name"] == name:
                return c
    raise KeyError(name)


def test_ds_config():
    c = by_name("dsm-zero3-offload-all-llama-1.1b-dp2")
    cfg = mf.ds_config(spec_of(c))
    z = cfg["zero_optimization"]
    expect(z["stage"] == 3 and z["offload_param"]["device"] == "cpu",
           "ds_config keeps the JSON's stage and offload")
    expect(cfg["train_micro_batch_size_per_gpu"] == 4 and
           cfg["gradient_accumulation_steps"] == 1 and
           cfg["zero_force_ds_cpu_optimizer"] is False,
           "ds_config: micro-batch, accumulation, client optimizer")
    # the spec and its JSON disagree: refused, not run under one name
    msg = refused(mf.ds_config,
                  spec_of(c, "parallelism.offload_parameters=none"))
    expect(msg and "offload_parameters" in msg, f"offload mismatch: {msg}")
    msg = refused(mf.ds_config, spec_of(c, "training.precision=fp16-mixed"))
    expect(msg and "precision" in msg, f"precision mismatch: {msg}")
    msg = refused(mf.refuse, spec_of(c), "deepspeed", 4)
    expect(msg and "gpus 4" in msg, f"GPU count mismatch: {msg}")
    msg = refused(mf.refuse, spec_of(c), "megatron", 2)
    expect(msg and "framework" in msg, f"runner/framework mismatch: {msg}")


def test_megatron_args():
    a = mf.megatron_args(spec_of(by_name("meg-pp2-vpp2-llama-134m")))
    expect(a["parallel"] == dict(tensor_model_parallel_size=1,
                                 pipeline_model_parallel_size=2,
                                 virtual_pipeline_model_parallel_size=2),
           f"vpp parallel sizes {a['parallel']}")
    expect(a["chunks"] == 2 and a["microbatches"] == 4,
           f"chunks {a['chunks']}, micro-batches {a['microbatches']}")
    a = mf.megatron_args(spec_of(by_name("meg-tp2-dp2-distopt-llama-1.1b")))
    expect(a["microbatches"] == 2, f"8 / (2 x 2) = {a['microbatches']}")
    expect(a["ddp"]["use_distributed_optimizer"] and
           a["optimizer"]["use_distributed_optimizer"] and
           a["ddp"]["grad_reduce_in_fp32"], "distributed optimizer, fp32 "
           "main_grad")
    expect(a["transformer"]["num_query_groups"] == 4 and
           a["transformer"]["kv_channels"] == 64 and
           a["transformer"]["tensor_model_parallel_size"] == 2,
           "llama-1.1b heads under tp 2")
    a = mf.megatron_args(spec_of(by_name("meg-dp2-llama-1.1b")))
    expect(not a["ddp"]["use_distributed_optimizer"], "distopt off")
    a = mf.megatron_args(spec_of(
        by_name("meg-dp2-distopt-selective-llama-1.1b")))
    expect(a["transformer"].get("recompute_granularity") == "selective" and
           a["transformer"].get("recompute_modules") == ["core_attn"],
           "selective recompute of core attention")
    expect(mf.padded_vocab(32000, 2) == 32000 and
           mf.padded_vocab(32001, 2) == 32256 and
           mf.padded_vocab(50257, 1) == 50304, "Megatron's vocab padding")
    vpp = by_name("meg-pp2-vpp2-llama-134m")
    msg = refused(mf.megatron_args,
                  spec_of(vpp, "training.global_batch_size=12"))
    expect(msg and "interleaved" in msg, f"3 micro-batches on pp 2: {msg}")
    msg = refused(mf.megatron_args, spec_of(vpp, "training.attention=sdpa"))
    expect(msg and "eager" in msg, f"fused attention refused: {msg}")
    msg = refused(mf.megatron_args,
                  spec_of(vpp, "parallelism.virtual_pipeline_stages=5"))
    expect(msg and "model.layers" in msg, f"12 layers over 2 x 5: {msg}")


class Fake:
    """A stand-in tensor: slicing, unsqueeze and expand give itself."""

    def __getitem__(self, k):
        return self

    def unsqueeze(self, d):
        return self

    def expand(self, *s):
        return self

    def float(self):
        return self

    def mean(self):
        return self

    def detach(self):
        return self


def stub_modules(log):
    torch = types.ModuleType("torch")
    torch.bfloat16, torch.float16, torch.float32 = "bf16", "fp16", "fp32"
    torch.nn = types.SimpleNamespace(
        functional=types.SimpleNamespace(silu="silu"))
    torch.cuda = types.SimpleNamespace(
        current_device=lambda: 0, synchronize=lambda: None,
        max_memory_allocated=lambda: 7, max_memory_reserved=lambda: 8,
        memory_allocated=lambda: 5,
        reset_peak_memory_stats=lambda: log.__setitem__(
            "reset", log.get("reset", 0) + 1))
    torch.randint = lambda *a, **k: Fake()
    torch.arange = lambda *a, **k: Fake()

    def mod(name, **attrs):
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        sys.modules[name] = m
        parent, _, leaf = name.rpartition(".")
        if parent:
            setattr(sys.modules[parent], leaf, m)
        return m

    class Chunk:
        def __init__(self, **kw):
            self.kw = kw
            log.setdefault("models", []).append(kw)

        def cuda(self, dev):
            return self

        def __call__(self, x, pos, mask, labels=None):
            return Fake()

    class DDP:
        def __init__(self, config, ddp_config, module):
            self.module = module
            log.setdefault("ddp", []).append(ddp_config)

        def parameters(self):
            return iter(())

        def zero_grad_buffer(self):
            log["zeroed"] = log.get("zeroed", 0) + 1

        def __call__(self, *a, **k):
            return self.module(*a, **k)

    class Opt:
        def zero_grad(self):
            pass

        def step(self):
            log["steps"] = log.get("steps", 0) + 1

    vp = {"size": None}

    def init(**kw):
        log["parallel"] = kw
        vp["size"] = kw["virtual_pipeline_model_parallel_size"]

    def first(ignore_virtual=True, vp_stage=None):
        return vp_stage in (None, 0)

    def last(ignore_virtual=True, vp_stage=None):
        return vp_stage in (None, (vp["size"] or 1) - 1)

    def fb(**kw):
        log.setdefault("schedule", []).append(kw)
        its = kw["data_iterator"]
        it = its[0] if isinstance(its, list) else its
        models = kw["model"] if isinstance(kw["model"], list) \
            else [kw["model"]]
        out, lf = kw["forward_step_func"](it, models[0])
        loss, _ = lf(out)

    ps = types.SimpleNamespace(initialize_model_parallel=init,
                               is_pipeline_first_stage=first,
                               is_pipeline_last_stage=last)
    mod("megatron")
    mod("megatron.core", __version__="stub", parallel_state=ps,
        tensor_parallel=types.SimpleNamespace(
            model_parallel_cuda_manual_seed=lambda s: None))
    mod("megatron.core.distributed", DistributedDataParallel=DDP,
        DistributedDataParallelConfig=lambda **kw: kw,
        finalize_model_grads="finalize")
    mod("megatron.core.models")
    mod("megatron.core.models.gpt")
    mod("megatron.core.models.gpt.gpt_layer_specs",
        get_gpt_layer_local_spec=lambda **kw: ("local", kw))
    mod("megatron.core.models.gpt.gpt_model", GPTModel=Chunk)
    mod("megatron.core.optimizer", OptimizerConfig=lambda **kw: kw,
        get_megatron_optimizer=lambda cfg, chunks: (
            log.__setitem__("optimizer", cfg), Opt())[1])
    mod("megatron.core.pipeline_parallel",
        get_forward_backward_func=lambda: fb)
    mod("megatron.core.transformer")
    mod("megatron.core.transformer.transformer_config",
        TransformerConfig=lambda **kw: types.SimpleNamespace(**kw))
    return torch


def test_megatron_runner():
    class Stats:
        steps = []

        def step_done(self, t):
            self.steps.append(t)

    saved = dict(sys.modules)
    try:
        log = {}
        torch = stub_modules(log)
        spec = spec_of(by_name("meg-pp2-vpp2-dp2-distopt-llama-134m"))
        rec = {}
        mf.run_megatron(torch, spec, Stats(), 2, rec)
        ends = [(m["pre_process"], m["post_process"], m["vp_stage"])
                for m in log["models"]]
        expect(ends == [(True, False, 0), (False, True, 1)],
               f"virtual stages' pipeline ends {ends}")
        expect(all(m["vocab_size"] == 32000 and
                   m["position_embedding_type"] == "rope"
                   for m in log["models"]), "GPTModel arguments")
        expect(log["optimizer"]["use_distributed_optimizer"] and
               log["optimizer"]["params_dtype"] == "bf16",
               f"optimizer config {log['optimizer']}")
        sch = log["schedule"]
        expect(len(sch) == 2 and sch[0]["num_microbatches"] == 4 and
               isinstance(sch[0]["model"], list) and
               len(sch[0]["model"]) == 2 and sch[0]["seq_length"] == 2048,
               "interleaved schedule over 2 chunks, 32 / (4 x 2) "
               "micro-batches")
        expect(log["steps"] == 2 and log["zeroed"] == 4,
               "two optimizer steps, each chunk's buffer zeroed per step")
        expect(rec.get("init_peak_allocated_bytes") == 7 and
               log.get("reset") == 1, "build peaks recorded once")
        log.clear()
        mf.run_megatron(torch, spec_of(by_name("meg-tp2-llama-1.1b")),
                        Stats(), 1, {})
        expect(len(log["models"]) == 1 and
               log["models"][0]["vp_stage"] is None and
               not isinstance(log["schedule"][0]["model"], list),
               "one chunk without virtual stages")
    finally:
        sys.modules.clear()
        sys.modules.update(saved)


def test_deepspeed_runner():
    import measure_loops

    class Stats:
        steps = []

        def step_done(self, t):
            self.steps.append(t)

    class Model:
        def parameters(self):
            return iter(())

    class Engine:
        def __call__(self, **batch):
            return types.SimpleNamespace(loss="loss")

        def train(self):
            pass

        def backward(self, loss):
            log["backward"] = log.get("backward", 0) + 1

        def step(self):
            log["steps"] = log.get("steps", 0) + 1

    class Init:
        def __init__(self, config_dict_or_path):
            log["zero_init"] = config_dict_or_path

        def __enter__(self):
            log["inside"] = True

        def __exit__(self, *a):
            log["inside"] = False

    def build(torch, spec, dtype, attn):
        log["built"] = (dtype, log.get("inside", False))
        return Model()

    def initialize(model, optimizer, config):
        log["config"] = config
        return Engine(), None, None, None

    saved = dict(sys.modules)
    patched = {k: getattr(measure_loops, k) for k in
               ("build_model", "make_optimizer", "batch_of", "use_cache_of")}
    try:
        log = {}
        torch = stub_modules(log)
        mod = types.ModuleType("deepspeed")
        mod.__version__ = "stub"
        mod.initialize = initialize
        mod.zero = types.SimpleNamespace(Init=Init)
        sys.modules["deepspeed"] = mod
        measure_loops.build_model = build
        measure_loops.make_optimizer = lambda torch, name, p: name
        measure_loops.batch_of = lambda torch, spec, cache: {}
        measure_loops.use_cache_of = lambda spec: False
        c = by_name("dsm-zero3-llama-1.1b-dp2")
        rec = {}
        mf.run_deepspeed(torch, spec_of(c), Stats(), 2, rec)
        expect(log["built"] == ("bf16", True) and rec.get("zero_init"),
               f"ZeRO-3 built in bf16 under zero.Init: {log['built']}")
        expect(log["config"]["zero_optimization"]["stage"] == 3 and
               log["steps"] == 2 and log["backward"] == 2,
               "engine from the JSON, two steps")
        log.clear()
        mf.run_deepspeed(torch, spec_of(c, "parallelism.built_whole=true"),
                         Stats(), 1, {})
        expect(log["built"] == ("bf16", False) and "zero_init" not in log,
               "built whole: no zero.Init")
        log.clear()
        mf.run_deepspeed(torch, spec_of(by_name("dsm-zero2-llama-1.1b-dp2")),
                         Stats(), 1, {})
        expect("zero_init" not in log, "ZeRO-2: no zero.Init")
    finally:
        for k, v in patched.items():
            setattr(measure_loops, k, v)
        sys.modules.clear()
        sys.modules.update(saved)


def test_trainer_optim():
    import json
    import tempfile
    import measure_loops as ml
    loops = os.path.join(PENDING, "loops", "manifest.json")
    cfgs = {c["name"]: c for c in ml.load_manifest(loops)}

    class Args:
        def __init__(self, **kw):
            log.append(kw)
            self.optim = kw.get("optim", "default")

    class Trainer:
        def __init__(self, **kw):
            pass

        def train(self):
            pass

    class Set:
        def __init__(self, *a):
            pass

    saved = dict(sys.modules)
    patched = {k: getattr(ml, k) for k in ("RandomSet", "mixed_dtype")}
    log = []
    try:
        sys.modules["transformers"] = types.SimpleNamespace(
            TrainingArguments=Args, Trainer=Trainer, TrainerCallback=object)
        ml.RandomSet = Set
        ml.mixed_dtype = lambda torch, spec: None
        torch = types.SimpleNamespace(bfloat16="bf16", float16="fp16")

        def run(name):
            c, rec = cfgs[name], {}
            log.clear()
            ml.run_trainer(torch, spec_of(c), None, None, 1, rec,
                           **({"optim": c["optim"]} if "optim" in c
                              else {}))
            return log[0].get("optim"), rec["trainer_optim"]

        got = run("trainer-mixtral-2l-bf16mixed-adamw-torch")
        expect(got == ("adamw_torch", "adamw_torch"),
               f"the manifest's optim reaches TrainingArguments: {got}")
        got = run("trainer-mixtral-2l-bf16mixed")
        expect(got == ("adamw_torch_fused", "adamw_torch_fused"),
               f"no optim, optimizer_implementation fused: the Trainer's "
               f"default adamw_torch_fused: {got}")
        try:
            ml.run_trainer(torch, spec_of(cfgs["trainer-mixtral-2l-"
                                               "bf16mixed"]),
                           None, None, 1, {}, optim="adamw_torch")
            expect(False, "an optim the spec's implementation contradicts "
                   "is refused")
        except Unsupported:
            pass
        got = run("trainer-llama-1.1b-bf16true-sgd")
        expect(got == ("sgd", "sgd"), f"an sgd spec: optim sgd: {got}")
        try:
            ml.run_trainer(torch, spec_of(cfgs["trainer-llama-1.1b-"
                                               "bf16true-sgd"]),
                           None, None, 1, {}, optim="adamw_torch")
            expect(False, "optim on an sgd spec is refused")
        except Unsupported:
            pass
    finally:
        for k, v in patched.items():
            setattr(ml, k, v)
        sys.modules.clear()
        sys.modules.update(saved)
    with open(loops) as f:
        man = json.load(f)
    for c in man["configs"]:
        c["spec"] = os.path.join(os.path.dirname(loops), c["spec"])
        if c["runner"] == "native":
            c["optim"] = "adamw_torch"
            break
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(man, f)
        f.flush()
        try:
            ml.load_manifest(f.name)
            expect(False, "optim on a native entry is refused")
        except SystemExit as e:
            expect("runner trainer only" in str(e), f"its message: {e}")


def test_records():
    GiB = 2**30
    mem = types.SimpleNamespace(
        mem_get_info=lambda: (10 * GiB, 100 * GiB),
        memory_reserved=lambda: 60 * GiB,
        max_memory_reserved=lambda: 64 * GiB,
        max_memory_allocated=lambda: 50 * GiB)
    steps = [{"time_s": t} for t in (9.0, 1.0, 3.0, 2.0)]
    rec = measure.ran_record(mem, types.SimpleNamespace(steps=steps))
    expect(list(rec) == ["status", "peak_allocated_bytes",
                         "peak_reserved_bytes", "device_used_bytes",
                         "device_used_end_bytes", "reserved_end_bytes",
                         "outside_allocator_bytes", "steps", "step_time_s",
                         "per_step"], f"ran_record keys {list(rec)}")
    # used at the reserved peak: 90 GiB read at the end + 4 GiB given back
    expect(rec["device_used_bytes"] == 94 * GiB and
           rec["outside_allocator_bytes"] == 30 * GiB and
           rec["step_time_s"] == 2.0 and rec["steps"] == 4,
           f"ran_record figures {rec}")
    rec = measure.ran_record(mem, types.SimpleNamespace(steps=[]),
                             lambda: 123)
    expect(rec["step_time_s"] is None and
           list(rec).index("nvml_process_used_bytes") == 5 and
           rec["nvml_process_used_bytes"] == 123,
           f"no step, with NVML: {rec}")
    try:
        measure.ran_record(mem, types.SimpleNamespace(steps=[]),
                           none_without_steps=False)
        expect(False, "no step under none_without_steps=False raises")
    except measure.statistics.StatisticsError:
        pass
    rec = measure.oom_record(mem, RuntimeError("out of memory\ndetail"))
    expect(rec == {"status": "oom", "message": "out of memory",
                   "peak_allocated_bytes": 50 * GiB,
                   "peak_reserved_bytes": 64 * GiB,
                   "device_used_bytes": 90 * GiB}, f"oom_record {rec}")
    cfg = {"name": "n", "spec_rel": "s.yaml", "set": [], "heldout": True,
           "runner": "megatron"}
    ok = [{"status": "ok", "peak_allocated_bytes": a,
           "peak_reserved_bytes": 2 * a, "device_used_bytes": 3 * a,
           "step_time_s": t} for a, t in ((5, None), (7, 0.5), (6, 0.25))]
    top = measure.rank_summary(cfg, ok, ("runner",),
                               step_time=lambda v: v or 0)
    expect(list(top) == ["name", "spec", "set", "heldout", "runner",
                         "status", "peak_allocated_bytes",
                         "peak_reserved_bytes", "device_used_bytes",
                         "step_time_s", "ranks"] and
           (top["peak_allocated_bytes"], top["peak_reserved_bytes"],
            top["device_used_bytes"], top["step_time_s"]) ==
           (7, 14, 21, 0.5) and top["ranks"] is ok,
           f"rank_summary of ok ranks {top}")
    mixed = [{"status": "error", "message": "e"}, {"status": "ok"},
             {"status": "oom", "message": "o"}]
    top = measure.rank_summary(cfg, mixed)
    expect(top["status"] == "oom" and top["message"] == "e" and
           "runner" not in top and "peak_reserved_bytes" not in top,
           f"an oom rank: {top}")
    top = measure.rank_summary(cfg, [{"status": "refused"},
                                     {"status": "error"}, {"status": "ok"}])
    expect(top["status"] == "error" and "message" not in top,
           f"the first status in sorted order: {top}")


def test_cli():
    tool = os.path.join(HERE, "measure_frameworks.py")
    man = MANIFESTS[0]
    p = subprocess.run([sys.executable, tool, "--manifest", man, "--list",
                        "--world", "4"], capture_output=True, text=True)
    names = p.stdout.split()
    expect(p.returncode == 0 and names and
           all(n.endswith("dp4") for n in names), f"--list --world 4: "
           f"{names}")
    p = subprocess.run([sys.executable, tool, "--manifest", man, "--list"],
                       capture_output=True, text=True)
    expect(p.returncode == 2 and "--world" in p.stderr, "--list needs "
           "--world")
    p = subprocess.run([sys.executable, tool, "--manifest", man],
                       capture_output=True, text=True)
    expect(p.returncode == 2 and "--out" in p.stderr, "a run needs --out")


def main():
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("PyYAML is not installed (skipped)")
        return 77
    gpumem = sys.argv[1] if len(sys.argv) > 1 else None
    test_manifests(gpumem)
    test_ds_config()
    test_megatron_args()
    test_megatron_runner()
    test_deepspeed_runner()
    test_trainer_optim()
    test_records()
    test_cli()
    print("FAILED: %d" % len(FAIL) if FAIL else "all passed")
    return 1 if FAIL else 0


if __name__ == "__main__":
    sys.exit(main())
