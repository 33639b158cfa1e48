"""Records PyTorch caching-allocator snapshots with device traces, as fixtures for gpumem pool replay.

Run on a GPU machine:  python3 benchmarks/pytorch/record_snapshot.py OUTDIR [RUN ...]
Trains a GPT-2 (124M) and a small Llama-style model for a few AdamW steps, and runs Hugging Face generate on models
built from fixtures/plan/configs (random weights, bf16, greedy, as record_stack_peaks.py's generate rows), with
torch.cuda.memory._record_memory_history (no stack frames, to keep the files small) and writes
OUTDIR/<name>.snapshot.json.gz: the dict that torch.cuda.memory._snapshot() returns (segments, device_traces), as JSON.
Without RUN names every run is recorded. `--frames N` (generate runs): Python frames on every allocation and only N new
tokens, to name the op behind each request of a prefill and the first decode steps.
"""
import gzip
import json
import os
import sys

import torch
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig

RUNS = {
    "gpt2-train": (lambda: GPT2Config(n_embd=768, n_layer=12, n_head=12, n_positions=1024, vocab_size=50257), 8, 512),
    "llama-mini-train": (lambda: LlamaConfig(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4,
                                             intermediate_size=2816, vocab_size=32000, tie_word_embeddings=False), 4, 1024),
}

# name: (config folder under fixtures/plan/configs, batch, prompt and new tokens)
GENERATE_RUNS = {
    "gemma-2-2b-generate-16x1024": ("gemma-2-2b", 16, 1024),
    "llama-3.2-1b-generate-32x512": ("llama-3.2-1b", 32, 512),
    "qwen3-0.6b-generate-48x768": ("qwen3-0.6b", 48, 768),
    "pythia-1.4b-generate-8x1024": ("pythia-1.4b", 8, 1024),
    "tinyllama-1.1b-generate-64x256": ("tinyllama-1.1b", 64, 256),
}


def save(name, outdir):
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    path = os.path.join(outdir, f"{name}.snapshot.json.gz")
    with gzip.open(path, "wt", compresslevel=9) as f:
        json.dump(snap, f, default=str)
    events = sum(len(t) for t in snap.get("device_traces", []))
    print(f"{name}: {len(snap['segments'])} segments, {events} trace events, {os.path.getsize(path)} bytes; "
          f"peak reserved {torch.cuda.max_memory_reserved()} allocated {torch.cuda.max_memory_allocated()}", file=sys.stderr)


def generate(name, outdir, frames=None):
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from peak_tools import build, load_config
    family, batch, seq = GENERATE_RUNS[name]
    new_tokens = frames or seq
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc" if frames else None, stacks="python",
                                             max_entries=4000000)
    cfg = load_config(family, False)
    model = build(cfg, torch.bfloat16, "cuda").eval()
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    with torch.no_grad():
        model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=new_tokens, min_new_tokens=new_tokens,
                       do_sample=False)
    torch.cuda.synchronize()
    save(f"{name}-frames{frames}" if frames else name, outdir)
    del model, x
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def run(name, outdir):
    make, batch, seq = RUNS[name]
    torch.cuda.empty_cache()
    torch.cuda.memory._record_memory_history(enabled="all", context=None, stacks="python", max_entries=400000)
    cfg = make()
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for step in range(4):
        # a different sequence length each step, as real data loaders give, so that block sizes vary
        s = seq - 64 * (step % 3)
        x = torch.randint(0, cfg.vocab_size, (batch, s), device="cuda")
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    save(name, outdir)
    del model, opt
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


if __name__ == "__main__":
    args = sys.argv[1:]
    frames = None
    if "--frames" in args:
        i = args.index("--frames")
        frames = int(args[i + 1])
        del args[i:i + 2]
    out = args[0] if args else "."
    os.makedirs(out, exist_ok=True)
    for n in args[1:] or [*RUNS, *GENERATE_RUNS]:
        if n in GENERATE_RUNS:
            generate(n, out, frames)
        else:
            run(n, out)
