"""Records, on one GPU, the peaks of the stacks gpumem plan models and can reach with PyTorch, transformers and peft
alone (no bitsandbytes, vLLM or DeepSpeed): Hugging Face generate's reserved peak with and without expandable segments,
a checkpointed training step under each allocator setting, FSDP1 (flat parameters, use_orig_params off and on, as
accelerate's FSDP plugin sets MixedPrecision) and FSDP2 (fully_shard) on one rank, and the LoRA preparation TRL's
SFTTrainer runs on a bf16 base (norm weights in fp32, adapters bf16, gradient checkpointing without reentrancy,
embedding output requiring grad, autocast bf16).

Each case runs in its own process, so that PYTORCH_CUDA_ALLOC_CONF is read before CUDA starts and no case sees another's
cached blocks. Output: a gpumem.plan-fixture/1 document (split "recorded"), each row with the gpumem plan flags that
describe it and its allocated and reserved peaks in bytes (torch.cuda.max_memory_allocated / max_memory_reserved,
measured from after the model is built; the model's own bytes included).

Run on a GPU machine:  python3 benchmarks/pytorch/record_stack_peaks.py --out fixtures/plan/measured-peaks-h200-stacks.json
List the cases without a GPU:  python3 benchmarks/pytorch/record_stack_peaks.py --list
"""
import argparse
import datetime
import json
import os
import subprocess
import sys

CONFIG = "configs/llama-3.2-1b/config.json"  # relative to fixtures/plan/
HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "..", "fixtures", "plan")
EXPANDABLE = "expandable_segments:True"


def cases():
    """(id, alloc_conf, kind, params, gpumem flags, what the flags cannot say)."""
    out = []
    for conf in (None, EXPANDABLE):
        tag = "-expandable" if conf else ""
        extra = ["--alloc-conf", conf] if conf else []
        out.append((f"generate-b32-512+512{tag}", conf, "generate", {"batch": 32, "prompt": 512, "new": 512},
                    ["--mode", "infer", "--engine", "hf", "--batch", "32", "--prompt", "512", "--new-tokens", "512", "--weights", "bf16", *extra], []))
        out.append((f"train-amp-ckpt-b4-2048{tag}", conf, "train", {"batch": 4, "seq": 2048},
                    ["--mode", "train", "--precision", "amp-bf16", "--batch", "4", "--seq", "2048", "--recompute", "full", *extra], []))
    for orig in (False, True):
        out.append((f"fsdp1-orig{int(orig)}-amp-b2-2048", None, "fsdp1", {"batch": 2, "seq": 2048, "orig": orig},
                    ["--mode", "train", "--precision", "amp-bf16", "--batch", "2", "--seq", "2048", "--recompute", "full", "--fsdp", "1", "--gpus", "1"],
                    ["accelerate's FSDP1 mixed precision: param, reduce and buffer dtypes bf16", f"use_orig_params={orig}"]))
    out.append(("fsdp2-amp-b2-2048", None, "fsdp2", {"batch": 2, "seq": 2048},
                ["--mode", "train", "--precision", "amp-bf16", "--batch", "2", "--seq", "2048", "--recompute", "full", "--fsdp", "2", "--gpus", "1"],
                ["MixedPrecisionPolicy(param_dtype=bf16, reduce_dtype=fp32)"]))
    out.append(("trl-lora-bf16-base-norms-fp32-b1-4096", None, "trl", {"batch": 1, "seq": 4096},
                ["--mode", "train", "--precision", "amp-bf16", "--batch", "1", "--seq", "4096", "--recompute", "full",
                 "--lora", "16", "--lora-targets", "all-linear", "--lora-dtype", "bf16", "--base-weights", "bf16"],
                ["norm weights cast to fp32 after get_peft_model (TRL 0.9-0.25's peft_module_casting_to_bf16 / prepare path)"]))
    return out


def run_case(kind, p):
    """Runs one case in this process; answers (allocated, reserved) peaks in bytes."""
    import torch
    from transformers import AutoModelForCausalLM, LlamaConfig

    cfg = LlamaConfig(**{k: v for k, v in json.load(open(os.path.join(FIXTURES, CONFIG))).items() if k != "architectures"})
    dev = torch.device("cuda")
    dtype = torch.bfloat16 if kind in ("generate", "trl") else torch.float32
    with dev:
        model = AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa", torch_dtype=dtype)
    if kind == "generate":
        x = torch.randint(0, cfg.vocab_size, (p["batch"], p["prompt"]), device=dev)
        torch.cuda.reset_peak_memory_stats()
        with torch.no_grad():
            model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=p["new"], min_new_tokens=p["new"], do_sample=False)
        return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if kind in ("fsdp1", "fsdp2"):
        model = wrap(model, kind, p)
    if kind == "trl":
        model = trl_prepare(model)
    params = [q for q in model.parameters() if q.requires_grad]
    opt = torch.optim.AdamW(params, lr=1e-5)
    x = torch.randint(0, cfg.vocab_size, (p["batch"], p["seq"]), device=dev)
    torch.cuda.reset_peak_memory_stats()
    for _ in range(3):  # the third step holds the optimizer states
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=x, labels=x).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return torch.cuda.max_memory_allocated(), torch.cuda.max_memory_reserved()


def wrap(model, kind, p):
    """FSDP on one rank: FSDP1 as accelerate's plugin sets it up, or FSDP2's fully_shard per decoder layer."""
    import torch
    import torch.distributed as dist

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29512")
    dist.init_process_group("nccl", rank=0, world_size=1)
    layer = type(model.model.layers[0])
    if kind == "fsdp1":
        import functools

        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP, MixedPrecision
        from torch.distributed.fsdp.wrap import transformer_auto_wrap_policy

        bf16 = torch.bfloat16
        return FSDP(model, auto_wrap_policy=functools.partial(transformer_auto_wrap_policy, transformer_layer_cls={layer}),
                    mixed_precision=MixedPrecision(param_dtype=bf16, reduce_dtype=bf16, buffer_dtype=bf16),
                    use_orig_params=p["orig"], limit_all_gathers=True, device_id=torch.cuda.current_device())
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for m in model.model.layers:
        fully_shard(m, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def trl_prepare(model):
    """LoRA on a bf16 base as TRL's SFTTrainer prepares it: adapters, norms in fp32, the embedding output needing grad."""
    import torch
    from peft import LoraConfig, get_peft_model

    model.enable_input_require_grads()
    model = get_peft_model(model, LoraConfig(r=16, lora_alpha=32, target_modules="all-linear", lora_dropout=0.0, task_type="CAUSAL_LM"))
    for name, module in model.named_modules():
        if "norm" in name:
            module.to(torch.float32)
    return model


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--case", help=argparse.SUPPRESS)  # internal: run one case, print its peaks
    a = ap.parse_args()
    table = {c[0]: c for c in cases()}
    if a.case:
        _, _, kind, p, _, _ = table[a.case]
        print(json.dumps(run_case(kind, p)))
        return
    if a.list:
        for c in cases():
            print(c[0], c[1] or "(default allocator)", " ".join(c[4]))
        return
    import torch
    import transformers

    device = torch.cuda.get_device_name(0)
    rows = []
    for cid, conf, kind, p, flags, not_modelled in cases():
        env = dict(os.environ)
        env.pop("PYTORCH_CUDA_ALLOC_CONF", None)
        env.pop("PYTORCH_ALLOC_CONF", None)
        if conf:
            env["PYTORCH_CUDA_ALLOC_CONF"] = conf
        r = subprocess.run([sys.executable, __file__, "--case", cid], env=env, capture_output=True, text=True)
        if r.returncode != 0:
            print(f"{cid}: failed\n{r.stderr[-2000:]}", file=sys.stderr)
            continue
        allocated, reserved = json.loads(r.stdout.strip().splitlines()[-1])
        rows.append({
            "id": f"h200-stacks-{cid}", "project": "gpumem (recorded)",
            "source": {"script": "benchmarks/pytorch/record_stack_peaks.py", "machine": device, "date": datetime.date.today().isoformat()},
            "gpu": device, "gpus": 1, "model": CONFIG, "method": "infer" if kind == "generate" else ("lora" if kind == "trl" else "full"),
            "flags": flags, "role": "test", "notModelled": not_modelled,
            "measured": [{"measures": "allocated", "value": allocated, "unit": "bytes"}, {"measures": "reserved", "value": reserved, "unit": "bytes"}],
            "note": f"torch {torch.__version__}, transformers {transformers.__version__}; PYTORCH_CUDA_ALLOC_CONF={conf or '(unset)'}",
        })
        print(f"{cid}: allocated {allocated / 2**30:.2f} GiB, reserved {reserved / 2**30:.2f} GiB", file=sys.stderr)
    doc = {"schema": "gpumem.plan-fixture/1", "set": "h200-stacks", "split": "recorded",
           "description": "Recorded with benchmarks/pytorch/record_stack_peaks.py: generate's reserved peak and a training step with and without expandable segments, FSDP1 and FSDP2 on one rank, TRL's LoRA preparation on a bf16 base.",
           "rows": rows}
    text = json.dumps(doc, indent=1) + "\n"
    if a.out:
        open(a.out, "w").write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
