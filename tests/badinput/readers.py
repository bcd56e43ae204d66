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
    try:
        p = run(args, **kw)
    except subprocess.TimeoutExpired:
        failures += 1
        print("FAIL %s: over %s s" % (name, kw.get("timeout")))
        return None
    bad = p.returncode != code or \
        (needle is not None and needle not in p.stderr) or \
        (stdout is not None and stdout not in p.stdout) or \
        "Sanitizer" in p.stderr or "runtime error" in p.stderr or \
        "\x1b" in p.stderr + p.stdout  # no terminal escape gets through
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
# The preload library's GPUMEM_REPORT and GPUMEM_PROMETHEUS go through the
# same writer: a root process under the fake driver neither writes
# through the planted links nor creates the dangling one's target.
build = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(GPUMEM))))
probe = os.path.join(build, "tests", "integration", "pl_probe")
lib = os.path.join(build, "allocator", "preload", "libgpumem-preload.so")
if as_root and os.path.exists(probe) and os.path.exists(lib):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GPUMEM_", "FAKECUDA", "RANK"))}
    env.update(LD_PRELOAD=lib, LD_LIBRARY_PATH=os.path.join(build, "tests",
                                                            "fake"),
               ASAN_OPTIONS=":".join(x for x in (
                   os.environ.get("ASAN_OPTIONS"),
                   "verify_asan_link_order=0") if x),
               GPUMEM_LIMIT="64MiB",
               GPUMEM_REPORT=os.path.join(shared, "verify.json"),
               GPUMEM_PROMETHEUS=os.path.join(shared, "dangling.json"))
    p = subprocess.run([probe, "plain"], env=env, capture_output=True,
                       text=True, timeout=60)
    expect("preload-report-foreign-link", p.returncode == 0 and
           "GPUMEM_REPORT" in p.stderr and "not followed" in p.stderr and
           "GPUMEM_PROMETHEUS" in p.stderr, repr((p.returncode, p.stderr)))
    expect("preload-secret-unchanged", read(secret) == "secret")
    expect("preload-dangling-not-created",
           not os.path.exists(os.path.join(private, "new")))
# Our own file there is written as before.
check("verify-output-shared-dir",
      EMU + ["--output", os.path.join(shared, "mine.json")], 0)

# A bare device object of `gpumem verify --format json` (its own "kind"
# is the card's) is a verify document.
with open(os.path.join(VERIFY, "node-a.json")) as f:
    dev = json.load(f)["devices"][0]
check("report-bare-device", ["report", path("dev.json", json.dumps(dev))], 0,
      stdout="NVIDIA H200")
del dev["verified_bytes"]
dev["verdict"] = "error"
check("report-bare-device-error",
      ["report", path("dev-err.json", json.dumps(dev))], 1, stdout="error")

# NUL bytes, tags, aliases and repeated keys: refused at file:line:column.
DEV = ('{"device":0,"cap_bytes":1,"allocated_bytes":1,"reserved_bytes":1,'
       '"peak_allocated_bytes":1,"peak_reserved_bytes":1,"oom_count":0}')
for name, text, needle in (
        ("nul-string", '{"kind":"gpumem-report",\n "host":"a\\u0000b",'
         '"devices":[]}', "nul-string.json:2:9: a NUL byte"),
        ("nul-key", '{"kind":"gpumem-report","devices\\u0000":[]}',
         "nul-key.json:1:25: a NUL byte"),
        ("tag-str", '{"kind":"gpumem-report","pid":!!str 5,"devices":[]}',
         "tag-str.json:1:31: YAML tag '!!str' is not accepted"),
        ("tag-custom", '{"kind":"gpumem-report","devices":[' +
         DEV.replace('"oom_count":0', '"oom_count":!custom 5') + ']}',
         "tag-custom.json:1:162: YAML tag '!custom'"),
        ("tag-map", '{"kind":"gpumem-report","devices":[!!map ' + DEV + ']}',
         "tag-map.json:1:36: YAML tag '!!map'"),
        ("alias", '{"kind":"gpumem-report","x":&a 1,"pid":*a,"devices":[]}',
         "alias.json:1:40: a YAML alias"),
        ("duplicate-key", '{"kind":"gpumem-report","devices":[],"devices":'
         '[' + DEV + ']}', 'duplicate-key.json:1:38: duplicate key'
         ' "devices"')):
    check("report-" + name, ["report", path(name + ".json", text)], 2,
          needle)

# Control characters of JSON strings are escaped in tables and CSV (ESC
# would start a terminal escape sequence), per JSON in JSON.
evil = "\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m"
path("evil.json", '{"kind":"gpumem-report","host":"%s","devices":[%s]}' %
     (evil, DEV.replace('"device":0', '"device":0,"name":"%s"' % evil)))
for fmt, want in (("table", "\\x1b[2J\\x1b]0;pwned\\x07\\u009b31m"),
                  ("csv", "\\x1b[2J\\x1b]0;pwned\\x07\\u009b31m"),
                  ("json", "\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m"),
                  ("yaml", "\\u001b[2J\\u001b]0;pwned\\u0007\\u009b31m")):
    p = check("report-escape-" + fmt, ["report", "--format", fmt,
                                       path("evil.json")], 0, stdout=want)
    expect("report-no-raw-escape-" + fmt, p is not None and
           not any(c in p.stdout for c in "\x1b\x07\x9b"),
           repr(p.stdout[:300]) if p else "")

# Inputs that cost quadratic time before: each must be answered in
# seconds (the old readers took minutes).
n = 200000
check("catalog-deep-fast", ["plan", SPEC, "--gpu", "h100", "--catalog",
                            path("deep.yaml", "gpus: " + "[" * n + "]" * n)],
      2, "deep.yaml:1:22: nesting too deep (more than 16 levels)",
      timeout=30)
parts = ["&a%d 1" % i for i in range(40000)] + ["*a39999"] * 40000
check("spec-aliases-fast", ["plan", path("aliases.yaml", "name: x\nz: [" +
                                         ", ".join(parts) + "]\n")],
      2, "aliases.yaml:2:2199: more than 256 anchors", timeout=30)
doc = {"kind": "gpumem-report", "devices": []}
for i in range(200000):
    doc["k%d" % i] = i
check("report-many-keys-fast", ["report", path("keys.json", json.dumps(doc))],
      0, timeout=30)
dev = json.loads(DEV)
doc = {"kind": "gpumem-report", "devices": [dict(dev, device=i)
                                            for i in range(8192)]}
p = check("report-many-devices-fast",
          ["report", "--format", "json", path("devs.json", json.dumps(doc))],
          0, timeout=30)
expect("report-many-devices-rows", p is not None and
       p.stdout.count('"device":') == 8192)

# Messages quote input values with their control characters escaped.
check("report-verdict-escape", ["report", path("verdict.json",
      '{"kind":"gpumem-verify","devices":[{"device":0,'
      '"verdict":"\\u001b[2Jok"}]}')], 2, "verdict: '\\x1b[2Jok' is not ok")
check("report-duplicate-key-escape", ["report", path("dupkey.json",
      '{"kind":"gpumem-report","devices":[],"\\u001bk":1,"\\u001bk":2}')],
      2, 'duplicate key "\\x1bk"')
with open(os.path.join(ROOT, "tests", "data", "catalog", "test-gpu.yaml")) as f:
    cat = f.read().replace("architecture: hopper",
                           'architecture: "hop\\e[2Jper"')
check("catalog-message-escape", ["plan", SPEC, "--catalog",
                                 path("esc-cat.yaml", cat)], 2,
      "unknown architecture 'hop\\x1b[2Jper'")

# a tab in a catalog is said as a spec's tab is
check("catalog-tab", ["gpus", "--catalog", path("tab-cat.yaml",
      "gpus:\n\t- name: X\n")], 2, "tab-cat.yaml:2:1: YAML syntax error: "
      "tabs are not allowed, indent with spaces")
# a bad catalog reads the same from gpus as from plan: file:line:column,
# then the line with a caret under the column
for cmd in (["gpus"], ["plan", SPEC]):
    check("catalog-excerpt-" + cmd[0], cmd + ["--catalog", path(
          "badkey-cat.yaml", "gpus:\n  - name: X\n    total_bytes: 1\n")],
          2, "badkey-cat.yaml:3:5: unknown key 'total_bytes' in GPU "
          "entry\n      total_bytes: 1\n      ^")

# A wide catalog (28,000 architectures, 8,000 GPUs, 3.9 MB) is read and the
# last GPU found by its alias. Its CPU time is measured by the reader
# benchmark (tools/bench/reader_inputs.py), not here: the timeout only
# catches a hang.
archs = ["  - {name: a%d, cuda_context_mib: 1, cuda_context_inference_mib: 1,"
         " source: x}" % i for i in range(28000)]
gpus = ["  - {name: g%d, aliases: [x%d], architecture: a%d, compute_capability:"
        ' "9.0", marketed: 1 GB, total_mib: 1, ecc_default_on: true, '
        "memory_type: HBM3, bandwidth_gbps: 1, bf16_tflops: 1, tolerance: "
        "0.01, source: x}" % (i, i, 27999 - i) for i in range(8000)]
wide = path("wide.yaml", "architectures:\n" + "\n".join(archs) +
            "\ngpus:\n" + "\n".join(gpus) + "\n")
check("catalog-wide", ["plan", SPEC, "--catalog", wide, "--gpu", "x7999"], 1,
      stdout="g7999", timeout=600)

print("%d failures" % failures)
shutil.rmtree(TMP, ignore_errors=True)
sys.exit(1 if failures else 0)
