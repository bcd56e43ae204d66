#!/bin/sh
# check_refs.sh SRC_DIR: fail when a comment, a doc or a data file in the
# source tree points outside the repository: an issue number, this
# project's (the word issue and a number, or a bare hash and a number) or
# a public project's (owner/repo, a hash and a number, or an issues/ or
# pull/ address): cite the source the thread names, a framework's file at
# a version or a measurement file instead; files that are not in the
# repository (notes kept beside it, an absolute /work path), or the notes'
# own words for an unattributed search ("code index"). Prints every
# offending line; exit 1 if any.
set -u
src=${1:-.}
cd "$src" || exit 2

# Files the check reads: sources, scripts, build files, docs and data,
# without build trees, the git directory and the recorded traces.
files() {
	find . \( -name .git -o -name 'build*' -o -path ./tests/data/calibration/traces \
		-o -name __pycache__ \) -prune -o -type f \
		\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cc' -o -name '*.cpp' \
		-o -name '*.py' -o -name '*.sh' -o -name '*.md' -o -name '*.build' \
		-o -name '*.yaml' -o -name '*.json' -o -name '*.txt' -o -name '*.csv' \
		-o -path ./.ci/run \) -print |
		grep -v -F -x -f "$src_skip" | sort
}

src_skip=$(mktemp)
trap 'rm -f "$src_skip"' EXIT
# This script names the patterns it looks for.
printf '%s\n' ./tests/docs/check_refs.sh >"$src_skip"

pattern='[Ii]ssues?[ -]#?[0-9]+|(^|[[:space:]([,;])#[0-9]+([^0-9A-Za-z_]|$)'
pattern="$pattern"'|[A-Za-z0-9_.-]#[0-9]+|/(issues|pull|discussions)/[0-9]+'
pattern="$pattern"'|shared/reference|INTERFACES\.md|/work/|research notes|code index|findings-[a-z]'
pattern="$pattern"'|(^|[^A-Za-z0-9_/.-])(device-probe|vram|allocators|planners|aesthetics)\.md'

hits=$(files | tr '\n' '\0' | xargs -0 grep -n -E -I -- "$pattern" 2>/dev/null)
if [ -n "$hits" ]; then
	printf '%s\n' "$hits"
	echo "check_refs: $(printf '%s\n' "$hits" | wc -l) line(s) point outside the repository" >&2
	exit 1
fi
echo "check_refs: no reference outside the repository"
