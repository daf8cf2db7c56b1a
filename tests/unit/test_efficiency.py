"""FLOPs per token, the peak a run's MFU divides by, and the CPU probe.

The probe is real: a short float32 matmul in this interpreter, its answer kept in the session's
cache directory (tests/conftest.py points XDG_CACHE_HOME there). Fixture runs (tests/fixtures/
runs.py) are on Polaris hosts, not this one: the probe must not measure this machine for them.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from ezpz_tui import config
from ezpz_tui.config import load_config
from ezpz_tui.core.comparing.compare import compare
from ezpz_tui.core.watching import probe
from ezpz_tui.core.watching.efficiency import PeakSettings, run_peak
from ezpz_tui.core.words import percent_of
from runtime import records
from runtime.efficiency.flops import demo_flops_per_token, demo_params
from runtime.history import History
from runtime.rundir import RunDir
from tests.fixtures.runs import make_run

T0 = 1_763_800_000.0
FPT = 1.0e9  # FLOPs per token the fixture runs say


def flops_run(
    outputs: Path, run_id: str, tp: int, device: str | None, hardware: float | None = None
) -> Path:
    """A finished 4-rank fixture run whose rank 0 says FPT in its first record and whose
    telemetry names ``device`` (None: no accelerator; "": one its tool did not name)."""
    run_dir = make_run(
        outputs,
        run_id=run_id,
        state="succeeded",
        exit_code=0,
        sizes={"tp": tp},
        ranks=4,
        steps=20,
        created=T0,
    )
    path = RunDir(run_dir).metrics(0)
    lines = path.read_bytes().splitlines(keepends=True)
    first = json.loads(lines[0])
    first["metrics"]["flops_per_token"] = FPT
    if hardware is not None:
        first["metrics"]["hardware_flops_per_token"] = hardware
    lines[0] = records.encode(0, first["step"], first["metrics"], first["timestamp"])
    path.write_bytes(b"".join(lines))
    if device is not None:
        sample = {"time": T0 + 1, "device": "nvml:0", "device_name": device, "util_pct": 90.0}
        sample = {k: v for k, v in sample.items() if v != ""}
        RunDir(run_dir).telemetry(0).write_text(json.dumps(sample) + "\n")
    return run_dir


def test_history_says_flops_per_token_in_its_first_record_only(tmp_path: Path) -> None:
    with History(tmp_path, rank=0, flops_per_token=744960) as history:
        for step in range(3):
            history.record(step, {"loss": 1.0}, tokens=512, dt=0.1)
    lines = [json.loads(line) for line in RunDir(tmp_path).metrics(0).read_text().splitlines()]
    assert [("flops_per_token" in r["metrics"]) for r in lines] == [True, False, False]
    assert lines[0]["metrics"]["flops_per_token"] == 744960.0
    with pytest.raises(ValueError, match="must be positive"):
        History(tmp_path / "other", rank=0, flops_per_token=0)


def test_the_demos_count_is_its_models_parameters_without_embeddings() -> None:
    torch = pytest.importorskip("torch")
    from runtime.examples.model import TinyLM

    torch.manual_seed(0)
    for vocab, dim, heads, layers, seq in ((128, 64, 4, 2, 64), (100, 96, 6, 3, 32)):
        model = TinyLM(vocab, dim, heads, layers, seq)
        named = model.named_parameters()
        counted = sum(p.numel() for n, p in named if not n.startswith(("tok", "pos")))
        assert demo_params(vocab, dim, layers) == counted
        attention = 12 * layers * heads * (dim // heads) * seq
        assert demo_flops_per_token(vocab, dim, heads, layers, seq) == 6 * counted + attention


def test_the_hardware_counter_counts_one_steps_matmuls() -> None:
    torch = pytest.importorskip("torch")
    from runtime.efficiency.hardware import hardware_flops_per_token

    layer = torch.nn.Linear(32, 16, bias=False)
    x = torch.randn(8, 32)

    def step() -> None:
        layer(x).sum().backward()

    # forward 2*B*I*O, backward only the weight's gradient (x needs none): 2*B*I*O more
    assert hardware_flops_per_token(step, tokens=8) == 4 * 32 * 16
    with pytest.raises(ValueError, match="counted no FLOPs"):
        hardware_flops_per_token(lambda: None, tokens=8)


def test_the_cpu_probe_is_measured_once_cached_and_labelled() -> None:
    first = probe.measure(sys.executable)
    assert not isinstance(first, str), first
    assert first.measured and first.dtype == "fp32" and first.tflops > 0
    assert first.label.endswith("TFLOPS (measured)") and first.source.startswith("measured:")
    cache = probe.cache_path()
    kept = json.loads(cache.read_text())
    key = f"{socket.gethostname()} {sys.executable}"
    assert kept[key]["tflops"] == first.tflops
    kept[key]["tflops"] = 123.0  # the next answer must come from here, not a new measurement
    cache.write_text(json.dumps(kept))
    assert probe.measure(sys.executable).tflops == 123.0  # type: ignore[union-attr]
    assert probe.cached_peak("another-host", sys.executable) is None
    again = probe.measure(sys.executable, refresh=True)
    assert not isinstance(again, str) and again.tflops != 123.0
    assert json.loads(cache.read_text())[key]["tflops"] == again.tflops


def test_a_probe_that_cannot_run_says_why(tmp_path: Path) -> None:
    said = probe.measure(str(tmp_path / "no-python"))
    assert isinstance(said, str) and "could not run" in said


def test_the_peak_comes_from_config_then_the_table_then_nothing(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    a100 = flops_run(outputs, "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA A100-SXM4-40GB")
    unknown = flops_run(outputs, "20261126-100100-000-tp1pp1cp1", 1, "NVIDIA GeForce RTX 4090")
    cpu = flops_run(outputs, "20261126-100200-000-tp1pp1cp1", 1, None)
    record = {"plan": {"command": [sys.executable]}, "hosts": ["x3005c0s7b0n0"]}
    peak = run_peak(a100, record, PeakSettings())
    assert not isinstance(peak, str) and (peak.tflops, peak.dtype) == (312.0, "bf16")
    assert run_peak(unknown, record, PeakSettings()) == (
        "n/a: no bf16 peak for 'NVIDIA GeForce RTX 4090' in the peak table"
    )
    said = run_peak(cpu, record, PeakSettings())
    assert isinstance(said, str) and said.startswith("n/a: the CPU of x3005")  # rank 0's host
    assert said.endswith("has not been probed (run ezpz-tui there once)")
    unnamed = flops_run(outputs, "20261126-100300-000-tp1pp1cp1", 1, "")
    said = run_peak(unnamed, record, PeakSettings())  # a GPU run: never the CPU's peak
    assert said == (
        "n/a: the run's telemetry does not name its accelerator (set [efficiency] peak_tflops)"
    )
    forced = run_peak(unknown, record, PeakSettings(peak_tflops=100.0))
    assert not isinstance(forced, str) and forced.label.endswith("100 TFLOPS (config)")


def test_compare_gives_mfu_from_the_first_record_and_the_peak(tmp_path: Path) -> None:
    outputs = tmp_path / "outputs"
    tp1 = flops_run(outputs, "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA A100-SXM4-40GB", 1.5 * FPT)
    tp2 = flops_run(outputs, "20261126-100100-000-tp2pp1cp1", 2, "NVIDIA A100-SXM4-40GB")
    comparison = compare([tp1, tp2])
    for facts in comparison.runs:
        assert facts.numbers.tokens_per_s == 2048.0
        assert facts.mfu == pytest.approx(FPT * 2048.0 / (4 * 312e12))
        assert facts.tflops == pytest.approx(FPT * 2048.0 / 4 / 1e12)
    hfu = {f.path.name[-9:]: f.efficiency.hfu(f.numbers.tokens_per_s) for f in comparison.runs}
    assert hfu["tp1pp1cp1"] == pytest.approx(1.5 * FPT * 2048.0 / (4 * 312e12))
    assert hfu["tp2pp1cp1"] is None  # it did not count its hardware FLOPs
    row = comparison.row("mfu")
    assert row is not None and row.best == frozenset()  # equal: nobody is better


def test_efficiency_settings_and_their_mistakes(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(tmp_path))
    (tmp_path / "config.toml").write_text('[efficiency]\npeak_tflops = 989.4\ndtype = "fp16"\n')
    settings, problems = load_config()
    assert (settings.peak_tflops, settings.peak_dtype, problems) == (989.4, "fp16", [])
    (tmp_path / "config.toml").write_text('[efficiency]\npeak_tflops = -1\ndtype = "int8"\n')
    settings, problems = load_config()
    assert (settings.peak_tflops, settings.peak_dtype) == (None, "bf16")
    assert len(problems) == 2 and "peak_tflops" in problems[0] and "dtype" in problems[1]


@pytest.mark.parametrize(
    ("fraction", "text"),
    [(0.412, "41.2%"), (0.0637, "6.37%"), (0.0037, "0.37%"), (1e-6, "<.01%"), (None, "-")],
)
def test_mfu_is_written_in_five_characters(fraction: float | None, text: str) -> None:
    assert percent_of(fraction) == text


def test_the_heatmap_colours_each_rank_by_its_mfu_and_names_the_peak(tmp_path: Path) -> None:
    from ezpz_tui.core.watching.monitor import RunMonitor
    from ezpz_tui.core.watching.rank_rows import heat_values
    from runtime.record_columns import parse_columns

    run = flops_run(tmp_path / "outputs", "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA H100 PCIe")
    monitor = RunMonitor(run)
    _, before, _ = heat_values(monitor, now=T0)
    assert "mfu" not in before  # no record read yet: no FLOPs per token
    records = {}
    for rank in range(4):
        records.update(parse_columns(RunDir(run).metrics(rank).read_bytes(), rank).columns)
    monitor.steps.update(records)
    _, values, about = heat_values(monitor, now=T0)
    want = FPT * 2048.0 / (4 * 756.5e12)
    assert values["mfu"] == pytest.approx(dict.fromkeys(range(4), want))
    assert about == {"mfu": "of NVIDIA H100 PCIe bf16 756.5 TFLOPS (datasheet)"}


def test_top_gives_each_rank_its_mfu_and_names_the_peak(tmp_path: Path) -> None:
    from ezpz_tui.core.watching.top import format_top, read_top

    run = flops_run(tmp_path / "outputs", "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA H200")
    top = read_top(run)
    want = FPT * 2048.0 / (4 * 989.4e12)
    assert [row.mfu for row in top.rows] == pytest.approx([want] * 4)
    lines = format_top(top, now=T0)
    assert lines[0].split()[-3:] == ["MFU", "LAG", "AGE"]
    assert all(line.split()[-3] == "0.05%" for line in lines[1:5])
    assert "MFU of NVIDIA H200 SXM bf16 989.4 TFLOPS (datasheet)" in lines
    assert lines[lines.index("MFU of NVIDIA H200 SXM bf16 989.4 TFLOPS (datasheet)") + 1] == (
        "MFU of ranks 0-3 suspect: below 0.50% of the peak: the run's flops_per_token too low, "
        "a peak that is not this hardware's, or steps that mostly wait"
    )
    assert top.to_json(T0)["ranks"][0]["mfu"] == pytest.approx(want)


def test_summary_json_has_the_mfu_and_its_peak(tmp_path: Path, monkeypatch) -> None:
    from ezpz_tui.core.launching.finalize import speed_summary
    from ezpz_tui.core.runs.record import read_run_toml

    monkeypatch.setenv(config.ENV_CONFIG_DIR, str(tmp_path / "config"))  # no user settings
    run = flops_run(tmp_path / "outputs", "20261126-100000-000-tp1pp1cp1", 1, "AMD Instinct MI300X")
    eff = speed_summary(run, read_run_toml(run))["efficiency"]
    assert eff["mfu"] == pytest.approx(FPT * 2048.0 / (4 * 1307.4e12))
    assert eff["peak"]["label"] == "AMD Instinct MI300X bf16 1307 TFLOPS (datasheet)"
    assert eff["peak"]["source"].startswith("https://www.amd.com/")


def test_the_probe_warms_up_then_keeps_the_best_of_its_repetitions() -> None:
    """The probe's structure on a scripted clock: every call of the work advances it by the
    next duration, so what each repetition rates is known exactly."""
    from runtime.efficiency.matmul import best_rate

    fast = [0.03125] * 4
    durations = iter([0.25, 0.125, 0.0625, 0.0625, *fast, 0.125])  # exact in binary
    now = [0.0]
    calls = []

    def work() -> None:
        calls.append(now[0])
        now[0] += next(durations)

    rate = best_rate(work, flops=1.0, repeats=3, warmup_s=0.3, min_s=0.125, clock=lambda: now[0])
    # warm-up: 0.25 + 0.125 s (untimed, however slow); then 2, 4 and 1 calls in 0.125 s each
    assert rate == 32.0  # the best repetition's, not the first's or the mean
    assert len(calls) == 9  # every scripted call ran: none skipped, none extra


def test_the_probe_uses_every_core_whatever_threads_the_caller_had(monkeypatch) -> None:
    import os

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    peak = probe.measure(sys.executable, refresh=True)
    assert not isinstance(peak, str), peak
    kept = json.loads(probe.cache_path().read_text())[f"{socket.gethostname()} {sys.executable}"]
    assert kept["threads"] == len(os.sched_getaffinity(0)) and kept["repeats"] == 7
    assert kept["method"] == probe.METHOD
    assert f"{kept['threads']} threads, best of 7" in peak.source
    one = probe.measure(sys.executable, threads=1)  # a rank's threads, whatever the caller's
    assert not isinstance(one, str)
    assert one.device == f"1 thread of the CPU of {socket.gethostname()}"
    kept = json.loads(probe.cache_path().read_text())
    assert kept[f"{socket.gethostname()} {sys.executable} threads=1"]["threads"] == 1


def test_an_answer_kept_by_the_old_probe_is_measured_again() -> None:
    cache = probe.cache_path()
    cache.parent.mkdir(parents=True, exist_ok=True)
    key = f"{socket.gethostname()} {sys.executable}"
    old = {"tflops": 0.004, "dtype": "fp32", "size": 1024, "threads": 1, "measured_at": 1.0}
    cache.write_text(json.dumps({key: old}))  # no method: the caller's threads, one warm-up call
    assert probe.cached_peak(socket.gethostname(), sys.executable) is None
    again = probe.measure(sys.executable)
    assert not isinstance(again, str) and again.tflops != 0.004
    assert json.loads(cache.read_text())[key]["method"] == probe.METHOD


def keep_probe(host: str, tflops: float, threads: int | None = None) -> None:
    """A kept answer of this probe for ``host`` (at ``threads``), as :func:`probe.measure`
    writes it."""
    cache = probe.cache_path()
    cache.parent.mkdir(parents=True, exist_ok=True)
    kept = json.loads(cache.read_text()) if cache.is_file() else {}
    answer = {"tflops": tflops, "dtype": "fp32", "size": 1024, "threads": threads or 64}
    key = f"{host} {sys.executable}" + (f" threads={threads}" if threads else "")
    kept[key] = {**answer, "repeats": 7, "method": probe.METHOD, "measured_at": T0}
    cache.write_text(json.dumps(kept))


def test_a_cpu_ranks_peak_is_measured_at_the_threads_the_launch_gave_it(tmp_path: Path) -> None:
    host = "x3005c0s13b0n0"  # rank 0's host in the fixture's statuses
    keep_probe(host, 0.25, threads=8)
    keep_probe(host, 2.0)  # the whole host: not what one rank of it had
    cpu = flops_run(tmp_path / "outputs", "20261126-100200-000-tp1pp1cp1", 1, None)
    record = {
        "plan": {"command": [sys.executable]},
        "ranks_per_node": 2,
        "launch": {"env": {"OMP_NUM_THREADS": "8"}},  # as the fixture's launcher gave it
    }
    peak = run_peak(cpu, record, PeakSettings())
    assert not isinstance(peak, str), peak
    assert peak.tflops == 0.25 and peak.measured
    assert peak.label == f"8 threads of the CPU of {host} fp32 0.25 TFLOPS (measured)"
    assert "8 threads, best of 7" in peak.source
    said = run_peak(cpu, {**record, "launch": {"env": {"OMP_NUM_THREADS": "4"}}}, PeakSettings())
    assert said == f"n/a: the CPU of {host} has not been probed (run ezpz-tui there once)"


def test_a_cpu_ranks_peak_is_its_share_of_the_hosts(tmp_path: Path) -> None:
    """A run that does not record its ranks' threads: two ranks on a host split its cores, so
    each one's peak is half the host's, and a run's MFU does not fall with the ranks it puts on
    a host."""
    host = "x3005c0s13b0n0"  # rank 0's host in the fixture's statuses
    keep_probe(host, 1.0)
    cpu = flops_run(tmp_path / "outputs", "20261126-100200-000-tp1pp1cp1", 1, None)
    record = {"plan": {"command": [sys.executable]}, "ranks_per_node": 2}
    peak = run_peak(cpu, record, PeakSettings())
    assert not isinstance(peak, str), peak
    assert peak.tflops == 0.5 and peak.measured
    assert peak.label == f"1/2 of the CPU of {host} fp32 0.5 TFLOPS (measured)"
    assert peak.source.endswith("; divided among the 2 ranks on the host")
    # no ranks_per_node recorded: the statuses say two ranks ran on rank 0's host
    by_status = run_peak(cpu, {"plan": {"command": [sys.executable]}}, PeakSettings())
    assert not isinstance(by_status, str) and by_status.tflops == 0.5
    alone = run_peak(cpu, {**record, "ranks_per_node": 1}, PeakSettings())
    assert not isinstance(alone, str) and alone.tflops == 1.0 and alone.device == f"CPU of {host}"


def test_an_mfu_above_100_or_below_half_a_percent_is_shown_suspect(tmp_path: Path) -> None:
    from ezpz_tui.cli.comparing import table_lines

    outputs = tmp_path / "outputs"
    a100 = flops_run(outputs, "20261126-100000-000-tp1pp1cp1", 1, "NVIDIA A100-SXM4-40GB")
    low = compare([a100])  # 1e9 x 2048 / (4 x 312e12): 0.16%
    assert low.runs[0].mfu == pytest.approx(FPT * 2048.0 / (4 * 312e12))
    lines = table_lines(low)
    row = lines[1].split()
    assert row[row.index("20") + 4] == "0.16%?"  # the figure, marked
    peak = "NVIDIA A100 (SXM4 or PCIe) bf16 312 TFLOPS (datasheet)"
    legend = lines[lines.index(f"  peak of every run: {peak}") + 1]
    assert legend.startswith("  ? MFU of #1 suspect: below 0.50% of the peak: the run's flops_")
    assert max(map(len, lines)) <= 100  # the legend's reason wraps
    high = compare([a100], PeakSettings(peak_tflops=0.001))  # 512x the peak
    said = high.runs[0].efficiency.as_dict(high.runs[0].numbers.tokens_per_s)["suspect"]
    assert said.startswith("suspect: above 100% of the peak: the peak is too low for this")
    assert "51200%?" in table_lines(high)[1]
    fair = compare([a100], PeakSettings(peak_tflops=1.0))  # 51%: believable
    assert fair.runs[0].efficiency.suspect(fair.runs[0].numbers.tokens_per_s) is None
    assert "?" not in table_lines(fair)[1] and "suspect" not in "\n".join(table_lines(fair))
