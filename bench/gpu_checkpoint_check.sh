#!/usr/bin/env bash
# On one NVIDIA GPU (not run by the tests: CI has none): the demo checkpoints and resumes with
# CUDA tensors (async save stages them to host memory; the CUDA RNG state is saved), the resumed
# losses equal the straight run's, and the cost of saving against the same steps without.
#
#   bash bench/gpu_checkpoint_check.sh      (from the repository root, in the project's venv;
#                                            ~3 min on an H100)
# Exits non-zero when the resumed run does not continue the straight one to 1e-5 relative.
set -euo pipefail
PY=${PY:-python}
OUT=${OUT:-$(mktemp -d)}
DEMO=(-m runtime.examples.train --steps 40 --dim 1024 --heads 8 --layers 4 --global-batch 16
      --log-every 1000000)
export OMP_NUM_THREADS=1
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
EZPZ_RUN_DIR=$OUT/straight $PY "${DEMO[@]}" --checkpoint-every 20
EZPZ_RUN_DIR=$OUT/resumed $PY "${DEMO[@]}" --resume "$OUT/straight/checkpoints/step-20"
EZPZ_RUN_DIR=$OUT/off $PY "${DEMO[@]}"
EZPZ_RUN_DIR=$OUT/sync $PY "${DEMO[@]}" --checkpoint-every 20 --checkpoint-sync
$PY - "$OUT" <<'PYEOF'
import json, math, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
def metrics(name):
    path = out / name / "metrics" / "rank-00000.jsonl"
    return {r["step"]: r["metrics"] for r in map(json.loads, path.read_text().splitlines())}
straight, resumed = metrics("straight"), metrics("resumed")
assert sorted(resumed) == list(range(20, 40)), sorted(resumed)
worst = max(
    abs(resumed[s][k] - straight[s][k]) / abs(straight[s][k])
    for s in resumed for k in ("loss", "grad_norm")
)
print(f"resumed vs straight, steps 20-39: worst relative difference {worst:.2e} (limit 1e-5)")
off = statistics.median(m["dt"] for s, m in metrics("off").items() if s)
for name in ("straight", "sync"):
    run = metrics(name)
    at_save = run[19]["dt"]
    held = [m["ckpt_save_s"] for m in run.values() if "ckpt_save_s" in m]
    print(f"{name:8} saving step {at_save * 1e3:.1f} ms = {at_save / off:.2f} x the median step "
          f"without checkpoints ({off * 1e3:.1f} ms); held {held[0] * 1e3:.1f} ms")
print(f"load {resumed[20]['ckpt_load_s'] * 1e3:.1f} ms")
sys.exit(0 if worst <= 1e-5 else 1)
PYEOF
