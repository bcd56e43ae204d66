#!/usr/bin/env bash
# run-preload.sh BUILD_DIR OUT_DIR - the preload allocator on a real GPU.
#
# Every case runs under a cap of 25% of the device (gpumem run --fraction
# 0.25) and must (a) see the capped total, (b) allocate half of it, (c)
# fail past it with the framework's own out-of-memory error, and (d) be
# seen by gpumem: the report's peak_reserved_bytes > 0 and <= the cap.
# Cases: CUDA C with nvcc's default static cudart and with -cudart shared;
# PyTorch native, expandable_segments:True, backend:cudaMallocAsync; the
# CUDAPluggableAllocator route; CuPy; JAX (default preallocation).
# Then a ~1B Llama-shaped model trains 20 steps with and without
# `gpumem run --fraction 0.5` (median step time; report peak reserved vs
# torch.cuda.max_memory_reserved()).
# The CUDA C cases, PyTorch native and the training run are repeated in
# GPUMEM_MODE=cache (names with "@cache"): allocations served from
# gpumem's pool; the report must say mode "cache" and carry pool keys.
# PRELOAD_CACHE=0 skips them (about a minute less).
# Results: OUT_DIR/preload-results.json and preload-results.md.
# Exit 77 without a GPU. About 3-4 minutes on one H200.
set -u
B=$(realpath "${1:?build dir}")
OUT=$(mkdir -p "${2:?out dir}" && realpath "$2")
HERE=$(dirname "$(realpath "$0")")/preload
LIB="$B/allocator/preload/libgpumem-preload.so"
GPUMEM="$B/tools/gpumem/gpumem"
W="$OUT/preload-work"
mkdir -p "$W"

nvidia-smi -L >/dev/null 2>&1 || { echo "no GPU"; exit 77; }
[ -f "$LIB" ] || { echo "no $LIB"; exit 1; }

# gpumem run when the program starts here (it needs libyaml); else the
# same variables set by hand (what gpumem run sets).
if "$GPUMEM" run --help >/dev/null 2>&1; then
	LAUNCH=gpumem-run
else
	LAUNCH=env
fi
# gmrun FRACTION REPORT CMD... : run CMD with the preload library
# (in the mode of $GPUMEM_MODE when it is set: it is inherited).
gmrun() {
	local frac=$1 rep=$2
	shift 2
	if [ "$LAUNCH" = gpumem-run ]; then
		timeout 120 "$GPUMEM" run --fraction "$frac" --report "$rep" \
			-- "$@"
	else
		GPUMEM_FRACTION=$frac GPUMEM_REPORT=$rep \
			LD_PRELOAD="$LIB${LD_PRELOAD:+:$LD_PRELOAD}" \
			timeout 120 "$@"
	fi
}

NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
"$NVCC" -O2 -o "$W/alloc-static" "$HERE/alloc.cu" 2>"$W/nvcc.log"
"$NVCC" -O2 -cudart shared -o "$W/alloc-shared" "$HERE/alloc.cu" \
	2>>"$W/nvcc.log"

for v in static shared; do
	gmrun 0.25 "$W/rep-cuda-$v.json" "$W/alloc-$v" 0 \
		>"$W/out-cuda-$v.json" 2>"$W/err-cuda-$v.log"
	[ "${PRELOAD_CACHE:-1}" = 0 ] ||
		GPUMEM_MODE=cache gmrun 0.25 "$W/rep-cuda-$v@cache.json" \
			"$W/alloc-$v" 0 >"$W/out-cuda-$v@cache.json" \
			2>"$W/err-cuda-$v@cache.log"
done
run_py() { # NAME FRACTION [VAR=VALUE...]: a cases.py case under gmrun
	local name=$1 frac=$2
	shift 2
	(
		for kv in "$@"; do export "$kv"; done
		export GPUMEM_LIB="$LIB"
		gmrun "$frac" "$W/rep-$name.json" python3 "$HERE/cases.py" \
			"${name%%@*}" "$W/out-$name.json"
	) 2>"$W/err-$name.log"
}
run_py torch-native 0.25
[ "${PRELOAD_CACHE:-1}" = 0 ] ||
	run_py torch-native@cache 0.25 GPUMEM_MODE=cache
run_py torch-expandable 0.25 \
	PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
run_py torch-async 0.25 PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync
run_py cupy 0.25
run_py jax 0.25
# The pluggable route: no LD_PRELOAD, the cap from GPUMEM_LIMIT.
cap=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits \
	-i 0 | awk '{printf "%dMiB", $1 / 4}')
GPUMEM_LIB="$LIB" GPUMEM_LIMIT=$cap GPUMEM_REPORT="$W/rep-pluggable.json" \
	timeout 120 python3 "$HERE/cases.py" pluggable \
	"$W/out-pluggable.json" 2>"$W/err-pluggable.log"
# Training with and without gpumem.
timeout 150 python3 "$HERE/cases.py" train "$W/out-train-plain.json" \
	2>"$W/err-train-plain.log"
run_py train@gpumem 0.5
mv -f "$W/out-train@gpumem.json" "$W/out-train-gpumem.json" 2>/dev/null
mv -f "$W/rep-train@gpumem.json" "$W/rep-train-gpumem.json" 2>/dev/null
if [ "${PRELOAD_CACHE:-1}" != 0 ]; then
	run_py train@cache 0.5 GPUMEM_MODE=cache
	mv -f "$W/out-train@cache.json" "$W/out-train-cache.json" 2>/dev/null
	mv -f "$W/rep-train@cache.json" "$W/rep-train-cache.json" 2>/dev/null
fi

python3 "$HERE/summarize.py" "$W" "$OUT" "$LAUNCH"
