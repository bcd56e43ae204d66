#!/usr/bin/env python3
"""Framework cases for tests/gpu/run-preload.sh, one per run.

Usage: cases.py CASE OUT.json
  torch-native | torch-expandable | torch-async   (PYTORCH_CUDA_ALLOC_CONF
      is set by the caller), cupy, jax, pluggable (LIB in GPUMEM_LIB):
  allocate half of what the device reports (must work), then more than
  it reports (must raise the framework's out-of-memory error).
  train: a ~1B Llama-shaped model (random init), 20 measured steps.
Writes a JSON object to OUT.json.
"""
import json
import os
import statistics
import sys
import time

GiB = 1 << 30


def under_over(alloc, total, oom_types):
    res = {'total_seen': total}
    try:
        keep = alloc(total // 2)
        res['under'] = 'ok'
        del keep
    except Exception as e:  # noqa: BLE001 - recorded, judged by caller
        res['under'] = f'{type(e).__name__}: {e}'[:300]
    try:
        keep = alloc(total + GiB)
        res['over'] = 'no error'
        del keep
    except oom_types as e:
        res['over'] = 'oom'
        res['over_error'] = f'{type(e).__name__}: {str(e)[:200]}'
    except Exception as e:  # noqa: BLE001
        res['over'] = f'other: {type(e).__name__}: {str(e)[:200]}'
    return res


def case_torch(name):
    import torch
    if name == 'pluggable':
        a = torch.cuda.memory.CUDAPluggableAllocator(
            os.environ['GPUMEM_LIB'], 'gpumem_malloc', 'gpumem_free')
        torch.cuda.memory.change_current_allocator(a)
    free, total = torch.cuda.mem_get_info()
    res = under_over(
        lambda n: torch.empty(n, dtype=torch.uint8, device='cuda'),
        total, (torch.cuda.OutOfMemoryError, RuntimeError))
    if name != 'pluggable':
        res['torch_max_reserved'] = torch.cuda.max_memory_reserved()
    res['torch'] = torch.__version__
    return res


def case_cupy():
    import cupy
    free, total = cupy.cuda.runtime.memGetInfo()
    return under_over(lambda n: cupy.empty(n, dtype=cupy.uint8), total,
                      (cupy.cuda.memory.OutOfMemoryError,))


def case_jax():
    import jax
    import jax.numpy as jnp
    dev = jax.devices()[0]
    stats = dev.memory_stats() or {}
    total = stats.get('bytes_limit', 0)
    res = under_over(
        lambda n: jnp.zeros((n,), dtype=jnp.uint8).block_until_ready(),
        total, (Exception,))
    res['jax'] = jax.__version__
    res['bytes_limit'] = total
    return res


def case_train():
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM
    torch.manual_seed(0)
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632,
                      num_hidden_layers=16, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000,
                      max_position_embeddings=2048)
    model = LlamaForCausalLM(cfg).to('cuda', dtype=torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, cfg.vocab_size, (4, 1024), device='cuda')
    times = []
    for step in range(23):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= 3:
            times.append(time.perf_counter() - t)
    return {'parameters': sum(p.numel() for p in model.parameters()),
            'median_step_s': statistics.median(times),
            'torch_max_reserved': torch.cuda.max_memory_reserved(),
            'torch_max_allocated': torch.cuda.max_memory_allocated(),
            'torch': torch.__version__}


def main():
    case, out = sys.argv[1], sys.argv[2]
    if case.startswith('torch') or case == 'pluggable':
        res = case_torch(case)
    elif case == 'cupy':
        res = case_cupy()
    elif case == 'jax':
        res = case_jax()
    elif case == 'train':
        res = case_train()
    else:
        sys.exit(2)
    with open(out, 'w') as f:
        json.dump(res, f)


if __name__ == '__main__':
    main()
