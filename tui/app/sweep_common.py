"""What the headless sweeps share (``vtc sweep`` on this machine's GPUs and on a Ray
cluster): the progress printer, the journal opened (or set aside with ``--fresh``), and
Ctrl-C / SIGTERM turned into a stop."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import TextIO

from tui.app.output import raw_stream
from tui.domain.inert import inert
from tui.domain.sweep.outcome import SweepStatus
from tui.domain.sweep.spec import SweepSpec
from tui.tune.journal import Journal, journal_path
from tui.tune.report import progress_line, trial_line
from tui.tune.run import SweepRun


class Printer:
    """Progress: a line per finished trial; on a terminal one line updated in place too."""

    def __init__(self, out: TextIO, tty: bool) -> None:
        # The updating line's own CSI goes to the terminal itself; the text is made inert.
        self._out, self._tty = raw_stream(out), tty
        self._seen: set[int] = set()
        self._last = ""

    def show(self, status: SweepStatus) -> None:
        """Print what is new in ``status``."""
        # A twin's predictions are counted on the progress line, not printed one by one: a
        # twin-first sweep ranks the whole space (hundreds of candidates) before its first
        # start, and re-ranks it after each.
        fresh = [t for t in status.trials if t.index not in self._seen and not t.predicted]
        for trial in fresh:
            self._seen.add(trial.index)
            self._print(trial_line(trial, status.objective))
        line = progress_line(status)
        if self._tty:
            text = f"{line} · {status.message}" if status.message else line
            self._out.write("\r\x1b[2K" + inert(text)[:200])
            self._out.flush()
        elif fresh and line != self._last:
            self._print(line)
        self._last = line

    def _print(self, text: str) -> None:
        prefix = "\r\x1b[2K" if self._tty else ""
        self._out.write(prefix + inert(text) + "\n")
        self._out.flush()

    def end(self) -> None:
        """Leave the updating line behind."""
        if self._tty:
            self._out.write("\n")


def open_journal(data_dir: Path, spec: SweepSpec, fresh: bool) -> Journal:
    """The sweep's journal (an earlier one renamed aside first when ``fresh``)."""
    path = journal_path(data_dir, spec.sweep_id())
    if fresh and path.exists():
        path.replace(path.with_suffix(f".{datetime.now():%Y%m%d%H%M%S}.old"))
    return Journal(path, spec)


@contextlib.contextmanager
def stop_on_signals(run: SweepRun) -> Iterator[None]:
    """Ctrl-C and SIGTERM stop ``run`` (cut short, resumable) while the block runs."""
    loop = asyncio.get_running_loop()
    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(sig, run.stop)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
