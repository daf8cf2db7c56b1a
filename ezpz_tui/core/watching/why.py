"""``ezpz-tui why``: what a person reads first about a run that ended, and only reads.

Explaining a run never changes what the next launch does: whether the host a node fault names
is in ``bad_hosts.txt`` was decided when the run's end was recorded (by its supervisor or its
tether, :func:`ezpz_tui.core.launching.failover.record_end_fault`), and a person may have
removed it since; this says which. It sits on the read side, so ``why`` runs without the code
that starts runs.
"""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from ezpz_tui.core.runs.bad_hosts import is_listed, read_bad_hosts
from ezpz_tui.core.runs.digest import rank_statuses
from ezpz_tui.core.runs.liveness import run_state
from ezpz_tui.core.watching.collectives import lines_of, run_verdict, verdict_json
from ezpz_tui.core.watching.failure import explain, format_failure, outcome


def why_report(run_dir: Path, as_json: bool) -> str:
    """What ``ezpz-tui why`` prints: the failure (text or JSON) and whether the host its node
    fault names is in ``bad_hosts.txt`` (recorded when the run ended; a person may have
    removed it since); or how a run that did not fail ended. It only reads: explaining a run
    never changes what the next launch does. A failure says its class, workload or
    infrastructure, the evidence and whether a retry follows (``class``, ``evidence``,
    ``retry``: :mod:`~ezpz_tui.core.watching.failure_class`, what the retries decide by).
    Both say what the ranks' Flight Recorder shows:
    a rank missing from a collective the others wait in (a live run), or members that called
    different things at one collective (:mod:`~ezpz_tui.core.watching.collectives`)."""
    state = run_state(run_dir)
    statuses = rank_statuses(run_dir, state)  # an ended run's from its digest: one file
    failure = explain(run_dir, read=statuses)
    found, notes = run_verdict(run_dir, state.live, time.time())
    said = tuple(lines_of(found, (f"note: {note}" for note in notes)))
    collectives = {"collectives": verdict_json(found), "collective_notes": notes}
    if failure is None:
        text = outcome(run_dir)
        read = list(statuses.notes)  # the failure's notes hold them where there is one
        data = {"run_id": run_dir.name, "failed": False, "outcome": text, **collectives}
        if as_json:
            return json.dumps({**data, "notes": read}, indent=2)
        return "\n".join([text, *said, *(f"note: {note}" for note in read)])
    host = failure.node_fault_host
    listed = None if host is None else is_listed(host, read_bad_hosts(run_dir.parent))
    if not as_json:
        return format_failure(replace(failure, collectives=said), listed)
    data = {**failure.to_json(), "failed": True, "bad_host_listed": listed, **collectives}
    return json.dumps(data, indent=2)
