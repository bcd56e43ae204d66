#!/usr/bin/env python3
"""vaddr.py - where does cudaMalloc put segments? Candidate rules tested
against the recorded traces (tracefile.py).

    vaddr.py TRACE_DIR [--verbose]
    vaddr.py TRACE_DIR --process MEASURED.json

Every committed trace records, for each segment_alloc, the address the
driver gave PyTorch's cudaMalloc, and in its header the segments live at
the start (the weights). PyTorch breaks best-fit ties between equal free
blocks by address, so what a replay needs is the ORDER of segments in
the address space. For each rule below, each trace's segment sequence
(initial segments first, in address order, then each segment_alloc and
segment_free in trace order) is placed by the rule from an empty
address space, and compared with the real addresses:

  order    share of pairs of segment_allocs of the SAME size whose
           relative order (lower / higher address) the rule predicts
           (the pairs between which best fit breaks ties);
  exact    share of segment_allocs whose offset from the first new
           segment of the trace the rule predicts exactly (rules
           started from the real initial layout, "anchored" below).

Rules:
  rising   a bump pointer, 2 MiB aligned (the simulated card before).
  falling  each segment below the previous one, start aligned down to
           32 MiB; never reuses a hole.
  driver   a VA heap: free holes are searched first, lowest address
           first, for a 2 MiB-aligned fit (the tails of chunks and the
           room that freed segments leave); when none fits, a new chunk
           of the size rounded up to 32 MiB is cut below the lowest
           chunk so far and the segment placed at its bottom, the rest
           of the chunk becoming a hole.
  driver-anchored  the same heap, but started from the trace's real
           initial segments (each occupying its 32 MiB-aligned chunks;
           the room between them, down to the lowest, is holes), so
           its first new chunk lands where the device's would if
           nothing outside PyTorch had taken addresses.

--process replays the driver rule over the whole measuring process
instead (process(): the configurations in MEASURED.json's order, each
freed at its end), reporting per trace the order score and how many
segment_allocs sit at the most common offset from the real address.

Standard library only. Results: tools/bench/results/alloc-emulation.md.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracefile  # noqa: E402

MiB = 1 << 20
SUFFIX = ".trace.jsonl.gz"
TOP = 1 << 47


def up(x, a):
    return (x + a - 1) // a * a


def down(x, a):
    return x // a * a


class Rising:
    def __init__(self):
        self.next = 1 << 40

    def alloc(self, size):
        a = up(self.next, 2 * MiB)
        self.next = a + size
        return a

    def free(self, addr, size):
        pass


class Falling:
    def __init__(self):
        self.low = TOP

    def alloc(self, size):
        self.low = down(self.low - size, 32 * MiB)
        return self.low

    def free(self, addr, size):
        pass


class Driver:
    """First-fit-lowest holes, else a new chunk of size rounded up to
    chunk bytes below the lowest chunk; frees make holes."""

    def __init__(self, chunk=32 * MiB, gran=2 * MiB):
        self.low = TOP
        self.holes = []  # sorted [start, end)
        self.chunk, self.gran = chunk, gran

    def _take(self, i, a, size):
        s, e = self.holes[i]
        parts = [(s, a)] if a > s else []
        if a + size < e:
            parts.append((a + size, e))
        self.holes[i:i + 1] = parts

    def alloc(self, size):
        size = up(size, self.gran)
        for i, (s, e) in enumerate(self.holes):
            a = up(s, self.gran)
            if a + size <= e:
                self._take(i, a, size)
                return a
        c = up(size, self.chunk)
        self.low -= c
        if c > size:
            self.free(self.low + size, c - size)
        return self.low

    def free(self, addr, size):
        s, e = addr, addr + up(size, self.gran)
        h = sorted(self.holes + [(s, e)])
        out = []
        for s, e in h:
            if out and s <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], e))
            else:
                out.append((s, e))
        self.holes = out

    def anchor(self, segments):
        """Start from the real initial segments: they occupy their
        chunks; everything between the lowest chunk and the highest
        segment end that they leave free is a hole."""
        if not segments:
            return
        lo = down(min(a for a, _ in segments), self.chunk)
        hi = up(max(a + s for a, s in segments), self.chunk)
        self.low = lo
        self.holes = [(lo, hi)]
        for a, s in sorted(segments):
            for i, (hs, he) in enumerate(self.holes):
                if hs <= a < he:
                    self._take(i, a, min(up(s, self.gran), he - a))
                    break


def sequence(path):
    """(initial segments, [(op, addr, size)...]) of a trace."""
    head, entries = tracefile.read(path)
    ops = [(e[0], e[1], e[2]) for e in entries
           if e[0] in ("segment_alloc", "segment_free")]
    return head.get("segments") or [], ops


def place(rule, init, ops, anchored):
    """Predicted address of each op under rule (None for frees)."""
    live = {}
    if anchored:
        rule.anchor(init)
        for a, s in init:
            live[a] = a
    else:
        for a, s in sorted(init):
            live[a] = rule.alloc(s)
    out = []
    for op, a, s in ops:
        if op == "segment_alloc":
            live[a] = rule.alloc(s)
            out.append(live[a])
        else:
            if a in live:
                rule.free(live.pop(a), s)
            out.append(None)
    return out


def score(ops, pred):
    """(same-size pairs in order, pairs, exact offsets, allocs)."""
    al = [(a, s, p) for (op, a, s), p in zip(ops, pred)
          if op == "segment_alloc"]
    by = {}
    for a, s, p in al:
        by.setdefault(s, []).append((a, p))
    good = pairs = 0
    for v in by.values():
        for i in range(len(v)):
            for j in range(i + 1, len(v)):
                pairs += 1
                good += (v[i][0] < v[j][0]) == (v[i][1] < v[j][1])
    exact = 0
    if al:
        a0, p0 = al[0][0], al[0][2]
        exact = sum(a - a0 == p - p0 for a, _, p in al)
    return good, pairs, exact, len(al)


RULES = {
    "rising": (Rising, False),
    "falling": (Falling, False),
    "driver": (Driver, False),
    "driver-anchored": (Driver, True),
}


def process(d, order):
    """The driver rule over the whole measuring process: the traces in
    the order they were measured (one process), each one's initial
    segments first (in address order: the weights were seen to be built
    upwards), then its segment_allocs and segment_frees, then all of
    its segments freed (the harness empties the cache between
    configurations). Per trace: (same-size pairs in order, pairs,
    segment_allocs at the modal offset from the real address, allocs,
    the modal offset)."""
    rule = Driver()
    out = {}
    for n in order:
        path = os.path.join(d, n + SUFFIX)
        if not os.path.exists(path):
            continue
        init, ops = sequence(path)
        live = {}  # real address -> (predicted, size)
        for a, s in sorted(init):
            live[a] = (rule.alloc(s), s)
        pred = []
        for op, a, s in ops:
            if op == "segment_alloc":
                live[a] = (rule.alloc(s), s)
                pred.append(live[a][0])
            else:
                q = live.pop(a, None)
                if q:
                    rule.free(*q)
                pred.append(None)
        for q, s in live.values():
            rule.free(q, s)
        g, p, _, k = score(ops, pred)
        diffs = {}
        for (op, a, _), q in zip(ops, pred):
            if op == "segment_alloc":
                diffs[a - q] = diffs.get(a - q, 0) + 1
        off, hit = max(diffs.items(), key=lambda x: x[1]) if diffs \
            else (0, 0)
        out[n] = (g, p, hit, k, off)
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    d = argv[1]
    verbose = "--verbose" in argv
    if "--process" in argv:
        import json
        meas = argv[argv.index("--process") + 1]
        order = [c["name"] for c in json.load(open(meas))["configs"]]
        res = process(d, order)
        t = [0, 0, 0, 0]
        print("| trace | segs | order | at the modal offset |")
        print("| --- | ---: | ---: | ---: |")
        for n in order:
            if n not in res:
                continue
            g, p, h, k, _ = res[n]
            t = [t[0] + g, t[1] + p, t[2] + h, t[3] + k]
            print(f"| {n} | {k} | {g / p:.0%} | {h} |" if p else
                  f"| {n} | {k} | - | {h} |")
        print(f"| all | {t[3]} | {t[0] / t[1]:.1%} | {t[2] / t[3]:.1%} |")
        return 0
    names = sorted(f[:-len(SUFFIX)] for f in os.listdir(d)
                   if f.endswith(SUFFIX))
    tot = {r: [0, 0, 0, 0] for r in RULES}
    print("| trace | segs | " + " | ".join(
        f"{r} order / exact" for r in RULES) + " |")
    print("| --- | ---: |" + " ---: |" * len(RULES))
    for n in names:
        init, ops = sequence(os.path.join(d, n + SUFFIX))
        row = []
        for r, (cls, anch) in RULES.items():
            g, p, e, k = score(ops, place(cls(), init, ops, anch))
            for i, x in enumerate((g, p, e, k)):
                tot[r][i] += x
            row.append(f"{g / p:.0%} / {e}" if p else f"- / {e}")
        print(f"| {n} | {k} | " + " | ".join(row) + " |")
        if verbose:
            pred = place(Driver(), init, ops, True)
            for (op, a, s), q in zip(ops, pred):
                print(f"    {op[8:]:5} {s / MiB:8.1f} MiB real {a:#x}"
                      f" driver {q if q is None else hex(q)}"
                      f"{'' if q == a else '  *'}")
    print("| all | | " + " | ".join(
        f"{t[0] / t[1]:.1%} / {t[2] / t[3]:.1%}" for t in tot.values())
        + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
