#!/usr/bin/env bash
# run-measure-frameworks.sh OUT_DIR [SET...] - measure the pending DeepSpeed
# and Megatron-Core sets of tests/data/calibration/pending/ (ds-multi,
# megatron; both when none is named) per rank with
# tools/measure/measure_frameworks.py: one torchrun per configuration, on
# 2 GPUs and, where the machine has them, 4 (at most 150 s each). The
# wheels the GPU machine lacks (DeepSpeed and its pydantic, hjson;
# megatron-core) are installed from .whl/ when present. A part that ended
# ok, oom or refused is kept, so a second call with the same OUT_DIR runs
# only the rest. MEASURE_ONLY="NAME ..." picks configurations;
# MEASURE_TOTAL_S (default 540) stops starting new ones; MEASURE_TRACE=1
# records each rank's allocation trace. Writes
# OUT_DIR/SET/measured-h200xN.json and OUT_DIR/SET/measure-xN.log.
# Exit 77 with fewer than 2 GPUs.
set -u
out=$(mkdir -p "${1:?usage: run-measure-frameworks.sh OUT_DIR [SET...]}" && cd "$1" && pwd)
shift
sets=("$@")
[ ${#sets[@]} -gt 0 ] || sets=(ds-multi megatron)
root=$(cd "$(dirname "$0")/../.." && pwd)
n=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "${n:-0}" -lt 2 ]; then
	echo "run-measure-frameworks.sh: needs at least 2 GPUs and torch (skipped)"
	exit 77
fi
if [ -d "$root/.whl" ] && ls "$root"/.whl/*.whl >/dev/null 2>&1; then
	python3 -m pip install -q --no-index --no-deps --no-compile \
		--no-cache-dir --target "${MEASURE_PYLIB:-/tmp/measure-pylib}" "$root"/.whl/*.whl &&
		export PYTHONPATH="${MEASURE_PYLIB:-/tmp/measure-pylib}${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
export DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1 OMP_NUM_THREADS=4
# as Megatron-LM's example launch scripts export it
# (examples/gpt3/train_gpt3_175b_distributed.sh)
export CUDA_DEVICE_MAX_CONNECTIONS=1
# NVLink multicast stays off in NCCL, PyTorch and NVSHMEM (the GPU hosts' rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
python3 -c 'import deepspeed' 2>/dev/null || echo "run-measure-frameworks.sh: no deepspeed (its configurations will end in error)"
python3 -c 'import megatron.core' 2>/dev/null || echo "run-measure-frameworks.sh: no megatron.core (its configurations will end in error)"
total=${MEASURE_TOTAL_S:-540}
t0=$(date +%s)
mf="$root/tools/measure/measure_frameworks.py"
done_part() { python3 "$root/tools/measure/measure.py" --done "$1"; }
rc=0
for set in "${sets[@]}"; do
	man="$root/tests/data/calibration/pending/$set/manifest.json"
	[ -f "$man" ] || { echo "run-measure-frameworks.sh: unknown set $set"; exit 2; }
	for w in 2 4; do
		[ "$n" -ge "$w" ] || continue
		d="$out/$set"
		mkdir -p "$d/parts-x$w"
		trace=()
		[ "${MEASURE_TRACE:-0}" = 1 ] && trace=(--trace-dir "$d/traces-x$w")
		mapfile -t names < <(python3 "$mf" --manifest "$man" --list --world "$w")
		for name in "${names[@]}"; do
			[ -z "${MEASURE_ONLY:-}" ] || [[ " $MEASURE_ONLY " == *" $name "* ]] ||
				continue
			part="$d/parts-x$w/$name.json"
			done_part "$part" && continue
			if [ $(($(date +%s) - t0)) -gt "$total" ]; then
				echo "run-measure-frameworks.sh: MEASURE_TOTAL_S spent; call again for the rest"
				rc=1
				break 3
			fi
			rm -f "$part"
			timeout -k 5 150 torchrun --standalone --nproc-per-node "$w" "$mf" \
				--manifest "$man" --only "$name" --out "$part" \
				"${trace[@]}" 2>&1 | tee -a "$d/measure-x$w.log"
			r=${PIPESTATUS[0]}
			[ "$r" -eq 0 ] || rc=$r
		done
		parts=("$d/parts-x$w"/*.json)
		if [ -f "${parts[0]}" ]; then
			python3 "$mf" --manifest "$man" --world "$w" --merge "${parts[@]}" \
				--out "$d/measured-h200x$w.json" || rc=1
		fi
	done
done
echo "run-measure-frameworks.sh: exit $rc; results in $out"
exit "$rc"
