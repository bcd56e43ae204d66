#!/usr/bin/env bash
# Build the libFuzzer target with clang and run it for $1 seconds (default
# 20) from the seed corpus. Exit 77 (skip) when clang or libFuzzer is
# missing. Usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR]
set -u
cd "$(dirname "$0")/../.."
secs=${1:-20}
out=${2:-build-fuzz}
command -v clang >/dev/null || { echo "no clang: skipped"; exit 77; }
mkdir -p "$out/corpus"
clang -std=c11 -D_GNU_SOURCE -g -O1 -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined \
	-Iallocator/core -Iallocator/base -Iallocator/seam \
	tests/fuzz/fuzz_trace.c allocator/core/{tree,pool,sim,trace,trace_torch}.c \
	allocator/base/{error,units,text,log,emit}.c \
	-lz -lyaml -lpthread -lm -o "$out/fuzz_trace" || { echo "no libFuzzer: skipped"; exit 77; }
cp tests/fuzz/corpus/* "$out/corpus/"
exec "$out/fuzz_trace" -max_total_time="$secs" -rss_limit_mb=2048 \
	-max_len=4096 "$out/corpus"
