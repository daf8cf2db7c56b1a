"""Launch plans: derived sizes, every validation message, the gate to a launch, rank layout,
the recorded plan's round trip."""

from __future__ import annotations

import sys
import time

import pytest
import tomli_w

from ezpz_tui.core.launching.allocation import Allocation
from ezpz_tui.core.launching.plan import (
    LaunchPlan,
    LaunchRefused,
    Problem,
    RankPlace,
    check,
    default_plan,
    rank_layout,
    validate,
)

try:
    import tomllib
except ImportError:  # Python 3.10
    import tomli as tomllib


def make_alloc(
    hosts: tuple[str, ...] = ("x1000", "x1001", "x1002"),
    per_host: int = 4,
    kind: str = "cuda",
    scheduler: str = "PBS",
    cpus: int = 64,
) -> Allocation:
    return Allocation(
        scheduler=scheduler,
        job_id="1.pbs" if scheduler != "none" else None,
        machine="Polaris",
        hosts=hosts,
        accelerators_per_host=per_host,
        accelerator_kind=kind,
        accelerator_source="test",
        walltime_left_s=None,
        walltime_checked_at=time.time(),
        nodefile=None,
        cpus_per_host=cpus,
    )


def messages(problems: list[Problem], level: str = "error") -> list[str]:
    return [p.message for p in problems if p.level == level]


def test_default_plan_uses_everything() -> None:
    alloc = make_alloc()
    plan = default_plan(alloc)
    assert plan == LaunchPlan(ppn=4)
    assert plan.command == (sys.executable, "-m", "runtime.examples.train")
    assert plan.hosts_used(alloc) == alloc.hosts
    assert (plan.world_size(alloc), plan.layout(alloc).dp) == (12, 12)
    assert validate(plan, alloc) == []


def test_derived_sizes_follow_the_subset() -> None:
    alloc = make_alloc()
    plan = LaunchPlan(nodes=1, exclude=("x1000",), tp=2)
    assert plan.hosts_used(alloc) == ("x1001",)
    assert plan.ranks_per_node(alloc) == 4  # ppn unset: one rank per accelerator
    assert (plan.world_size(alloc), plan.layout(alloc).dp) == (4, 2)


def test_exclude_by_short_name_matches_fqdn() -> None:
    alloc = make_alloc(hosts=("x3006c0s13b0n0.hsn.cm", "x3006c0s19b0n0.hsn.cm"))
    plan = LaunchPlan(exclude=("x3006c0s13b0n0",))
    assert plan.hosts_used(alloc) == ("x3006c0s19b0n0.hsn.cm",)
    assert validate(plan, alloc) == []


def test_every_error_at_once() -> None:
    alloc = make_alloc(hosts=("x1000", "x1001"))
    plan = LaunchPlan(
        nodes=3,
        exclude=("x9999",),
        ppn=8,
        tp=0,
        pp=-1,
        launcher="srun",
        command=(),
        env={"EZPZ_TP": "2", "RANK": "0", "MASTER_PORT": "http", "1BAD": "x"},
    )
    assert messages(validate(plan, alloc)) == [
        "Excluded host x9999 is not in the allocation (x1000, x1001).",
        "3 nodes asked for but only 2 are allocated.",
        "8 ranks per node but the hosts have 4 accelerators.",
        "TP must be at least 1, not 0.",
        "PP must be at least 1, not -1.",
        "srun needs a Slurm allocation, but this is PBS.",
        "The command is empty: give the program to run, e.g. python train.py.",
        "EZPZ_TP comes from the TP size; set TP instead.",
        "RANK is set for each rank by the launcher and cannot be overridden.",
        "MASTER_PORT='http' is not a port number (1-65535).",
        "'1BAD' is not a valid environment variable name.",
    ]
    fields = [p.field for p in validate(plan, alloc)]
    assert fields == [
        "exclude",
        "nodes",
        "ppn",
        "tp",
        "pp",
        "launcher",
        "command",
        "env",
        "env",
        "env",
        "env",
    ]


def test_too_many_nodes_after_exclusion() -> None:
    alloc = make_alloc()
    problems = validate(LaunchPlan(nodes=3, exclude=("x1001",)), alloc)
    assert messages(problems) == [
        "3 nodes asked for but only 2 are allocated (after excluding x1001)."
    ]
    problems = validate(LaunchPlan(nodes=2, exclude=("x1000", "x1001")), alloc)
    assert messages(problems) == [
        "2 nodes asked for but only 1 is allocated (after excluding x1000, x1001)."
    ]


def test_everything_excluded() -> None:
    alloc = make_alloc(hosts=("x1000",))
    assert messages(validate(LaunchPlan(exclude=("x1000",)), alloc)) == [
        "Every allocated host is excluded, so there is nothing left to run on."
    ]


def test_world_not_divisible() -> None:
    alloc = make_alloc(hosts=("a", "b", "c"), per_host=2)
    assert messages(validate(LaunchPlan(ppn=2, tp=2, pp=2), alloc)) == [
        "World size 6 is not divisible by tp*pp*cp = 4."
    ]
    assert [p.field for p in validate(LaunchPlan(ppn=2, cp=4), alloc)] == ["sizes"]


def test_tp_across_nodes_is_only_a_warning() -> None:
    alloc = make_alloc(hosts=("a", "b"))
    problems = validate(LaunchPlan(ppn=4, tp=8), alloc)
    assert messages(problems) == []
    assert messages(problems, "warning") == [
        "TP=8 is larger than 4 ranks per node, so tensor-parallel groups span nodes and their "
        "all-reduces cross the network."
    ]
    odd = validate(LaunchPlan(ppn=3, tp=2, pp=3), make_alloc(hosts=("a", "b"), per_host=3))
    assert messages(odd, "warning")[0].startswith("TP=2 does not divide 3 ranks per node")
    # on one host a TP group cannot span nodes
    assert validate(LaunchPlan(ppn=4, tp=4), make_alloc(hosts=("a",))) == []


def test_check_is_the_one_gate_to_a_launch() -> None:
    alloc = make_alloc(hosts=("a", "b"))
    checked = check(LaunchPlan(ppn=4, tp=8), alloc)
    assert [p.level for p in checked.warnings] == ["warning"]
    assert checked.sizes == {"tp": 8, "pp": 1, "cp": 1, "world_size": 8}
    assert checked.meta == {
        "scheduler": "PBS",
        "job_id": "1.pbs",
        "machine": "Polaris",
        "hosts": ["a", "b"],
        "ranks_per_node": 4,
        "warnings": [checked.warnings[0].message],
    }
    bad = LaunchPlan(nodes=1, ppn=4, tp=3, command=())
    with pytest.raises(LaunchRefused) as refused:
        check(bad, alloc)
    assert refused.value.found == validate(bad, alloc)  # every problem, in form order
    assert [p.field for p in refused.value.problems] == ["sizes", "command"]
    assert str(refused.value) == " ".join(p.message for p in refused.value.problems)


def test_cpu_hosts_may_oversubscribe_with_a_warning() -> None:
    alloc = make_alloc(hosts=("laptop",), per_host=2, kind="cpu", scheduler="none", cpus=2)
    assert validate(LaunchPlan(ppn=2), alloc) == []
    problems = validate(LaunchPlan(ppn=4), alloc)
    assert messages(problems) == []
    assert messages(problems, "warning") == [
        "4 ranks per node but the hosts have 2 CPUs, so ranks will share cores."
    ]
    assert messages(validate(LaunchPlan(launcher="srun"), alloc)) == [
        "srun needs a Slurm allocation, but there is no scheduler job here."
    ]


def test_small_mistakes() -> None:
    alloc = make_alloc(per_host=1)
    assert messages(
        validate(LaunchPlan(nodes=0, ppn=0, launcher="aprun", command=("",)), alloc)
    ) == [
        "Nodes must be at least 1, not 0.",
        "Ranks per node must be at least 1, not 0.",
        "Launcher 'aprun' is not one of auto, mpiexec, srun, mpirun, torchrun.",
        "The command's first item (the program to run) is empty.",
    ]
    assert messages(validate(LaunchPlan(ppn=2), alloc)) == [
        "2 ranks per node but the hosts have 1 accelerator."
    ]


def test_plan_normalises_and_refuses_shell_strings() -> None:
    plan = LaunchPlan(exclude=["h"], command=["python", "x.py"], env={"A": 1})
    assert plan.exclude == ("h",)
    assert plan.command == ("python", "x.py")
    assert plan.env == (("A", "1"),)
    assert hash(plan) == hash(
        LaunchPlan(exclude=("h",), command=("python", "x.py"), env=[("A", "1")])
    )
    with pytest.raises(TypeError, match="shell string"):
        LaunchPlan(command="python train.py")  # type: ignore[arg-type]
    changed = plan.with_changes(tp=2, env={"B": "2"})
    assert (changed.tp, changed.env, plan.tp) == (2, (("B", "2"),), 1)


def test_an_empty_launcher_flag_is_an_error() -> None:
    plan = LaunchPlan(launcher_args=("--label", " "), command=("python", "x.py"))
    problems = validate(plan, make_alloc())
    assert [(p.level, p.field) for p in problems] == [("error", "launcher_args")]
    with pytest.raises(TypeError, match="shell string"):
        LaunchPlan(launcher_args="--cpu-bind=none")  # type: ignore[arg-type]


def test_toml_round_trip() -> None:
    plan = LaunchPlan(
        nodes=2,
        exclude=("x1001",),
        ppn=4,
        tp=2,
        pp=2,
        cp=1,
        launcher="mpiexec",
        command=("python", "-m", "train", "--steps", "10"),
        env={"NCCL_DEBUG": "INFO"},
        launcher_args=("--cpu-bind", "none", "--no-vni"),
    )
    text = tomli_w.dumps({"plan": plan.to_dict()})
    assert 'launcher_args = [\n    "--cpu-bind",' in text  # kept in run.toml as a list
    assert LaunchPlan.from_dict(tomllib.loads(text)["plan"]) == plan
    minimal = LaunchPlan()
    assert "nodes" not in minimal.to_dict() and "ppn" not in minimal.to_dict()
    assert "launcher_args" not in minimal.to_dict()
    assert LaunchPlan.from_dict(tomllib.loads(tomli_w.dumps(minimal.to_dict()))) == minimal


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"tp": "two"}, "'tp' must be a whole number, not 'two'."),
        ({"ppn": True}, "'ppn' must be a whole number, not True."),
        ({"command": "python train.py"}, "'command' must be a list of strings"),
        ({"command": ["python", 3]}, "Every item of 'command' must be a string."),
        ({"env": ["A=1"]}, "'env' must be a table of NAME = value pairs."),
        ({"env": {"A": [1]}}, "env value of A must be a string or a number, not [1]."),
        ({"launcher": 3}, "'launcher' must be one of auto, mpiexec, srun, mpirun, torchrun."),
        ({"launcher_args": "--cpu-bind=none"}, "'launcher_args' must be a list of strings"),
        ({"launcher_args": ["--depth", 8]}, "Every item of 'launcher_args' must be a string."),
        ({"tpp": 2}, "Unknown launch plan key(s): tpp."),
    ],
)
def test_from_dict_says_what_is_wrong(data: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        LaunchPlan.from_dict(data)
    assert str(info.value).startswith(message)


def test_from_dict_accepts_numbers_as_text() -> None:
    assert LaunchPlan.from_dict({"tp": "2", "env": {"OMP_NUM_THREADS": 4}}) == LaunchPlan(
        tp=2, env={"OMP_NUM_THREADS": "4"}
    )


def test_rank_layout_tp_innermost() -> None:
    alloc = make_alloc(hosts=("a", "b"), per_host=4)
    layout = rank_layout(LaunchPlan(ppn=4, tp=2, pp=2), alloc)
    assert len(layout) == 8
    assert layout[0] == RankPlace("a", 0, 0, 0, 0, 0)
    assert layout[1] == RankPlace("a", 1, 1, 0, 0, 0)
    assert layout[2] == RankPlace("a", 2, 0, 0, 0, 1)
    assert layout[3] == RankPlace("a", 3, 1, 0, 0, 1)
    assert layout[4] == RankPlace("b", 0, 0, 1, 0, 0)
    assert layout[7] == RankPlace("b", 3, 1, 1, 0, 1)
    with_cp = rank_layout(LaunchPlan(ppn=4, tp=2, cp=2), alloc)
    assert [(r.tp_rank, r.cp_rank, r.dp_rank) for r in with_cp[:5]] == [
        (0, 0, 0),
        (1, 0, 0),
        (0, 1, 0),
        (1, 1, 0),
        (0, 0, 1),
    ]


def test_rank_layout_matches_a_device_mesh_order() -> None:
    """Same coordinates as numpy's C-order unravel over (pp, dp, cp, tp), like init_device_mesh."""
    alloc = make_alloc(hosts=tuple(f"h{i}" for i in range(4)), per_host=6)
    plan = LaunchPlan(ppn=6, tp=3, pp=2, cp=2)
    dp = plan.layout(alloc).dp
    places = rank_layout(plan, alloc)
    assert len(places) == 24
    for rank, place in enumerate(places):
        pp, rest = divmod(rank, dp * 2 * 3)
        d, rest = divmod(rest, 2 * 3)
        c, t = divmod(rest, 3)
        assert (place.pp_rank, place.dp_rank, place.cp_rank, place.tp_rank) == (pp, d, c, t)
        assert (place.host, place.local_rank) == (f"h{rank // 6}", rank % 6)


def test_rank_layout_empty_when_it_cannot_be_laid_out() -> None:
    alloc = make_alloc(hosts=("a", "b", "c"), per_host=2)
    assert rank_layout(LaunchPlan(ppn=2, tp=4), alloc) == []
    assert rank_layout(LaunchPlan(ppn=0), alloc) == []
    assert rank_layout(LaunchPlan(exclude=("a", "b", "c")), alloc) == []


def test_rank_layout_of_a_big_job() -> None:
    """64 Aurora-like hosts x 12 tiles: every mesh coordinate is used exactly once. (Its speed
    is not a test's business: timing assertions fail on a loaded CI box.)"""
    alloc = make_alloc(hosts=tuple(f"x{i:04d}" for i in range(64)), per_host=12, kind="xpu")
    plan = LaunchPlan(ppn=12, tp=4, pp=2, cp=3)
    layout = rank_layout(plan, alloc)
    assert len(layout) == 768 and layout[-1].host == "x0063"
    coords = {(r.pp_rank, r.dp_rank, r.cp_rank, r.tp_rank) for r in layout}
    assert len(coords) == 768
    assert {r.dp_rank for r in layout} == set(range(768 // 24))
    assert all(layout[i].host == layout[i - i % 4].host for i in range(768)), "TP within a host"
