#!/usr/bin/env python3
"""gpumem fit and gpumem plan share one definition of "fits" (the
replay's): for bundled specs on several cards, fit's largest micro-batch
plans as fitting and the next candidate (micro-batch + 1, or the next
divisor of global / data_parallel when training with a global batch)
does not; its fewest GPUs plan as fitting at the micro-batch it names
and one degree fewer does not (inference: the tensor-parallel degree, and
half of it); min gpus is never 0 next to a micro-batch that fits.

usage: check_fit_edge.py GPUMEM MODELS_DIR
"""
import json
import subprocess
import sys

CASES = [
    ("ernie-2.5b-a100-40gb.yaml", [], ["a100-40gb", "h200", "l4"]),
    ("ernie-2.5b-a100-40gb.yaml", ["training.micro_batch_size=1"],
     ["a100-40gb"]),
    ("gpt2-medium.yaml", [], ["a100-40gb", "NVIDIA L4"]),
    ("llama-2-7b.yaml", [], ["a100-80gb", "Tesla V100-SXM2-32GB"]),
    ("bert-base-uncased.yaml", [], ["Tesla T4", "h200"]),
    ("transformer-300m-8x-a100.yaml", [], ["a100-40gb"]),
    ("gpt2.yaml", ["task=inference", "inference.prompt_length=1000",
                   "inference.generate_length=16"], ["NVIDIA L4"]),
    ("llama-3-8b.yaml", ["task=inference", "inference.batch_size=16",
                         "inference.prompt_length=4096",
                         "inference.generate_length=64",
                         "parallelism.data_parallel=1",
                         "parallelism.zero_stage=0"], ["rtx-4090"]),
]


class Refused(Exception):
    pass


def run(gpumem, args):
    r = subprocess.run([gpumem] + args, capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise Refused(f"{args}: exit {r.returncode}: {r.stderr.strip()}")
    return json.loads(r.stdout)


def sets(kv):
    out = []
    for s in kv:
        out += ["--set", s]
    return out


def divisors(n):
    return sorted(d for d in range(1, n + 1) if n % d == 0)


def main():
    gpumem, models = sys.argv[1], sys.argv[2]
    errs = []
    n = 0
    for spec, kv, gpus in CASES:
        path = models + "/" + spec
        train = "task=inference" not in kv
        for g in gpus:
            try:
                errs += check(gpumem, path, spec, kv, g, train)
            except Refused as e:
                errs.append(f"{spec} {kv} on {g}: {e}")
            n += 1
    for e in errs:
        print(e)
    print(f"{n} spec x card pairs checked")
    return 1 if errs else 0


def check(gpumem, path, spec, kv, g, train):
    errs = []
    if True:
        if True:
            f = run(gpumem, ["fit", path, "--gpu", g, "--format", "json"]
                    + sets(kv))["gpus"][0]

            def fits(mb, dp=None):
                extra = [f"training.micro_batch_size={mb}",
                         f"inference.batch_size={mb}"]
                if dp is not None:
                    # inference's degree is tensor parallel (a replica)
                    extra.append(f"parallelism.data_parallel={dp}" if train
                                 else f"parallelism.tensor_parallel={dp}")
                p = run(gpumem, ["plan", path, "--gpu", g, "--format",
                                 "json"] + sets(kv + extra))
                return p["fits"], p

            where = f"{spec} {kv} on {g}"
            mb = f["max_micro_batch"]
            # the spec's degree and global batch, as plan reads them
            spec_txt = open(path).read()
            dp = 1
            for line in spec_txt.splitlines():
                if line.strip().startswith("data_parallel:"):
                    dp = int(line.split(":")[1])
            for s in kv:
                if s.startswith("parallelism.data_parallel="):
                    dp = int(s.split("=")[1])
            gb = 0
            if train:
                for line in spec_txt.splitlines():
                    if line.strip().startswith("global_batch_size:"):
                        gb = int(line.split(":")[1])
            if gb:
                cand = [d for d in divisors(gb // dp)]
                nxt = [d for d in cand if d > mb]
                nxt = nxt[0] if nxt else None
            else:
                nxt = mb + 1
            if mb and not fits(mb)[0]:
                errs.append(f"{where}: max micro batch {mb} does not fit")
            if nxt is not None and (mb or not gb) and fits(nxt)[0]:
                errs.append(f"{where}: {nxt} fits too (fit said {mb})")
            if mb == 0 and fits(1 if not gb else cand[0])[0]:
                errs.append(f"{where}: fit said 0 but the smallest fits")
            k = f["min_gpus"]
            smb = 1
            for line in spec_txt.splitlines():
                # (the CASES' inference specs have no inference section)
                if train and line.strip().startswith("micro_batch_size:"):
                    smb = int(line.split(":")[1])
            for s in kv:
                if s.startswith("training.micro_batch_size=") or (
                        not train and s.startswith("inference.batch_size=")):
                    smb = int(s.split("=")[1])
            kmb = f.get("min_gpus_micro_batch", smb)
            print(f"{where}: max micro batch {mb} (next {nxt}), "
                  f"min gpus {k} at micro {kmb}")
            if mb and not k:
                errs.append(f"{where}: min gpus 0 next to micro {mb}")
            if k:
                d = k  # tensor and pipeline parallel are 1 here
                if not fits(kmb, d)[0]:
                    errs.append(f"{where}: min gpus {k} at micro {kmb} "
                                f"does not fit")
                lower = [x for x in range(d - 1, 0, -1)
                         if not gb or (gb % (kmb * x) == 0)]
                if lower and train and fits(kmb, lower[0])[0]:
                    errs.append(f"{where}: {lower[0]} GPUs fit too at "
                                f"micro {kmb} (fit said {k})")
                if not train and kmb != smb:
                    for t in (2, 4, 8):
                        if fits(smb, t)[0]:
                            errs.append(f"{where}: the spec's batch {smb} "
                                        f"fits at tensor parallel {t} "
                                        f"(fit said {k} at batch {kmb})")
                            break
                if not train and k > 1 and fits(kmb, k // 2)[0]:
                    errs.append(f"{where}: tensor parallel {k // 2} fits "
                                f"too at batch {kmb} (fit said {k})")
    return errs


if __name__ == "__main__":
    sys.exit(main())
