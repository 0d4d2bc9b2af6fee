"""Which run the console's one-key fix takes its fix from.

Every comparison the board shows (baseline, deltas, noise) is the domain's
(:mod:`tui.domain.board`); this module only answers what ``f`` needs.
"""

from __future__ import annotations

from tui.domain.results import RunRecord, RunStatus


def latest_failed(runs: list[RunRecord]) -> tuple[int, RunRecord] | None:
    """The most recent run whose start failed (what ``f`` takes its fix from)."""
    for index in range(len(runs) - 1, -1, -1):
        if runs[index].status is RunStatus.FAILED:
            return index, runs[index]
    return None
