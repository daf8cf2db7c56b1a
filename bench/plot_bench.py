"""How long the Metrics plot takes to redraw a metric with 1,000,000 points per rank.

The subject is the widget's own path (``ezpz_tui.ui.widgets.metric_plot``): one record per rank
arrives, as while a run streams (the drawing is prepared afresh; the store's band folds in only
the new records), then ``prepare_plot`` (series, smoothing, min/max decimation to about two
points per cell, the cross-rank band) and ``paint`` + ``canvas_text`` (plotext builds the
figure; its character matrix becomes the rich Text the widget returns). Target: at most 20 ms.

Baselines, in the same process, on a plotext figure of the same size:

- floor: plotext plotting the subject's already-decimated traces and building its ANSI string
  (``plt.build()``), the least any plotext plot of those points can cost;
- naive: plotext given 10,000 raw points of one rank (what plotting without decimation costs
  long before a run reaches a million steps), built and parsed with ``Text.from_ansi`` as
  ``PlotextPlot.render`` does.

Then the step cursor and the zoom, for the 4-line cases (targets 16 ms and 30 ms): a cursor move
is the readout of every line at the new step (``core.watching.metrics.cursor.readout``) and the
cursor column drawn over the cached picture (``with_cursor``), no plotext; a zoom is the whole
redraw with a window (only the window's points decimated), here a tenth of the steps around the
cursor. The plain redraw of the same case is printed beside them as the baseline.

Subject and baselines alternate and medians are quoted, with the best subject run beside them
(the machines are shared and noisy).
"""

from __future__ import annotations

import argparse
import math
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's code, whatever is installed

from rich.text import Text  # noqa: E402
from textual_plotext.plot import Plot  # noqa: E402

from ezpz_tui.core.watching.metrics.cursor import cursor_axis, readout, zoom  # noqa: E402
from ezpz_tui.core.watching.metrics.plot import PlotSettings, prepare_plot  # noqa: E402
from ezpz_tui.core.watching.metrics.store import MetricStore  # noqa: E402
from ezpz_tui.ui.widgets.metric_plot import (  # noqa: E402
    MARKER,
    PlotColours,
    canvas_text,
    geometry,
    paint,
    with_cursor,
)
from runtime.record_columns import RecordColumns  # noqa: E402
from runtime.records import Record  # noqa: E402

TARGET_MS = 20.0
CURSOR_MS = 16.0
ZOOM_MS = 30.0
COLOURS = PlotColours(
    lines=((1, 120, 212), (255, 166, 43), (78, 191, 113), (186, 60, 91)),
    band=(14, 70, 110),
    mark=(186, 60, 91),
)


def loss_curve(rank: int, n: int) -> list[float]:
    """A noisy falling loss with a few spikes: enough structure that decimation matters."""
    out = []
    state = 12345 + rank
    for step in range(n):
        state = (state * 1103515245 + 12345) % 2**31
        noise = (state / 2**31 - 0.5) * 0.2
        spike = 1.5 if step % 99_991 == 0 else 0.0
        out.append(4.9 * math.exp(-3.0 * step / n) + 0.35 + noise + spike)
    return out


def build_store(ranks: int, points: int) -> tuple[MetricStore, float]:
    """A store filled through ``add`` in follower-sized batches of columns (what the follower
    delivers); returns it and records/s."""
    store = MetricStore()
    took = 0.0
    for rank in range(ranks):
        values = loss_curve(rank, points)
        for begin in range(0, points, 50_000):
            steps = list(range(begin, min(points, begin + 50_000)))
            batch = RecordColumns(
                rank,
                steps,
                [1.7e9 + 0.1 * s for s in steps],
                {"loss": values[begin : begin + len(steps)], "lr": [1e-3] * len(steps)},
            )
            t0 = time.perf_counter()
            store.add(rank, batch)
            took += time.perf_counter() - t0
    return store, ranks * points / took


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def cursor_and_zoom(
    store: MetricStore,
    settings: PlotSettings,
    name: str,
    redraw_ms: float,
    width: int,
    height: int,
    reps: int,
) -> None:
    """A cursor move (readout + cursor column over the cached picture) and a zoom (a redraw
    of a tenth of the steps around the cursor) of one case, as the widget runs them."""
    from rich.style import Style

    plt = Plot()
    plt.plotsize(width, height)
    plt._set_size(width, height)
    paint(plt, prepare_plot(store, {}, settings, width), COLOURS)
    picture, where = canvas_text(plt), geometry(plt)
    assert where is not None
    axis = cursor_axis(store, settings)
    full = (float(axis.x[0]), float(axis.x[-1]))
    style = Style(bgcolor="yellow")
    moves: list[float] = []
    zooms: list[float] = []
    for rep in range(reps):
        index = len(axis.steps) // 2 + rep
        t0 = time.perf_counter()
        readout(store, settings, int(axis.steps[index]))
        with_cursor(picture, where, float(axis.x[axis.index_of(int(axis.steps[index]))]), style)
        moves.append(time.perf_counter() - t0)
        window = zoom(None, full, float(axis.x[index]), 0.1 + 0.001 * rep)
        t0 = time.perf_counter()
        drawing = prepare_plot(store, {}, replace(settings, window=window), width)
        plt.clear_figure()
        plt.plotsize(width, height)
        plt._set_size(width, height)
        paint(plt, drawing, COLOURS)
        canvas_text(plt)
        geometry(plt)
        zooms.append(time.perf_counter() - t0)
    move, zoomed = median_ms(moves), median_ms(zooms)
    for what, took, target in (("cursor move", move, CURSOR_MS), ("zoom", zoomed, ZOOM_MS)):
        verdict = "ok" if took <= target else "OVER"
        print(
            f"{name + ', ' + what:<32} {took:>7.2f}ms (redraw {redraw_ms:.1f} ms)"
            f"  {verdict} (<= {target:.0f} ms)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--points", type=int, default=1_000_000, help="points per rank")
    parser.add_argument("--ranks", type=int, default=4, help="ranks of the band case")
    parser.add_argument("--size", default="120x30", help="plot width x height in cells")
    parser.add_argument("--reps", type=int, default=15)
    args = parser.parse_args()
    width, height = (int(v) for v in args.size.split("x"))
    print("$ python bench/" + Path(__file__).name + " " + shlex.join(sys.argv[1:]))

    store, rate = build_store(args.ranks, args.points)
    print(f"store: {args.ranks} ranks x {args.points:,} points, add() at {rate:,.0f} records/s")
    t0 = time.perf_counter()
    store.band("loss")
    cold = (time.perf_counter() - t0) * 1000
    print(f"band: first fold of all {args.ranks} ranks {cold:.1f} ms (once; then only new records)")
    plt = Plot()
    step = [args.points]

    def fresh_frame() -> None:
        """One new record per rank, as while a run streams: every cache is stale."""
        for rank in range(args.ranks):
            store.add(rank, [Record(rank, step[0], 1.7e9 + 0.1 * step[0], {"loss": 0.4})])
        step[0] += 1

    def figure() -> None:
        plt.clear_figure()
        plt.plotsize(width, height)
        plt._set_size(width, height)

    def subject(settings: PlotSettings) -> Callable[[], object]:
        def run() -> object:
            drawing = prepare_plot(store, {}, settings, width)
            figure()
            paint(plt, drawing, COLOURS)
            return canvas_text(plt)

        return run

    def floor(settings: PlotSettings) -> Callable[[], object]:
        drawing = prepare_plot(store, {}, settings, width)

        def run() -> object:
            figure()
            paint(plt, drawing, COLOURS)
            return plt.build()

        return run

    raw_x, raw_y = store.series("loss", 0)
    naive_x, naive_y = raw_x[:10_000].tolist(), raw_y[:10_000].tolist()

    def naive() -> object:
        figure()
        plt.plot(naive_x, naive_y, marker=MARKER, color=COLOURS.lines[0])
        return Text.from_ansi(plt.build())

    cases = [
        ("one rank", PlotSettings("loss")),
        ("one rank, ema 0.9", PlotSettings("loss", smoothing=0.9)),
        ("one rank, log10", PlotSettings("loss", log=True)),
        (f"band of {args.ranks} ranks", PlotSettings("loss", mode="band")),
        (f"all {args.ranks} ranks", PlotSettings("loss", mode="all")),
    ]
    naive_times: list[float] = []
    medians: dict[str, float] = {}
    print(f"plot {width}x{height} cells, {args.reps} reps each, medians (and the best subject run)")
    header = (
        f"{'case':<22} {'points':>7} {'subject':>9} {'(best)':>8} {'floor':>8} {'ratio':>6}  target"
    )
    print(header)
    for name, settings in cases:
        run_subject, run_floor = subject(settings), floor(settings)
        drawn = prepare_plot(store, {}, settings, width).drawn
        times: dict[str, list[float]] = {"subject": [], "floor": []}
        for _ in range(args.reps):
            fresh_frame()
            t0 = time.perf_counter()
            run_subject()
            times["subject"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            run_floor()
            times["floor"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            naive()
            naive_times.append(time.perf_counter() - t0)
        sub, flo = median_ms(times["subject"]), median_ms(times["floor"])
        best = min(times["subject"]) * 1000
        medians[name] = sub
        verdict = "ok" if sub <= TARGET_MS else "OVER"
        print(
            f"{name:<22} {drawn:>7} {sub:>7.1f}ms {best:>6.1f}ms {flo:>6.1f}ms {sub / flo:>5.2f}x"
            f"  {verdict} (<= {TARGET_MS:.0f} ms)"
        )
    print(f"cursor and zoom, {args.reps} reps each, medians (plain redraw of the case beside)")
    for name, settings in cases[-2:]:
        cursor_and_zoom(store, settings, name, medians[name], width, height, args.reps)
    nav = median_ms(naive_times)
    one = medians["one rank"]
    print(
        f"naive: plotext with 10,000 raw points of one rank: {nav:.1f} ms, "
        f"{nav / one:.1f}x the one-rank redraw of {args.points:,} points"
    )


if __name__ == "__main__":
    main()
