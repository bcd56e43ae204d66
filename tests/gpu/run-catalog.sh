#!/usr/bin/env bash
# GPU check of the catalog against a real card (run by a maintainer on a GPU
# machine; needs nvidia-smi, python3; torch optional).
#   tests/gpu/run-catalog.sh BUILD_DIR OUT_DIR
# For every visible GPU: is nvidia-smi's name in the catalog, do its
# memory.total, PCI device id and compute capability match the entry, is
# CUDA's total above the undersized floor (min_total_bytes), and how much
# memory a PyTorch training step uses outside the caching allocator
# compared with cuda_context_bytes. Writes OUT_DIR/catalog-gpu.json and
# OUT_DIR/catalog-gpu.md. Takes well under a minute.
set -u
build=${1:?usage: run-catalog.sh BUILD_DIR OUT_DIR}
out=${2:?usage: run-catalog.sh BUILD_DIR OUT_DIR}
mkdir -p "$out"
here=$(cd "$(dirname "$0")/../.." && pwd)

# The catalog as gpumem prints it (the compiled-in table); fall back to
# reading models/gpus.yaml with PyYAML if the binary cannot run here.
if ! "$build/tools/gpumem/gpumem" gpus --format json >"$out/catalog.json" \
	2>"$out/gpumem-stderr.txt"; then
	echo "gpumem did not run (see gpumem-stderr.txt); using PyYAML" >&2
	rm -f "$out/catalog.json"
fi

nvidia-smi --query-gpu=index,name,memory.total,memory.reserved,pci.device_id,compute_cap,driver_version \
	--format=csv,noheader,nounits >"$out/nvidia-smi.csv" 2>&1 || {
	echo "no nvidia-smi / no GPU" >&2
	exit 77
}

python3 - "$here" "$out" <<'PY'
import csv, json, os, subprocess, sys
here, out = sys.argv[1], sys.argv[2]
path = os.path.join(out, "catalog.json")
if os.path.exists(path):
    cat = json.load(open(path))
else:
    import yaml
    doc = yaml.safe_load(open(os.path.join(here, "models/gpus.yaml")))
    archs = {a["name"]: a for a in doc["architectures"]}
    cat = []
    for g in doc["gpus"]:
        mins = [g["total_mib"]] + [g[k] for k in ("total_other_ecc_mib", "total_legacy_mib", "cuda_total_mib") if k in g]
        cat.append({"name": g["name"], "aliases": ", ".join(g["aliases"]),
                    "total_bytes": g["total_mib"] << 20,
                    "pci_device_id": "0x%04x" % g["pci_device_id"] if "pci_device_id" in g else None,
                    "compute_capability": str(g["compute_capability"]),
                    "min_total_bytes": int((min(mins) << 20) * (1 - g["tolerance"])),
                    "cuda_context_bytes": g.get("cuda_context_mib", archs[g["architecture"]]["cuda_context_mib"]) << 20})
by_name = {g["name"]: g for g in cat}
rows = list(csv.reader(open(os.path.join(out, "nvidia-smi.csv"))))
res = {"driver": None, "torch": None, "cuda": None, "devices": []}
try:
    import torch
    res["torch"], res["cuda"] = torch.__version__, torch.version.cuda
except Exception as e:
    torch = None
for r in rows:
    idx, name, total, reserved, pci, cc, drv = [x.strip() for x in r]
    res["driver"] = drv
    d = {"device": int(idx), "name": name, "nvidia_smi_total_mib": int(total),
         "nvidia_smi_reserved_mib": int(reserved), "pci_device_id": pci, "compute_cap": cc}
    g = by_name.get(name)
    d["in_catalog"] = g is not None
    if g:
        d["catalog_total_mib"] = g["total_bytes"] >> 20
        d["total_matches"] = d["catalog_total_mib"] == int(total)
        # nvidia-smi prints device and vendor: 0x233510DE -> 0x2335
        pid = "0x" + pci[2:6].lower() if len(pci) == 10 else pci.lower()
        d["catalog_pci_device_id"] = g["pci_device_id"]
        d["pci_matches"] = g["pci_device_id"] == pid
        d["cc_matches"] = g["compute_capability"] == cc
        d["min_total_mib"] = g["min_total_bytes"] / 2**20
        d["nvml_total_above_floor"] = int(total) * 2**20 >= g["min_total_bytes"]
        d["catalog_cuda_context_mib"] = g["cuda_context_bytes"] >> 20
    res["devices"].append(d)

# One training step per device 0 in a child process: memory outside the
# allocator = nvidia-smi's per-process use - torch's max reserved.
if torch is not None and torch.cuda.is_available():
    code = r'''
import json, os, subprocess, torch
torch.cuda.init(); dev = torch.device("cuda:0")
free, total = torch.cuda.mem_get_info(0)
m = torch.nn.Sequential(*[torch.nn.Linear(4096, 4096) for _ in range(8)]).to(dev)
opt = torch.optim.AdamW(m.parameters())
x = torch.randn(64, 4096, device=dev)
for _ in range(3):
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = m(x).float().pow(2).mean()
    loss.backward(); opt.step(); opt.zero_grad()
torch.cuda.synchronize()
q = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"], capture_output=True, text=True).stdout
used = [int(l.split(",")[1]) for l in q.splitlines() if l.split(",")[0].strip() == str(os.getpid())]
print(json.dumps({"cuda_total_mib": total / 2**20, "process_used_mib": used[0] if used else None,
                  "max_reserved_mib": torch.cuda.max_memory_reserved() / 2**20}))
'''
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180)
    try:
        t = json.loads(p.stdout.strip().splitlines()[-1])
        d = res["devices"][0]
        d.update(t)
        if t["process_used_mib"] is not None:
            d["outside_allocator_mib"] = t["process_used_mib"] - t["max_reserved_mib"]
        if "min_total_mib" in d:
            d["cuda_total_above_floor"] = t["cuda_total_mib"] >= d["min_total_mib"]
    except Exception:
        res["torch_error"] = p.stderr[-2000:]
json.dump(res, open(os.path.join(out, "catalog-gpu.json"), "w"), indent=2)
with open(os.path.join(out, "catalog-gpu.md"), "w") as f:
    f.write(f"# Catalog vs real GPU\n\ndriver {res['driver']}, torch {res['torch']}, CUDA {res['cuda']}\n\n")
    for d in res["devices"]:
        f.write("## device %d: %s\n\n" % (d["device"], d["name"]))
        for k, v in d.items():
            f.write(f"- {k}: {v}\n")
        f.write("\n")
print(open(os.path.join(out, "catalog-gpu.md")).read())
bad = [d for d in res["devices"] if not d["in_catalog"] or not d.get("total_matches") or not d.get("pci_matches")]
sys.exit(1 if bad else 0)
PY
