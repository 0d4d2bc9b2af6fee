"""The board: every run side by side, against one pinned baseline.

Pure models the console's widgets, ``vtc runs``, ``vtc report`` and the exports all render:

- :mod:`.metrics`: the key metrics, declared once (label, unit, direction, where the number
  lives in a :class:`~tui.domain.results.RunRecord`);
- :mod:`.baseline`: which run every delta and flag diff is measured against;
- :mod:`.noise`: like-for-like settings, groups of repeated runs and their spread, and the
  verdict on a delta (gain, loss, noise, other load);
- :mod:`.table`: one row per run, the differing flags as columns, sorting and filtering;
- :mod:`.before_after`: seed 003's Before / After table for any two runs;
- :mod:`.pareto`: the throughput-vs-latency scatter and its Pareto frontier;
- :mod:`.view`: all of the above for one list of runs (:func:`build_board`);
- :mod:`.render`: the table as plain text, Markdown, CSV and JSON.
"""
