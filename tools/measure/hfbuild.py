"""hfbuild - the exact mapping from a gpumem spec to a Hugging Face model.

One place decides which transformers class and config a spec means, so the
harness (measure.py, measure_multi.py) and the parameter count
(hf_params.py) cannot disagree. Every spec key is either mapped exactly or
refused with Unsupported; the mapping is documented in README.md beside
this file. torch and transformers are imported only when a model is built.
"""


class Unsupported(Exception):
    """A spec the harness cannot run exactly; str() says why."""


TORCH_DTYPE = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def model_class_name(spec):
    m = spec["model"]
    arch, head = m["architecture"], m["head"]
    if arch == "llama" and m["qkv_bias"]:
        # Qwen2 is Llama with biases on q, k and v only (Llama's own
        # attention_bias would add one to o_proj too).
        arch = "qwen2"
    table = {
        ("llama", "causal-lm"): "LlamaForCausalLM",
        ("llama", "classification"): "LlamaForSequenceClassification",
        ("qwen2", "causal-lm"): "Qwen2ForCausalLM",
        ("qwen2", "classification"): "Qwen2ForSequenceClassification",
        ("qwen3", "causal-lm"): "Qwen3ForCausalLM",
        ("qwen3-moe", "causal-lm"): "Qwen3MoeForCausalLM",
        # built from model.hf_config only (build_config)
        ("mixtral", "causal-lm"): "MixtralForCausalLM",
        ("deepseek-v3", "causal-lm"): "DeepseekV3ForCausalLM",
        ("gpt2", "causal-lm"): "GPT2LMHeadModel",
        ("gpt2", "classification"): "GPT2ForSequenceClassification",
        ("bert", "masked-lm"): "BertForMaskedLM",
        ("bert", "classification"): "BertForSequenceClassification",
    }
    if arch == "custom":
        raise Unsupported("model.architecture: custom has no Hugging Face "
                          "model to build")
    if (arch, head) not in table:
        raise Unsupported(f"model.head: {head} is not available for {arch}")
    return table[(arch, head)]


def config_kwargs(spec, attn_implementation=None):
    """Keyword arguments of the transformers config class for this spec.
    Keys not listed keep Hugging Face's defaults (dropout 0.1 for GPT-2
    and BERT, 0 for Llama; no biases in Llama)."""
    m = spec["model"]
    arch = m["architecture"]
    kw = {}
    if arch in ("mixtral", "deepseek-v3") and not m.get("hf_config"):
        raise Unsupported(f"model.architecture: {arch} is built from "
                          "model.hf_config only")
    if arch in ("llama", "qwen3", "qwen3-moe"):
        kw = dict(hidden_size=m["hidden_size"],
                  intermediate_size=m["ffn_hidden_size"],
                  num_hidden_layers=m["layers"],
                  num_attention_heads=m["attention_heads"],
                  num_key_value_heads=m["kv_heads"],
                  vocab_size=m["vocab_size"],
                  max_position_embeddings=m["max_position_embeddings"],
                  tie_word_embeddings=m["tied_embeddings"])
        if arch == "qwen3":
            # Qwen3Config's head_dim (default 128), not hidden / heads
            kw["head_dim"] = m["head_dim"] or 128
        if arch == "qwen3-moe":
            # every layer sparse (decoder_sparse_step 1, no
            # mlp_only_layers), as the planner's qwen3-moe family
            kw.update(num_experts=m["experts"],
                      num_experts_per_tok=m["experts_per_token"],
                      moe_intermediate_size=m["moe_ffn_hidden_size"],
                      decoder_sparse_step=1, mlp_only_layers=[])
            if m["head_dim"]:
                kw["head_dim"] = m["head_dim"]
    elif arch == "gpt2":
        if m["kv_heads"] != m["attention_heads"]:
            raise Unsupported("model.kv_heads: GPT-2 has no grouped-query "
                              "attention")
        kw = dict(n_embd=m["hidden_size"], n_inner=m["ffn_hidden_size"],
                  n_layer=m["layers"], n_head=m["attention_heads"],
                  vocab_size=m["vocab_size"],
                  n_positions=m["max_position_embeddings"],
                  tie_word_embeddings=m["tied_embeddings"])
    elif arch == "bert":
        if m["kv_heads"] != m["attention_heads"]:
            raise Unsupported("model.kv_heads: BERT has no grouped-query "
                              "attention")
        kw = dict(hidden_size=m["hidden_size"],
                  intermediate_size=m["ffn_hidden_size"],
                  num_hidden_layers=m["layers"],
                  num_attention_heads=m["attention_heads"],
                  vocab_size=m["vocab_size"],
                  max_position_embeddings=m["max_position_embeddings"],
                  type_vocab_size=m["type_vocab_size"],
                  tie_word_embeddings=m["tied_embeddings"])
    else:
        model_class_name(spec)  # raises
    if m["head"] == "classification":
        kw["num_labels"] = m["num_labels"]
        if arch in ("llama", "gpt2"):
            # Sequence classification finds the last non-pad token; the
            # inputs never contain this id, so the last position is used.
            kw["pad_token_id"] = m["vocab_size"] - 1
    if attn_implementation:
        kw["attn_implementation"] = attn_implementation
    return kw


def hf_config(spec, attn_implementation=None):
    """The transformers config of a spec with model.hf_config: the
    config.json (its model_type picks the class, AutoConfig.for_model),
    with the sizes written in the spec (gmspec.HF_KEYS) over its own."""
    import json
    import transformers
    import gmspec
    m = spec["model"]
    with open(m["hf_config"]) as f:
        d = json.load(f)
    for k in ("architectures", "auto_map", "quantization_config",
              "torch_dtype", "dtype", "transformers_version"):
        d.pop(k, None)
    for key, hf in gmspec.HF_KEYS:
        if m.get(key) is not None and m["_given"].get(key):
            d[hf] = m[key]
    cfg = transformers.AutoConfig.for_model(**d)
    if attn_implementation:
        cfg._attn_implementation = attn_implementation
    return cfg


def build_config(spec, attn_implementation=None):
    import transformers
    m = spec["model"]
    if m.get("hf_config"):
        return hf_config(spec, attn_implementation)
    if m["architecture"] == "llama" and m["qkv_bias"]:
        return transformers.Qwen2Config(**config_kwargs(spec,
                                                        attn_implementation))
    cls = {"llama": transformers.LlamaConfig,
           "qwen3": transformers.Qwen3Config,
           "qwen3-moe": transformers.Qwen3MoeConfig,
           "gpt2": transformers.GPT2Config,
           "bert": transformers.BertConfig}[spec["model"]["architecture"]]
    return cls(**config_kwargs(spec, attn_implementation))


def model_class(spec):
    import transformers
    return getattr(transformers, model_class_name(spec))


def build_model(spec, device, dtype, attn_implementation=None):
    """Construct the model with random weights directly on `device` in
    `dtype` (a torch dtype): parameters are created there, never copied."""
    import torch
    config = build_config(spec, attn_implementation)
    cls = model_class(spec)
    old = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = cls(config)
    finally:
        torch.set_default_dtype(old)
    return model


def count_parameters(spec):
    """The Hugging Face model's parameter count (shared/tied weights
    counted once), built on the meta device: no memory, no weights."""
    model = build_model(spec, "meta", _torch_dtype("fp32"))
    seen, n = set(), 0
    for p in model.parameters():
        if id(p) not in seen:
            seen.add(id(p))
            n += p.numel()
    return n


def _torch_dtype(name):
    import torch
    return getattr(torch, TORCH_DTYPE[name])


def refuse_unrunnable(spec, world_size=1):
    """Raise Unsupported for every key value the harness cannot run
    exactly. world_size: the number of GPUs of the harness run."""
    model_class_name(spec)
    m, par = spec["model"], spec["parallelism"]
    if par["pipeline_parallel"] != 1:
        raise Unsupported("parallelism.pipeline_parallel: not measured")
    if par["sequence_parallel"]:
        raise Unsupported("parallelism.sequence_parallel: not measured")
    n = par["data_parallel"] * par["tensor_parallel"]
    if n != world_size:
        raise Unsupported(f"parallelism: data_parallel x tensor_parallel = "
                          f"{n} GPUs, this run has {world_size}"
                          + (" (use measure_multi.py under torchrun)"
                             if world_size == 1 else ""))
    if par["tensor_parallel"] > 1 and par["data_parallel"] > 1:
        raise Unsupported("parallelism: tensor and data parallel together "
                          "are not measured")
    if par["tensor_parallel"] > 1 and m["architecture"] != "llama":
        raise Unsupported("parallelism.tensor_parallel: measured for llama "
                          "only")
    if par["zero_stage"] and par["data_parallel"] == 1:
        raise Unsupported("parallelism.zero_stage: needs data_parallel > 1")
    if spec["task"] == "train":
        t = spec["training"]
        if t["optimizer"] in ("adamw-8bit", "adafactor"):
            raise Unsupported(f"training.optimizer: {t['optimizer']} is not "
                              "measured (adamw, adam, sgd, sgd-momentum are)")
        if t["attention"] == "flash" and t["precision"] == "fp32":
            raise Unsupported("training.attention: flash kernels need "
                              "fp16 or bf16 (precision fp32)")
        if m["architecture"] in ("gpt2", "bert") and \
                t["sequence_length"] > m["max_position_embeddings"]:
            raise Unsupported("training.sequence_length: longer than "
                              "model.max_position_embeddings")
        gbs = t["global_batch_size"]
        if gbs is not None and gbs % (t["micro_batch_size"] *
                                      par["data_parallel"]):
            raise Unsupported("training.global_batch_size: not a multiple "
                              "of micro_batch_size x data_parallel")
    else:
        i = spec["inference"]
        if i["precision"].endswith("-mixed"):
            raise Unsupported("inference.precision: measured for fp32, "
                              "fp16-true and bf16-true")
        from gmspec import PREC_DTYPE
        if i["kv_cache_dtype"] != PREC_DTYPE[i["precision"]]:
            raise Unsupported("inference.kv_cache_dtype: Hugging Face's "
                              "cache keeps the model's dtype ("
                              f"{PREC_DTYPE[i['precision']]})")
        if m["architecture"] == "bert" and i["generate_length"]:
            raise Unsupported("inference.generate_length: BERT does not "
                              "generate; use 0 (one forward pass)")
        if m["head"] == "classification" and i["generate_length"]:
            raise Unsupported("inference.generate_length: a classification "
                              "head does not generate")
        if par["data_parallel"] != 1 or par["tensor_parallel"] != 1:
            raise Unsupported("parallelism: inference is measured on one "
                              "GPU")
        total = i["prompt_length"] + i["generate_length"]
        if m["architecture"] in ("gpt2", "bert") and \
                total > m["max_position_embeddings"]:
            raise Unsupported("inference: prompt_length + generate_length "
                              "longer than model.max_position_embeddings")
