"""Measures the peak GPU memory of PEFT adapter and full fine-tuning runs, for gpumem plan's accuracy sets.

Run on a GPU machine (no downloads: models are built from the config.json files in fixtures/plan/configs/, with
random weights, since memory does not depend on the values):

  python3 benchmarks/pytorch/record_adapter_peaks.py --out measured.json [--deadline 200] [--only NAME,...]

Each run is what a stock Hugging Face + PEFT script does: the base loaded in bf16 (LoRA, DoRA) or fp32 (full
fine-tuning, or --base-weights fp32), bf16 autocast as Trainer(bf16=True) sets it, PEFT's defaults (target modules
for the model_type unless all-linear; adapter weights in fp32 under a 16-bit base, autocast_adapter_dtype=True),
torch's default (foreach) AdamW over the trainable parameters, Hugging Face's loss (fp32 logits), the attention
kernel transformers picks by default, gradient checkpointing as gradient_checkpointing_enable() runs it. Three steps;
the figures are from the third, when the optimizer states exist. Per run it keeps max_memory_allocated,
max_memory_reserved (reserved memory only grows inside a run, so the third step's peak is the run's), and the
device's used memory after the third step (nvidia-smi's memory.used and cudaMemGetInfo's total - free: the context
and everything the caching allocator holds), with the versions of torch, transformers and peft.

Rows are written in the fixture format tools/plan-accuracy.mjs reads (schema gpumem.plan-fixture/1), each with the
`gpumem plan` flags that describe the run; the file is rewritten after every run, so a run stopped by a time limit
still leaves every finished row. --device cpu runs the same code on the CPU with tiny shapes to check the script.
"""
import argparse
import sys

import torch
from peak_tools import build, load_config, record_runs, reset, smi_used_bytes, three_steps, versions_of

try:
    import peft
    from peft import LoraConfig, get_peft_model
except ImportError:  # recorded as an error on every adapter run
    peft = None


# (family, method, rank, targets, batch, seq, extras): method full | lora | dora; targets default | all-linear;
# extras: gc (gradient checkpointing), fp32-base (LoRA over an fp32 base). Ordered so that a deadline keeps breadth:
# every family's first runs come before the sweeps.
RUNS = [
    ("llama-3.2-1b", "lora", 16, "default", 4, 512, ()),
    ("qwen3-0.6b", "lora", 16, "default", 4, 512, ()),
    ("gemma-2-2b", "lora", 16, "default", 4, 512, ()),
    ("pythia-1b", "lora", 16, "default", 4, 512, ()),
    ("mixtral-mini", "lora", 16, "default", 4, 512, ()),
    ("qwen2-0.5b", "lora", 16, "default", 4, 512, ()),
    ("llama-3.2-1b", "full", 0, None, 4, 512, ()),
    ("qwen3-0.6b", "full", 0, None, 4, 512, ()),
    ("gemma-2-2b", "full", 0, None, 2, 512, ()),
    ("pythia-1b", "full", 0, None, 4, 512, ()),
    ("mixtral-mini", "full", 0, None, 4, 512, ()),
    ("llama-3.2-1b", "lora", 8, "default", 4, 512, ()),
    ("llama-3.2-1b", "lora", 64, "default", 4, 512, ()),
    ("llama-3.2-1b", "lora", 16, "all-linear", 4, 512, ()),
    ("llama-3.2-1b", "lora", 64, "all-linear", 4, 512, ()),
    ("llama-3.2-1b", "lora", 16, "default", 8, 1024, ()),
    ("llama-3.2-1b", "lora", 16, "all-linear", 8, 1024, ()),
    ("llama-3.2-1b", "lora", 16, "default", 8, 1024, ("gc",)),
    ("llama-3.2-1b", "lora", 16, "all-linear", 8, 1024, ("gc",)),
    ("llama-3.2-1b", "dora", 16, "default", 4, 512, ()),
    ("llama-3.2-1b", "dora", 16, "all-linear", 4, 512, ()),
    ("llama-3.2-1b", "lora", 16, "default", 4, 512, ("fp32-base",)),
    ("qwen3-0.6b", "lora", 64, "all-linear", 8, 1024, ()),
    ("qwen3-0.6b", "lora", 16, "all-linear", 8, 1024, ("gc",)),
    ("gemma-2-2b", "lora", 16, "all-linear", 4, 1024, ()),
    ("gemma-2-2b", "lora", 16, "default", 8, 1024, ("gc",)),
    ("gemma-2-2b", "dora", 16, "default", 4, 512, ()),
    ("pythia-1b", "lora", 16, "all-linear", 8, 1024, ()),
    ("pythia-1b", "lora", 16, "default", 8, 1024, ("gc",)),
    ("mixtral-mini", "lora", 16, "all-linear", 4, 512, ()),
    ("mixtral-mini", "lora", 16, "default", 8, 1024, ("gc",)),
    ("qwen2-0.5b", "lora", 16, "all-linear", 8, 1024, ()),
    ("qwen2-0.5b", "lora", 16, "all-linear", 8, 1024, ("gc",)),
]

# model types PEFT has no default target modules for: what its Llama-style default would take
NO_PEFT_DEFAULT = {"mixtral": ["q_proj", "v_proj"]}


def flags_for(method, rank, targets, batch, seq, extras, attention, family_type):
    f = ["--mode", "train", "--precision", "amp-bf16", "--batch", str(batch), "--seq", str(seq)]
    if method != "full":
        f += ["--lora", str(rank), "--base-weights", "fp32" if "fp32-base" in extras else "bf16"]
        if targets == "all-linear":
            f += ["--lora-targets", "all-linear"]
        elif family_type in NO_PEFT_DEFAULT:
            f += ["--lora-targets", ",".join(NO_PEFT_DEFAULT[family_type])]
        if method == "dora":
            f += ["--dora"]
    if "gc" in extras:
        f += ["--recompute", "full"]
    if attention not in ("sdpa", None):
        f += ["--attention", "eager" if attention == "eager" else attention]
    return f


def run(spec, device, versions):
    family, method, rank, targets, batch, seq, extras = spec
    cuda = device == "cuda"
    tiny = not cuda
    if tiny:
        batch, seq = 2, 32
    reset(cuda)
    # the run's figures count from here, so that the weights, the adapters and the input count in the peak
    base = torch.cuda.memory_allocated() if cuda else 0
    cfg = load_config(family, tiny)
    base_dtype = torch.float32 if method == "full" or "fp32-base" in extras else torch.bfloat16
    model = build(cfg, base_dtype, device)
    attention = getattr(model.config, "_attn_implementation", None)
    if "gc" in extras:
        model.gradient_checkpointing_enable()
    lora = None
    if method != "full":
        if peft is None:
            raise RuntimeError("peft is not installed")
        kw = dict(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM", use_dora=method == "dora")
        if targets == "all-linear":
            kw["target_modules"] = "all-linear"
        elif cfg.model_type in NO_PEFT_DEFAULT:
            kw["target_modules"] = NO_PEFT_DEFAULT[cfg.model_type]
        model = get_peft_model(model, LoraConfig(**kw))
        adapted = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if hasattr(m, "lora_A") and len(getattr(m, "lora_A")) > 0})
        trainable, total = model.get_nb_trainable_parameters()
        adapter_dtype = next(str(p.dtype) for n, p in model.named_parameters() if "lora_" in n and p.requires_grad)
        lora = {"rank": rank, "alpha": 2 * rank, "targets": targets, "adaptedModules": adapted, "dora": method == "dora",
                "trainableParams": trainable, "allParams": total, "adapterDtype": adapter_dtype}
    model.train()
    trainable_params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable_params, lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    reset(cuda)  # what building the model left cached is not part of the run
    weight_bytes = sum(p.numel() * p.element_size() for p in model.parameters()) + sum(b.numel() * b.element_size() for b in model.buffers())
    phases, grads_ok, reserved_peaks, _ = three_steps(lambda m=model, ids=x: m(input_ids=ids, labels=ids).loss, opt, trainable_params, cuda, device, base)
    row_params = sum(p.numel() for p in model.parameters())
    figures = {}
    if cuda:
        reserved_peak = max(reserved_peaks)
        free, total = torch.cuda.mem_get_info()
        figures = {
            "allocated": max(phases["forward_peak"], phases["backward_peak"], phases["step_peak"]),
            "reserved": reserved_peak,
            "deviceSmi": smi_used_bytes(),
            "deviceMemGetInfo": total - free,
            "reservedAtEnd": torch.cuda.memory_reserved(),
            "weightBytes": weight_bytes,
            "startBytes": base,
        }
    del model, opt, x, trainable_params
    reset(cuda)
    name = f"{family}-{method}{'' if method == 'full' else f'-r{rank}-{targets}'}-{batch}x{seq}{''.join('-' + e for e in extras)}"
    measured = []
    if cuda:
        measured.append({"measures": "allocated", "value": figures["allocated"], "unit": "bytes",
                         "how": "max_memory_allocated over the third step, above memory_allocated before the model was built"})
        measured.append({"measures": "reserved", "value": figures["reserved"], "unit": "bytes"})
        dev = figures["deviceSmi"] if figures["deviceSmi"] is not None else figures["deviceMemGetInfo"]
        measured.append({"measures": "device", "value": dev, "unit": "bytes",
                         "how": "nvidia-smi memory.used after the third step" if figures["deviceSmi"] is not None
                         else "cudaMemGetInfo total - free after the third step"})
    return {
        "id": f"h200-{name}",
        "project": "gpumem (recorded)",
        "source": {"script": "benchmarks/pytorch/record_adapter_peaks.py", "machine": versions["device"], "date": versions["date"]},
        "gpu": versions["device"], "gpus": 1,
        "model": f"configs/{family}/config.json",
        "method": method,
        "flags": flags_for(method, rank, targets, batch, seq, extras, attention, cfg.model_type),
        "measured": measured,
        "role": "test",
        "details": {"attention": attention, "baseDtype": str(base_dtype), "autocast": "bf16", "optimizer": "torch.optim.AdamW (foreach)",
                    "gradientCheckpointing": "gc" in extras, "lora": lora, "parameters": row_params, "gradsOk": grads_ok,
                    "phases": phases, "figures": figures},
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--deadline", type=float, default=200.0, help="seconds after which no new run starts")
    ap.add_argument("--only", default="", help="comma-separated families")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("record_adapter_peaks: no CUDA device (use --device cpu to check the script)")
    versions = versions_of(a.device, peft)
    doc = {"schema": "gpumem.plan-fixture/1", "set": "h200-adapters",
           "description": "PEFT LoRA / DoRA and full fine-tuning runs recorded with benchmarks/pytorch/record_adapter_peaks.py",
           "versions": versions, "rows": [], "errors": []}
    record_runs(doc, RUNS, a, lambda spec: (run(spec, a.device, versions), "", ""))


if __name__ == "__main__":
    main()
