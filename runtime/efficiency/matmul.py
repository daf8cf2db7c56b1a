"""The CPU probe's measurement: the FLOP/s one process gets from float32 matmuls on this host.

Run as ``python -m runtime.efficiency.matmul`` by :mod:`runtime.efficiency.probe`, in the
interpreter the ranks run (its torch, its threads), never inside the TUI (which does not import
torch). Prints one JSON object: the best TFLOPS over a few timed repetitions, after a warm-up,
since a peak is what the hardware can do, not what a busy moment gave.
"""

from __future__ import annotations

import json
import sys
import time

SIZE = 1024
REPEATS = 5
MIN_S = 0.05  # each timed repetition runs at least this long


def measure(size: int = SIZE, repeats: int = REPEATS) -> dict[str, float | int | str]:
    import torch

    a = torch.randn(size, size, dtype=torch.float32)
    b = torch.randn(size, size, dtype=torch.float32)
    torch.mm(a, b)  # warm-up: the thread pool and the allocator
    flops = 2.0 * size**3
    best = 0.0
    start = time.perf_counter()
    for _ in range(repeats):
        count, t0 = 0, time.perf_counter()
        while True:
            torch.mm(a, b)
            count += 1
            elapsed = time.perf_counter() - t0
            if elapsed >= MIN_S:
                break
        best = max(best, flops * count / elapsed / 1e12)
    return {
        "tflops": best,
        "dtype": "fp32",
        "size": size,
        "threads": torch.get_num_threads(),
        "seconds": time.perf_counter() - start,
        "torch": torch.__version__,
    }


def main() -> int:
    print(json.dumps(measure()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
