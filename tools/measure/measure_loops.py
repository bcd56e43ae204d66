#!/usr/bin/env python3
"""measure_loops.py - measure a spec's training run as a framework builds it.

    measure_loops.py --manifest M.json --only NAME --out PART.json [--trace-dir D]
    measure_loops.py --manifest M.json --list | --check | --merge PART... --out F

measure.py drives every model with one plain loop (loss only, autocast,
torch.optim). The runs users start are built by other code: the Hugging
Face Trainer, the transformers documentation's own loop that keeps
`outputs`, Lightning, accelerate, PEFT adapters, DeepSpeed's engine. Each
manifest entry names a `runner`, and the run is that framework's own code,
not a re-creation:

  trainer     transformers.Trainer(...).train() with TrainingArguments
              (bf16 / fp16 from training.precision, gradient_checkpointing,
              optim from training.optimizer_implementation: fused is
              adamw_torch_fused, the Trainer's default; foreach adamw_torch;
              recorded. A manifest entry's "optim" (a TrainingArguments.optim
              name) must name the same)
  native      the transformers docs' loop: outputs = model(**batch);
              loss = outputs.loss; loss.backward(); optimizer.step();
              optimizer.zero_grad(). training.loop keep-outputs keeps
              `outputs` (logits, past_key_values) alive into the next
              step, trainer drops it; use_cache as training.use_cache says
              (auto: the model config's default)
  lightning   lightning.Trainer(precision="bf16-mixed" | "16-mixed")
  accelerate  accelerate.Accelerator(mixed_precision=...), prepare(),
              accelerator.backward(loss)
  deepspeed   deepspeed.initialize() from the spec's
              training.deepspeed_config JSON, torch.optim.AdamW as the
              client optimizer, one GPU (world size 1)

training.adapter lora / qlora wraps the model with PEFT (LoraConfig with
lora_rank and lora_targets; qlora loads the base in 4-bit NF4 with double
quantization through bitsandbytes and calls prepare_model_for_kbit_training,
as PEFT's QLoRA recipe does) before any runner.

Records what measure.py records (peak allocated / reserved, device used,
step times, versions) plus the runner, the versions of every framework
used, and what the framework chose where the spec leaves it open (the
Trainer's optim, PEFT's trainable parameter count). One process per
configuration (tests/gpu/run-measure-loops.sh starts them).
"""

import argparse
import contextlib
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gmspec  # noqa: E402
import hfbuild  # noqa: E402
import measure  # noqa: E402
from hfbuild import Unsupported  # noqa: E402

RUNNERS = ("trainer", "native", "lightning", "accelerate", "deepspeed")
LR = measure.LR


def load_manifest(path):
    """measure.load_manifest plus each entry's runner (required) and
    optim (optional, runner trainer only)."""
    with open(path) as f:
        man = json.load(f)
    out = measure.load_manifest(path)
    for c, raw in zip(out, man["configs"]):
        r = raw.get("runner")
        if r not in RUNNERS:
            raise SystemExit(f"{path}: {c['name']}: runner {r!r} is not "
                             f"one of {', '.join(RUNNERS)}")
        c["runner"] = r
        if "optim" in raw:
            if r != "trainer" or not isinstance(raw["optim"], str):
                raise SystemExit(f"{path}: {c['name']}: optim is a "
                                 "TrainingArguments.optim name, for "
                                 "runner trainer only")
            c["optim"] = raw["optim"]
    return out


def refuse(spec, runner):
    """Raise Unsupported for what this harness cannot run as written."""
    t, m, par = spec["training"], spec["model"], spec["parallelism"]
    if spec["task"] != "train":
        raise Unsupported("task: measure_loops.py measures training; "
                          "inference runs through measure.py")
    if par["data_parallel"] * par["tensor_parallel"] * \
            par["pipeline_parallel"] != 1:
        raise Unsupported("parallelism: one GPU only here "
                          "(measure_multi.py runs several)")
    if m["architecture"] == "custom":
        raise Unsupported("model.architecture: custom has no model to build")
    if runner == "deepspeed":
        if t["framework"] != "deepspeed" or not t["deepspeed_config"]:
            raise Unsupported("runner deepspeed: needs training.framework "
                              "deepspeed and training.deepspeed_config")
    elif t["framework"] != "pytorch":
        raise Unsupported(f"training.framework {t['framework']}: runner "
                          f"{runner} runs plain PyTorch")
    if runner != "native" and t["loop"] == "keep-outputs":
        raise Unsupported("training.loop keep-outputs: only the native loop "
                          "keeps outputs (the others return the loss alone)")
    if runner in ("lightning", "accelerate") and \
            not t["precision"].endswith("-mixed"):
        raise Unsupported(f"runner {runner}: measured with *-mixed")
    if t["adapter"] == "qlora" and t["precision"] == "fp32":
        raise Unsupported("training.adapter qlora: needs a 16-bit compute "
                          "dtype")
    if t["optimizer"] not in ("adamw", "adam", "sgd", "sgd-momentum"):
        raise Unsupported(f"training.optimizer {t['optimizer']}: not measured")
    if t["activation_checkpointing"] == "selective":
        raise Unsupported("training.activation_checkpointing selective: "
                          "not measured here")
    if t["global_batch_size"]:
        raise Unsupported("training.global_batch_size: one micro-batch per "
                          "step here")
    if m["hf_config"] is None:
        hfbuild.model_class_name(spec)


# ------------------------------------------------------------ the model

def build_config(spec, attn):
    """The transformers config: from model.hf_config (a config.json, keys
    written in the spec override its sizes) or hfbuild's mapping."""
    if not spec["model"]["hf_config"]:
        return hfbuild.build_config(spec, attn)
    return hfbuild.hf_config(spec, attn)


def build_model(torch, spec, dtype, attn):
    """Random weights, created on the GPU in dtype (never copied)."""
    import transformers
    cfg = build_config(spec, attn)
    if spec["training"]["adapter"] == "qlora":
        return load_4bit(torch, transformers, cfg, dtype)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            if spec["model"]["hf_config"]:
                model = transformers.AutoModelForCausalLM.from_config(cfg)
            else:
                model = hfbuild.model_class(spec)(cfg)
    finally:
        torch.set_default_dtype(old)
    return model


def load_4bit(torch, transformers, cfg, dtype):
    """QLoRA's base model as users load it: from_pretrained with a
    BitsAndBytesConfig (4-bit NF4, double quantization, the compute dtype),
    from a checkpoint of random weights written first (the only way to
    quantize is to load)."""
    import tempfile
    d = tempfile.mkdtemp(prefix="measure-qlora-")
    # random weights made on the GPU (a 7B model's CPU initialisation
    # alone outlasts a configuration's time limit), then the cache emptied
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device("cuda"):
            m = transformers.AutoModelForCausalLM.from_config(cfg)
    finally:
        torch.set_default_dtype(old)
    m.save_pretrained(d)
    del m
    torch.cuda.empty_cache()
    q = transformers.BitsAndBytesConfig(
        load_in_4bit=True, bnb_4bit_quant_type="nf4",
        bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=dtype)
    return transformers.AutoModelForCausalLM.from_pretrained(
        d, quantization_config=q, torch_dtype=dtype, device_map={"": 0},
        attn_implementation=cfg._attn_implementation)


def apply_adapter(torch, spec, model, rec):
    t = spec["training"]
    if t["adapter"] == "none":
        return model
    import peft
    if t["adapter"] == "qlora":
        # PEFT's QLoRA recipe: casts norms to fp32, enables input grads
        # and gradient checkpointing (peft/utils/other.py)
        model = peft.prepare_model_for_kbit_training(
            model, use_gradient_checkpointing=(
                t["activation_checkpointing"] == "full"))
    targets = t["lora_targets"]
    if targets == ["all-linear"]:
        targets = "all-linear"
    cfg = peft.LoraConfig(r=t["lora_rank"], lora_alpha=2 * t["lora_rank"],
                          target_modules=targets, lora_dropout=0.0,
                          task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, cfg)
    trainable, total = model.get_nb_trainable_parameters()
    rec["trainable_parameters"] = int(trainable)
    rec["peft"] = peft.__version__
    return model


# ------------------------------------------------------------ the data

def batch_of(torch, spec, use_cache):
    t, m = spec["training"], spec["model"]
    g = torch.Generator(device="cuda").manual_seed(0)
    ids = torch.randint(0, m["vocab_size"], (t["micro_batch_size"],
                                             t["sequence_length"]),
                        device="cuda", generator=g)
    kw = {"input_ids": ids, "labels": ids,
          "attention_mask": torch.ones_like(ids)}
    if use_cache is not None:
        kw["use_cache"] = use_cache
    return kw


def use_cache_of(spec):
    u = spec["training"]["use_cache"]
    return None if u == "auto" else (u == "true" or u is True)


class RandomSet:
    """A map-style dataset of one fixed random micro-batch per item (CPU
    tensors, as a DataLoader yields them)."""

    def __init__(self, torch, spec, n):
        t, m = spec["training"], spec["model"]
        g = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, m["vocab_size"],
                                 (n, t["sequence_length"]), generator=g)

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        x = self.ids[i]
        return {"input_ids": x, "labels": x.clone(),
                "attention_mask": x.new_ones(x.shape)}


def make_optimizer(torch, name, params, impl="foreach"):
    return measure.make_optimizer(torch, name,
                                  [p for p in params if p.requires_grad],
                                  impl)


def mixed_dtype(torch, spec):
    p = spec["training"]["precision"]
    return {"bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}.get(p)


# ------------------------------------------------------------ runners

def run_native(torch, spec, model, stats, steps, rec):
    t = spec["training"]
    model.train()
    if t["activation_checkpointing"] == "full" and t["adapter"] != "qlora":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = make_optimizer(torch, t["optimizer"], model.parameters(),
                         t["optimizer_implementation"])
    dt = mixed_dtype(torch, spec)
    ac = (lambda: torch.autocast("cuda", dtype=dt)) if dt else \
        contextlib.nullcontext
    scaler = torch.amp.GradScaler("cuda") if dt is torch.float16 else None
    batch = batch_of(torch, spec, use_cache_of(spec))
    keep = t["loop"] == "keep-outputs"
    outputs = None
    for step in range(steps):
        t0 = time.perf_counter()
        with ac():
            outputs = model(**batch)
        loss = outputs.loss
        if not keep:
            outputs = None
        (scaler.scale(loss) if scaler else loss).backward()
        if scaler:
            scaler.step(opt)
            scaler.update()
        else:
            opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        stats.step_done(time.perf_counter() - t0)
    rec["kept_outputs"] = sorted(k for k in (outputs or {}).keys())
    del outputs


def trainer_optim(t):
    """TrainingArguments.optim for the spec's optimizer (transformers 5.17
    training_args.py OptimizerNames; trainer_optimizer.py passes
    fused=True for adamw_torch_fused, nothing for adamw_torch: torch's
    foreach)."""
    if t["optimizer"] == "sgd":
        return "sgd"
    if t["optimizer"] == "adamw" and t["optimizer_implementation"] in (
            "fused", "foreach"):
        return {"fused": "adamw_torch_fused",
                "foreach": "adamw_torch"}[t["optimizer_implementation"]]
    raise Unsupported(f"training.optimizer {t['optimizer']} "
                      f"({t['optimizer_implementation']}) under the Trainer")


def run_trainer(torch, spec, model, stats, steps, rec, optim=None):
    import transformers
    t = spec["training"]
    if optim and t["optimizer"] != "adamw":
        raise Unsupported(f"optim {optim}: the manifest picks an AdamW "
                          "implementation; the spec's optimizer is "
                          f"{t['optimizer']}")
    if optim and optim != trainer_optim(t):
        raise Unsupported(f"optim {optim}: the spec's "
                          f"optimizer_implementation "
                          f"{t['optimizer_implementation']} runs "
                          f"{trainer_optim(t)}")
    dt = mixed_dtype(torch, spec)
    args = transformers.TrainingArguments(
        output_dir=os.environ.get("MEASURE_TMP", "/tmp/measure-trainer"),
        per_device_train_batch_size=t["micro_batch_size"],
        max_steps=steps, learning_rate=LR, save_strategy="no",
        report_to=[], logging_strategy="no", disable_tqdm=True,
        bf16=dt is torch.bfloat16, fp16=dt is torch.float16,
        gradient_checkpointing=t["activation_checkpointing"] == "full",
        gradient_checkpointing_kwargs={"use_reentrant": False},
        dataloader_num_workers=0, dataloader_pin_memory=False,
        remove_unused_columns=False, seed=0,
        optim=trainer_optim(t))
    rec["trainer_optim"] = str(args.optim)
    mark = {"t0": None}

    class Step(transformers.TrainerCallback):
        def on_step_begin(self, a, s, c, **kw):
            mark["t0"] = time.perf_counter()

        def on_step_end(self, a, s, c, **kw):
            torch.cuda.synchronize()
            stats.step_done(time.perf_counter() - mark["t0"])

    tr = transformers.Trainer(model=model, args=args,
                              train_dataset=RandomSet(torch, spec, steps *
                                                      t["micro_batch_size"]),
                              callbacks=[Step()])
    tr.train()


def run_lightning(torch, spec, model, stats, steps, rec):
    import lightning as L
    t = spec["training"]
    prec = {"bf16-mixed": "bf16-mixed", "fp16-mixed": "16-mixed"}[
        t["precision"]]
    rec["lightning"] = L.__version__
    rec["lightning_precision"] = prec
    if t["activation_checkpointing"] == "full":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})

    class Module(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            self.t0 = None

        def training_step(self, batch, i):
            return self.model(**batch).loss

        def on_train_batch_start(self, batch, i):
            self.t0 = time.perf_counter()

        def on_train_batch_end(self, out, batch, i):
            torch.cuda.synchronize()
            stats.step_done(time.perf_counter() - self.t0)

        def configure_optimizers(self):
            return make_optimizer(torch, t["optimizer"],
                                  self.model.parameters(),
                                  t["optimizer_implementation"])

    dl = torch.utils.data.DataLoader(
        RandomSet(torch, spec, steps * t["micro_batch_size"]),
        batch_size=t["micro_batch_size"])
    tr = L.Trainer(accelerator="gpu", devices=1, precision=prec,
                   max_steps=steps, logger=False, enable_checkpointing=False,
                   enable_progress_bar=False, enable_model_summary=False,
                   num_sanity_val_steps=0)
    tr.fit(Module(), dl)


def run_accelerate(torch, spec, model, stats, steps, rec):
    import accelerate
    t = spec["training"]
    rec["accelerate"] = accelerate.__version__
    acc = accelerate.Accelerator(mixed_precision={
        "bf16-mixed": "bf16", "fp16-mixed": "fp16"}[t["precision"]])
    if t["activation_checkpointing"] == "full":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = make_optimizer(torch, t["optimizer"], model.parameters(),
                         t["optimizer_implementation"])
    dl = torch.utils.data.DataLoader(
        RandomSet(torch, spec, steps * t["micro_batch_size"]),
        batch_size=t["micro_batch_size"])
    model, opt, dl = acc.prepare(model, opt, dl)
    model.train()
    for batch in dl:
        t0 = time.perf_counter()
        loss = model(**batch).loss
        acc.backward(loss)
        opt.step()
        opt.zero_grad(set_to_none=True)
        del loss
        torch.cuda.synchronize()
        stats.step_done(time.perf_counter() - t0)


def run_deepspeed(torch, spec, model, stats, steps, rec):
    import deepspeed
    t = spec["training"]
    rec["deepspeed"] = deepspeed.__version__
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29511")
    os.environ.setdefault("RANK", "0")
    os.environ.setdefault("LOCAL_RANK", "0")
    os.environ.setdefault("WORLD_SIZE", "1")
    with open(t["deepspeed_config"]) as f:
        cfg = json.load(f)
    cfg["train_micro_batch_size_per_gpu"] = t["micro_batch_size"]
    cfg.setdefault("gradient_accumulation_steps", 1)
    cfg.pop("train_batch_size", None)
    # torch.optim as the client optimizer: DeepSpeed's compiled ops need
    # not be built (zero_force_ds_cpu_optimizer false lets it pair with
    # optimizer offload, runtime/engine.py _configure_optimizer)
    cfg["zero_force_ds_cpu_optimizer"] = False
    if t["activation_checkpointing"] == "full":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = make_optimizer(torch, t["optimizer"], model.parameters(),
                         t["optimizer_implementation"])
    engine, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                             config=cfg)
    engine_steps(torch, engine, batch_of(torch, spec, use_cache_of(spec)),
                 stats, steps)


def engine_steps(torch, engine, batch, stats, steps):
    """steps training steps of a DeepSpeed engine on batch (forward,
    engine.backward, engine.step), each timed to the device's end into
    stats (measure.Stats)."""
    engine.train()
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = engine(**batch).loss
        engine.backward(loss)
        engine.step()
        del loss
        torch.cuda.synchronize()
        stats.step_done(time.perf_counter() - t0)


RUN = {"native": run_native, "trainer": run_trainer,
       "lightning": run_lightning, "accelerate": run_accelerate,
       "deepspeed": run_deepspeed}


# ------------------------------------------------------------ one config

def weights_dtype(torch, spec, runner):
    """The dtype the model is built in: the framework's choice for the
    precision (fp32 under *-mixed: Trainer, Lightning and accelerate keep
    fp32 weights under autocast; DeepSpeed casts to its fp16/bf16 itself;
    an adapter's frozen base is loaded in the compute dtype, as PEFT's
    recipes do)."""
    t = spec["training"]
    p = t["precision"]
    half = {"fp16": torch.float16, "bf16": torch.bfloat16}
    if runner == "deepspeed" and p != "fp32":
        return half[gmspec.PREC_DTYPE[p]]
    if t["adapter"] != "none":
        return half.get(gmspec.PREC_DTYPE[p], torch.float32)
    if p.endswith("-true"):
        return half[gmspec.PREC_DTYPE[p]]
    return torch.float32


def measure_one(torch, cfg, args):
    rec = {"name": cfg["name"], "spec": cfg.get("spec_rel", cfg["spec"]),
           "set": cfg["set"], "heldout": cfg["heldout"],
           "runner": cfg["runner"], "task": "train"}
    mem = torch.cuda
    try:
        spec = gmspec.load(cfg["spec"], cfg["set"])
        refuse(spec, cfg["runner"])
    except (gmspec.SpecError, Unsupported) as e:
        rec.update(status="refused", message=str(e))
        return rec
    state = {}
    t0 = time.perf_counter()
    try:
        torch.manual_seed(0)
        attn = spec["training"]["attention"]
        attn = "sdpa" if attn == "flash" else attn
        base = mem.memory_allocated()
        model = build_model(torch, spec, weights_dtype(torch, spec,
                                                       cfg["runner"]), attn)
        rec["parameters"] = sum(p.numel() for p in model.parameters())
        model = apply_adapter(torch, spec, model, rec)
        mem.synchronize()
        rec["build_time_s"] = round(time.perf_counter() - t0, 3)
        rec["build_peak_allocated_bytes"] = mem.max_memory_allocated()
        rec["weights_allocated_bytes"] = mem.memory_allocated() - base
        mem.empty_cache()
        mem.reset_peak_memory_stats()
        stats = measure.Stats(torch)
        state["stats"] = stats
        if args.trace_dir:
            import tracefile
            state["trace"] = tracefile.start(mem)
        RUN[cfg["runner"]](torch, spec, model, stats, args.steps, rec,
                           **({"optim": cfg["optim"]} if "optim" in cfg
                              else {}))
        del model
        rec.update(measure.ran_record(mem, stats, measure.nvml_process_used))
    except Unsupported as e:
        rec.update(status="refused", message=str(e))
    except torch.OutOfMemoryError as e:
        rec.update(measure.oom_record(mem, e))
    except Exception as e:  # recorded; the runner goes on
        import traceback
        rec.update(status="error",
                   message=f"{type(e).__name__}: {str(e)[:400]}",
                   where=traceback.format_exc()[-1200:])
    finally:
        if "trace" in state:
            import tracefile
            rec["trace_entries"] = tracefile.finish(
                mem, os.path.join(args.trace_dir,
                                  rec["name"] + ".trace.jsonl.gz"),
                rec["name"], state["trace"])
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    return rec


def check(configs):
    """Validate every configuration without a GPU or torch; 1 if any is
    refused."""
    bad = 0
    for c in configs:
        try:
            refuse(gmspec.load(c["spec"], c["set"]), c["runner"])
            print(f"ok      {c['name']} ({c['runner']})")
        except (gmspec.SpecError, Unsupported) as e:
            bad = 1
            print(f"REFUSED {c['name']}: {e}")
    return bad


def versions():
    out = {}
    for mod in ("accelerate", "lightning", "peft", "bitsandbytes",
                "deepspeed"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception:
            out[mod] = None
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--trace-dir")
    ap.add_argument("--list", action="store_true",
                    help="print the configuration names and exit")
    ap.add_argument("--check", action="store_true",
                    help="validate every configuration (no GPU, no torch)")
    ap.add_argument("--merge", nargs="+", metavar="PART.json")
    args = ap.parse_args(argv)
    configs = load_manifest(args.manifest)
    if args.only:
        configs = [c for c in configs if c["name"] in args.only]
    if args.list:
        for c in configs:
            print(c["name"])
        return 0
    if args.check:
        return check(configs)
    if not args.out:
        ap.error("--out is required")
    if args.merge:
        return measure.merge_parts(configs, args.merge, args.out,
                                   "one process per configuration")
    if args.steps < 2:
        ap.error("--steps: at least 2")
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    start = time.monotonic()
    import torch
    if not torch.cuda.is_available():
        print("measure_loops.py: no CUDA device", file=sys.stderr)
        return 77
    measure.mem = torch.cuda
    torch.zeros(1, device="cuda")
    env = measure.environment(torch)
    env.update(versions())
    free, total = torch.cuda.mem_get_info()
    doc = {"format": measure.FORMAT, "environment": env,
           "baseline": {"device_used_after_init_bytes": total - free,
                        "import_s": round(time.monotonic() - start, 2)},
           "settings": {"steps": args.steps, "lr": LR,
                        "harness": "measure_loops.py"},
           "configs": []}
    for cfg in configs:
        rec = measure_one(torch, cfg, args)
        doc["configs"].append(rec)
        measure.log(f"  {rec['name']:40s} {rec['status']:7s} "
                    f"{measure.gib(rec.get('peak_allocated_bytes'))} "
                    f"{measure.gib(rec.get('peak_reserved_bytes'))} "
                    f"{measure.gib(rec.get('device_used_bytes'))} "
                    f"{rec.get('wall_s', 0):6.1f}s"
                    + (f"  {rec['message']}" if rec.get("message") else ""))
    doc["total_s"] = round(time.monotonic() - start, 1)
    measure.write_atomic(args.out, doc)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
