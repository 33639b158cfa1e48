"""Measures what a PyTorch training process holds on the GPU outside its caching allocator: the CUDA context, and
what loading the kernels of a training step adds to it, for gpumem plan's device totals (fit figures: no accuracy row
is a test of them).

Run on a GPU machine with torch and transformers (a few seconds, nothing downloaded):
    python3 benchmarks/pytorch/record_context.py --out context.json

Each stage prints and records cudaMemGetInfo's total - free, torch's memory_reserved() and memory_allocated(), and
used - reserved (what the process holds outside the allocator):
  init       after torch.cuda.init(): the bare context PyTorch creates
  matmul     after one bf16 matmul: the cuBLAS handle and its workspace (the workspace is allocated by the allocator)
  step       after three training steps of a small Llama (bf16 autocast, SDPA, torch's AdamW, cross-entropy, gradient
             checkpointing): the kernels a training step loads on first use
  compiled   (with --compile) after a compiled step of the same model
"""
import argparse
import json
import sys

import torch


def snapshot(name, rows):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    used = total - free
    reserved = torch.cuda.memory_reserved()
    row = {"stage": name, "usedBytes": used, "reservedBytes": reserved, "allocatedBytes": torch.cuda.memory_allocated(),
           "outsideAllocatorBytes": used - reserved}
    rows.append(row)
    print(f"{name:9s} used {used / 2**20:9.1f} MiB  reserved {reserved / 2**20:9.1f} MiB  outside the allocator "
          f"{(used - reserved) / 2**20:8.1f} MiB", file=sys.stderr, flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--compile", action="store_true")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("record_context: no CUDA device")
    rows = []
    torch.cuda.init()
    torch.empty(1, device="cuda")
    snapshot("init", rows)
    x = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    (x @ x).sum().item()
    del x
    snapshot("matmul", rows)
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
                      num_key_value_heads=4, vocab_size=32000)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    model.gradient_checkpointing_enable()
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, cfg.vocab_size, (2, 512), device="cuda")
    for _ in range(3):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    snapshot("step", rows)
    if a.compile:
        step = torch.compile(lambda: model(input_ids=ids, labels=ids).loss)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            step().backward()
        snapshot("compiled", rows)
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda, "rows": rows}
    with open(a.out, "w") as f:
        json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
