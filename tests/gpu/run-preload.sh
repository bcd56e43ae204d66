#!/usr/bin/env bash
# run-preload.sh BUILD_DIR OUT_DIR - the preload allocator on a real GPU.
#
# Every case runs under a cap of 25% of the device (gpumem run --fraction
# 0.25) and must (a) see the capped total, (b) allocate half of it, (c)
# fail past it with the framework's own out-of-memory error, and (d) be
# seen by gpumem: the report's peak_reserved_bytes > 0 and <= the cap.
# Cases: CUDA C with nvcc's default static cudart and with -cudart shared;
# PyTorch native, expandable_segments:True, backend:cudaMallocAsync; CuPy;
# JAX (default preallocation). The CUDAPluggableAllocator route
# (libgpumem-torch.so, no LD_PRELOAD, cap from GPUMEM_LIMIT = 25% of the
# device) allocates half the cap and must raise gpumem's RuntimeError past
# it.
# The CUDA C cases and PyTorch native are repeated in GPUMEM_MODE=cache
# (names with "@cache"): allocations served from gpumem's pool; the report
# must say mode "cache" and carry pool keys. PRELOAD_CACHE=0 skips them.
# Training: a ~1B Llama-shaped model, variants plain (no gpumem), limit
# (`gpumem run --fraction 0.5`) and cache (the same in GPUMEM_MODE=cache),
# PRELOAD_ROUNDS (3) rounds of one run per variant, the order rotated each
# round (plain limit cache / limit cache plain / cache plain limit) so
# that no variant always runs first. Each run discards TRAIN_WARMUP (5)
# steps and times TRAIN_STEPS (20); summarize.py gives per variant the
# median over all timed steps, each round's median, the ratio to plain,
# and the report's peak reserved against torch.cuda.max_memory_reserved().
# Results: OUT_DIR/preload-results.json and preload-results.md.
# Exit 77 without a GPU. About 3-4 minutes on one H200 (seconds taken in
# the results); set PART_TIMEOUT=300 for run-all.sh.
set -u
B=$(realpath "${1:?build dir}")
OUT=$(mkdir -p "${2:?out dir}" && realpath "$2")
HERE=$(dirname "$(realpath "$0")")/preload
LIB="$B/allocator/preload/libgpumem-preload.so"
TORCH_LIB="$B/allocator/preload/libgpumem-torch.so"
GPUMEM="$B/tools/gpumem/gpumem"
W="$OUT/preload-work"
mkdir -p "$W"
rm -f "$W"/out-*.json "$W"/rep-*.json "$W"/err-train-*.log
T0=$(date +%s)

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
# The pluggable route: libgpumem-torch.so, no LD_PRELOAD, the cap from
# GPUMEM_LIMIT (a quarter of the device, in MiB).
cap=$(nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits \
	-i 0 | awk '{printf "%dMiB", $1 / 4}')
if [ -f "$TORCH_LIB" ]; then
	GPUMEM_TORCH_LIB="$TORCH_LIB" GPUMEM_LIMIT=$cap \
		GPUMEM_REPORT="$W/rep-pluggable.json" \
		timeout 120 python3 "$HERE/cases.py" pluggable \
		"$W/out-pluggable.json" 2>"$W/err-pluggable.log"
else
	echo "no $TORCH_LIB (built without a C++ compiler)" \
		>"$W/err-pluggable.log"
fi

# Training: interleaved rounds, the variant order rotated each round.
# train VARIANT ROUND: one run; out-train-VARIANT-rROUND.json and, under
# gpumem, rep-train-VARIANT-rROUND.json.
train() {
	local v=$1 r=$2 out="$W/out-train-$1-r$2.json"
	case $v in
	plain) timeout 150 python3 "$HERE/cases.py" train "$out" ;;
	limit) (unset GPUMEM_MODE; gmrun 0.5 "$W/rep-train-$v-r$r.json" \
		python3 "$HERE/cases.py" train "$out") ;;
	cache) GPUMEM_MODE=cache gmrun 0.5 "$W/rep-train-$v-r$r.json" \
		python3 "$HERE/cases.py" train "$out" ;;
	esac 2>"$W/err-train-$v-r$r.log"
}
variants=(plain limit cache)
[ "${PRELOAD_CACHE:-1}" = 0 ] && variants=(plain limit)
n=${#variants[@]}
for ((r = 1; r <= ${PRELOAD_ROUNDS:-3}; r++)); do
	for ((i = 0; i < n; i++)); do
		train "${variants[(i + r - 1) % n]}" "$r"
	done
done
echo $(( $(date +%s) - T0 )) >"$W/seconds.txt"

python3 "$HERE/summarize.py" "$W" "$OUT" "$LAUNCH"
