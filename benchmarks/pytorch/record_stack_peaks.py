"""Peaks of the stacks `gpumem plan` models that one GPU with PyTorch, transformers and peft can run: full and LoRA
training under PYTORCH_CUDA_ALLOC_CONF (expandable segments), FSDP1 (FullyShardedDataParallel) and FSDP2 (fully_shard)
on a one-process group, peft's prepare_model_for_kbit_training on a bf16 base (as TRL's SFTTrainer calls it), and
Hugging Face generate's reserved memory as its cache grows, and whole runs of samples of many lengths (LoRA and full
fine-tuning, one sample or a padded batch a micro-batch): max_memory_reserved over the run, as a trainer reads it after
trainer.train(), where the caching allocator keeps the segments cut for earlier lengths. Each row is a fixture row: the model's config.json, the
`gpumem plan` flags that describe the run, and what PyTorch reported.

  python benchmarks/pytorch/record_stack_peaks.py --out stacks.json [--alloc-conf expandable_segments:True] [--in-process]

The allocator reads PYTORCH_CUDA_ALLOC_CONF once, when CUDA starts, so --alloc-conf sets it before torch is imported and
every row of that process carries it (run the script once per setting).

Each run has a process of its own (the script starts itself once per run): what a run leaves alive (an FSDP1 model its
process group still reaches, a reference cycle gc does not break at once) would otherwise stay in the next runs'
max_memory_reserved, which is not measured above a baseline. With --in-process every run shares one process, as the
2026-12-02 recording did; each row's details.before says what was allocated and reserved when its run began."""
import argparse
import json
import os
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--out", required=True)
ap.add_argument("--alloc-conf", default="")
ap.add_argument("--deadline", type=float, default=150.0, help="seconds after which no new run starts")
ap.add_argument("--only", default="", help="comma-separated families")
ap.add_argument("--kinds", default="", help="comma-separated kinds (default every run)")
ap.add_argument("--set", default="stacks", choices=["stacks", "validation"],
                help="stacks: the runs the stacks were modelled on; validation: other families and shapes, chosen and "
                     "recorded after the planner was frozen (nothing is changed on them)")
ap.add_argument("--device", default="cuda", choices=["cuda"])
ap.add_argument("--in-process", action="store_true", help="every run in this process (default: a process per run)")
ap.add_argument("--run", type=int, default=-1, help=argparse.SUPPRESS)  # the one run a child process records
a = ap.parse_args()
if a.alloc_conf:
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = a.alloc_conf

import torch  # noqa: E402  -- after PYTORCH_CUDA_ALLOC_CONF is set
import torch.distributed as dist  # noqa: E402

from peak_tools import build, load_config, record_runs, reset, three_steps, versions_of  # noqa: E402

try:
    import peft
    from peft import LoraConfig, get_peft_model, prepare_model_for_kbit_training
except ImportError:  # the rows that need peft are recorded as failed, the others run
    peft = None

# (family, kind, batch, seq): kind is full, lora, fsdp1, fsdp2, kbit-prep (LoRA after prepare_model_for_kbit_training)
# or generate (batch prompts of seq tokens, seq new tokens); lora-run / full-run[-ckpt]: a whole run of RUN_SAMPLES
# samples of lengths drawn from RUN_LENGTHS up to seq, batch samples a micro-batch padded to its longest, the optimizer
# stepping after each
RUNS = [
    ("llama-3.2-1b", "full", 4, 512),
    ("qwen2-0.5b", "full", 4, 1024),
    ("llama-3.2-1b", "lora", 4, 1024),
    ("llama-3.2-1b", "fsdp1", 4, 512),
    ("llama-3.2-1b", "fsdp2", 4, 512),
    ("qwen2-0.5b", "kbit-prep", 4, 1024),
    ("llama-3.2-1b", "generate", 32, 512),
    ("qwen2-0.5b", "generate", 32, 512),
    ("llama-3.2-1b", "lora-run-ckpt", 1, 4096),
    ("llama-3.2-1b", "lora-run", 1, 2048),
    ("llama-3.2-1b", "lora-run-ckpt", 4, 2048),
    ("qwen2-0.5b", "full-run-ckpt", 1, 4096),
    ("llama-3.2-3b", "lora-run-ckpt", 2, 4096),
    ("qwen3-0.6b", "full-run", 2, 2048),
    ("gemma-3-1b", "lora-run-ckpt", 1, 8192),
    ("phi-2", "lora-run", 1, 2048),
]
RUN_SAMPLES = 40
# the same kinds on families, shapes and sizes no stacks row has (chosen before any was planned)
VALIDATION = [
    ("tinyllama-1.1b", "full", 2, 1024),
    ("gemma-2-2b", "lora", 2, 2048),
    ("qwen3-0.6b", "fsdp1", 4, 1024),
    ("tinyllama-1.1b", "fsdp2", 2, 1024),
    ("llama-3.2-3b", "kbit-prep", 2, 1024),
    ("gemma-2-2b", "generate", 16, 1024),
    ("tinyllama-1.1b", "generate", 64, 256),
    ("phi-1.5", "full", 8, 512),
    ("starcoder2-3b", "lora", 4, 1024),
    ("pythia-1.4b", "generate", 8, 1024),
    ("qwen3-0.6b", "generate", 48, 768),
    ("stablelm-base-alpha-3b", "lora", 2, 2048),
]
CHOSEN = VALIDATION if a.set == "validation" else RUNS


def run_lengths(seq, seed=7):
    """RUN_SAMPLES lengths from a lognormal of mean seq / 3 and standard deviation seq / 4, drawn again outside
    [32, seq] (random.Random(seed): the same lengths every time; the row's --run-lengths lists them)."""
    import math
    import random
    rng = random.Random(seed)
    mean, sd = seq / 3, seq / 4
    s2 = math.log(1 + (sd / mean) ** 2)
    mu = math.log(mean) - s2 / 2
    out = []
    while len(out) < RUN_SAMPLES:
        x = round(rng.lognormvariate(mu, math.sqrt(s2)))
        if 32 <= x <= seq:
            out.append(x)
    return out


def group():
    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", "29513")
        dist.init_process_group("nccl", rank=0, world_size=1)


def wrap(model, kind):
    """The model as the run trains it, and the flags that say so."""
    if kind == "fsdp1":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
        from torch.distributed.fsdp.wrap import ModuleWrapPolicy
        group()
        layer = type(model.model.layers[0])
        # as accelerate's FSDP plugin wraps a transformers model: one unit per decoder layer, bf16 mixed precision
        wrapped = FSDP(model, auto_wrap_policy=ModuleWrapPolicy({layer}), use_orig_params=True, device_id=0,
                       mixed_precision=MixedPrecision(param_dtype=torch.bfloat16, reduce_dtype=torch.float32))
        return wrapped, ["--fsdp", "1"]
    if kind == "fsdp2":
        try:
            from torch.distributed.fsdp import fully_shard
        except ImportError:
            from torch.distributed._composable.fsdp import fully_shard
        group()
        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
        return model, ["--fsdp", "2"]
    return model, []


def before():
    """What the allocator holds when a run begins (after gc and empty_cache): zero in a process of its own."""
    return {"allocated": torch.cuda.memory_allocated(), "reserved": torch.cuda.memory_reserved()}


def whole_run(family, kind, batch, seq, versions):
    """Every sample of run_lengths(seq), batch a micro-batch padded to its longest, through one allocator."""
    reset(True)
    base = torch.cuda.memory_allocated()
    held = before()
    cfg = load_config(family, False)
    lengths = run_lengths(seq)
    flags = ["--mode", "train", "--batch", str(batch), "--seq", str(seq), "--precision", "amp-bf16",
             "--run-lengths", ",".join(map(str, lengths))]
    if kind.startswith("lora"):
        if peft is None:
            raise RuntimeError("peft is not installed")
        model = build(cfg, torch.bfloat16, "cuda")
    else:
        model = build(cfg, torch.float32, "cuda")
    if kind.endswith("-ckpt"):
        model.gradient_checkpointing_enable()
        model.enable_input_require_grads()
        flags += ["--recompute", "full"]
    if kind.startswith("lora"):
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM"))
        flags += ["--lora", "16", "--base-weights", "bf16"]
    model.train()
    if a.alloc_conf:
        flags += ["--alloc-conf", a.alloc_conf]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    g = torch.Generator(device="cuda").manual_seed(0)
    reset(True)
    after_each = []
    for i in range(0, len(lengths), batch):
        group = lengths[i:i + batch]
        x = torch.randint(0, cfg.vocab_size, (len(group), max(group)), device="cuda", generator=g)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        del x, loss
        torch.cuda.synchronize()
        after_each.append(torch.cuda.max_memory_reserved())
    allocated = torch.cuda.max_memory_allocated() - base
    reserved = torch.cuda.max_memory_reserved()
    del model, opt, params
    reset(True)
    return row(family, kind, batch, seq, flags, allocated, reserved, versions,
               {"before": held, "lengths": lengths, "reservedAfterEachStep": after_each})


def train_run(family, kind, batch, seq, versions):
    reset(True)
    base = torch.cuda.memory_allocated()
    held = before()
    cfg = load_config(family, False)
    flags = ["--mode", "train", "--batch", str(batch), "--seq", str(seq)]
    if kind == "kbit-prep":
        if peft is None:
            raise RuntimeError("peft is not installed")
        model = build(cfg, torch.bfloat16, "cuda")
        # TRL's SFTTrainer calls this; peft casts every 16-bit parameter to fp32 (Params4bit excepted) and freezes it,
        # but turns on gradient checkpointing and input gradients only for a quantised base (loaded_in_kbit, GPTQ,
        # AQLM, EETQ, HQQ: huggingface/peft src/peft/utils/other.py, prepare_model_for_kbit_training), so on this
        # bf16 base no layer is recomputed
        model = prepare_model_for_kbit_training(model)
        model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM"))
        flags += ["--precision", "amp-bf16", "--lora", "16", "--base-weights", "fp32"]
    elif kind == "lora":
        if peft is None:
            raise RuntimeError("peft is not installed")
        model = get_peft_model(build(cfg, torch.bfloat16, "cuda"), LoraConfig(r=16, lora_alpha=32, lora_dropout=0.0, task_type="CAUSAL_LM"))
        flags += ["--precision", "amp-bf16", "--lora", "16", "--base-weights", "bf16"]
    else:
        model = build(cfg, torch.float32, "cuda")
        flags += ["--precision", "amp-bf16"]
    model.train()
    model, more = wrap(model, kind)
    flags += more
    if a.alloc_conf:
        flags += ["--alloc-conf", a.alloc_conf]
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-4)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    reset(True)
    phases, grads_ok, reserved_peaks, _ = three_steps(lambda: model(input_ids=x, labels=x).loss, opt, params, True, "cuda", base)
    allocated = max(phases["forward_peak"], phases["backward_peak"], phases["step_peak"])
    reserved = max(reserved_peaks)
    del model, opt, x, params
    reset(True)
    return row(family, kind, batch, seq, flags, allocated, reserved, versions, {"phases": phases, "gradsOk": grads_ok, "before": held})


def generate_run(family, kind, batch, seq, versions):
    reset(True)
    base = torch.cuda.memory_allocated()
    held = before()
    cfg = load_config(family, False)
    model = build(cfg, torch.bfloat16, "cuda").eval()
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device="cuda")
    reset(True)
    with torch.no_grad():
        model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=seq, min_new_tokens=seq, do_sample=False)
    torch.cuda.synchronize()
    allocated = torch.cuda.max_memory_allocated() - base
    reserved = torch.cuda.max_memory_reserved()
    del model, x
    reset(True)
    flags = ["--mode", "infer", "--weights", "bf16", "--batch", str(batch), "--prompt", str(seq), "--new-tokens", str(seq),
             "--min-new-tokens", str(seq)]
    if a.alloc_conf:
        flags += ["--alloc-conf", a.alloc_conf]
    return row(family, kind, batch, seq, flags, allocated, reserved, versions, {"before": held})


def row(family, kind, batch, seq, flags, allocated, reserved, versions, details):
    conf = a.alloc_conf.replace(":", "-").replace(",", "_").lower()
    name = f"h200-{a.set}-{family}-{kind}-{batch}x{seq}{'-' + conf if conf else ''}"
    return {
        "id": name,
        "project": "gpumem (recorded)",
        "source": {"script": "benchmarks/pytorch/record_stack_peaks.py", "machine": versions["device"], "date": versions["date"]},
        "gpu": versions["device"], "gpus": 1,
        "model": f"configs/{family}/config.json",
        "method": {"fsdp1": "full", "fsdp2": "full", "kbit-prep": "lora", "generate": "infer"}.get(kind, kind.split("-")[0]),
        "flags": flags,
        "measured": [
            {"measures": "allocated", "value": allocated, "unit": "bytes", "how": "max_memory_allocated above memory_allocated before the model was built"},
            {"measures": "reserved", "value": reserved, "unit": "bytes", "how": "max_memory_reserved"},
        ],
        "role": "test",
        "details": {"run": kind, "allocConf": a.alloc_conf or None, **details},
    }


def main():
    if not torch.cuda.is_available():
        sys.exit("record_stack_peaks: no CUDA device")
    versions = versions_of("cuda", peft)
    doc = {"schema": "gpumem.plan-fixture/1", "set": f"h200-{a.set}",
           "description": "stacks recorded with benchmarks/pytorch/record_stack_peaks.py", "versions": versions, "rows": [], "errors": []}

    def here(spec):
        family, kind, batch, seq = spec
        fn = generate_run if kind == "generate" else whole_run if "-run" in kind else train_run
        return fn(family, kind, batch, seq, versions), "", ""

    def child(spec):
        """The run in a process of its own: this script with --run, its one row read back."""
        out = f"{a.out}.run{CHOSEN.index(spec)}.json"
        cmd = [sys.executable, os.path.abspath(__file__), "--out", out, "--run", str(CHOSEN.index(spec)), "--set", a.set, "--deadline", "1e9"]
        if a.alloc_conf:
            cmd += ["--alloc-conf", a.alloc_conf]
        subprocess.run(cmd, check=True)
        with open(out) as f:
            got = json.load(f)
        os.remove(out)
        if got["errors"]:
            raise RuntimeError(got["errors"][0]["error"])
        return got["rows"][0], "", "own process, "

    kinds = set(filter(None, a.kinds.split(",")))
    chosen = lambda spec: not kinds or spec[1] in kinds  # noqa: E731
    if a.run >= 0:
        record_runs(doc, [CHOSEN[a.run]], a, here)
    else:
        record_runs(doc, CHOSEN, a, here if a.in_process else child, skip=lambda spec: not chosen(spec))
    if dist.is_initialized():
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
