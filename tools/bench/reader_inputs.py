#!/usr/bin/env python3
"""Write the hostile reader inputs of the reader benchmark into DIR and
time gpumem on each (wall and user CPU seconds, exit status, first line
of stderr).
Usage: reader_inputs.py GPUMEM DIR [TIMEOUT_S]

  catalog-deep.yaml   --catalog, 400 KB of nested flow sequences
  catalog-wide.yaml   --catalog, 28,000 architectures and 8,000 GPUs
  spec-aliases.yaml   a 1 MiB spec of anchors and aliases
  report-keys.json    a report object with 200,000 keys
  report-devices.json a report with 8,192 devices
"""
import json
import os
import subprocess
import sys
import resource
import time

GPUMEM, DIR = sys.argv[1], sys.argv[2]
TIMEOUT = float(sys.argv[3]) if len(sys.argv) > 3 else 600
SPEC = os.path.join(os.path.dirname(__file__), "..", "..", "models",
                    "gpt2.yaml")
os.makedirs(DIR, exist_ok=True)


def write(name, text):
    p = os.path.join(DIR, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def catalog_deep():
    n = 200000
    return write("catalog-deep.yaml", "gpus: " + "[" * n + "]" * n + "\n")


def catalog_wide():
    archs = ["  - {name: a%d, cuda_context_mib: 1, "
             "cuda_context_inference_mib: 1, source: x}" % i
             for i in range(28000)]
    gpus = ["  - {name: g%d, aliases: [x%d], architecture: a%d, "
            'compute_capability: "9.0", marketed: 1 GB, total_mib: 1, '
            "ecc_default_on: true, memory_type: HBM3, bandwidth_gbps: 1, "
            "bf16_tflops: 1, tolerance: 0.01, source: x}" % (i, i, 27999 - i)
            for i in range(8000)]
    return write("catalog-wide.yaml", "architectures:\n" + "\n".join(archs)
                 + "\ngpus:\n" + "\n".join(gpus) + "\n")


def spec_aliases():
    # Anchors, then aliases of the last one: libyaml's composer looks an
    # alias up by scanning every anchor so far.
    parts, size, i = [], 0, 0
    half = 1 << 19
    while size < half:
        s = "&a%d 1" % i
        parts.append(s)
        size += len(s) + 2
        i += 1
    last = "*a%d" % (i - 1)
    while size < (1 << 20) - 64:
        parts.append(last)
        size += len(last) + 2
    return write("spec-aliases.yaml", "name: x\nz: [" + ", ".join(parts) +
                 "]\n")


def device(i):
    return {"device": i, "name": "GPU", "cap_bytes": 1 << 30,
            "allocated_bytes": 1, "reserved_bytes": 2,
            "peak_allocated_bytes": 3, "peak_reserved_bytes": 4,
            "oom_count": 0, "oom_verdict": "none", "undersized": False}


def report_keys():
    doc = {"kind": "gpumem-report", "devices": [device(0)]}
    for i in range(200000):
        doc["k%d" % i] = i
    return write("report-keys.json", json.dumps(doc))


def report_devices():
    doc = {"kind": "gpumem-report", "host": "h", "rank": 0, "pid": 1,
           "devices": [device(i) for i in range(8192)]}
    return write("report-devices.json", json.dumps(doc))


CASES = [
    ("catalog-deep", lambda: ["plan", SPEC, "--catalog", catalog_deep()]),
    ("catalog-wide", lambda: ["plan", SPEC, "--catalog", catalog_wide(),
                              "--gpu", "g5"]),
    ("spec-aliases", lambda: ["plan", spec_aliases()]),
    ("report-keys", lambda: ["report", "--format", "json", report_keys()]),
    ("report-devices", lambda: ["report", "--format", "json",
                                report_devices()]),
]

for name, make in CASES:
    args = make()
    t = time.monotonic()
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    try:
        p = subprocess.run([GPUMEM, *args], capture_output=True, text=True,
                           errors="replace", timeout=TIMEOUT)
        rc, err = p.returncode, (p.stderr.strip().split("\n") or [""])[0]
    except subprocess.TimeoutExpired:
        rc, err = "timeout", ""
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - cpu
    print("%-15s %8.2f s wall %8.2f s user  exit %s  %s" %
          (name, time.monotonic() - t, cpu, rc, err[:120]))
