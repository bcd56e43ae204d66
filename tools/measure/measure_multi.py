#!/usr/bin/env python3
"""measure_multi.py - measure data and tensor parallel training per rank.

    torchrun --standalone --nproc-per-node N measure_multi.py \\
        --manifest tests/data/calibration/multi/manifest.json --out FILE.json
    measure_multi.py --manifest ... --check        (no GPU, no torch)

Runs every manifest configuration whose data_parallel x tensor_parallel
equals the number of ranks (the others are left out), with the single-GPU
harness's steps (measure.py). run-measure-multi.sh starts one torchrun per
configuration (--only NAME), so that each is measured as the job of its
own that a user runs: in one process, NCCL communicators, cached blocks
and Python objects kept alive by an earlier configuration counted in a
later one's peaks (measured on 2x H200: +360 MiB reserved and up to
+380 MiB of NCCL memory from the second configuration on). It then joins
the files:

    measure_multi.py --manifest M --list --world N   (names for N ranks)
    measure_multi.py --manifest M --out FILE.json --merge PART.json ...

The spec's parallelism maps onto PyTorch as:
  zero_stage 0, data_parallel N   DistributedDataParallel (defaults:
                                  25 MiB buckets, gradient_as_bucket_view
                                  off)
  zero_stage 1                    DDP + ZeroRedundancyOptimizer wrapping
                                  the spec's optimizer
  zero_stage 3                    FSDP2 fully_shard (full shard, reshard
                                  after forward) on every decoder layer,
                                  then on the root; parameters in the
                                  spec's weight dtype (fp32 for *-mixed,
                                  with autocast as on one GPU)
  tensor_parallel N (llama only)  torch.distributed.tensor.parallel:
                                  q/k/v, gate and up projections
                                  ColwiseParallel, o and down projections
                                  RowwiseParallel, local outputs;
                                  embedding, norms and lm_head replicated
                                  as DTensors (Replicate()), so the
                                  optimizer's foreach step runs over one
                                  list of DTensors, as the planner
                                  assumes (one state-sized temporary
                                  list per rank); plain tensors next to
                                  DTensor shards make foreach fail;
                                  the spec must say so with
                                  tensor_parallel_vocab: replicated
zero_stage 2, pipeline and sequence parallel are refused. Each rank
records its own peaks and device used memory (which holds NCCL's buffers);
rank 0 writes all of them, and for each configuration the figures of the
most loaded rank at the top (what the planner predicts).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import gmspec  # noqa: E402
import hfbuild  # noqa: E402
import measure  # noqa: E402
from hfbuild import Unsupported  # noqa: E402


def scheme(spec):
    """The PyTorch wrapping that runs spec: "tensor-parallel", "fsdp",
    "zero1" or "ddp". Raises Unsupported for what this harness cannot run
    exactly (the one place these rules live; no torch needed)."""
    par = spec["parallelism"]
    if spec["task"] != "train":
        raise Unsupported("task: inference is measured on one GPU")
    zero, tp = par["zero_stage"], par["tensor_parallel"]
    if zero == 2:
        raise Unsupported("parallelism.zero_stage: 2 has no exact "
                          "PyTorch counterpart here (0, 1, 3 are "
                          "measured)")
    if par["pipeline_parallel"] > 1 or par["sequence_parallel"]:
        raise Unsupported("parallelism: pipeline and sequence parallel "
                          "are not measured")
    if tp > 1 and zero:
        raise Unsupported("parallelism: tensor_parallel with a "
                          "zero_stage is not measured")
    if tp > 1:
        m = spec["model"]
        if m["architecture"] != "llama":
            raise Unsupported("parallelism.tensor_parallel: the plan "
                              "here is Llama's")
        if m["attention_heads"] % tp or m["kv_heads"] % tp:
            raise Unsupported("parallelism.tensor_parallel: must "
                              "divide attention_heads and kv_heads")
        if par["tensor_parallel_vocab"] != "replicated":
            raise Unsupported("parallelism.tensor_parallel_vocab: "
                              "the embedding and lm_head are "
                              "replicated here (replicated)")
    if (tp > 1 or zero == 3) and not par["built_whole"]:
        raise Unsupported("parallelism.built_whole: the model is "
                          "built whole, then sharded (true)")
    if tp > 1:
        return "tensor-parallel"
    return {3: "fsdp", 1: "zero1", 0: "ddp"}[zero]


def parallel_factory(torch, world):
    """parallel(spec) -> (wrap, make_opt) for measure.run_train (torch is
    imported when they are called, not here)."""
    def parallel(spec):
        kind = scheme(spec)
        if kind == "tensor-parallel":
            return tensor_parallel(torch, world), None
        if kind == "fsdp":
            return fsdp_wrap(torch), None
        if kind == "zero1":
            return ddp_wrap(torch), zero1_optimizer(torch)
        return ddp_wrap(torch), None
    return parallel


def ddp_wrap(torch):
    def wrap(model):
        from torch.nn.parallel import DistributedDataParallel as DDP
        if measure.DEV == "cpu":
            return DDP(model)
        return DDP(model, device_ids=[torch.cuda.current_device()])
    return wrap


def zero1_optimizer(torch):
    def make(name, params):
        from torch.distributed.optim import ZeroRedundancyOptimizer
        classes = {"adamw": torch.optim.AdamW, "adam": torch.optim.Adam,
                   "sgd": torch.optim.SGD, "sgd-momentum": torch.optim.SGD}
        kw = {"lr": measure.LR}
        if name == "sgd-momentum":
            kw["momentum"] = 0.9
        return ZeroRedundancyOptimizer(params, optimizer_class=classes[name],
                                       **kw)
    return make


def decoder_layers(model):
    base = model.base_model
    for attr in ("layers", "h", "encoder"):
        layers = getattr(base, attr, None)
        if layers is not None:
            return getattr(layers, "layer", layers)
    raise Unsupported("model: no decoder layers found to shard")


def fsdp_wrap(torch):
    def wrap(model):
        from torch.distributed.fsdp import fully_shard
        for layer in decoder_layers(model):
            fully_shard(layer)
        fully_shard(model)
        return all_dtensors(model, "FSDP2")
    return wrap


def tensor_parallel(torch, world):
    def wrap(model):
        from torch.distributed.device_mesh import init_device_mesh
        from torch.distributed.tensor.parallel import (
            ColwiseParallel, RowwiseParallel, parallelize_module)
        mesh = init_device_mesh(measure.DEV, (world,))
        plan = {"self_attn.q_proj": ColwiseParallel(),
                "self_attn.k_proj": ColwiseParallel(),
                "self_attn.v_proj": ColwiseParallel(),
                "self_attn.o_proj": RowwiseParallel(),
                "mlp.gate_proj": ColwiseParallel(),
                "mlp.up_proj": ColwiseParallel(),
                "mlp.down_proj": RowwiseParallel()}
        for layer in model.model.layers:
            parallelize_module(layer, mesh, plan)
        replicate_rest(torch, model, mesh)
        return all_dtensors(model, "tensor parallel")
    return wrap


def all_dtensors(model, what):
    """model, after checking that what (tensor parallel, FSDP2) made every
    parameter a DTensor: a wrapping that silently did nothing would
    measure a replicated model under the sharded spec's name."""
    from torch.distributed.tensor import DTensor
    plain = [n for n, p in model.named_parameters()
             if not isinstance(p, DTensor)]
    if plain:
        raise RuntimeError(f"{what} left {len(plain)} parameters "
                           f"unsharded, first {plain[0]}")
    return model


def replicate_rest(torch, model, mesh):
    """Make every parameter the plan did not shard (embedding, norms,
    lm_head) a DTensor replicated over mesh, and convert at the boundary
    of each module holding one: plain tensor inputs become Replicate()
    DTensors (a view, no communication) and outputs local tensors again.

    Why: torch.optim's foreach step (_foreach_mul_ ...) refuses a list
    that mixes plain tensors with DTensors. The local memory is that of a
    plain replicated parameter, and each rank's gradient of a replicated
    parameter is the same (its inputs are replicated), so nothing is
    reduced. Tied weights stay tied (one DTensor per parameter)."""
    from torch.distributed.tensor import DTensor, Replicate, distribute_tensor
    place = [Replicate()]
    made, owners = {}, []
    for mod in model.modules():
        mine = False
        for key, p in list(mod._parameters.items()):
            if p is None or isinstance(p, DTensor):
                continue
            if id(p) not in made:
                made[id(p)] = torch.nn.Parameter(
                    distribute_tensor(p.data, mesh, place),
                    requires_grad=p.requires_grad)
            mod.register_parameter(key, made[id(p)])
            mine = True
        if mine:
            if any(True for _ in mod.children()):
                raise Unsupported(f"model: {type(mod).__name__} holds "
                                  "parameters and submodules; tensor "
                                  "parallel replicates leaf modules only")
            owners.append(mod)

    def to_dt(x):
        if isinstance(x, torch.Tensor) and not isinstance(x, DTensor):
            return DTensor.from_local(x, mesh, place, run_check=False)
        return x

    def pre(mod, args, kwargs):
        return (tuple(to_dt(a) for a in args),
                {k: to_dt(v) for k, v in kwargs.items()})

    def post(mod, args, kwargs, out):
        if isinstance(out, DTensor):
            return out.to_local()
        if isinstance(out, tuple):
            return tuple(o.to_local() if isinstance(o, DTensor) else o
                         for o in out)
        return out

    for mod in owners:
        mod.register_forward_pre_hook(pre, with_kwargs=True)
        mod.register_forward_hook(post, with_kwargs=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--manifest", required=True)
    ap.add_argument("--only", action="append", default=[])
    ap.add_argument("--out")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--budget-s", type=float, default=30)
    ap.add_argument("--total-budget-s", type=float, default=200)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--list", action="store_true",
                    help="print the names of the configurations for "
                    "--world ranks, one per line, and exit")
    ap.add_argument("--world", type=int,
                    help="with --list and --merge: the configurations for "
                    "this many ranks")
    ap.add_argument("--merge", nargs="+", metavar="PART.json",
                    help="join the files of single-configuration runs "
                    "into --out, in manifest order")
    ap.add_argument("--cpu-dry-run", action="store_true",
                    help="gloo on the CPU, no memory figures: only to "
                    "exercise the code on tiny models")
    ap.add_argument("--trace-dir", metavar="DIR",
                    help="record each configuration's allocation trace "
                    "per rank into DIR/NAME.rankR.trace.jsonl.gz")
    args = ap.parse_args(argv)
    args.trace_suffix = ".rank" + os.environ.get("RANK", "0")
    if args.trace_dir:
        os.makedirs(args.trace_dir, exist_ok=True)
    configs = measure.load_manifest(args.manifest)
    if args.only:
        configs = [c for c in configs if c["name"] in args.only]
    if args.check:
        return check(configs)
    if args.list:
        if not args.world:
            ap.error("--list needs --world N")
        for c in configs:
            if gpus_of(c) in (None, args.world):
                print(c["name"])
        return 0
    if not args.out:
        ap.error("--out is required")
    if args.merge:
        if args.world:
            configs = [c for c in configs if gpus_of(c) in (None, args.world)]
        return measure.merge_parts(configs, args.merge, args.out,
                                   "one torchrun per configuration")
    # Only the configurations for this many GPUs; the others belong to
    # another run (a spec that does not load is kept: it is recorded).
    world = int(os.environ.get("WORLD_SIZE", "1"))
    configs = [c for c in configs if gpus_of(c) in (None, world)]

    start = time.monotonic()
    import torch
    import torch.distributed as dist
    rank = int(os.environ.get("RANK", "0"))
    local = int(os.environ.get("LOCAL_RANK", "0"))
    if args.cpu_dry_run:
        measure.DEV, measure.mem = "cpu", measure.CpuMem()
        dev = torch.device("cpu")
        dist.init_process_group("gloo")
        env = {"gpu_name": "cpu dry run (no memory figures)",
               "torch": torch.__version__, "nccl": None}
    else:
        if not torch.cuda.is_available() or \
                torch.cuda.device_count() < world:
            print("measure_multi.py: not enough CUDA devices",
                  file=sys.stderr)
            return 77
        dev, env = measure.nccl_rank(torch, dist, local)
        v = torch.cuda.nccl.version()
        env["nccl"] = ".".join(map(str, v)) if isinstance(v, tuple) \
            else str(v)
    free, total = measure.mem.mem_get_info()
    env["world_size"] = world
    doc = {"format": measure.FORMAT, "environment": env,
           "baseline": {"device_used_after_init_bytes": total - free},
           "settings": {"steps": args.steps, "budget_s": args.budget_s},
           "configs": []}
    parallel = parallel_factory(torch, world)
    if rank == 0:
        measure.log(f"# {env['gpu_name']} x{world}, NCCL {env['nccl']}, "
                    f"torch {env['torch']}; {len(configs)} configurations")
    for cfg in configs:
        over = time.monotonic() - start > args.total_budget_s
        flag = torch.tensor([1 if over else 0], device=dev)
        dist.all_reduce(flag)
        if flag.item():
            rec = {"status": "skipped", "message": "total time budget spent"}
            recs = [rec] * world
        else:
            rec = measure.measure_one(torch, cfg, args, world, parallel)
            recs = [None] * world
            dist.all_gather_object(recs, rec)
        top = measure.rank_summary(cfg, recs)
        doc["configs"].append(top)
        if rank == 0:
            measure.log_summary(top, 34)
            doc["total_s"] = round(time.monotonic() - start, 1)
            measure.write_atomic(args.out, doc)
    dist.barrier()
    dist.destroy_process_group()
    return 0


def gpus_of(cfg):
    try:
        par = gmspec.load(cfg["spec"], cfg["set"])["parallelism"]
    except gmspec.SpecError:
        return None
    return par["data_parallel"] * par["tensor_parallel"]


def refuse_multi(spec):
    """Raise Unsupported unless this harness runs spec on data_parallel x
    tensor_parallel GPUs; the note for check_only's "ok" line."""
    par = spec["parallelism"]
    n = par["data_parallel"] * par["tensor_parallel"]
    hfbuild.refuse_unrunnable(spec, n)
    return f" ({n} GPUs, {scheme(spec)})"


def check(configs):
    """Validate without GPUs: every configuration parses and is runnable
    on data_parallel x tensor_parallel GPUs."""
    return measure.check_only(configs, refuse_multi)


if __name__ == "__main__":
    sys.exit(main())
