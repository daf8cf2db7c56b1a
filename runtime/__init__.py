"""The small library every training rank imports.

Importing it is cheap on purpose: torch, mpi4py and xarray load only when a function that needs
them is first called, so the capture wrapper and the UI can use the environment helpers freely.
"""

from __future__ import annotations

import importlib
from typing import Any

from runtime.env import RankInfo, get_local_rank, get_rank, get_world_size, rank_info

__all__ = [
    "DistInfo",
    "History",
    "RankInfo",
    "cleanup",
    "get_device",
    "get_local_rank",
    "get_logger",
    "get_rank",
    "get_world_size",
    "rank_info",
    "setup",
    "wrap_model",
]

_LAZY = {
    "DistInfo": "runtime.dist",
    "setup": "runtime.dist",
    "cleanup": "runtime.dist",
    "get_device": "runtime.device",
    "wrap_model": "runtime.wrap",
    "History": "runtime.history",
    "get_logger": "runtime.log",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
