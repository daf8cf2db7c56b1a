"""MPI: is mpi4py importable, and does the launcher speak the same MPI as the library?

A launcher of one MPI family with a library of another starts every rank as its own world of
one, which looks like a hang much later; the doctor catches it before the launch. mpi4py is
imported in a subprocess, because the TUI process imports no MPI.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from ezpz_tui.core.checking.check import Context, Verdict, declare, error, ok, timed_out
from ezpz_tui.core.checking.probe_cache import program_key

_MPI4PY_PROBE = """
import json
try:
    import mpi4py
    mpi4py.rc.initialize = False
    mpi4py.rc.finalize = False
    from mpi4py import MPI
    out = {"version": mpi4py.__version__, "library": MPI.Get_library_version().strip()}
except Exception as exc:
    out = {"error": f"{type(exc).__name__}: {exc}"}
print(json.dumps(out))
"""


def mpi_family(text: str) -> str | None:
    """Which MPI a version string belongs to; launcher and library must be the same family."""
    lowered = text.lower()
    if "open mpi" in lowered or "openrte" in lowered or "prte" in lowered:
        return "Open MPI"
    if "intel(r) mpi" in lowered:
        return "Intel MPI"
    if "mvapich" in lowered:
        return "MVAPICH"
    if "cray" in lowered or "pals" in lowered:
        return "Cray MPICH"
    if "mpich" in lowered or "hydra" in lowered:
        return "MPICH"
    return None


def _compatible(launcher: str, library: str) -> bool:
    """Open MPI pairs only with itself; the MPICH family shares the PMI wire protocol."""
    return (launcher == "Open MPI") == (library == "Open MPI")


@declare("mpi4py", "launcher")
def mpi4py_and_launcher(ctx: Context) -> tuple[Verdict, Verdict]:
    kind = ctx.launcher()
    probe = ctx.python_json(_MPI4PY_PROBE)
    if "error" in probe:
        return (
            Verdict(
                "warning" if kind == "torchrun" else "error",
                f"mpi4py is not importable: {probe['error']}.",
                "pip install 'ezpz-tui[mpich]', or load the site's mpi4py module; ranks use MPI "
                "to agree on the rendezvous address.",
            ),
            _launcher(ctx, kind, ""),
        )
    library = probe["library"]
    first = " ".join(library.splitlines()[0].split()) if library else "an unnamed MPI"
    return ok(f"mpi4py {probe['version']} with {first}."), _launcher(ctx, kind, library)


def _launcher(ctx: Context, kind: str, library: str) -> Verdict:
    if kind == "torchrun":
        return ok("torchrun runs as python -m torch.distributed.run.")
    local = ctx.alloc.scheduler == "none"
    sibling = Path(ctx.python).parent / kind
    binary = str(sibling) if local and sibling.is_file() else ctx.which(kind)
    if binary is None:
        return error(
            f"{kind} is not on PATH.",
            "Load the MPI or Slurm module that provides it, or choose another launcher.",
        )
    if kind == "srun":
        return ok(f"srun at {binary}; ranks get --mpi=pmi2.")
    try:
        found = _version(ctx, binary)
    except subprocess.TimeoutExpired:  # only this row: the mpi4py row already has its answer
        return timed_out(ctx.timeout_s)
    if "error" in found:
        return error(f"{binary} cannot run: {found['error']}.", "Check the module.")
    launcher_family = mpi_family(found["text"])
    library_family = mpi_family(library)
    if launcher_family and library_family and not _compatible(launcher_family, library_family):
        return error(
            f"{binary} is {launcher_family} but mpi4py uses {library_family}: every rank "
            "would start as its own MPI world of 1.",
            "Put the matching launcher first on PATH, or rebuild mpi4py against this MPI "
            "(pip install --no-binary mpi4py mpi4py).",
        )
    what = launcher_family or "an MPI launcher not recognised from --version"
    return ok(f"{kind} at {binary} ({what}).")


def _version(ctx: Context, binary: str) -> dict[str, str]:
    """What ``binary --version`` prints (``text``), or why it cannot run (``error``); kept in
    the doctor's cache against the binary's size and mtime. Raises TimeoutExpired."""

    def run() -> dict[str, str]:
        try:
            proc = subprocess.run(
                [binary, "--version"],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=ctx.timeout_s,
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            return {"error": str(exc)}
        return {"text": proc.stdout + proc.stderr}

    if ctx.cache is None:
        return run()
    return ctx.cache.answer(f"{binary} --version", program_key(binary), run)
