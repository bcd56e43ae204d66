#!/usr/bin/env python3
"""gen_growth.py - how generate()'s memory grows, forward by forward:
a measured allocation trace against the planner's replayed sequence.

    gen_growth.py NAME... [--set SET] [--gpumem build/tools/gpumem/gpumem]
                          [--every N] [--summary-only] [--check]

NAME is a calibration configuration of task inference with
generate_length > 0 (tests/data/calibration/specs/NAME.yaml, its H200
allocation trace traces/NAME.trace.jsonl.gz, see tracefile.py, and its
row of measured-h200.json). With --set SET (a pending set such as
pending/longgen) the three come from that set instead:
tests/data/calibration/SET/specs/NAME.yaml, the trace
traces/SET-with-dashes/NAME.trace.jsonl.gz (pending/longgen:
traces/pending-longgen/) and the row of SET/measured-h200.json. A
NAME written SET/NAME (pending/longgen/gen-llama-1.1b-b8-p2048-g512)
names its set itself, so one call can check both sets. The measured trace is cut into forwards at
the KV cache's torch.cat allocations (frames of transformers'
cache_utils.py update, 2 per layer and forward: DynamicLayer.update's
keys and values); the planner's sequence (`gpumem plan NAME.yaml --trace`)
at its inference/kv allocations, the same 2 per layer and forward. A
forward's window runs from its first cache cat to the next forward's, so
both sides are cut at the same point of the model's work. The planned
sequence's reserved bytes are those of `gpumem replay` on that trace (its
--segments list: the reserve after each new segment).

For each generate() call (the measurement makes 2 in one process, the
plan 2 passes) and forward (0 is the prefill, 1.. the decode steps) it
prints the peak allocated bytes inside the window and the reserved bytes
at its end, measured and planned, and the segments created in it; then
a summary: the peaks (measured, the replay of the planned trace, the
planner's own figure), the allocated growth per decode step against the
cache's 2 x layers x batch x kv width x bytes, and the segments created
while decoding. --every N prints every N-th decode step (the prefill and
the last step always). --check exits 1 when the planner's own peak
reserved or the replay's is off the measured peak reserved, or the
planned growth per decode step off the measured one, by more than
calib.BOUND (the per-configuration bound of check_calibration.py).

Standard library only (the spec's few integer keys are read from its
text).
"""
import argparse
import csv
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import calib  # noqa: E402
import tracefile  # noqa: E402

ROOT = os.path.normpath(os.path.join(os.path.dirname(
    os.path.abspath(__file__)), "..", ".."))
CAL = os.path.join(ROOT, "tests", "data", "calibration")
MiB = 2 ** 20


def spec_keys(path):
    """The integer keys of a spec file that the cut needs (the
    calibration specs spell every key on its own line)."""
    keys = {}
    with open(path) as f:
        for line in f:
            m = re.match(r"\s+(layers|batch_size|prompt_length|"
                         r"generate_length|hidden_size|attention_heads|"
                         r"kv_heads):\s*(\d+)", line)
            if m:
                keys[m.group(1)] = int(m.group(2))
            m = re.match(r"\s+kv_cache_dtype:\s*(\w+)", line)
            if m:
                keys["kv_cache_dtype"] = m.group(1)
    return keys


class Series:
    """Allocated and reserved bytes over one sequence, cut into forward
    windows at every per_fwd-th cache allocation."""

    def __init__(self, per_fwd):
        self.per_fwd = per_fwd
        self.kv = 0            # cache allocations so far
        self.alloc = 0
        self.reserved = 0
        self.windows = []      # [peak allocated, reserved, segments]
        self.peak_alloc = 0
        self.peak_reserved = 0

    def allocate(self, size, is_kv):
        if is_kv:
            if self.kv % self.per_fwd == 0:
                self.windows.append([self.alloc, self.reserved, 0])
            self.kv += 1
        self.alloc += size
        self._mark()

    def free(self, size):
        self.alloc -= size

    def segment(self, size):
        self.reserved += size
        if self.windows:
            self.windows[-1][2] += 1
        self._mark()

    def _mark(self):
        self.peak_alloc = max(self.peak_alloc, self.alloc)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        if self.windows:
            w = self.windows[-1]
            w[0] = max(w[0], self.alloc)
            w[1] = self.reserved


def measured_series(path, per_fwd):
    """The recorded trace: allocated from alloc / free_completed, reserved
    from the segments at the start plus segment_alloc / segment_free."""
    head, entries = tracefile.read(path)
    s = Series(per_fwd)
    s.reserved = sum(size for _, size in head.get("segments", []))
    for _, size in head["initial"]:
        s.allocate(size, False)
    for act, _addr, size, _stream, tag in entries:
        if act == "alloc":
            s.allocate(size, tag.startswith("cache_utils.py:update"))
        elif act == "free_completed":
            s.free(size)
        elif act in ("segment_alloc", "segment_map"):
            s.segment(size)
        elif act in ("segment_free", "segment_unmap"):
            s.reserved -= size
    return s


def planned_series(gpumem, spec, per_fwd):
    """The planner's sequence (gpumem plan --trace) replayed by gpumem
    replay; returns the series and the planner's own plan JSON."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "plan.csv")
        r = subprocess.run([gpumem, "plan", spec, "--format", "json",
                            "--trace", path], capture_output=True, text=True)
        if r.returncode not in (0, 1):
            sys.exit(f"gpumem plan {spec}: exit {r.returncode}: {r.stderr}")
        plan = json.loads(r.stdout)
        r = subprocess.run([gpumem, "replay", path, "--segments", "--format",
                            "json"], capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"gpumem replay {path}: exit {r.returncode}: "
                     f"{r.stderr}")
        rep = json.loads(r.stdout)
        grow = {g["event"]: g["segment_bytes"] for g in rep["segments"]}
        s = Series(per_fwd)
        with open(path, newline="") as f:
            rows = csv.DictReader(ln for ln in f if not ln.startswith("#"))
            for i, row in enumerate(rows):
                size = int(row["Size"])
                if row["Action"] == "allocate":
                    if i in grow:
                        s.segment(grow[i])
                    s.allocate(size, row["Tag"] == "inference/kv")
                else:
                    s.free(size)
    return s, plan, rep


def mib(n):
    return f"{n / MiB:10.1f}"


def pct(a, b):
    return f"{(a / b - 1) * 100:+.2f}%" if b else "n/a"


def decode_slope(windows, G):
    """Median growth of the window peaks over one call's decode steps."""
    d = [windows[k + 1][0] - windows[k][0] for k in range(1, G - 1)]
    return statistics.median(d) if d else 0


def paths(name, cset):
    """The spec, the trace and the measured file of configuration name
    of set cset (None: the main calibration set)."""
    if not cset:
        return (os.path.join(CAL, "specs", name + ".yaml"),
                os.path.join(CAL, "traces", name + ".trace.jsonl.gz"),
                os.path.join(CAL, "measured-h200.json"))
    base = os.path.join(CAL, *cset.split("/"))
    return (os.path.join(base, "specs", name + ".yaml"),
            os.path.join(CAL, "traces", cset.replace("/", "-"),
                         name + ".trace.jsonl.gz"),
            os.path.join(base, "measured-h200.json"))


def one(name, gpumem, every, summary_only, cset=None):
    spec, trace, measured = paths(name, cset)
    for p in (spec, trace, measured):
        if not os.path.exists(p):
            sys.exit(f"gen_growth.py: {name}: no {os.path.relpath(p, ROOT)}")
    k = spec_keys(spec)
    L, G = k["layers"], k["generate_length"]
    per_fwd = 2 * L
    real = measured_series(trace, per_fwd)
    plan, pj, rep = planned_series(gpumem, spec, per_fwd)
    with open(measured) as f:
        meas = next((c for c in json.load(f)["configs"]
                     if c["name"] == name), {})
    out = [f"## {name}: {L} layers, batch {k['batch_size']}, prompt "
           f"{k['prompt_length']}, generate {G}"]
    if len(real.windows) != len(plan.windows):
        out.append(f"forwards differ: measured {len(real.windows)}, "
                   f"planned {len(plan.windows)}")
    n = min(len(real.windows), len(plan.windows))
    if not summary_only:
        out.append("call  step   trace alloc  trace resv   plan alloc"
                   "   plan resv  segs t/p   (MiB)")
        for i in range(n):
            c, f = divmod(i, G)
            if f not in (0, 1, G - 1) and (f - 1) % every:
                continue
            ra, rr, rs = real.windows[i]
            pa, pr, ps = plan.windows[i]
            out.append(f"{c + 1:4d} {f:5d} {mib(ra)}  {mib(rr)}  "
                       f"{mib(pa)}  {mib(pr)}  "
                       f"{rs:4d}/{ps:<4d}")
    pd = pj.get("per_gpu", pj)
    m_res = meas.get("peak_reserved_bytes", real.peak_reserved)
    m_all = meas.get("peak_allocated_bytes", real.peak_alloc)
    kvb = {"fp32": 4, "fp8": 1, "int8": 1}.get(k.get("kv_cache_dtype"), 2)
    hd = k["hidden_size"] // k["attention_heads"]
    cache_step = 2 * L * k["batch_size"] * hd * k["kv_heads"] * kvb
    seg_r = sum(w[2] for w in real.windows[1:G])
    seg_p = sum(w[2] for w in plan.windows[1:G])
    seg_r2 = sum(w[2] for w in real.windows[G:])
    seg_p2 = sum(w[2] for w in plan.windows[G:])
    out += [
        f"peak allocated   measured {mib(m_all)} MiB  replay "
        f"{mib(plan.peak_alloc)} MiB ({pct(plan.peak_alloc, m_all)})  "
        f"planner {mib(pd['peak_allocated_bytes'])} MiB "
        f"({pct(pd['peak_allocated_bytes'], m_all)})",
        f"peak reserved    measured {mib(m_res)} MiB  replay "
        f"{mib(rep['peak_reserved_bytes'])} MiB "
        f"({pct(rep['peak_reserved_bytes'], m_res)})  planner "
        f"{mib(pd['peak_reserved_bytes'])} MiB "
        f"({pct(pd['peak_reserved_bytes'], m_res)})",
        f"decode growth    per step: measured "
        f"{decode_slope(real.windows, G) / MiB:.3f} MiB, planned "
        f"{decode_slope(plan.windows, G) / MiB:.3f} MiB (the cache's "
        f"2 x {L} x {k['batch_size']} x {hd * k['kv_heads']} x {kvb} B = "
        f"{cache_step / MiB:.3f} MiB)",
        f"reserved         after the prefill: measured "
        f"{mib(real.windows[0][1])} MiB, planned "
        f"{mib(plan.windows[0][1])} MiB; after call 1's last step: "
        f"measured {mib(real.windows[G - 1][1])} MiB, planned "
        f"{mib(plan.windows[G - 1][1])} MiB",
        f"new segments     call 1 decode: measured {seg_r}, planned "
        f"{seg_p}; call 2: measured {seg_r2}, planned {seg_p2}",
    ]
    bad = []
    gr, gp = decode_slope(real.windows, G), decode_slope(plan.windows, G)
    if gr and abs(gp / gr - 1) > calib.BOUND:
        bad.append(f"{name}: planned growth per decode step "
                   f"{gp / MiB:.3f} MiB, measured {gr / MiB:.3f} MiB "
                   f"({gp / gr - 1:+.2%}, bound ±{calib.BOUND:.0%})")
    for what, v in (("planner", pd["peak_reserved_bytes"]),
                    ("replay", rep["peak_reserved_bytes"])):
        e = v / m_res - 1
        if abs(e) > calib.BOUND:
            bad.append(f"{name}: {what}'s peak reserved {e:+.2%} off the "
                       f"measured {m_res / MiB:.1f} MiB (bound "
                       f"±{calib.BOUND:.0%})")
    return out, bad


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="+")
    ap.add_argument("--set", dest="cset", metavar="SET",
                    help="a pending set (pending/longgen): the spec, "
                    "trace and measured row come from there")
    ap.add_argument("--gpumem", default=os.path.join(
        ROOT, "build", "tools", "gpumem", "gpumem"))
    ap.add_argument("--every", type=int, default=1)
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    bad = []
    for name in a.names:
        cset, _, bare = name.rpartition("/")
        out, b = one(bare, a.gpumem, max(1, a.every), a.summary_only,
                     cset or a.cset)
        print("\n".join(out))
        print()
        bad += b
    for b in bad:
        print("FAIL " + b)
    return 1 if a.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
