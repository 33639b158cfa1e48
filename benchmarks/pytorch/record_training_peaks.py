"""Measures the peak GPU memory of PyTorch training and generation, for gpumem plan's accuracy table.

Run on a GPU machine:  python3 benchmarks/pytorch/record_training_peaks.py > measured.json
Models are Hugging Face GPT-2 and Llama-style models built from configs (random weights: memory does not depend on
the values). Training: AdamW (PyTorch's default foreach implementation), fp32 or bf16 autocast, three steps; the
figures are from the third step, when the optimizer states exist. Generation: bf16 weights, greedy decoding with
the KV cache (DynamicCache). Peak = torch.cuda.max_memory_allocated().
"""
import gc
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

MODELS = {
    "gpt2": lambda: GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257),
    "gpt2-medium": lambda: GPT2Config(n_embd=1024, n_layer=24, n_head=16, n_positions=1024, vocab_size=50257),
    "llama-mini": lambda: LlamaConfig(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4,
                                      intermediate_size=2816, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False),
}


def config_dict(cfg):
    keep = ["model_type", "hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head",
            "num_key_value_heads", "intermediate_size", "n_inner", "vocab_size", "max_position_embeddings", "n_positions",
            "tie_word_embeddings", "head_dim"]
    d = cfg.to_dict()
    return {k: d[k] for k in keep if k in d and d[k] is not None}


def build(name):
    cfg = MODELS[name]()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    return cfg, model


def param_bytes(model):
    seen = set()
    total = 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
    return total


def reset():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def train(name, precision, batch, seq):
    reset()
    base = torch.cuda.memory_allocated()
    cfg, model = build(name)
    model.train()
    params = param_bytes(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    phases = {}
    for step in range(3):
        last = step == 2
        if last:
            torch.cuda.synchronize()
            phases["before_forward"] = torch.cuda.memory_allocated() - base
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(precision == "amp-bf16")):
            loss = model(input_ids=x, labels=x).loss
        if last:
            torch.cuda.synchronize()
            phases["forward_peak"] = torch.cuda.max_memory_allocated() - base
            phases["after_forward"] = torch.cuda.memory_allocated() - base
            torch.cuda.reset_peak_memory_stats()
        loss.backward()
        if last:
            torch.cuda.synchronize()
            phases["backward_peak"] = torch.cuda.max_memory_allocated() - base
            phases["after_backward"] = torch.cuda.memory_allocated() - base
            torch.cuda.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if last:
            torch.cuda.synchronize()
            phases["optimizer_peak"] = torch.cuda.max_memory_allocated() - base
            phases["after_step"] = torch.cuda.memory_allocated() - base
    peak = max(phases["forward_peak"], phases["backward_peak"], phases["optimizer_peak"])
    row = {
        "mode": "train", "model": name, "config": config_dict(cfg), "precision": precision, "optimizer": "adamw (foreach)",
        "batch": batch, "seq": seq, "attention": "sdpa", "parameterBytes": params,
        "peakAllocatedBytes": peak, "phases": phases,
        "reservedBytes": torch.cuda.memory_reserved(),
    }
    del model, opt, loss, x
    reset()
    return row


def generate(name, batch, prompt, new_tokens):
    reset()
    base = torch.cuda.memory_allocated()
    cfg, model = build(name)
    model = model.to(torch.bfloat16).eval()
    params = param_bytes(model)
    x = torch.randint(0, cfg.vocab_size, (batch, prompt), device="cuda")
    torch.cuda.reset_peak_memory_stats()
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                             do_sample=False, use_cache=True, pad_token_id=0)
    torch.cuda.synchronize()
    row = {
        "mode": "infer", "model": name, "config": config_dict(cfg), "weights": "bf16", "kvDtype": "bf16", "batch": batch,
        "prompt": prompt, "newTokens": new_tokens, "attention": "sdpa", "cache": "DynamicCache", "parameterBytes": params,
        "peakAllocatedBytes": torch.cuda.max_memory_allocated() - base, "generatedTokens": int(out.shape[1] - prompt),
    }
    del model, out, x
    reset()
    return row


def main():
    rows = []
    t0 = time.time()
    for name in MODELS:
        for precision in ("fp32", "amp-bf16"):
            for batch, seq in ((1, 512), (4, 512), (8, 512), (2, 1024), (8, 1024)):
                rows.append(train(name, precision, batch, seq))
                print(f"train {name} {precision} b={batch} s={seq}: {rows[-1]['peakAllocatedBytes'] / 2**30:.3f} GiB", file=sys.stderr, flush=True)
        for batch, prompt, new in ((1, 512, 256), (8, 512, 256), (16, 256, 512)):
            rows.append(generate(name, batch, prompt, new))
            print(f"infer {name} b={batch} p={prompt} n={new}: {rows[-1]['peakAllocatedBytes'] / 2**30:.3f} GiB", file=sys.stderr, flush=True)
    json.dump({
        "schema": "gpumem.measured-peaks/1",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
