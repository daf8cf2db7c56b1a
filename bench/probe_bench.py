"""How far two CPU probes of this machine agree: the peak a CPU run's MFU divides by.

Runs the probe as the readers start it (``python -m runtime.efficiency.matmul``, a fresh
interpreter each time: warm-up, then the best of 7 timed repetitions) ``--reps`` times at every
core and at one thread, interleaved, and prints each answer (TFLOPS), then per thread count the
spread (largest over smallest) and how many consecutive pairs agree within 10% (issue 38's
target for a quiet machine). A machine others are loading shows it: the figures then say how
much an MFU on it can be trusted, not what the probe does wrong. Also printed: the load average
before and after.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess

from _common import PY, bench_parser, print_rerun, with_repo_path

AGREE = 0.10


def probe(threads: int | None) -> float:
    given = ["--threads", str(threads)] if threads else []
    argv = [PY, "-m", "runtime.efficiency.matmul", *given]
    env = with_repo_path(dict(os.environ))
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["tflops"])


def main() -> int:
    parser = bench_parser(__doc__, ("all", "one"))
    parser.add_argument("--reps", type=int, default=6, help="probes per thread count")
    args = parser.parse_args()
    print_rerun("probe_bench.py", args)
    kinds = {"all": None, "one": 1}
    names = {"all": "every core", "one": "one thread"}
    if args.only:
        kinds = {args.only: kinds[args.only]}
    print(f"load average before: {os.getloadavg()}")
    found: dict[str, list[float]] = {kind: [] for kind in kinds}
    for rep in range(args.reps):
        for kind, threads in kinds.items():
            tflops = probe(threads)
            found[kind].append(tflops)
            print(f"rep {rep + 1} {names[kind]:>10}: {tflops * 1e3:8.2f} GFLOPS")
    print(f"load average after: {os.getloadavg()}")
    for kind, values in found.items():
        pairs = list(itertools.pairwise(values))
        agree = sum(1 for a, b in pairs if abs(a - b) <= AGREE * max(a, b))
        spread = max(values) / min(values)
        print(
            f"{names[kind]:>10}: {min(values) * 1e3:.2f}-{max(values) * 1e3:.2f} GFLOPS, "
            f"spread x{spread:.2f}; {agree}/{len(pairs)} consecutive pairs within 10%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
