#!/usr/bin/env python3
"""probe_nccl.py - where the device memory outside PyTorch's caching
allocator grows in a multi-GPU job (NCCL communicators and buffers).

    torchrun --standalone --nproc-per-node 2 tools/measure/probe_nccl.py OUT.json

Each rank records, after every stage, cudaMemGetInfo's used bytes less the
allocator's reserved bytes ("outside"): the process group and a first
small all-reduce, a 32 MiB all-reduce, a device mesh over all ranks, an
all-reduce through DTensor (functional collectives), a 32 MiB all-gather
and reduce-scatter, an MLP's forward and backward unsharded (bf16, 8192
tokens, hidden 2048: cuBLAS loads here) and the same MLP tensor-parallel
(ColwiseParallel then RowwiseParallel).
Rank 0 writes every rank's figures to OUT.json. Why: the 2x H200
calibration runs of tensor parallelism (measure_multi.py) used up to
384 MiB more outside the allocator than DDP or FSDP did, on one rank.
"""

import datetime
import json
import os
import sys


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    import torch
    import torch.distributed as dist
    local = int(os.environ.get("LOCAL_RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if not torch.cuda.is_available() or torch.cuda.device_count() < world:
        print("probe_nccl.py: not enough CUDA devices", file=sys.stderr)
        return 77
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    stages = []

    def mark(name):
        torch.cuda.synchronize()
        free, total = torch.cuda.mem_get_info()
        stages.append({"stage": name,
                       "outside_bytes": total - free -
                       torch.cuda.memory_reserved(),
                       "reserved_bytes": torch.cuda.memory_reserved()})

    torch.zeros(1, device=dev)
    mark("cuda context and a tensor")
    dist.init_process_group("nccl", device_id=dev,
                            timeout=datetime.timedelta(seconds=60))
    x = torch.ones(1, device=dev)
    dist.all_reduce(x)
    mark("process group, 4-byte all_reduce")
    big = torch.ones(16 << 20, device=dev, dtype=torch.bfloat16)
    dist.all_reduce(big)
    mark("32 MiB all_reduce")
    from torch.distributed.device_mesh import init_device_mesh
    mesh = init_device_mesh("cuda", (world,))
    mark("init_device_mesh over all ranks")
    from torch.distributed.tensor import DTensor, Partial, Replicate
    d = DTensor.from_local(big, mesh, [Partial()], run_check=False)
    d = d.redistribute(mesh, [Replicate()]).to_local()
    mark("DTensor Partial -> Replicate (functional all_reduce)")
    out = torch.empty(world * big.numel(), device=dev, dtype=big.dtype)
    dist.all_gather_into_tensor(out, big)
    mark("32 MiB all_gather")
    rs = torch.empty(big.numel() // world, device=dev, dtype=big.dtype)
    dist.reduce_scatter_tensor(rs, big)
    mark("32 MiB reduce_scatter")
    from torch.distributed.tensor.parallel import (
        ColwiseParallel, RowwiseParallel, parallelize_module)
    plain = torch.nn.Sequential(torch.nn.Linear(2048, 5632, bias=False),
                                torch.nn.Linear(5632, 2048, bias=False))
    plain = plain.to(dev, torch.bfloat16)
    inp = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16,
                      requires_grad=True)
    plain(inp).float().sum().backward()
    mark("the same MLP unsharded, forward and backward")
    del plain
    mlp = torch.nn.Sequential(torch.nn.Linear(2048, 5632, bias=False),
                              torch.nn.Linear(5632, 2048, bias=False))
    mlp = mlp.to(dev, torch.bfloat16)
    parallelize_module(mlp, mesh, {"0": ColwiseParallel(),
                                   "1": RowwiseParallel()})
    inp = torch.randn(8192, 2048, device=dev, dtype=torch.bfloat16,
                      requires_grad=True)
    mlp(inp).float().sum().backward()
    mark("tensor-parallel MLP forward and backward")
    everyone = [None] * world
    dist.all_gather_object(everyone, {"rank": dist.get_rank(),
                                      "stages": stages})
    if dist.get_rank() == 0:
        env = {"gpu": torch.cuda.get_device_name(0),
               "torch": torch.__version__,
               "nccl": ".".join(map(str, torch.cuda.nccl.version())),
               "world": world}
        with open(argv[1], "w") as f:
            json.dump({"environment": env, "ranks": everyone}, f, indent=1)
        for r in everyone:
            for s in r["stages"]:
                print(f"rank {r['rank']}  {s['outside_bytes'] / 2**20:8.1f} "
                      f"MiB  {s['stage']}")
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
