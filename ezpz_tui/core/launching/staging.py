"""Staging: the ranks run from a copy of their environment on each node's own disk.

With ``--stage`` a launch first runs :mod:`runtime.stage` once per node through the plan's own
launcher (one process a node, on the run's hosts), which copies the rank interpreter's
environment (its ``sys.prefix``: a venv or a conda environment) to the same path on every node
and checks it; then the ranks start from that copy, the interpreter's path swapped in their
argv. After the run, whatever ended it, the launcher runs the module once per node again to
remove the copy, unless the plan keeps it (``keep``), to be reused by the next run as long as
the source has not changed.

What each node answered is the run's ``stage.json`` (:func:`stage_record`; its figures read back
by :mod:`ezpz_tui.core.runs.staged`): the seconds the
staging took, the bytes copied, whether a kept copy was reused. A node that failed (a full or
read-only disk, a copy that does not match its source) fails the launch before any rank starts,
named in the reason, unless the plan's ``stage_min_nodes`` lets it go on without that node
(:mod:`~ezpz_tui.core.launching.stage_shortfall`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import platformdirs

from ezpz_tui.core.launching.plan import LaunchPlan, Problem
from ezpz_tui.core.runs.hosts import short_host
from ezpz_tui.core.runs.staged import read_stage
from runtime.atomic import write_atomic
from runtime.rundir import RunDir
from runtime.stage import MARK

APP_NAME = "ezpz-tui"  # the user cache directory's name, as the probe cache's
STAGE_TIMEOUT_S = 1800.0  # a copy of several GB to every node of a busy filesystem
_PREFIX_MARKS = ("pyvenv.cfg", "conda-meta")  # what makes a folder an environment to copy
_BARE_PYTHON = re.compile(r"python(\d+(\.\d+)?)?")  # a command's interpreter found on PATH


@dataclass(frozen=True)
class Staging:
    """Where a launch stages its environment and the per-node commands that do it."""

    source: str  # the environment copied: the rank interpreter's sys.prefix
    dest: str  # its copy, at the same path on every node
    keep: bool
    copy_argv: tuple[str, ...]
    remove_argv: tuple[str, ...]
    hosts: tuple[str, ...]

    def swap(self, argv: Sequence[str]) -> list[str]:
        """``argv`` with every path inside the source environment pointing into the copy, and
        a bare ``python``/``python3``/``python3.12`` the environment has its copy's: the most
        common way to write a command would otherwise run from the shared filesystem."""
        inside = self.source.rstrip("/") + "/"
        out = [self.dest + "/" + a[len(inside) :] if a.startswith(inside) else a for a in argv]
        if out and _BARE_PYTHON.fullmatch(out[0]) and (Path(inside, "bin", out[0])).exists():
            out[0] = os.path.join(self.dest, "bin", out[0])
        return out

    def rank_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """What the ranks' environment says of the copy: its ``bin`` first on ``PATH`` (a
        script's own ``python`` finds it), and ``VIRTUAL_ENV`` or ``CONDA_PREFIX`` naming it."""
        path = environ.get("PATH", "")
        env = {"PATH": os.path.join(self.dest, "bin") + (os.pathsep + path if path else "")}
        if Path(self.source, "conda-meta").exists():
            env["CONDA_PREFIX"] = self.dest
        else:
            env["VIRTUAL_ENV"] = self.dest
        return env


def environment_of(python: str) -> Path | Problem:
    """The environment ``python`` belongs to (the folder above its ``bin/`` holding a
    ``pyvenv.cfg`` or ``conda-meta``), or why it cannot be staged."""
    prefix = Path(os.path.abspath(python)).parent.parent
    if any((prefix / mark).exists() for mark in _PREFIX_MARKS):
        return prefix
    return Problem(
        "error",
        "stage",
        f"Staging copies a virtual or conda environment, and {python} is in neither (no "
        f"pyvenv.cfg or conda-meta in {prefix}): run ezpz-tui from the venv the ranks use, or "
        "launch without staging.",
    )


def stage_problems(plan: LaunchPlan, python: str) -> list[Problem]:
    """Why ``plan``'s staging cannot be done with ``python`` as the ranks' interpreter."""
    if plan.stage == "off":
        return []
    found = environment_of(python)
    return [found] if isinstance(found, Problem) else []


def stage_dest(plan: LaunchPlan, source: Path, run_id: str, environ: Mapping[str, str]) -> str:
    """Where the copy goes: a kept one has a name of its source's, so the next run finds it; a
    run's own is named for the run, so two runs at once never share one."""
    base = plan.stage_dir or environ.get("TMPDIR") or "/tmp"
    if plan.stage == "keep":
        import hashlib

        digest = hashlib.sha1(str(source).encode()).hexdigest()[:12]
        name = f"ezpz-stage-{os.getuid()}-{digest}"
    else:
        name = f"ezpz-stage-{run_id}"
    return os.path.join(os.path.abspath(base), name)


def pack_path(source: Path) -> str:
    """Where the source's pack is kept between launches: the user's cache directory (a home
    that every node of every allocation sees, at most sites), one pack per source."""
    digest = hashlib.sha1(str(source).encode()).hexdigest()[:12]
    cache = platformdirs.user_cache_dir(APP_NAME, appauthor=False)
    return os.path.join(cache, "stage", f"{source.name}-{digest}.tar")


def node_commands(
    python: str, source: Path, dest: str, keep: bool, pack: str
) -> tuple[list[str], list[str]]:
    """The programs each node runs: the copy and the removal (the source's interpreter runs
    both: the copy is not there yet, or is being removed)."""
    rel = os.path.relpath(os.path.abspath(python), source)
    copy = [python, "-m", "runtime.stage", "copy", "--source", str(source), "--dest", dest]
    copy += ["--python", rel, "--pack", pack, *(["--keep"] if keep else [])]
    return copy, [python, "-m", "runtime.stage", "remove", "--dest", dest]


@dataclass(frozen=True)
class NodesAnswer:
    """What the nodes said to one staging command: each host's answer, the seconds the whole
    command took, and what failed, in words naming the nodes (None: every node did it)."""

    answers: dict[str, dict[str, Any]]
    seconds: float
    failure: str | None
    failed: dict[str, str] = field(default_factory=dict)  # each failed host: why, in words


def run_on_nodes(
    argv: Sequence[str],
    env: Mapping[str, str],
    hosts: Sequence[str],
    log: Path,
    timeout_s: float = STAGE_TIMEOUT_S,
) -> NodesAnswer:
    """Run one staging command on every node through the launcher and gather their answers;
    the launcher's output goes to ``log``. Never raises."""
    began, late = time.monotonic(), ""
    try:
        done = subprocess.run(
            list(argv),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            timeout=timeout_s,
            check=False,
        )
        output, code = done.stdout.decode("utf-8", errors="replace"), done.returncode
    except subprocess.TimeoutExpired as exc:
        output = (exc.stdout or b"").decode("utf-8", errors="replace")
        code, late = None, f"no answer within {timeout_s:g} s"
    except OSError as exc:
        output, code, late = "", None, f"cannot start {argv[0]}: {exc.strerror or exc}"
    seconds = time.monotonic() - began
    _append(log, output)
    answers: dict[str, dict[str, Any]] = {}
    for line in output.splitlines():
        if line.startswith(MARK):
            try:
                answer = json.loads(line[len(MARK) :])
            except ValueError:
                continue
            if isinstance(answer, dict) and isinstance(answer.get("host"), str):
                answers[answer["host"]] = answer
    named = {short_host(h): h for h in hosts}  # a node's answer names it as it calls itself
    failed = {
        named.get(short_host(h), h): str(a.get("error", "failed"))
        for h, a in answers.items()
        if not a.get("ok")
    }
    heard = {short_host(h) for h in answers}
    silent = [h for h in hosts if short_host(h) not in heard]
    if silent and code is not None:
        late = f"the launcher exited with status {code} before it answered"
    failed |= {h: late for h in silent}
    return NodesAnswer(answers, seconds, nodes_text(failed) or None, failed)


def nodes_text(failed: Mapping[str, str]) -> str:
    """``vm2: no space left; vm7: ...``: the nodes that failed, each with why."""
    return "; ".join(f"{host}: {why}" for host, why in failed.items())


def _append(log: Path, text: str) -> None:
    with contextlib.suppress(OSError), log.open("a", encoding="utf-8") as fh:
        fh.write(text)  # the launcher log is the run's; a full disk is said by the run's end


def stage_record(staging: Staging, copied: NodesAnswer) -> dict[str, Any]:
    """What ``stage.json`` says after the copy: its figures summed up over the nodes (the
    largest node's bytes, since every node copies the same), the pack the first node read
    (None: every node reused its kept copy), how it reached the others, and each node's own."""
    answers = copied.answers.values()
    return {
        "source": staging.source,
        "dest": staging.dest,
        "keep": staging.keep,
        "seconds": round(copied.seconds, 3),
        "bytes": max((a.get("bytes", 0) for a in answers), default=0),
        "files": max((a.get("files", 0) for a in answers), default=0),
        "reused": bool(answers) and all(a.get("reused") for a in answers),
        "pack": next((a["pack"] for a in answers if isinstance(a.get("pack"), dict)), None),
        "spread": next((a["spread"] for a in answers if a.get("spread")), None),
        "failure": copied.failure,
        "nodes": copied.answers,
        "hosts": list(staging.hosts),
        "remove_argv": list(staging.remove_argv),  # for a tether that records the end
    }


def stage(staging: Staging, env: Mapping[str, str], run_dir: Path) -> NodesAnswer:
    """Stage the environment on every node and record it in ``stage.json``; what the nodes
    answered, whose ``failure`` names the nodes that have no copy (the caller goes on
    without them, or removes the copies made: :func:`not_staged`)."""
    run = RunDir(run_dir)
    _append(run.launcher_log, f"ezpz-tui: staging {staging.source} to {staging.dest}\n")
    copied = run_on_nodes(staging.copy_argv, env, staging.hosts, run.launcher_log)
    _write(run_dir, stage_record(staging, copied))
    return copied


def not_staged(failure: str, why_not_fewer: str = "") -> str:
    """The reason of a launch its staging failed, naming the nodes; ``why_not_fewer``: why it
    did not go on without them."""
    more = f" ({why_not_fewer})" if why_not_fewer else ""
    return f"staging the environment failed on {failure}; no rank was started{more}"


def record_excluded(run_dir: Path, staging: Staging, failed: Mapping[str, str]) -> None:
    """``stage.json`` after the launch went on without the nodes that ``failed``: the nodes
    left are its nodes (and removing the copy visits only them), the others are ``excluded``,
    each with why."""
    record = read_stage(run_dir) or {}
    nodes = record.get("nodes") if isinstance(record.get("nodes"), dict) else {}
    record["nodes"] = {h: a for h, a in nodes.items() if isinstance(a, dict) and a.get("ok")}
    record.update(failure=None, excluded=dict(failed), hosts=list(staging.hosts))
    record["remove_argv"] = list(staging.remove_argv)
    _write(run_dir, record)


def unstage(staging: Staging, env: Mapping[str, str], run_dir: Path) -> None:
    """Remove the copy from every node; ``stage.json`` says what was removed and what not."""
    _remove_on_nodes(staging.dest, staging.remove_argv, staging.hosts, env, run_dir)


def unstage_recorded(run_dir: Path, env: Mapping[str, str]) -> None:
    """Remove the copy ``stage.json`` names from every node, unless it is kept or removed
    already: for the tether, which records the end of a run its supervisor left."""
    record = read_stage(run_dir)
    if record is None or record.get("keep") or "removed" in record:
        return
    argv, hosts = record.get("remove_argv"), record.get("hosts")
    if isinstance(argv, list) and isinstance(hosts, list):
        _remove_on_nodes(str(record.get("dest")), argv, hosts, env, run_dir)


def _remove_on_nodes(
    dest: str, argv: Sequence[str], hosts: Sequence[str], env: Mapping[str, str], run_dir: Path
) -> None:
    run = RunDir(run_dir)
    _append(run.launcher_log, f"ezpz-tui: removing {dest} from every node\n")
    removed = run_on_nodes(argv, env, hosts, run.launcher_log)
    record = read_stage(run_dir) or {}
    record["removed"] = {"seconds": round(removed.seconds, 3), "failure": removed.failure}
    _write(run_dir, record)


def _write(run_dir: Path, record: Mapping[str, Any]) -> None:
    with contextlib.suppress(OSError):  # the figure is lost, never the run
        write_atomic(RunDir(run_dir).stage_json, json.dumps(record, indent=1).encode())
