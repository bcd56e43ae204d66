"""gmspec - read a gpumem model spec (YAML or JSON) into a plain dict.

The measurement tools read the same spec files as `gpumem plan` (schema in
models/README.md). This reader is deliberately
strict: unknown keys, wrong types and values outside the schema are errors
(SpecError), so that the harness never silently runs something other than
what the planner is asked about. Defaults mirror the planner's; where a
default is not fixed by the schema the calibration specs spell the key out.

YAML needs PyYAML. transformers and huggingface_hub both depend on it, so
wherever the harness can run at all it is present; a .json spec needs
nothing beyond the standard library.
"""

import copy
import json
import os

ARCHS = ("llama", "gpt2", "bert", "custom", "mixtral", "qwen3", "qwen3-moe",
         "deepseek-v3", "gpt-neox")
HEADS = ("causal-lm", "masked-lm", "classification")
PRECISIONS = ("fp32", "fp16-mixed", "bf16-mixed", "fp16-true", "bf16-true")
OPTIMIZERS = ("adamw", "adam", "sgd", "sgd-momentum", "adamw-8bit",
              "adafactor")
CKPTS = ("none", "full", "selective")
ATTNS = ("flash", "sdpa", "eager")
KV_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8")
TASKS = ("train", "inference")

# key -> (type, default). type: int, float, bool, str or a tuple of names.
# A default of None means "not given" (optional or derived below).
SCHEMA = {
    "name": (str, None),
    "task": (TASKS, "train"),
    "model": {
        "architecture": (ARCHS, "llama"),
        "layers": (int, None),
        "hidden_size": (int, None),
        "ffn_hidden_size": (int, None),
        "attention_heads": (int, None),
        "kv_heads": (int, None),
        "vocab_size": (int, None),
        "max_position_embeddings": (int, None),
        "type_vocab_size": (int, None),
        "tied_embeddings": (bool, None),
        "head": (HEADS, None),
        "num_labels": (int, 2),
        "parameters": (float, None),
        "activation_bytes_per_token": (float, None),
        "qkv_bias": (bool, False),
        "head_dim": (int, None),
        "hf_config": (str, None),
        "experts": (int, None),
        "experts_per_token": (int, None),
        "shared_experts": (int, None),
        "moe_ffn_hidden_size": (int, None),
        "dense_layers": (int, None),
        "q_lora_rank": (int, None),
        "kv_lora_rank": (int, None),
        "qk_rope_head_dim": (int, None),
        "qk_nope_head_dim": (int, None),
        "v_head_dim": (int, None),
    },
    "training": {
        "micro_batch_size": (int, 1),
        "global_batch_size": (int, None),
        "sequence_length": (int, None),
        "precision": (PRECISIONS, "bf16-mixed"),
        "optimizer": (OPTIMIZERS, "adamw"),
        "optimizer_implementation": (("foreach", "fused", "for-loop"),
                                     "foreach"),
        "activation_checkpointing": (CKPTS, "none"),
        "attention": (ATTNS, "sdpa"),
        "framework": (("pytorch", "deepspeed", "megatron"), "pytorch"),
        "deepspeed_config": (str, None),
        "loop": (("trainer", "keep-outputs", "lightning"), "trainer"),
        "use_cache": (("auto", "true", "false"), "auto"),
        "adapter": (("none", "lora", "qlora"), "none"),
        "lora_rank": (int, 16),
        "lora_targets": (list, ["q_proj", "v_proj"]),
    },
    "inference": {
        "precision": (PRECISIONS, "bf16-true"),
        "batch_size": (int, 1),
        "prompt_length": (int, None),
        "generate_length": (int, 0),
        "kv_cache_dtype": (KV_DTYPES, None),
    },
    "parallelism": {
        "data_parallel": (int, 1),
        "tensor_parallel": (int, 1),
        "pipeline_parallel": (int, 1),
        "sequence_parallel": (bool, False),
        "zero_stage": (int, 0),
        "tensor_parallel_vocab": (("sharded", "replicated"), "sharded"),
        "built_whole": (bool, False),
        "fsdp_mixed_precision": (("param-dtype", "autocast"), None),
        "offload_optimizer": (("none", "cpu", "nvme"), "none"),
        "offload_parameters": (("none", "cpu", "nvme"), "none"),
        "distributed_optimizer": (bool, False),
        "virtual_pipeline_stages": (int, 1),
        "expert_parallel": (int, 1),
    },
    "hardware": {
        "gpu": (str, None),
    },
}

# Per-architecture defaults of the shape keys, as models/README.md gives
# them (Hugging Face's own config defaults for the same models). Llama's
# max_position_embeddings only sizes the rotary cache (no table): 4096 is
# passed to transformers when the spec gives none.
ARCH_DEFAULTS = {
    "llama": {"head": "causal-lm", "tied_embeddings": False,
              "max_position_embeddings": 4096, "type_vocab_size": 0,
              "vocab_size": 32000},
    "gpt2": {"head": "causal-lm", "tied_embeddings": True,
             "max_position_embeddings": 1024, "type_vocab_size": 0,
             "vocab_size": 50257},
    "bert": {"head": "masked-lm", "tied_embeddings": True,
             "max_position_embeddings": 512, "type_vocab_size": 2,
             "vocab_size": 30522},
    "custom": {"head": "causal-lm", "tied_embeddings": False,
               "max_position_embeddings": 0, "type_vocab_size": 0},
}
for _a in ("mixtral", "qwen3", "qwen3-moe", "deepseek-v3", "gpt-neox"):
    ARCH_DEFAULTS[_a] = {"head": "causal-lm", "tied_embeddings": False,
                         "max_position_embeddings": 4096,
                         "type_vocab_size": 0}

# model.hf_config: the config.json fields each model key is read from
# (the first present wins), and the families of config.json's model_type.
HF_KEYS = (
    ("layers", "num_hidden_layers"), ("hidden_size", "hidden_size"),
    ("ffn_hidden_size", "intermediate_size"),
    ("attention_heads", "num_attention_heads"),
    ("kv_heads", "num_key_value_heads"), ("vocab_size", "vocab_size"),
    ("max_position_embeddings", "max_position_embeddings"),
    ("tied_embeddings", "tie_word_embeddings"),
    ("experts", "num_local_experts"), ("experts", "num_experts"),
    ("experts", "n_routed_experts"),
    ("experts_per_token", "num_experts_per_tok"),
    ("shared_experts", "n_shared_experts"),
    ("moe_ffn_hidden_size", "moe_intermediate_size"),
    ("head_dim", "head_dim"),
    ("dense_layers", "first_k_dense_replace"),
    ("q_lora_rank", "q_lora_rank"), ("kv_lora_rank", "kv_lora_rank"),
    ("qk_rope_head_dim", "qk_rope_head_dim"),
    ("qk_nope_head_dim", "qk_nope_head_dim"),
    ("v_head_dim", "v_head_dim"),
)
HF_FAMILY = {"llama": "llama", "mistral": "llama", "qwen2": "llama",
             "gpt2": "gpt2", "bert": "bert", "mixtral": "mixtral",
             "qwen3": "qwen3", "qwen3_moe": "qwen3-moe",
             "deepseek_v3": "deepseek-v3", "gpt_neox": "gpt-neox"}

PREC_DTYPE = {"fp32": "fp32", "fp16-mixed": "fp16", "bf16-mixed": "bf16",
              "fp16-true": "fp16", "bf16-true": "bf16"}


# model.hf_config: config.json field -> spec key for the families whose
# fields are named differently or have class defaults, as
# planner/hf_config.c maps them; the third entry: keys set when the
# config leaves them out (the configuration class's default).
_LLAMA_HF = {"hidden_size": "hidden_size",
             "intermediate_size": "ffn_hidden_size",
             "num_hidden_layers": "layers",
             "num_attention_heads": "attention_heads",
             "num_key_value_heads": "kv_heads", "vocab_size": "vocab_size",
             "max_position_embeddings": "max_position_embeddings",
             "tie_word_embeddings": "tied_embeddings"}
HF_FAMILIES = {
    "llama": ("llama", _LLAMA_HF, {"tied_embeddings": False}),
    "mistral": ("llama", _LLAMA_HF, {"tied_embeddings": False}),
    "qwen2": ("llama", _LLAMA_HF, {"tied_embeddings": False,
                                    "qkv_bias": True}),
    "qwen3": ("qwen3", dict(_LLAMA_HF, head_dim="head_dim"),
              {"tied_embeddings": False, "head_dim": 128}),
    "gpt2": ("gpt2", {"n_embd": "hidden_size", "n_inner": "ffn_hidden_size",
                      "n_layer": "layers", "n_head": "attention_heads",
                      "vocab_size": "vocab_size",
                      "n_positions": "max_position_embeddings",
                      "tie_word_embeddings": "tied_embeddings"},
             {"tied_embeddings": True, "max_position_embeddings": 1024}),
    "bert": ("bert", {"hidden_size": "hidden_size",
                      "intermediate_size": "ffn_hidden_size",
                      "num_hidden_layers": "layers",
                      "num_attention_heads": "attention_heads",
                      "vocab_size": "vocab_size",
                      "max_position_embeddings": "max_position_embeddings",
                      "type_vocab_size": "type_vocab_size",
                      "tie_word_embeddings": "tied_embeddings"},
             {"tied_embeddings": True, "max_position_embeddings": 512,
              "type_vocab_size": 2}),
}
HF_HEADS = (("ForCausalLM", "causal-lm"), ("LMHeadModel", "causal-lm"),
            ("ForMaskedLM", "masked-lm"),
            ("ForSequenceClassification", "classification"))


class SpecError(Exception):
    """A spec that does not parse or validate; str() names the key."""


def _load_text(path):
    with open(path, "rb") as f:
        raw = f.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SpecError(f"{path}: not UTF-8 ({e})") from None
    if path.endswith(".json"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise SpecError(f"{path}:{e.lineno}:{e.colno}: {e.msg}") \
                from None
    try:
        import yaml
    except ImportError:
        raise SpecError(f"{path}: reading YAML needs PyYAML (a dependency "
                        "of transformers); or give the spec as .json") \
            from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SpecError(f"{path}: {e}") from None


def _parse_scalar(text):
    """A --set value: YAML scalar rules where PyYAML is there, else JSON,
    else the bare string."""
    try:
        import yaml
        return yaml.safe_load(text)
    except ImportError:
        pass
    except Exception:
        return text
    try:
        return json.loads(text)
    except ValueError:
        return text


def apply_set(doc, assignment):
    """Apply one --set "dotted.key=value" to the raw document."""
    if "=" not in assignment:
        raise SpecError(f"--set {assignment}: expected KEY=VALUE")
    key, value = assignment.split("=", 1)
    parts = key.strip().split(".")
    node = SCHEMA
    for p in parts[:-1]:
        if not isinstance(node.get(p), dict):
            raise SpecError(f"--set {assignment}: unknown section '{p}'")
        node = node[p]
    if parts[-1] not in node or isinstance(node[parts[-1]], dict):
        raise SpecError(f"--set {assignment}: unknown key '{key}'")
    tgt = doc
    for p in parts[:-1]:
        tgt = tgt.setdefault(p, {})
        if not isinstance(tgt, dict):
            raise SpecError(f"--set {assignment}: '{p}' is not a mapping")
    tgt[parts[-1]] = _parse_scalar(value.strip())


def _check(kind, value, where):
    if isinstance(kind, tuple):
        if isinstance(value, bool) and "true" in kind:
            value = "true" if value else "false"
        if not isinstance(value, str) or value not in kind:
            raise SpecError(f"{where}: '{value}' is not one of "
                            + ", ".join(kind))
        return value
    if kind is bool:
        if not isinstance(value, bool):
            raise SpecError(f"{where}: expected true or false")
        return value
    if kind is int:
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise SpecError(f"{where}: expected an integer")
        if value < 0:
            raise SpecError(f"{where}: must not be negative")
        return value
    if kind is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise SpecError(f"{where}: expected a number")
        return float(value)
    if kind is str:
        if not isinstance(value, str):
            raise SpecError(f"{where}: expected a string")
        return value
    if kind is list:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or \
                not all(isinstance(v, str) for v in value):
            raise SpecError(f"{where}: expected a list of names")
        return list(value)
    raise AssertionError(kind)


def _resolve(schema, doc, where):
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise SpecError(f"{where or 'spec'}: expected a mapping")
    out = {}
    for k in doc:
        if k not in schema:
            raise SpecError(f"{where}{'.' if where else ''}{k}: unknown key")
    for k, kind in schema.items():
        path = f"{where}.{k}" if where else k
        if isinstance(kind, dict):
            out[k] = _resolve(kind, doc.get(k), path)
            continue
        typ, default = kind
        out[k] = _check(typ, doc[k], path) if doc.get(k) is not None \
            else default
    return out


def load(path, sets=()):
    """Read, override, default and validate a spec. Returns a dict with
    every key of SCHEMA filled in (None where not given and optional)."""
    doc = _load_text(path)
    if doc is None:
        raise SpecError(f"{path}: empty spec")
    if not isinstance(doc, dict):
        raise SpecError(f"{path}: expected a mapping at the top")
    doc = copy.deepcopy(doc)
    for s in sets:
        apply_set(doc, s)
    try:
        spec = _resolve(SCHEMA, doc, "")
        _hf_fill(spec, doc, path)
        _derive(spec, path)
        ds = spec["training"]["deepspeed_config"]
        if ds and not os.path.isabs(ds):
            spec["training"]["deepspeed_config"] = os.path.normpath(
                os.path.join(os.path.dirname(os.path.abspath(path)), ds))
    except SpecError as e:
        raise SpecError(f"{path}: {e}") from None
    return spec


def _hf_fill(spec, doc, path):
    """model.hf_config: read the config.json (relative to the spec's
    folder) and fill the model keys the spec leaves out; model["_given"]
    records which keys the spec wrote (they override the file's values
    when the harness builds the model)."""
    m = spec["model"]
    given = dict.fromkeys((doc.get("model") or {}).keys(), True)
    m["_given"] = given
    if not m["hf_config"]:
        return
    p = m["hf_config"]
    if not os.path.isabs(p):
        p = os.path.normpath(os.path.join(os.path.dirname(
            os.path.abspath(path)), p))
    m["hf_config"] = p
    try:
        with open(p) as f:
            d = json.load(f)
    except (OSError, ValueError) as e:
        raise SpecError(f"model.hf_config: {p}: {e}") from None
    fam = HF_FAMILY.get(d.get("model_type"))
    if fam is None:
        raise SpecError(f"model.hf_config: model_type "
                        f"{d.get('model_type')!r} is not known")
    if not given.get("architecture"):
        m["architecture"] = fam
    if d.get("model_type") in HF_FAMILIES:
        _hf_fill_family(m, given, d)
        return
    for key, hf in HF_KEYS:
        if not given.get(key) and hf in d and d[hf] is not None:
            m[key] = d[hf]


def _hf_fill_family(m, given, d):
    """The fields of the families in HF_FAMILIES, their configuration
    classes' defaults, and the head from "architectures"."""
    _, fields, absent = HF_FAMILIES[d["model_type"]]
    filled = set()
    for field, key in fields.items():
        if not given.get(key) and d.get(field) is not None:
            m[key] = d[field]
            filled.add(key)
    for key, value in absent.items():
        if not given.get(key) and key not in filled:
            m[key] = value
    archs = d.get("architectures") or []
    for suffix, head in HF_HEADS:
        if not given.get("head") and len(archs) == 1 and \
                archs[0].endswith(suffix):
            m["head"] = head
            if head == "classification" and d.get("id2label") and \
                    not given.get("num_labels"):
                m["num_labels"] = len(d["id2label"])


def _need(d, key, where):
    if d[key] is None:
        raise SpecError(f"{where}.{key}: required")
    if d[key] == 0:
        raise SpecError(f"{where}.{key}: must be positive")


def _derive(spec, path):
    if spec["name"] is None:
        spec["name"] = os.path.splitext(os.path.basename(path))[0]
    m = spec["model"]
    arch = m["architecture"]
    given_maxpos = m["max_position_embeddings"]
    for k, v in ARCH_DEFAULTS[arch].items():
        if k in m and m[k] is None:
            m[k] = v
    if m["qkv_bias"] and arch != "llama":
        raise SpecError("model.qkv_bias: for llama only")
    if arch != "custom":
        for k in ("layers", "hidden_size", "attention_heads", "vocab_size"):
            _need(m, k, "model")
        if m["ffn_hidden_size"] is None and arch == "llama":
            # Meta's SwiGLU width: int(2/3 * 4h) rounded up to 256
            f = int(2 * 4 * m["hidden_size"] / 3)
            m["ffn_hidden_size"] = 256 * ((f + 255) // 256)
        elif m["ffn_hidden_size"] is None:
            m["ffn_hidden_size"] = 4 * m["hidden_size"]
        # an expert's width is the MLP's unless given (Mixtral's
        # config.json has only intermediate_size), as planner/
        # spec_rules.c model_defaults fills it
        if arch in ("mixtral", "qwen3-moe", "deepseek-v3") and \
                m["moe_ffn_hidden_size"] is None:
            m["moe_ffn_hidden_size"] = m["ffn_hidden_size"]
        if m["kv_heads"] is None:
            m["kv_heads"] = m["attention_heads"]
        if m["hidden_size"] % m["attention_heads"]:
            raise SpecError("model.attention_heads: does not divide "
                            "hidden_size")
        if m["attention_heads"] % m["kv_heads"]:
            raise SpecError("model.kv_heads: does not divide "
                            "attention_heads")
    t = spec["training"]
    if t["sequence_length"] is None:
        t["sequence_length"] = given_maxpos or 2048
    if spec["inference"]["prompt_length"] is None:
        spec["inference"]["prompt_length"] = t["sequence_length"]
    if spec["task"] == "train":
        _need(t, "sequence_length", "training")
        _need(t, "micro_batch_size", "training")
    else:
        inf = spec["inference"]
        _need(inf, "prompt_length", "inference")
        _need(inf, "batch_size", "inference")
        if inf["kv_cache_dtype"] is None:
            inf["kv_cache_dtype"] = PREC_DTYPE[inf["precision"]]
    par = spec["parallelism"]
    if par["zero_stage"] > 3:
        raise SpecError("parallelism.zero_stage: must be 0..3")
    for k in ("data_parallel", "tensor_parallel", "pipeline_parallel"):
        _need(par, k, "parallelism")


def shape_key(spec):
    """The keys that decide a model's parameter count, as a canonical
    string (what tests/data/hf-params.json is keyed by)."""
    m = spec["model"]
    keys = ["architecture", "layers", "hidden_size", "ffn_hidden_size",
            "attention_heads", "kv_heads", "vocab_size", "tied_embeddings",
            "head"]
    if m["head"] == "classification":
        keys.append("num_labels")
    if m["architecture"] == "llama":
        keys.append("qkv_bias")
    if m["architecture"] in ("gpt2", "bert"):
        keys.append("max_position_embeddings")
    if m["architecture"] == "bert":
        keys.append("type_vocab_size")
    if m["architecture"] == "mixtral":
        keys += ["experts", "moe_ffn_hidden_size"]
    if m["architecture"] == "qwen3":
        keys.append("head_dim")
    if m["architecture"] == "qwen3-moe":
        keys += ["head_dim", "experts", "moe_ffn_hidden_size"]
    if m["architecture"] == "deepseek-v3":
        keys += ["experts", "moe_ffn_hidden_size", "shared_experts",
                 "dense_layers", "q_lora_rank", "kv_lora_rank",
                 "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim"]
    return ",".join(f"{k}={m[k]}" for k in keys).lower()
