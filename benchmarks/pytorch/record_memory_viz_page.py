"""Records a PyTorch memory snapshot and the memory_viz pages PyTorch itself makes of it, as users share them.

Run on a GPU machine (seconds):  python3 benchmarks/pytorch/record_memory_viz_page.py OUTDIR
Writes OUTDIR/snapshot.pickle (torch.cuda.memory._dump_snapshot()), OUTDIR/trace_plot.html and
OUTDIR/segment_plot.html (torch.cuda._memory_viz.trace_plot / segment_plot of the same snapshot, which embed its
pickle in base64), and prints the torch version. `gpumem analyze FILE --json` must give the same summary and findings
for the three files, and `gpumem pool replay FILE --json` the same replay.
"""
import os
import pickle
import sys

import torch
from torch.cuda import _memory_viz

if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(out, exist_ok=True)
    torch.cuda.memory._record_memory_history(max_entries=100000)
    layers = [torch.nn.Linear(2048, 2048, device="cuda") for _ in range(4)]
    opt = torch.optim.AdamW([p for l in layers for p in l.parameters()])
    for step in range(6):
        x = torch.randn(256 * (1 + step % 3), 2048, device="cuda")
        for l in layers:
            x = torch.relu(l(x))
        x.sum().backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    pickle_file = os.path.join(out, "snapshot.pickle")
    torch.cuda.memory._dump_snapshot(pickle_file)
    torch.cuda.memory._record_memory_history(enabled=None)
    with open(pickle_file, "rb") as f:
        snapshot = pickle.load(f)
    for name, plot in (("trace_plot", _memory_viz.trace_plot), ("segment_plot", _memory_viz.segment_plot)):
        with open(os.path.join(out, f"{name}.html"), "w") as f:
            f.write(plot(snapshot))
    print(f"torch {torch.__version__}: wrote {pickle_file}, trace_plot.html, segment_plot.html in {out}")
