"""Records PyTorch profiler (Kineto) traces of two input pipelines, as fixtures for gpumem analyze.

Run on a GPU machine:  python3 benchmarks/pytorch/record_traces.py OUTDIR
naive: pageable tensors moved with .to('cuda') every step, 200 small per-step copies, loss.item() every step.
tuned: pinned buffers reused, non_blocking copies on a side stream, the small tensors batched into one copy, no
       per-step synchronisation.
Each writes OUTDIR/<name>.pt.trace.json.gz (torch.profiler's Chrome trace, with profile_memory=True).
"""
import gzip
import os
import shutil
import sys

import torch
from torch.profiler import ProfilerActivity, profile

BATCH, FEATURES, SMALL, STEPS = 256, 4096, 200, 6


def model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(FEATURES, 4096), torch.nn.ReLU(), torch.nn.Linear(4096, 10)).cuda()
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def naive(steps):
    model, opt = model_and_opt()
    for _ in range(steps):
        x = torch.randn(BATCH, FEATURES)                      # pageable
        y = torch.randint(0, 10, (BATCH,))
        xg, yg = x.to("cuda"), y.to("cuda")                   # synchronous pageable copies
        scales = [torch.tensor([float(i)]).to("cuda") for i in range(SMALL)]  # hundreds of tiny copies
        out = model(xg) * scales[0]
        loss = torch.nn.functional.cross_entropy(out, yg)
        loss.backward()
        opt.step()
        opt.zero_grad()
        print(f"loss {loss.item():.4f}", file=sys.stderr)     # a device sync every step


def tuned(steps):
    model, opt = model_and_opt()
    copy_stream = torch.cuda.Stream()
    x_pin = torch.empty(BATCH, FEATURES).pin_memory()
    y_pin = torch.empty(BATCH, dtype=torch.long).pin_memory()
    s_pin = torch.empty(SMALL).pin_memory()
    losses = []
    for _ in range(steps):
        x_pin.normal_()
        y_pin.random_(0, 10)
        torch.arange(SMALL, out=s_pin)
        with torch.cuda.stream(copy_stream):
            xg = x_pin.to("cuda", non_blocking=True)
            yg = y_pin.to("cuda", non_blocking=True)
            sg = s_pin.to("cuda", non_blocking=True)             # one batched copy instead of 200
        torch.cuda.current_stream().wait_stream(copy_stream)
        for t in (xg, yg, sg):
            t.record_stream(torch.cuda.current_stream())
        out = model(xg) * sg[0]
        loss = torch.nn.functional.cross_entropy(out, yg)
        loss.backward()
        opt.step()
        opt.zero_grad()
        losses.append(loss.detach())                             # no .item() inside the loop
    torch.cuda.synchronize()
    print("losses", [f"{v:.4f}" for v in torch.stack(losses).tolist()], file=sys.stderr)


def record(fn, name, outdir):
    fn(2)  # warm up outside the trace
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA], profile_memory=True, record_shapes=False) as prof:
        fn(STEPS)
        torch.cuda.synchronize()
    raw = os.path.join(outdir, f"{name}.pt.trace.json")
    prof.export_chrome_trace(raw)
    with open(raw, "rb") as src, gzip.open(raw + ".gz", "wb", compresslevel=9) as dst:
        shutil.copyfileobj(src, dst)
    os.remove(raw)
    print(f"{name}: {os.path.getsize(raw + '.gz')} bytes", file=sys.stderr)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    record(naive, "naive", out)
    record(tuned, "tuned", out)
