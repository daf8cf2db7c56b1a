"""Which layout trains faster: runs compared side by side, and sweeps that make the runs.

UI-free, for ``ezpz-tui compare``/``sweep`` and the TUI's Compare tab alike:

* :mod:`ezpz_tui.core.watching.numbers`: one run's figures from its metric files (speed
  medians past warm-up, peak memory, losses), shared with the finalizer;
* :mod:`.facts`: one run as a comparison shows it (layout, state, figures, notes);
* :mod:`.compare`: runs ranked by tokens/s, one row per figure with the best run named, and
  what differs in their record;
* :mod:`.relatives`: the runs a run is compared with unasked (its parents, its sweep's runs);
* :mod:`.sweep` and :mod:`.sweep_record`: run every valid TP/PP/CP combination in turn.
"""
