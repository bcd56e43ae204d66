#!/bin/sh
# make_private_jemalloc.sh OBJCOPY AR IN.a SYMS OUT.a
# Copy jemalloc's PIC archive with every public name renamed (SYMS: "old
# new" per line) so that the copy linked into gpumem can never be mistaken
# for the program's malloc. The C++ operator new/delete member is dropped:
# nothing in gpumem uses it and it would drag in libstdc++.
set -eu
objcopy=$1 ar=$2 in=$3 syms=$4 out=$5
tmp="$out.tmp"
rm -f "$tmp" "$out"
cp "$in" "$tmp"
"$ar" d "$tmp" jemalloc_cpp.pic.o 2>/dev/null || true
"$objcopy" --redefine-syms="$syms" "$tmp"
mv "$tmp" "$out"
