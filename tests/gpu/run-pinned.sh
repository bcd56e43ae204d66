#!/usr/bin/env bash
# GPU check of the pinned host memory cache (run by a maintainer on a GPU
# machine, under 3 minutes):
#   tests/gpu/run-pinned.sh BUILD_DIR OUT_DIR
# 1. test-pinned-gpu: pointer queries (cuPointerGetAttribute, device
#    pointers of mapped memory, host flags) on sub-allocated buffers, and
#    async copies host->device->host from/to them on 4 streams.
# 2. pinned_bench: allocate+free pairs of 64 KiB, 1 MiB, 64 MiB through
#    the driver and through the cache (target: cached >= 100x faster),
#    and a loop copying a per-step pinned 64 MiB buffer to the device.
# Writes OUT_DIR/pinned-gpu.json, pinned-bench.json, pinned-bench.md and
# env.json (GPU, driver, CUDA, torch versions). Exit 0 when all passed.
set -u
build=${1:?usage: run-pinned.sh BUILD_DIR OUT_DIR}
out=${2:?usage: run-pinned.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
rc=0

gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader \
	2>/dev/null | head -1)
cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
torch=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null)
printf '{"gpu": "%s", "cuda": "%s", "torch": "%s", "host": "%s"}\n' \
	"${gpu:-none}" "${cuda:-?}" "${torch:-none}" "$(hostname)" \
	>"$out/env.json"

timeout 60 "$build/tests/gpu/test-pinned-gpu" >"$out/pinned-gpu.json" \
	2>"$out/pinned-gpu.stderr"
t=$?
echo "test-pinned-gpu: exit $t"
[ "$t" -eq 0 ] || rc=1

timeout 100 "$build/tools/bench/pinned_bench" --format json \
	>"$out/pinned-bench.json" 2>"$out/pinned-bench.stderr" || rc=1
timeout 100 "$build/tools/bench/pinned_bench" --format table \
	>"$out/pinned-bench.md" 2>>"$out/pinned-bench.stderr" || rc=1
cat "$out/env.json" "$out/pinned-gpu.json" "$out/pinned-bench.md"

# The target: every size at least 100x faster cached.
python3 - "$out/pinned-bench.json" <<'PY' || rc=1
import json, sys
r = json.load(open(sys.argv[1]))
bad = [p for p in r["pairs"] if p["speedup"] < 100]
for p in r["pairs"]:
    print("%10d bytes: driver %.1f us, cached %.3f us, %.0fx" % (
        p["size_bytes"], p["driver_us_per_pair"], p["cached_us_per_pair"],
        p["speedup"]))
print("target 100x:", "met" if not bad else "NOT met")
sys.exit(1 if bad else 0)
PY
exit $rc
