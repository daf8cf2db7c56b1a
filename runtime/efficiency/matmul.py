"""The CPU probe's measurement: the FLOP/s one process gets from float32 matmuls on this host.

Run as ``python -m runtime.efficiency.matmul`` by :mod:`ezpz_tui.core.watching.probe`, in the
interpreter the ranks run (its torch), never inside the TUI (which does not import torch).
Prints one JSON object. A peak is what the hardware can do, not what a busy moment gave: the
probe uses the threads it is given (``--threads N``: a rank's), else every core this process
may run on (whatever ``OMP_NUM_THREADS`` the caller had), warms up (the thread pool, the
allocator, the clock's boost) for a while, then keeps the best of several timed repetitions.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable

SIZE = 1024
REPEATS = 7
WARMUP_S = 0.3  # matmuls run, untimed, before the first timed repetition
MIN_S = 0.1  # each timed repetition runs at least this long

Clock = Callable[[], float]


def best_rate(
    work: Callable[[], object],
    flops: float,
    repeats: int = REPEATS,
    warmup_s: float = WARMUP_S,
    min_s: float = MIN_S,
    clock: Clock = time.perf_counter,
) -> float:
    """The best FLOP/s of ``repeats`` timed repetitions of ``work`` (``flops`` each call), each
    running at least ``min_s``, after ``warmup_s`` of untimed calls: a slow first call and a
    repetition a neighbour's process slowed never set the figure."""
    t0 = clock()
    while True:
        work()
        if clock() - t0 >= warmup_s:
            break
    best = 0.0
    for _ in range(repeats):
        count, t0 = 0, clock()
        while True:
            work()
            count += 1
            elapsed = clock() - t0
            if elapsed >= min_s:
                break
        best = max(best, flops * count / elapsed)
    return best


def usable_cores() -> int:
    """The cores this process may run on: every one of them is the host's to give its ranks."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS
        return os.cpu_count() or 1


def measure(
    threads: int | None = None, size: int = SIZE, repeats: int = REPEATS
) -> dict[str, float | int | str]:
    import torch

    torch.set_num_threads(threads or usable_cores())
    a = torch.randn(size, size, dtype=torch.float32)
    b = torch.randn(size, size, dtype=torch.float32)
    start = time.perf_counter()
    rate = best_rate(lambda: torch.mm(a, b), 2.0 * size**3, repeats)
    return {
        "tflops": rate / 1e12,
        "dtype": "fp32",
        "size": size,
        "threads": torch.get_num_threads(),
        "repeats": repeats,
        "seconds": time.perf_counter() - start,
        "torch": torch.__version__,
    }


def main(argv: list[str]) -> int:
    threads = int(argv[1]) if len(argv) == 2 and argv[0] == "--threads" else None
    print(json.dumps(measure(threads)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
