"""torch.empty + free through PyTorch's caching allocator, for comparison with gpumem's pool (same sizes, hits only)."""
import statistics
import time

import torch

x = torch.empty(1, device="cuda")
for size in (512, 1 << 20, 64 << 20):
    n = 20000
    for _ in range(1000):
        del x
        x = torch.empty(size, dtype=torch.uint8, device="cuda")
    samples = []
    for _ in range(20):
        t0 = time.perf_counter()
        for _ in range(n):
            y = torch.empty(size, dtype=torch.uint8, device="cuda")
            del y
        samples.append((time.perf_counter() - t0) / n * 1e6)
    print(f"torch.empty+del {size} bytes: median {statistics.median(samples):.3f} us, min {min(samples):.3f}, max {max(samples):.3f} (caching-allocator hits)")
