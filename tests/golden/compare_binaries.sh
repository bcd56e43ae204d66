#!/usr/bin/env bash
# Compare two gpumem binaries byte for byte on every spec of the
# repository: `plan` (table, --format json, --reserve-model analytic;
# stdout, stderr and exit status), `plan --trace FILE` (the RMM CSV), `fit --format json` on
# tests/data/plan, and the bad-input specs' messages. For a change that must not
# move any figure (a refactor): no output means identical.
# usage: tests/golden/compare_binaries.sh OLD_GPUMEM NEW_GPUMEM
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
old=$(realpath "$1") new=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 bad=0
run() { # tag binary args... -> $tmp/tag.{out,err,rc}
	local tag=$1 bin=$2
	shift 2
	(cd "$tmp" && "$bin" "$@" >"$tmp/$tag.out" 2>"$tmp/$tag.err"
	 echo $? >"$tmp/$tag.rc")
	# the binary's own path and the trace's may appear in messages
	sed -i "s#$bin#gpumem#g" "$tmp/$tag.err"
}
same() { # label files...
	for f in out err rc; do
		if ! cmp -s "$tmp/a.$f" "$tmp/b.$f"; then
			echo "DIFFER ($f): $1"
			diff "$tmp/a.$f" "$tmp/b.$f" | head -5
			bad=$((bad + 1))
			return
		fi
	done
}
for spec in "$root"/models/*.yaml "$root"/tests/data/plan/*.yaml \
	"$root"/tests/data/calibration/specs/*.yaml \
	"$root"/tests/data/calibration/multi/specs/*.yaml; do
	[ "$(basename "$spec")" = gpus.yaml ] && continue
	n=$((n + 1))
	for fmt in table json; do
		run a "$old" plan "$spec" --format $fmt
		run b "$new" plan "$spec" --format $fmt
		same "plan $spec --format $fmt"
	done
	run a "$old" plan "$spec" --format json --reserve-model analytic
	run b "$new" plan "$spec" --format json --reserve-model analytic
	same "plan $spec --reserve-model analytic"
	run a "$old" plan "$spec" --format json --trace "$tmp/a.csv"
	run b "$new" plan "$spec" --format json --trace "$tmp/b.csv"
	same "plan $spec --trace"
	if ! cmp -s "$tmp/a.csv" "$tmp/b.csv"; then
		echo "DIFFER (trace): $spec"
		bad=$((bad + 1))
	fi
done
for spec in "$root"/tests/data/plan/*.yaml; do
	run a "$old" fit "$spec" --format json
	run b "$new" fit "$spec" --format json
	same "fit $spec"
done
for spec in "$root"/tests/data/bad/*.yaml; do
	run a "$old" plan "$spec"
	run b "$new" plan "$spec"
	same "plan $spec (bad input)"
done
echo "$n specs (plan table, json, analytic, --trace; fit on tests/data/plan) and" \
	"$(ls "$root"/tests/data/bad/*.yaml | wc -l) bad-input specs compared;" \
	"$bad differ"
[ "$bad" = 0 ]
