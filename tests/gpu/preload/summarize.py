#!/usr/bin/env python3
"""Judge tests/gpu/run-preload.sh's outputs; write preload-results.json
and preload-results.md. Usage: summarize.py WORK OUT LAUNCH. Exit 1 when
a case failed."""
import json
import os
import statistics
import subprocess
import sys

W, OUT, LAUNCH = sys.argv[1:4]
GiB = 1 << 30


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
try:
    with open(os.path.join(W, 'seconds.txt')) as f:
        env['seconds'] = int(f.read())
except (OSError, ValueError):
    pass
cases = []


def device(rep):
    return (rep or {}).get('devices', [{}])[0] if rep else {}


def training():
    """The interleaved training runs: per variant the median over every
    timed step of every round, each round's median, the ratio to plain,
    and (under gpumem) the report's peak reserved against PyTorch's."""
    variants = {}
    for v in ('plain', 'limit', 'cache'):
        rounds = []
        r = 1
        while os.path.exists(os.path.join(W, f'err-train-{v}-r{r}.log')):
            out = load(f'out-train-{v}-r{r}.json')
            rep = device(load(f'rep-train-{v}-r{r}.json'))
            rd = {'round': r, 'ok': bool(out and out.get('step_s'))}
            if rd['ok']:
                rd['median_step_s'] = out['median_step_s']
                rd['torch_max_reserved'] = out['torch_max_reserved']
                rd['step_s'] = out['step_s']
            if rep:
                rd['report_peak_reserved'] = rep.get('peak_reserved_bytes')
                rd['report_mode'] = (load(f'rep-train-{v}-r{r}.json') or
                                     {}).get('mode')
                for k in ('oom_count', 'alloc_count', 'free_count',
                          'pool_reserved_bytes', 'fragmentation'):
                    if k in rep:
                        rd[k] = rep[k]
            rounds.append(rd)
            r += 1
        if not rounds:
            continue
        good = [rd for rd in rounds if rd['ok']]
        steps = [t for rd in good for t in rd['step_s']]
        var = {'runs': len(rounds), 'runs_ok': len(good),
               'steps': len(steps),
               'round_medians_s': [rd['median_step_s'] for rd in good]}
        if steps:
            var['median_step_s'] = statistics.median(steps)
            var['torch_max_reserved'] = max(rd['torch_max_reserved']
                                            for rd in good)
            m = var['round_medians_s']
            var['round_spread'] = (max(m) - min(m)) / var['median_step_s']
        peaks = [rd['report_peak_reserved'] for rd in rounds
                 if rd.get('report_peak_reserved')]
        if peaks:
            var['report_peak_reserved'] = max(peaks)
            ratios = [rd['report_peak_reserved'] / rd['torch_max_reserved']
                      for rd in good if rd.get('report_peak_reserved')]
            if ratios:
                var['peak_reserved_ratios'] = ratios
                var['peak_reserved_ratio'] = max(ratios, key=lambda x:
                                                 abs(x - 1))
        for rd in rounds:
            rd.pop('step_s', None)
        var['rounds'] = rounds
        variants[v] = var
    base = variants.get('plain', {}).get('median_step_s')
    for v, var in variants.items():
        if base and 'median_step_s' in var:
            var['step_time_ratio'] = var['median_step_s'] / base
    res = {'variants': variants}
    lim = variants.get('limit', {})
    if 'step_time_ratio' in lim:
        res['step_time_ratio'] = lim['step_time_ratio']
        res['step_time_within_1pct'] = abs(lim['step_time_ratio'] - 1) <= .01
    if 'peak_reserved_ratio' in lim:
        res['peak_reserved_ratio'] = lim['peak_reserved_ratio']
        res['peak_reserved_within_1pct'] = \
            abs(lim['peak_reserved_ratio'] - 1) <= .01
    return res


def train_table(train):
    """The training comparison as a markdown table."""
    rows = ['| variant | runs | timed steps | median step s | ratio to '
            'plain | round medians s | torch max reserved GiB | report '
            'peak reserved GiB | report / torch |',
            '|---|---|---|---|---|---|---|---|---|']
    for v, var in train['variants'].items():
        def f(key, fmt, scale=1):
            x = var.get(key)
            return '' if x is None else format(x / scale, fmt)
        rows.append(
            f"| {v} | {var['runs_ok']}/{var['runs']} | {var['steps']} | "
            f"{f('median_step_s', '.4f')} | {f('step_time_ratio', '.4f')} "
            f"| {' '.join(format(x, '.4f') for x in var['round_medians_s'])}"
            f" | {f('torch_max_reserved', '.2f', GiB)} "
            f"| {f('report_peak_reserved', '.2f', GiB)} "
            f"| {f('peak_reserved_ratio', '.4f')} |")
    return '\n'.join(rows) + '\n'


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

train = training()
res = {'environment': env, 'cases': cases, 'train': train}
with open(os.path.join(OUT, 'preload-results.json'), 'w') as f:
    json.dump(res, f, indent=2)
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
    f.write('\n## Training (~1B Llama-shaped)\n\n'
            'Variants interleaved, order rotated each round; per run '
            'the warm-up steps are discarded. Median over every timed '
            'step of every round; ratio = variant / plain. Report peak '
            'reserved: the gpumem report, against '
            'torch.cuda.max_memory_reserved() (worst round).\n\n')
    f.write(train_table(train))
    f.write('\n')
    for k in ('step_time_ratio', 'step_time_within_1pct',
              'peak_reserved_ratio', 'peak_reserved_within_1pct'):
        if k in train:
            f.write(f'- limit {k}: {train[k]}\n')
print(open(os.path.join(OUT, 'preload-results.md')).read())
train_ok = all(v['runs_ok'] == v['runs'] for v in train['variants'].values())
if not train_ok:
    print('a training run failed: see err-train-*.log')
sys.exit(0 if all(c['pass'] for c in cases) and train_ok else 1)
