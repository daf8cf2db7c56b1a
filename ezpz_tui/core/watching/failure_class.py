"""Retry or stop: whether a failed run is the infrastructure's (a node, the network) or the
workload's (the program, its memory, its data), with the lines that decided it.

A retry on other hosts helps only when a host was at fault; a program that fails fails again
wherever it runs, consuming a spare and blaming a good node each time. So each failure gets a
class, its evidence and whether to retry, and ``ezpz-tui why``, the TUI's failure dialog, the
unattended retries (:class:`~ezpz_tui.core.failover.Failover`) and what goes to
``bad_hosts.txt`` (:func:`~ezpz_tui.core.launching.failover.record_end_fault`) all read this one
answer, so they never disagree.

The rules, first match wins:

* workload: an out-of-memory report (the job is too big, any node would do the same);
* infrastructure: a node fault, the launcher or a crash line naming a host
  (:func:`~ezpz_tui.core.watching.failure.node_fault_host`'s rules); the only class retried;
* workload: an exception the first failing rank raised on its own (the program, an import,
  its config, a NaN check), or a command that was not found;
* infrastructure: the first failing rank killed from outside (SIGKILL or SIGBUS) with no
  out-of-memory report, where no host is named to move from;
* infrastructure: every failing rank lost a peer (a collective timed out, a connection closed)
  and none failed on its own: no program error was seen, but no host is named to move from;
* workload: anything else (an exit code the program chose).

An infrastructure failure that recurs at the same step on a different host than the run it
retries (its run.toml's ``parent``) follows the job, not a node: it is the workload's, and the
retries stop.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ezpz_tui.core.runs.culprit import symptom_of_raise

if TYPE_CHECKING:
    from ezpz_tui.core.watching.failure import Failure

WORKLOAD = "workload"
INFRASTRUCTURE = "infrastructure"
OOM_KINDS = frozenset({"srun_task_oom", "slurm_oom_kill", "cuda_oom", "bad_alloc"})
_TIMEOUT_KINDS = frozenset({"collective_timeout"})
_NOT_FOUND = 127
_KILLS = frozenset({int(signal.SIGKILL), int(signal.SIGBUS)})


@dataclass(frozen=True)
class FailureClass:
    """A failure's class (``workload`` or ``infrastructure``), the lines that decided it,
    whether an unattended retry should follow and why; ``step``: the step it failed at (the
    first failing rank's last recorded one), what a retry's failure is compared by."""

    kind: str
    evidence: tuple[str, ...]
    retry: bool
    why: str
    step: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "class": self.kind,
            "evidence": list(self.evidence),
            "retry": {"retry": self.retry, "why": self.why},
            "step": self.step,
        }

    def words(self) -> list[str]:
        """The class and its evidence as ``why`` and the failure dialog say them."""
        at = f" at step {self.step}" if self.step is not None else ""
        out = [f"class: {self.kind}{at}"]
        out += [f"  evidence: {line}" for line in self.evidence]
        out.append(f"  {'retry' if self.retry else 'not retried'}: {self.why}")
        return out


def classify(failure: Failure, step: int | None, parent: Failure | None = None) -> FailureClass:
    """``failure``'s class by the module's rules; ``parent``: the failure of the run it
    retries, already classified, when it was one."""
    kind, evidence, fault = _first_rule(failure)
    where = _where(failure)
    if kind == INFRASTRUCTURE and parent is not None and parent.judged is not None:
        before = parent.judged
        then = _where(parent)
        same = _fault_name(parent) == fault and before.kind == INFRASTRUCTURE
        if same and step is not None and before.step == step and then and where != then:
            why = (
                f"the same {fault} at step {step} on {then} and then {where}: it follows the "
                "job, not a node"
            )
            said = (f"run {parent.run_id}: {line}" for line in before.evidence)
            return FailureClass(WORKLOAD, (*said, *evidence), False, why, step)
    if kind == INFRASTRUCTURE and failure.node_fault_host is not None:
        why = f"a {fault} named {failure.node_fault_host}: another host may not fail"
        return FailureClass(kind, evidence, True, why, step)
    if kind == INFRASTRUCTURE:
        why = f"{failure.cause} names no host to move away from"
    else:
        why = f"{failure.cause} does not look like a node fault: it would fail again anywhere"
    return FailureClass(kind, evidence, False, why, step)


def _first_rule(failure: Failure) -> tuple[str, tuple[str, ...], str]:
    """The class, its evidence and the fault's name in words, by the module's rules."""
    said = failure.messages
    oom = [m for m in said if m.kind in OOM_KINDS]
    if oom:
        return WORKLOAD, tuple(_message(m) for m in oom), "out of memory"
    if failure.node_fault_host is not None:
        named = [m for m in said if m.node_fault and m.host] or [
            m for m in said if m.kind.startswith("hydra_")
        ]
        return INFRASTRUCTURE, tuple(_message(m) for m in named), _fault_name(failure)
    raised = failure.exception
    if raised is not None and symptom_of_raise(raised) is None:
        where = f" at {raised.where}" if raised.where else ""
        line = " ".join(raised.line.split())
        return WORKLOAD, (f"rank {failure.rank} raised {line}{where}",), "exception"
    if failure.exit_code == _NOT_FOUND:
        return WORKLOAD, (f"rank {failure.rank}: exit 127, the command was not found",), "exit"
    if failure.signal in _KILLS or (failure.exit_code or 0) - 128 in _KILLS:
        line = f"{failure.cause}: killed from outside, with no out-of-memory report"
        return INFRASTRUCTURE, (line,), _fault_name(failure)
    if raised is not None:  # the culprit's own failure is a symptom: so was every rank's
        words = symptom_of_raise(raised)
        line = f"rank {failure.rank} raised {' '.join(raised.line.split())} ({words})"
        return INFRASTRUCTURE, (line,), _fault_name(failure)
    timeouts = [m for m in said if m.kind in _TIMEOUT_KINDS]
    if timeouts:
        return INFRASTRUCTURE, tuple(_message(m) for m in timeouts), "collective timeout"
    last = failure.last_lines[-1:] if failure.last_lines else ()
    return WORKLOAD, (failure.cause, *(f"its last line: {line}" for line in last)), "exit"


def _fault_name(failure: Failure) -> str:
    """The fault in a word or two, to say a recurrence: a collective timeout, else a node
    fault."""
    timed_out = any(m.kind in _TIMEOUT_KINDS for m in failure.messages)
    raised = failure.exception
    if timed_out or (raised is not None and symptom_of_raise(raised) == "a collective timed out"):
        return "collective timeout"
    return "node fault"


def _where(failure: Failure) -> str | None:
    """The host the failure happened on: the one its node fault names, else its rank's."""
    return failure.node_fault_host or failure.host


def _message(message: Any) -> str:
    return f"{message.source}:{message.line}: {message.text}"
