#!/usr/bin/env python3
"""Convert a PyTorch memory snapshot to RMM's CSV allocation log.

Input: the pickle written by torch.cuda.memory._dump_snapshot() (or the
dict returned by torch.cuda.memory._snapshot()) after
torch.cuda.memory._record_memory_history(). Read with the standard pickle
module only: the snapshot is plain dicts, lists and numbers.

Output: Thread,Time,Action,Pointer,Size,Stream (RMM's logging_resource_adaptor CSV), Time in
microseconds, Pointer hex, one line per `alloc` (-> allocate) and
`free_completed` (-> free; the moment PyTorch's allocator could reuse the
block, after any record_stream events). Traces without free_completed
entries use free_requested. `.gz` output is gzip-compressed.

Usage: snapshot_to_csv.py SNAPSHOT.pickle OUT.csv[.gz] [--device N]
"""
import argparse
import gzip
import pickle
import sys


def trace_entries(snapshot, device=0):
    """The device's trace entries, oldest first."""
    traces = snapshot.get("device_traces") or []
    if device >= len(traces):
        return []
    return traces[device] or []


def rows(entries):
    """Yield (time_us, action, addr, size, stream) in RMM terms."""
    has_completed = any(e.get("action") == "free_completed" for e in entries)
    free_action = "free_completed" if has_completed else "free_requested"
    for e in entries:
        act = e.get("action")
        if act == "alloc":
            yield e.get("time_us", 0), "allocate", e["addr"], e["size"], \
                e.get("stream", 0)
        elif act == free_action:
            yield e.get("time_us", 0), "free", e["addr"], e["size"], \
                e.get("stream", 0)


def write_csv(snapshot, path, device=0):
    """Write the CSV; return the number of events written."""
    opener = gzip.open if path.endswith(".gz") else open
    n = 0
    with opener(path, "wt", newline="") as out:
        out.write("Thread,Time,Action,Pointer,Size,Stream\n")
        for t, act, addr, size, stream in rows(trace_entries(snapshot,
                                                             device)):
            out.write("0,%d,%s,0x%x,%d,0x%x\n" % (int(t), act, addr, size,
                                                  stream & (2**64 - 1)))
            n += 1
    return n


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("snapshot")
    ap.add_argument("out")
    ap.add_argument("--device", type=int, default=0)
    a = ap.parse_args(argv)
    try:
        with open(a.snapshot, "rb") as f:
            snap = pickle.load(f)
    except (OSError, pickle.UnpicklingError, EOFError) as e:
        print("snapshot_to_csv: %s: %s" % (a.snapshot, e), file=sys.stderr)
        return 2
    if not isinstance(snap, dict) or "device_traces" not in snap:
        print("snapshot_to_csv: %s: not a PyTorch memory snapshot "
              "(no device_traces)" % a.snapshot, file=sys.stderr)
        return 2
    n = write_csv(snap, a.out, a.device)
    print("%s: %d events" % (a.out, n))
    return 0


if __name__ == "__main__":
    sys.exit(main())
