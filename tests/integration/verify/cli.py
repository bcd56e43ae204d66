#!/usr/bin/env python3
"""gpumem verify end to end on emulated cards: exit codes, JSON keys,
every verdict, CSV, --output. Usage: cli.py GPUMEM"""
import json
import os
import subprocess
import sys
import tempfile

GPUMEM = sys.argv[1]
failures = []


def run(*args):
    p = subprocess.run([GPUMEM, "verify", "--no-progress", *args],
                       capture_output=True, text=True)
    return p.returncode, p.stdout, p.stderr


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what)


def emulate(spec, *extra):
    code, out, err = run("--emulate", spec, "--format", "json", *extra)
    try:
        doc = json.loads(out)
    except ValueError:
        check(False, "%s: output is not JSON: %r %r" % (spec, out, err))
        return code, None
    check(doc.get("kind") == "gpumem-verify", spec + ": kind")
    check(isinstance(doc.get("host"), str) and doc["host"], spec + ": host")
    dev = doc["devices"][0]
    for key in ("device", "name", "claimed_bytes", "reported_bytes",
                "verified_bytes", "errors", "verdict", "bandwidth_gbps"):
        check(key in dev, "%s: key %s" % (spec, key))
    return code, dev


MiB = 1 << 20
cases = [
    # spec, extra args, exit code, verdict, real_bytes or None
    ("claimed=32MiB,real=32MiB", [], 0, "ok", None),
    ("claimed=32MiB,real=32MiB", ["--quick"], 0, "ok", None),
    ("claimed=32MiB,real=32MiB,nvml=0", [], 0, "ok", None),
    ("claimed=40MiB,reported=32MiB", ["--quick"], 1, "undersized", None),
    ("claimed=32MiB", ["--quick", "--claimed", "64MiB"], 1, "undersized",
     None),
    ("claimed=32MiB,real=16MiB", ["--quick"], 1, "undersized", 16 * MiB),
    ("claimed=32MiB,real=24MiB", [], 1, "undersized", 24 * MiB),
    ("claimed=30MiB,real=20MiB,nvml=0", ["--quick"], 1, "undersized",
     20 * MiB),
    ("claimed=32MiB,real=20MiB,mode=drop", ["--quick"], 1, "undersized",
     20 * MiB),
    ("claimed=32MiB,bad_bits=2", [], 1, "faulty", None),
]
for spec, extra, want_code, want_verdict, want_real in cases:
    code, dev = emulate(spec, *extra)
    label = spec + " " + " ".join(extra)
    check(code == want_code, "%s: exit %d, want %d" % (label, code,
                                                       want_code))
    if dev is None:
        continue
    check(dev["verdict"] == want_verdict,
          "%s: verdict %s, want %s" % (label, dev["verdict"], want_verdict))
    if want_real is not None:
        check(dev.get("real_bytes") == want_real,
              "%s: real_bytes %s" % (label, dev.get("real_bytes")))
        check(dev.get("alias_stride_bytes", want_real) == want_real,
              label + ": alias stride")

# Every size of --emulate is a card capacity: GB is the seller's (GiB) in
# real= and reported= as in claimed=, so 80GB of 80GB is a whole card.
for spec in ("claimed=80GB,real=80GB", "claimed=80GB,reported=80GB",
             "claimed=80GB,real=80GiB,reported=80GB"):
    code, dev = emulate(spec, "--quick")
    check(code == 0 and dev is not None and dev["verdict"] == "ok" and
          dev["reported_bytes"] == 80 << 30 and
          dev["verified_bytes"] == 80 << 30,
          "%s: %d %r" % (spec, code, dev and dev["verdict"]))
code, dev = emulate("claimed=8GB,real=7GB", "--quick")
check(code == 1 and dev is not None and dev.get("real_bytes") == 7 << 30,
      "claimed=8GB,real=7GB: real_bytes %r" % (dev and dev.get("real_bytes")))

# A --limit below a large emulated card tests part of it: the emulation's
# scale holds the card's real memory too (it tried to back all 76 GiB at
# 1/1 and exited 3, a driver's code)
for spec in ("claimed=80GB", "claimed=80GB,real=76GiB"):
    code, dev = emulate(spec, "--quick", "--limit", "256MiB")
    check(code == 0 and dev is not None and dev["verdict"] == "ok" and
          dev["verified_bytes"] == 256 << 20,
          "%s --limit 256MiB: %d %r" % (spec, code, dev and dev["verdict"]))

# Without an estimate of the real size (JSON leaves real_bytes out) the
# table shows "-", not 0.00 GiB, and CSV an empty cell.
code, out, _ = run("--emulate", "claimed=80GB,reported=76GiB", "--quick")
head, row = out.splitlines()[:2]
check(code == 1 and head.split()[-1] == "real" and row.split()[-1] == "-",
      "table real of an unknown estimate: %r" % row)
code, out, _ = run("--emulate", "claimed=80GB,reported=76GiB", "--quick",
                   "--format", "csv")
cols = out.splitlines()[0].split(",")
vals = out.splitlines()[1].split(",")
check("real_bytes" in cols and vals[cols.index("real_bytes")] == "",
      "csv real of an unknown estimate: %r" % out)

# The table names the verdict and the reason; CSV has one row.
code, out, _ = run("--emulate", "claimed=32MiB,real=16MiB", "--quick")
check(code == 1 and "undersized" in out and "alias" in out, "table")
code, out, _ = run("--emulate", "claimed=32MiB", "--quick", "--format",
                   "csv")
lines = out.strip().splitlines()
check(code == 0 and len(lines) == 2 and lines[0].startswith("device,name"),
      "csv: %r" % out)
code, out, _ = run("--emulate", "claimed=32MiB", "--quick", "--format",
                   "yaml")
check(code == 0 and "verdict: \"ok\"" in out, "yaml")

# --output writes the JSON report, %h = host name.
with tempfile.TemporaryDirectory() as tmp:
    code, _, _ = run("--emulate", "claimed=16MiB", "--quick", "--output",
                     os.path.join(tmp, "v-%h.json"))
    names = os.listdir(tmp)
    check(code == 0 and len(names) == 1 and names[0].startswith("v-")
          and not names[0].startswith("v-%"), "--output %r" % names)
    if names:
        doc = json.load(open(os.path.join(tmp, names[0])))
        check(doc["devices"][0]["verdict"] == "ok", "--output content")

# No driver: exit 3 with a message (GPUMEM_LIBCUDA points nowhere).
env = dict(os.environ, GPUMEM_LIBCUDA="/nonexistent/libcuda.so.1")
p = subprocess.run([GPUMEM, "verify", "--no-progress", "--quick"],
                   capture_output=True, text=True, env=env)
check(p.returncode == 3 and "driver" in p.stderr,
      "no driver: %d %r" % (p.returncode, p.stderr))
# ... and --output still gets a record with the error, so that a sweep
# over many nodes does not lose this one (gpumem report shows it).
with tempfile.TemporaryDirectory() as tmp:
    rec = os.path.join(tmp, "n.json")
    p = subprocess.run([GPUMEM, "verify", "--no-progress", "--quick",
                        "--output", rec], capture_output=True, text=True,
                       env=env)
    doc = json.load(open(rec)) if os.path.exists(rec) else {}
    dev = (doc.get("devices") or [{}])[0]
    check(p.returncode == 3 and doc.get("kind") == "gpumem-verify" and
          dev.get("verdict") == "error" and
          "/nonexistent/libcuda.so.1" in dev.get("reason", ""),
          "no driver --output: %d %r" % (p.returncode, doc))
    # nvml.error carries the NVML loader's reason (no libnvidia-ml here)
    nv = subprocess.run([GPUMEM, "verify", "--no-progress", "--quick",
                         "--output", rec], capture_output=True, text=True,
                        env=dict(env, GPUMEM_LIBNVML="/nonexistent/"
                                 "libnvidia-ml.so.1"))
    doc = json.load(open(rec)) if os.path.exists(rec) else {}
    nvml = (doc.get("devices") or [{}])[0].get("nvml", {})
    check(nv.returncode == 3 and nvml.get("present") is False and
          "cannot load NVML" in nvml.get("error", "") and
          "/nonexistent/libnvidia-ml.so.1" in nvml.get("error", ""),
          "no driver --output: nvml %r" % nvml)
    p = subprocess.run([GPUMEM, "report", rec], capture_output=True,
                       text=True)
    check(p.returncode == 1 and "error" in p.stdout,
          "report of the error record: %d %r" % (p.returncode, p.stdout))

# The two-node fixture for `gpumem report` has today's keys.
fixtures = sys.argv[2]
_, now = emulate("claimed=32MiB,real=24MiB", "--quick")
for host in ("node-a", "node-b"):
    doc = json.load(open(os.path.join(fixtures, host + ".json")))
    check(doc["kind"] == "gpumem-verify" and doc["host"] == host,
          host + ": header")
    for dev in doc["devices"]:
        check(set(now) - set(dev) <= {"real_bytes", "alias_stride_bytes",
                                      "aliased_address_bits",
                                      "first_bad_offset"},
              "%s: fixture lacks keys %s" % (host, set(now) - set(dev)))

print("%d failures" % len(failures))
sys.exit(1 if failures else 0)
