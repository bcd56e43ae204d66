#!/usr/bin/env python3
"""The user-facing contract, name by name: every subcommand, flag, spec
key and value, JSON key, --emulate field and preload variable that the
project's fixed interface spells is accepted by (or present in the output
of) the built gpumem. A name missing here is a name a user's script
breaks on. Usage: contract.py GPUMEM SOURCE_ROOT BUILD_ROOT"""
import json
import os
import subprocess
import sys
import tempfile

GPUMEM, ROOT, BUILD = sys.argv[1], os.path.abspath(sys.argv[2]), sys.argv[3]
TMP = tempfile.mkdtemp(prefix="gpumem-contract-")
failures = []
checked = 0


def check(cond, what):
    global checked
    checked += 1
    if not cond:
        failures.append(what)
        print("FAIL", what)


def run(*args, env=None):
    return subprocess.run([GPUMEM, *args], capture_output=True, text=True,
                          env=env)


def path(name, text):
    p = os.path.join(TMP, name)
    with open(p, "w") as f:
        f.write(text)
    return p


def plan_json(*args):
    p = run("plan", *args, "--format", "json")
    try:
        return p, json.loads(p.stdout)
    except ValueError:
        return p, None


def spelled(p):
    """The run took the names it was given: ok, "no", or refused for a
    reason other than a name it does not know."""
    if p.returncode in (0, 1):
        return True
    return p.returncode == 2 and "unknown key" not in p.stderr and \
        "unknown value" not in p.stderr and "unknown option" not in p.stderr


LLAMA = os.path.join(ROOT, "models", "llama-2-7b.yaml")
GPT2 = os.path.join(ROOT, "models", "gpt2.yaml")
MIXTRAL_MG = os.path.join(ROOT, "tests", "data", "plan",
                          "mixtral-8x7b-megatron.yaml")

# ---- subcommands and their flags
for cmd in ("plan", "fit", "gpus", "verify", "run", "replay", "report"):
    check(run(cmd, "--help").returncode == 0, "subcommand %s --help" % cmd)
for fmt in ("table", "json", "yaml", "csv"):
    check(run("plan", GPT2, "--gpu", "h100", "--format", fmt).returncode
          == 0, "plan --format " + fmt)
    check(run("gpus", "--format", fmt).returncode == 0, "gpus --format " + fmt)
svg, html = os.path.join(TMP, "p.svg"), os.path.join(TMP, "p.html")
check(run("plan", GPT2, "--gpu", "h100", "--svg", svg).returncode == 0 and
      os.path.getsize(svg) > 0, "plan --svg FILE")
for cmd in ("plan", "fit"):
    p = run(cmd, GPT2, "--gpu", "h100", "--html", html)
    check(p.returncode in (0, 1) and os.path.getsize(html) > 0,
          cmd + " --html FILE")
    os.remove(html)
    for flag, val in (("--fraction", "0.9"), ("--limit", "80GB"),
                      ("--limit", "74.5GiB"), ("--limit", "81920MiB")):
        p = run(cmd, GPT2, "--gpu", "h100", flag, val)
        check(p.returncode in (0, 1), "%s %s %s: %s" % (cmd, flag, val,
                                                       p.stderr.strip()))
p = run("plan", GPT2, "--gpu", "h100", "--set", "training.micro_batch_size=4",
        "--set", "training.sequence_length=512")
check(p.returncode == 0, "plan --set KEY=VALUE (repeated)")
p = run("fit", LLAMA, "--gpu", "h100", "--gpu", "a100-80gb",
        "--global-batch", "64")
check(p.returncode in (0, 1), "fit --gpu NAME ... --global-batch N: " +
      p.stderr.strip())
for gpu in ("NVIDIA A100-SXM4-80GB MIG 3g.40gb", "a100-80gb:3g.40gb",
            "Tesla V100-SXM2-32GB"):
    check(spelled(run("plan", GPT2, "--gpu", gpu)), "--gpu " + gpu)

# ---- the spec: the sample spec as written loads
SAMPLE = path("sample.yaml", """name: llama-2-13b
task: train
model:
  architecture: llama
  layers: 40
  hidden_size: 5120
  ffn_hidden_size: 13824
  attention_heads: 40
  kv_heads: 40
  vocab_size: 32000
  tied_embeddings: false
  head: causal-lm
  parameters: 13.0e9
training:
  micro_batch_size: 1
  global_batch_size: 1024
  sequence_length: 4096
  precision: bf16-mixed
  optimizer: adamw
  activation_checkpointing: none
  attention: sdpa
parallelism:
  data_parallel: 8
  tensor_parallel: 1
  pipeline_parallel: 1
  sequence_parallel: false
  zero_stage: 0
hardware:
  gpu: Tesla V100-SXM2-32GB
""")
p = run("plan", SAMPLE)
check(p.returncode in (0, 1), "the sample spec plans: " + p.stderr.strip())
INFER = path("infer.yaml", """name: t
task: inference
model:
  architecture: llama
  layers: 4
  hidden_size: 512
  attention_heads: 8
  vocab_size: 32000
inference:
  precision: bf16-true
  batch_size: 8
  prompt_length: 2048
  generate_length: 256
  kv_cache_dtype: bf16
""")
p = run("plan", INFER, "--gpu", "h100")
check(p.returncode == 0, "the inference section plans: " + p.stderr.strip())
check(run("plan", INFER, "--gpu", "h100", "--set",
          "inference.generate_length=0").returncode == 0,
      "inference.generate_length=0")

# every value of every enumerated key, over a spec it applies to
VALUES = [
    (GPT2, "task", ["train", "inference"]),
    (LLAMA, "model.architecture", ["llama", "gpt2", "bert", "custom",
                                   "mixtral", "qwen3-moe", "deepseek-v3",
                                   "gpt-neox", "qwen3"]),
    (LLAMA, "model.head", ["causal-lm", "masked-lm", "classification"]),
    (LLAMA, "training.precision", ["fp32", "fp16-mixed", "bf16-mixed",
                                   "fp16-true", "bf16-true"]),
    (LLAMA, "training.optimizer", ["adamw", "adam", "sgd", "sgd-momentum",
                                   "adamw-8bit", "adafactor"]),
    (LLAMA, "training.activation_checkpointing", ["none", "full",
                                                  "selective"]),
    (LLAMA, "training.attention", ["flash", "sdpa", "eager"]),
    (LLAMA, "training.framework", ["pytorch", "deepspeed", "megatron"]),
    (LLAMA, "training.loop", ["trainer", "keep-outputs"]),
    (LLAMA, "training.use_cache", ["auto", "true", "false"]),
    (LLAMA, "training.adapter", ["none", "lora", "qlora"]),
    (LLAMA, "training.lora_rank", ["16"]),
    (LLAMA, "parallelism.zero_stage", ["0", "1", "2", "3"]),
    (LLAMA, "parallelism.fsdp_mixed_precision", ["param-dtype", "autocast"]),
    (LLAMA, "parallelism.offload_optimizer", ["none", "cpu", "nvme"]),
    (LLAMA, "parallelism.offload_parameters", ["none", "cpu", "nvme"]),
    (LLAMA, "parallelism.distributed_optimizer", ["false", "true"]),
    (LLAMA, "parallelism.virtual_pipeline_stages", ["1", "2"]),
    (LLAMA, "parallelism.expert_parallel", ["1"]),
    (MIXTRAL_MG, "parallelism.moe_token_dispatcher_type",
     ["allgather", "alltoall", "flex"]),
    (LLAMA, "parallelism.sequence_parallel", ["false", "true"]),
    (LLAMA, "model.num_labels", ["2"]),
    (LLAMA, "model.experts", ["8"]),
    (LLAMA, "model.experts_per_token", ["2"]),
    (LLAMA, "model.shared_experts", ["0"]),
    (LLAMA, "model.moe_ffn_hidden_size", ["14336"]),
    (LLAMA, "model.activation_bytes_per_token", ["1000"]),
    (LLAMA, "training.deepspeed_config", ["ds_config.json"]),
    (GPT2, "model.hf_config", [os.path.join(ROOT, "models", "configs",
                                            "gpt2.json")]),
]
for spec, key, vals in VALUES:
    for v in vals:
        p = run("plan", spec, "--gpu", "h200", "--set", "%s=%s" % (key, v))
        check(spelled(p), "--set %s=%s: %s" % (key, v, p.stderr.strip()))
# each value in a spec of its own that can plan it, where the
# combination needs more than one key
COMBOS = {
    "adapter-lora": "training:\n  adapter: lora\n  lora_rank: 16\n"
                    "  lora_targets: [q_proj, v_proj]\n",
    "adapter-lora-all-linear": "training:\n  adapter: lora\n"
                               "  lora_targets: all-linear\n",
    "adapter-qlora": "training:\n  adapter: qlora\n  precision: bf16-mixed\n",
    "use-cache-auto": "training:\n  use_cache: auto\n",
    "loop-keep-outputs": "training:\n  loop: keep-outputs\n",
    "fsdp-param-dtype": "training:\n  precision: bf16-mixed\nparallelism:\n"
                        "  data_parallel: 8\n  zero_stage: 3\n"
                        "  fsdp_mixed_precision: param-dtype\n",
    "fsdp-autocast": "training:\n  precision: bf16-mixed\nparallelism:\n"
                     "  data_parallel: 8\n  zero_stage: 3\n"
                     "  fsdp_mixed_precision: autocast\n",
    "ds-offload-cpu": "training:\n  framework: deepspeed\nparallelism:\n"
                      "  data_parallel: 8\n  zero_stage: 3\n"
                      "  offload_optimizer: cpu\n  offload_parameters: cpu\n",
    "megatron-vpp": "training:\n  framework: megatron\n"
                    "  global_batch_size: 64\nparallelism:\n"
                    "  pipeline_parallel: 4\n  virtual_pipeline_stages: 2\n"
                    "  distributed_optimizer: true\n  data_parallel: 2\n",
}
for name, extra in COMBOS.items():
    text = "name: t\nmodel:\n  hf_config: %s\n%s" % (
        os.path.join(ROOT, "models", "configs", "llama-2-7b.json"), extra)
    p = run("plan", path(name + ".yaml", text), "--gpu", "h200")
    check(p.returncode in (0, 1), "spec %s plans: %s" % (name,
                                                        p.stderr.strip()))

# model.hf_config: every model_type named is known
path("mt.yaml", "name: t\nmodel:\n  hf_config: mt.json\n")
path("mt.json", '{"model_type": "no-such-type"}')
p = run("plan", os.path.join(TMP, "mt.yaml"), "--gpu", "h200")
known = p.stderr.split("known:", 1)[-1]
for mt in ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen3_moe",
           "deepseek_v3", "gpt2", "gpt_neox", "bert"):
    check(mt in [w.strip(" ,\n") for w in known.split()],
          "model.hf_config model_type %s is known: %s" % (mt, known.strip()))

# ---- plan --format json
PER_GPU = ("weights_bytes", "gradients_bytes", "optimizer_states_bytes",
           "activations_bytes", "logits_bytes", "temporary_bytes",
           "kv_cache_bytes", "communication_bytes", "peak_allocated_bytes",
           "peak_reserved_bytes", "cuda_context_bytes", "device_used_bytes")
TOP = ("name", "gpu", "gpu_capacity_bytes", "parameters", "per_gpu", "fits",
       "headroom_bytes", "gradient_accumulation_steps", "host_bytes",
       "init_peak_bytes", "recipe")
for spec in (GPT2, LLAMA, INFER):
    p, d = plan_json(spec, "--gpu", "h100")
    check(d is not None, "plan --format json is JSON: " + spec)
    if d is None:
        continue
    for k in TOP:
        check(k in d, "plan --format json: key %s (%s)" % (k, spec))
    for k in PER_GPU:
        check(isinstance(d.get("per_gpu", {}).get(k), int),
              "plan --format json: per_gpu.%s (%s)" % (k, spec))
    check(isinstance(d.get("fits"), bool), "fits is true|false")
    check(isinstance(d.get("host_bytes"), int), "host_bytes is a number")
p, d = plan_json(LLAMA, "--gpu", "h100", "--set",
                 "parallelism.pipeline_parallel=4")
check(d is not None and len(d.get("stages", [])) == 4,
      "plan --format json: stages, one per pipeline stage")
for st in (d or {}).get("stages", []):
    for k in PER_GPU:
        check(k in st, "stages[]: key " + k)
DS = path("ds.yaml", "name: t\nmodel:\n  hf_config: %s\ntraining:\n"
          "  framework: deepspeed\nparallelism:\n  data_parallel: 8\n"
          "  zero_stage: 3\n  offload_optimizer: cpu\n" %
          os.path.join(ROOT, "models", "configs", "llama-2-7b.json"))
p, d = plan_json(DS, "--gpu", "h100")
check(d is not None and d.get("recipe") ==
      "deepspeed-zero3-offload-optimizer-bf16-mixed",
      "recipe deepspeed-zero3-offload-optimizer-bf16-mixed: %r" %
      (d and d.get("recipe")))
check(d is not None and d.get("host_bytes", 0) > 0,
      "host_bytes of an optimizer offloaded to the host")

# ---- replay --format json
TRACE = path("t.csv", "Thread,Time,Action,Pointer,Size,Stream\n"
             "1,10,allocate,0x7f0000000000,1048576,0x0\n"
             "1,11,allocate,0x7f0000100000,4096,0x0\n"
             "1,12,free,0x7f0000000000,1048576,0x0\n"
             "1,13,free,0x7f0000100000,4096,0x0\n")
p = run("replay", TRACE, "--format", "json")
try:
    d = json.loads(p.stdout)
except ValueError:
    d = None
check(d is not None, "replay --format json is JSON: " + p.stderr.strip())
for k in ("events", "peak_allocated_bytes", "peak_reserved_bytes",
          "fragmentation", "ns_per_op"):
    check(d is not None and k in d, "replay --format json: key " + k)

# ---- verify --format json, --emulate, --claimed
VERIFY_KEYS = ("device", "name", "claimed_bytes", "reported_bytes",
               "verified_bytes", "errors", "verdict", "bandwidth_gbps")
for emu, verdict in (("claimed=64MiB,real=64MiB", "ok"),
                     ("claimed=64MiB,real=32MiB,mode=wrap", "undersized"),
                     ("claimed=64MiB,real=32MiB,mode=drop", "undersized"),
                     ("claimed=16MiB,real=16MiB,bad_bits=3", "faulty")):
    # --full: a stuck bit that equals the one pattern of --quick hides
    # from it; the complement pass finds every one
    p = run("verify", "--no-progress",
            "--full" if "bad_bits" in emu else "--quick", "--emulate", emu,
            "--format", "json")
    try:
        dev = json.loads(p.stdout)["devices"][0]
    except (ValueError, KeyError, IndexError):
        dev = {}
    for k in VERIFY_KEYS:
        check(k in dev, "verify --emulate %s: key %s" % (emu, k))
    check(dev.get("verdict") == verdict,
          "verify --emulate %s: verdict %r, want %s" %
          (emu, dev.get("verdict"), verdict))
# a claimed capacity in GB is the maker's: 1 GB = 1 GiB
p = run("verify", "--no-progress", "--quick", "--emulate",
        "claimed=1GB,real=1GiB", "--format", "json")
try:
    dev = json.loads(p.stdout)["devices"][0]
except (ValueError, KeyError, IndexError):
    dev = {}
check(dev.get("claimed_bytes") == 1 << 30, "claimed=1GB is 2^30 bytes: %r"
      % dev.get("claimed_bytes"))

# ---- gpumem run: the preload variables it sets, and the ones the
# library reads
REPORT = os.path.join(TMP, "r-%p.json")
p = run("run", "--fraction", "0.5", "--limit", "1GiB", "--report", REPORT,
        "--prometheus", os.path.join(TMP, "m.prom"), "--mode", "cache",
        "--", "env")
env = dict(l.split("=", 1) for l in p.stdout.splitlines() if "=" in l)
for var in ("GPUMEM_FRACTION", "GPUMEM_LIMIT", "GPUMEM_REPORT",
            "GPUMEM_PROMETHEUS", "GPUMEM_MODE"):
    check(var in env, "gpumem run sets " + var)
check("libgpumem-preload" in env.get("LD_PRELOAD", ""),
      "gpumem run sets LD_PRELOAD")
check(env.get("GPUMEM_MODE") == "cache", "GPUMEM_MODE cache")
# the library reads its variables as it loads: a value it does not take
# is named in a message on stderr, every value the contract spells is
# taken quietly
SO = os.path.join(BUILD, "allocator", "preload", "libgpumem-preload.so")


def preload(var, value):
    e = dict(os.environ, LD_PRELOAD=SO)
    e[var] = value
    return subprocess.run(["/bin/true"], env=e, capture_output=True,
                          text=True).stderr


for var, good in (("GPUMEM_FRACTION", ["0.5", "1"]),
                  ("GPUMEM_LIMIT", ["40GiB", "80GB", "81920MiB"]),
                  ("GPUMEM_MODE", ["cache", "limit"]),
                  ("GPUMEM_CLAIMED", ["80GB", "141GB"]),
                  ("GPUMEM_ON_UNDERSIZED", ["warn", "fail"]),
                  ("GPUMEM_LOG", ["error", "warn", "info", "debug"])):
    check(var + "=bogus" in preload(var, "bogus"),
          "the preload library reads %s" % var)
    for v in good:
        err = preload(var, v)
        check(var not in err, "%s=%s is taken: %s" % (var, v, err.strip()))
for var in ("GPUMEM_REPORT", "GPUMEM_PROMETHEUS"):
    out = os.path.join(TMP, var.lower() + "-%p")
    check(preload(var, out) == "", var + " (a path) is taken quietly")

print("%d checked, %d failed" % (checked, len(failures)))
sys.exit(1 if failures else 0)
