"""What ``ezpz-tui tune`` saves against an exhaustive ``ezpz-tui sweep``, and the CPU probe's cost.

- race: ``ezpz-tui sweep`` over ``--tp`` (1,2,4) on ``--ranks`` (4) CPU ranks at ``--steps``
  (20) steps a layout, then ``ezpz-tui tune`` over the same layouts at the same global batch
  (``--first-steps`` 4), each as a subprocess from the repository. Prints each one's wall time
  and steps, the tune/sweep ratios, and whether the tune picked the layout the sweep measured
  fastest.
- probe: the CPU matmul probe (``python -m runtime.efficiency.matmul`` in this interpreter, as
  the readers start it) against ``python -c pass`` (the interpreter's start-up), median of
  ``--reps``, and a cached answer (one read of the cache file, in-process, µs).

The machines are shared and noisy: one race per run of the bench, so quote it with the load.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time

from _common import PY, bench_parser, print_rerun, run_in_repo, scratch, with_repo_path

PARTS = ("race", "probe")


def _cli(args: list[str], env: dict[str, str]) -> tuple[float, dict | list | None, int]:
    t0 = time.perf_counter()
    proc = run_in_repo([PY, "-m", "ezpz_tui", *args], env, 1800, capture_output=True)
    took = time.perf_counter() - t0
    try:
        out = json.loads(proc.stdout) if proc.stdout.strip() else None
    except ValueError:
        out = None
    if proc.returncode != 0:
        print(proc.stderr.decode(errors="replace")[-2000:], file=sys.stderr)
    return took, out, proc.returncode


def race(args) -> None:
    sizes = ["--tp", args.tp, "--pp", "1", "--cp", "1", "--ppn", str(args.ranks)]
    sizes += ["--global-batch", str(8 * args.ranks)]
    with scratch("tune-bench-", args.keep) as root:
        env = with_repo_path(dict(os.environ))
        env["EZPZ_OUTPUTS"] = str(root / "swept")
        sweep_s, _, rc = _cli(["sweep", *sizes, "--steps", str(args.steps)], env)
        _, compared, _ = _cli(["compare", "--json"], env)
        env["EZPZ_OUTPUTS"] = str(root / "tuned")
        tune_cmd = ["tune", *sizes, "--first-steps", str(args.first_steps), "--json"]
        tune_s, tuned, trc = _cli(tune_cmd, env)
    if rc != 0 or trc != 0 or not isinstance(compared, dict) or not isinstance(tuned, dict):
        print(f"race: sweep exit {rc}, tune exit {trc}: no figures")
        return
    runs = compared["runs"]
    sweep_steps = sum(r["steps"] for r in runs)
    fastest = max(runs, key=lambda r: r["figures"]["tokens_per_s"] or 0)["layout"]
    best = f"tp{fastest['tp']} pp{fastest['pp']} cp{fastest['cp']}"
    print(
        f"sweep: {len(runs)} layouts x {args.steps} steps = {sweep_steps} steps in {sweep_s:.1f} s"
    )
    print(
        f"tune:  rungs {tuned['rungs']}: {tuned['steps']} steps in {tune_s:.1f} s, "
        f"best {tuned['best']} (lead {tuned['gap']:.2f}x)"
    )
    print(
        f"tune/sweep: steps {tuned['steps'] / sweep_steps:.2f}, time {tune_s / sweep_s:.2f}; "
        f"same best as the sweep: {tuned['best'] == best} (sweep's: {best})"
    )


def probe(args) -> None:
    env = with_repo_path(dict(os.environ))
    probe_ms, bare_ms = [], []
    for _ in range(args.reps):
        t0 = time.perf_counter()
        run_in_repo([PY, "-m", "runtime.efficiency.matmul"], env, 300, capture_output=True)
        probe_ms.append((time.perf_counter() - t0) * 1e3)
        t0 = time.perf_counter()
        run_in_repo([PY, "-c", "pass"], env, 60, capture_output=True)
        bare_ms.append((time.perf_counter() - t0) * 1e3)
    p, b = statistics.median(probe_ms), statistics.median(bare_ms)
    print(f"probe: {p:.0f} ms median of {args.reps} (python -c pass {b:.0f} ms, ratio {p / b:.1f})")
    with scratch("probe-cache-", args.keep) as root:
        os.environ["XDG_CACHE_HOME"] = str(root)
        from ezpz_tui.core.watching.probe import cached_peak, measure, this_host

        found = measure(PY)
        reads = []
        for _ in range(200):
            t0 = time.perf_counter()
            cached_peak(this_host(), PY)
            reads.append((time.perf_counter() - t0) * 1e6)
        print(f"probe's answer: {getattr(found, 'label', found)}")
        print(f"cached answer: {statistics.median(reads):.0f} µs a read (median of 200)")


def main() -> int:
    parser = bench_parser(__doc__, PARTS)
    parser.add_argument("--tp", default="1,2,4")
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--first-steps", type=int, default=4)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    print_rerun("tune_bench.py", args)
    if args.only in (None, "probe"):
        probe(args)
    if args.only in (None, "race"):
        race(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
