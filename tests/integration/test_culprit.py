"""The rank that raised is the culprit, every time: real ``ezpz-tui launch`` runs (mpiexec, gloo,
torch) of a plain script whose one rank raises at step 5 while its peers wait in that step's
all_reduce (tests/ranks/raise_at_step.py).

The peers lose the raising rank and fail too ("Connection closed by peer"), and often exit
before it does (its exit destroys its process group first): the order of ends named a bystander
in about half the runs. Each case is one run, never retried; ten in all, since the race is the
point.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from ezpz_tui.core.words import rank_ranges
from tests.fixtures.cli import PY, REPO, base_env, cli, run_dirs

SCRIPT = REPO / "tests" / "ranks" / "raise_at_step.py"
RAISED = "ValueError: bad batch at step 5"
REPEATS = 5
CASES = [(2, 1)] * REPEATS + [(4, 2)] * REPEATS  # (ranks, the rank that raises)


@pytest.mark.mpi
@pytest.mark.parametrize(
    ("ranks", "raiser"), CASES, ids=[f"{n}ranks-{i % REPEATS}" for i, (n, _) in enumerate(CASES)]
)
def test_the_rank_that_raised_is_named_not_a_bystander(
    outputs: Path, ranks: int, raiser: int
) -> None:
    env = base_env(outputs)
    launch = cli(
        ["launch", "--ppn", str(ranks), "--retries", "1", "--", PY, str(SCRIPT), str(raiser)],
        env,
        180,
    )
    (run_dir,) = run_dirs(outputs)
    host = socket.gethostname()
    cause = f"rank {raiser} on {host}: raised {RAISED}"
    # The failover's word follows the verdict, as the TUI's failure panel does (its text is
    # format_failure's, which `why` prints below).
    assert f"not retrying: {cause} does not look like a node fault" in launch.stderr, launch.stderr
    state = json.loads((run_dir / "state.json").read_text())
    assert (state["state"], state["failed_rank"], state["cause"]) == ("failed", raiser, cause)

    said = cli(["why", "--json", run_dir.name], env)
    assert said.returncode == 0, said.stderr
    why = json.loads(said.stdout)
    assert (why["rank"], why["cause"]) == (raiser, cause)
    exception = why["exception"]
    assert (exception["type"], exception["message"]) == ("ValueError", "bad batch at step 5")
    assert exception["where"] == f"{SCRIPT}:19" and exception["thread"] is None
    bystanders = set(range(ranks)) - {raiser}
    named = {s["rank"] for s in why["symptoms"]}
    # Each bystander lost the raiser (a symptom it raised) or was stopped before it noticed.
    assert named <= bystanders and named | set(why["killed"]) == bystanders, why
    assert all(s["symptom"] == "connection closed by peer" for s in why["symptoms"]), why

    text = cli(["why", run_dir.name], env).stdout
    assert f"first failing rank: {raiser} on {host}" in text
    assert f"\n    {RAISED}\n" in text  # the culprit's traceback, quoted
    if named:  # one line for them all
        who = f"rank {min(named)} on {host}" if len(named) == 1 else f"ranks {rank_ranges(named)}"
        said = f"    {who}: connection closed by peer (RuntimeError) after rank {raiser} failed"
        assert said in text.splitlines(), text
