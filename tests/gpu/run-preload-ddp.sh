#!/usr/bin/env bash
# run-preload-ddp.sh BUILD_DIR OUT_DIR - a 2-GPU DistributedDataParallel
# job (torchrun, NCCL) under `gpumem run --fraction 0.25`, on a machine
# with 2 GPUs. Each rank writes its report (GPUMEM_REPORT with %r); each
# must show its own device capped at 25% and NCCL buffers included (peak
# reserved >= torch's max reserved), the launcher (torchrun, no rank, no
# allocation) must write nothing, and `gpumem report` merges the two.
# Results: OUT_DIR/preload-ddp.json and preload-ddp.md. Exit 77 with
# fewer than 2 GPUs. About a minute.
set -u
B=$(realpath "${1:?build dir}")
OUT=$(mkdir -p "${2:?out dir}" && realpath "$2")
LIB="$B/allocator/preload/libgpumem-preload.so"
GPUMEM="$B/tools/gpumem/gpumem"
W="$OUT/preload-ddp-work"
mkdir -p "$W"
[ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] || { echo "need 2 GPUs"; exit 77; }

cat >"$W/ddp.py" <<'PY'
import json, os, sys, torch, torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel as DDP
dist.init_process_group('nccl')
rank = dist.get_rank(); torch.cuda.set_device(int(os.environ['LOCAL_RANK']))
free, total = torch.cuda.mem_get_info()
m = DDP(torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).cuda())
opt = torch.optim.AdamW(m.parameters())
for _ in range(10):
    loss = m(torch.randn(64, 4096, device='cuda')).square().mean()
    loss.backward(); opt.step(); opt.zero_grad()
over = 'no error'
try:
    x = torch.empty(total + (1 << 30), dtype=torch.uint8, device='cuda')
except torch.cuda.OutOfMemoryError:
    over = 'oom'
json.dump({'rank': rank, 'total_seen': total, 'over': over,
           'torch_max_reserved': torch.cuda.max_memory_reserved()},
          open(sys.argv[1] % rank, 'w'))
dist.destroy_process_group()
PY
if "$GPUMEM" run --help >/dev/null 2>&1; then
	timeout 300 "$GPUMEM" run --fraction 0.25 --report "$W/rep-%r.json" -- \
		torchrun --nproc_per_node=2 "$W/ddp.py" "$W/out-%d.json" \
		>"$W/torchrun.log" 2>&1
else
	GPUMEM_FRACTION=0.25 GPUMEM_REPORT="$W/rep-%r.json" LD_PRELOAD="$LIB" \
		timeout 300 torchrun --nproc_per_node=2 "$W/ddp.py" \
		"$W/out-%d.json" >"$W/torchrun.log" 2>&1
fi
# Every report written: the launcher (no rank, it allocates nothing) must
# write none, so exactly rep-0.json and rep-1.json are expected.
"$GPUMEM" report --format json "$W"/rep-*.json \
	>"$W/merged.json" 2>"$W/merge.log"
python3 - "$W" "$OUT" <<'PY'
import glob, json, os, sys
W, OUT = sys.argv[1:3]
rows, ok = [], True
files = sorted(os.path.basename(f) for f in glob.glob(f'{W}/rep-*.json'))
for r in (0, 1):
    try:
        rep = json.load(open(f'{W}/rep-{r}.json'))
        out = json.load(open(f'{W}/out-{r}.json'))
    except (OSError, ValueError) as e:
        rows.append({'rank': r, 'error': str(e)}); ok = False; continue
    d = rep['devices'][[x['device'] for x in rep['devices']].index(r)] \
        if any(x['device'] == r for x in rep['devices']) else {}
    row = {'rank': r, 'device': d.get('device'), 'cap_bytes': d.get('cap_bytes'),
           'total_seen': out['total_seen'], 'over': out['over'],
           'peak_reserved_bytes': d.get('peak_reserved_bytes'),
           'torch_max_reserved': out['torch_max_reserved']}
    # Its own report (rank r), its own device capped, and everything torch
    # reserved plus what NCCL and the context took outside torch's cache
    # (so at least torch's max reserved), within the cap.
    peak = d.get('peak_reserved_bytes') or 0
    row['pass'] = (rep.get('rank') == r and
                   out['total_seen'] == d.get('cap_bytes') and
                   out['over'] == 'oom' and
                   out['torch_max_reserved'] <= peak <= d.get('cap_bytes', 0))
    ok &= row['pass']; rows.append(row)
try:
    merged = json.load(open(f'{W}/merged.json'))
    mrows = [(x['rank'], x['device']) for x in merged['ranks']]
except (OSError, ValueError, KeyError, TypeError):
    mrows = None
# The merge holds each rank's own device once, nothing from the launcher
# (a rank may also list another device if it allocated there).
merged_ok = (files == ['rep-0.json', 'rep-1.json'] and mrows is not None
             and (0, 0) in mrows and (1, 1) in mrows
             and all(rk in (0, 1) for rk, _ in mrows))
ok &= merged_ok
res = {'ranks': rows, 'report_files': files, 'merged_rows': mrows,
       'merged': merged_ok, 'pass': ok}
json.dump(res, open(f'{OUT}/preload-ddp.json', 'w'), indent=2)
open(f'{OUT}/preload-ddp.md', 'w').write(
    '# 2-GPU DDP under gpumem run --fraction 0.25\n\n```\n' +
    json.dumps(res, indent=2) + '\n```\n')
print(json.dumps(res, indent=2)); sys.exit(0 if ok else 1)
PY
