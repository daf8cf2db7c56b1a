"""The paired statistics ``bench/flight_bench.py`` judges the Flight Recorder's cost by
(``bench/_paired.py``): the sign test's exact p-value, an interval that holds the median and
narrows with more pairs, and the verdict on 1% that follows from where the interval lies."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path
from types import ModuleType

import pytest

PAIRED = Path(__file__).parents[2] / "bench" / "_paired.py"


@pytest.fixture(scope="module")
def paired() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_paired", PAIRED)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def test_the_sign_test_is_the_exact_binomial(paired: ModuleType) -> None:
    # 9 of 10 above 1: P(X <= 1) for Binomial(10, 1/2) is 11/1024, doubled.
    above, p_value = paired.sign_test([1.01] * 9 + [0.99])
    assert above == 9 and p_value == pytest.approx(22 / 1024)
    assert paired.sign_test([1.0, 1.0]) == (0, 1.0)  # ties say nothing


def test_the_interval_holds_the_median_and_narrows_with_more_pairs(paired: ModuleType) -> None:
    rng = random.Random(7)
    few = [1.003 + rng.gauss(0, 0.01) for _ in range(10)]
    many = [1.003 + rng.gauss(0, 0.01) for _ in range(200)]
    small, large = paired.estimate(few), paired.estimate(many)
    assert small.low <= small.median <= small.high
    assert large.half_width < small.half_width
    assert large.low < 1.003 < large.high


def test_the_verdict_says_where_the_interval_lies(paired: ModuleType) -> None:
    rng = random.Random(3)
    below = paired.estimate([1.002 + rng.gauss(0, 0.004) for _ in range(60)])
    above = paired.estimate([1.03 + rng.gauss(0, 0.004) for _ in range(60)])
    noisy = paired.estimate([1.0 + rng.gauss(0, 0.08) for _ in range(6)])
    assert paired.describe(below)[-1] == (
        "1% resolved; cost below 1%: the whole interval is under +1%"
    )
    assert paired.describe(above)[-1].endswith("above 1%: the whole interval is over +1%")
    assert paired.describe(noisy)[-1].startswith("1% NOT resolved")
    with pytest.raises(ValueError, match="at least 2 pairs"):
        paired.estimate([1.0])
