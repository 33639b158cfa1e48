"""PyTorch's own ways to move host data to the GPU and back, timed like gpumem's transfer rows (host clock from the call
until the data has arrived, one-way bytes, GB = 1e9), for the comparison tables of docs/performance.md.

Run on a GPU machine:  python3 benchmarks/pytorch/transfer.py [bytes] [repeats] [parts] > torch-transfer.jsonl
Parts (a comma list, default all):
  shapes  .to('cuda') of a pageable tensor; .copy_ into a device tensor; pin_memory() then a copy, the pinning counted;
          .to('cpu') into new pageable memory; .copy_ into an existing pageable tensor.
  many    256 tensors of 4 MiB and 4096 of 64 KiB (as separate tensors): .to('cuda') each; pin_memory() then
          .to('cuda', non_blocking=True) each, synchronized once at the end.
  first   the first .to('cuda') of `bytes` in this process (run it alone, in a fresh process).
  file    a file of `bytes` to the GPU: safetensors.torch.load_file(path, device='cuda') of a file holding one tensor
          (where safetensors is installed), and readinto a pinned tensor then .to('cuda'); from the page cache, and
          cold (posix_fadvise DONTNEED before each run).
"""
import json
import os
import sys
import tempfile
import time

import torch


def emit(row, n, secs, **extra):
    print(json.dumps({"row": row, "bytes": n, "gbps": n / secs / 1e9, **extra}), flush=True)


def timed(row, n, reps, op, before=None):
    for r in range(reps + 1):
        if before:
            before()
        t = time.perf_counter()
        op()
        torch.cuda.synchronize()
        if r:
            emit(row, n, time.perf_counter() - t)


def shapes(n, reps):
    host = torch.ones(n, dtype=torch.uint8)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    back = torch.empty(n, dtype=torch.uint8)
    timed("torch HtoD pageable .to(cuda)", n, reps, lambda: host.to("cuda"))
    timed("torch HtoD pageable copy_", n, reps, lambda: dev.copy_(host))
    timed("torch HtoD pin_memory()+copy", n, reps, lambda: dev.copy_(host.pin_memory(), non_blocking=True))
    timed("torch DtoH pageable .to(cpu)", n, reps, lambda: dev.to("cpu"))
    timed("torch DtoH pageable copy_", n, reps, lambda: back.copy_(dev))


def many(n, reps):
    for each in (4 << 20, 64 << 10):
        count = n // (4 << 20) if each == 4 << 20 else n // (256 << 10)
        tensors = [torch.full((each,), i & 0xFF, dtype=torch.uint8) for i in range(count)]
        total = count * each
        timed(f"torch HtoD-many .to(cuda) {each}", total, reps, lambda: [t.to("cuda") for t in tensors])
        timed(
            f"torch HtoD-many pin_memory()+to(non_blocking) {each}",
            total,
            reps,
            lambda: [t.pin_memory().to("cuda", non_blocking=True) for t in tensors],
        )


def first(n):
    host = torch.ones(n, dtype=torch.uint8)
    torch.cuda.init()
    torch.empty(1, device="cuda")
    torch.cuda.synchronize()
    t = time.perf_counter()
    host.to("cuda")
    torch.cuda.synchronize()
    emit("torch HtoD-first pageable .to(cuda)", n, time.perf_counter() - t)


def drop(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def file(n, reps):
    folder = os.environ.get("GPUMEM_BENCH_DIR", tempfile.gettempdir())
    raw = os.path.join(folder, "gpumem-torch-file.bin")
    data = torch.arange(256, dtype=torch.uint8).repeat(n // 256)
    with open(raw, "wb") as f:
        f.write(data.numpy().tobytes())
        f.flush()
        os.fdatasync(f.fileno())
    pinned = torch.empty(n, dtype=torch.uint8, pin_memory=True)

    def read_pinned():
        with open(raw, "rb", buffering=0) as f:
            f.readinto(memoryview(pinned.numpy()))
        pinned.to("cuda", non_blocking=True)

    try:
        timed("torch FtoD file-cached readinto(pinned)+to(cuda)", n, reps, read_pinned)
        timed("torch FtoD file-cold readinto(pinned)+to(cuda)", n, reps, read_pinned, lambda: drop(raw))
        try:
            from safetensors.torch import load_file, save_file
        except ImportError:
            print(json.dumps({"note": "safetensors is not installed: its rows are left out"}), flush=True)
            return
        st = os.path.join(folder, "gpumem-torch-file.safetensors")
        save_file({"weights": data}, st)
        try:
            timed("torch FtoD file-cached safetensors.load_file(cuda)", n, reps, lambda: load_file(st, device="cuda"))
            timed("torch FtoD file-cold safetensors.load_file(cuda)", n, reps, lambda: load_file(st, device="cuda"), lambda: drop(st))
        finally:
            os.unlink(st)
    finally:
        os.unlink(raw)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    parts = (sys.argv[3] if len(sys.argv) > 3 else "all").split(",")
    want = lambda p: "all" in parts or p in parts  # noqa: E731
    if want("first"):
        first(n)
    if want("shapes"):
        shapes(n, reps)
    if want("many"):
        many(n, reps)
    if want("file"):
        file(n, reps)
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda}), flush=True)


if __name__ == "__main__":
    main()
