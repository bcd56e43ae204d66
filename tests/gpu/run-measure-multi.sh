#!/usr/bin/env bash
# run-measure-multi.sh BUILD_DIR OUT_DIR - measure the several-GPU
# calibration set (tests/data/calibration/multi/manifest.json) per rank
# with torchrun: on 2 GPUs, and on 4 where the machine has them, one
# torchrun per configuration (at most 100 s each). Writes
# OUT_DIR/measured-h200x2.json (and x4; another GPU model's name in place
# of h200) and their logs. Exit 77 with fewer
# than 2 GPUs.
set -u
build=${1:?usage: run-measure-multi.sh BUILD_DIR OUT_DIR}
out=${2:?usage: run-measure-multi.sh BUILD_DIR OUT_DIR}
root=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$out"

if ! python3 -c 'import transformers, yaml' 2>/dev/null && [ -d "$root/.whl" ]; then
	python3 -m pip install -q --no-index --find-links "$root/.whl" \
		--target "$out/.pylib" transformers pyyaml &&
		export PYTHONPATH="$out/.pylib${PYTHONPATH:+:$PYTHONPATH}"
fi
n=$(python3 -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || echo 0)
if [ "${n:-0}" -lt 2 ]; then
	echo "run-measure-multi.sh: needs at least 2 GPUs (skipped)"
	exit 77
fi

export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
export OMP_NUM_THREADS=4
# NVLink multicast stays off in NCCL, PyTorch and NVSHMEM (the GPU hosts' rule).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF

# One torchrun per configuration: each is measured as a job of its own
# (measure_multi.py says why), at most 100 s each; a part whose
# configuration ended ok, oom or refused is kept (call again with the same
# OUT_DIR to run the rest), and every part there is merged.
done_part() { python3 "$root/tools/measure/measure.py" --done "$1"; }
gname=$(python3 -c 'import torch; print(torch.cuda.get_device_name(0))')
case "$gname" in
*H200*) base=measured-h200 ;;
*) base="measured-$(echo "$gname" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-')" ;;
esac
rc=0
mm="$root/tools/measure/measure_multi.py"
manifest="$root/tests/data/calibration/multi/manifest.json"
for w in 2 4; do
	[ "$n" -ge "$w" ] || continue
	# MEASURE_TRACE=1: also the allocation traces, per rank
	trace=()
	[ "${MEASURE_TRACE:-0}" = 1 ] && trace=(--trace-dir "$out/traces-x$w")
	mkdir -p "$out/parts-x$w"
	if ! mapfile -t names < <(python3 "$mm" --manifest "$manifest" --list \
		--world "$w") || [ ${#names[@]} -eq 0 ]; then
		echo "run-measure-multi.sh: no configurations for $w GPUs"
		rc=1
		continue
	fi
	# MEASURE_ONLY="NAME ...": only these configurations
	for name in "${names[@]}"; do
		[ -z "${MEASURE_ONLY:-}" ] || [[ " $MEASURE_ONLY " == *" $name "* ]] ||
			continue
		part="$out/parts-x$w/$name.json"
		done_part "$part" && continue
		rm -f "$part"
		timeout -k 5 100 torchrun --standalone --nproc-per-node "$w" "$mm" \
			--manifest "$manifest" --only "$name" --out "$part" \
			"${trace[@]}" 2>&1 | tee -a "$out/measure-x$w.log"
		r=${PIPESTATUS[0]}
		[ "$r" -eq 0 ] || rc=$r
	done
	parts=("$out/parts-x$w"/*.json)
	if [ -f "${parts[0]}" ]; then
		python3 "$mm" --manifest "$manifest" --world "$w" \
			--merge "${parts[@]}" --out "$out/${base}x$w.json" || rc=1
	fi
done
gpumem="$build/tools/gpumem/gpumem"
for f in "$out"/"$base"x*.json; do
	[ -f "$f" ] && "$gpumem" plan --help >/dev/null 2>&1 || continue
	python3 "$root/tools/measure/error_table.py" --gpumem "$gpumem" \
		--manifest "$root/tests/data/calibration/multi/manifest.json" \
		"$f" >"${f%.json}-error-table.md" 2>&1 || true
done
echo "run-measure-multi.sh: exit $rc; results in $out"
exit "$rc"
