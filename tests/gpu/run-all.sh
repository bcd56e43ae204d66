#!/usr/bin/env bash
# run-all.sh BUILD_DIR OUT_DIR PART... - run GPU parts on the GPU machine.
#
# Parts: catalog verify alloc traces pinned preload preload-ddp alloc-train
# measure measure-multi bench (each a
# tests/gpu/run-*.sh or tools/ script; bench runs the host benchmarks on
# the GPU machine's quieter CPU). BUILD_DIR is a build made
# elsewhere and carried, with libyaml/jemalloc/cmocka .so files in
# BUILD_DIR/lib. Writes OUT_DIR/summary.txt (part, exit code, seconds) and
# OUT_DIR/results.tgz (every part's files), so that few files come back.
# PART_TIMEOUT (seconds) bounds each part: default 240, for measure and
# measure-multi 590 (a run tool call's limit is 600 s: give them a call of
# their own; MEASURE_TOTAL_S, default 200, stops measure starting
# configurations, and a second call with the same OUT_DIR goes on).
set -u
build=$(realpath "${1:?usage: run-all.sh BUILD_DIR OUT_DIR PART...}")
out=$(mkdir -p "${2:?out dir}" && realpath "$2")
shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
limit=${PART_TIMEOUT:-240}
export LD_LIBRARY_PATH="$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
# NVLink multicast stays off on shared machines (device notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

{
	echo "date: $(date -u +%FT%TZ)"
	nvidia-smi --query-gpu=index,name,driver_version,memory.total \
		--format=csv,noheader
	nvcc --version | tail -1
	python3 -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__)'
} >"$work/env.txt" 2>&1

part_cmd() {
	local T="timeout -k 5 $limit"
	case $1 in
	catalog) $T bash "$here/tests/gpu/run-catalog.sh" "$build" "$work/catalog" ;;
	verify) $T bash "$here/tests/gpu/run-verify.sh" "$build" "$work/verify" ;;
	traces) $T python3 "$here/tools/trace/capture.py" "$work/traces" ;;
	alloc) # traces captured in this call, else the committed ones
		local tr="$work/traces"
		[ -d "$tr" ] || tr="$here/tools/trace/data"
		$T bash "$here/tests/gpu/run-alloc.sh" "$build" "$work/alloc" "$tr" ;;
	pinned) $T bash "$here/tests/gpu/run-pinned.sh" "$build" "$work/pinned" ;;
	preload) $T bash "$here/tests/gpu/run-preload.sh" "$build" "$work/preload" ;;
	preload-ddp) $T bash "$here/tests/gpu/run-preload-ddp.sh" "$build" \
		"$work/preload-ddp" ;;
	alloc-train) timeout -k 5 "${PART_TIMEOUT:-595}" bash \
		"$here/tests/gpu/run-alloc-train.sh" "$build" "$work/alloc-train" ;;
	measure) timeout -k 5 "${PART_TIMEOUT:-590}" bash \
		"$here/tests/gpu/run-measure.sh" "$build" "$work/measure" ;;
	measure-multi) timeout -k 5 "${PART_TIMEOUT:-590}" bash \
		"$here/tests/gpu/run-measure-multi.sh" "$build" \
		"$work/measure-multi" ;;
	bench) mkdir -p "$work/bench" && { lscpu | grep -E 'Model name|^CPU\(s\)';
		$T "$build/tools/bench/alloc_bench" 200000 8;
		$T "$build/tools/bench/plan_bench"; } >"$work/bench/host-bench.txt" 2>&1 ;;
	*) echo "unknown part $1"; return 2 ;;
	esac
}

: >"$out/summary.txt"
for part in "$@"; do
	t0=$(date +%s)
	echo "== $part" >&2
	part_cmd "$part" >"$work/$part.log" 2>&1
	rc=$?
	echo "$part rc=$rc seconds=$(( $(date +%s) - t0 ))" | tee -a "$out/summary.txt" >&2
	tail -5 "$work/$part.log" >&2
done
cat "$work/env.txt" >>"$out/summary.txt"
tar czf "$out/results.tgz" -C "$work" .
