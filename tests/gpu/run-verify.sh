#!/usr/bin/env bash
# The verifier on a real GPU, to run on a GPU machine:
#   bash tests/gpu/run-verify.sh BUILD_DIR OUT_DIR
# 1. clean --quick and --full on device 0, 5 times each (no false alarm
#    allowed), with pass timings and bandwidth;
# 2. --device all (every GPU of the machine at once);
# 3. VMM fakes (real/c physical allocations of c bytes, mapped again and
#    again) at a power-of-two and at non-power-of-two real sizes: each
#    must be caught as undersized with exactly the real size (VMM_REAL
#    below); a size off the granularity must be refused (exit 2).
# Writes OUT_DIR/*.json (the reports) and OUT_DIR/verify-gpu.md (summary
# with GPU, driver, CUDA and torch versions). Well under 4 minutes.
set -u
build="$1"
out="$2"
gpumem="$build/tools/gpumem/gpumem"
mkdir -p "$out"
fail=0

run() { # NAME WANT_EXIT ARGS...
	local name="$1" want="$2" t0 t1 rc
	shift 2
	t0=$EPOCHREALTIME
	"$gpumem" verify --no-progress --format json "$@" \
		>"$out/$name.json" 2>"$out/$name.err"
	rc=$?
	t1=$EPOCHREALTIME
	echo "$name $rc $t0 $t1" >>"$out/runs.txt"
	if [ "$rc" != "$want" ]; then
		echo "FAIL: $name exit $rc (want $want)"; cat "$out/$name.err"
		fail=1
	fi
}

: >"$out/runs.txt"
for i in 1 2 3 4 5; do run "quick-$i" 0 --device 0 --quick; done
for i in 1 2 3 4 5; do run "full-$i" 0 --device 0 --full; done
run all-quick 0 --device all --quick
run vmm-48g-16g 1 --device 0 --quick --emulate-vmm claimed=48GiB,real=16GiB
run vmm-40g-12g 1 --device 0 --full --emulate-vmm claimed=40GiB,real=12GiB
run vmm-100g-34g 1 --device 0 --quick --emulate-vmm claimed=100GiB,real=34GiB
# off the 2 MiB allocation granularity: refused, naming the option
run usage-vmm-13m 2 --device 0 --quick --emulate-vmm claimed=40GiB,real=13MiB

python3 - "$out" <<'PY' || fail=1
import json, os, subprocess, sys
out = sys.argv[1]
def sh(cmd):
    try:
        return subprocess.run(cmd, shell=True, capture_output=True,
                              text=True, timeout=60).stdout.strip()
    except Exception as e:
        return "n/a (%s)" % e
walls = {l.split()[0]: (int(l.split()[1]),
                        float(l.split()[3]) - float(l.split()[2]))
         for l in open(os.path.join(out, "runs.txt"))}
lines = ["# gpumem verify on a GPU", "",
         "- GPU: " + sh("nvidia-smi --query-gpu=name,memory.total,"
                        "driver_version --format=csv,noheader"),
         "- CUDA (nvcc): " + sh("nvcc --version | tail -1"),
         "- torch: " + sh("python3 -c 'import torch; print(torch.__version__,"
                          " torch.version.cuda)'"), "",
         "| run | exit | verdict | tested GiB | real GiB | passes s | "
         "wall after context s | process wall s | GB/s | write GB/s | "
         "verify GB/s | errors |",
         "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- "
         "| --- |"]
# The VMM fakes' real sizes (GiB): each must be found exactly.
VMM_REAL = {"vmm-48g-16g": 16, "vmm-40g-12g": 12, "vmm-100g-34g": 34}
bad = 0
notes = []  # below the table: lines inside it would end it
for name in sorted(walls):
    code, wall = walls[name]
    if name.startswith("usage-"):
        continue  # refused by design; its exit code is checked above
    try:
        doc = json.load(open(os.path.join(out, name + ".json")))
    except Exception:
        try:
            why = open(os.path.join(out, name + ".err")).read().strip()
        except OSError:
            why = ""
        lines.append("| %s | %d | no report | | | | | %.2f | | | | |"
                     % (name, code, wall))
        notes.append("- %s: %s" % (name, (why.splitlines() or ["?"])[-1]))
        bad += 1
        continue
    for d in doc["devices"]:
        real = ("%.2f" % (d["real_bytes"] / 2**30)
                if d.get("real_bytes") else "")
        lines.append("| %s (dev %s) | %d | %s | %.2f | %s | %.3f | %.3f | "
                     "%.2f | %.0f | %.0f | %.0f | %d |" % (
            name, d["device"], code, d["verdict"],
            d.get("tested_bytes", 0) / 2**30,
            real, d.get("seconds", 0),
            d.get("wall_seconds", 0), wall, d["bandwidth_gbps"],
            d.get("write_gbps", 0), d.get("verify_gbps", 0), d["errors"]))
        nv = d.get("nvml", {})
        if not nv.get("present"):
            notes.append("- %s: NVML: %s" % (name, nv.get("error", "?")))
        if name in VMM_REAL:
            want = VMM_REAL[name] * 2**30
            if d["verdict"] != "undersized" or d.get("real_bytes") != want:
                bad += 1
                notes.append("- %s: WRONG: want undersized, real %d GiB"
                             % (name, VMM_REAL[name]))
        elif d["verdict"] != "ok":
            bad += 1
            notes.append("- %s: FALSE ALARM: %s" % (name, d.get("reason")))
if notes:
    lines += ["", "Problems and notes:", ""] + notes
try:
    full = json.load(open(os.path.join(out, "full-1.json")))["devices"][0]
except Exception:
    full = {}
lines += ["", "Passes of full-1:", "", "| pass | GB moved | s | GB/s | errors |",
          "| --- | --- | --- | --- | --- |"]
for p in full.get("passes", []):
    lines.append("| %s | %.1f | %.4f | %.0f | %d |" % (
        p["name"], p["moved_bytes"] / 1e9, p["seconds"], p["gbps"],
        p["errors"]))
lines.append("")
lines.append("%d problems" % bad)
open(os.path.join(out, "verify-gpu.md"), "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
sys.exit(1 if bad else 0)
PY
[ $fail -eq 0 ] && echo "run-verify: PASS" || echo "run-verify: FAIL"
exit $fail
