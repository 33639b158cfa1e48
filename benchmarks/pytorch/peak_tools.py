"""What the peak recorders (record_adapter_peaks.py, record_compile_peaks.py) share: the model configs of
fixtures/plan/configs, a tiny shape of them for a CPU dry run, building a model with random weights, nvidia-smi's used
memory, and the reset between runs."""
import gc
import os
import subprocess

import torch
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
