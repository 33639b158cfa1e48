"""What the peak recorders (record_adapter_peaks.py, record_compile_peaks.py) share: the model configs of
fixtures/plan/configs, a tiny shape of them for a CPU dry run, building a model with random weights, nvidia-smi's used
memory, the reset between runs, the three measured training steps, the versions a fixture records and the loop over
runs; and with the census recorders (record_lora_peaks.py, record_moe_lora_census.py) the module-stack hooks."""
import gc
import json
import os
import subprocess
import sys
import time

import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.normpath(os.path.join(HERE, "..", "..", "fixtures", "plan", "configs"))

# a CPU dry run: every family at a few MiB, the code paths unchanged
TINY = dict(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
            head_dim=16, vocab_size=512, num_local_experts=4)


def load_config(family, tiny):
    cfg = AutoConfig.from_pretrained(os.path.join(CONFIGS, family))
    if tiny:
        for k, v in TINY.items():
            if hasattr(cfg, k):
                setattr(cfg, k, v)
    return cfg


def build(cfg, dtype, device):
    with torch.device(device):
        try:
            return AutoModelForCausalLM.from_config(cfg, dtype=dtype)
        except TypeError:  # transformers 4.x names it torch_dtype
            return AutoModelForCausalLM.from_config(cfg, torch_dtype=dtype)


def smi_used_bytes():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
        return int(float(out[0])) * 2**20
    except Exception:  # noqa: BLE001 -- no nvidia-smi: the figure is left out, not zero
        return None


def reset(cuda):
    gc.collect()
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def three_steps(forward, opt, trainable_params, cuda, device, base):
    """Three training steps (bf16 autocast, AdamW); the third is measured phase by phase: memory_allocated before its
    forward, then after each phase its peak and what stays, above `base`. Answers the phases, whether every trainable
    parameter got a gradient, max_memory_reserved at the end of each phase of the third step, and the first step's
    seconds (compilation, where the model is compiled)."""
    phases = {}
    reserved_peaks = []
    grads_ok = None
    first_step_seconds = None

    def mark(name):
        if not cuda:
            return
        torch.cuda.synchronize()
        phases[name + "_peak"] = torch.cuda.max_memory_allocated() - base
        reserved_peaks.append(torch.cuda.max_memory_reserved())
        phases["after_" + name] = torch.cuda.memory_allocated() - base
        torch.cuda.reset_peak_memory_stats()

    for step in range(3):
        last = step == 2
        t = time.time()
        if last and cuda:
            torch.cuda.synchronize()
            phases["before_forward"] = torch.cuda.memory_allocated() - base
            torch.cuda.reset_peak_memory_stats()
        with torch.autocast(device, dtype=torch.bfloat16):
            loss = forward()
        if last:
            mark("forward")
        loss.backward()
        if last:
            grads_ok = all(p.grad is not None for p in trainable_params)
            mark("backward")
        opt.step()
        opt.zero_grad(set_to_none=True)
        if last:
            mark("step")
        if step == 0:
            first_step_seconds = round(time.time() - t, 1)
    return phases, grads_ok, reserved_peaks, first_step_seconds


def module_stack(model):
    """Forward hooks on every module of `model` that keep the name of the module running now in stack[-1] ("" outside
    any); answers the stack and the hooks (remove them when done)."""
    names, stack, hooks = {}, [""], []

    def enter(mod, args):
        stack.append(names[mod])

    def leave(mod, args, out):  # returns None: a forward hook that returns a value replaces the module's output
        stack.pop()

    for n, m in model.named_modules():
        names[m] = n
        hooks.append(m.register_forward_pre_hook(enter))
        hooks.append(m.register_forward_hook(leave))
    return stack, hooks


def versions_of(device, peft):
    """The device and library versions a fixture records (`peft` the module, or None where it is not installed)."""
    return {
        "device": torch.cuda.get_device_name(0) if device == "cuda" else "cpu (script check, not a measurement)",
        "date": time.strftime("%Y-%m-%d"),
        "torch": torch.__version__, "transformers": transformers.__version__,
        "peft": getattr(peft, "__version__", None), "cuda": torch.version.cuda,
    }


GiB = 2**30


def record_runs(doc, runs, a, run_one, skip=lambda spec: False, saved=lambda: None, after_failure=reset):
    """Runs `run_one(spec)` -> (row, after, inside) for each spec of `runs` whose family `a.only` names (all when
    empty) and `skip` does not, until `a.deadline` seconds have passed (later runs are recorded as not started);
    a failing run is recorded, `after_failure(cuda)` cleans up, and the others go on. Writes `doc` to `a.out` after each run (then calls `saved`), and
    prints a line per run: its measured figures, `after`, and `inside` the brackets before the seconds."""
    only = set(filter(None, a.only.split(",")))
    t0 = time.time()
    for spec in runs:
        if only and spec[0] not in only:
            continue
        if skip(spec):
            continue
        if time.time() - t0 > a.deadline:
            doc["errors"].append({"run": list(spec), "error": "not started: deadline"})
            continue
        t = time.time()
        try:
            row, after, inside = run_one(spec)
            row["details"]["seconds"] = round(time.time() - t, 1)
            doc["rows"].append(row)
            m = row["measured"]
            print(f"{row['id']}: " + ", ".join(f"{x['measures']} {x['value'] / GiB:.3f} GiB" for x in m) + after
                  + f" ({inside}{time.time() - t:.1f} s)", file=sys.stderr, flush=True)
        except Exception as e:  # noqa: BLE001 -- one failed run must not lose the others
            doc["errors"].append({"run": list(spec), "error": f"{type(e).__name__}: {e}"})
            print(f"{spec}: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            after_failure(a.device == "cuda")
        doc["seconds"] = round(time.time() - t0, 1)
        with open(a.out, "w") as f:
            json.dump(doc, f, indent=1)
        saved()
    print(f"{len(doc['rows'])} runs, {len(doc['errors'])} errors, {doc['seconds']} s", file=sys.stderr)
