#!/usr/bin/env python3
"""Framework cases for tests/gpu/run-preload.sh, one per run.

Usage: cases.py CASE OUT.json
  torch-native | torch-expandable | torch-async   (PYTORCH_CUDA_ALLOC_CONF
      is set by the caller), cupy, jax: allocate half of what the device
  reports (must work), then more than it reports (must raise the
  framework's out-of-memory error).
  pluggable: libgpumem-torch.so (path in GPUMEM_TORCH_LIB) through
  torch.cuda.memory.CUDAPluggableAllocator, no LD_PRELOAD: the device
  reports its physical memory, so half of the cap (GPUMEM_LIMIT) must
  work and the cap plus 1 GiB must raise gpumem's RuntimeError.
  train: a ~1B Llama-shaped model (random init), TRAIN_WARMUP (5) steps
  discarded, then TRAIN_STEPS (20) timed steps; every timed step is kept.
Writes a JSON object to OUT.json.
"""
import json
import os
import statistics
import sys
import time

GiB = 1 << 30


def is_gpumem_oom(e):
    """gpumem's refusal through libgpumem-torch.so: a std::bad_alloc that
    PyTorch's bindings raise as RuntimeError with gpumem's message."""
    return 'gpumem: CUDA out of memory' in str(e)


def under_over(alloc, total, oom_types, under=None):
    res = {'total_seen': total}
    try:
        keep = alloc(total // 2 if under is None else under)
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


def size_parse(text):
    """GPUMEM_LIMIT as run-preload.sh writes it: bytes, or KiB/MiB/GiB."""
    for suffix, mult in (('KiB', 1 << 10), ('MiB', 1 << 20),
                         ('GiB', 1 << 30)):
        if text.endswith(suffix):
            return int(float(text[:-len(suffix)]) * mult)
    return int(text)


def case_torch(name):
    import torch
    if name == 'pluggable':
        return case_pluggable(torch)
    free, total = torch.cuda.mem_get_info()
    res = under_over(
        lambda n: torch.empty(n, dtype=torch.uint8, device='cuda'),
        total, (torch.cuda.OutOfMemoryError, RuntimeError))
    res['torch_max_reserved'] = torch.cuda.max_memory_reserved()
    res['torch'] = torch.__version__
    return res


def case_pluggable(torch):
    a = torch.cuda.memory.CUDAPluggableAllocator(
        os.environ['GPUMEM_TORCH_LIB'], 'gpumem_torch_malloc',
        'gpumem_torch_free')
    torch.cuda.memory.change_current_allocator(a)
    cap = size_parse(os.environ['GPUMEM_LIMIT'])
    free, physical = torch.cuda.mem_get_info()  # not capped: no preload
    res = {'cap_seen': cap, 'physical_seen': physical}
    try:
        keep = torch.empty(cap // 2, dtype=torch.uint8, device='cuda')
        res['under'] = 'ok' if keep.data_ptr() else 'null data pointer'
        del keep
    except Exception as e:  # noqa: BLE001 - recorded, judged by caller
        res['under'] = f'{type(e).__name__}: {e}'[:300]
    try:
        keep = torch.empty(cap + GiB, dtype=torch.uint8, device='cuda')
        res['over'] = ('no error, data pointer '
                       f'{keep.data_ptr():#x}')
        del keep
    except RuntimeError as e:  # torch.cuda.OutOfMemoryError is one too
        res['over'] = ('oom' if is_gpumem_oom(e) or
                       isinstance(e, torch.cuda.OutOfMemoryError) else
                       f'other: {type(e).__name__}')
        res['over_error'] = f'{type(e).__name__}: {str(e)[:300]}'
    except Exception as e:  # noqa: BLE001
        res['over'] = f'other: {type(e).__name__}: {str(e)[:200]}'
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
    warmup = int(os.environ.get('TRAIN_WARMUP', '5'))
    steps = int(os.environ.get('TRAIN_STEPS', '20'))
    cfg = LlamaConfig(hidden_size=2048, intermediate_size=5632,
                      num_hidden_layers=16, num_attention_heads=16,
                      num_key_value_heads=16, vocab_size=32000,
                      max_position_embeddings=2048)
    # Built on the GPU in bfloat16: no CPU initialisation of 1B
    # parameters, so a run starts in seconds and several fit the budget.
    torch.set_default_dtype(torch.bfloat16)
    with torch.device('cuda'):
        model = LlamaForCausalLM(cfg)
    torch.set_default_dtype(torch.float32)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    x = torch.randint(0, cfg.vocab_size, (4, 1024), device='cuda')
    times = []
    for step in range(warmup + steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        if step >= warmup:
            times.append(time.perf_counter() - t)
    return {'parameters': sum(p.numel() for p in model.parameters()),
            'warmup_steps': warmup,
            'step_s': times,
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
