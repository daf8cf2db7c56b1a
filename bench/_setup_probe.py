"""One rank of the setup() benchmark; ``bench/runtime_bench.py`` launches it, not people.

Run as ``mpiexec -n 2 python bench/_setup_probe.py`` or under torchrun. Rank 0 prints one JSON
line with milliseconds for ``import torch``, ``runtime.setup()`` and ``runtime.cleanup()``.
setup() and cleanup() are split further by wrapping the functions they call (the MPI
rendezvous, init_process_group, init_device_mesh; barrier, destroy_process_group) so a slow
launch can be pinned on one stage without editing runtime/. Rank 0's numbers include waiting
for the slower rank: those stages are collective.
"""

from __future__ import annotations

import json
import time

T_START = time.perf_counter()

import torch  # noqa: E402  (timed on purpose)

T_TORCH = time.perf_counter()

import torch.distributed  # noqa: E402
import torch.distributed.device_mesh  # noqa: E402

import runtime  # noqa: E402
import runtime.dist  # noqa: E402

STAGES: dict[str, float] = {}


def _timed(name: str, fn):  # type: ignore[no-untyped-def]
    """Wrap ``fn`` so each call adds its wall time to ``STAGES[name]``."""

    def wrapper(*args, **kwargs):  # type: ignore[no-untyped-def]
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            STAGES[name] = STAGES.get(name, 0.0) + (time.perf_counter() - t0) * 1e3

    return wrapper


def main() -> None:
    """Time setup() and cleanup() on this rank and let rank 0 report."""
    runtime.dist._rendezvous = _timed("rendezvous", runtime.dist._rendezvous)
    torch.distributed.init_process_group = _timed(
        "init_process_group", torch.distributed.init_process_group
    )
    torch.distributed.device_mesh.init_device_mesh = _timed(
        "mesh", torch.distributed.device_mesh.init_device_mesh
    )
    torch.distributed.barrier = _timed("barrier", torch.distributed.barrier)
    torch.distributed.destroy_process_group = _timed(
        "destroy_process_group", torch.distributed.destroy_process_group
    )
    t_imported = time.perf_counter()
    info = runtime.setup()
    t_setup = time.perf_counter()
    rank, world, source, backend = info.rank, info.world_size, info.source, info.backend
    del info
    runtime.cleanup()
    t_cleanup = time.perf_counter()
    if rank == 0:
        out = {
            "world_size": world,
            "source": source,
            "backend": backend,
            "import_torch_ms": (T_TORCH - T_START) * 1e3,
            "import_rest_ms": (t_imported - T_TORCH) * 1e3,
            "setup_ms": (t_setup - t_imported) * 1e3,
            "cleanup_ms": (t_cleanup - t_setup) * 1e3,
            **{f"{k}_ms": v for k, v in STAGES.items()},
        }
        # What the wrappers did not see: device choice and seeding in setup(), the two
        # gc.collect() passes in cleanup().
        out["setup_other_ms"] = out["setup_ms"] - sum(
            STAGES.get(k, 0.0) for k in ("rendezvous", "init_process_group", "mesh")
        )
        out["cleanup_other_ms"] = out["cleanup_ms"] - sum(
            STAGES.get(k, 0.0) for k in ("barrier", "destroy_process_group")
        )
        print("SETUP_PROBE " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
