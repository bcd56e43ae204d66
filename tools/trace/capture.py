#!/usr/bin/env python3
"""Capture real PyTorch allocation traces on a GPU.

Runs, each in its own subprocess with a time limit (total < 3 minutes):
  llama1b-train  an AMP (bf16 autocast) training step, 2 steps with AdamW,
                 of a ~1.1B-parameter Llama-shaped model (random init);
  vocab150k-train a training step of a small model with a 151,936-token
                 vocabulary (large logits);
  llama1b-infer  bf16 inference: generate 64 tokens for 8 prompts of 512.
Nothing is downloaded: models come from transformers' LlamaConfig.

For each run NAME it writes into OUT: NAME.csv.gz (RMM CSV, see
snapshot_to_csv.py) and NAME.json with PyTorch's own
max_memory_allocated / max_memory_reserved, versions and the GPU name.
A failed run writes NAME.json with an "error" and the others go on.

Usage: capture.py OUT_DIR [--only NAME]
"""
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNS = ["llama1b-train", "vocab150k-train", "llama1b-infer"]
LIMIT_S = 55


def llama(vocab, hidden, layers, inter, heads):
    from transformers import LlamaConfig, LlamaForCausalLM
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden,
                      intermediate_size=inter, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=heads,
                      max_position_embeddings=4096)
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg), cfg


def train(model, vocab, batch, seq, steps=2):
    import torch
    model.cuda().train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(steps):
        ids = torch.randint(0, vocab, (batch, seq), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()


def one(name, out_dir):
    import torch
    sys.path.insert(0, HERE)
    import snapshot_to_csv
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(max_entries=10_000_000,
                                             stacks="python")
    torch.manual_seed(0)
    t0 = time.time()
    info = {"name": name}
    if name == "llama1b-train":
        model, cfg = llama(32000, 2048, 16, 5504, 16)
        info["parameters"] = sum(p.numel() for p in model.parameters())
        train(model, 32000, 4, 1024)
    elif name == "vocab150k-train":
        model, cfg = llama(151936, 1024, 8, 2816, 16)
        info["parameters"] = sum(p.numel() for p in model.parameters())
        train(model, 151936, 8, 1024)
    elif name == "llama1b-infer":
        model, cfg = llama(32000, 2048, 16, 5504, 16)
        info["parameters"] = sum(p.numel() for p in model.parameters())
        model = model.to(torch.bfloat16).cuda().eval()
        ids = torch.randint(0, 32000, (8, 512), device="cuda")
        with torch.no_grad():
            model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                           max_new_tokens=64, min_new_tokens=64,
                           do_sample=False, pad_token_id=0)
        torch.cuda.synchronize()
    else:
        raise SystemExit("unknown run " + name)
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    info["events"] = snapshot_to_csv.write_csv(
        snap, os.path.join(out_dir, name + ".csv.gz"))
    info.update({
        "torch_max_memory_allocated_bytes": torch.cuda.max_memory_allocated(),
        "torch_max_memory_reserved_bytes": torch.cuda.max_memory_reserved(),
        "torch_version": torch.__version__,
        "cuda_version": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "seconds": round(time.time() - t0, 1),
    })
    try:
        import transformers
        info["transformers_version"] = transformers.__version__
    except ImportError:
        pass
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(info, f, indent=2)
    print("%s: %d events, torch peak allocated %.2f GiB, reserved %.2f GiB"
          % (name, info["events"],
             info["torch_max_memory_allocated_bytes"] / 2**30,
             info["torch_max_memory_reserved_bytes"] / 2**30))


def main():
    if len(sys.argv) >= 4 and sys.argv[2] == "--only":
        one(sys.argv[3], sys.argv[1])
        return 0
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    failed = 0
    for name in RUNS:
        try:
            r = subprocess.run([sys.executable, __file__, out, "--only",
                                name], timeout=LIMIT_S)
            err = None if r.returncode == 0 else "exit %d" % r.returncode
        except subprocess.TimeoutExpired:
            err = "timed out after %d s" % LIMIT_S
        except Exception as e:  # keep going with the other runs
            err = repr(e)
        if err:
            failed += 1
            print("%s: %s" % (name, err), file=sys.stderr)
            with open(os.path.join(out, name + ".json"), "w") as f:
                json.dump({"name": name, "error": err}, f, indent=2)
    return 1 if failed == len(RUNS) else 0


if __name__ == "__main__":
    sys.exit(main())
