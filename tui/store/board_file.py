"""The board's lasting choices on disk: ``<data dir>/<history>.board.json``.

One small JSON file per run history (``runs.board.json`` beside ``runs.sqlite``, the demo's
``demo-runs.board.json``), written atomically and ``0600`` like the history. A missing,
damaged or foreign file reads as no choices at all: the board then uses its defaults, never
a traceback.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from tui.domain.board.saved import SavedBoard
from tui.store.atomic import write_atomic
from tui.store.bounded_read import parse_json
from tui.store.private import FILE_MODE, private_dir
from tui.store.regular_file import read_regular_text

MAX_BOARD_BYTES = 64 * 1024
"""The file is a hundred bytes; anything larger is not one of ours (and is not read)."""


def board_path(history: Path) -> Path:
    """The board file of the run history at ``history`` (``runs.sqlite`` -> ``runs.board.json``)."""
    return history.with_name(f"{history.stem}.board.json")


def read_board(path: Path) -> SavedBoard:
    """The choices saved at ``path``; the defaults when there are none readable."""
    try:
        data = parse_json(read_regular_text(path, MAX_BOARD_BYTES))
    except (OSError, ValueError):
        return SavedBoard()
    if not isinstance(data, dict):
        return SavedBoard()
    pinned, sort, flt = data.get("pinned"), data.get("sort"), data.get("filter")
    return SavedBoard(
        pinned=pinned if isinstance(pinned, int) and not isinstance(pinned, bool) else None,
        table=data.get("table") is True,
        sort=sort if isinstance(sort, str) and sort else None,
        descending=data.get("descending") is True,
        filter=flt if isinstance(flt, str) else "",
    )


def write_board(path: Path, saved: SavedBoard) -> None:
    """Write ``saved`` at ``path`` through a temporary file and a rename (``0600``)."""
    private_dir(path.parent)
    write_atomic(path, json.dumps(asdict(saved), indent=1), what="board file", mode=FILE_MODE)
