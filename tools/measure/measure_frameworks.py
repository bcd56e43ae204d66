#!/usr/bin/env python3
"""measure_frameworks.py - measure DeepSpeed and Megatron-Core runs per rank.

    torchrun --standalone --nproc-per-node N measure_frameworks.py \\
        --manifest M.json --only NAME --out PART.json [--trace-dir D]
    measure_frameworks.py --manifest M.json --check        (no GPU, no torch)
    measure_frameworks.py --manifest M.json --list --world N
    measure_frameworks.py --manifest M.json --merge PART... --out F

Each manifest entry names a runner and its number of GPUs ("gpus"):

  deepspeed  the Hugging Face model built in the JSON's 16-bit dtype on
             the GPU, then deepspeed.initialize(model, torch.optim.AdamW,
             config=the spec's training.deepspeed_config JSON) under
             torchrun, with train_micro_batch_size_per_gpu from the spec,
             gradient_accumulation_steps 1 unless the JSON says, and
             zero_force_ds_cpu_optimizer false (DeepSpeed built without its
             compiled ops: runtime/engine.py _configure_optimizer then
             keeps the client optimizer under offload_optimizer)
  megatron   Megatron-Core's GPTModel with the local layer spec
             (gpt_layer_specs.py get_gpt_layer_local_spec: no Transformer
             Engine), parallel_state.initialize_model_parallel with the
             spec's tensor / pipeline / virtual pipeline sizes, one model
             chunk per virtual stage, each wrapped in Megatron's
             DistributedDataParallel (fp32 gradient buffer, no overlap),
             get_megatron_optimizer (Adam; use_distributed_optimizer from
             the spec) and the schedule get_forward_backward_func returns
             (1F1B, or interleaved 1F1B with virtual stages) over
             global / (micro x data parallel) micro-batches of random
             tokens, finalize_model_grads as the gradient reduction

Every rank records the peaks of building the run (init_peak_*) and then
those of the steps: peak allocated / reserved and device used memory
(measure.py's figures); rank 0 writes all ranks, with the most loaded
rank's figures at the top (what the planner predicts per GPU). One
torchrun per configuration (tests/gpu/run-measure-frameworks.sh).
The rules of what can be run, the DeepSpeed JSON and Megatron's arguments
are plain functions of the spec (no torch), so --check and
test_frameworks.py exercise them on a machine without torch.
"""

import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gmspec  # noqa: E402
import measure  # noqa: E402
from hfbuild import Unsupported  # noqa: E402

RUNNERS = ("deepspeed", "megatron")


def load_manifest(path):
    """measure.load_manifest plus each entry's runner and gpus."""
    with open(path) as f:
        man = json.load(f)
    out = measure.load_manifest(path)
    for c, raw in zip(out, man["configs"]):
        r, g = raw.get("runner"), raw.get("gpus")
        if r not in RUNNERS or not isinstance(g, int) or g < 1:
            raise SystemExit(f"{path}: {c['name']}: needs runner (one of "
                             f"{', '.join(RUNNERS)}) and gpus >= 1")
        c["runner"], c["gpus"] = r, g
    return out


def gpus_of_spec(spec):
    par = spec["parallelism"]
    return par["data_parallel"] * par["tensor_parallel"] * \
        par["pipeline_parallel"]


def refuse(spec, runner, gpus):
    """Raise Unsupported for what runner cannot run as spec says on gpus
    GPUs (the one place these rules live)."""
    t, m, par = spec["training"], spec["model"], spec["parallelism"]
    if spec["task"] != "train":
        raise Unsupported("task: only training is measured here")
    if gpus_of_spec(spec) != gpus:
        raise Unsupported(f"parallelism: data x tensor x pipeline parallel "
                          f"= {gpus_of_spec(spec)}, the manifest says "
                          f"gpus {gpus}")
    if t["framework"] != runner:
        raise Unsupported(f"training.framework {t['framework']}: runner "
                          f"{runner} needs framework {runner}")
    if t["adapter"] != "none":
        raise Unsupported("training.adapter: not measured here")
    if runner == "deepspeed":
        ds_config(spec)
        if par["tensor_parallel"] > 1 or par["pipeline_parallel"] > 1:
            raise Unsupported("runner deepspeed: data parallel only")
        if t["activation_checkpointing"] == "selective":
            raise Unsupported("training.activation_checkpointing selective: "
                              "not measured under deepspeed")
        return
    if m["architecture"] != "llama":
        raise Unsupported("runner megatron: the llama layer (RMSNorm, "
                          "SwiGLU, rope) is measured")
    megatron_args(spec)


def ds_config(spec):
    """The DeepSpeed configuration the engine gets: the spec's JSON with
    the spec's micro-batch. Raises Unsupported where the spec's offload
    keys and the JSON disagree (the planner reads both)."""
    t, par = spec["training"], spec["parallelism"]
    if not t["deepspeed_config"]:
        raise Unsupported("runner deepspeed: needs training.deepspeed_config")
    try:
        with open(t["deepspeed_config"]) as f:
            cfg = json.load(f)
    except (OSError, ValueError) as e:
        raise Unsupported(f"training.deepspeed_config: {e}") from None
    zero = cfg.get("zero_optimization", {})
    for key, ds in (("offload_optimizer", "offload_optimizer"),
                    ("offload_parameters", "offload_param")):
        dev = zero.get(ds, {}).get("device", "none")
        if par[key] != dev:
            raise Unsupported(f"parallelism.{key}: {par[key]}, the JSON's "
                              f"zero_optimization.{ds} is {dev}")
    if zero.get("stage", 0) and par["data_parallel"] < 2 and \
            gpus_of_spec(spec) > 1:
        raise Unsupported("zero_optimization.stage: needs data parallel")
    prec = t["precision"]
    want = {"bf16-mixed": "bf16", "fp16-mixed": "fp16"}.get(prec)
    have = [k for k in ("bf16", "fp16") if cfg.get(k, {}).get("enabled")]
    if have != ([want] if want else []):
        raise Unsupported(f"training.precision {prec}: the JSON enables "
                          f"{have or 'neither bf16 nor fp16'}")
    cfg["train_micro_batch_size_per_gpu"] = t["micro_batch_size"]
    cfg.setdefault("gradient_accumulation_steps", 1)
    cfg.pop("train_batch_size", None)
    cfg["zero_force_ds_cpu_optimizer"] = False
    return cfg


def megatron_args(spec):
    """Megatron-Core's arguments for spec as plain values (dtype names as
    strings): {"parallel": initialize_model_parallel kwargs, "transformer":
    TransformerConfig kwargs, "gpt": GPTModel kwargs, "ddp":
    DistributedDataParallelConfig kwargs, "optimizer": OptimizerConfig
    kwargs, "microbatches", "micro_batch_size", "seq_length"}. Raises
    Unsupported for what it does not map."""
    t, m, par = spec["training"], spec["model"], spec["parallelism"]
    tp, pp, dp = (par["tensor_parallel"], par["pipeline_parallel"],
                  par["data_parallel"])
    vpp = par["virtual_pipeline_stages"]
    prec = t["precision"]
    if prec not in ("bf16-mixed", "fp16-mixed", "fp32"):
        raise Unsupported(f"training.precision {prec}: Megatron trains "
                          "bf16-mixed, fp16-mixed or fp32")
    if t["optimizer"] not in ("adam", "adamw"):
        raise Unsupported(f"training.optimizer {t['optimizer']}: Megatron's "
                          "Adam only")
    if t["attention"] != "eager":
        raise Unsupported(f"training.attention {t['attention']}: the local "
                          "layer spec's DotProductAttention is unfused "
                          "(eager)")
    if par["zero_stage"]:
        raise Unsupported("parallelism.zero_stage: Megatron shards with "
                          "distributed_optimizer")
    if par["sequence_parallel"]:
        raise Unsupported("parallelism.sequence_parallel: the local layer "
                          "spec's norm (transformer/torch_norm.py "
                          "WrappedTorchNorm) refuses it")
    if m["attention_heads"] % tp or m["kv_heads"] % tp:
        raise Unsupported("parallelism.tensor_parallel: must divide "
                          "attention_heads and kv_heads")
    if m["layers"] % (pp * vpp):
        raise Unsupported("model.layers: must be a multiple of "
                          "pipeline_parallel x virtual_pipeline_stages")
    if vpp > 1 and pp < 2:
        raise Unsupported("parallelism.virtual_pipeline_stages: needs "
                          "pipeline_parallel > 1")
    mb = t["micro_batch_size"]
    gb = t["global_batch_size"] or mb * dp
    if gb % (mb * dp):
        raise Unsupported("training.global_batch_size: must be a multiple "
                          "of micro_batch_size x data_parallel")
    micro = gb // (mb * dp)
    if vpp > 1 and micro % pp:
        raise Unsupported("training.global_batch_size: the interleaved "
                          "schedule needs a multiple of pipeline_parallel "
                          "micro-batches")
    ckpt = t["activation_checkpointing"]
    dtype = {"bf16-mixed": "bfloat16", "fp16-mixed": "float16",
             "fp32": "float32"}[prec]
    tr = dict(num_layers=m["layers"], hidden_size=m["hidden_size"],
              ffn_hidden_size=m["ffn_hidden_size"],
              num_attention_heads=m["attention_heads"],
              num_query_groups=m["kv_heads"],
              kv_channels=m["hidden_size"] // m["attention_heads"],
              normalization="RMSNorm", gated_linear_unit=True,
              activation_func="silu", add_bias_linear=False,
              hidden_dropout=0.0, attention_dropout=0.0,
              bf16=prec == "bf16-mixed", fp16=prec == "fp16-mixed",
              params_dtype=dtype, pipeline_dtype=dtype,
              tensor_model_parallel_size=tp,
              pipeline_model_parallel_size=pp,
              virtual_pipeline_model_parallel_size=vpp if vpp > 1 else None,
              sequence_parallel=par["sequence_parallel"])
    if ckpt == "selective":
        tr.update(recompute_granularity="selective",
                  recompute_modules=["core_attn"])
    elif ckpt == "full":
        tr.update(recompute_granularity="full", recompute_method="uniform",
                  recompute_num_layers=1)
    gpt = dict(vocab_size=padded_vocab(m["vocab_size"], tp),
               max_sequence_length=t["sequence_length"],
               position_embedding_type="rope",
               share_embeddings_and_output_weights=m["tied_embeddings"])
    dist_opt = par["distributed_optimizer"]
    return {
        "parallel": dict(tensor_model_parallel_size=tp,
                         pipeline_model_parallel_size=pp,
                         virtual_pipeline_model_parallel_size=(
                             vpp if vpp > 1 else None)),
        "transformer": tr, "gpt": gpt, "chunks": vpp,
        "ddp": dict(grad_reduce_in_fp32=prec != "fp32",
                    overlap_grad_reduce=False,
                    use_distributed_optimizer=dist_opt),
        "optimizer": dict(optimizer="adam", lr=measure.LR,
                          weight_decay=0.0 if t["optimizer"] == "adam"
                          else 0.01,
                          bf16=prec == "bf16-mixed",
                          fp16=prec == "fp16-mixed", params_dtype=dtype,
                          use_distributed_optimizer=dist_opt),
        "microbatches": micro, "micro_batch_size": mb,
        "seq_length": t["sequence_length"]}


def padded_vocab(vocab, tp, multiple=128):
    """The vocabulary padded as Megatron-LM pads it (megatron/training/
    tokenizer/tokenizer.py _vocab_size_with_padding): to a multiple of
    multiple x tensor parallel."""
    step = multiple * tp
    return -(-vocab // step) * step


# ------------------------------------------------------------ the runners

def run_deepspeed(torch, spec, stats, steps, rec):
    import deepspeed
    import measure_loops
    rec["deepspeed"] = deepspeed.__version__
    cfg = ds_config(spec)
    t = spec["training"]
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(
        "bf16" if cfg.get("bf16", {}).get("enabled") else
        "fp16" if cfg.get("fp16", {}).get("enabled") else None,
        torch.float32)
    attn = "sdpa" if t["attention"] == "flash" else t["attention"]
    zero3 = cfg.get("zero_optimization", {}).get("stage", 0) == 3
    if zero3 and not spec["parallelism"]["built_whole"]:
        # each parameter partitioned as its module is built, as
        # transformers' from_config does under a ZeRO-3 configuration
        # (integrations/deepspeed.py, deepspeed.zero.Init)
        with deepspeed.zero.Init(config_dict_or_path=cfg):
            model = measure_loops.build_model(torch, spec, dtype, attn)
        rec["zero_init"] = True
    else:
        model = measure_loops.build_model(torch, spec, dtype, attn)
    rec["parameters"] = sum(p.numel() for p in model.parameters())
    if t["activation_checkpointing"] == "full":
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": False})
    opt = measure_loops.make_optimizer(torch, t["optimizer"],
                                       model.parameters())
    engine, _, _, _ = deepspeed.initialize(model=model, optimizer=opt,
                                           config=cfg)
    mark_init(torch, rec)
    measure_loops.engine_steps(
        torch, engine,
        measure_loops.batch_of(torch, spec, measure_loops.use_cache_of(spec)),
        stats, steps)


def run_megatron(torch, spec, stats, steps, rec):
    import functools
    from megatron.core import parallel_state as ps
    from megatron.core import tensor_parallel
    from megatron.core.distributed import (DistributedDataParallel,
                                           DistributedDataParallelConfig,
                                           finalize_model_grads)
    from megatron.core.models.gpt.gpt_layer_specs import \
        get_gpt_layer_local_spec
    from megatron.core.models.gpt.gpt_model import GPTModel
    from megatron.core.optimizer import OptimizerConfig, \
        get_megatron_optimizer
    from megatron.core.pipeline_parallel import get_forward_backward_func
    from megatron.core.transformer.transformer_config import \
        TransformerConfig
    import megatron.core
    rec["megatron_core"] = megatron.core.__version__
    a = megatron_args(spec)
    dt = {"bfloat16": torch.bfloat16, "float16": torch.float16,
          "float32": torch.float32}
    tr = dict(a["transformer"])
    tr["params_dtype"] = dt[tr["params_dtype"]]
    tr["pipeline_dtype"] = dt[tr["pipeline_dtype"]]
    tr["activation_func"] = torch.nn.functional.silu
    ps.initialize_model_parallel(**a["parallel"])
    tensor_parallel.model_parallel_cuda_manual_seed(0)
    config = TransformerConfig(**tr)
    layer = get_gpt_layer_local_spec(normalization="RMSNorm")
    ddp_cfg = DistributedDataParallelConfig(**a["ddp"])
    chunks = []
    for vp in range(a["chunks"]):
        vp_stage = vp if a["chunks"] > 1 else None
        model = GPTModel(
            config=config, transformer_layer_spec=layer,
            pre_process=ps.is_pipeline_first_stage(ignore_virtual=False,
                                                   vp_stage=vp_stage),
            post_process=ps.is_pipeline_last_stage(ignore_virtual=False,
                                                   vp_stage=vp_stage),
            vp_stage=vp_stage, **a["gpt"])
        model.cuda(torch.cuda.current_device())
        chunks.append(DistributedDataParallel(config=config,
                                              ddp_config=ddp_cfg,
                                              module=model))
    rec["parameters_rank"] = sum(p.numel() for c in chunks
                                 for p in c.parameters())
    ocfg = dict(a["optimizer"])
    ocfg["params_dtype"] = dt[ocfg["params_dtype"]]
    opt = get_megatron_optimizer(OptimizerConfig(**ocfg), chunks)
    config.finalize_model_grads_func = finalize_model_grads
    mark_init(torch, rec)
    mb, s = a["micro_batch_size"], a["seq_length"]
    vocab = spec["model"]["vocab_size"]
    dev = torch.cuda.current_device()
    tokens = torch.randint(0, vocab, (mb, s + 1), device=dev)
    pos = torch.arange(s, device=dev).unsqueeze(0).expand(mb, s)

    def batches():
        while True:
            yield tokens[:, :-1], tokens[:, 1:]

    def loss_func(out):
        loss = out.float().mean()
        return loss, {"lm loss": loss.detach()}

    def forward_step(it, model):
        x, y = next(it)
        out = model(x, pos, None, labels=y)
        return out, functools.partial(loss_func)

    fb = get_forward_backward_func()
    rec["schedule"] = fb.__name__
    its = [batches() for _ in chunks]
    for _ in range(steps):
        t0 = time.perf_counter()
        for c in chunks:
            c.zero_grad_buffer()
        opt.zero_grad()
        fb(forward_step_func=forward_step,
           data_iterator=its if len(chunks) > 1 else its[0],
           model=chunks if len(chunks) > 1 else chunks[0],
           num_microbatches=a["microbatches"], seq_length=s,
           micro_batch_size=mb, decoder_seq_length=s, forward_only=False)
        opt.step()
        torch.cuda.synchronize()
        stats.step_done(time.perf_counter() - t0)


def mark_init(torch, rec):
    """Record the peaks of building the run (model, wrappers, optimizer)
    and start the steps' peaks from here; the cache is left as the build
    left it, as in the user's run."""
    mem = torch.cuda
    mem.synchronize()
    rec["init_peak_allocated_bytes"] = mem.max_memory_allocated()
    rec["init_peak_reserved_bytes"] = mem.max_memory_reserved()
    rec["init_allocated_bytes"] = mem.memory_allocated()
    mem.reset_peak_memory_stats()


RUN = {"deepspeed": run_deepspeed, "megatron": run_megatron}


def measure_one(torch, cfg, args):
    """One configuration on this rank; its record (never raises for the
    configuration's own failure)."""
    mem = torch.cuda
    rec = {"name": cfg["name"], "spec": cfg.get("spec_rel", cfg["spec"]),
           "set": cfg["set"], "heldout": cfg["heldout"],
           "runner": cfg["runner"], "task": "train"}
    try:
        spec = gmspec.load(cfg["spec"], cfg["set"])
        refuse(spec, cfg["runner"], cfg["gpus"])
    except (gmspec.SpecError, Unsupported) as e:
        rec.update(status="refused", message=str(e))
        return rec
    state = {}
    t0 = time.perf_counter()
    mem.empty_cache()
    mem.reset_peak_memory_stats()
    try:
        torch.manual_seed(0)
        stats = measure.Stats(torch)
        if args.trace_dir:
            import tracefile
            state["trace"] = tracefile.start(mem)
        RUN[cfg["runner"]](torch, spec, stats, args.steps, rec)
        rec.update(measure.ran_record(mem, stats))
    except torch.OutOfMemoryError as e:
        rec.update(measure.oom_record(mem, e))
    except Exception as e:  # recorded, the others go on
        import traceback
        rec.update(status="error",
                   message=f"{type(e).__name__}: {str(e)[:400]}",
                   where=traceback.format_exc()[-1200:])
    finally:
        if "trace" in state:
            import tracefile
            rec["trace_entries"] = tracefile.finish(
                mem, os.path.join(args.trace_dir, rec["name"] + ".rank" +
                                  os.environ.get("RANK", "0") +
                                  ".trace.jsonl.gz"),
                rec["name"], state["trace"])
    rec["wall_s"] = round(time.perf_counter() - t0, 3)
    return rec


def check(configs):
    """Validate without GPU or torch: every configuration loads, its
    runner accepts it and its framework arguments build; 1 if any is
    refused."""
    try:
        import yaml  # noqa: F401
    except ImportError:
        print("PyYAML (python3-yaml) is not installed (skipped)")
        return 77
    bad = 0
    for c in configs:
        try:
            refuse(gmspec.load(c["spec"], c["set"]), c["runner"], c["gpus"])
            print(f"ok      {c['name']} ({c['runner']}, {c['gpus']} GPUs)")
        except (gmspec.SpecError, Unsupported) as e:
            bad = 1
            print(f"REFUSED {c['name']}: {e}")
    return bad


def parse(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true",
                    help="the names of the configurations for --world "
                    "GPUs, one per line")
    ap.add_argument("--world", type=int)
    ap.add_argument("--merge", nargs="+", metavar="PART.json")
    ap.add_argument("--trace-dir", metavar="DIR",
                    help="each rank's allocation trace into "
                    "DIR/NAME.rankR.trace.jsonl.gz")
    args = ap.parse_args(argv)
    if args.list and not args.world:
        ap.error("--list needs --world N")
    if not (args.check or args.list) and not args.out:
        ap.error("--out is required")
    if args.steps < 1:
        ap.error("--steps: at least 1")
    return args


def main(argv=None):
    args = parse(argv)
    configs = load_manifest(args.manifest)
    if args.only:
        configs = [c for c in configs if c["name"] in args.only]
    if args.check:
        return check(configs)
    if args.list:
        for c in configs:
            if c["gpus"] == args.world:
                print(c["name"])
        return 0
    if args.merge:
        if args.world:
            configs = [c for c in configs if c["gpus"] == args.world]
        return measure.merge_parts(configs, args.merge, args.out,
                                   "one torchrun per configuration")
    world = int(os.environ.get("WORLD_SIZE", "1"))
    configs = [c for c in configs if c["gpus"] == world]
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    start = time.monotonic()
    import torch
    import torch.distributed as dist
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        print("measure_frameworks.py: not enough CUDA devices",
              file=sys.stderr)
        return 77
    rank = int(os.environ.get("RANK", "0"))
    _, env = measure.nccl_rank(torch, dist,
                               int(os.environ.get("LOCAL_RANK", "0")))
    env["world_size"] = world
    free, total = torch.cuda.mem_get_info()
    doc = {"format": measure.FORMAT, "environment": env,
           "baseline": {"device_used_after_init_bytes": total - free},
           "settings": {"steps": args.steps}, "configs": []}
    for cfg in configs:
        rec = measure_one(torch, cfg, args)
        recs = [None] * world
        dist.all_gather_object(recs, rec)
        # a rank that ran no step has step_time_s None
        top = measure.rank_summary(cfg, recs, ("runner",),
                                   step_time=lambda v: v or 0)
        doc["configs"].append(top)
        if rank == 0:
            measure.log_summary(top, 40)
            doc["total_s"] = round(time.monotonic() - start, 1)
            measure.write_atomic(args.out, doc)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
