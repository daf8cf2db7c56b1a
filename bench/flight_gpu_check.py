"""What can only be checked on an NVIDIA GPU: the Flight Recorder and the profile with NCCL.

Launches one NCCL rank per visible GPU (``ezpz-tui launch --ppn N``) running a few hundred
steps of a matmul and an ``all_reduce`` with ``History.record``; while it runs, checks that
``flight/rank-00000.json`` holds ``nccl:all_reduce`` entries (their states, the group's ranks
in ``pg_config``), that ``why --json`` gives no verdict for the healthy run, that ``top --json``
has each rank's ``arrival_lag_s``, and that ``profile --steps 3 --json`` splits the steps by the
device's kernels (``split: device``: ``nccl`` kernels as communication, their overlap with the
compute kernels counted) with ``aten::mm`` among the top operators. Prints what
it found and exits 1 on the first check that fails. Run from the repository root:

    python bench/flight_gpu_check.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from _common import PY, REPO, with_repo_path

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    import torch, torch.distributed as dist
    from runtime import History

    rank = int(os.environ["RANK"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    history = History()
    w = torch.randn(2048, 2048, device="cuda")
    for step in range(600):
        x = w @ w
        dist.all_reduce(x)
        torch.cuda.synchronize()
        history.record(step, {"loss": float(x[0, 0])})
        time.sleep(0.02)
    dist.destroy_process_group()
    """
)


def check(ok: bool, what: str) -> None:
    print(("ok    " if ok else "FAIL  ") + what, flush=True)
    if not ok:
        sys.exit(1)


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [PY, "-m", "ezpz_tui", *args]
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=300)


def main() -> None:
    import torch

    gpus = torch.cuda.device_count()
    check(gpus > 0, f"{gpus} CUDA devices")
    root = Path(tempfile.mkdtemp(prefix="flight-gpu-"))
    outputs, script = root / "outputs", root / "job.py"
    script.write_text(SCRIPT)
    env = with_repo_path({**os.environ, "EZPZ_OUTPUTS": str(outputs)})
    env["EZPZ_FLIGHT_INTERVAL_S"] = "1"
    argv = [PY, "-m", "ezpz_tui", "launch", "--ppn", str(gpus), "--quiet", "--", PY, str(script)]
    launch = subprocess.Popen(argv, env=env, cwd=REPO)
    try:
        deadline = time.monotonic() + 180
        flight = None
        while time.monotonic() < deadline:
            runs = sorted(outputs.glob("*/flight/b0000/rank-00000.json"))
            if runs and json.loads(runs[0].read_text())["entries"]:
                flight = runs[0]
                break
            time.sleep(0.5)
        check(flight is not None, "rank 0 wrote its Flight Recorder file")
        run = flight.parent.parent
        data = json.loads(flight.read_text())
        first = data["entries"][-1]
        print(json.dumps({k: data[k] for k in ("pg_config", "pg_status")}, indent=1))
        print(json.dumps(first, indent=1))
        check(first["profiling_name"] == "nccl:all_reduce", "entries are nccl:all_reduce")
        why = json.loads(cli(["why", run.name, "--json"], env).stdout)
        check(why["collectives"] is None, "why: no verdict for a healthy run")
        top = json.loads(cli(["top", run.name, "--json"], env).stdout)
        lags = [row.get("arrival_lag_s") for row in top["ranks"]]
        check(gpus == 1 or all(lag is not None for lag in lags), f"top: arrival lags {lags}")
        done = cli(["profile", run.name, "--steps", "3", "--json"], env)
        check(done.returncode == 0, f"profile answered: {done.stderr.strip()}")
        summary = json.loads(done.stdout)["ranks"]["0"]
        print(json.dumps(summary, indent=1))
        names = [t["name"] for t in summary["top"]]
        check(summary.get("split") == "device", "profile: split by the device's kernels")
        check(summary["communication_s"] > 0, "profile: communication time counted")
        check("overlap_s" in summary, "profile: compute/communication overlap counted")
        check(any("mm" in n or "gemm" in n.lower() for n in names), f"profile: top ops {names}")
    finally:
        launch.terminate()
        launch.wait(120)
    print(f"run directory kept: {root}")


if __name__ == "__main__":
    main()
