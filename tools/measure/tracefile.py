"""tracefile - record a configuration's allocation trace.

With `measure.py --trace-dir DIR`, each configuration's steps run under
torch.cuda.memory._record_memory_history(); DIR/NAME.trace.jsonl.gz then
holds, one JSON value a line:
  line 1: {"name", "initial": [[address, size], ...]}  the blocks live when
          recording began (the weights; nothing cached: the measurement
          empties the cache first), in address order;
  then:   [action, address, size, stream, tag] per trace entry, oldest
          first, with PyTorch's actions (alloc, free_requested,
          free_completed, segment_alloc, segment_free, segment_map,
          segment_unmap, oom, ...) and, for alloc, a short tag naming the
          Python frames that allocated ("file:function:line<file:...", the
          innermost first, at most 3 frames).
`to_csv()` turns it into the RMM CSV that `gpumem replay` reads: the
initial blocks as allocations, then alloc / free_completed, and before
an alloc that made PyTorch cudaMalloc a segment, a `segment` line with
that segment's address and size (gpumem's addition to the format: the
simulated card then places the segment where the device did, so
best-fit ties between equal free blocks break as on the device; left
out for traces that give segments back, where addresses get reused).
Recordings made since also keep "segments": [[address, size], ...],
the segments that held the initial blocks (not yet replayed).

Standard library only where read; torch only where recorded.
"""
import gzip
import json

MAX_ENTRIES = 5_000_000
SKIP = ("tracefile.py", "/contextlib.py", "torch/utils/_contextlib.py")
_start_segments = []  # [[address, total_size], ...] when start() ran


def start(cuda):
    """Begin recording on torch.cuda (passed as cuda); returns the live
    blocks [[address, size], ...]."""
    mem = cuda.memory
    mem._record_memory_history(enabled="all", context="alloc",
                               stacks="python", max_entries=MAX_ENTRIES)
    live = []
    _start_segments.clear()
    for seg in mem._snapshot()["segments"]:
        addr = seg["address"]
        _start_segments.append([addr, seg["total_size"]])
        for b in seg["blocks"]:
            if b["state"] == "active_allocated":
                live.append([addr, b["size"]])
            addr += b["size"]
    live.sort()
    _start_segments.sort()
    return live


def _tag(frames):
    out = []
    for f in frames or []:
        fn = f.get("filename", "")
        if any(s in fn for s in SKIP):
            continue
        base = fn.rsplit("/", 1)[-1]
        out.append("%s:%s:%s" % (base, f.get("name", ""), f.get("line", "")))
        if len(out) == 3:
            break
    return "<".join(out)


def finish(cuda, path, name, initial):
    """Stop recording and write path (gzip JSON lines); returns the number
    of trace entries written."""
    mem = cuda.memory
    snap = mem._snapshot()
    mem._record_memory_history(enabled=None)
    traces = snap.get("device_traces") or [[]]
    dev = cuda.current_device()
    entries = traces[dev] if dev < len(traces) else []
    with gzip.open(path, "wt") as f:
        f.write(json.dumps({"name": name, "initial": initial,
                            "segments": _start_segments}) + "\n")
        for e in entries:
            act = e.get("action")
            tag = _tag(e.get("frames")) if act == "alloc" else ""
            f.write(json.dumps([act, e.get("addr", 0), e.get("size", 0),
                                e.get("stream", 0), tag]) + "\n")
    return len(entries)


def read(path):
    """(header, entries) of a trace file."""
    with gzip.open(path, "rt") as f:
        head = json.loads(f.readline())
        # one parse of the whole body: ~3x faster than one per line
        body = f.read().rstrip("\n").replace("\n", ",")
        return head, json.loads("[" + body + "]")


def to_csv(path, out, hints=True):
    """Write the RMM CSV of trace file path to out (.gz compresses);
    returns the number of events (segment lines not counted). hints:
    write the segment lines (never for a trace with segment_free)."""
    head, entries = read(path)
    if any(e[0] in ("segment_free", "segment_unmap") for e in entries):
        hints = False
    opener = gzip.open if out.endswith(".gz") else open
    lines = ["Thread,Time,Action,Pointer,Size,Stream"]
    n = 0
    for addr, size in head["initial"]:
        lines.append("0,%d,allocate,0x%x,%d,0x0" % (n, addr, size))
        n += 1
    names = {"alloc": "allocate", "free_completed": "free"}
    if hints:
        names["segment_alloc"] = "segment"
    for act, addr, size, stream, _ in entries:
        name = names.get(act)
        if not name:
            continue
        lines.append("0,%d,%s,0x%x,%d,0x%x" % (
            n, name, addr, size, stream & (2**64 - 1)))
        if name != "segment":
            n += 1
    with opener(out, "wt", newline="") as f:
        f.write("\n".join(lines) + "\n")
    return n
