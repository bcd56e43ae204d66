#!/usr/bin/env bash
# run-measure.sh BUILD_DIR OUT_DIR - measure the single-GPU calibration set
# (tests/data/calibration/manifest.json) with PyTorch and transformers,
# each configuration in a process of its own (a user's job starts from a
# fresh process: in one process, the addresses, cached kernels and
# workspaces an earlier configuration left changed a later one's
# segments, tools/bench/results/alloc-emulation.md), spread over
# MEASURE_LANES GPUs (default: all, one process per GPU at a time; every
# GPU the same model). No configuration starts after MEASURE_TOTAL_S
# seconds (default 200). MEASURE_PROCESS=one: all in one process on GPU 0,
# as before (a second call with the same OUT_DIR resumes).
# Writes OUT_DIR/measured-h200.json, OUT_DIR/measure.log and, where the
# build's gpumem has `plan`, OUT_DIR/error-table.md. Exit 77 without a GPU.
set -u
build=${1:?usage: run-measure.sh BUILD_DIR OUT_DIR}
out=${2:?usage: run-measure.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"

# Where transformers (or PyYAML) is missing, wheels carried in .whl/
# (tools/measure/README.md says how to fetch them) are installed beside.
if ! python3 -c 'import transformers, yaml' 2>/dev/null && [ -d "$root/.whl" ]; then
	python3 -m pip install -q --no-index --find-links "$root/.whl" \
		--target "$out/.pylib" transformers pyyaml &&
		export PYTHONPATH="$out/.pylib${PYTHONPATH:+:$PYTHONPATH}"
fi
if ! python3 -c 'import torch, transformers, yaml
assert torch.cuda.is_available()' 2>/dev/null; then
	echo "run-measure.sh: needs a CUDA GPU and python3 with torch, transformers and yaml (skipped)"
	exit 77
fi

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
# Measure PyTorch's default caching allocator, as the planner predicts it.
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF

name=$(python3 -c 'import torch; print(torch.cuda.get_device_name(0))')
case "$name" in
*H200*) file=measured-h200.json ;;
*) file="measured-$(echo "$name" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-').json"
   echo "run-measure.sh: GPU is '$name', writing $file" ;;
esac

total=${MEASURE_TOTAL_S:-200}
manifest="$root/tests/data/calibration/manifest.json"
mp="$root/tools/measure/measure.py"
# MEASURE_TRACE=1: also record each configuration's allocation trace
# (tools/measure/tracefile.py) into OUT_DIR/traces.
trace=()
[ "${MEASURE_TRACE:-0}" = 1 ] && trace=(--trace-dir "$out/traces")
if [ "${MEASURE_PROCESS:-each}" = one ]; then
	CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0} \
		timeout -k 5 $((total + 35)) python3 "$mp" --manifest "$manifest" \
		--out "$out/$file" --total-budget-s "$total" --budget-s 20 \
		--resume "${trace[@]}" 2>&1 | tee -a "$out/measure.log"
	rc=${PIPESTATUS[0]}
else
	gpus=$(nvidia-smi -L | wc -l)
	lanes=${MEASURE_LANES:-$gpus}
	[ "$lanes" -ge 1 ] || lanes=1
	mkdir -p "$out/parts"
	mapfile -t names < <(python3 "$mp" --manifest "$manifest" --list)
	t0=$(date +%s)
	lane() { # lane N: configurations N, N + lanes, ... on GPU N
		local i name
		for ((i = $1; i < ${#names[@]}; i += lanes)); do
			name=${names[$i]}
			[ $(( $(date +%s) - t0 )) -lt "$total" ] || break
			[ -f "$out/parts/$name.json" ] && continue
			CUDA_VISIBLE_DEVICES=$1 timeout -k 5 100 python3 "$mp" \
				--manifest "$manifest" --only "$name" --budget-s 20 \
				--out "$out/parts/$name.json" "${trace[@]}" \
				>"$out/parts/$name.log" 2>&1
			grep -v '^#' "$out/parts/$name.log" | tail -3
		done
	}
	{
		for ((l = 0; l < lanes; l++)); do
			lane "$l" &
		done
		wait
	} 2>&1 | tee -a "$out/measure.log"
	python3 "$mp" --manifest "$manifest" --out "$out/$file" \
		--merge "$out"/parts/*.json 2>&1 | tee -a "$out/measure.log"
	rc=${PIPESTATUS[0]}
	n=$(ls "$out"/parts/*.json 2>/dev/null | wc -l)
	[ "$n" -eq ${#names[@]} ] || {
		echo "run-measure.sh: $n of ${#names[@]} configurations measured"
		rc=1
	}
fi
nvidia-smi >>"$out/measure.log" 2>&1 || true

gpumem="$build/tools/gpumem/gpumem"
if [ -f "$out/$file" ] && "$gpumem" plan --help >/dev/null 2>&1; then
	python3 "$root/tools/measure/error_table.py" --gpumem "$gpumem" \
		"$out/$file" >"$out/error-table.md" 2>&1 || true
fi
echo "run-measure.sh: exit $rc; results in $out/$file"
exit "$rc"
