"""The expected finish of a run against its walltime: the words the header and top show."""

from __future__ import annotations

import pytest

from ezpz_tui.core.watching.finish import expected_finish, total_steps


@pytest.mark.parametrize(
    ("command", "total"),
    [
        (["python", "train.py", "--steps", "500"], 500),
        (["python", "train.py", "--steps=20"], 20),
        (["python", "-m", "runtime.examples.train"], 1000),
        (["python", "train.py"], None),
        (["python", "train.py", "--steps", "many"], None),
    ],
)
def test_total_steps_from_the_command(command: list[str], total: int | None) -> None:
    assert total_steps(command) == total


def test_fits_or_names_the_step_the_walltime_ends_at() -> None:
    fits = expected_finish(99, 1000, 0.5, 3600.0)
    assert fits is not None and fits.needs_s == 450.0 and fits.reached is None
    assert fits.words() == "finish in 0:07:30"
    late = expected_finish(99, 1000, 0.5, 100.0)
    assert late is not None and late.reached == 300
    assert late.words() == "⚠ walltime ends first, at ~step 300 of 1000"
    assert expected_finish(99, 1000, 0.5, None).words() == "finish in 0:07:30"  # type: ignore[union-attr]
    assert expected_finish(None, 1000, 0.5, 100.0) is None
    assert expected_finish(99, None, 0.5, 100.0) is None
    assert expected_finish(1000, 1000, 0.5, 100.0) is None  # past its total
