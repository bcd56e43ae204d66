#!/usr/bin/env python3
"""Bad input and hostile outputs for gpumem replay, report and verify (and
the output handling every subcommand shares): each case checks the exit
status, a phrase of the message, and that nothing crashed. Runs under
ASan/UBSan in CI. Usage: cli_tools.py GPUMEM SOURCE_ROOT"""
import gzip
import os
import stat
import subprocess
import sys
import tempfile

GPUMEM, ROOT = sys.argv[1], sys.argv[2]
TMP = tempfile.mkdtemp(prefix="gm-cli-tools-")
TRACE = os.path.join(ROOT, "tools", "trace", "data", "llama1b-infer.csv.gz")
VERIFY = os.path.join(ROOT, "tests", "data", "verify")
failures = 0


def path(name, text=None, mode="w"):
    p = os.path.join(TMP, name)
    if text is not None:
        with open(p, mode) as f:
            f.write(text)
    return p


def run(args, **kw):
    return subprocess.run([GPUMEM, *args], capture_output=True, text=True,
                          errors="replace", **kw)


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
              (name, p.returncode, p.stdout[:200], p.stderr[-600:]))
    return p


def expect(name, cond, detail=""):
    global failures
    if not cond:
        failures += 1
        print("FAIL %s %s" % (name, detail))


# 1. replay: a directory, a missing file, a truncated gzip stream.
check("replay-dir", ["replay", TMP], 2, "cannot read: Is a directory")
check("replay-missing", ["replay", path("nope.csv")], 2,
      "cannot open: No such file or directory")
with open(TRACE, "rb") as f:
    data = f.read()
path("trunc.csv.gz", data[:len(data) // 2], "wb")
check("replay-truncated-gz", ["replay", path("trunc.csv.gz")], 2,
      "unexpected end of compressed data")

# 1b. replay streams its input: CR-only line endings, /dev/zero, a line
# without end, a gzip bomb and a failed allocation (exit 1 naming it),
# generated here; the trace's "# gpumem-replay:" options and the command
# line's over them.
import json  # noqa: E402
import resource  # noqa: E402
check("replay-cr-only", ["replay", path("cr.csv",
      "Thread,Time,Action,Pointer,Size,Stream\r1,1,allocate,0x10,10,0\r"
      "1,2,free,0x10,10,0\r")], 2,
      "cr.csv:1:39: a carriage return inside a line")
check("replay-dev-zero", ["replay", "/dev/zero"], 2,
      "/dev/zero:1:1: NUL byte", timeout=60)
with gzip.open(path("long.csv.gz"), "wb", compresslevel=9) as g:
    g.write(b"Action,Pointer,Size\n")
    for _ in range(20):
        g.write(b"7" * (1 << 20))
check("replay-long-line", ["replay", path("long.csv.gz")], 2,
      "long.csv.gz:2:1: a line longer than 16777216 bytes", timeout=60)
with gzip.open(path("bomb.csv.gz"), "wb", compresslevel=9) as g:
    g.write(b"Action,Pointer,Size\n")
    for _ in range(100):
        g.write(b"\n" * (1 << 20))
check("replay-gzip-bomb", ["replay", path("bomb.csv.gz")], 2,
      "the compressed stream expands more than 250 times", timeout=60)
expect("replay-streams-rss",
       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1 << 20,
       "max RSS %d KiB" %
       resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
fails = path("fails.csv", "Action,Pointer,Size\nallocate,0x1000,1048576\n"
             "allocate,0x2000,1000000000000000\nfree,0x1000,1048576\n")
p = check("replay-fails", ["replay", fails, "--format", "json"], 1,
          "fails.csv:3: an allocation of 909.49 TiB failed (the card is "
          "full): 1.00 MiB allocated, 2.00 MiB reserved")
if p.returncode == 1:
    out = json.loads(p.stdout)
    expect("replay-fails-json", out["first_failure"]["line"] == 3 and
           out["trace_peak_requested_bytes"] == 10**15 + (1 << 20), out)
opts = path("opts.csv", "# gpumem-replay: --capacity 1GiB\n"
            "Action,Pointer,Size\nallocate,0x1000,2147483648\n")
check("replay-options-file", ["replay", opts], 1, "opts.csv:3:")
check("replay-options-override", ["replay", opts, "--capacity", "4GiB"], 0)
check("replay-options-bad", ["replay", path("ob.csv",
      "# gpumem-replay: --format json\nAction,Pointer,Size\n")], 2,
      "ob.csv:1:1: # gpumem-replay: '--format' is not an option a trace "
      "can set")
check("replay-options-bad-value", ["replay", path("ov.csv",
      "# gpumem-replay: --capacity lots\nAction,Pointer,Size\n")], 2,
      "ov.csv:1:1: # gpumem-replay: --capacity: 'lots' is not a size")

# 1b'. opposite options together are refused, not last-wins
check("replay-cross-both", ["replay", "--cross-stream", "--no-cross-stream",
      TRACE], 2, "--cross-stream and --no-cross-stream: give one")

# 1c. A claimed capacity in GB is the maker's: --claimed 80GB is 80 GiB,
# so a card reporting 76 GiB is undersized; the seed's refurbished card
# (80 GB claimed, 76 GiB real) emulated as written, at a stated scale.
check("verify-claimed-80gb", ["verify", "--claimed", "80GB", "--emulate",
      "claimed=80GiB,reported=76GiB", "--quick"], 1,
      stdout="the driver reports 76.00 GiB but the card is sold as 80.00 "
      "GiB")
p = check("verify-emulate-80gb", ["verify", "--emulate",
          "claimed=80GB,real=76GiB", "--format", "json"], 1, timeout=120)
if p.returncode == 1:
    dev = json.loads(p.stdout)["devices"][0]
    expect("verify-emulate-80gb-json", dev["verdict"] == "undersized" and
           dev["real_bytes"] == 76 << 30 and dev["emulate_scale"] == 256,
           dev.get("reason"))
# a card below a GiB: its sizes in a unit that keeps them readable
# (32.00 MiB, not 0.03 GiB), in the verify and the report tables
p = check("verify-small-table", ["verify", "--emulate",
          "claimed=32MiB,real=24MiB", "--quick"], 1,
          stdout="32.00 MiB  32.00 MiB  24.00 MiB")
expect("verify-small-table-no-gib", " 0.03 GiB" not in p.stdout, p.stdout)
p = check("report-verify-only", ["report", os.path.join(VERIFY, "node-a.json"),
          os.path.join(VERIFY, "node-b.json")], 1,
          stdout="verify reports  2")
expect("report-verify-only-sizes", "32.00 MiB  32.00 MiB  24.00 MiB" in
       p.stdout and "0.03 GiB" not in p.stdout, p.stdout)
check("verify-emulate-key", ["verify", "--emulate",
      "claimed=8GiB,real=4096TiB"], 2, "--emulate: real= is above")

# 11. One wording for a missing value and an unknown option.
for cmd in ["replay", "report", "verify", "gpus"]:
    check(cmd + "-missing-value", [cmd, "--format"], 2,
          "gpumem %s: option '--format' needs a value" % cmd)
    check(cmd + "-unknown", [cmd, "--bogus=1"], 2,
          "gpumem %s: unknown option '--bogus'" % cmd)
check("replay-cap-missing", ["replay", TRACE, "--cap"], 2,
      "option '--cap' needs a value")
check("replay-placement-bad", ["replay", TRACE, "--placement", "up"], 2,
      "--placement: 'up' is not rising or driver")
check("run-unknown", ["run", "--bogus", "--", "true"], 2,
      "gpumem run: unknown option '--bogus'")

# 9. A write error on stdout is exit 2 with a message, in every command.
if os.path.exists("/dev/full"):
    for args in (["replay", TRACE], ["replay", TRACE, "--format", "json"],
                 ["report", os.path.join(VERIFY, "node-a.json")],
                 ["verify", "--emulate", "claimed=1MiB", "--quick",
                  "--no-progress"],
                 ["gpus"], ["--help"], ["plan", os.path.join(
                     ROOT, "models", "gpt2.yaml"), "--gpu", "h100"]):
        with open("/dev/full", "w") as full:
            p = subprocess.run([GPUMEM, *args], stdout=full,
                               stderr=subprocess.PIPE, text=True)
            expect("stdout-full " + " ".join(args[:2]),
                   p.returncode == 2 and "No space left" in p.stderr,
                   "rc %d %r" % (p.returncode, p.stderr[-300:]))

# 2, 12. report: nesting, field types, directories.
check("report-deep", ["report", path("deep.json", "[" * 50000)], 2,
      "nesting too deep")
check("report-deep-valid",
      ["report", path("deep2.json", "[" * 30000 + "]" * 30000)], 2,
      "nesting too deep")
check("report-deep-obj", ["report", path("deep3.json",
                                         '{"a":' * 100000 + "1" +
                                         "}" * 100000)], 2,
      "nesting too deep")
check("report-dir", ["report", TMP], 2, "Is a directory")
check("report-device-type", ["report", path(
    "w.json", '{"kind":"gpumem-report","devices":[{"device":"x"}]}')], 2,
    "w.json:1:46: devices[0].device: must be an integer")
check("report-rank-type", ["report", path(
    "w3.json", '{"kind":"gpumem-report","rank":"zero","devices":[]}')], 2,
    "w3.json:1:32: rank: must be an integer")
check("report-missing-field", ["report", path(
    "w1.json", '{"kind":"gpumem-report","devices":[{"device":0}]}')], 2,
    "w1.json:1:36: devices[0] has no \"cap_bytes\"")
check("report-too-large", ["report", path(
    "w2.json", '{"kind":"gpumem-report","devices":[{"device":0,'
    '"cap_bytes":1,"allocated_bytes":1,"reserved_bytes":1,\n'
    '"peak_allocated_bytes":18446744073709551616}]}')], 2,
    "w2.json:2:24: devices[0].peak_allocated_bytes: must be an integer")
check("report-verdict", ["report", path(
    "v.json", '{"kind":"gpumem-verify","devices":[{"device":0,'
    '"verdict":"great"}]}')], 2, "'great' is not ok")
check("report-verify-bytes", ["report", path(
    "v2.json", '[{"device":0,"verdict":"ok","claimed_bytes":-1}]')], 2,
    "[0].claimed_bytes: must be an integer")

# 13, 14. report: CSV has one row per device; a failed card is exit 1.
nodes = [os.path.join(VERIFY, "node-a.json"),
         os.path.join(VERIFY, "node-b.json")]
p = check("report-undersized-exit-1", ["report", *nodes], 1)
p = check("report-csv", ["report", "--format", "csv", *nodes], 1)
lines = p.stdout.strip().split("\n")
expect("report-csv-rows", len(lines) == 5 and
       lines[0].startswith("source,host,device,") and
       all(len(x.split(",")) == len(lines[0].split(",")) for x in lines),
       repr(lines[:3]))
check("report-ok-exit-0", ["report", nodes[0]], 0)
emu_out = os.path.join(TMP, "emu.json")
check("verify-emulated-output", ["verify", "--no-progress", "--quick",
                                 "--emulate", "claimed=1MiB", "--output",
                                 emu_out], 0)
check("report-emulated-device", ["report", emu_out], 0, stdout="-1")

# 10, 17. verify: --output checked before the test; out-of-range values.
EMU = ["verify", "--no-progress", "--quick", "--emulate",
       "claimed=32MiB,real=24MiB"]
p = check("verify-output-unwritable",
          EMU + ["--output", os.path.join(TMP, "no", "x.json")], 2,
          "--output: ")
expect("verify-output-before-test", p.stdout == "", repr(p.stdout[:100]))
for args, needle in (
        (["--seed", "18446744073709551616"], "--seed"),
        (["--seed", "99999999999999999999999"], "--seed"),
        (["--emulate", "claimed=32MiB,claimed=16MiB"], "given twice"),
        (["--emulate", "claimed=32MiB,,"], "empty item"),
        (["--emulate", ",claimed=32MiB"], "empty item"),
        (["--emulate", "claimed=32MiB", "--device", "0"], "--device")):
    check("verify-" + " ".join(args), ["verify", "--no-progress", *args],
          2, needle)

# 7, 8. Output files: the umask, symlinks, FIFOs, devices, directories.
old = os.umask(0o022)
out = os.path.join(TMP, "v.json")
check("verify-output-mode", EMU + ["--output", out], 1)
expect("verify-output-0644", stat.S_IMODE(os.stat(out).st_mode) == 0o644,
       oct(os.stat(out).st_mode))
os.chmod(out, 0o640)
check("verify-output-keep-mode", EMU + ["--output", out], 1)
expect("verify-output-kept-0640",
       stat.S_IMODE(os.stat(out).st_mode) == 0o640)
os.umask(old)
target = path("target.json", "")
link = os.path.join(TMP, "link.json")
os.symlink("target.json", link)
check("verify-output-symlink", EMU + ["--output", link], 1)
expect("verify-output-link-kept", os.path.islink(link))
expect("verify-output-target-written", os.path.getsize(target) > 100)
svg_link = os.path.join(TMP, "link.svg")
os.symlink("target.svg", svg_link)
path("target.svg", "")
check("plan-svg-symlink", ["plan", os.path.join(ROOT, "models", "gpt2.yaml"),
                           "--gpu", "h100", "--svg", svg_link], 0)
expect("plan-svg-link-kept", os.path.islink(svg_link) and
       os.path.getsize(os.path.join(TMP, "target.svg")) > 100)
check("verify-output-dir", EMU + ["--output", TMP], 2, "Is a directory")
# A device node of our own (never the system's /dev/null: a regression
# would replace it). Needs root; skipped otherwise.
node = os.path.join(TMP, "null-node")
try:
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
except OSError:
    node = None
if node:
    check("verify-output-device", EMU + ["--output", node], 1)
    expect("device-still-a-device", stat.S_ISCHR(os.lstat(node).st_mode))
fifo = os.path.join(TMP, "fifo.json")
os.mkfifo(fifo)
rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
check("verify-output-fifo", EMU + ["--output", fifo], 1)
got = os.read(rfd, 1 << 20)
os.close(rfd)
expect("fifo-kept", stat.S_ISFIFO(os.lstat(fifo).st_mode))
expect("fifo-got-json", got.startswith(b"{"), repr(got[:40]))

# 28. gpumem help CMD is CMD --help; --help lists --version.
check("help-replay", ["help", "replay"], 0, stdout="Usage: gpumem replay")
check("help-unknown", ["help", "nosuch"], 2, "not a command")
check("help-version", ["--help"], 0, stdout="--version")

# plan --params: the tensor list needs no GPU; a custom model has none.
check("plan-params", ["plan", os.path.join(ROOT, "models", "llama-2-7b.yaml"),
                      "--params"], 0,
      stdout="model.layers.*.self_attn.q_proj.weight")
# the recipe names what the loop keeps beyond the default
check("plan-recipe-loop", ["plan", os.path.join(
    ROOT, "tests", "data", "calibration", "pending", "loops", "specs",
    "native-keep-llama-1.1b-bf16mixed.yaml"), "--format", "json"], 0,
    stdout='"recipe": "pytorch-bf16-mixed-keep-outputs-kv-cache"')
check("plan-recipe-default", ["plan", os.path.join(
    ROOT, "models", "gpt2.yaml"), "--format", "json"], 0,
    stdout='"recipe": "pytorch-bf16-mixed",')

# a 3-D MoE experts' weight shows all three dimensions
check("plan-params-3d", ["plan", os.path.join(ROOT, "models",
                                              "qwen3-30b-a3b.yaml"),
                         "--params"], 0, stdout="128 x 1536 x 2048")
check("plan-params-json", ["plan", os.path.join(ROOT, "models", "gpt2.yaml"),
                           "--params", "--format", "json",
                           "--set", "hardware.gpu=nosuch"], 0,
      stdout='"tensors"')
check("plan-params-custom", ["plan", path("custom.yaml", "model:\n"
                             "  architecture: custom\n"
                             "  parameters: 1e9\n"), "--params"], 2,
      "no Hugging Face tensors")

# A message about model.hf_config's file shows its line with a caret,
# in plan and fit alike.
HFBAD = path("hfbad.yaml", "model:\n  hf_config: %s\n" % os.path.join(
    ROOT, "tests", "data", "bad", "hf", "syntax.json"))
for cmd in ("plan", "fit"):
    p = check(cmd + "-hf-config-caret", [cmd, HFBAD, "--gpu", "h200"], 2,
              "syntax.json:7:24: JSON syntax error")
    expect(cmd + "-hf-config-caret-line",
           '"num_hidden_layers": 32' in p.stderr and "^" in p.stderr,
           p.stderr)

# So does one about training.deepspeed_config's JSON.
DSBAD = os.path.join(ROOT, "tests", "data", "bad", "ds-config-syntax.yaml")
for cmd in ("plan", "fit"):
    p = check(cmd + "-ds-config-caret", [cmd, DSBAD, "--gpu", "h200"], 2,
              "ds-syntax.json:2:37: JSON syntax error: a ',' missing "
              "after '4'")
    expect(cmd + "-ds-config-caret-line",
           '"train_micro_batch_size_per_gpu": 4\n' in p.stderr and
           "^" in p.stderr, p.stderr)

# --limit: a wrong unit is named (its case matters), a bare number below
# 1 MiB is read as bytes with a warning, the single-letter binary suffix
# is accepted quietly.
SPEC = os.path.join(ROOT, "models", "gpt2.yaml")
for cmd in ("plan", "fit"):
    check(cmd + "-limit-unit-case", [cmd, SPEC, "--limit", "80gb"], 2,
          "--limit: '80gb' is not a size: unknown unit 'gb' (units: B, KB")
    check(cmd + "-limit-no-number", [cmd, SPEC, "--limit", "GB"], 2,
          "--limit: 'GB' is not a size: not a number followed by a unit")
    p = run([cmd, SPEC, "--gpu", "h200", "--limit", "12"])
    expect(cmd + "-limit-bare-warns",
           "warning: --limit 12 has no unit and is read as 12 bytes"
           in p.stderr, p.stderr[-400:])
    p = run([cmd, SPEC, "--gpu", "h200", "--limit", "12G"])
    expect(cmd + "-limit-G-quiet", "warning" not in p.stderr and
           p.returncode in (0, 1), p.stderr[-400:])
# fit's cap column: a cap above a card's usable memory never binds, and
# the cell says so instead of showing the cap (the warning counts them)
p = run(["fit", SPEC, "--limit", "20GiB", "--gpu", "t4", "--gpu", "h200"])
rows = {ln.split()[1]: ln for ln in p.stdout.splitlines()
        if ln.startswith("Tesla T4") or ln.startswith("NVIDIA H200")}
expect("fit-cap-above-usable", "above usable" in rows.get("T4", "") and
       "20.00 GiB" in rows.get("H200", "") and
       "above usable" not in rows.get("H200", ""), p.stdout + p.stderr)
FH = path("fit-cap.html")
p = run(["fit", SPEC, "--limit", "20GiB", "--gpu", "t4", "--gpu", "h200",
         "--html", FH])
with open(FH) as f:
    page = f.read()
expect("fit-cap-above-usable-html", "<td>above usable</td>" in page and
       "<td>20.00</td>" in page, p.stderr)
check("run-limit-unit-case", ["run", "--limit", "80gb", "--", "true"], 2,
      "--limit: '80gb' is not a size: unknown unit 'gb'")
# a plan under a cap writes the card and the cap into its trace: replay
# fails at the same request, over the cap (it said "the card is full" on
# a card of the cap's size)
CT = path("capped.csv")
run(["plan", os.path.join(ROOT, "models", "llama-2-7b.yaml"), "--gpu",
     "h100", "--limit", "12GiB", "--trace", CT])
p = run(["replay", CT])
expect("replay-capped-plan-trace", p.returncode == 1 and "failed (over the "
       "cap): 11.45 GiB allocated, 11.99 GiB reserved on a 79.20 GiB card"
       in p.stderr, p.stderr[-400:])
# gpus NAME...: those entries, found as --gpu finds them
p = run(["gpus", "h100", "l40s"])
expect("gpus-names", p.returncode == 0 and len(p.stdout.splitlines()) == 3
       and "NVIDIA H100 80GB HBM3" in p.stdout and "NVIDIA L40S" in
       p.stdout, p.stdout + p.stderr)
check("gpus-unknown-name", ["gpus", "h1000"], 2,
      "unknown GPU 'h1000'; closest: h100-sxm, rtx-a6000")
# run's bare --limit is warned about once, not again by the library in
# each process of the command (it was three times for sh -c 'true; true')
p = run(["run", "--limit", "12", "--", "sh", "-c", "true; true"])
expect("run-limit-bare-once", p.stderr.count("has no unit") == 1,
       p.stderr[-400:])
# replay's and verify's sizes give the reason as every other option does;
# replay's bare --cap below 1 MiB warns as every cap does (--cap 1 is one
# byte, 1.0 the whole card)
check("replay-capacity-unit", ["replay", TRACE, "--capacity", "80gb"], 2,
      "--capacity: '80gb' is not a size: unknown unit 'gb'")
check("replay-cap-unit", ["replay", TRACE, "--cap", "80gb"], 2,
      "(a fraction has a decimal point: 1.0 is the whole card): unknown "
      "unit 'gb'")
p = run(["replay", TRACE, "--cap", "1"])
expect("replay-cap-bare-warns", "warning: --cap 1 has no unit and is read "
       "as 1 bytes" in p.stderr and p.returncode == 1, p.stderr[-400:])
check("verify-limit-unit", ["verify", "--emulate", "claimed=8GB", "--limit",
                            "80gb"], 2,
      "--limit: '80gb' is not a size: unknown unit 'gb'")
check("verify-emulate-unit", ["verify", "--emulate", "claimed=80gb"], 2,
      "--emulate: claimed='80gb' is not a size: unknown unit 'gb'")

# An inference spec's training section is ignored, with one warning.
INF = path("inf-training.yaml", "task: inference\nmodel:\n"
           "  architecture: gpt2\n  layers: 2\n  hidden_size: 64\n"
           "  attention_heads: 2\n  vocab_size: 100\n"
           "training:\n  micro_batch_size: 4\n")
for cmd in ("plan", "fit"):
    p = run([cmd, INF, "--gpu", "h200"])
    expect(cmd + "-inference-training-warns", p.returncode in (0, 1) and
           p.stderr.count("inf-training.yaml:8:1: training: ignored for "
                          "task inference") == 1 and
           p.stderr.startswith("gpumem %s: " % cmd), p.stderr[-400:])
p = run(["plan", SPEC, "--gpu", "h200"])
expect("plan-train-no-ignored-warning", "ignored" not in p.stderr,
       p.stderr[-400:])

# The plan table's batch shape says where an unwritten length came from.
p = run(["plan", INF, "--gpu", "h200"])
expect("plan-shape-inference", "batch shape batch 1 x 1024 prompt tokens "
       "(default: model.max_position_embeddings) + 0 generated"
       in " ".join(p.stdout.split()), p.stdout[:400])
LL = path("llama-noseq.yaml", "model:\n  architecture: llama\n"
          "  layers: 2\n  hidden_size: 64\n  attention_heads: 2\n"
          "  vocab_size: 100\ntraining:\n  micro_batch_size: 3\n")
p = run(["plan", LL, "--gpu", "h200"])
expect("plan-shape-default-2048", "micro-batch 3 x 2048 tokens (default "
       "2048)" in p.stdout, p.stdout[:400])
p = run(["plan", LL, "--gpu", "h200", "--set", "model.max_position_embeddings=131072"])
expect("plan-shape-default-max-pos", "micro-batch 3 x 131072 tokens "
       "(default: model.max_position_embeddings)" in p.stdout, p.stdout[:400])
p = run(["plan", LL, "--gpu", "h200", "--set", "training.sequence_length=512"])
expect("plan-shape-given", "micro-batch 3 x 512 tokens\n" in p.stdout,
       p.stdout[:400])

# fit exits 1 when no card fits (planner/README.md § gpumem fit).
p = run(["fit", os.path.join(ROOT, "tests", "data", "plan",
                             "llama-2-7b-h200.yaml"), "--gpu", "l4"])
expect("fit-none-fits-exit-1", p.returncode == 1, "rc %d" % p.returncode)

# Warnings name the command that gave them ("gpumem plan: warning:", as
# models/README.md shows its messages), in plan and fit alike; no line
# is prefixed with the bare program name.
V100 = os.path.join(ROOT, "models", "llama-2-7b.yaml")
for cmd in ("plan", "fit"):
    p = run([cmd, V100, "--gpu", "v100-32gb"])
    lines = [ln for ln in p.stderr.splitlines() if "warning:" in ln]
    expect(cmd + "-warning-prefix", lines and all(
        ln.startswith("gpumem %s: warning: " % cmd) for ln in lines),
        p.stderr[-400:])

# Typos of options and commands get the spec keys' "did you mean".
for name, args, hint in (
        ("plan-gpus", ["plan", V100, "--gpus", "h100"], "'--gpu'"),
        ("fit-global_batch", ["fit", V100, "--global_batch", "8"],
         "'--global-batch'"),
        ("plan-format-eq", ["plan", V100, "--formt=json"], "'--format'"),
        ("gpus-format", ["gpus", "--fromat", "json"], "'--format'"),
        ("replay-format", ["replay", "--formats", "json", "x"], "'--format'"),
        ("verify-quik", ["verify", "--quik"], "'--quick'"),
        ("command-plna", ["plna"], "'plan'"),
        ("help-plna", ["help", "plna"], "'plan'")):
    check("did-you-mean-" + name, args, 2, "did you mean %s?" % hint)
check("no-hint-far-option", ["plan", V100, "--zzzzzzzz"], 2,
      "unknown option '--zzzzzzzz'\n")

# fit's fewest GPUs of a run with expert_parallel 8 (tensor parallel 1):
# Megatron-Core's expert grid needs data_parallel a multiple of 8, so no
# smaller degree counts however little memory it needs.
p = run(["fit", os.path.join(ROOT, "tests", "data", "megatron",
                             "gpt3_moe_mcore_te_ep8_resume_torch_dist_"
                             "dist_optimizer.yaml"), "--gpu", "h100",
         "--format", "json"])
expect("fit-min-gpus-expert-parallel",
       p.returncode == 0 and json.loads(p.stdout)["gpus"][0]["min_gpus"] == 8,
       p.stdout[:400] + p.stderr[:400])

# --params of a MoE spec under megatron lists Megatron's MoE layer, whose
# count is the plan's (not the dense gpt2 MLP's); the case passes
# --disable-bias-linear (model.add_bias_linear: false): 240,510,464 with
# the biases, less 12 layers x (3 x 512 + 512 attention biases + 8 x
# (2048 + 512) experts' biases) = 270,336
moe = os.path.join(ROOT, "tests", "data", "megatron",
                   "gpt3_mcore_te_tp2_pp1_te_8experts_etp1_ep4.yaml")
p = run(["plan", moe, "--params", "--format", "json"])
q = run(["plan", moe, "--format", "json"])
pj = json.loads(p.stdout) if p.returncode == 0 else {}
names = [t["name"] for t in pj.get("tensors", [])]
expect("plan-params-megatron-moe",
       q.returncode == 0 and pj.get("parameters") ==
       json.loads(q.stdout)["parameters"] == 240240128 and
       "decoder.layers.*.mlp.router.weight" in names and
       not any(".mlp.c_fc" in n for n in names) and
       not any(n.endswith("c_attn.bias") or
               n.endswith("linear_fc1.bias") for n in names),
       p.stdout[:400])

# model.parameters is checked against that count too: no warning for
# the MoE layer's 240,240,128
p = run(["plan", moe, "--set", "model.parameters=240240128"])
expect("plan-parameters-megatron-moe", p.returncode == 0 and
       "differs from" not in p.stderr, p.stderr[:400])

# the --html page says how the experts are split
page = os.path.join(TMP, "mixtral-megatron.html")
p = run(["plan", os.path.join(ROOT, "tests", "data", "plan",
                              "mixtral-8x7b-megatron.yaml"), "--html", page])
expect("plan-html-expert-parallel", p.returncode == 0 and
       "experts split over 8 ranks" in open(page, encoding="utf-8").read(),
       p.stderr[:400])

print("%d failures" % failures)
sys.exit(1 if failures else 0)
