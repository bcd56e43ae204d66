#!/usr/bin/env python3
"""check_capped.py - runs under a per-process memory cap, planned and measured.

    check_capped.py GPUMEM MANIFEST [MEASURED] [--check] [--known FILE]

MANIFEST is a calibration manifest whose configurations carry
memory_limit_bytes (tests/data/calibration/pending/capped): each ran under
torch.cuda.set_per_process_memory_fraction(limit / total) on one GPU
(tools/measure/measure.py), where PyTorch's caching allocator frees its
cached blocks and retries before it raises out of memory. Each is planned
with `gpumem plan SPEC --gpu GPU --limit LIMIT --format json`, which
replays the run with the allocator held to the cap (planner/cap.h); GPU
is the card MEASURED names (environment.gpu_name, a catalog name), h200
without MEASURED.

Prints one row per configuration: the cap, the plan's verdict (fits, or
out of memory with the request it fails at), its peak allocated and
reserved bytes, and where MEASURED (measure.py's output) has the run, its
status (ok, oom), peaks and allocator retries. With --check the verdicts
must agree for every measured run, and where both fail, the figures of
PyTorch's out-of-memory message (the segment it tried to allocate, the
allocated and the reserved but unallocated bytes, as it prints them) must
be the plan's (the request as printed, the others within 1% of the cap):
exit 1 where one does not, 77 without a measured file
(nothing to compare). --known FILE (a known-misses file: "known", a list
of {"match": NAME, "why": ...}) marks those configurations' differences
KNOWN instead of failing, and fails on a listed one that agrees again
(take it off the list then).
"""
import json
import os
import re
import subprocess
import sys

MIB = 2**20


def segment_bytes(size):
    """The segment PyTorch's caching allocator asks cudaMalloc for when a
    request of size bytes finds no cached block, which is the size its
    out-of-memory message names ("Tried to allocate"):
    c10/cuda/CUDACachingAllocator.cpp get_allocation_size, PyTorch 2.11
    (1 MiB and less: a 2 MiB segment; under 10 MiB: 20 MiB; else rounded
    up to 2 MiB)."""
    if size <= MIB:
        return 2 * MIB
    if size < 10 * MIB:
        return 20 * MIB
    return (size + 2 * MIB - 1) // (2 * MIB) * (2 * MIB)


UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}


def measured_oom(message):
    """(tried, allocated, reserved_unallocated) in bytes from PyTorch's
    out-of-memory message, each as printed (two decimals), or None for a
    figure it lacks."""
    def fig(pattern):
        m = re.search(pattern, message or "")
        return float(m.group(1)) * UNITS[m.group(2)] if m else None
    return (fig(r"Tried to allocate ([0-9.]+) (bytes|KiB|MiB|GiB)"),
            fig(r"([0-9.]+) (bytes|KiB|MiB|GiB) is allocated by PyTorch"),
            fig(r"([0-9.]+) (bytes|KiB|MiB|GiB) is reserved by PyTorch "
                "but unallocated"))


def printed(b):
    """b bytes as PyTorch's format_size prints it (two decimals)."""
    for unit in ("GiB", "MiB", "KiB"):
        if b > UNITS[unit] or unit == "KiB":
            return "%.2f %s" % (b / UNITS[unit], unit)


def gib(b):
    return "%.2f" % (b / 2**30) if b is not None else "-"


def planned(gpumem, spec, sets, limit, gpu):
    args = [gpumem, "plan", spec, "--gpu", gpu, "--limit",
            "%dB" % limit, "--format", "json"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit("%s: exit %d: %s" % (" ".join(args), r.returncode,
                                             r.stderr.strip()))
    p = json.loads(r.stdout)
    g = p["per_gpu"]
    oom = g.get("out_of_memory")
    return {"fits": p["fits"], "peak_allocated": g["peak_allocated_bytes"],
            "peak_reserved": g["peak_reserved_bytes"],
            "oom_request": oom["requested_bytes"] if oom else None,
            "oom_allocated": oom["allocated_bytes"] if oom else None,
            "oom_reserved": oom["reserved_bytes"] if oom else None}


def main(argv):
    check = "--check" in argv
    argv = [a for a in argv if a != "--check"]
    known = {}
    if "--known" in argv:
        i = argv.index("--known")
        if i + 1 >= len(argv):
            sys.exit("check_capped.py: --known needs a FILE")
        with open(argv[i + 1]) as f:
            known = {k["match"]: k["why"] for k in json.load(f)["known"]}
        del argv[i:i + 2]
    if len(argv) not in (2, 3):
        sys.exit(__doc__.strip().splitlines()[2])
    gpumem, manifest = argv[0], argv[1]
    with open(manifest) as f:
        man = json.load(f)
    base = os.path.dirname(os.path.abspath(manifest))
    runs, gpu = {}, "h200"
    if len(argv) == 3 and os.path.exists(argv[2]):
        with open(argv[2]) as f:
            doc = json.load(f)
        runs = {r["name"]: r for r in doc["configs"]}
        gpu = doc.get("environment", {}).get("gpu_name") or gpu
    if check and not runs:
        print("no measured runs to compare (skipped)")
        return 77
    bad, ooms = 0, []
    print("Planned and measured on %s.\n" % gpu)
    print("| configuration | cap GiB | planned | allocated | reserved "
          "| measured | allocated | reserved | retries |")
    print("| --- | ---: | --- | ---: | ---: | --- | ---: | ---: | ---: |")
    for c in man["configs"]:
        limit = c["memory_limit_bytes"]
        p = planned(gpumem, os.path.join(base, c["spec"]), c.get("set", []),
                    limit, gpu)
        verdict = "fits" if p["fits"] else \
            "oom at %s GiB" % gib(p["oom_request"])
        m = runs.get(c["name"])
        if m and m.get("status") in ("ok", "oom"):
            agree = (m["status"] == "ok") == p["fits"]
            seen = (m["status"], gib(m.get("peak_allocated_bytes")),
                    gib(m.get("peak_reserved_bytes")),
                    str(m.get("num_alloc_retries", "-")))
            oom_ok = True
            if agree and m["status"] == "oom":
                oom_ok = oom_row(ooms, c["name"], limit, p,
                                 measured_oom(m.get("message")))
            differs = not (agree and oom_ok)
            if c["name"] in known:
                mark = " KNOWN" if differs else " **agrees, but listed**"
                bad += not differs
            else:
                mark = "" if agree else " **differs**"
                bad += differs
        else:
            seen = (m.get("status", "-") if m else "not run", "-", "-", "-")
            mark = ""
        print("| %s | %s | %s | %s | %s | %s%s | %s | %s | %s |" % (
            c["name"], gib(limit), verdict, gib(p["peak_allocated"]),
            gib(p["peak_reserved"]), seen[0], mark, seen[1], seen[2],
            seen[3]))
    oom_table(ooms)
    for name, why in known.items():
        print("\nKNOWN %s: %s" % (name, why))
    if check and bad:
        print("%d verdicts or out-of-memory figures differ" % bad)
        return 1
    return 0


OOM_TOL = 0.01   # of the cap, for allocated and reserved at the error


def oom_row(ooms, name, limit, p, seen):
    """Appends to ooms the row of a run both sides say fails: the failing
    request (the segment PyTorch tries to allocate), allocated and
    reserved but unallocated bytes at the failure, planned and as
    PyTorch's message printed them. Returns whether they agree: the
    request printed as the plan's, each byte count within OOM_TOL of the
    cap of it."""
    want = (segment_bytes(p["oom_request"]), p["oom_allocated"],
            p["oom_reserved"] - p["oom_allocated"])
    cells, ok = [], True
    for i, (w, s) in enumerate(zip(want, seen)):
        same = s is not None and (printed(w) == printed(s) if i == 0
                                  else abs(w - s) <= OOM_TOL * limit)
        ok &= same
        cells.append("%s / %s%s" % (printed(w),
                                    printed(s) if s is not None else "-",
                                    "" if same else " **differs**"))
    ooms.append("| %s | %s |" % (name, " | ".join(cells)))
    return ok


def oom_table(ooms):
    """Prints the rows oom_row() made."""
    if not ooms:
        return
    print("\nAt the out-of-memory error, planned / as PyTorch printed:\n")
    print("| configuration | tried to allocate | allocated "
          "| reserved but unallocated |")
    print("| --- | ---: | ---: | ---: |")
    for row in ooms:
        print(row)

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
