#!/usr/bin/env python3
"""test_tp_cpu.py - measure_multi.py's tensor parallel wrapping on the CPU
(gloo, 2 processes, a tiny Llama): every parameter ends up a DTensor, the
foreach AdamW step runs, and losses and gradients equal those of the same
model trained unsharded. Also shows the failure it fixes: the plan
alone (replicated parameters left plain) makes the foreach step raise.
Exit 77 without torch and transformers. Run by meson (suite calibration)
with the interpreter that has them: python3 tools/measure/test_tp_cpu.py
"""

import copy
import os
import socket
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
WORLD = 2


def tiny(torch, transformers):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(
        vocab_size=128, hidden_size=64, intermediate_size=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=64, tie_word_embeddings=False)
    return transformers.LlamaForCausalLM(cfg)


def steps(torch, model, batch, n=2):
    """n foreach AdamW steps -> (losses, the first step's gradients)."""
    from torch.distributed.tensor import DTensor
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
    losses, grads = [], {}
    for i in range(n):
        loss = model(**batch).loss
        loss.backward()
        if i == 0:
            grads = {k: (p.grad.full_tensor() if isinstance(p.grad, DTensor)
                         else p.grad).clone()
                     for k, p in model.named_parameters()}
        opt.step()
        opt.zero_grad()
        losses.append(float(loss.detach()))
    return losses, grads


def worker(rank, port, q):
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port),
                      RANK=str(rank), WORLD_SIZE=str(WORLD))
    import torch
    import torch.distributed as dist
    import transformers
    from torch.distributed.tensor import DTensor
    import measure
    import measure_multi
    measure.DEV = "cpu"
    dist.init_process_group("gloo", rank=rank, world_size=WORLD)
    errs = []
    try:
        ids = torch.randint(0, 128, (2, 16), generator=torch.Generator()
                            .manual_seed(1))
        batch = {"input_ids": ids, "labels": ids}
        ref = tiny(torch, transformers)
        tp = measure_multi.tensor_parallel(torch, WORLD)(copy.deepcopy(ref))
        plain = [n for n, p in tp.named_parameters()
                 if not isinstance(p, DTensor)]
        if plain:
            errs.append(f"not DTensors: {plain}")
        want, gref = steps(torch, ref, batch)
        got, gtp = steps(torch, tp, batch)
        if any(abs(a - b) > 1e-4 for a, b in zip(want, got)):
            errs.append(f"losses {got} != unsharded {want}")
        # Gradients, not Adam's updates (Adam is blind to their scale).
        for n, g in gref.items():
            d = (gtp[n] - g).abs().max().item()
            if d > 1e-5 + 1e-3 * g.abs().max().item():
                errs.append(f"{n}: gradient differs from the unsharded "
                            f"one by {d} (of {g.abs().max().item()})")
                break
        # Without the replication, the foreach step meets plain tensors
        # next to DTensor shards (the failure seen on 2 H200s).
        keep = measure_multi.replicate_rest
        measure_multi.replicate_rest = lambda *a: None
        try:
            bare = measure_multi.tensor_parallel(torch, WORLD)(
                copy.deepcopy(ref))
        finally:
            measure_multi.replicate_rest = keep
        try:
            steps(torch, bare, batch, 1)
            errs.append("the bare plan's foreach step did not fail: the "
                        "check above proves nothing")
        except RuntimeError as e:
            if "mixed torch.Tensor and DTensor" not in str(e):
                errs.append(f"bare plan: unexpected error {e}")
    except Exception as e:  # noqa: BLE001 - reported to the parent
        errs.append(f"{type(e).__name__}: {e}")
    q.put((rank, errs))
    dist.destroy_process_group()


def main():
    try:
        import torch.multiprocessing as mp
        import transformers  # noqa: F401
    except ImportError as e:
        print(f"torch/transformers not installed ({e}); skipped")
        return 77
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.start_processes(worker, args=(port, q), nprocs=WORLD,
                       start_method="spawn")
    bad = 0
    for _ in range(WORLD):
        rank, errs = q.get()
        for e in errs:
            print(f"FAIL rank {rank}: {e}")
        bad += len(errs)
    print("ok" if not bad else f"{bad} failures")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
