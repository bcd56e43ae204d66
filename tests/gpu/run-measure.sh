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
	# the GPUs to use: CUDA_VISIBLE_DEVICES's, else all; one lane each,
	# MEASURE_LANES of them at most
	if [ -n "${CUDA_VISIBLE_DEVICES:-}" ]; then
		IFS=, read -r -a devs <<<"$CUDA_VISIBLE_DEVICES"
	else
		mapfile -t devs < <(nvidia-smi --query-gpu=index --format=csv,noheader)
	fi
	lanes=${MEASURE_LANES:-${#devs[@]}}
	[ "$lanes" -le "${#devs[@]}" ] || lanes=${#devs[@]}
	[ "$lanes" -ge 1 ] || lanes=1
	mkdir -p "$out/parts"
	if ! mapfile -t names < <(python3 "$mp" --manifest "$manifest" --list) ||
		[ ${#names[@]} -eq 0 ]; then
		echo "run-measure.sh: no configurations listed from $manifest"
		exit 1
	fi
	t0=$(date +%s)
	# a part counts as done when its configuration ended ok, oom or
	# refused; an error or a crash is measured again
	done_part() { python3 "$root/tools/measure/measure.py" --done "$1"; }
	lane() { # lane N: configurations N, N + lanes, ... on GPU devs[N]
		local i name part
		for ((i = $1; i < ${#names[@]}; i += lanes)); do
			name=${names[$i]}
			part="$out/parts/$name.json"
			[ $(( $(date +%s) - t0 )) -lt "$total" ] || break
			done_part "$part" && continue
			rm -f "$part"
			CUDA_VISIBLE_DEVICES=${devs[$1]} timeout -k 5 100 \
				python3 "$mp" --manifest "$manifest" --only "$name" \
				--budget-s 20 --out "$part" "${trace[@]}" \
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
	rc=0
	parts=("$out"/parts/*.json)
	python3 "$mp" --manifest "$manifest" --out "$out/$file" \
		--merge "${parts[@]}" 2>&1 | tee -a "$out/measure.log"
	[ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
	n=0
	for p in "${parts[@]}"; do
		done_part "$p" && n=$((n + 1))
	done
	[ "$n" -eq ${#names[@]} ] || {
		echo "run-measure.sh: $n of ${#names[@]} configurations measured" \
			"(ok, oom or refused); run again with the same OUT_DIR for the rest"
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
