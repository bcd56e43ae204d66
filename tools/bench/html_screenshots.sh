#!/usr/bin/env bash
# Regenerate the --html screenshots under tools/bench/results/ (linked
# from README.md and planner/README.md): each page is written by the
# command tests/html/check_html.py runs for its case (CASES there: spec,
# arguments, window size), rendered by headless Chromium, checked as in
# suite html, then rewritten as an indexed PNG (png_palette.py) so that
# the committed files stay small.
#   html-plan-1gpu.png      gpumem plan models/llama-2-7b.yaml --html F
#   html-plan-pipeline.png  gpumem plan tests/data/plan/llama-2-13b-v100-pp.yaml --html F
#   html-plan-nofit.png     gpumem plan models/qwen2.5-7b.yaml --gpu a100-80gb
#                             --set training.micro_batch_size=2
#                             --set training.global_batch_size=2
#                             --set training.activation_checkpointing=none
#                             --set parallelism.data_parallel=1
#                             --set parallelism.zero_stage=0 --html F
#   html-fit-catalog.png    gpumem fit models/gpt2.yaml --global-batch 512 --html F
# usage: tools/bench/html_screenshots.sh [BUILD]   (BUILD: build)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-build}
case $build in /*) ;; *) build=$root/$build ;; esac
gpumem=$build/tools/gpumem/gpumem
[ -x "$gpumem" ] || { echo "html_screenshots: no $gpumem (build first)" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for c in plan-1gpu plan-pipeline plan-nofit fit-catalog; do
	rc=0
	python3 "$root/tests/html/check_html.py" "$gpumem" "$root" "$c" \
		--save "$tmp/$c.png" || rc=$?
	if [ "$rc" = 77 ]; then
		echo "html_screenshots: no Chromium" >&2
		exit 2
	fi
	[ "$rc" = 0 ] || { echo "html_screenshots: $c failed its check" >&2; exit 1; }
	python3 "$root/tools/bench/png_palette.py" "$tmp/$c.png" \
		"$root/tools/bench/results/html-$c.png"
done
