"""The orjson reader of ``runtime.records`` against its json fallback: the same records, always.

``parse_chunk`` and ``decode`` parse with orjson when it is installed and re-read a line with json
where orjson refuses it or may read it differently; without orjson everything goes through json.
Both must give what json gives line by line, which is what the reader gave before orjson.
"""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import records
from tests.fixtures.jsonl import CORPUS, chunk, key, lines_strategy, record_like

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's reader as it is where orjson cannot be imported."""
    monkeypatch.setattr(records, "_fast_loads", None)
    yield


def _reference(line: bytes | str, default_rank: int = 0) -> object:
    """What a line reads as with json alone: the old reader, line by line."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        obj = None
    return key(records.from_object(obj, default_rank))


def _summary(result: records.ParseResult) -> object:
    return [key(r) for r in result.records], result.garbage, result.consumed


def test_corpus_lines_have_no_newline() -> None:
    assert all(b"\n" not in line for line in CORPUS)


@pytest.mark.parametrize("line", CORPUS, ids=range(len(CORPUS)))
def test_decode_matches_json_alone(line: bytes) -> None:
    assert records.orjson_loads() is not None
    assert key(records.decode(line)) == _reference(line)
    text = line.decode("utf-8", "replace")  # decode takes str too
    assert key(records.decode(text)) == _reference(text)


@pytest.mark.parametrize("line", CORPUS, ids=range(len(CORPUS)))
def test_decode_without_orjson_is_the_reference(line: bytes, json_only: None) -> None:
    assert key(records.decode(line)) == _reference(line)


def test_whole_corpus_fast_and_fallback_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    torn = b'{"rank":0,"step":99,"metrics":{"a":'
    data = chunk([*CORPUS[:20], b"", b"   ", b"\r", *CORPUS[20:]]) + torn
    fast = records.parse_chunk(data, default_rank=5)
    monkeypatch.setattr(records, "_fast_loads", None)
    slow = records.parse_chunk(data, default_rank=5)
    assert _summary(fast) == _summary(slow)
    assert fast.consumed == len(data) - len(torn)
    expected = [_reference(line, 5) for line in CORPUS]
    assert [key(r) for r in fast.records] == [k for k in expected if k is not None]
    assert fast.garbage == expected.count(None) > 10


def test_chunk_of_good_records_uses_the_same_path_either_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Only well-formed objects: the json fallback parses them as one array, orjson per line."""
    lines = [
        records.encode(r, s, {"loss": 1.0 / (s + 1), "tok": s * 1000, "nan": "NaN"}, 1.0 + s)
        for r in range(3)
        for s in range(400)
    ]
    data = b"".join(lines)
    fast = records.parse_chunk(data)
    monkeypatch.setattr(records, "_fast_loads", None)
    slow = records.parse_chunk(data)
    assert _summary(fast) == _summary(slow)
    assert len(fast.records) == 1200 and fast.garbage == 0
    assert all(type(v) is float for r in fast.records for v in r.metrics.values())


def test_huge_ints_read_like_json() -> None:
    rec = records.decode(b'{"rank":0,"step":18446744073709551616,"metrics":{"loss":1}}')
    assert rec is not None and rec.step == 2**64 and type(rec.step) is int
    rec = records.decode(b'{"rank":0,"step":1,"metrics":{"a":' + b"9" * 400 + b"}}")
    assert rec is not None and rec.metrics == {"a": math.inf}  # past the float range: inf
    assert records.as_number(-(10**400)) == -math.inf


def test_decode_str_with_a_lone_surrogate_falls_back_to_json() -> None:
    rec = records.decode('{"rank":1,"step":2,"metrics":{"a":1},"s":"\ud800"}')
    assert rec is not None and (rec.rank, rec.step, rec.metrics) == (1, 2, {"a": 1.0})


def test_bare_nan_from_another_tool_is_read() -> None:
    result = records.parse_chunk(b'{"rank":0,"step":1,"metrics":{"loss":NaN,"x":Infinity}}\n')
    assert result.garbage == 0
    assert math.isnan(result.records[0].metrics["loss"])
    assert result.records[0].metrics["x"] == math.inf


def test_metrics_nested_past_the_recursion_limit_are_garbage_not_an_error() -> None:
    nested: dict[str, object] = {"a": 1}
    for _ in range(sys.getrecursionlimit() + 100):
        nested = {"n": nested}
    assert records.from_object({"rank": 0, "step": 1, "metrics": nested}) is None
    assert (
        records.from_object({"rank": 0, "step": 1, "metrics": {"a": 1}, "aggregated": nested})
        is None
    )


def test_from_object_leaves_its_argument_alone() -> None:
    obj = {"rank": 1, "step": 2, "metrics": {"a": 1, "b": 2.0}, "aggregated": {"m": 3}}
    before = json.dumps(obj)
    rec = records.from_object(obj)
    assert rec is not None and rec.metrics == {"a": 1.0, "b": 2.0, "aggregated/m": 3.0}
    assert type(rec.metrics["a"]) is float
    assert json.dumps(obj) == before and rec.metrics is not obj["metrics"]


def test_record_keeps_its_constructor_and_attributes() -> None:
    rec = records.Record(1, None, 2.0, {"loss": 1.0})
    assert (rec.rank, rec.step, rec.timestamp, rec.metrics) == (1, None, 2.0, {"loss": 1.0})
    rec.step = 4
    assert rec == records.Record(rank=1, step=4, timestamp=2.0, metrics={"loss": 1.0})
    assert records.number_steps([records.Record(0, None, None, {"a": 1.0})])[0].step == 0


@pytest.mark.parametrize("enabled", [True, False])
def test_parse_chunk_leaves_the_collector_as_it_found_it(enabled: bool) -> None:
    data = records.encode(0, 1, {"loss": 1.0}, 1.0) * 5000
    was = gc.isenabled()
    try:
        if enabled:
            gc.enable()
        else:
            gc.disable()
        assert len(records.parse_chunk(data).records) == 5000
        assert gc.isenabled() is enabled
        assert records.parse_chunk(b"garbage\n" * 5000).garbage == 5000
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()


@settings(max_examples=300, deadline=None)
@given(st.lists(lines_strategy, max_size=10), st.binary(max_size=10))
def test_fast_and_fallback_agree_on_random_lines(lines: list[bytes], tail: bytes) -> None:
    data = chunk(lines) + tail.replace(b"\n", b"")
    fast = records.parse_chunk(data, default_rank=3)
    saved = records._fast_loads
    records._fast_loads = None
    try:
        slow = records.parse_chunk(data, default_rank=3)
        by_line = [records.decode(line, 3) for line in lines if line.strip()]
    finally:
        records._fast_loads = saved
    assert _summary(fast) == _summary(slow)
    assert [key(r) for r in fast.records] == [key(r) for r in by_line if r is not None]
    assert fast.garbage == sum(r is None for r in by_line)


@settings(max_examples=300, deadline=None)
@given(record_like())
def test_decode_fast_matches_json_on_random_records(line: bytes) -> None:
    assert key(records.decode(line)) == _reference(line)


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_works_when_orjson_cannot_be_imported() -> None:
    out = _run(
        "import sys\n"
        "sys.modules['orjson'] = None  # 'import orjson' now raises ImportError\n"
        "from runtime import records\n"
        "data = records.encode(0, 1, {'loss': 'NaN', 'a': 2}, 1.0) * 3000 + b'junk\\n{'\n"
        "r = records.parse_chunk(data)\n"
        "assert (len(r.records), r.garbage) == (3000, 1), (len(r.records), r.garbage)\n"
        "assert r.consumed == len(data) - 1\n"
        'rec = records.decode(b\'{"rank":2,"metrics":{"loss":NaN,"iter":4}}\')\n'
        "assert (rec.rank, rec.step) == (2, 4)\n"
        "assert records._fast_loads is None\n"
        "print('ok')\n"
    )
    assert out.strip() == "ok"


def test_importing_runtime_loads_no_orjson_numpy_or_torch() -> None:
    out = _run(
        "import sys\n"
        "import runtime, runtime.records, runtime.history\n"
        "from runtime.history import History\n"
        "print(sorted(m for m in ('orjson', 'numpy', 'torch') if m in sys.modules))\n"
        'runtime.records.parse_chunk(b\'{"metrics":{"a":1}}\\n\')\n'
        "print('orjson' in sys.modules)\n"
    )
    assert out.split("\n")[:2] == ["[]", "True"]
