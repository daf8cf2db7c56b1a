"""The small library every training rank imports.

Importing it costs next to nothing on purpose: each name below loads its module when first
used, and torch, mpi4py and xarray load later still, when a function that needs them is called.
So the capture wrapper, the UI and a script that only asks for its rank pay for what they use,
and a rank's start-up is not spent importing what it never calls.
"""

TYPE_CHECKING = False
if TYPE_CHECKING:  # for type checkers and readers; at run time __getattr__ loads these
    from runtime.device import get_device
    from runtime.dist import DistInfo, cleanup, setup
    from runtime.env import RankInfo, get_local_rank, get_rank, get_world_size, rank_info
    from runtime.history import History
    from runtime.log import get_logger
    from runtime.wrap import wrap_model

_LAZY = {
    "DistInfo": "runtime.dist",
    "setup": "runtime.dist",
    "cleanup": "runtime.dist",
    "get_device": "runtime.device",
    "wrap_model": "runtime.wrap",
    "History": "runtime.history",
    "get_logger": "runtime.log",
    "RankInfo": "runtime.env",
    "get_local_rank": "runtime.env",
    "get_rank": "runtime.env",
    "get_world_size": "runtime.env",
    "rank_info": "runtime.env",
}

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


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'runtime' has no attribute {name!r}")
    from importlib import import_module

    value = getattr(import_module(module), name)
    globals()[name] = value  # later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
