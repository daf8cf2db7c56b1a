"""bad_hosts.txt: read tolerantly, added to without losing a person's edits, and kept out of the
next launch (the Session's check and preview) unless asked not to; a retry's plan without the
faulty host, or its refusal with the plan's reason."""

from __future__ import annotations

from pathlib import Path

import pytest

from ezpz_tui.core.launching.bad_hosts import add_bad_hosts, exclude_listed
from ezpz_tui.core.launching.failover import without_host
from ezpz_tui.core.launching.plan import LaunchPlan, LaunchRefused
from ezpz_tui.core.runs.bad_hosts import bad_hosts_path, read_bad_hosts
from ezpz_tui.core.session import Session
from tests.fixtures.allocations import aurora

PLAN = LaunchPlan(ppn=12, command=("python", "train.py"))


def test_reading_is_tolerant(tmp_path: Path) -> None:
    assert read_bad_hosts(tmp_path) == []  # no file
    bad_hosts_path(tmp_path).write_bytes(
        b"# hosts to avoid\r\n"
        b"\r\n"
        b"x4000c0s0b0n1  # run 1: shepherd died\r\n"
        b"   x4000c0s1b0n0 extra words\n"
        b"x4000c0s0b0n1\n"  # listed twice
        b"\xff\xfe\n"  # garbage
        b"# x4000c0s2b0n0 commented out\n"
        b"nid001321"  # no final newline
    )
    assert read_bad_hosts(tmp_path) == [
        "x4000c0s0b0n1",
        "x4000c0s1b0n0",
        "\ufffd\ufffd",
        "nid001321",
    ]


def test_adding_dedupes_comments_and_keeps_edits(tmp_path: Path) -> None:
    path = bad_hosts_path(tmp_path)
    path.write_text("# mine\nnid001320")  # a person's file, no final newline
    added = add_bad_hosts(
        tmp_path,
        ["nid001321.chn.perlmutter.nersc.gov", "nid001321", "nid001320"],
        "20261125-1",
        "srun: error: nid001321: task 4: Killed\n(more)",
    )
    assert added == ["nid001321.chn.perlmutter.nersc.gov"]  # short names compare equal
    lines = path.read_text().splitlines()
    assert lines[:2] == ["# mine", "nid001320"]
    assert lines[2].startswith("nid001321.chn.perlmutter.nersc.gov  # ")
    assert "run 20261125-1: srun: error: nid001321: task 4: Killed (more)" in lines[2]
    assert add_bad_hosts(tmp_path, ["nid001321"], "20261125-2", "again") == []
    assert read_bad_hosts(tmp_path) == ["nid001320", "nid001321.chn.perlmutter.nersc.gov"]


def test_listed_hosts_in_the_allocation_are_excluded() -> None:
    alloc = aurora(3)
    listed = [f"{alloc.hosts[1]}.hsn.cm.aurora.alcf.anl.gov", "elsewhere"]
    plan = exclude_listed(PLAN, alloc, listed)
    assert plan.exclude == (alloc.hosts[1],)
    assert plan.hosts_used(alloc) == (alloc.hosts[0], alloc.hosts[2])
    assert exclude_listed(PLAN, alloc, ["elsewhere"]) is PLAN


def test_the_session_skips_bad_hosts_unless_told_not_to(tmp_path: Path) -> None:
    alloc = aurora(3)
    bad_hosts_path(tmp_path).write_text(f"{alloc.hosts[0]}  # run x: bus error\n")
    pals = {"mpiexec": "/opt/cray/pals/1.4/bin/mpiexec"}.get  # Aurora's launcher, on PATH there
    checked = Session(alloc, tmp_path, which=pals).check(PLAN)
    assert checked.plan.hosts_used(alloc) == alloc.hosts[1:]
    assert any(
        "bad_hosts.txt" in w.message and alloc.hosts[0] in w.message for w in checked.warnings
    )
    preview = Session(alloc, tmp_path, which=pals).preview(PLAN)
    assert preview.command is not None
    assert preview.hostfile_hosts == list(alloc.hosts[1:])  # the hostfile the launcher reads
    assert any("bad_hosts.txt" in p.message for p in preview.problems)
    unscreened = Session(alloc, tmp_path, exclude_bad=False, which=pals).check(PLAN)
    assert unscreened.plan.hosts_used(alloc) == alloc.hosts


def test_the_session_refuses_when_every_host_is_bad(tmp_path: Path) -> None:
    alloc = aurora(2)
    bad_hosts_path(tmp_path).write_text("".join(f"{h}\n" for h in alloc.hosts))
    with pytest.raises(LaunchRefused) as refused:
        Session(alloc, tmp_path).check(PLAN)
    assert "--no-exclude-bad" in str(refused.value)
    assert "bad_hosts.txt" in str(refused.value)


def test_a_retry_plan_drops_the_host_or_says_why_it_cannot() -> None:
    alloc = aurora(3)
    full = f"{alloc.hosts[2]}.hsn.cm.aurora.alcf.anl.gov"
    plan = without_host(PLAN, alloc, full)
    assert plan.exclude == (alloc.hosts[2],)
    assert without_host(plan, alloc, alloc.hosts[2]) == plan  # already out
    with pytest.raises(LaunchRefused) as refused:
        without_host(PLAN.with_changes(nodes=3), alloc, full)
    assert "3 nodes asked for but only 2 are allocated" in str(refused.value)
