"""The topology grid as data: which rank runs in which accelerator slot, and its groups.

A plan's sizes only mean something once you see them on the hosts: whether a TP group stays on
one node, where the pipeline stages split, which hosts sit idle. This package turns a plan and
an allocation into that picture without any UI, so the widget only paints it, the text rendering
can be tested at any size, and the same picture can be printed by a command-line tool.

Two steps, kept apart because the second runs on every resize and the first on every keystroke
in the launch form:

- :mod:`.model`: :func:`~.model.build_topology` gives one row per allocated host (used, excluded
  or beyond ``nodes``), one cell per accelerator slot, each cell with its rank, its group along
  ``colour_by`` and its coordinate inside that group. A group of dimension *d* is the set of
  ranks that differ only in coordinate *d* (a TP group shares pp, dp and cp), which is exactly
  the set that talks in *d*'s collectives.
- :mod:`.layout`: :func:`~.layout.layout_topology` gives lines of styled spans for a width and a
  height. A grid too tall for the height is summarised (:mod:`.fold` decides which rows): hosts
  whose pattern continues the previous host's (ranks, groups and coordinates all shifted by the
  same amount) collapse into one line, and the boundaries where the pattern changes (a new
  pipeline stage, an excluded host) stay visible.

:mod:`.describe` puts groups, colours and cells into words: the legend and the hover text.
"""
