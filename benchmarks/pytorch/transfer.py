"""PyTorch's own ways to move a pageable host tensor to the GPU and back, timed like gpumem's transfer rows (host
clock from the call until the data has arrived), for the comparison table of docs/performance.md.

Run on a GPU machine:  python3 benchmarks/pytorch/transfer.py [bytes] [repeats] > torch-transfer.jsonl
Rows: .to('cuda') of a pageable tensor; pin_memory() then .to('cuda', non_blocking=True) with the pinning counted;
.to('cpu') of a device tensor into new pageable memory; .copy_ into an existing pageable tensor.
"""
import json
import sys
import time

import torch


def emit(row, n, secs):
    print(json.dumps({"row": row, "bytes": n, "gbps": n / secs / 1e9}), flush=True)


def main():
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 30
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    host = torch.ones(n, dtype=torch.uint8)
    dev = torch.empty(n, dtype=torch.uint8, device="cuda")
    back = torch.empty(n, dtype=torch.uint8)
    torch.cuda.synchronize()

    def timed(row, op):
        for r in range(reps + 1):
            t = time.perf_counter()
            op()
            torch.cuda.synchronize()
            if r:
                emit(row, n, time.perf_counter() - t)

    timed("torch HtoD pageable .to(cuda)", lambda: host.to("cuda"))
    timed("torch HtoD pageable copy_", lambda: dev.copy_(host))
    timed("torch HtoD pin_memory()+copy", lambda: dev.copy_(host.pin_memory(), non_blocking=True))
    timed("torch DtoH pageable .to(cpu)", lambda: dev.to("cpu"))
    timed("torch DtoH pageable copy_", lambda: back.copy_(dev))
    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda}), flush=True)


if __name__ == "__main__":
    main()
