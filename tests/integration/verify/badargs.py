#!/usr/bin/env python3
"""gpumem verify rejects bad arguments: exit 2, a message naming the
option, nothing on stdout. Usage: badargs.py GPUMEM"""
import subprocess
import sys

GPUMEM = sys.argv[1]
cases = [
    (["--claimed", "lots"], "--claimed"),
    (["--claimed", "0"], "--claimed"),
    # a card capacity without a unit is a forgotten unit, not 80 bytes
    (["--claimed", "80"], "--claimed: '80' has no unit"),
    (["--claimed", "80", "--emulate", "claimed=1GiB"],
     "--claimed: '80' has no unit"),
    (["--emulate", "claimed=80"], "--emulate: claimed='80' has no unit"),
    (["--emulate", "claimed=1GiB,real=512"], "real='512' has no unit"),
    (["--device", "x"], "--device"),
    (["--device", "-1"], "--device"),
    (["--device", "0,"], None),
    (["--format", "xml"], "--format"),
    (["--quick", "--full"], "--quick"),
    (["--limit", "tiny"], "--limit"),
    (["--seed", "abc"], "--seed"),
    (["--bit-fade", "0"], "--bit-fade"),
    (["--bit-fade", "1s"], "--bit-fade"),
    (["--emulate", "claimed=8MiB,real=16MiB"], "--emulate"),
    (["--emulate", "claimed=8MiB,mode=sideways"], "mode"),
    (["--emulate", "claimed=8MiB,bad_bits=many"], "bad_bits"),
    (["--emulate", "size=8MiB"], "size"),
    (["--emulate", "claimed=2048TiB"], "--emulate: claimed= is above"),
    (["--emulate", "claimed=8MiB", "--emulate-vmm", "claimed=8MiB,real=4MiB"],
     "--emulate-vmm"),
    (["--emulate-vmm", "claimed=1GiB,real=4GiB", "--device", "0,1"],
     "--emulate-vmm"),
    (["--wat"], "--wat"),
    (["--claimed"], "--claimed"),
    (["extra"], "extra"),
]
failures = 0
for args, needle in cases:
    p = subprocess.run([GPUMEM, "verify", "--no-progress", *args],
                       capture_output=True, text=True)
    ok = p.returncode == 2 and not p.stdout and \
        (needle is None or needle in p.stderr) and "Traceback" not in p.stderr
    if not ok:
        failures += 1
        print("FAIL:", args, p.returncode, repr(p.stdout[:200]),
              repr(p.stderr[:300]))
p = subprocess.run([GPUMEM, "verify", "--help"], capture_output=True,
                   text=True)
if p.returncode != 0 or "--emulate" not in p.stdout:
    failures += 1
    print("FAIL: --help")
print("%d failures" % failures)
sys.exit(1 if failures else 0)
