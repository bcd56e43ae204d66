#!/usr/bin/env python3
"""test_multi.py - measure_multi.py without GPUs or torch: every several-GPU
calibration configuration is run with the PyTorch wrapping its name says
(tp -> tensor parallel, fsdp -> FSDP2, zero1 -> DDP + ZeroRedundancyOptimizer,
ddp -> DDP), what cannot be run exactly is refused, and --merge joins
single-configuration files in manifest order. Run by meson (suite
calibration)."""

import copy
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import gmspec  # noqa: E402
import measure  # noqa: E402
import measure_multi  # noqa: E402
from hfbuild import Unsupported  # noqa: E402

MANIFEST = os.path.join(HERE, "..", "..", "tests", "data", "calibration",
                        "multi", "manifest.json")


# what parallel_factory() hands measure.run_train for each wrapping:
# (the model wrapper's maker, the optimizer maker's or None)
MAKERS = {"tensor-parallel": ("tensor_parallel", None),
          "fsdp": ("fsdp_wrap", None),
          "zero1": ("ddp_wrap", "zero1_optimizer"),
          "ddp": ("ddp_wrap", None)}


def maker(fn):
    return fn.__qualname__.split(".")[0] if fn else None


def by_name(name):
    """The wrapping a configuration's name asks for (independent of the
    spec's fields, which scheme() reads)."""
    for key, kind in (("-tp", "tensor-parallel"), ("-fsdp", "fsdp"),
                      ("-zero1", "zero1"), ("-ddp", "ddp")):
        if key in name:
            return kind
    raise ValueError(name)


def refused(spec, what):
    try:
        kind = measure_multi.scheme(spec)
    except Unsupported as e:
        print(f"ok   refused {what}: {e}")
        return 0
    print(f"FAIL {what}: ran as {kind}, expected a refusal")
    return 1


def main():
    bad = 0
    configs = measure.load_manifest(MANIFEST)
    parallel = measure_multi.parallel_factory(None, 2)
    first = {}
    for c in configs:
        spec = gmspec.load(c["spec"], c["set"])
        kind = measure_multi.scheme(spec)
        wrap, opt = parallel(spec)
        got = (maker(wrap), maker(opt))
        if kind != by_name(c["name"]) or got != MAKERS[kind]:
            print(f"FAIL {c['name']}: runs as {kind}, wrapped by {got}")
            bad += 1
        first.setdefault(kind, spec)
    print(f"ok   {len(configs)} configurations run as their names say"
          if not bad else f"{bad} configurations misrouted")
    tp = first["tensor-parallel"]
    s = copy.deepcopy(tp)
    s["parallelism"]["built_whole"] = False
    bad += refused(s, "tensor parallel not built whole")
    s = copy.deepcopy(tp)
    s["parallelism"]["tensor_parallel_vocab"] = "sharded"
    bad += refused(s, "a sharded vocabulary")
    s = copy.deepcopy(first["ddp"])
    s["parallelism"]["zero_stage"] = 2
    bad += refused(s, "ZeRO-2")
    s = copy.deepcopy(first["ddp"])
    s["parallelism"]["pipeline_parallel"] = 2
    bad += refused(s, "pipeline parallel")
    bad += merge_case(configs)
    bad += done_case()
    print(f"{bad} failed")
    return 1 if bad else 0


def done_case():
    """measure.part_done (the runners' --done): a part is kept only when
    its configurations all ended ok, oom or refused."""
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        for status, want in (("ok", True), ("oom", True), ("refused", True),
                             ("error", False), ("skipped", False)):
            p = os.path.join(tmp, status + ".json")
            with open(p, "w") as f:
                json.dump({"configs": [{"name": "x", "status": status}]}, f)
            if measure.part_done(p) != want:
                print(f"FAIL part_done on status {status}: not {want}")
                bad += 1
        for text in ("", "[]", '{"configs": []}'):
            p = os.path.join(tmp, "odd.json")
            with open(p, "w") as f:
                f.write(text)
            if measure.part_done(p):
                print(f"FAIL part_done on {text!r}: done")
                bad += 1
        if measure.part_done(os.path.join(tmp, "missing.json")):
            print("FAIL part_done on a missing file: done")
            bad += 1
    print(f"{'ok  ' if not bad else 'FAIL'} part_done keeps ok, oom, "
          "refused only")
    return bad


def merge_case(configs):
    """Two parts written out of order join in manifest order, with the
    first part's environment and the sum of their seconds."""
    a, b = configs[0]["name"], configs[1]["name"]
    with tempfile.TemporaryDirectory() as tmp:
        parts = []
        for i, name in enumerate((b, a)):
            p = os.path.join(tmp, f"{name}.json")
            with open(p, "w") as f:
                json.dump({"format": measure.FORMAT,
                           "environment": {"gpu_name": f"gpu{i}"},
                           "settings": {"steps": 3}, "total_s": 10.5,
                           "configs": [{"name": name, "status": "ok"}]}, f)
            parts.append(p)
        out = os.path.join(tmp, "out.json")
        r = subprocess.run([sys.executable,
                            os.path.join(HERE, "measure_multi.py"),
                            "--manifest", MANIFEST, "--merge", *parts,
                            os.path.join(tmp, "missing.json"),
                            "--out", out], capture_output=True, text=True)
        with open(out) as f:
            doc = json.load(f)
    names = [c["name"] for c in doc["configs"]]
    ok = (r.returncode == 1 and "missing.json" in r.stderr and
          names == [a, b] and doc["environment"]["gpu_name"] == "gpu0" and
          doc["total_s"] == 21.0)
    print(f"{'ok  ' if ok else 'FAIL'} merge: exit {r.returncode}, "
          f"order {names}, total_s {doc['total_s']}")
    bad = 0 if ok else 1
    # a part that is not a measurement, and a configuration that is not
    # in the manifest: reported, left out, exit 1
    with tempfile.TemporaryDirectory() as tmp:
        odd = os.path.join(tmp, "odd.json")
        with open(odd, "w") as f:
            f.write("[]")
        other = os.path.join(tmp, "other.json")
        with open(other, "w") as f:
            json.dump({"format": measure.FORMAT, "environment": {},
                       "settings": {}, "configs": [
                           {"name": a, "status": "ok"},
                           {"name": "not-in-manifest", "status": "ok"}]},
                      f)
        out = os.path.join(tmp, "out.json")
        r = subprocess.run([sys.executable,
                            os.path.join(HERE, "measure_multi.py"),
                            "--manifest", MANIFEST, "--out", out,
                            "--merge", odd, other],
                           capture_output=True, text=True)
        with open(out) as f:
            names = [c["name"] for c in json.load(f)["configs"]]
    ok = (r.returncode == 1 and "odd.json" in r.stderr and
          "not-in-manifest" in r.stderr and names == [a])
    print(f"{'ok  ' if ok else 'FAIL'} merge of odd parts: exit "
          f"{r.returncode}, kept {names}")
    return bad + (0 if ok else 1)


if __name__ == "__main__":
    sys.exit(main())
