#!/usr/bin/env bash
# Build one libFuzzer target with clang and run it for SECONDS (default
# 20) from its seed corpus (tests/fuzz/corpus/TARGET). Targets: trace
# (the trace reader and the engine), spec (spec load -> plan), catalog
# (--catalog reader), report (gpumem report's reader and merge). Exit 77
# (skip) when clang or libFuzzer is missing; 1 when the fuzzer finds a
# crash, leak, timeout or abort (the input is left in BUILD_DIR/TARGET).
# Usage: tests/fuzz/run.sh [SECONDS] [BUILD_DIR] [TARGET]
set -u
cd "$(dirname "$0")/../.."
secs=${1:-20}
out=${2:-build-fuzz}/${3:-trace}
target=${3:-trace}
command -v clang >/dev/null || { echo "no clang: skipped"; exit 77; }
mkdir -p "$out/corpus"
printf 'int LLVMFuzzerTestOneInput(const char *d, unsigned long n)\n{ return 0; }\n' \
	>"$out/probe.c"
clang -fsanitize=fuzzer "$out/probe.c" -o "$out/probe" 2>/dev/null ||
	{ echo "no libFuzzer: skipped"; exit 77; }

base="allocator/base/error.c allocator/base/units.c allocator/base/text.c
      allocator/base/log.c allocator/base/emit.c"
yaml="allocator/base/yaml_check.c"
catalog="allocator/catalog/catalog.c allocator/catalog/catalog_report.c"
core="allocator/core/tree.c allocator/core/pool.c allocator/core/sim.c
      allocator/core/trace.c allocator/core/trace_torch.c"
# every planner source, the per-family and per-recipe folders included
planner=$(ls planner/*.c planner/*/*.c 2>/dev/null | tr '\n' ' ')
# planner/report.h and allocator/preload/report.h share a name: the
# preload directory only for the report target.
inc="-Iallocator/base -Iallocator/core -Iallocator/seam -Iallocator/catalog"
[ "$target" = report ] && inc="$inc -Iallocator/preload" || inc="$inc -Iplanner"
cflags="-std=c11 -D_GNU_SOURCE -g -O1 -Werror=implicit-function-declaration
	-Werror=int-conversion $inc"
libs="-lyaml -lz -lpthread -lm"

# The spec and catalog targets link the built-in catalog: generate its
# table from models/gpus.yaml as the build does (gen_catalog, without
# sanitizers).
if [ "$target" = spec ] || [ "$target" = catalog ]; then
	# shellcheck disable=SC2086
	clang $cflags allocator/catalog/gen_catalog.c \
		allocator/catalog/catalog_yaml.c $catalog $base $yaml $libs \
		-o "$out/gen_catalog" &&
		"$out/gen_catalog" models/gpus.yaml "$out/catalog_table.c" ||
		{ echo "cannot generate the catalog table"; exit 1; }
fi
case "$target" in
trace) srcs="tests/fuzz/fuzz_trace.c $core $base"; max=4096 ;;
spec) srcs="tests/fuzz/fuzz_spec.c $planner $core $catalog
	    $out/catalog_table.c $base $yaml"; max=4096 ;;
catalog) srcs="tests/fuzz/fuzz_catalog.c allocator/catalog/catalog_yaml.c
	       $catalog $out/catalog_table.c $base $yaml"; max=8192 ;;
report) srcs="tests/fuzz/fuzz_report.c allocator/preload/merge.c $base
	      $yaml"; max=4096 ;;
*) echo "unknown fuzz target '$target'"; exit 2 ;;
esac
# shellcheck disable=SC2086
clang $cflags -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=undefined $srcs $libs \
	-o "$out/fuzz_$target" || { echo "fuzz_$target does not build"; exit 1; }
cp "tests/fuzz/corpus/$target/"* "$out/corpus/"
cd "$out" || exit 1
exec "./fuzz_$target" -max_total_time="$secs" -rss_limit_mb=2048 \
	-timeout=20 -max_len="$max" -print_final_stats=1 corpus
