"""Measures what PEFT LoRA training and pure-bf16 training hold on the GPU, for gpumem plan's adapter model (fit rows).

Run on a GPU machine with torch, transformers and peft:
    python3 benchmarks/pytorch/record_lora_peaks.py --out OUTDIR [--deadline SECONDS]
Models are built from configs with random weights (memory does not depend on the values; nothing is downloaded).
Writes, each file rewritten after every run so that a run cut short still leaves what it measured:
  OUTDIR/census.json     what autograd saves for the backward pass, tensor by tensor (torch.autograd.graph.
                         saved_tensors_hooks around one forward pass, batch 1 x 512 tokens), with the module that
                         saved it: full fine-tuning in fp32 / autocast bf16 / pure bf16, and LoRA in the forms PEFT
                         runs (fp32 adapters on a bf16 base as autocast_adapter_dtype=True keeps them, with and
                         without torch.autocast, lora_dropout 0 and 0.05, bf16 adapters, DoRA).
  OUTDIR/snapshots.json  the tensors live at the peak of one training step, from torch.cuda.memory._snapshot()'s
                         trace, grouped by the Python line that allocated them (pure bf16 and LoRA).
  OUTDIR/lora-peaks.json peaks of LoRA training: torch.optim.AdamW (foreach, torch's default) over the adapters, three
                         steps, the figures of the third; max_memory_allocated and max_memory_reserved.
"""
import gc
import json
import os
import re
import sys
import time

import torch
import transformers
from transformers import AutoModelForCausalLM, GPT2Config, LlamaConfig, Qwen2Config

import peft
from peft import LoraConfig, get_peft_model
from peak_tools import module_stack

MODELS = {
    "gpt2-medium": lambda: GPT2Config(n_embd=1024, n_layer=24, n_head=16, n_positions=1024, vocab_size=50257),
    "llama-mini": lambda: LlamaConfig(hidden_size=1024, num_hidden_layers=16, num_attention_heads=16, num_key_value_heads=4,
                                      intermediate_size=2816, vocab_size=32000, max_position_embeddings=4096, tie_word_embeddings=False),
    # TinyLlama-1.1B's published config.json
    "tinyllama-1.1b": lambda: LlamaConfig(hidden_size=2048, num_hidden_layers=22, num_attention_heads=32, num_key_value_heads=4,
                                          intermediate_size=5632, vocab_size=32000, max_position_embeddings=2048, tie_word_embeddings=False),
    # Qwen2-0.5B's published config.json
    "qwen2-0.5b": lambda: Qwen2Config(hidden_size=896, num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                                      intermediate_size=4864, vocab_size=151936, max_position_embeddings=32768, tie_word_embeddings=True),
}
START = time.time()
OUT = "."
RESULTS = {"census": [], "snapshots": [], "peaks": [], "errors": [], "skipped": []}


def meta():
    return {"schema": "gpumem.measured-peaks/1", "set": "lora-fit", "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "transformers": transformers.__version__, "peft": peft.__version__, "cuda": torch.version.cuda,
            "seconds": round(time.time() - START, 1)}


def save():
    for key, name in (("census", "census.json"), ("snapshots", "snapshots.json"), ("peaks", "lora-peaks.json")):
        with open(os.path.join(OUT, name), "w") as f:
            json.dump({**meta(), "rows": RESULTS[key], "errors": RESULTS["errors"], "skipped": RESULTS["skipped"]}, f, indent=1)


def config_dict(cfg):
    keep = ["model_type", "hidden_size", "n_embd", "num_hidden_layers", "n_layer", "num_attention_heads", "n_head",
            "num_key_value_heads", "intermediate_size", "n_inner", "vocab_size", "max_position_embeddings", "n_positions",
            "tie_word_embeddings", "head_dim"]
    d = cfg.to_dict()
    return {k: d[k] for k in keep if k in d and d[k] is not None}


def reset():
    gc.collect()
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def setup(name, kind, lora=None, checkpointing=False):
    """kind: fp32, amp-bf16 or bf16-pure (full fine-tuning), or lora (bf16 base, PEFT adapters).
    lora: dict(r, targets, dropout, dora, adapter_dtype 'fp32'|'bf16')."""
    cfg = MODELS[name]()
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa")
    if kind in ("bf16-pure", "lora"):
        model = model.to(torch.bfloat16)
    if checkpointing:
        model.gradient_checkpointing_enable()
    info = {}
    if kind == "lora":
        lc = LoraConfig(r=lora["r"], lora_alpha=2 * lora["r"], target_modules=lora["targets"], lora_dropout=lora.get("dropout", 0.0),
                        use_dora=lora.get("dora", False), task_type="CAUSAL_LM")
        model = get_peft_model(model, lc, autocast_adapter_dtype=lora.get("adapter_dtype", "fp32") == "fp32")
        trainable, total = model.get_nb_trainable_parameters()
        tm = model.peft_config["default"].target_modules
        info = {"trainableParams": trainable, "allParams": total, "targetModules": tm if isinstance(tm, str) else sorted(tm)}
    model.train()
    return cfg, model, info


def param_bytes(model):
    seen, total, trainable = set(), 0, 0
    for p in model.parameters():
        if p.data_ptr() in seen:
            continue
        seen.add(p.data_ptr())
        total += p.numel() * p.element_size()
        trainable += p.numel() * p.element_size() if p.requires_grad else 0
    return total, trainable


def census(name, kind, lora=None, autocast=False, batch=1, seq=512):
    """What autograd saves in one forward pass, by module, each storage counted once."""
    reset()
    cfg, model, info = setup(name, kind, lora)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    stack, hooks = module_stack(model)
    seen = set()
    rows = []

    def pack(t):
        if t.device.type == "cuda":
            s = t.untyped_storage()
            ptr = s.data_ptr()
            new = ptr not in seen and ptr not in params
            seen.add(ptr)
            rows.append((stack[-1], tuple(t.shape), str(t.dtype).replace("torch.", ""), s.nbytes() if new else 0, ptr in params))
        return t

    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=(kind == "amp-bf16" or autocast)):
            loss = model(input_ids=x, labels=x).loss
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    for h in hooks:
        h.remove()
    groups = {}
    for mod, shape, dtype, nbytes, is_param in rows:
        if is_param or nbytes == 0:
            continue
        key = re.sub(r"\.\d+(\.|$)", r".N\1", mod) + f" {dtype}"
        groups[key] = groups.get(key, 0) + nbytes
    layer = [r for r in rows if re.search(r"(layers|\.h)\.1(\.|$)", r[0]) and not r[4]]
    loss.backward()
    del model, loss, x
    tokens = batch * seq
    row = {"model": name, "config": config_dict(cfg), "kind": kind, "lora": lora, "autocast": autocast or kind == "amp-bf16",
           "batch": batch, "seq": seq, **info, "savedBytes": sum(r[3] for r in rows), "heldAfterForwardBytes": held,
           "bytesPerTokenByModule": {k: round(v / tokens, 2) for k, v in sorted(groups.items(), key=lambda kv: -kv[1])},
           "layer1": [[m, list(s), d, round(b / tokens, 2)] for m, s, d, b, _ in layer]}
    reset()
    return row


def snapshot(name, kind, batch, seq, lora=None):
    """Tensors live at the step's peak, grouped by the transformers / peft / torch line that allocated them."""
    reset()
    cfg, model, info = setup(name, kind, lora)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")

    def step():
        loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    torch.cuda.memory._record_memory_history(enabled="all", context="alloc", stacks="python", max_entries=1_000_000)
    step()
    torch.cuda.synchronize()
    snap = torch.cuda.memory._snapshot()
    torch.cuda.memory._record_memory_history(enabled=None)
    events = [e for e in snap["device_traces"][0] if e["action"] in ("alloc", "free_completed")]
    live, cur, peak, at = {}, base, base, -1
    for i, e in enumerate(events):
        if e["action"] == "alloc":
            live[e["addr"]] = e["size"]
            cur += e["size"]
        else:  # blocks allocated before the trace began are freed too: the event carries the size
            live.pop(e["addr"], None)
            cur -= e["size"]
        if cur > peak:
            peak, at = cur, i
    live = {}
    for e in events[: at + 1]:
        if e["action"] == "alloc":
            live[e["addr"]] = e
        else:
            live.pop(e["addr"], None)

    def where(frames):
        keep = [f for f in frames if re.search(r"transformers/|peft/|torch/(nn|optim|autograd|_tensor)", f["filename"])]
        f = keep[0] if keep else (frames[0] if frames else {"filename": "?", "line": 0, "name": "?"})
        return f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}"

    groups = {}
    for e in live.values():
        k = where(e.get("frames", []))
        g = groups.setdefault(k, {"bytes": 0, "count": 0, "sizes": set()})
        g["bytes"] += e["size"]
        g["count"] += 1
        g["sizes"].add(e["size"])
    top = sorted(groups.items(), key=lambda kv: -kv[1]["bytes"])[:40]
    # the phase of the peak: how far into the step's trace it came, and what the trace allocated before it
    row = {"model": name, "kind": kind, "lora": lora, "batch": batch, "seq": seq, **info, "heldBeforeStepBytes": base,
           "peakAllocatedBytes": torch.cuda.max_memory_allocated(), "tracePeakBytes": peak, "peakEventIndex": at,
           "events": len(events), "parameterBytes": param_bytes(model)[0],
           "liveAtPeak": [{"where": k, "bytes": g["bytes"], "count": g["count"], "sizes": sorted(g["sizes"])[-4:]} for k, g in top]}
    del model, opt, x, snap
    reset()
    return row


def peak(name, batch, seq, lora, checkpointing=False, autocast=False):
    """LoRA training: three AdamW steps over the adapters; the third step's peaks."""
    reset()
    cfg, model, info = setup(name, "lora", lora, checkpointing)
    total, trainable = param_bytes(model)
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    phases = {}
    for step in range(3):
        last = step == 2
        if last:
            torch.cuda.synchronize()
            phases["before_forward"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
            loss = model(input_ids=x, labels=x).loss
        if last:
            torch.cuda.synchronize()
            phases["forward_peak"] = torch.cuda.max_memory_allocated()
            phases["after_forward"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        loss.backward()
        if last:
            torch.cuda.synchronize()
            phases["backward_peak"] = torch.cuda.max_memory_allocated()
            phases["after_backward"] = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
        opt.step()
        opt.zero_grad(set_to_none=True)
        if last:
            torch.cuda.synchronize()
            phases["optimizer_peak"] = torch.cuda.max_memory_allocated()
    row = {"mode": "train", "model": name, "config": config_dict(cfg), "precision": "amp-bf16" if autocast else "bf16-pure",
           "baseWeights": "bf16", "lora": lora, "recompute": "full" if checkpointing else "none", "autocast": autocast,
           "optimizer": "adamw (foreach)", "fusedOptimizer": False, "batch": batch, "seq": seq, "attention": "sdpa", **info,
           "parameterBytes": total, "trainableParameterBytes": trainable,
           "peakAllocatedBytes": max(phases["forward_peak"], phases["backward_peak"], phases["optimizer_peak"]),
           "peakReservedBytes": torch.cuda.max_memory_reserved(), "phases": phases, "role": "fit"}
    del model, opt, loss, x
    reset()
    return row


def plan():
    qv = {"gpt2-medium": ["c_attn"]}
    lo = lambda n, **kw: {"r": 16, "targets": qv.get(n, ["q_proj", "v_proj"]), "dropout": 0.0, "dora": False, "adapter_dtype": "fp32", **kw}
    for n in ("llama-mini", "gpt2-medium"):
        yield "census", (n, "fp32"), {}
        yield "census", (n, "amp-bf16"), {}
        yield "census", (n, "bf16-pure"), {}
        yield "census", (n, "lora", lo(n)), {}
        yield "census", (n, "lora", lo(n)), {"autocast": True}
        yield "census", (n, "lora", lo(n, targets="all-linear")), {}
        yield "census", (n, "lora", lo(n, targets="all-linear", dropout=0.05)), {}
        yield "census", (n, "lora", lo(n, adapter_dtype="bf16")), {}
    yield "census", ("llama-mini", "lora", lo("llama-mini", dora=True)), {}
    yield "census", ("qwen2-0.5b", "bf16-pure"), {}
    yield "snapshot", ("llama-mini", "bf16-pure", 8, 1024), {}
    yield "snapshot", ("llama-mini", "lora", 8, 1024, lo("llama-mini")), {}
    for n in ("llama-mini", "gpt2-medium", "tinyllama-1.1b"):
        for targets in (lo(n)["targets"], "all-linear"):
            for b, s in ((4, 512), (8, 1024)):
                for ckpt in (False, True):
                    yield "peak", (n, b, s, lo(n, targets=targets)), {"checkpointing": ckpt}
        for r in (8, 64):
            yield "peak", (n, 8, 1024, lo(n, r=r)), {}
        yield "peak", (n, 8, 1024, lo(n, targets="all-linear", dropout=0.05)), {}
        yield "peak", (n, 8, 1024, lo(n)), {"autocast": True}
        if n != "gpt2-medium":
            yield "peak", (n, 4, 512, lo(n, dora=True)), {}
    for targets in (["q_proj", "v_proj"], "all-linear"):
        yield "peak", ("qwen2-0.5b", 8, 1024, lo("qwen2-0.5b", targets=targets)), {}
    yield "snapshot", ("gpt2-medium", "bf16-pure", 8, 1024), {}


def main():
    global OUT
    args = sys.argv[1:]
    OUT = args[args.index("--out") + 1] if "--out" in args else "."
    deadline = float(args[args.index("--deadline") + 1]) if "--deadline" in args else 1e9
    os.makedirs(OUT, exist_ok=True)
    fns = {"census": census, "snapshot": snapshot, "peak": peak}
    for what, a, kw in plan():
        label = f"{what} {a} {kw}"
        if time.time() - START > deadline:
            RESULTS["skipped"].append(label)
            continue
        t = time.time()
        try:
            row = fns[what](*a, **kw)
            RESULTS[{"census": "census", "snapshot": "snapshots", "peak": "peaks"}[what]].append(row)
            shown = row.get("peakAllocatedBytes", row.get("savedBytes", 0))
            print(f"{label}: {shown / 2**30:.3f} GiB ({time.time() - t:.1f} s)", file=sys.stderr, flush=True)
        except Exception as e:  # one failing configuration must not lose the others
            RESULTS["errors"].append(f"{label}: {type(e).__name__}: {e}")
            print(f"{label}: FAILED {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            reset()
        save()
    save()
    print(f"done in {time.time() - START:.0f} s; {len(RESULTS['errors'])} errors, {len(RESULTS['skipped'])} skipped", file=sys.stderr)


if __name__ == "__main__":
    main()
