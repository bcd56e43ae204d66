#!/usr/bin/env bash
# Regenerate the golden outputs of gpumem plan / fit (tests/golden/
# meson.build lists the same commands) from a build directory, then
# review `git diff tests/golden`: only the figures the change explains
# may move.
# usage: tests/golden/regen.sh BUILD_DIR
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
gpumem=$(cd "$1" && pwd)/tools/gpumem/gpumem
data=$root/tests/data/plan
out=$root/tests/golden
cd /tmp
for s in gpt2-a100 llama-2-7b-h200 llama-2-13b-v100-pp llama-3-8b-infer \
	bert-large-cls llama-2-7b-megatron llama-2-7b-deepspeed \
	mixtral-8x7b-megatron deepseek-v3-style-infer llama-2-7b-ds-zero2-offload \
	mistral-7b-infer-window; do
	"$gpumem" plan "$data/$s.yaml" > "$out/plan-$s.txt" || true
	"$gpumem" plan "$data/$s.yaml" --format json > "$out/plan-$s.json" ||
		true
done
"$gpumem" fit "$data/gpt2-a100.yaml" --gpu h200 \
	--gpu 'NVIDIA A100-SXM4-40GB' --gpu 'NVIDIA L4' --global-batch 512 \
	> "$out/fit-gpt2.txt"
"$gpumem" fit "$data/gpt2-a100.yaml" --gpu h200 --gpu 'NVIDIA H200' \
	--gpu 'NVIDIA RTX PRO 6000 Blackwell Workstation Edition' \
	--format json > "$out/fit-gpt2-dup.json"
"$gpumem" fit "$data/gpt2-a100.yaml" --gpu 'NVIDIA A100-SXM4-80GB MIG 3g.40gb' \
	--gpu a100-80gb:1g.10gb --gpu h100:3g.40gb --gpu h200:1g.18gb \
	--global-batch 512 > "$out/fit-mig.txt"
"$gpumem" fit "$data/gpt2-a100.yaml" --gpu h100 --gpu l4 --global-batch 512 \
	--fraction 0.9 > "$out/fit-fraction.txt"
"$gpumem" fit "$data/gpt2-a100.yaml" --gpu h200 --gpu l4 --global-batch 8 \
	> "$out/fit-batch-bound.txt"
"$gpumem" plan "$root/tests/data/calibration/specs/llama-1.1b-bf16mixed-adamw.yaml" \
	--gpu 'NVIDIA H100 80GB HBM3' --limit 39862665216 \
	> "$out/plan-llama-1.1b-cap38016m.txt" || true
"$gpumem" fit "$root/models/gpt2-large.yaml" --gpu 'NVIDIA H200 MIG 1g.18gb' \
	--gpu l4 --gpu h100 > "$out/fit-change.txt"
"$gpumem" fit "$root/models/gpt3-175b-finetune.yaml" --gpu a100-40gb \
	--format json > "$out/fit-change-zero3.json" || true
"$gpumem" fit "$root/models/llama-3-70b.yaml" --gpu 'Tesla P4' \
	> "$out/fit-change-none.txt" || true
"$gpumem" fit "$root/models/llama-3-8b.yaml" --set task=inference \
	--set inference.batch_size=16 --set inference.prompt_length=4096 \
	--set inference.generate_length=1024 --gpu rtx-4090 \
	> "$out/fit-infer-train-spec.txt" 2>/dev/null
for f in txt json; do
	"$gpumem" fit "$root/models/llama-2-7b.yaml" \
		--set parallelism.data_parallel=1 --set parallelism.zero_stage=0 \
		--gpu a100-80gb --format "$( [ $f = txt ] && echo table || echo json)" \
		> "$out/fit-min-gpus-none.$f" || true
done
# the source tree's path as check_cli.py writes it
sed -i "s|$root|<ROOT>|g" "$out"/fit-*.json "$out"/fit-*.txt
"$gpumem" plan --help > "$out/plan-help.txt"
"$gpumem" gpus --format csv > "$out/gpus.csv"
# Every bundled spec, as JSON (tests/golden/models/).
for f in "$root"/models/*.yaml; do
	n=$(basename "$f" .yaml)
	[ "$n" = gpus ] && continue
	"$gpumem" plan "$f" --format json > "$out/models/$n.json" || true
done
