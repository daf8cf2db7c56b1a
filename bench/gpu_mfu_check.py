"""On one NVIDIA GPU (H100, H200, ...): the device name resolves to a sourced peak, and the demo's
MFU is reported against it, end to end.

Run from the repository root with a Python whose torch has CUDA:
``python bench/gpu_mfu_check.py [--steps 300]`` (about a minute). It

1. names the GPU as torch, NVML (when nvidia-ml-py is installed) and nvidia-smi do, and looks
   each name up in ``runtime/efficiency/peaks.json`` (bf16, dense): the peak, its source, its
   clock;
2. launches the demo on that one GPU through ``ezpz-tui launch`` (bf16 autocast, a model big
   enough to keep the GPU busy: dim 1024, 8 layers, 1,024 tokens, vocabulary 32,000), with the
   telemetry sampled every 0.5 s so rank 0's samples carry the device's name;
3. prints what ``ezpz-tui compare --json``, ``ezpz-tui top --json`` and ``summary.json`` say:
   FLOPs per token, tokens/s, TFLOPS per device, MFU and the peak it divides by.

Exit 0 when every name resolves to the same table entry, the run's peak is that datasheet
entry (not measured, not n/a) and 0 < MFU < 1; else 1, saying what was wrong.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

MODEL = ["--dim", "1024", "--heads", "16", "--layers", "8", "--seq-len", "1024"]
MODEL += ["--vocab", "32000", "--batch-size", "8", "--dtype", "bfloat16"]


def names() -> dict[str, str | None]:
    """The GPU's name as each source gives it."""
    import torch

    from runtime.telemetry.devices import pick
    from runtime.telemetry.nvidia import NvidiaSmi, Nvml
    from runtime.telemetry.tools import ToolRunner

    found: dict[str, str | None] = {"torch": torch.cuda.get_device_name(0)}
    for label, source in (
        ("NVML", Nvml(pick("nvidia", 0, os.environ))),
        ("nvidia-smi", NvidiaSmi(pick("nvidia", 0, os.environ), ToolRunner(), 10.0)),
    ):
        try:
            found[label] = str(source.read().get("device_name"))
        except Exception as exc:  # not installed, no answer: said, not fatal
            print(f"{label}: no name ({type(exc).__name__}: {exc})")
    return found


def cli(args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "ezpz_tui", *args]
    return subprocess.run(argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--launcher", default="auto", help="ezpz-tui launch --launcher")
    args = parser.parse_args()
    try:
        import torch
    except ImportError:
        print("no torch in this Python: run it with the venv whose torch has CUDA")
        return 1
    if not torch.cuda.is_available():
        print(f"torch {torch.__version__} sees no CUDA GPU: nothing to check here")
        return 1
    from runtime.efficiency.peaks import resolve

    problems = []
    entries = set()
    for source, name in names().items():
        peak = resolve(name, "bf16")
        said = "n/a (not in the table)" if peak is None else peak.label
        print(f"{source}: {name!r} -> {said}")
        if peak is None:
            problems.append(f"{source}'s name {name!r} is not in the peak table")
        else:
            print(f"    source {peak.source}; clock: {peak.clock}")
            entries.add(peak.device)
    if len(entries) > 1:
        problems.append(f"the sources' names resolve to different entries: {sorted(entries)}")

    outputs = Path(tempfile.mkdtemp(prefix="gpu-mfu-"))
    env = {**os.environ, "EZPZ_OUTPUTS": str(outputs), "EZPZ_TELEMETRY_S": "0.5"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH")) if p)
    demo = [sys.executable, "-m", "runtime.examples.train", "--steps", str(args.steps), *MODEL]
    launch = ["launch", "--quiet", "-n", "1", "--ppn", "1", "--launcher", args.launcher]
    proc = cli([*launch, "--", *demo], env)
    print(proc.stderr.strip()[-1500:])
    runs = sorted(p for p in outputs.iterdir() if p.is_dir() and p.name != "sweeps")
    if proc.returncode != 0 or not runs:
        print(f"the demo run failed (exit {proc.returncode}); outputs in {outputs}")
        return 1
    run = runs[-1]
    compared = cli(["compare", "--json", run.name], env)
    top = cli(["top", "--json", run.name], env)
    cli(["finalize", run.name], env)
    figures = json.loads(compared.stdout)["runs"][0]
    eff = figures["efficiency"]
    print(json.dumps({"tokens_per_s": figures["figures"]["tokens_per_s"], **eff}, indent=2))
    print(
        "top:",
        [(r["rank"], r.get("device_name"), r["mfu"]) for r in json.loads(top.stdout)["ranks"]],
    )
    summary = json.loads((run / "summary.json").read_text())["speed"]["efficiency"]
    print("summary.json:", json.dumps(summary))
    peak = eff["peak"]
    if peak is None:
        problems.append(f"the run has no peak: {eff['why_not']}")
    elif peak["measured"] or peak["device"] not in entries:
        problems.append(f"the run's peak is not the table's entry for this GPU: {peak['label']}")
    mfu = eff["mfu"]
    if mfu is None or not 0 < mfu < 1:
        problems.append(f"MFU {mfu} is not a fraction above 0")
    if summary.get("mfu") is None:
        problems.append("summary.json has no MFU")
    print(f"run directory: {run}")
    for problem in problems:
        print(f"PROBLEM: {problem}")
    print("ok" if not problems else "not ok")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
