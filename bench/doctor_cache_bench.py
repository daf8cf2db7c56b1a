"""The doctor with its probe cache: a fresh doctor against one answered from the cache, and the
cache re-probing when what the ranks would see changes.

``python bench/doctor_cache_bench.py [--reps 3]``

In-process, on this machine's allocation: ``run_checks`` with an empty cache (every probe runs:
torch, mpi4py, the launcher's ``--version``, the ranks' Python), then with the cache it filled
(medians of ``--reps`` each, ms, and the ratio). Then, where this host has GPUs (the torch row
counts CUDA or XPU devices), ``CUDA_VISIBLE_DEVICES`` / ``ZE_AFFINITY_MASK`` set empty (no
device visible): the cached torch row must not be reused, the fresh one must say otherwise.
On a CPU-only host that part says it has nothing to check. A GPU host is where to run it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from _common import print_rerun


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="doctors of each kind")
    args = parser.parse_args(argv)
    print_rerun("doctor_cache_bench.py", args)
    from ezpz_tui.core.checking.doctor import run_checks
    from ezpz_tui.core.checking.probe_cache import ProbeCache
    from ezpz_tui.core.launching.allocation import detect_allocation
    from ezpz_tui.core.launching.plan import default_plan

    alloc = detect_allocation()
    plan = default_plan(alloc)
    with tempfile.TemporaryDirectory(prefix="ezpz-doctor-cache-") as root:
        path, outputs = Path(root) / "probes.json", Path(root) / "outputs"

        def doctor(reuse: bool, env: dict[str, str] | None = None) -> tuple[float, list, bool]:
            cache = ProbeCache(path, reuse=reuse)
            began = time.perf_counter()
            rows = run_checks(alloc, plan, outputs=outputs, env=env, cache=cache)
            return time.perf_counter() - began, rows, cache.used

        fresh = [doctor(reuse=False)[0] for _ in range(args.reps)]
        cached = []
        for _ in range(args.reps):
            seconds, rows, used = doctor(reuse=True)
            assert used, "the cache was not used"
            cached.append(seconds)
        a, b = statistics.median(fresh), statistics.median(cached)
        print(f"  doctor, every probe run         {a * 1000:8.0f} ms")
        print(f"  doctor, answers from the cache  {b * 1000:8.0f} ms  (x{a / b:.0f} faster)")
        torch_row = next(r for r in rows if r.name == "torch")
        print(f"  torch row: {torch_row.level}: {torch_row.reason}")
        if alloc.accelerator_kind not in ("cuda", "rocm", "xpu"):
            print("  no GPUs here: the device-mask re-probe has nothing to check")
            return 0
        var = "ZE_AFFINITY_MASK" if alloc.accelerator_kind == "xpu" else "CUDA_VISIBLE_DEVICES"
        _, masked, _ = doctor(reuse=True, env={**os.environ, var: ""})
        row = next(r for r in masked if r.name == "torch")
        print(f"  with {var} empty: {row.level}: {row.reason}")
        ok = row.reason != torch_row.reason
        print(f"  re-probed under the mask (not the cached row): {'yes' if ok else 'NO'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
