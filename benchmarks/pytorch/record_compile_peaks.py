"""Measures the peak GPU memory of training runs under torch.compile, for gpumem plan's compile model (set h200-compile).

Run on a GPU machine (no downloads: models are built from the config.json files in fixtures/plan/configs/, with
random weights, since memory does not depend on the values):

  python3 benchmarks/pytorch/record_compile_peaks.py --out measured.json [--census census.json] [--deadline 300]
      [--resume earlier.json --resume-census earlier-census.json]

Each run is what a stock Hugging Face (+ PEFT) script with torch.compile does: the base loaded in bf16 (LoRA) or fp32
(full fine-tuning), PEFT's defaults (adapter weights in fp32, lora_dropout 0), then `model = torch.compile(model)`
with torch's defaults (inductor, the min-cut partitioner, activation_memory_budget 1.0), bf16 autocast around the
forward as Trainer(bf16=True) sets it, Hugging Face's loss (labels passed to the model, so the loss is compiled with
it), torch's default (foreach) AdamW over the trainable parameters. Without a checkpoint unless the run says gc
(gradient_checkpointing_enable(), for comparison). Three steps; compiling happens in the first; the figures are from
the third: max_memory_allocated, max_memory_reserved, nvidia-smi's memory.used after it. Dynamo's caches are reset
between runs (torch._dynamo.reset()), so that a second shape of a family compiles statically as a user's single run
does, not with the dynamic shapes a recompile in the same process would pick.

--census also records what the partitioner keeps for the backward pass: min_cut_rematerialization_partition as
inductor calls it is wrapped, and for every compiled graph the forward values the backward reads (not the inputs and
parameters, which are held anyway) are listed by the op that made them, dtype and shape.

Roles are fixed here, before any run: the llama-3.2-1b rows are "fit" (the model may be built looking at them); every
other family's rows are "test" (never tuned on). Rows are written in the fixture format tools/plan-accuracy.mjs reads
(schema gpumem.plan-fixture/1); the files are rewritten after every run, so a run stopped by a time limit still leaves
every finished row. --device cpu runs the same code on the CPU with tiny shapes to check the script.
"""
import argparse
import json
import operator
import os
import sys

import torch
from peak_tools import GiB, build, load_config, record_runs, smi_used_bytes, three_steps, versions_of
from peak_tools import reset as reset_memory

try:
    import peft
    from peft import LoraConfig, get_peft_model
except ImportError:  # recorded as an error on every adapter run
    peft = None

FIT_FAMILIES = {"llama-3.2-1b"}

# (family, method, rank, targets, batch, seq, extras): method full | lora; targets default | all-linear; extras: gc.
# Ordered so that a deadline keeps breadth: the fit family first, then every test family's first runs, then sweeps.
RUNS = [
    ("llama-3.2-1b", "lora", 16, "default", 4, 512, ()),
    ("llama-3.2-1b", "full", 0, None, 4, 512, ()),
    ("qwen2-0.5b", "lora", 16, "default", 4, 512, ()),
    ("pythia-1b", "lora", 16, "default", 4, 512, ()),
    ("gemma-2-2b", "lora", 16, "default", 4, 512, ()),
    ("qwen2-0.5b", "full", 0, None, 4, 512, ()),
    ("pythia-1b", "full", 0, None, 4, 512, ()),
    ("gemma-2-2b", "full", 0, None, 2, 512, ()),
    ("llama-3.2-1b", "lora", 16, "all-linear", 8, 1024, ()),
    ("qwen2-0.5b", "lora", 16, "all-linear", 8, 1024, ()),
    ("pythia-1b", "lora", 16, "default", 8, 1024, ()),
    ("llama-3.2-1b", "lora", 16, "default", 8, 1024, ("gc",)),
    ("gemma-2-2b", "lora", 16, "all-linear", 2, 1024, ()),
    ("qwen2-0.5b", "full", 0, None, 8, 1024, ("gc",)),
    ("llama-3.2-1b", "full", 0, None, 2, 1024, ()),
    ("pythia-1b", "full", 0, None, 2, 1024, ()),
    ("qwen2-0.5b", "lora", 16, "default", 8, 2048, ()),
]

CENSUS = []  # the graphs partitioned during the current run


def _op_name(node):
    if node.op == "placeholder":
        return "input"
    if node.target is operator.getitem and node.args and hasattr(node.args[0], "target"):
        return f"{node.args[0].target}[{node.args[1]}]"
    return str(node.target)


def _val_bytes(val):
    try:
        return int(val.numel()) * val.element_size()
    except Exception:  # noqa: BLE001 -- symbolic sizes: counted as unknown
        return None


def census_graph(fw_module, bw_module):
    fw_nodes = {n.name: n for n in fw_module.graph.nodes}
    groups = {}
    inputs_saved = 0
    for ph in bw_module.graph.nodes:
        if ph.op != "placeholder" or ph.name.startswith("tangents"):
            continue
        node = fw_nodes.get(ph.name)
        val = ph.meta.get("val")
        if node is not None and node.op == "placeholder":
            inputs_saved += 1
            continue
        if not isinstance(val, torch.Tensor):
            continue
        key = (_op_name(node) if node is not None else "?", str(val.dtype).replace("torch.", ""), str(list(val.shape)))
        g = groups.setdefault(key, {"op": key[0], "dtype": key[1], "shape": key[2], "count": 0, "bytes": 0})
        g["count"] += 1
        g["bytes"] += _val_bytes(val) or 0
    saved = sorted(groups.values(), key=lambda g: -g["bytes"])
    CENSUS.append({"savedBytes": sum(g["bytes"] for g in saved), "inputsSaved": inputs_saved, "saved": saved})


def install_census():
    import torch._inductor.compile_fx as cfx

    original = cfx.min_cut_rematerialization_partition

    def partition(*args, **kwargs):
        fw, bw = original(*args, **kwargs)
        try:
            census_graph(fw, bw)
        except Exception as e:  # noqa: BLE001 -- the census must never break the run it describes
            CENSUS.append({"error": f"{type(e).__name__}: {e}"})
        return fw, bw

    cfx.min_cut_rematerialization_partition = partition


def reset(cuda):
    torch._dynamo.reset()
    reset_memory(cuda)


def flags_for(method, rank, targets, batch, seq, extras, attention):
    f = ["--mode", "train", "--precision", "amp-bf16", "--batch", str(batch), "--seq", str(seq), "--compile"]
    if method != "full":
        f += ["--lora", str(rank), "--base-weights", "bf16"]
        if targets == "all-linear":
            f += ["--lora-targets", "all-linear"]
    if "gc" in extras:
        f += ["--recompute", "full"]
    if attention not in ("sdpa", None):
        f += ["--attention", attention]
    return f


def run_name(family, method, rank, targets, batch, seq, extras):
    return f"{family}-compile-{method}{'' if method == 'full' else f'-r{rank}-{targets}'}-{batch}x{seq}{''.join('-' + e for e in extras)}"


def run(spec, device, versions):
    family, method, rank, targets, batch, seq, extras = spec
    cuda = device == "cuda"
    if not cuda:
        batch, seq = 2, 32
    reset(cuda)
    CENSUS.clear()
    base = torch.cuda.memory_allocated() if cuda else 0
    cfg = load_config(family, not cuda)
    base_dtype = torch.float32 if method == "full" else torch.bfloat16
    model = build(cfg, base_dtype, device)
    attention = getattr(model.config, "_attn_implementation", None)
    if "gc" in extras:
        model.gradient_checkpointing_enable()
    lora = None
    if method != "full":
        if peft is None:
            raise RuntimeError("peft is not installed")
        kw = dict(r=rank, lora_alpha=2 * rank, lora_dropout=0.0, task_type="CAUSAL_LM")
        if targets == "all-linear":
            kw["target_modules"] = "all-linear"
        model = get_peft_model(model, LoraConfig(**kw))
        adapted = sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if hasattr(m, "lora_A") and len(getattr(m, "lora_A")) > 0})
        trainable, total = model.get_nb_trainable_parameters()
        lora = {"rank": rank, "alpha": 2 * rank, "targets": targets, "adaptedModules": adapted,
                "trainableParams": trainable, "allParams": total}
    model.train()
    trainable_params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(trainable_params, lr=1e-4)
    compiled = torch.compile(model)
    x = torch.randint(0, cfg.vocab_size, (batch, seq), device=device)
    reset_peaks = cuda
    if reset_peaks:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    phases, grads_ok, _, compile_seconds = three_steps(lambda m=compiled, ids=x: m(input_ids=ids, labels=ids).loss, opt, trainable_params, cuda, device, base)
    figures = {}
    if cuda:
        free, total = torch.cuda.mem_get_info()
        figures = {
            "allocated": max(phases["forward_peak"], phases["backward_peak"], phases["step_peak"]),
            "reserved": torch.cuda.max_memory_reserved(),
            "deviceSmi": smi_used_bytes(),
            "deviceMemGetInfo": total - free,
            "weightBytes": sum(p.numel() * p.element_size() for p in model.parameters()),
            "startBytes": base,
        }
    row_params = sum(p.numel() for p in model.parameters())
    graphs = [dict(g) for g in CENSUS]
    del model, compiled, opt, x, trainable_params
    reset(cuda)
    name = run_name(family, method, rank, targets, batch, seq, extras)
    measured = []
    if cuda:
        measured.append({"measures": "allocated", "value": figures["allocated"], "unit": "bytes",
                         "how": "max_memory_allocated over the third step, above memory_allocated before the model was built"})
        measured.append({"measures": "reserved", "value": figures["reserved"], "unit": "bytes",
                         "how": "max_memory_reserved of the run (reserved memory only grows inside a run)"})
        dev = figures["deviceSmi"] if figures["deviceSmi"] is not None else figures["deviceMemGetInfo"]
        measured.append({"measures": "device", "value": dev, "unit": "bytes",
                         "how": "nvidia-smi memory.used after the third step" if figures["deviceSmi"] is not None
                         else "cudaMemGetInfo total - free after the third step"})
    row = {
        "id": f"h200-{name}",
        "project": "gpumem (recorded)",
        "source": {"script": "benchmarks/pytorch/record_compile_peaks.py", "machine": versions["device"], "date": versions["date"]},
        "gpu": versions["device"], "gpus": 1,
        "model": f"configs/{family}/config.json",
        "method": method,
        "flags": flags_for(method, rank, targets, batch, seq, extras, attention),
        "measured": measured,
        "role": "fit" if family in FIT_FAMILIES else "test",
        "details": {"attention": attention, "baseDtype": str(base_dtype), "autocast": "bf16", "optimizer": "torch.optim.AdamW (foreach)",
                    "compile": "torch.compile(model), defaults", "gradientCheckpointing": "gc" in extras, "lora": lora,
                    "parameters": row_params, "gradsOk": grads_ok, "phases": phases, "figures": figures,
                    "compiledGraphs": len(graphs), "firstStepSeconds": compile_seconds},
    }
    return row, graphs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--census", default="")
    ap.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    ap.add_argument("--deadline", type=float, default=300.0, help="seconds after which no new run starts")
    ap.add_argument("--only", default="", help="comma-separated families")
    ap.add_argument("--resume", default="", help="an earlier --out file: its rows are kept and their runs skipped")
    ap.add_argument("--resume-census", default="", help="the earlier --census file, kept likewise")
    a = ap.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("record_compile_peaks: no CUDA device (use --device cpu to check the script)")
    if a.census:
        install_census()
    versions = versions_of(a.device, peft)
    doc = {"schema": "gpumem.plan-fixture/1", "set": "h200-compile",
           "description": "training runs under torch.compile (no checkpoint unless the id says gc), recorded with benchmarks/pytorch/record_compile_peaks.py; llama-3.2-1b rows fit the model, the other families test it",
           "versions": versions, "rows": [], "errors": []}
    census = {"versions": versions, "runs": []}
    if a.resume:  # a longer call picks up where an earlier file stopped: its rows and census are kept, their runs skipped
        with open(a.resume) as f:
            doc["rows"] = json.load(f)["rows"]
        if a.census and os.path.exists(a.resume_census or ""):
            with open(a.resume_census) as f:
                census["runs"] = json.load(f)["runs"]
    done = {r["id"] for r in doc["rows"]}

    def run_one(spec):
        row, graphs = run(spec, a.device, versions)
        census["runs"].append({"id": row["id"], "graphs": graphs})
        return row, f"; saved by the forward {row['details']['phases'].get('after_forward', 0) / GiB:.3f} GiB", f"{len(graphs)} graphs, "

    def save_census():
        if a.census:
            with open(a.census, "w") as f:
                json.dump(census, f, indent=1)

    record_runs(doc, RUNS, a, run_one, skip=lambda spec: f"h200-{run_name(*spec)}" in done, saved=save_census, after_failure=reset)


if __name__ == "__main__":
    main()
