#!/usr/bin/env bash
# run-alloc.sh BUILD_DIR OUT_DIR [TRACE_DIR]
#
# On the GPU machine: run the allocator core's GPU test (driver backend:
# plain and virtual segments, stream safety under a running kernel), then
# replay every trace TRACE_DIR/*.csv.gz (default: tools/trace/data, where
# tools/trace/capture.py output is kept) through `gpumem replay`, plain
# and with virtual segments, next to PyTorch's own peaks from NAME.json.
# Writes OUT_DIR/alloc-gpu.md and OUT_DIR/alloc-gpu.json. Under 4 minutes.
set -u
build=$(cd "$1" && pwd)
out=$2
traces=${3:-$(dirname "$0")/../../tools/trace/data}
mkdir -p "$out"
out=$(cd "$out" && pwd)
md=$out/alloc-gpu.md
gpumem=$build/tools/gpumem/gpumem
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

gpu=$(nvidia-smi --query-gpu=name,driver_version,memory.total \
	--format=csv,noheader 2>/dev/null | head -1)
torchv=$(python3 -c 'import torch; print(torch.__version__, torch.version.cuda)' 2>/dev/null)
{
	echo "# gpumem allocator core on the GPU"
	echo
	echo "- GPU, driver, memory: ${gpu:-unknown}"
	echo "- nvcc: $(nvcc --version 2>/dev/null | tail -1)"
	echo "- torch, CUDA: ${torchv:-unknown}"
	echo "- date: $(date -u +%FT%TZ)"
	echo
	echo "## GPU test (tests/gpu/test_alloc_gpu.c)"
	echo
	echo '```'
} >"$md"
timeout 120 "$build/tests/gpu/test-alloc-gpu" \
	"$build/tests/gpu/alloc_kernels.fatbin" >>"$md" 2>&1
rc=$?
{
	echo '```'
	echo
	echo "exit status: $rc (0 passed, 77 skipped, else failed)"
	echo
	echo "## Trace replay (simulated H200 capacity)"
	echo
	echo "| trace | torch peak allocated GiB | torch peak reserved GiB | gpumem peak reserved GiB | gpumem virtual peak reserved GiB | virtual / peak allocated | fragmentation | ns/op |"
	echo "|---|---:|---:|---:|---:|---:|---:|---:|"
} >>"$md"
json="{\"gpu\": \"${gpu}\", \"torch\": \"${torchv}\", \"gpu_test_exit\": $rc, \"traces\": ["
sep=""
for t in "$traces"/*.csv.gz; do
	[ -e "$t" ] || continue
	name=$(basename "$t" .csv.gz)
	meta="$(dirname "$t")/$name.json"
	p=$(timeout 60 "$gpumem" replay "$t" --format json) || continue
	v=$(timeout 60 "$gpumem" replay "$t" --virtual-segments --format json) || continue
	row=$(python3 - "$meta" "$p" "$v" <<'PY'
import json, sys
meta = {}
try:
    meta = json.load(open(sys.argv[1]))
except Exception:
    pass
p, v = json.loads(sys.argv[2]), json.loads(sys.argv[3])
g = lambda b: "%.2f" % (b / 2**30) if isinstance(b, int) else "n/a"
ta = meta.get("torch_max_memory_allocated_bytes")
tr = meta.get("torch_max_memory_reserved_bytes")
ratio = v["peak_reserved_bytes"] / max(v["peak_allocated_bytes"], 1)
print("| %s | %s | %s | %s | %s | %.3f | %.3f | %.0f |" % (
    meta.get("name", p["trace"]), g(ta), g(tr), g(p["peak_reserved_bytes"]),
    g(v["peak_reserved_bytes"]), ratio, p["fragmentation"], p["ns_per_op"]))
print(json.dumps({"trace": p["trace"], "torch": meta, "plain": p,
                  "virtual": v}))
PY
)
	echo "$row" | head -1 >>"$md"
	json="$json$sep$(echo "$row" | tail -1)"
	sep=", "
done
echo "$json]}" >"$out/alloc-gpu.json"
cat "$md"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]
