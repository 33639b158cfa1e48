"""safetensors.torch.load_file(path, device='cuda') on the checkpoint gpumem's bench wrote, timed as gpumem's
file-HtoD rows are (host clock from the call until the tensors are on the device, GB = 1e9 bytes of tensor data),
for the comparison table of docs/performance.md; and a check of gpumem's writer against the reference writer.

Run on a GPU machine, after `GPUMEM_BENCH_DIR=DIR gpumem bench --only transfer` has written DIR/gpumem-bench-2048MiB.safetensors:
  python3 benchmarks/pytorch/safetensors_load.py DIR/gpumem-bench-2048MiB.safetensors [repeats] > torch-safetensors.jsonl
Rows: load_file from the page cache (after one untimed load), and cold (the file dropped from the page cache before
each load with `dd iflag=nocache count=0`, as gpumem's cold row does). Then one line "writer_check": the file read
with safe_open and written again with safetensors.torch.save_file, compared with gpumem's file: the same size, the
same header (as JSON; the reference writes __metadata__'s keys in hash order) with the tensors in the same order,
and the same bytes after the header.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file


def emit(row, n, secs):
    print(json.dumps({"row": row, "bytes": n, "gbps": n / secs / 1e9, "seconds": secs}), flush=True)


def drop_from_cache(path):
    subprocess.run(["dd", f"if={path}", "iflag=nocache", "count=0", "status=none"], check=False)


def header_of(path):
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        raw = f.read(n)
    return n, raw


def tensor_order(raw):
    pairs = json.loads(raw, object_pairs_hook=lambda kv: kv)
    return [k for k, _ in pairs if k != "__metadata__"]


def writer_check(path):
    with safe_open(path, framework="pt") as f:
        metadata = f.metadata()
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    fd, out = tempfile.mkstemp(suffix=".safetensors", dir=os.path.dirname(os.path.abspath(path)))
    os.close(fd)
    try:
        save_file(tensors, out, metadata=metadata)
        n_a, raw_a = header_of(path)
        n_b, raw_b = header_of(out)
        same = {
            "size": os.path.getsize(path) == os.path.getsize(out),
            "header_length": n_a == n_b,
            "header_json": json.loads(raw_a) == json.loads(raw_b),
            "tensor_order": tensor_order(raw_a) == tensor_order(raw_b),
            "padding": raw_a[len(raw_a.rstrip(b" ")):] == raw_b[len(raw_b.rstrip(b" ")):],
        }
        with open(path, "rb") as a, open(out, "rb") as b:
            a.seek(8 + n_a)
            b.seek(8 + n_b)
            data_same = True
            while True:
                x, y = a.read(64 << 20), b.read(64 << 20)
                if x != y:
                    data_same = False
                    break
                if not x:
                    break
        same["data"] = data_same
        print(json.dumps({"writer_check": "identical" if all(same.values()) else "differs", **same}), flush=True)
    finally:
        os.unlink(out)


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: safetensors_load.py FILE.safetensors [repeats]")
    path = sys.argv[1]
    reps = int(sys.argv[2]) if len(sys.argv) > 2 else 5
    # Bytes of tensor data, as gpumem's rows count them: the file less its header.
    n = os.path.getsize(path) - 8 - header_of(path)[0]

    def timed(row, before=None, warmup=0):
        for r in range(warmup + reps):
            if before:
                before()
            t = time.perf_counter()
            tensors = load_file(path, device="cuda")
            torch.cuda.synchronize()
            secs = time.perf_counter() - t
            del tensors
            torch.cuda.empty_cache()
            if r >= warmup:
                emit(row, n, secs)

    subprocess.run(["cat", path], stdout=subprocess.DEVNULL, check=False)
    timed("torch load_file(device=cuda) page cache", warmup=1)
    timed("torch load_file(device=cuda) cold", before=lambda: drop_from_cache(path))
    writer_check(path)
    import safetensors

    print(json.dumps({"torch": torch.__version__, "cuda": torch.version.cuda, "safetensors": safetensors.__version__}), flush=True)


if __name__ == "__main__":
    main()
