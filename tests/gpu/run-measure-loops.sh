#!/usr/bin/env bash
# run-measure-loops.sh OUT_DIR SET... - measure the pending calibration sets
# of tests/data/calibration/pending/ on one GPU, one process per
# configuration (as a user's job starts):
#   loops    training as frameworks build it (tools/measure/measure_loops.py)
#   longgen  long generation with transformers' default cache (measure.py)
#   capped   the same generations under torch.cuda.set_per_process_memory_fraction
#            (measure.py, the manifest's memory_limit_bytes)
# Wheels the GPU machine lacks (DeepSpeed and its pydantic, hjson;
# bitsandbytes) are installed from .whl/ when present. A part that ended
# ok, oom or refused is kept, so a second call with the same OUT_DIR runs
# only the rest. MEASURE_ONLY="NAME ..." picks configurations;
# MEASURE_TOTAL_S (default 540) stops starting new ones; MEASURE_TRACE=1
# records allocation traces. Writes OUT_DIR/SET/measured-h200.json (on
# another GPU, measured-NAME.json, NAME its CUDA name in lower case with
# dashes), OUT_DIR/SET/measure.log and OUT_DIR/SET/traces.tgz. Exit 77
# without a GPU.
set -u
out=$(mkdir -p "${1:?usage: run-measure-loops.sh OUT_DIR SET...}" && cd "$1" && pwd)
shift
root=$(cd "$(dirname "$0")/../.." && pwd)
if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	echo "run-measure-loops.sh: needs a CUDA GPU and torch (skipped)"
	exit 77
fi
if [ -d "$root/.whl" ] && ls "$root"/.whl/*.whl >/dev/null 2>&1; then
	python3 -m pip install -q --no-index --no-deps --no-compile \
		--no-cache-dir --target "${MEASURE_PYLIB:-/tmp/measure-pylib}" "$root"/.whl/*.whl &&
		export PYTHONPATH="${MEASURE_PYLIB:-/tmp/measure-pylib}${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONUNBUFFERED=1 TOKENIZERS_PARALLELISM=false
export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TRANSFORMERS_VERBOSITY=error
export DS_BUILD_OPS=0 DS_SKIP_CUDA_CHECK=1 MEASURE_TMP=$(mktemp -d)
unset PYTORCH_CUDA_ALLOC_CONF PYTORCH_ALLOC_CONF
gname=$(python3 -c 'import torch; print(torch.cuda.get_device_name(0))')
case "$gname" in
*H200*) file=measured-h200.json ;;
*) file="measured-$(echo "$gname" | tr 'A-Z ' 'a-z-' | tr -cd 'a-z0-9-').json" ;;
esac
total=${MEASURE_TOTAL_S:-540}
t0=$(date +%s)
rc=0
for set in "$@"; do
	case $set in
	loops) mp=$root/tools/measure/measure_loops.py ;;
	longgen | capped) mp=$root/tools/measure/measure.py ;;
	*) echo "run-measure-loops.sh: unknown set $set"; exit 2 ;;
	esac
	man=$root/tests/data/calibration/pending/$set/manifest.json
	o=$out/$set
	mkdir -p "$o/parts" "$o/traces"
	trace=()
	[ "${MEASURE_TRACE:-0}" = 1 ] && trace=(--trace-dir "$o/traces")
	mapfile -t names < <(python3 "$mp" --manifest "$man" --list)
	for name in "${names[@]}"; do
		if [ -n "${MEASURE_ONLY:-}" ]; then
			case " $MEASURE_ONLY " in *" $name "*) ;; *) continue ;; esac
		fi
		part=$o/parts/$name.json
		python3 "$root/tools/measure/measure.py" --done "$part" 2>/dev/null && continue
		[ $(( $(date +%s) - t0 )) -lt "$total" ] || { echo "# time budget spent before $name"; rc=1; break; }
		rm -f "$part"
		timeout -k 5 "${MEASURE_PART_S:-240}" python3 "$mp" --manifest "$man" --only "$name" \
			--out "$part" "${trace[@]}" >"$o/parts/$name.log" 2>&1
		grep -v '^#' "$o/parts/$name.log" | tail -2
	done 2>&1 | tee -a "$o/measure.log"
	parts=("$o"/parts/*.json)
	[ -e "${parts[0]}" ] && python3 "$mp" --manifest "$man" \
		--out "$o/$file" --merge "${parts[@]}" 2>&1 |
		tee -a "$o/measure.log"
	# the errors' tracebacks and logs travel with the traces
	tar -czf "$o/traces.tgz" -C "$o" traces parts 2>/dev/null
done
echo "run-measure-loops.sh: exit $rc"
exit "$rc"
