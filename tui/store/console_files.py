"""The files the console writes and reads: exports, user presets, server log tails, the
board's pin and view, the flags form.

Exports go to ``<data dir>/exports/<history>/<run id>/<usual file name>`` (``compose.yaml``
keeps the name ``docker compose`` looks for; demo runs and real runs have histories of their
own, so their exports never overwrite each other). Every write is atomic (a temporary file,
then a rename). Log tails are bounded in bytes and lines: a server log can be gigabytes.
"""

from __future__ import annotations

import os
from pathlib import Path

from tui.domain.board.saved import SavedBoard
from tui.domain.export import export_run
from tui.domain.export.launch import ExportOptions
from tui.domain.inert import inert
from tui.domain.log_tail import LogTail
from tui.domain.presets import Preset
from tui.domain.results import RunRecord
from tui.domain.saved_form import SavedForm
from tui.store.atomic import PUBLIC_MODE, write_atomic
from tui.store.board_file import board_path, read_board, write_board
from tui.store.form_file import FormRead, form_path, read_form, write_form
from tui.store.presets import save_user_preset
from tui.store.regular_file import open_regular

TAIL_LINES = 400
TAIL_BYTES = 256 * 1024


class ConsoleFiles:
    """Implements :class:`tui.session.tools.RunFiles` under one data directory.

    ``history`` names the run history the exports belong to (``runs``, ``demo-runs``);
    ``demo`` marks exports of simulator runs as such; ``presets_dir`` overrides the user's
    preset folder (tests).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        history: str = "runs",
        demo: bool = False,
        presets_dir: Path | None = None,
    ) -> None:
        self.exports_dir = data_dir / "exports" / history
        self.board_file = board_path(data_dir / f"{history}.sqlite")
        self.form_file = form_path(data_dir / f"{history}.sqlite")
        self._options = ExportOptions(demo=demo)
        self._presets_dir = presets_dir

    def write_export(self, run: RunRecord, fmt: str) -> Path:
        """Render ``run`` as ``fmt`` and write it; returns the file (``ValueError``: format)."""
        exported = export_run(run, fmt, self._options)
        folder = self.exports_dir / (str(run.id) if run.id is not None else "unsaved")
        target = folder / exported.filename
        target.parent.mkdir(parents=True, exist_ok=True)
        mode = 0o755 if fmt == "command" else PUBLIC_MODE  # a command export runs as it is
        write_atomic(target, exported.text, what="export", mode=mode)
        return target

    def save_preset(self, preset: Preset) -> Path:
        """Write ``preset`` among the user's presets (a same-named one is replaced)."""
        return save_user_preset(preset, self._presets_dir)

    def log_tail(self, path: str) -> LogTail:
        """The last lines of the file at ``path`` (bounded: :func:`read_tail`)."""
        return read_tail(Path(path))

    def read_board(self) -> SavedBoard:
        """The board's choices saved beside this history (the defaults when none)."""
        return read_board(self.board_file)

    def write_board(self, saved: SavedBoard) -> None:
        """Save the board's choices beside this history."""
        write_board(self.board_file, saved)

    def read_form(self) -> FormRead:
        """The flags form the last console of this history left (nothing, and a line, when
        it cannot be used)."""
        return read_form(self.form_file)

    def write_form(self, saved: SavedForm) -> None:
        """Keep the flags form for the next console of this history (its only writer)."""
        write_form(self.form_file, saved)


def read_tail(path: Path, *, lines: int = TAIL_LINES, max_bytes: int = TAIL_BYTES) -> LogTail:
    """The end of a text file: whole lines only, undecodable bytes replaced."""
    try:
        with open_regular(path) as handle:  # a FIFO in the log's place never hangs the view
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - max_bytes)
            handle.seek(start)
            data = handle.read(max_bytes)
    except FileNotFoundError:
        return LogTail((), f"the log file is gone: {path}")
    except OSError as exc:
        return LogTail((), f"cannot read {path}: {exc.strerror or exc}")
    text = data.decode("utf-8", errors="replace").splitlines()
    if start > 0 and text:
        text = text[1:]  # the first line was cut in the middle
    cut = start > 0 or len(text) > lines
    shown = tuple(inert(line, tabs=True) for line in text[-lines:])  # the file may be old
    note = f"the last {len(shown)} lines of {path}" if cut else str(path)
    return LogTail(shown, note)
