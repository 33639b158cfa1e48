"""Records PyTorch memory snapshots as pickles, the way users save them, with expandable segments on and off.

Run on a GPU machine (seconds):  python3 benchmarks/pytorch/record_pickle_snapshot.py OUTDIR
Writes OUTDIR/expandable.pickle and OUTDIR/default.pickle with torch.cuda.memory._dump_snapshot(), each after a few
steps of a small MLP whose activations change size every step (so that blocks split and segments map and unmap), on
every visible GPU, and prints per GPU what the caching allocator itself reported: max_memory_reserved and
max_memory_allocated, and the GPU's total memory. `gpumem pool replay FILE --device N` must report the same peak
reserved for device N, and `gpumem analyze FILE --html page.html` must draw it.
"""
import os
import subprocess
import sys

CHILD = r"""
import sys, torch
out = sys.argv[1]
devices = range(torch.cuda.device_count())
torch.cuda.memory._record_memory_history(max_entries=200000)
for d in devices:
    with torch.cuda.device(d):
        layers = [torch.nn.Linear(2048, 2048, device="cuda") for _ in range(4)]
        opt = torch.optim.AdamW([p for l in layers for p in l.parameters()])
        for step in range(6):
            x = torch.randn(512 * (1 + step % 3), 2048, device="cuda")
            for l in layers:
                x = torch.relu(l(x))
            x.sum().backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            if step == 3:
                torch.cuda.empty_cache()  # gives memory back: segment_free, or segment_unmap with expandable segments
        torch.cuda.synchronize()
torch.cuda.memory._dump_snapshot(out)
torch.cuda.memory._record_memory_history(enabled=None)
for d in devices:
    print(f"{out} device {d}: max_memory_reserved {torch.cuda.max_memory_reserved(d)} max_memory_allocated "
          f"{torch.cuda.max_memory_allocated(d)} total {torch.cuda.get_device_properties(d).total_memory}")
"""

if __name__ == "__main__":
    outdir = sys.argv[1] if len(sys.argv) > 1 else "."
    os.makedirs(outdir, exist_ok=True)
    # the allocator reads PYTORCH_CUDA_ALLOC_CONF once, at its first use: one process per setting
    for name, conf in (("expandable", "expandable_segments:True"), ("default", "")):
        env = dict(os.environ, PYTORCH_CUDA_ALLOC_CONF=conf)
        subprocess.run([sys.executable, "-c", CHILD, os.path.join(outdir, f"{name}.pickle")], env=env, check=True)
