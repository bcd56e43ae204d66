#!/usr/bin/env python3
"""trace_compare - a measured allocation trace against the planner's.

    trace_compare.py NAME [--gpumem build/tools/gpumem/gpumem]
                          [--big MiB] [--step N] [--sequence]
                          [--trace-file PATH] [--spec PATH]

NAME is a calibration configuration (tests/data/calibration/specs/NAME.yaml
and traces/NAME.trace.jsonl.gz, see tracefile.py); a multi-GPU
configuration's rank trace is named with --trace-file (e.g.
traces/multi/NAME.rank1.trace.jsonl.gz) and its spec found under
multi/specs/ (or named with --spec). The planner's sequence
comes from `gpumem plan SPEC --trace` (its Step and Tag columns). Both are
cut into phases per step: setup (the weights), forward, loss, backward
(recomputation under checkpointing included), optimizer. The measured
trace's phases follow the allocating Python frames: a step begins at the
harness's input ids; loss_utils / cross_entropy frames open the loss;
allocations without Python frames (autograd's engine) the backward;
torch/optim and GradScaler frames the optimizer step; an embedding's
output after a backward begins a step too (an optimizer on the host).

For each step and phase it prints, measured vs planned: allocations (all
and those of at least --big MiB, default 1), bytes requested, live bytes
at the phase's end and their peak inside it, and the segments created
(measured: segment_alloc entries; planned: rises of the replay's
reserved bytes); then the sizes of the big allocations whose counts
differ. --sequence prints the big allocations of one step (--step, default
2) side by side in order.

Standard library only.
"""
import argparse
import collections
import csv
import gzip
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tracefile  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
CAL = os.path.join(ROOT, "tests", "data", "calibration")
PHASES = ("setup", "forward", "loss", "backward", "optimizer", "inference")
OPT_FILES = ("adam.py", "adamw.py", "sgd.py", "optimizer.py",
             "grad_scaler.py", "adafactor.py")
LOSS_MARKS = ("loss_utils.py", "functional.py:cross_entropy",
              "loss.py:forward")
EMBED_MARK = "functional.py:embedding"
MiB = 2 ** 20


class Event:
    __slots__ = ("alloc", "addr", "size", "step", "phase", "tag",
                 "seg")

    def __init__(self, alloc, addr, size, step, phase, tag, seg=0):
        self.alloc, self.addr, self.size = alloc, addr, size
        self.step, self.phase, self.tag, self.seg = step, phase, tag, seg


def real_events(path):
    """Events of a measured trace, with step and phase from the frames."""
    head, entries = tracefile.read(path)
    out = [Event(True, a, s, 0, "setup", "initial")
           for a, s in head["initial"]]
    step, ph = 0, "setup"
    pending_seg = 0
    for act, addr, size, _stream, tag in entries:
        if act == "segment_alloc" or act == "segment_map":
            pending_seg += size
            continue
        if act == "alloc":
            is_opt = any(tag.startswith(f) or ("<" + f) in tag
                         for f in OPT_FILES)
            if tag and not is_opt and (ph in ("setup", "optimizer") or (
                    ph == "backward" and EMBED_MARK in tag)):
                # (the embedding's output after a backward: a step whose
                # optimizer ran on the host, DeepSpeed's offload)
                step += 1
                ph = "forward"
            elif any(m in tag for m in LOSS_MARKS) and ph == "forward":
                ph = "loss"
            elif is_opt:
                ph = "optimizer"
            elif (not tag or "_make_grads" in tag) and ph in ("loss",
                                                             "forward"):
                ph = "backward"
            out.append(Event(True, addr, size, step, ph, tag,
                             pending_seg))
            pending_seg = 0
        elif act == "free_completed":
            out.append(Event(False, addr, size, step, ph, ""))
    return out


def plan_events(gpumem, spec, sets=()):
    """Events of the planner's replay (gpumem plan --trace)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.csv")
        cmd = [gpumem, "plan", spec, "--format", "json", "--trace", path]
        for s in sets:
            cmd += ["--set", s]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode not in (0, 1):
            sys.exit(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr}")
        out, res = [], 0
        with open(path, newline="") as f:
            # the "# gpumem-replay:" options line comes before the header
            for row in csv.DictReader(ln for ln in f
                                      if not ln.startswith("#")):
                ph, _, kind = row["Tag"].partition("/")
                rz = int(row["Reserved"])
                alloc = row["Action"] == "allocate"
                step = int(row["Step"])
                if ph == "teardown":
                    continue
                out.append(Event(alloc, int(row["Pointer"], 16),
                                 int(row["Size"]), step, ph, kind,
                                 max(0, rz - res) if alloc else 0))
                res = rz
    return out


def phase_stats(events, big):
    """{(step, phase): stats} in order of appearance."""
    st = collections.OrderedDict()
    live, sizes = 0, {}
    for e in events:
        k = (e.step, e.phase)
        s = st.get(k)
        if s is None:
            s = st[k] = {"n": 0, "nbig": 0, "bytes": 0, "peak": live,
                         "end": live, "seg_n": 0, "seg_b": 0,
                         "big": collections.Counter()}
        if e.alloc:
            live += e.size
            sizes[e.addr] = e.size
            s["n"] += 1
            s["bytes"] += e.size
            if e.size >= big:
                s["nbig"] += 1
                s["big"][e.size] += 1
            if e.seg:
                s["seg_n"] += 1
                s["seg_b"] += e.seg
        else:
            live -= sizes.pop(e.addr, e.size)
        s["peak"] = max(s["peak"], live)
        s["end"] = live
    return st


def gib(n):
    return f"{n / 2**30:7.2f}"


def sequence(real, plan, step, big):
    a = [e for e in real if e.alloc and e.step == step and e.size >= big]
    b = [e for e in plan if e.alloc and e.step == step and e.size >= big]
    print(f"\nstep {step}: allocations >= {big / MiB:g} MiB in order "
          f"(measured {len(a)}, planned {len(b)})")
    for i in range(max(len(a), len(b))):
        x = a[i] if i < len(a) else None
        y = b[i] if i < len(b) else None
        print(f"{i:5d} " +
              (f"{x.phase[:4]} {x.size / MiB:10.3f} {x.tag[:60]:60s}"
               if x else " " * 77) + " | " +
              (f"{y.phase[:4]} {y.size / MiB:10.3f} {y.tag}" if y else ""))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("name")
    ap.add_argument("--gpumem", default=os.path.join(
        ROOT, "build", "tools", "gpumem", "gpumem"))
    ap.add_argument("--big", type=float, default=1.0)
    ap.add_argument("--step", type=int, default=2)
    ap.add_argument("--sequence", action="store_true")
    ap.add_argument("--trace-file", metavar="PATH")
    ap.add_argument("--spec", metavar="PATH")
    a = ap.parse_args()
    big = int(a.big * MiB)
    spec = a.spec or os.path.join(CAL, "specs", a.name + ".yaml")
    if not a.spec and not os.path.exists(spec):
        spec = os.path.join(CAL, "multi", "specs", a.name + ".yaml")
    real = real_events(a.trace_file or os.path.join(
        CAL, "traces", a.name + ".trace.jsonl.gz"))
    plan = plan_events(a.gpumem, spec)
    rs, ps = phase_stats(real, big), phase_stats(plan, big)
    print(f"{a.name}: GiB; n = allocations, big = those >= {a.big:g} MiB;"
          " seg = segments created (count, GiB)")
    print(f"{'step phase':18s} | {'measured n/big  bytes   end   peak  seg':42s}"
          f" | planned n/big  bytes   end   peak  seg")
    keys = list(rs.keys()) + [k for k in ps if k not in rs]
    for k in keys:
        cells = []
        for st in (rs, ps):
            s = st.get(k)
            cells.append(
                f"{s['n']:5d}/{s['nbig']:4d}{gib(s['bytes'])}{gib(s['end'])}"
                f"{gib(s['peak'])} {s['seg_n']:3d}{gib(s['seg_b'])}"
                if s else " " * 45)
        print(f"{k[0]:2d} {k[1]:15s} | " + " | ".join(cells))
    for k in keys:
        r = rs.get(k, {}).get("big", collections.Counter())
        p = ps.get(k, {}).get("big", collections.Counter())
        diff = [(sz, r[sz], p[sz]) for sz in sorted(set(r) | set(p),
                                                     reverse=True)
                if r[sz] != p[sz]]
        if not diff:
            continue
        print(f"\nstep {k[0]} {k[1]}: big sizes with different counts "
              "(MiB: measured vs planned)")
        print("  " + "; ".join(f"{sz / MiB:.3f}: {x} vs {y}"
                               for sz, x, y in diff[:24]) +
              (" ..." if len(diff) > 24 else ""))
    for name, ev in (("measured", real), ("planned", plan)):
        live = peak = 0
        sizes = {}
        for e in ev:
            if e.alloc:
                live += e.size
                sizes[e.addr] = e.size
            else:
                live -= sizes.pop(e.addr, e.size)
            peak = max(peak, live)
        segs = sum(e.seg for e in ev)
        print(f"{name}: peak live {gib(peak)} GiB, segments "
              f"{gib(segs)} GiB")
    if a.sequence:
        sequence(real, plan, a.step, big)
    return 0


if __name__ == "__main__":
    sys.exit(main())
