#!/usr/bin/env bash
# Host time of gpumem plan and gpumem fit on the slow cases (long
# generation, many layers, fit over the catalog) for one or two builds.
# CPU seconds (user + system of the process, from /usr/bin/time), not
# wall: the development VM is shared, so wall times swing with the load.
# Prints one markdown row per case and binary: median, min, max of RUNS
# runs (the cases marked 'slow' run SLOW_RUNS times).
# usage: tools/bench/bench_plan.sh [--only CASE,...] RUNS SLOW_RUNS GPUMEM [GPUMEM...]
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
only=
if [ "${1:-}" = --only ]; then
	only=,$2,
	shift 2
fi
runs=$1 slow_runs=$2
shift 2
gen="--set task=inference --set inference.precision=fp16-true
 --set inference.prompt_length=2048 --set inference.generate_length=2048
 --set parallelism.data_parallel=1 --set parallelism.zero_stage=0"
# name|slow|arguments (from the repository root)
cases=(
"gen13b-b4|fast|plan models/llama-2-13b.yaml $gen --set inference.batch_size=4 --gpu a100-80gb"
"gen13b-b15|fast|plan models/llama-2-13b.yaml $gen --set inference.batch_size=15 --gpu a100-80gb"
"layers1000-gen4096|slow|plan models/llama-2-7b.yaml --set task=inference --set inference.precision=bf16-true --set inference.prompt_length=512 --set inference.generate_length=4096 --set inference.batch_size=1 --set parallelism.data_parallel=1 --set parallelism.zero_stage=0 --set model.layers=1000 --gpu h200"
"layers1000-gen4096-p2048-b4|slow|plan models/llama-2-7b.yaml $gen --set inference.generate_length=4096 --set inference.batch_size=4 --set model.layers=1000 --gpu h200"
"gen13b-b4-gen8192|slow|plan models/llama-2-13b.yaml $gen --set inference.generate_length=8192 --set inference.batch_size=4 --gpu h200"
"fit-gen13b-a100|slow|fit models/llama-2-13b.yaml $gen --set inference.batch_size=4 --gpu a100-80gb"
"fit-gen13b-catalog|slow|fit models/llama-2-13b.yaml $gen --set inference.batch_size=4"
"train-layers1000|fast|plan models/llama-2-7b.yaml --set model.layers=1000 --gpu h200"
"fit-train-layers1024|fast|fit models/llama-2-7b.yaml --set model.layers=1024 --gpu h200"
"fit-infer8b-catalog|slow|fit tests/data/plan/llama-3-8b-infer.yaml"
"fit-mistral-window-catalog|slow|fit tests/data/plan/mistral-7b-infer-window.yaml"
"plan-llama-2-7b|fast|plan models/llama-2-7b.yaml"
"plan-mixtral-8x7b|fast|plan models/mixtral-8x7b.yaml"
)
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
median() { sort -g | awk '{a[NR]=$1} END {printf "%.3f %.3f %.3f", \
	(NR % 2 ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2), a[1], a[NR]}'; }
echo "| case | binary | runs | median CPU s | min | max |"
echo "| --- | --- | --- | --- | --- | --- |"
for c in "${cases[@]}"; do
	name=${c%%|*} rest=${c#*|}
	kind=${rest%%|*} args=${rest#*|}
	[ -n "$only" ] && [ "${only#*,$name,}" = "$only" ] && continue
	n=$runs
	[ "$kind" = slow ] && n=$slow_runs
	for bin in "$@"; do
		t=$(for i in $(seq "$n"); do
			(cd "$root" && /usr/bin/time -f "%U %S" -o "$tmp" \
				$bin $args --format json >/dev/null 2>&1)
			tail -1 "$tmp" | awk '{print $1 + $2}'
		done | median)
		echo "| $name | $bin | $n | ${t// / | } |"
	done
done
