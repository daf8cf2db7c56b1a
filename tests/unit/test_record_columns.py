"""``runtime.record_columns`` against the record reader: the same records as columns, in any
chunks and blocks, whichever path (the block fast path or record by record) a block takes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from runtime import record_columns, records
from runtime.record_columns import (
    RecordColumns,
    columns_by_rank,
    is_missing,
    merge_columns,
    parse_columns,
)
from tests.fixtures.jsonl import chunk, deep_dict, deep_list, key, lines_strategy


def _column_key(columns: RecordColumns) -> object:
    """A comparable form of columns, as ``_key`` is of a record; MISSING stays apart from NaN."""

    def num(x: object) -> object:
        if type(x) is float and is_missing(x):
            return "MISSING"
        return repr(x) if type(x) is float else (type(x).__name__, x)

    return (
        num(columns.rank),
        [num(s) for s in columns.steps],
        [num(t) for t in columns.timestamps],
        [(name, [num(v) for v in values]) for name, values in columns.metrics.items()],
    )


def _sorted_key(rec: records.Record) -> object:
    rank, step, stamp, metrics = key(rec)  # type: ignore[misc]
    return rank, step, stamp, sorted(metrics)


def _columns_summary(columns: dict[int, RecordColumns]) -> object:
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


def _fed(data: bytes, cuts: list[int]) -> tuple[dict[int, RecordColumns], int, bytes]:
    """``data`` through parse_columns in pieces cut at ``cuts``, a torn line carried over as a
    follower carries it: the columns by rank, the garbage and what is left unconsumed."""
    out: dict[int, RecordColumns] = {}
    garbage = 0
    pending = b""
    for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True):
        piece = pending + data[a:b]
        result = parse_columns(piece, default_rank=3)
        merge_columns(out, result.columns)
        garbage += result.garbage
        pending = piece[result.consumed :]
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
    data = chunk(lines) + tail.replace(b"\n", b"")
    cuts = sorted(min(c, len(data)) for c in cuts)
    expected = records.parse_chunk(data, default_rank=3)
    saved = record_columns._BLOCK
    record_columns._BLOCK = block
    try:
        whole = parse_columns(data, default_rank=3)
        pieces, garbage, pending = _fed(data, cuts)
    finally:
        record_columns._BLOCK = saved
    reference = _columns_summary(columns_by_rank(expected.records))
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
    monkeypatch.setattr(record_columns, "parse_lines", None)  # no record-by-record read
    result = parse_columns(data)
    assert (result.garbage, result.consumed, list(result.columns)) == (0, len(data), [1])
    columns = result.columns[1]
    assert columns.steps == list(range(5000)) and columns.timestamps[-1] == 5000.0
    assert list(columns.metrics) == ["loss", "tok", "nan", "ok"]
    assert columns.metrics["tok"][-1] == 4999.0 and columns.metrics["ok"][0] == 1.0
    assert math.isnan(columns.metrics["nan"][0]) and not is_missing(columns.metrics["nan"][0])


def test_an_odd_line_sends_only_its_block_record_by_record(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    good = [records.encode(0, s, {"loss": 1.0}, 1.0) for s in range(20000)]
    data = b"".join(good[:10000]) + b"garbage\n" + b"".join(good[10000:])
    calls: list[int] = []
    slow = record_columns.parse_lines
    monkeypatch.setattr(
        record_columns, "parse_lines", lambda *a: calls.append(len(a[0])) or slow(*a)
    )
    result = parse_columns(data)
    assert result.garbage == 1 and result.columns[0].steps == list(range(20000))
    assert len(calls) == 1 and calls[0] < 20000 // 4


def test_columns_slice_extend_and_records() -> None:
    recs = [
        records.Record(2, 0, 1.0, {"a": 1.0}),
        records.Record(2, None, None, {"b": math.nan}),
        records.Record(2, 5, 3.0, {"a": 3.0, "b": 4.0}),
    ]
    columns = RecordColumns.from_records(recs)
    assert len(columns) == 3 and columns.rank == 2
    assert is_missing(columns.metrics["a"][1]) and is_missing(columns.metrics["b"][0])
    assert not is_missing(columns.metrics["b"][1]) and not is_missing(math.nan)
    assert [key(r) for r in columns] == [key(r) for r in recs]
    assert [key(r) for r in columns[1:]] == [key(r) for r in recs[1:]]
    assert key(columns[-1]) == key(recs[-1])
    with pytest.raises(IndexError):
        columns[3]
    joined = columns[:1]
    joined.extend(RecordColumns.from_records(recs[1:]))
    assert _column_key(joined) == _column_key(columns)
    empty = RecordColumns(2)
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
            + deep_dict(990)
            + b',"metrics":{"a":1}}'
        ],
        [
            b'{"timestamp":1.0,"rank":0,"step":1,"metrics":'
            + deep_dict(300)
            + b',"metrics":{"a":1}}'
        ],
        [
            _fast(1),
            b'{"timestamp":1.0,"rank":0,"step":1,"x":' + deep_list(1010) + b',"metrics":{}}',
        ],
        # orjson may read these otherwise than json: huge steps, ranks, timestamps
        [_fast(1), b'{"timestamp":1,"rank":0,"step":18446744073709551616,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":1,"rank":0,"step":18446744073709551615,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":18446744073709551616,"rank":0,"step":2,"metrics":{"a":1}}'],
        [_fast(1), b'{"timestamp":1,"rank":true,"step":2,"metrics":{"a":true,"b":"nan"}}'],
    ],
)
def test_columns_of_lines_built_to_fool_the_block_parse(lines: list[bytes]) -> None:
    data = chunk(lines)
    expected = records.parse_chunk(data, default_rank=3)
    for block in (1, 1 << 17):
        saved = record_columns._BLOCK
        record_columns._BLOCK = block
        try:
            result = parse_columns(data, default_rank=3)
        finally:
            record_columns._BLOCK = saved
        reference = _columns_summary(columns_by_rank(expected.records))
        assert _columns_summary(result.columns) == reference
        assert (result.garbage, result.consumed) == (expected.garbage, expected.consumed)
