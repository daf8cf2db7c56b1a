"""UI-free metric series: a columnar store that grows with a run, and the numeric tools a plot
needs to draw a million points per rank in a few milliseconds.

- :mod:`.store`: :class:`~.store.MetricStore`, every metric of every rank in numpy columns,
  appended to as records arrive; gaps and the NaN/inf values training really logged kept apart.
- :mod:`.band`: the mean and min/max across ranks at each step, folded in as records arrive.
- :mod:`.decimate` and :mod:`.ema`: min/max decimation to about two points per cell, and exact
  exponential smoothing, both vectorised (no Python loop over points; scipy is not a dependency).
- :mod:`.plot`: what a plot shows (:class:`~.plot.PlotSettings`) turned into the traces handed to
  plotext (:func:`~.plot.prepare_plot`), and why a plot is empty.
- :mod:`.load`: an earlier run's metric files read into a store, for overlays.

These modules import numpy at module level; the TUI imports them only when the first metrics
arrive, so start-up stays free of numpy (tests/functional/test_metrics_view.py checks it).
"""
