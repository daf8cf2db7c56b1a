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

pytest.importorskip("orjson")

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def json_only(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's reader as it is where orjson cannot be imported."""
    monkeypatch.setattr(records, "_fast_loads", None)
    yield


def _key(rec: records.Record | None) -> object:
    """A comparable form: NaN equal to NaN, -0.0 not equal to 0.0, key order significant."""
    if rec is None:
        return None

    def num(x: object) -> object:
        return repr(x) if type(x) is float else (type(x).__name__, x)

    return (
        num(rec.rank),
        num(rec.step),
        num(rec.timestamp),
        [(k, num(v)) for k, v in rec.metrics.items()],
    )


def _reference(line: bytes | str, default_rank: int = 0) -> object:
    """What a line reads as with json alone: the old reader, line by line."""
    try:
        obj = json.loads(line)
    except (ValueError, RecursionError):
        obj = None
    return _key(records.from_object(obj, default_rank))


def _deep_list(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


def _deep_dict(depth: int) -> bytes:
    return b'{"a":' * depth + b"1" + b"}" * depth


CORPUS: list[bytes] = [
    # ours, including the non-finite strings the writer uses
    records.encode(2, 7, {"loss": 1.5, "nan": "NaN", "inf": "Infinity", "n": "-Infinity"}, 3.0)[
        :-1
    ],
    records.encode(0, 0, {"tokens": 12345, "flag": True, "neg0": -0.0}, 1)[:-1],
    b'{"timestamp":1.0,"rank":1,"step":3,"metrics":{"loss":0.5,"lr":1e-3,"tok":100}}',
    # another tool's bare non-finite literals (json accepts them, orjson does not)
    b'{"rank":0,"step":1,"metrics":{"loss":NaN,"a":Infinity,"b":-Infinity}}',
    b'{"rank":0,"step":NaN,"metrics":{"loss":1}}',
    b'{"rank":0,"step":2,"metrics":{"big":1e400,"small":-1e400,"tiny":1e-400}}',
    # huge ints: in metrics, rank, step, timestamp; past 64 bits and past the float range
    b'{"rank":0,"step":1,"metrics":{"a":18446744073709551616,"b":-9223372036854775809}}',
    b'{"rank":0,"step":1,"metrics":{"a":' + b"9" * 400 + b',"b":-' + b"9" * 400 + b"}}",
    b'{"rank":18446744073709551616,"step":1,"metrics":{"loss":1}}',
    b'{"rank":0,"step":18446744073709551616,"metrics":{"loss":1}}',
    b'{"rank":0,"step":-9223372036854775809,"metrics":{"loss":1}}',
    b'{"rank":0,"step":18446744073709551615,"metrics":{"loss":1}}',
    b'{"rank":0,"step":1e19,"metrics":{"loss":1}}',
    b'{"rank":0,"metrics":{"loss":1,"iter":18446744073709551616}}',
    b'{"rank":0,"step":1,"timestamp":' + b"9" * 400 + b',"metrics":{"loss":1}}',
    b'{"rank":0,"step":1,"timestamp":18446744073709551616,"metrics":{"loss":1}}',
    # nesting, strings and odd values inside metrics
    b'{"rank":0,"step":1,"metrics":{"a":{"b":1,"c":{"d":"NaN"}},"e":2}}',
    b'{"rank":0,"step":1,"metrics":{"a/b":1,"a":{"b":2},"s":"1.5","t":"nan","n":null,"l":[1]}}',
    b'{"rank":0,"step":1,"metrics":{"x":1,"x":2.5}}',
    b'{"rank":0,"step":1,"metrics":{"only":"text"}}',
    b'{"rank":0,"step":1,"metrics":{}}',
    # ezpz: no step, step keys, aggregated, flat records
    b'{"timestamp":1.0,"rank":3,"metrics":{"loss":2.0,"iter":4},"aggregated":{"loss/mean":2.0}}',
    b'{"rank":1,"metrics":{"iteration":5.0,"loss":1}}',
    b'{"rank":1,"metrics":{"global_step":6,"loss":1,"iter":"NaN"}}',
    b'{"rank":1,"metrics":{"loss":1}}',
    b'{"rank":1,"metrics":{"loss":1},"aggregated":{"a":{"b":1}},"step":2}',
    b'{"timestamp":2.0,"rank":1,"loss":0.25,"step":9,"aggregated":{"x":1}}',
    b'{"timestamp":2.0,"rank":true,"step":false,"metrics":{"loss":1}}',
    b'{"rank":-1,"step":-5,"metrics":{"loss":-0.0}}',
    b'{"metrics": 1}',
    # garbage
    b"not json",
    b"[1,2]",
    b'{"no": "metrics"}',
    b"{}",
    b"{",
    b"}",
    b'{"a":"}',
    b"123",
    b'"NaN"',
    b"null",
    b'{"metrics":{"a":1}} trailing',
    b'{"metrics":{"a":1}}{"metrics":{"b":1}}',
    # bytes orjson refuses and json may still read
    b'{"rank":0,"step":1,"metrics":{"a":1},"s":"\xff"}',
    b"\xef\xbb\xbf" + b'{"rank":0,"step":1,"metrics":{"a":1}}',
    b'{"rank":0,"step":1,"metrics":{"a":1},"s":"\\ud800"}',
    b'{"rank":0,"step":1,"metrics":{"\\udc00":1}}',
    b'{"rank":0,"step":1,"metrics":{"a":1},"s":"\xed\xa0\x80"}',
    '{"rank":0,"step":1,"metrics":{"a":1}}'.encode("utf-16-le"),
    b'{"rank":0,"step":1,"metrics":{"a":1},"s":"tab\there"}',
    b'{"rank":0,"step":1,"metrics":{"a":1}}\r',
    b"\t" + b'{"rank":0,"step":1,"metrics":{"a":1}} ',
    # deep nesting: orjson takes 1024 levels, json fewer
    b'{"rank":0,"step":1,"metrics":{"a":1},"x":' + _deep_list(300) + b"}",
    b'{"rank":0,"step":1,"metrics":{"a":1},"x":' + _deep_list(1010) + b"}",
    b'{"rank":0,"step":1,"metrics":{"a":1},"x":' + _deep_list(2000) + b"}",
    b'{"rank":0,"step":1,"metrics":' + _deep_dict(300) + b"}",
    b'{"rank":0,"step":1,"metrics":' + _deep_dict(900) + b"}",
]


def _chunk(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


def _summary(result: records.ParseResult) -> object:
    return [_key(r) for r in result.records], result.garbage, result.consumed


def test_corpus_lines_have_no_newline() -> None:
    assert all(b"\n" not in line for line in CORPUS)


@pytest.mark.parametrize("line", CORPUS, ids=range(len(CORPUS)))
def test_decode_matches_json_alone(line: bytes) -> None:
    assert records._resolve_fast_loads() is not None
    assert _key(records.decode(line)) == _reference(line)
    text = line.decode("utf-8", "replace")  # decode takes str too
    assert _key(records.decode(text)) == _reference(text)


@pytest.mark.parametrize("line", CORPUS, ids=range(len(CORPUS)))
def test_decode_without_orjson_is_the_reference(line: bytes, json_only: None) -> None:
    assert _key(records.decode(line)) == _reference(line)


def test_whole_corpus_fast_and_fallback_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    torn = b'{"rank":0,"step":99,"metrics":{"a":'
    data = _chunk([*CORPUS[:20], b"", b"   ", b"\r", *CORPUS[20:]]) + torn
    fast = records.parse_chunk(data, default_rank=5)
    monkeypatch.setattr(records, "_fast_loads", None)
    slow = records.parse_chunk(data, default_rank=5)
    assert _summary(fast) == _summary(slow)
    assert fast.consumed == len(data) - len(torn)
    expected = [_reference(line, 5) for line in CORPUS]
    assert [_key(r) for r in fast.records] == [k for k in expected if k is not None]
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


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=2**62, max_value=2**70)
    | st.floats()
    | st.sampled_from(["NaN", "Infinity", "-Infinity", "nan", "1"])
    | st.text(max_size=5),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=4)
    ),
    max_leaves=12,
)
bookkeeping = st.one_of(
    st.none(), st.integers(), st.integers(min_value=2**62, max_value=2**70) | st.floats()
)


@st.composite
def record_like(draw: st.DrawFn) -> bytes:
    obj: dict[str, object] = {}
    for key in ("timestamp", "rank", "step", "metrics", "aggregated"):
        if draw(st.booleans()):
            obj[key] = draw(
                bookkeeping if key != "metrics" and key != "aggregated" else json_values
            )
    if draw(st.booleans()):
        obj.update(draw(st.dictionaries(st.sampled_from(records._STEP_KEYS), json_values)))
    # json.dumps writes bare NaN/Infinity for non-finite floats, as some tools do
    return json.dumps(obj, separators=(",", ":")).encode()


lines_strategy = st.one_of(
    record_like(),
    st.sampled_from(CORPUS),
    st.binary(max_size=30).filter(lambda b: b"\n" not in b),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(lines_strategy, max_size=10), st.binary(max_size=10))
def test_fast_and_fallback_agree_on_random_lines(lines: list[bytes], tail: bytes) -> None:
    data = _chunk(lines) + tail.replace(b"\n", b"")
    fast = records.parse_chunk(data, default_rank=3)
    saved = records._fast_loads
    records._fast_loads = None
    try:
        slow = records.parse_chunk(data, default_rank=3)
        by_line = [records.decode(line, 3) for line in lines if line.strip()]
    finally:
        records._fast_loads = saved
    assert _summary(fast) == _summary(slow)
    assert [_key(r) for r in fast.records] == [_key(r) for r in by_line if r is not None]
    assert fast.garbage == sum(r is None for r in by_line)


@settings(max_examples=300, deadline=None)
@given(record_like())
def test_decode_fast_matches_json_on_random_records(line: bytes) -> None:
    assert _key(records.decode(line)) == _reference(line)


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


# --- columns ------------------------------------------------------------------------------------


def _column_key(columns: records.RecordColumns) -> object:
    """A comparable form of columns, as ``_key`` is of a record; MISSING stays apart from NaN."""

    def num(x: object) -> object:
        if type(x) is float and records.is_missing(x):
            return "MISSING"
        return repr(x) if type(x) is float else (type(x).__name__, x)

    return (
        num(columns.rank),
        [num(s) for s in columns.steps],
        [num(t) for t in columns.timestamps],
        [(name, [num(v) for v in values]) for name, values in columns.metrics.items()],
    )


def _sorted_key(rec: records.Record) -> object:
    rank, step, stamp, metrics = _key(rec)  # type: ignore[misc]
    return rank, step, stamp, sorted(metrics)


def _columns_summary(columns: dict[int, records.RecordColumns]) -> object:
    return [(rank, _column_key(c)) for rank, c in columns.items()]


def _ours(rank: int, step: int, values: list[object], stamp: float | int) -> bytes:
    """A line of this writer's shape (the columns' fast path), with numbers of every kind."""
    metrics = {f"m{i}": v for i, v in enumerate(values)}
    obj = {"timestamp": stamp, "rank": rank, "step": step, "metrics": metrics}
    return json.dumps(obj, separators=(",", ":")).encode()


metric_value = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.booleans(),
    st.sampled_from(["NaN", "Infinity", "-Infinity"]),
)
ours = st.builds(
    _ours,
    st.sampled_from([0, 1]),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.lists(metric_value, min_size=1, max_size=3),
    st.floats(allow_nan=False, allow_infinity=False) | st.integers(min_value=0, max_value=2**64),
)
column_lines = st.one_of(ours, ours, ours, lines_strategy)


def _fed(data: bytes, cuts: list[int]) -> tuple[dict[int, records.RecordColumns], int, bytes]:
    """``data`` through parse_columns in pieces cut at ``cuts``, a torn line carried over as a
    follower carries it: the columns by rank, the garbage and what is left unconsumed."""
    out: dict[int, records.RecordColumns] = {}
    garbage = 0
    pending = b""
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        chunk = pending + data[a:b]
        result = records.parse_columns(chunk, default_rank=3)
        records.merge_columns(out, result.columns)
        garbage += result.garbage
        pending = chunk[result.consumed :]
    return out, garbage, pending


@settings(max_examples=400, deadline=None)
@given(
    st.lists(column_lines, max_size=40),
    st.binary(max_size=10),
    st.lists(st.integers(min_value=0, max_value=1 << 14), max_size=4),
    st.sampled_from([1, 40, 200, 1 << 17]),
)
def test_columns_equal_the_records_in_any_chunks(
    lines: list[bytes], tail: bytes, cuts: list[int], block: int
) -> None:
    """parse_columns, fed whole or in arbitrary pieces and with blocks of any size, gives
    parse_chunk's records as columns by rank, and the same garbage count."""
    data = _chunk(lines) + tail.replace(b"\n", b"")
    cuts = sorted(min(c, len(data)) for c in cuts)
    expected = records.parse_chunk(data, default_rank=3)
    saved = records._BLOCK
    records._BLOCK = block
    try:
        whole = records.parse_columns(data, default_rank=3)
        pieces, garbage, pending = _fed(data, cuts)
    finally:
        records._BLOCK = saved
    reference = _columns_summary(records.columns_by_rank(expected.records))
    assert _columns_summary(whole.columns) == reference
    assert (whole.garbage, whole.consumed) == (expected.garbage, expected.consumed)
    assert _columns_summary(pieces) == reference
    assert garbage == expected.garbage and pending == data[expected.consumed :]
    for rank, columns in whole.columns.items():  # records built back (metrics in column order)
        mine = [_sorted_key(r) for r in columns]
        assert mine == [_sorted_key(r) for r in expected.records if r.rank == rank]


def test_columns_of_this_writers_records_take_the_fast_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lines = [
        records.encode(1, s, {"loss": 1.0 / (s + 1), "tok": s, "nan": "NaN", "ok": True}, 1.0 + s)
        for s in range(5000)
    ]
    data = b"".join(lines)
    monkeypatch.setattr(records, "_parse_lines_fast", None)  # any record-by-record read fails
    result = records.parse_columns(data)
    assert (result.garbage, result.consumed, list(result.columns)) == (0, len(data), [1])
    columns = result.columns[1]
    assert columns.steps == list(range(5000)) and columns.timestamps[-1] == 5000.0
    assert list(columns.metrics) == ["loss", "tok", "nan", "ok"]
    assert columns.metrics["tok"][-1] == 4999.0 and columns.metrics["ok"][0] == 1.0
    assert math.isnan(columns.metrics["nan"][0]) and not records.is_missing(
        columns.metrics["nan"][0]
    )


def test_an_odd_line_sends_only_its_block_record_by_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = [records.encode(0, s, {"loss": 1.0}, 1.0) for s in range(20000)]
    data = b"".join(good[:10000]) + b"garbage\n" + b"".join(good[10000:])
    calls: list[int] = []
    slow = records._parse_lines_fast
    monkeypatch.setattr(
        records, "_parse_lines_fast", lambda *a: calls.append(len(a[1])) or slow(*a)
    )
    result = records.parse_columns(data)
    assert result.garbage == 1 and result.columns[0].steps == list(range(20000))
    assert len(calls) == 1 and calls[0] < 20000 // 4


def test_columns_slice_extend_and_records() -> None:
    recs = [
        records.Record(2, 0, 1.0, {"a": 1.0}),
        records.Record(2, None, None, {"b": math.nan}),
        records.Record(2, 5, 3.0, {"a": 3.0, "b": 4.0}),
    ]
    columns = records.RecordColumns.from_records(recs)
    assert len(columns) == 3 and columns.rank == 2
    assert records.is_missing(columns.metrics["a"][1]) and records.is_missing(
        columns.metrics["b"][0]
    )
    assert not records.is_missing(columns.metrics["b"][1]) and not records.is_missing(math.nan)
    assert [_key(r) for r in columns] == [_key(r) for r in recs]
    assert [_key(r) for r in columns[1:]] == [_key(r) for r in recs[1:]]
    assert _key(columns[-1]) == _key(recs[-1])
    with pytest.raises(IndexError):
        columns[3]
    joined = columns[:1]
    joined.extend(records.RecordColumns.from_records(recs[1:]))
    assert _column_key(joined) == _column_key(columns)
    empty = records.RecordColumns(2)
    empty.extend(columns)
    assert _column_key(empty) == _column_key(columns)


def _fast(step: int) -> bytes:
    return _ours(0, step, [1.0], 1.0)


@pytest.mark.parametrize(
    "lines",
    [
        # lines that only make records when joined: split objects, one line holding two records
        [
            b'{"timestamp":1.0,"rank":0',
            b'"step":1,"metrics":{"a":1.0}}',
            _fast(2) + b"," + _fast(3),
        ],
        [b'{"timestamp":1.0,"rank":0,"step":1,"metrics":{"a":1.0}', b',"x":1}', _fast(2)],
        [b'{"rank":0,"metrics":[{}', b'{}],"timestamp":1.0,"step":1,"metrics":{"a":1}}', _fast(2)],
        [b'{"timestamp":1.0,"rank":0,"step":1,"metrics":{"a":"x', b'"}}', _fast(2)],
        [_fast(1) + b" ", b"\t" + _fast(2) + b"\r", b" ", _fast(3)],
        # a nesting json cannot read, hidden behind a repeated key
        [
            b'{"timestamp":1.0,"rank":0,"step":1,"metrics":'
            + _deep_dict(990)
            + b',"metrics":{"a":1}}'
        ],
        [
            b'{"timestamp":1.0,"rank":0,"step":1,"metrics":'
            + _deep_dict(300)
            + b',"metrics":{"a":1}}'
        ],
        [
            _fast(1),
            b'{"timestamp":1.0,"rank":0,"step":1,"x":' + _deep_list(1010) + b',"metrics":{}}',
        ],
        # orjson may read these otherwise than json: huge steps, ranks, timestamps
        [_fast(1), b'{"timestamp":1,"rank":0,"step":18446744073709551616,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":1,"rank":0,"step":18446744073709551615,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":18446744073709551616,"rank":0,"step":2,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":1,"rank":true,"step":2,"metrics":{"a":true,"b":"nan"}}'],
    ],
)
def test_columns_of_lines_built_to_fool_the_block_parse(lines: list[bytes]) -> None:
    data = _chunk(lines)
    expected = records.parse_chunk(data, default_rank=3)
    for block in (1, 1 << 17):
        saved = records._BLOCK
        records._BLOCK = block
        try:
            result = records.parse_columns(data, default_rank=3)
        finally:
            records._BLOCK = saved
        reference = _columns_summary(records.columns_by_rank(expected.records))
        assert _columns_summary(result.columns) == reference
        assert (result.garbage, result.consumed) == (expected.garbage, expected.consumed)
