"""The readers of telemetry files: the follower's samples, the last minute kept per rank, the
sparklines and the newest sample read from a file's end."""

from __future__ import annotations

from pathlib import Path

from ezpz_tui.core.watching.followers import RunFollower
from ezpz_tui.core.watching.telemetry import (
    KEEP_SAMPLES,
    RankTelemetry,
    read_last,
    read_latest,
    sparkline,
)
from runtime.rundir import RunDir
from runtime.telemetry.record import Sample, parse_line
from tests.fixtures.telemetry import write_samples


def test_the_record_round_trips_and_a_reader_never_raises() -> None:
    sample = Sample(10.0, cpu_pct=99.5, rss_bytes=7, device="nvml:1", util_pct=3.0)
    assert parse_line(sample.to_json()) == sample
    assert "null" not in sample.to_json(), "fields not given are left out"
    assert parse_line('{"time": 1, "rss_bytes": "lots", "cpu_pct": true}') == Sample(1.0)
    assert parse_line('{"cpu_pct": 5}') is None and parse_line(b"\xff{") is None
    assert Sample(1.0, mem_used_bytes=20, mem_total_bytes=80).mem_pct == 25.0


def test_the_follower_delivers_new_samples_and_skips_torn_lines(tmp_path: Path) -> None:
    write_samples(tmp_path, 3, [Sample(1.0, cpu_pct=50.0)])
    follower = RunFollower(tmp_path)
    follower.rescan()
    assert follower.poll().telemetry == {3: [Sample(1.0, cpu_pct=50.0)]}
    path = RunDir(tmp_path).telemetry(3)
    with path.open("a") as fh:
        fh.write('{"time": 2.0, "cpu_pct": 60}\nnot json\n{"time": 3')
    assert follower.poll().telemetry == {3: [Sample(2.0, cpu_pct=60.0)]}
    with path.open("a") as fh:
        fh.write(".0}\n")
    assert follower.poll().telemetry == {3: [Sample(3.0)]}


def test_a_rank_keeps_a_bounded_minute_and_restarts_when_time_goes_back() -> None:
    rank = RankTelemetry()
    rank.add(Sample(float(t), cpu_pct=float(t)) for t in range(0, 400, 2))
    assert len(rank.samples) == KEEP_SAMPLES
    assert rank.series("cpu_pct") == [float(t) for t in range(338, 400, 2)], "the last 60 s"
    rank.add([Sample(5.0, cpu_pct=1.0)])
    assert list(rank.samples) == [Sample(5.0, cpu_pct=1.0)]


def test_sparklines_scale_to_their_floor() -> None:
    assert sparkline([0, 50, 100], 10, low=0) == "▁▅█"
    assert sparkline([70, 70, 70], 3) == "▁▁▁", "flat is flat, not noise"
    assert sparkline(list(range(20)), 5) == "▁▃▅▆█", "the newest values at the right"
    assert sparkline([], 5) == ""


def test_the_newest_sample_is_read_from_the_end_of_a_long_file(tmp_path: Path) -> None:
    path = write_samples(tmp_path, 0, (Sample(float(t), rss_bytes=t) for t in range(5000)))
    with path.open("a") as fh:
        fh.write('{"time": 9999, "rss')  # a sample being written
    assert read_last(path) == Sample(4999.0, rss_bytes=4999)
    latest = read_latest(path, tail=1024)
    assert latest[-1] == Sample(4999.0, rss_bytes=4999) and len(latest) < 50
    assert read_last(tmp_path / "missing.jsonl") is None
