#!/usr/bin/env python3
"""Hostile inputs to the readers of gpumem report, plan --catalog and the
spec, and hostile places for the files every subcommand writes: each case
checks the exit status, a phrase of the message (file:line:column), and
that nothing crashed. Runs under ASan/UBSan in CI.
Usage: readers.py GPUMEM SOURCE_ROOT"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

GPUMEM, ROOT = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="gm-readers-")
SPEC = os.path.join(ROOT, "models", "gpt2.yaml")
VERIFY = os.path.join(ROOT, "tests", "data", "verify")
failures = 0


def path(name, text=None, mode="w"):
    p = os.path.join(TMP, name)
    if text is not None:
        with open(p, mode) as f:
            f.write(text)
    return p


def run(args, **kw):
    return subprocess.run([GPUMEM, *args], capture_output=True,
                          errors="replace", text=True, **kw)


def check(name, args, code, needle=None, stdout=None, **kw):
    global failures
    p = run(args, **kw)
    bad = p.returncode != code or \
        (needle is not None and needle not in p.stderr) or \
        (stdout is not None and stdout not in p.stdout) or \
        "Sanitizer" in p.stderr or "runtime error" in p.stderr
    if bad:
        failures += 1
        print("FAIL %s: rc %d, stdout %r, stderr %r" %
              (name, p.returncode, p.stdout[:300], p.stderr[-600:]))
    return p


def expect(name, cond, detail=""):
    global failures
    if not cond:
        failures += 1
        print("FAIL %s %s" % (name, detail))


def read(p):
    with open(p) as f:
        return f.read()


EMU = ["verify", "--no-progress", "--quick", "--emulate", "claimed=1MiB"]

# Output files in a sticky world-writable directory (as /tmp): another
# user's link is not followed (also by root), whether it points at a
# root-only file or nowhere; another user's file is not replaced. The
# other user is made with lchown, which needs root (as in CI).
shared = path("shared")
os.mkdir(shared)
os.chmod(shared, 0o1777)
private = path("private")
os.mkdir(private, 0o700)
secret = os.path.join(private, "secret")
with open(secret, "w") as f:
    f.write("secret")
os.chmod(secret, 0o600)
try:
    for name, target in (("verify.json", secret), ("plan.svg", secret),
                         ("dangling.json", os.path.join(private, "new"))):
        os.symlink(target, os.path.join(shared, name))
        os.lchown(os.path.join(shared, name), 4242, 4242)
    theirs = os.path.join(shared, "theirs.json")
    with open(theirs, "w") as f:
        f.write("theirs")
    os.chown(theirs, 4242, 4242)
    as_root = True
except PermissionError:
    as_root = False
if as_root:
    check("verify-output-foreign-link",
          EMU + ["--output", os.path.join(shared, "verify.json")], 2,
          "not followed")
    check("plan-svg-foreign-link", ["plan", SPEC, "--gpu", "h100", "--svg",
                                    os.path.join(shared, "plan.svg")], 2,
          "not followed")
    check("verify-output-foreign-dangling",
          EMU + ["--output", os.path.join(shared, "dangling.json")], 2,
          "not followed")
    check("verify-output-foreign-file", EMU + ["--output", theirs], 2,
          "not replaced")
    expect("secret-unchanged", read(secret) == "secret")
    expect("dangling-not-created",
           not os.path.exists(os.path.join(private, "new")))
    expect("theirs-unchanged", read(theirs) == "theirs" and
           os.stat(theirs).st_uid == 4242)
    expect("no-temporaries-left", sorted(os.listdir(shared)) ==
           ["dangling.json", "plan.svg", "theirs.json", "verify.json"],
           repr(os.listdir(shared)))
# Our own file there is written as before.
check("verify-output-shared-dir",
      EMU + ["--output", os.path.join(shared, "mine.json")], 0)

print("%d failures" % failures)
shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failures else 0)
