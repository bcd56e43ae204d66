#!/usr/bin/env bash
# Suite gpu: gpumem verify on device 0 (clean --quick pass) and a VMM
# fake (16 GiB of addresses over 6 GiB of memory: caught, real 6 GiB).
# Exit 77 (skip) without a driver or a device. $1 = the gpumem program.
gpumem="$1"
err=$(mktemp)
out=$("$gpumem" verify --device 0 --quick --no-progress --format json \
	2>"$err")
rc=$?
if [ $rc -eq 3 ] && grep -qE "cannot load the NVIDIA driver|no CUDA device|built without nvcc" "$err"; then
	cat "$err"; rm -f "$err"; exit 77
fi
cat "$err"; rm -f "$err"
echo "$out" | grep -q '"verdict": "ok"' || { echo "$out"; exit 1; }
[ $rc -eq 0 ] || exit 1
out=$("$gpumem" verify --device 0 --quick --no-progress --format json \
	--emulate-vmm claimed=16GiB,real=6GiB)
rc=$?
echo "$out" | grep -E '"(verdict|real_bytes|alias_stride_bytes)"'
[ $rc -eq 1 ] || exit 1
echo "$out" | grep -q '"verdict": "undersized"' || exit 1
echo "$out" | grep -q '"real_bytes": 6442450944' || exit 1
exit 0
