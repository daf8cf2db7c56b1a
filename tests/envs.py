"""The environment of a shell outside any job, for tests that start ezpz-tui as a subprocess.

Whatever job or accelerator the machine running the tests sits in must not change what the
program under test detects.
"""

from __future__ import annotations

import os

JOB_PREFIXES = ("PBS_", "SLURM_", "TMUX")
JOB_VARS = frozenset(
    {
        "NERSC_HOST",
        "LMOD_SYSTEM_NAME",
        "EZPZ_ACCELERATORS_PER_HOST",
        "CUDA_VISIBLE_DEVICES",
        "ZE_AFFINITY_MASK",
        "ROCR_VISIBLE_DEVICES",
        "HIP_VISIBLE_DEVICES",
        "EZPZ_OUTPUTS",
        "EZPZ_RUN_DIR",
        "CPU_BIND",  # a site's binding for the launcher
    }
)


def without_job() -> dict[str, str]:
    """This process's environment minus every job, accelerator and ezpz-tui run variable."""
    return {
        k: v for k, v in os.environ.items() if not k.startswith(JOB_PREFIXES) and k not in JOB_VARS
    }
