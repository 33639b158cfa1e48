"""Measures the peak GPU memory of PyTorch training and generation, for gpumem plan's accuracy table.

Run on a GPU machine:  python3 benchmarks/pytorch/record_training_peaks.py [--set base|variety|all] > measured.json
Models are Hugging Face GPT-2, Llama-style and Qwen2-style models built from configs (random weights: memory does not
depend on the values). Training: AdamW, three steps; the figures are from the third step, when the optimizer states
exist. Generation: bf16 weights, greedy decoding with the KV cache (DynamicCache). Peak =
torch.cuda.max_memory_allocated().

base     GPT-2, GPT-2 medium and a small Llama; fp32 or bf16 autocast; torch's default (foreach) AdamW.
variety  what a stock setup also runs: pure bf16 (model.to(torch.bfloat16), no master copy), activation
         checkpointing as Hugging Face's gradient_checkpointing_enable() runs it, the fused AdamW beside the default
         foreach one, and Qwen2-0.5B's shape (grouped-query attention, a 151,936-token vocabulary, tied embeddings),
         where logits and the loss dominate a small model's peak.
"""
import gc
import json
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

try:
    from transformers import Qwen2Config
except ImportError:  # transformers before 4.37
    Qwen2Config = None

MODELS = {
    "gpt2": lambda: GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257),
    "gpt2-medium": lambda: GPT2Config(n_embd=1024, n_layer=24, n_head=16, n_positions=1024, vocab_size=50257),
    "llama-mini": lambda: LlamaConfig(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4,
                                      intermediate_size=2816, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False),
}
if Qwen2Config is not None:
    # Qwen2-0.5B's published config.json.
    MODELS["qwen2-0.5b"] = lambda: Qwen2Config(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                               intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768,
                                               tie_word_embeddings=True)


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


def train(name, precision, batch, seq, fused=False, checkpointing=False):
    """precision: fp32, amp-bf16 (fp32 weights, bf16 autocast) or bf16-pure (the model in bf16, no autocast)."""
    reset()
    base = torch.cuda.memory_allocated()
    cfg, model = build(name)
    if precision == "bf16-pure":
        model = model.to(torch.bfloat16)
    if checkpointing:
        model.gradient_checkpointing_enable()
    model.train()
    params = param_bytes(model)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True) if fused else torch.optim.AdamW(model.parameters(), lr=1e-4)
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
        "mode": "train", "model": name, "config": config_dict(cfg), "precision": precision,
        "optimizer": "adamw (fused)" if fused else "adamw (foreach)", "fusedOptimizer": fused,
        "recompute": "full" if checkpointing else "none",
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


def base_runs():
    for name in ("gpt2", "gpt2-medium", "llama-mini"):
        for precision in ("fp32", "amp-bf16"):
            for batch, seq in ((1, 512), (4, 512), (8, 512), (2, 1024), (8, 1024)):
                yield "train", (name, precision, batch, seq), {}
        for batch, prompt, new in ((1, 512, 256), (8, 512, 256), (16, 256, 512)):
            yield "infer", (name, batch, prompt, new), {}


def variety_runs():
    models = [m for m in ("gpt2-medium", "llama-mini", "qwen2-0.5b") if m in MODELS]
    if "qwen2-0.5b" not in MODELS:
        print("no Qwen2Config in this transformers: the Qwen2-style runs are left out", file=sys.stderr)
    for name in models:
        for batch, seq in ((4, 512), (8, 1024)):
            yield "train", (name, "bf16-pure", batch, seq), {}
        yield "train", (name, "amp-bf16", 8, 1024), {"checkpointing": True}
        yield "train", (name, "amp-bf16", 4, 512), {"fused": True}
    yield "train", ("llama-mini", "fp32", 8, 1024), {"checkpointing": True}
    if "qwen2-0.5b" in MODELS:
        for precision in ("fp32", "amp-bf16"):
            for batch, seq in ((1, 512), (4, 512), (8, 1024)):
                yield "train", ("qwen2-0.5b", precision, batch, seq), {}
        for batch, prompt, new in ((1, 512, 256), (8, 512, 256)):
            yield "infer", ("qwen2-0.5b", batch, prompt, new), {}


def main():
    which = sys.argv[sys.argv.index("--set") + 1] if "--set" in sys.argv else "all"
    if which not in ("base", "variety", "all"):
        sys.exit(f"record_training_peaks: --set base, variety or all, not {which}")
    runs = list(base_runs()) if which in ("base", "all") else []
    runs += list(variety_runs()) if which in ("variety", "all") else []
    rows = []
    t0 = time.time()
    for mode, args, kw in runs:
        rows.append(train(*args, **kw) if mode == "train" else generate(*args))
        print(f"{mode} {args} {kw}: {rows[-1]['peakAllocatedBytes'] / 2**30:.3f} GiB", file=sys.stderr, flush=True)
    json.dump({
        "schema": "gpumem.measured-peaks/1", "set": which,
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.version.cuda,
        "seconds": round(time.time() - t0, 1),
        "rows": rows,
    }, sys.stdout, indent=1)


if __name__ == "__main__":
    main()
