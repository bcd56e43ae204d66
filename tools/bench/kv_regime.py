#!/usr/bin/env python3
"""Classify each KV-cache allocation of a generation replay by where the
caching allocator put it, from `gpumem plan SPEC --trace FILE` (the RMM
CSV the replay writes: Action, Pointer, Size, Tag, Reserved after the
call). Used to see whether the decode steps settle into a pattern that a
plan could compute instead of replaying every step
(tools/bench/results/planner-cpu.md, 2026-12-02 long generation).

Usage: kv_regime.py TRACE.csv LAYERS [STEPS_SHOWN]

One letter per `inference/kv` allocation (DynamicLayer.update's
torch.cat result, 2 x LAYERS a step, in the order they are made):
  H  at the address the last KV free released, reserved unchanged
  h  at an address one of the last 2 x LAYERS KV frees released
  N  reserved grew by exactly the segment PyTorch's get_allocation_size
     gives the request (c10/cuda/CUDACachingAllocator.cpp at torch
     2.11: up to 1 MiB a 2 MiB segment, below 10 MiB a 20 MiB one, else
     the size rounded up to 2 MiB)
  R  reserved fell: cached segments were released before a retry
  o  elsewhere (a block no KV tensor held last), reserved unchanged
  ?  reserved grew by something else
The trace holds every pass the replay makes; each pass is one prefill
plus its decode steps. Prints, per pass, the letters' counts and the
steps that are not all H, then STEPS_SHOWN (default 8) sample steps.
"""
import collections
import sys

MIB = 1 << 20


def segment(size):
    size = (size + 511) // 512 * 512
    if size <= MIB:
        return 2 * MIB
    if size < 10 * MIB:
        return 20 * MIB
    return (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


def classify(path, layers):
    per = 2 * layers
    out, recent, res_prev = [], [], 0
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("Thread"):
                continue
            t = line.rstrip("\n").split(",")
            act, ptr, size, tag, res = (t[2], int(t[3], 16), int(t[4]),
                                        t[7], int(t[8]))
            if tag == "inference/kv":
                if act == "allocate":
                    d = res - res_prev
                    if d == 0 and recent and ptr == recent[-1]:
                        k = "H"
                    elif d == 0 and ptr in recent:
                        k = "h"
                    elif d == 0:
                        k = "o"
                    elif d < 0:
                        k = "R"
                    elif d == segment(size):
                        k = "N"
                    else:
                        k = "?"
                    out.append((k, size))
                else:
                    recent = (recent + [ptr])[-per:]
            res_prev = res
    return out


def main():
    path, layers = sys.argv[1], int(sys.argv[2])
    shown = int(sys.argv[3]) if len(sys.argv) > 3 else 8
    per = 2 * layers
    ks = classify(path, layers)
    # a pass starts where the KV sizes fall back (the next prefill)
    starts = [0] + [i for i in range(1, len(ks))
                    if i % per == 0 and ks[i][1] < ks[i - 1][1]]
    bounds = starts + [len(ks)]
    for p in range(len(starts)):
        s = "".join(k for k, _ in ks[bounds[p]:bounds[p + 1]])
        steps = len(s) // per
        odd = [j for j in range(steps) if s[j * per:(j + 1) * per] !=
               "H" * per]
        last_odd = odd[-1] if odd else None
        print("pass %d: %d steps (step 0 = the prefill), %s" %
              (p + 1, steps, dict(collections.Counter(s))))
        print("  steps not all H: %d, the last %s; steps with N: %s" %
              (len(odd), last_odd,
               [j for j in range(steps) if "N" in s[j * per:(j + 1) * per]]
               [:12]))
        for j in sorted(set([0, 1, 2] + [steps * i // shown
                                         for i in range(shown)])):
            print("  step %5d %s" % (j, s[j * per:(j + 1) * per][:64]))


if __name__ == "__main__":
    main()
