"""What a doctor check is: a small function declared with the rows it answers.

A check reads the `Context` and returns a `Verdict` per row it declared; the declaration
attaches the names, so a check spells each row's name once and states only what it found. A
probe that runs out of time or a check that crashes still yields its rows (a warning or an
error that says so), because the doctor must never hand the UI a traceback instead of a row.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ezpz_tui.core.checking.probe_cache import ProbeCache, interpreter_key
from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.launcher import Which, detect_launcher_kind
from ezpz_tui.core.launching.plan import LaunchPlan


@dataclass(frozen=True)
class Check:
    """One doctor row."""

    name: str
    level: str  # "ok" | "warning" | "error"
    reason: str
    remedy: str = ""


@dataclass(frozen=True)
class Verdict:
    """A row's finding before its name is attached."""

    level: str
    reason: str
    remedy: str = ""

    def row(self, name: str) -> Check:
        return Check(name, self.level, self.reason, self.remedy)


def ok(reason: str) -> Verdict:
    return Verdict("ok", reason)


def warning(reason: str, remedy: str) -> Verdict:
    return Verdict("warning", reason, remedy)


def error(reason: str, remedy: str = "") -> Verdict:
    return Verdict("error", reason, remedy)


def timed_out(seconds: float) -> Verdict:
    return warning(
        f"The check did not finish within {seconds:g} s.",
        "Run the doctor again; if it keeps timing out, the filesystem or a module is hung.",
    )


class Context:
    """What every check may read, gathered once."""

    def __init__(
        self,
        alloc: Allocation,
        plan: LaunchPlan | None,
        outputs: Path,
        timeout_s: float,
        env: Mapping[str, str],
        python: str,
        which: Which,
        cache: ProbeCache | None = None,
    ) -> None:
        """``cache`` keeps the probes' answers between doctors (none: every probe runs)."""
        self.alloc = alloc
        self.cache = cache
        self.plan = plan
        self.outputs = outputs
        self.timeout_s = timeout_s
        self.env = env
        self.python = python
        self.which = which
        self.ppn = plan.ranks_per_node(alloc) if plan else alloc.accelerators_per_host

    def launcher(self) -> str:
        """The plan's launcher, with "auto" resolved the way a launch would resolve it."""
        chosen = self.plan.launcher if self.plan else "auto"
        if chosen == "auto":
            return detect_launcher_kind(self.alloc, self.which, self.python)
        return chosen

    def python_json(self, code: str, python: str | None = None) -> dict[str, Any]:
        """Run ``code`` in ``python`` (default: the probed one) and read the JSON it prints;
        ``error`` when that Python cannot start; raises TimeoutExpired. With a cache, an
        answer kept for the same interpreter, packages, job and environment is reused."""
        python = python or self.python
        if self.cache is None:
            return self._python_json(code, python)
        key = interpreter_key(python, self.env, self.alloc.job_id)
        return self.cache.answer(code, key, lambda: self._python_json(code, python))

    def _python_json(self, code: str, python: str) -> dict[str, Any]:
        try:
            proc = subprocess.run(
                [python, "-c", code],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=self.timeout_s,
                env=dict(self.env),
                stdin=subprocess.DEVNULL,
            )
        except OSError as exc:
            return {"error": exc.strerror or str(exc)}
        lines = proc.stdout.strip().splitlines()
        if not lines:
            tail = proc.stderr.strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
            return {"error": f"the probe printed nothing ({tail[0]})"}
        try:
            return json.loads(lines[-1])
        except ValueError:
            return {"error": f"the probe printed {lines[-1][:200]!r} instead of its answer"}


Answer = Verdict | tuple[Verdict, ...]


@dataclass(frozen=True)
class Declared:
    """A check and the names of its rows, in the order they are shown."""

    names: tuple[str, ...]
    run: Callable[[Context], Answer]

    def rows(self, ctx: Context) -> list[Check]:
        """The check's rows; a probe out of time or a crash is rows too, never an exception."""
        try:
            answer = self.run(ctx)
            verdicts = answer if isinstance(answer, tuple) else (answer,)
            return [v.row(name) for name, v in zip(self.names, verdicts, strict=True)]
        except subprocess.TimeoutExpired:
            return self.all_rows(timed_out(ctx.timeout_s))
        except Exception as exc:  # a crashing check is a row, never a traceback in the UI
            reason = f"The check crashed: {type(exc).__name__}: {exc}"
            return self.all_rows(error(reason, "Please report this message."))

    def all_rows(self, verdict: Verdict) -> list[Check]:
        return [verdict.row(name) for name in self.names]


def declare(*names: str) -> Callable[[Callable[[Context], Answer]], Declared]:
    """Make a function a check answering the rows ``names`` (one verdict each, in order)."""

    def declared(run: Callable[[Context], Answer]) -> Declared:
        return Declared(names, run)

    return declared
