#!/usr/bin/env bash
# run-alloc-train.sh BUILD_DIR OUT_DIR - PyTorch's caching allocator
# against gpumem's pool on real runs, one GPU, in one call.
#
# Three runs a user starts (a ~1B Llama bf16-mixed, GPT-2 fp16-mixed with
# GradScaler, a ~1B Llama generate()) under four allocators: PyTorch
# native, native with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True,
# and gpumem's pool through torch.cuda.memory.CUDAPluggableAllocator
# (BUILD_DIR/allocator/preload/libgpumem-torch.so, GPUMEM_MODE=cache) with
# plain and with virtual segments (expandable_segments:True, which the
# pool reads). ALLOC_TRAIN_ROUNDS (3) rounds, each (run, allocator) its
# own process, the allocators' order rotated each round; per process
# the step times, peak reserved / allocated, device used after every step
# and NVML's figure (tests/gpu/alloc_train.py says how each is read).
# ALLOC_TRAIN_TOTAL_S (520) stops starting runs; a second call with the
# same OUT_DIR runs only what is missing (parts that ended ok or oom are
# kept). Writes OUT_DIR/alloc-train-results.json and .md (commit them as
# tools/bench/results/alloc-train-h200.json and .md) and OUT_DIR/parts/
# (one record, log and gpumem report per run). Exit 77 without a GPU;
# 1 when a run failed or the budget ran out. About 7-8 minutes on one
# H200 (36 processes of 8-20 s).
set -u
B=$(realpath "${1:?usage: run-alloc-train.sh BUILD_DIR OUT_DIR}")
OUT=$(mkdir -p "${2:?out dir}" && realpath "$2")
HERE=$(dirname "$(realpath "$0")")
if ! python3 -c 'import torch; assert torch.cuda.is_available()' 2>/dev/null; then
	echo "run-alloc-train.sh: needs a CUDA GPU and torch (skipped)"
	exit 77
fi
[ -f "$B/allocator/preload/libgpumem-torch.so" ] || {
	echo "run-alloc-train.sh: no $B/allocator/preload/libgpumem-torch.so"
	exit 1
}
# NVLink multicast stays off on shared machines (device notes).
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
timeout -k 5 "${ALLOC_TRAIN_TIMEOUT_S:-590}" python3 "$HERE/alloc_train.py" \
	drive --build "$B" --out "$OUT" --rounds "${ALLOC_TRAIN_ROUNDS:-3}" \
	--total-s "${ALLOC_TRAIN_TOTAL_S:-520}" 2>&1 | tee -a "$OUT/drive.log"
rc=${PIPESTATUS[0]}
cat "$OUT/alloc-train-results.md" 2>/dev/null
echo "run-alloc-train.sh: exit $rc"
exit "$rc"
