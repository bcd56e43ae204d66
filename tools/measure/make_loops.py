#!/usr/bin/env python3
"""make_loops.py - write the pending calibration sets of runs built the
other common ways (tests/data/calibration/pending/):

  loops/    training as a framework builds it: the Hugging Face Trainer, the
            transformers docs' native loop keeping `outputs`, Lightning,
            accelerate, PEFT LoRA and QLoRA, DeepSpeed ZeRO 0-3 on one GPU
            with and without offload, MoE shapes (measure_loops.py)
  longgen/  long generation with the transformers default cache: prompts
            2048-8192, generate 64-2048, batch 1-32 (measure.py)
  ds-multi/ DeepSpeed ZeRO 1-3 on 2 and 4 GPUs, with offload_optimizer and
            offload_param to cpu (measure_frameworks.py, runner deepspeed)
  megatron/ Megatron-Core's GPTModel (local layer spec) with tensor,
            pipeline and interleaved pipeline parallelism, the distributed
            optimizer on and off, selective recompute
            (measure_frameworks.py, runner megatron)

    make_loops.py [--out tests/data/calibration/pending] [--check]

Each configuration is one fully spelled spec; the manifest names its runner
and whether it is held out, by the same rule as make_calibration.py
(int(sha256(name)[:8], 16) % 3 == 0). --check regenerates in memory and
fails where the committed files differ. The scaled-down MoE shapes keep the
published widths (config.json of each model, written in configs/) and cut
the layer count, so that one H200 holds them.
"""

import argparse
import hashlib
import json
import os
import sys

from make_calibration import SHAPES

GPU = "NVIDIA H200"

# Published config.json values (Hugging Face model repositories
# Qwen/Qwen3-0.6B, mistralai/Mixtral-8x7B-v0.1, Qwen/Qwen3-30B-A3B,
# deepseek-ai/DeepSeek-V3), with the fields that change shapes.
HF = {
    "qwen3-0.6b": {
        "model_type": "qwen3", "hidden_size": 1024,
        "intermediate_size": 3072, "num_hidden_layers": 28,
        "num_attention_heads": 16, "num_key_value_heads": 8,
        "head_dim": 128, "vocab_size": 151936, "tie_word_embeddings": True,
        "max_position_embeddings": 40960, "rope_theta": 1000000,
        "rms_norm_eps": 1e-6, "attention_bias": False},
    "mixtral-8x7b": {
        "model_type": "mixtral", "hidden_size": 4096,
        "intermediate_size": 14336, "num_hidden_layers": 32,
        "num_attention_heads": 32, "num_key_value_heads": 8,
        "vocab_size": 32000, "tie_word_embeddings": False,
        "max_position_embeddings": 32768, "num_local_experts": 8,
        "num_experts_per_tok": 2, "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-5, "router_aux_loss_coef": 0.02},
    "qwen3-30b-a3b": {
        "model_type": "qwen3_moe", "hidden_size": 2048,
        "intermediate_size": 6144, "moe_intermediate_size": 768,
        "num_hidden_layers": 48, "num_attention_heads": 32,
        "num_key_value_heads": 4, "head_dim": 128, "vocab_size": 151936,
        "tie_word_embeddings": False, "max_position_embeddings": 40960,
        "num_experts": 128, "num_experts_per_tok": 8,
        "decoder_sparse_step": 1, "mlp_only_layers": [],
        "norm_topk_prob": True, "rope_theta": 1000000.0,
        "rms_norm_eps": 1e-6},
    "deepseek-v3": {
        "model_type": "deepseek_v3", "hidden_size": 7168,
        "intermediate_size": 18432, "moe_intermediate_size": 2048,
        "num_hidden_layers": 61, "num_attention_heads": 128,
        "num_key_value_heads": 128, "vocab_size": 129280,
        "tie_word_embeddings": False, "max_position_embeddings": 163840,
        "n_routed_experts": 256, "n_shared_experts": 1,
        "num_experts_per_tok": 8, "first_k_dense_replace": 3,
        "moe_layer_freq": 1, "n_group": 8, "topk_group": 4,
        "q_lora_rank": 1536, "kv_lora_rank": 512, "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128, "v_head_dim": 128,
        "routed_scaling_factor": 2.5, "norm_topk_prob": True,
        "rope_theta": 10000, "rms_norm_eps": 1e-6},
}

# DeepSpeed configurations (the keys a user's ds_config.json has; what is
# left out takes DeepSpeed's defaults, runtime/zero/config.py).
DS = {
    "zero0-bf16": {"bf16": {"enabled": True},
                   "zero_optimization": {"stage": 0}},
    "zero1-bf16": {"bf16": {"enabled": True},
                   "zero_optimization": {"stage": 1}},
    "zero2-bf16": {"bf16": {"enabled": True},
                   "zero_optimization": {"stage": 2,
                                         "contiguous_gradients": True}},
    "zero3-bf16": {"bf16": {"enabled": True},
                   "zero_optimization": {"stage": 3}},
    "zero2-bf16-offload-opt": {
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 2, "offload_optimizer": {
            "device": "cpu", "pin_memory": True}}},
    "zero3-bf16-offload-all": {
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "offload_optimizer": {
            "device": "cpu", "pin_memory": True}, "offload_param": {
            "device": "cpu", "pin_memory": True}}},
    "zero3-bf16-offload-opt": {
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3, "offload_optimizer": {
            "device": "cpu", "pin_memory": True}}},
    "zero2-fp16": {"fp16": {"enabled": True, "initial_scale_power": 16},
                   "zero_optimization": {"stage": 2}},
}

# name: runner, model (a SHAPES key or an HF key with layers), training
# keys, extra parallelism keys, extra manifest keys (optim: the
# TrainingArguments.optim the trainer runner passes)
L = [
    # the Hugging Face Trainer (use_cache left out: false, the planner's
    # default, is what Trainer.__init__ writes into model.config from
    # TrainingArguments.use_cache; AdamW fused: the Trainer's default
    # optim, adamw_torch_fused, transformers 5.17 training_args.py, which
    # each run recorded)
    ("trainer-llama-134m-bf16mixed", "trainer", "llama-134m",
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=8, sequence_length=1024)),
    ("trainer-llama-1.1b-bf16mixed", "trainer", "llama-1.1b",
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=4, sequence_length=2048)),
    ("trainer-llama-1.1b-bf16mixed-fullckpt", "trainer", "llama-1.1b",
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          activation_checkpointing="full")),
    ("trainer-gpt2-124m-fp16mixed", "trainer", "gpt2-124m",
     dict(optimizer_implementation="fused",
          precision="fp16-mixed", micro_batch_size=16,
          sequence_length=1024)),
    ("trainer-gpt2-124m-fp32", "trainer", "gpt2-124m",
     dict(optimizer_implementation="fused",
          precision="fp32", micro_batch_size=8, sequence_length=1024)),
    ("trainer-qwen3-0.6b-bf16mixed", "trainer", ("qwen3-0.6b", None),
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=4, sequence_length=2048)),
    ("trainer-llama-1.1b-bf16true-sgd", "trainer", "llama-1.1b",
     dict(precision="bf16-true", optimizer="sgd", micro_batch_size=4,
          sequence_length=2048)),
    ("trainer-mixtral-2l-bf16mixed", "trainer", ("mixtral-8x7b", 2),
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=2, sequence_length=1024)),
    ("trainer-qwen3moe-2l-bf16mixed", "trainer", ("qwen3-30b-a3b", 2),
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=4, sequence_length=1024)),
    # the same runs with optim="adamw_torch" (torch.optim.AdamW without
    # fused=True, so foreach) instead of the Trainer's default
    # adamw_torch_fused
    ("trainer-llama-1.1b-bf16mixed-fullckpt-adamw-torch", "trainer",
     "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          activation_checkpointing="full"), {}, dict(optim="adamw_torch")),
    ("trainer-mixtral-2l-bf16mixed-adamw-torch", "trainer",
     ("mixtral-8x7b", 2),
     dict(precision="bf16-mixed", micro_batch_size=2, sequence_length=1024),
     {}, dict(optim="adamw_torch")),
    # the transformers docs' native loop (use_cache: what the harness
    # passed; auto: nothing, so the model config's use_cache=True)
    ("native-keep-llama-134m-bf16mixed", "native", "llama-134m",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024,
          loop="keep-outputs", use_cache="auto")),
    ("native-keep-llama-1.1b-bf16mixed", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          loop="keep-outputs", use_cache="auto")),
    ("native-keep-llama-1.1b-nocache", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          loop="keep-outputs", use_cache="false")),
    ("native-drop-llama-1.1b-bf16mixed", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          use_cache="auto")),
    ("native-keep-llama-1.1b-fullckpt", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          loop="keep-outputs", activation_checkpointing="full",
          use_cache="auto")),
    ("native-keep-gpt2-124m-fp32", "native", "gpt2-124m",
     dict(precision="fp32", micro_batch_size=8, sequence_length=1024,
          loop="keep-outputs", use_cache="auto")),
    ("native-keep-gpt2-355m-fp16mixed", "native", "gpt2-355m",
     dict(precision="fp16-mixed", micro_batch_size=8, sequence_length=1024,
          loop="keep-outputs", use_cache="auto")),
    ("native-keep-qwen3-0.6b-bf16mixed", "native", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          loop="keep-outputs", use_cache="auto")),
    ("native-keep-mixtral-2l-bf16mixed", "native", ("mixtral-8x7b", 2),
     dict(precision="bf16-mixed", micro_batch_size=2, sequence_length=1024,
          loop="keep-outputs", use_cache="auto")),
    ("native-mixtral-2l-bf16true-sgd", "native", ("mixtral-8x7b", 2),
     dict(precision="bf16-true", optimizer="sgd", micro_batch_size=4,
          sequence_length=2048, use_cache="auto")),
    ("native-deepseekv3-2l-bf16true-sgd", "native", ("deepseek-v3", 2),
     dict(precision="bf16-true", optimizer="sgd", micro_batch_size=1,
          sequence_length=1024, use_cache="auto")),
    # a stage that holds both kinds of DeepSeek-V3 block: its three dense
    # blocks (first_k_dense_replace) and one routed
    ("native-deepseekv3-4l-bf16true-sgd", "native", ("deepseek-v3", 4),
     dict(precision="bf16-true", optimizer="sgd", micro_batch_size=1,
          sequence_length=1024, use_cache="auto")),
    ("native-deepseekv3-4l-bf16true-sgd-fullckpt", "native",
     ("deepseek-v3", 4),
     dict(precision="bf16-true", optimizer="sgd", micro_batch_size=1,
          sequence_length=2048, activation_checkpointing="full",
          use_cache="auto")),
    ("native-qwen3moe-2l-bf16true-adamw", "native", ("qwen3-30b-a3b", 2),
     dict(precision="bf16-true", micro_batch_size=4, sequence_length=2048,
          use_cache="auto")),
    # Lightning (automatic optimization: zero_grad after the next
    # training_step, training.loop lightning)
    ("lightning-llama-1.1b-bf16mixed", "lightning", "llama-1.1b",
     dict(loop="lightning", precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          use_cache="auto")),
    ("lightning-gpt2-124m-16mixed", "lightning", "gpt2-124m",
     dict(loop="lightning", precision="fp16-mixed", micro_batch_size=16,
          sequence_length=1024, use_cache="auto")),
    ("lightning-qwen3-0.6b-bf16mixed", "lightning", ("qwen3-0.6b", None),
     dict(loop="lightning", precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          use_cache="auto")),
    ("lightning-llama-134m-16mixed-fullckpt", "lightning", "llama-134m",
     dict(loop="lightning", precision="fp16-mixed", micro_batch_size=16, sequence_length=2048,
          activation_checkpointing="full", use_cache="auto")),
    # accelerate (use_cache auto: the model is called as it is, with the
    # config's use_cache=True)
    ("accelerate-llama-1.1b-bf16mixed", "accelerate", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          use_cache="auto")),
    ("accelerate-gpt2-124m-fp16mixed", "accelerate", "gpt2-124m",
     dict(precision="fp16-mixed", micro_batch_size=16,
          sequence_length=1024, use_cache="auto")),
    ("accelerate-qwen3-0.6b-bf16mixed-fullckpt", "accelerate",
     ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          activation_checkpointing="full", use_cache="auto")),
    ("accelerate-qwen3moe-2l-bf16mixed", "accelerate", ("qwen3-30b-a3b", 2),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=1024,
          use_cache="auto")),
    # PEFT LoRA (16-bit base weights under autocast) and QLoRA; the native
    # loop passes no use_cache (gmspec's default, auto: the model
    # config's True), so the specs say auto
    ("lora-llama-1.1b-r16-qv", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          adapter="lora", lora_rank=16,
          use_cache="auto")),
    ("lora-llama-1.1b-r64-alllinear", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          adapter="lora", lora_rank=64, lora_targets=["all-linear"],
          use_cache="auto")),
    ("lora-qwen3-0.6b-r16-fullckpt", "native", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          adapter="lora", lora_rank=16, activation_checkpointing="full",
          use_cache="auto")),
    ("lora-llama-7b-r16-alllinear", "native", "llama-7b",
     dict(precision="bf16-mixed", micro_batch_size=1, sequence_length=2048,
          adapter="lora", lora_rank=16, lora_targets=["all-linear"],
          use_cache="auto")),
    ("lora-trainer-llama-1.1b-r16", "trainer", "llama-1.1b",
     dict(optimizer_implementation="fused",
          precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          adapter="lora", lora_rank=16)),
    ("qlora-llama-1.1b-r16-alllinear-fullckpt", "native", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          adapter="qlora", lora_rank=16, lora_targets=["all-linear"],
          activation_checkpointing="full",
          use_cache="auto")),
    ("qlora-llama-7b-r16-alllinear-fullckpt", "native", "llama-7b",
     dict(precision="bf16-mixed", micro_batch_size=2, sequence_length=2048,
          adapter="qlora", lora_rank=16, lora_targets=["all-linear"],
          activation_checkpointing="full",
          use_cache="auto")),
    ("qlora-qwen3-0.6b-r16", "native", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          adapter="qlora", lora_rank=16,
          use_cache="auto")),
    # DeepSpeed on one GPU; measure_loops.py builds the model whole on the
    # GPU before deepspeed.initialize (no zero.Init): ZeRO-3 rows say so.
    # The engine is called with no use_cache (gmspec's default, auto: the
    # config's True); files() writes it into every deepspeed row that
    # says none
    ("ds-zero0-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero0-bf16")),
    ("ds-zero1-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero1-bf16")),
    ("ds-zero2-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero2-bf16")),
    ("ds-zero3-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16"),
     dict(built_whole=True)),
    ("ds-zero2-offload-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero2-bf16-offload-opt"),
     dict(offload_optimizer="cpu")),
    ("ds-zero3-offload-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16-offload-opt"),
     dict(offload_optimizer="cpu", built_whole=True)),
    ("ds-zero3-offload-all-llama-1.1b-bf16", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16-offload-all"),
     dict(offload_optimizer="cpu", offload_parameters="cpu",
          built_whole=True)),
    ("ds-zero2-gpt2-124m-fp16", "deepspeed", "gpt2-124m",
     dict(precision="fp16-mixed", micro_batch_size=16, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero2-fp16")),
    ("ds-zero3-llama-134m-bf16", "deepspeed", "llama-134m",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero3-bf16"),
     dict(built_whole=True)),
    # checks, added after the rules they test were written (ZeRO-3's
    # reduce stream and set-up defragment, QLoRA's clone and tied head):
    # other models, offloads and adapter targets than the runs above
    ("ds-zero3-offload-llama-134m-bf16", "deepspeed", "llama-134m",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero3-bf16-offload-opt"),
     dict(offload_optimizer="cpu", built_whole=True)),
    ("ds-zero3-gpt2-355m-bf16", "deepspeed", "gpt2-355m",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero3-bf16"),
     dict(built_whole=True)),
    ("ds-zero3-offload-all-qwen3-0.6b-bf16", "deepspeed",
     ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16-offload-all"),
     dict(offload_optimizer="cpu", offload_parameters="cpu",
          built_whole=True)),
    ("qlora-qwen3-0.6b-r16-qkvo-mb2", "native", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=2, sequence_length=2048,
          adapter="qlora", lora_rank=16,
          lora_targets=["q_proj", "k_proj", "v_proj", "o_proj"],
          use_cache="auto")),
    # checks of DeepSpeed's past_key_values, tied lm_head and one-gradient
    # bucket rules: stages 1-3 on tied models, the cache turned off
    ("ds-zero2-offload-qwen3-0.6b-bf16", "deepspeed", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero2-bf16-offload-opt"),
     dict(offload_optimizer="cpu")),
    ("ds-zero3-qwen3-0.6b-bf16", "deepspeed", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=4, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16"),
     dict(built_whole=True)),
    ("ds-zero3-gpt2-355m-bf16-nocache", "deepspeed", "gpt2-355m",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero3-bf16",
          use_cache="false"),
     dict(built_whole=True)),
    ("ds-zero1-gpt2-124m-bf16", "deepspeed", "gpt2-124m",
     dict(precision="bf16-mixed", micro_batch_size=16, sequence_length=1024,
          framework="deepspeed", deepspeed_config="zero1-bf16")),
    # checks of full activation checkpointing under DeepSpeed's engine
    # (transformers' gradient_checkpointing_enable, non-reentrant), as the
    # bundled llama-2-7b-deepspeed spec plans it
    ("ds-zero2-llama-1.1b-bf16-fullckpt", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero2-bf16",
          activation_checkpointing="full")),
    ("ds-zero3-offload-llama-1.1b-bf16-fullckpt", "deepspeed", "llama-1.1b",
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16-offload-opt",
          activation_checkpointing="full"),
     dict(offload_optimizer="cpu", built_whole=True)),
    ("ds-zero3-qwen3-0.6b-bf16-fullckpt", "deepspeed", ("qwen3-0.6b", None),
     dict(precision="bf16-mixed", micro_batch_size=8, sequence_length=2048,
          framework="deepspeed", deepspeed_config="zero3-bf16",
          activation_checkpointing="full"),
     dict(built_whole=True)),
]

# DeepSpeed on several GPUs (measure_frameworks.py): name, model, data
# parallel degree, DS key, precision, micro-batch, sequence, extra
# parallelism keys (the offload the JSON says, spelled for the planner)
DSM = [
    ("dsm-zero1-llama-1.1b-dp2", "llama-1.1b", 2, "zero1-bf16", {}),
    ("dsm-zero2-llama-1.1b-dp2", "llama-1.1b", 2, "zero2-bf16", {}),
    ("dsm-zero3-llama-1.1b-dp2", "llama-1.1b", 2, "zero3-bf16", {}),
    ("dsm-zero2-offload-llama-1.1b-dp2", "llama-1.1b", 2,
     "zero2-bf16-offload-opt", dict(offload_optimizer="cpu")),
    ("dsm-zero3-offload-all-llama-1.1b-dp2", "llama-1.1b", 2,
     "zero3-bf16-offload-all",
     dict(offload_optimizer="cpu", offload_parameters="cpu")),
    ("dsm-zero1-llama-1.1b-dp4", "llama-1.1b", 4, "zero1-bf16", {}),
    ("dsm-zero2-llama-1.1b-dp4", "llama-1.1b", 4, "zero2-bf16", {}),
    ("dsm-zero3-llama-1.1b-dp4", "llama-1.1b", 4, "zero3-bf16", {}),
    ("dsm-zero3-offload-opt-llama-1.1b-dp4", "llama-1.1b", 4,
     "zero3-bf16-offload-opt", dict(offload_optimizer="cpu")),
    ("dsm-zero3-llama-134m-dp4", "llama-134m", 4, "zero3-bf16", {}),
]

# Megatron-Core (measure_frameworks.py): name, model, training keys,
# parallelism keys. Micro-batches per step = global / (micro x dp).
MEG = [
    ("meg-tp2-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(tensor_parallel=2)),
    ("meg-pp2-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(pipeline_parallel=2)),
    ("meg-pp2-vpp2-llama-134m", "llama-134m",
     dict(micro_batch_size=4, global_batch_size=16),
     dict(pipeline_parallel=2, virtual_pipeline_stages=2)),
    ("meg-dp2-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(data_parallel=2)),
    ("meg-dp2-distopt-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(data_parallel=2, distributed_optimizer=True)),
    ("meg-dp2-distopt-selective-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=4, global_batch_size=8,
          activation_checkpointing="selective"),
     dict(data_parallel=2, distributed_optimizer=True)),
    ("meg-tp2-dp2-distopt-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(tensor_parallel=2, data_parallel=2, distributed_optimizer=True)),
    ("meg-pp2-dp2-distopt-llama-1.1b", "llama-1.1b",
     dict(micro_batch_size=2, global_batch_size=8),
     dict(pipeline_parallel=2, data_parallel=2, distributed_optimizer=True)),
    ("meg-pp2-vpp2-dp2-distopt-llama-134m", "llama-134m",
     dict(micro_batch_size=4, global_batch_size=32),
     dict(pipeline_parallel=2, virtual_pipeline_stages=2, data_parallel=2,
          distributed_optimizer=True)),
]

# long generation (measure.py): name, shape, precision, batch, prompt,
# generate
G = [
    ("gen-llama-1.1b-b1-p2048-g2048", "llama-1.1b", "bf16-true", 1, 2048,
     2048),
    ("gen-llama-1.1b-b8-p2048-g512", "llama-1.1b", "bf16-true", 8, 2048,
     512),
    ("gen-llama-1.1b-b32-p2048-g256", "llama-1.1b", "bf16-true", 32, 2048,
     256),
    ("gen-llama-1.1b-b4-p8192-g256", "llama-1.1b", "bf16-true", 4, 8192,
     256),
    ("gen-llama-1.1b-b16-p4096-g128", "llama-1.1b", "bf16-true", 16, 4096,
     128),
    ("gen-llama-1.1b-b2-p4096-g1024", "llama-1.1b", "bf16-true", 2, 4096,
     1024),
    ("gen-llama-134m-b32-p2048-g2048", "llama-134m", "bf16-true", 32, 2048,
     2048),
    ("gen-llama-134m-b16-p8192-g512", "llama-134m", "bf16-true", 16, 8192,
     512),
    ("gen-llama-134m-b1-p8192-g64", "llama-134m", "fp16-true", 1, 8192, 64),
    ("gen-llama-7b-b4-p2048-g512", "llama-7b", "fp16-true", 4, 2048, 512),
    ("gen-llama-7b-b16-p2048-g128", "llama-7b", "bf16-true", 16, 2048, 128),
    ("gen-llama-7b-b1-p8192-g256", "llama-7b", "bf16-true", 1, 8192, 256),
    ("gen-llama-0.5b-v152k-b8-p4096-g256", "llama-0.5b-v152k", "bf16-true",
     8, 4096, 256),
    ("gen-llama-0.5b-v152k-b32-p2048-g64", "llama-0.5b-v152k", "bf16-true",
     32, 2048, 64),
    # mixture of experts (the published widths, fewer layers; the
    # experts run as transformers' default grouped_mm) and DeepSeek-V3's
    # latent cache (4 layers: its 3 dense blocks and one routed)
    ("gen-mixtral-2l-b8-p2048-g256", ("mixtral-8x7b", 2), "bf16-true", 8,
     2048, 256),
    ("gen-qwen3moe-2l-b8-p2048-g256", ("qwen3-30b-a3b", 2), "bf16-true", 8,
     2048, 256),
    ("gen-qwen3moe-2l-b1-p8192-g512", ("qwen3-30b-a3b", 2), "bf16-true", 1,
     8192, 512),
    ("gen-deepseekv3-4l-b4-p2048-g256", ("deepseek-v3", 4), "bf16-true", 4,
     2048, 256),
]

HEADER = ("# Pending calibration configuration (generated by "
          "tools/measure/make_loops.py; edit the table there).\n")


def heldout(name):
    return int(hashlib.sha256(name.encode()).hexdigest()[:8], 16) % 3 == 0


def yaml_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, list):
        return "[" + ", ".join(v) + "]"
    return str(v)


def model_lines(model):
    if isinstance(model, tuple):
        key, layers = model
        out = [f"  hf_config: ../../configs/{key}.json"]
        if layers:
            out.append(f"  layers: {layers}")
        return out
    a, n, h, f, heads, kv, v, tied, maxpos = SHAPES[model]
    return [f"  architecture: {a}", f"  layers: {n}", f"  hidden_size: {h}",
            f"  ffn_hidden_size: {f}", f"  attention_heads: {heads}",
            f"  kv_heads: {kv}", f"  vocab_size: {v}",
            f"  max_position_embeddings: {maxpos}",
            f"  tied_embeddings: {yaml_value(tied)}", "  head: causal-lm"]


def train_spec(name, model, t, par):
    t = dict(dict(optimizer="adamw", activation_checkpointing="none",
                  attention="sdpa"), **t)
    if "deepspeed_config" in t:
        t["deepspeed_config"] = f"../../deepspeed/{t['deepspeed_config']}.json"
    lines = [HEADER + f"name: {name}", "task: train", "model:"]
    lines += model_lines(model)
    lines.append("training:")
    lines += [f"  {k}: {yaml_value(v)}" for k, v in t.items()]
    if par:
        lines.append("parallelism:")
        lines += [f"  {k}: {yaml_value(v)}" for k, v in par.items()]
    lines += ["hardware:", f"  gpu: {GPU}"]
    return "\n".join(lines) + "\n"


def gen_spec(name, shape, prec, batch, prompt, gen):
    lines = [HEADER + f"name: {name}", "task: inference", "model:"]
    lines += model_lines(shape)
    lines += ["inference:", f"  precision: {prec}", f"  batch_size: {batch}",
              f"  prompt_length: {prompt}", f"  generate_length: {gen}",
              "hardware:", f"  gpu: {GPU}"]
    return "\n".join(lines) + "\n"


def js(obj):
    return json.dumps(obj, indent=1) + "\n"


def files():
    out = {}
    for k, d in HF.items():
        out[f"configs/{k}.json"] = js(d)
    for k, d in DS.items():
        out[f"deepspeed/{k}.json"] = js(d)
    man = []
    for row in L:
        name, runner, model, t = row[:4]
        par = row[4] if len(row) > 4 else {}
        extra = row[5] if len(row) > 5 else {}
        if runner == "deepspeed" and "use_cache" not in t:
            t = dict(t, use_cache="auto")
        out[f"loops/specs/{name}.yaml"] = train_spec(name, model, t, par)
        man.append(dict({"name": name, "spec": f"specs/{name}.yaml",
                         "set": [], "runner": runner}, **extra,
                        heldout=heldout(name)))
    out["loops/manifest.json"] = js({
        "format": "gpumem-calibration-manifest-1",
        "harness": "tools/measure/measure_loops.py",
        "heldout_rule": "int(sha256(name)[:8], 16) % 3 == 0",
        "configs": man})
    man = []
    for name, model, dp, ds, par in DSM:
        t = dict(precision="bf16-mixed", micro_batch_size=4,
                 sequence_length=2048 if model == "llama-1.1b" else 1024,
                 framework="deepspeed", deepspeed_config=ds,
                 use_cache="auto")
        out[f"ds-multi/specs/{name}.yaml"] = train_spec(
            name, model, t, dict(data_parallel=dp, **par))
        man.append({"name": name, "spec": f"specs/{name}.yaml", "set": [],
                    "runner": "deepspeed", "gpus": dp,
                    "heldout": heldout(name)})
    out["ds-multi/manifest.json"] = js({
        "format": "gpumem-calibration-manifest-1",
        "harness": "tools/measure/measure_frameworks.py",
        "heldout_rule": "int(sha256(name)[:8], 16) % 3 == 0",
        "configs": man})
    man = []
    for name, model, t, par in MEG:
        t = dict(dict(precision="bf16-mixed", sequence_length=2048,
                      optimizer="adam", framework="megatron",
                      attention="eager"), **t)
        out[f"megatron/specs/{name}.yaml"] = train_spec(name, model, t, par)
        gpus = par.get("data_parallel", 1) * par.get("tensor_parallel", 1) \
            * par.get("pipeline_parallel", 1)
        man.append({"name": name, "spec": f"specs/{name}.yaml", "set": [],
                    "runner": "megatron", "gpus": gpus,
                    "heldout": heldout(name)})
    out["megatron/manifest.json"] = js({
        "format": "gpumem-calibration-manifest-1",
        "harness": "tools/measure/measure_frameworks.py",
        "heldout_rule": "int(sha256(name)[:8], 16) % 3 == 0",
        "configs": man})
    man = []
    for name, *rest in G:
        out[f"longgen/specs/{name}.yaml"] = gen_spec(name, *rest)
        man.append({"name": name, "spec": f"specs/{name}.yaml", "set": [],
                    "heldout": heldout(name)})
    out["longgen/manifest.json"] = js({
        "format": "gpumem-calibration-manifest-1",
        "harness": "tools/measure/measure.py",
        "heldout_rule": "int(sha256(name)[:8], 16) % 3 == 0",
        "configs": man})
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(
        here, "..", "..", "tests", "data", "calibration", "pending"))
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    bad = 0
    for rel, text in files().items():
        p = os.path.join(a.out, rel)
        if a.check:
            try:
                with open(p) as f:
                    same = f.read() == text
            except OSError:
                same = False
            if not same:
                print(f"make_loops.py: {rel} differs from the table")
                bad = 1
            continue
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "w") as f:
            f.write(text)
    return bad


if __name__ == "__main__":
    sys.exit(main())
