"""What of the board outlives the console: the pinned baseline and how the board is viewed.

The console writes it beside its run history whenever the operator pins, sorts, filters or
switches between cards and table; the next console, ``vtc runs``, ``vtc export`` and ``vtc
report`` read it, so a relaunch keeps the pin and every surface measures against the same
baseline (issue 29: relaunching dropped the pin, and ``vtc runs`` ignored it).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class SavedBoard:
    """The board's lasting choices.

    ``pinned``: the baseline's run id (``None``: the default baseline); ``table``: table
    view rather than cards; ``sort``/``descending``: a column key and its direction;
    ``filter``: the filter as the operator typed it (``served max_num_seqs=256``).
    """

    pinned: int | None = None
    table: bool = False
    sort: str | None = None
    descending: bool = False
    filter: str = ""
