"""What PEFT's LoRA adds to a transformers MoE model (mixtral-mini from fixtures/plan/configs/), for gpumem plan's
MoE adapter count: the modules it wraps and the adapter parameters it makes (names, shapes, dtypes), and what autograd
saves in one forward pass of layer 1, tensor by tensor, with the module that saved it.

  python3 benchmarks/pytorch/record_moe_lora_census.py --out moe-census.json

bf16 base, PEFT defaults (fp32 adapters), bf16 autocast, batch 4 x 512 tokens, target_modules all-linear and
q_proj,v_proj; random weights (nothing is downloaded).
"""
import argparse
import json
import os
import re
import sys

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

import peft
from peft import LoraConfig, get_peft_model
from peak_tools import CONFIGS, module_stack


def census(targets, batch, seq):
    cfg = AutoConfig.from_pretrained(os.path.join(CONFIGS, "mixtral-mini"))
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(cfg, dtype=torch.bfloat16)
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM", target_modules=targets))
    model.train()
    wrappers = {}
    for n, m in model.named_modules():
        if re.search(r"layers\.1\.", n) and hasattr(m, "lora_A"):
            wrappers[n] = {"type": type(m).__name__, "base": type(getattr(m, "base_layer", m)).__name__,
                           "parameterName": getattr(m, "parameter_name", None)}
    adapters = [[n, list(p.shape), str(p.dtype)] for n, p in model.named_parameters() if p.requires_grad and ".layers.1." in n]
    stack, hooks = module_stack(model)
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen, rows = set(), []

    def pack(t):
        if t.device.type == "cuda":
            s = t.untyped_storage()
            ptr = s.data_ptr()
            new = ptr not in seen and ptr not in params
            seen.add(ptr)
            if ".layers.1." in stack[-1] or stack[-1].endswith(".layers.1"):
                rows.append([stack[-1], list(t.shape), str(t.dtype).replace("torch.", ""), s.nbytes() if new else 0, ptr in params])
        return t

    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
    torch.cuda.synchronize()
    held = torch.cuda.memory_allocated() - before
    torch.cuda.reset_peak_memory_stats()
    loss.backward()
    torch.cuda.synchronize()
    backward_peak = torch.cuda.max_memory_allocated() - before
    for h in hooks:
        h.remove()
    trainable, total = model.get_nb_trainable_parameters()
    out = {"targets": targets, "batch": batch, "seq": seq, "trainableParams": trainable, "allParams": total,
           "heldAfterForwardBytes": held, "backwardPeakAboveStartBytes": backward_peak, "layer1Wrappers": wrappers,
           "layer1Adapters": adapters, "layer1Saved": rows, "layer1SavedBytes": sum(r[3] for r in rows if not r[4])}
    del model, loss, x
    torch.cuda.empty_cache()
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    doc = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "transformers": transformers.__version__,
           "peft": peft.__version__, "runs": []}
    for targets in ("all-linear", ["q_proj", "v_proj"]):
        try:
            doc["runs"].append(census(targets, 4, 512))
        except Exception as e:  # noqa: BLE001 -- one failed census must not lose the other
            doc["runs"].append({"targets": targets, "error": f"{type(e).__name__}: {e}"})
        r = doc["runs"][-1]
        print(f"{targets}: " + (r.get("error") or f"layer 1 saved {r['layer1SavedBytes'] / 2**20:.1f} MiB, held after forward "
                                 f"{r['heldAfterForwardBytes'] / 2**30:.3f} GiB"), file=sys.stderr, flush=True)
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()
