#!/usr/bin/env python3
"""Judge tests/gpu/run-preload.sh's outputs; write preload-results.json
and preload-results.md. Usage: summarize.py WORK OUT LAUNCH. Exit 1 when
a case failed."""
import json
import os
import subprocess
import sys

W, OUT, LAUNCH = sys.argv[1:4]


def load(name):
    try:
        with open(os.path.join(W, name)) as f:
            return json.loads(f.read().strip().splitlines()[-1]
                              if name.startswith('out-cuda') else f.read())
    except (OSError, ValueError, IndexError):
        return None


def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True,
                              text=True, timeout=30).stdout.strip()
    except Exception:  # noqa: BLE001
        return ''


env = {
    'gpu': sh('nvidia-smi --query-gpu=name --format=csv,noheader -i 0'),
    'driver': sh('nvidia-smi --query-gpu=driver_version '
                 '--format=csv,noheader -i 0'),
    'cuda': sh("nvcc --version | tail -2 | head -1"),
    'torch': sh("python3 -c 'import torch; print(torch.__version__)'"),
    'launch': LAUNCH,
}
cases = []


def device(rep):
    return (rep or {}).get('devices', [{}])[0] if rep else {}


def judge(name, out, rep, kind):
    d = device(rep)
    cap = d.get('cap_bytes', 0)
    peak = d.get('peak_reserved_bytes', 0)
    seen = bool(rep) and 0 < peak <= cap
    if name.endswith('@cache'):
        # Served from gpumem's pool: the report says so.
        seen = seen and rep.get('mode') == 'cache' and 'pool' in d
    c = {'case': name, 'cap_bytes': cap, 'peak_reserved_bytes': peak,
         'oom_count': d.get('oom_count'), 'intercepted': seen}
    if kind == 'cuda':
        ok = (out is not None and out['total'] == cap and
              out['allocated'] >= cap - 2 * (1 << 30) and
              out['allocated'] <= cap and out['error'] == 2)
        c.update(out or {})
    else:
        ok = (out is not None and out.get('under') == 'ok' and
              out.get('over') == 'oom')
        c.update(out or {})
        if kind == 'torch' and out and 'torch_max_reserved' in out:
            c['torch_max_reserved'] = out['torch_max_reserved']
    c['pass'] = bool(ok and seen)
    cases.append(c)


skip_cache = os.environ.get('PRELOAD_CACHE', '1') == '0'
for v in ('static', 'shared', 'static@cache', 'shared@cache'):
    if skip_cache and v.endswith('@cache'):
        continue
    judge(f'cuda-{v}', load(f'out-cuda-{v}.json'),
          load(f'rep-cuda-{v}.json'), 'cuda')
for n in ('torch-native', 'torch-native@cache', 'torch-expandable',
          'torch-async', 'pluggable'):
    if skip_cache and n.endswith('@cache'):
        continue
    judge(n, load(f'out-{n}.json'), load(f'rep-{n}.json'), 'torch')
judge('cupy', load('out-cupy.json'), load('rep-cupy.json'), 'other')
judge('jax', load('out-jax.json'), load('rep-jax.json'), 'other')

plain, gm = load('out-train-plain.json'), load('out-train-gpumem.json')
rep = device(load('rep-train-gpumem.json'))
train = {'plain': plain, 'gpumem': gm, 'report': rep}
if plain and gm:
    train['step_time_ratio'] = gm['median_step_s'] / plain['median_step_s']
    train['step_time_within_1pct'] = abs(train['step_time_ratio'] - 1) <= .01
if gm and rep:
    train['peak_reserved_ratio'] = (rep['peak_reserved_bytes'] /
                                    gm['torch_max_reserved'])
    train['peak_reserved_within_1pct'] = \
        abs(train['peak_reserved_ratio'] - 1) <= .01

# GPUMEM_MODE=cache: step time against the run without gpumem, the
# report's peak reserved against PyTorch's (the pool packs PyTorch's
# segments into its own, so it may hold more than PyTorch reserved).
gmc = load('out-train-cache.json')
repc = device(load('rep-train-cache.json'))
cache = {'gpumem': gmc, 'report': {k: repc.get(k) for k in (
    'peak_reserved_bytes', 'peak_allocated_bytes', 'reserved_bytes',
    'pool_reserved_bytes', 'fragmentation', 'largest_free_block_bytes',
    'oom_count', 'oom_verdict', 'alloc_count', 'free_count')}}
if plain and gmc:
    cache['step_time_ratio'] = gmc['median_step_s'] / plain['median_step_s']
if gmc and repc:
    cache['peak_reserved_ratio'] = (repc['peak_reserved_bytes'] /
                                    gmc['torch_max_reserved'])
train['cache'] = cache

res = {'environment': env, 'cases': cases, 'train': train}
with open(os.path.join(OUT, 'preload-results.json'), 'w') as f:
    json.dump(res, f, indent=2)
GiB = 1 << 30
with open(os.path.join(OUT, 'preload-results.md'), 'w') as f:
    f.write('# Preload allocator on the GPU (tests/gpu/run-preload.sh)\n\n')
    f.write('\n'.join(f'- {k}: {v}' for k, v in env.items()) + '\n\n')
    f.write('| case | pass | cap GiB | report peak reserved GiB | OOMs | '
            'under | over |\n|---|---|---|---|---|---|---|\n')
    for c in cases:
        f.write(f"| {c['case']} | {c['pass']} | {c['cap_bytes'] / GiB:.2f} "
                f"| {c['peak_reserved_bytes'] / GiB:.2f} | {c['oom_count']} "
                f"| {c.get('under', c.get('allocated', ''))} "
                f"| {c.get('over', c.get('error', ''))} |\n")
    f.write('\n## Training (~1B Llama-shaped, 20 steps)\n\n```\n' +
            json.dumps(train, indent=2) + '\n```\n')
print(open(os.path.join(OUT, 'preload-results.md')).read())
sys.exit(0 if all(c['pass'] for c in cases) else 1)
