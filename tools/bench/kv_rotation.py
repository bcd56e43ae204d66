#!/usr/bin/env python3
"""Check the steady pattern of a generation's KV cache on the large pool
(tools/bench/results/planner-cpu.md, 2026-12-02 long generation) against
the replay: from a pool snapshot taken before the first cache allocation
of decode step K0, predict every later cache allocation of that pass with
the O(1) rule below and compare the reserved change of each with the
replay's trace.

Usage: kv_rotation.py SNAPSHOT.json TRACE.csv LAYERS K0 PROMPT BYTES_PER_POS

SNAPSHOT.json: gm_pool_snapshot() of the replay's pool there, as
gm_emit(..., GM_FORMAT_JSON) writes it (no option of gpumem takes one: a
throw-away hook in planner/step.c rp_alloc wrote it before the
(2 x LAYERS x K0)-th cache allocation). TRACE.csv: `gpumem plan --trace`
of the same run. BYTES_PER_POS: one layer's key (= value) tensor per
position: batch x kv width x dtype bytes.

The rule (PyTorch's large pool: best fit by size, a block split when more
than 1 MiB is left, a new segment of get_allocation_size otherwise), valid
while (I) at every allocation at most one free large block fits the
request and it is a whole free segment, and (II) every cache tensor is the
only allocated block of its segment: the new tensor takes that segment at
offset 0, or a new segment is made; freeing its predecessor frees the
predecessor's whole segment. Prints the first allocations where (I)
fails and whether every predicted reserved change equals the trace's.
"""
import json
import sys

MIB = 1 << 20


def segment(size):
    size = (size + 511) // 512 * 512
    if size <= MIB:
        return 2 * MIB
    if size < 10 * MIB:
        return 20 * MIB
    return (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


def trace_kv(path):
    """(address, reserved change) of each cache allocation of pass 1."""
    out, prev, last = [], 0, None
    with open(path) as f:
        for line in f:
            if line.startswith("#") or line.startswith("Thread"):
                continue
            t = line.rstrip("\n").split(",")
            res = int(t[8])
            if t[7] == "inference/kv" and t[2] == "allocate":
                size = int(t[4])
                if last is not None and size < last:
                    break  # the next pass's prefill
                out.append((int(t[3], 16), res - prev))
                last = size
            prev = res
    return out


def main():
    snap, trace = sys.argv[1], sys.argv[2]
    layers, k0, prompt, per_pos = (int(x) for x in sys.argv[3:7])
    per = 2 * layers
    kv = trace_kv(trace)
    at = [kv[(k0 - 1) * per + i][0] for i in range(per)]
    segs, seg_of = {}, {}
    for g in json.load(open(snap))["segments"]:
        if g["pool"] == "small":
            continue
        bl = g["blocks"]
        whole_free = len(bl) == 1 and bl[0]["state"] == "inactive"
        held = [b for b in bl if b["state"] != "inactive"]
        segs[g["address"]] = [g["total_size_bytes"],
                              None if whole_free else "other"]
        for b in held:
            if b["address"] in at:
                i = at.index(b["address"])
                if b["address"] != g["address"] or len(held) != 1:
                    sys.exit("tensor %d is not alone at its segment's "
                             "start: (II) fails at K0" % i)
                segs[g["address"]][1] = i
                seg_of[i] = g["address"]
    block = {}
    pred, fails, new = [], 0, 0
    steps = len(kv) // per
    for k in range(k0, steps):
        s = (prompt + k) * per_pos
        for i in range(per):
            free = [a for a, (z, h) in segs.items() if h is None and z >= s]
            tails = [a for a, (z, h) in segs.items()
                     if isinstance(h, int) and h in block and
                     z - block[h] >= s]
            if len(free) > 1 or tails:
                fails += 1
                if fails <= 4:
                    print("(I) fails: step %d tensor %d" % (k, i))
            if free:
                a, inc = free[0], 0
            else:
                a, inc = ("new", new), segment(s)
                new += 1
                segs[a] = [inc, None]
            z = segs[a][0]
            segs[a][1] = i
            block[i] = s if z - s > MIB else z
            if i in seg_of:
                segs[seg_of[i]][1] = None
            seg_of[i] = a
            pred.append(inc)
    obs = [d for _, d in kv[k0 * per:]]
    bad = [j for j, (p, o) in enumerate(zip(pred, obs)) if p != o]
    print("%d allocations from step %d: %s; (I) failed %d times; "
          "predicted growth %.1f MiB, replay %.1f MiB" %
          (len(pred), k0, "all equal" if not bad and len(pred) == len(obs)
           else "first differing at step %d" % (k0 + bad[0] // per)
           if bad else "lengths differ", fails, sum(pred) / MIB,
           sum(obs) / MIB))


if __name__ == "__main__":
    main()
