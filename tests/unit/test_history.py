"""The JSONL record: writer, readers of ours and ezpz's shape, xarray view, never raising."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from runtime import records
from runtime.history import History, load_run_metrics, summarize
from runtime.metric_files import metric_files
from runtime.rundir import RunDir


def _strict(line: str) -> dict:
    def reject(name: str) -> None:
        raise ValueError(f"non-standard JSON constant {name}")

    return json.loads(line, parse_constant=reject)


def test_record_shape_and_nonfinite_round_trip(tmp_path: Path) -> None:
    with History(tmp_path, rank=3) as h:
        h.record(
            0,
            {
                "loss": 2.5,
                "nan": math.nan,
                "inf": math.inf,
                "ninf": -math.inf,
                "count": 7,
                "flag": True,
            },
        )
    line = RunDir(tmp_path).metrics(3).read_text()
    assert line.endswith("\n") and line.count("\n") == 1
    obj = _strict(line)
    assert set(obj) == {"timestamp", "rank", "step", "metrics"}
    assert (obj["rank"], obj["step"]) == (3, 0)
    assert obj["metrics"]["nan"] == "NaN" and obj["metrics"]["ninf"] == "-Infinity"
    rec = records.decode(line)
    assert math.isnan(rec.metrics["nan"]) and rec.metrics["inf"] == math.inf
    assert rec.metrics["ninf"] == -math.inf and rec.metrics["count"] == 7.0


def test_tensor_and_numpy_values(tmp_path: Path) -> None:
    import numpy as np
    import torch

    with History(tmp_path, rank=0) as h:
        h.record(1, {"t": torch.tensor(1.5), "n": np.float32(0.25), "nan": torch.tensor(math.nan)})
        summary = h.summary()
    rec = records.decode(RunDir(tmp_path).metrics(0).read_bytes())
    assert rec.metrics == {"t": 1.5, "n": 0.25, "nan": rec.metrics["nan"]}
    assert summary["nan"]["nonfinite"] == 1.0 and summary["t"]["mean"] == 1.5


def test_summary_statistics(tmp_path: Path) -> None:
    with History(tmp_path, rank=0) as h:
        for step, value in enumerate([1.0, 2.0, 3.0, math.nan]):
            h.record(step, {"loss": value})
        s = h.summary()["loss"]
    assert (s["mean"], s["min"], s["max"], s["count"]) == (2.0, 1.0, 3.0, 3.0)
    assert s["std"] == pytest.approx(math.sqrt(2 / 3))
    assert math.isnan(s["last"])


def _metrics(tmp_path: Path, rank: int = 0) -> list[dict]:
    path = RunDir(tmp_path).metrics(rank)
    return [json.loads(line)["metrics"] for line in path.read_text().splitlines()]


def test_record_adds_throughput_from_the_given_dt(tmp_path: Path) -> None:
    with History(tmp_path, rank=0) as h:
        h.record(0, {"loss": 1.0}, tokens=4096, samples=8, dt=0.5)
        h.record(1, {"loss": 1.0, "dt": 0.25}, tokens=4096)  # the metric's dt when no argument
        h.record(2, {"loss": 1.0, "dt": 0.25}, samples=8, dt=2.0)  # the argument wins
        summary = h.summary()
    first, second, third = _metrics(tmp_path)
    assert first == {"loss": 1.0, "dt": 0.5, "tokens_per_s": 8192.0, "samples_per_s": 16.0}
    assert second == {"loss": 1.0, "dt": 0.25, "tokens_per_s": 16384.0}
    assert third == {"loss": 1.0, "dt": 0.25, "samples_per_s": 4.0}  # the recorded dt is kept
    assert summary["tokens_per_s"]["count"] == 2.0


def test_record_measures_dt_since_the_previous_record(tmp_path: Path, monkeypatch) -> None:
    clock = iter([100.0, 100.5, 101.5])
    monkeypatch.setattr("runtime.history.time.time", lambda: next(clock))
    with History(tmp_path, rank=0) as h:
        h.record(0, {"loss": 3.0}, tokens=100)  # nothing before it: no rate to measure
        h.record(1, {"loss": 2.0}, tokens=100, samples=2)
        h.record(2, {"loss": 1.0}, samples=2)
    assert _metrics(tmp_path) == [
        {"loss": 3.0},
        {"loss": 2.0, "dt": 0.5, "tokens_per_s": 200.0, "samples_per_s": 4.0},
        {"loss": 1.0, "dt": 1.0, "samples_per_s": 2.0},
    ]


def test_record_without_throughput_arguments_is_unchanged(tmp_path: Path) -> None:
    metrics = {"loss": 1.0}
    with History(tmp_path, rank=0) as h:
        h.record(0, metrics)
        h.record(1, metrics, dt=0.0)  # a zero dt is recorded but gives no infinite rate
        h.record(2, metrics, tokens=10, dt=math.nan)
    assert metrics == {"loss": 1.0}  # the caller's mapping is never changed
    assert _metrics(tmp_path) == [
        {"loss": 1.0},
        {"loss": 1.0, "dt": 0.0},
        {"loss": 1.0, "dt": "NaN"},
    ]


def test_default_run_dir_comes_from_the_launcher(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("EZPZ_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("PMI_RANK", "1")
    monkeypatch.setenv("PMI_SIZE", "2")
    with History() as h:
        h.record(0, {"loss": 1.0})
    assert h.path == tmp_path / "run" / "metrics" / "b0000" / "rank-00001.jsonl"


def test_parse_chunk_leaves_torn_line_and_counts_garbage() -> None:
    good = records.encode(0, 1, {"loss": 1.0}, 1.0)
    data = good + b"not json\n" + b"[1,2]\n" + b'{"no": "metrics"}\n' + good[:10]
    result = records.parse_chunk(data)
    assert len(result.records) == 1
    assert result.garbage == 3
    assert result.consumed == len(data) - 10


def test_reads_ezpz_files(tmp_path: Path) -> None:
    # ezpz: metrics-<rank>.jsonl, no step, optional aggregated object.
    for rank in (0, 1):
        lines = [
            json.dumps(
                {
                    "timestamp": 1.0 + i,
                    "rank": rank,
                    "metrics": {"loss": 3.0 - i, "iter": i},
                    "aggregated": {"loss/mean": 2.0},
                }
            )
            for i in range(3)
        ]
        (tmp_path / f"metrics-{rank}.jsonl").write_text("\n".join(lines) + "\n")
    assert [rank for _, rank in metric_files(tmp_path)] == [0, 1]
    ds = load_run_metrics(tmp_path)
    assert ds["loss"].dims == ("rank", "step")
    assert ds["loss"].sel(rank=1).values.tolist() == [3.0, 2.0, 1.0]
    assert "aggregated/loss/mean" in ds


def test_shared_ezpz_file_without_step(tmp_path: Path) -> None:
    lines = [
        json.dumps({"rank": r, "metrics": {"loss": float(i)}}) for i in range(2) for r in (0, 1)
    ]
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    ds = load_run_metrics(tmp_path)
    assert ds.sizes == {"rank": 2, "step": 2}
    assert ds["loss"].values.tolist() == [[0.0, 1.0], [0.0, 1.0]]


def test_xarray_view_and_summary(tmp_path: Path) -> None:
    for rank in range(3):
        with History(tmp_path, rank=rank) as h:
            for step in range(4):
                h.record(step, {"loss": float(10 * rank + step)})
    (tmp_path / "metrics" / "rank-00002.jsonl").open("ab").write(b"garbage\n{torn")
    ds = load_run_metrics(tmp_path)
    assert ds.attrs["garbage_lines"] == 1
    stats = summarize(ds)
    assert stats["loss_mean"].values.tolist() == [10.0, 11.0, 12.0, 13.0]
    assert stats["loss_max"].values.tolist() == [20.0, 21.0, 22.0, 23.0]


def test_concurrent_writer_reader_never_sees_half_a_record(tmp_path: Path) -> None:
    """Another process appends; every read parses only complete records, in order."""
    path = tmp_path / "metrics" / "b0000" / "rank-00000.jsonl"  # where History writes
    code = (
        "import sys; from runtime.history import History\n"
        "h = History(sys.argv[1], rank=0)\n"
        "for i in range(3000): h.record(i, {f'm{j}': i + j / 10 for j in range(10)})\n"
    )
    writer = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)])
    seen = offset = 0
    buffer = b""
    deadline = time.time() + 60
    while time.time() < deadline:
        done = writer.poll() is not None
        if path.exists():
            with path.open("rb") as fh:
                fh.seek(offset)
                chunk = fh.read()
            offset += len(chunk)
            buffer += chunk
            result = records.parse_chunk(buffer)
            buffer = buffer[result.consumed :]
            assert result.garbage == 0
            for rec in result.records:
                assert rec.step == seen
                seen += 1
        if done and not buffer:
            break
    assert writer.wait() == 0
    assert seen == 3000


@given(st.binary(max_size=400))
def test_parse_chunk_never_raises_on_bytes(data: bytes) -> None:
    result = records.parse_chunk(data)
    assert result.consumed <= len(data)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=5), kids, max_size=3)
    ),
    max_leaves=10,
)


@given(json_values)
def test_decode_never_raises_on_json(value) -> None:
    line = json.dumps(value)
    records.decode(line)
    records.decode(json.dumps({"metrics": value, "rank": value, "step": value}))


def test_writer_is_thread_safe_per_record(tmp_path: Path) -> None:
    h = History(tmp_path, rank=0)

    def work(k: int) -> None:
        for i in range(200):
            h.record(i, {"k": k, "x": "y" * 100})

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    h.close()
    result = records.parse_chunk(h.path.read_bytes())
    assert (len(result.records), result.garbage) == (800, 0)


record_lines = st.one_of(
    st.builds(
        lambda r, s, v: records.encode(r, s, {"loss": records.to_plain(v)}, 1.0).rstrip(b"\n"),
        st.integers(0, 3),
        st.integers(0, 10**6),
        st.floats(allow_nan=True, allow_infinity=True),
    ),
    st.sampled_from([b"{", b"}", b'{"a":"}', b"{}", b'{"metrics": 1}', b"not json", b"[1,2]"]),
    st.binary(max_size=20).filter(lambda b: b"\n" not in b),
)


@given(st.lists(record_lines, max_size=12))
def test_chunked_parse_agrees_with_line_by_line(lines: list[bytes]) -> None:
    """The one-array fast path must give exactly what decoding each line would."""
    data = b"".join(line + b"\n" for line in lines)
    result = records.parse_chunk(data)
    expected = [records.decode(line) for line in lines if line.strip()]
    good = [r for r in expected if r is not None]
    assert result.garbage == len(expected) - len(good)
    assert [(r.rank, r.step, r.metrics.keys()) for r in result.records] == [
        (r.rank, r.step, r.metrics.keys()) for r in good
    ]
