"""The sweep's journal: a file in the data dir that makes a sweep resumable.

One JSON object per line: a header (the sweep id, the spec), then every finished trial as
it finishes, and a ``done`` line at the end. A trial is written only once it has finished,
so after a crash (a SIGKILL included) the journal holds exactly the finished trials; a
half-written last line is ignored. Trials are found again by their key (the strategy's
note and the exact argv), so a resumed sweep replays them without starting a server. One
process writes a journal: the sweep's lock beside it (:mod:`tui.store.lock`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tui.domain.errors import one_line
from tui.domain.sweep.outcome import TrialOutcome
from tui.domain.sweep.spec import SweepSpec
from tui.store.bounded_read import UntrustedFileError, parse_json, read_json_lines, read_text
from tui.store.journal_file import append_records

SWEEPS_DIR = "sweeps"


def journal_path(data_dir: Path, sweep_id: str) -> Path:
    """``<data dir>/sweeps/<sweep id>.jsonl``."""
    return data_dir / SWEEPS_DIR / f"{sweep_id}.jsonl"


@dataclass(frozen=True)
class JournalSummary:
    """What the console lists of a journal: which sweep, how far it got."""

    path: Path
    sweep_id: str
    name: str
    strategy: str
    trials: int
    done: bool
    machine: str | None = None  # where its trials were measured (``None``: not recorded)


class Journal:
    """Append-only trial log of one sweep."""

    def __init__(self, path: Path, spec: SweepSpec, *, machine: str | None = None) -> None:
        self.path = path
        self.spec = spec
        self.machine = machine  # where its trials are measured (header; a resume checks it)
        self.finished: dict[str, TrialOutcome] = {}
        self.was_done = False
        if path.exists():
            self._read()

    def _read(self) -> None:
        """The journal's whole records (a line torn by a kill is cut off the file)."""
        try:
            lines = read_json_lines(self.path, what="sweep journal", finite=False)
        except UntrustedFileError as exc:
            raise UntrustedFileError(exc.message, hint="start over with --fresh") from None
        if lines.torn_at is not None:
            os.truncate(self.path, lines.torn_at)
        for data in lines.records:
            if not isinstance(data, dict):
                continue
            if data.get("event") == "done":
                self.was_done = True
            elif "trial" in data:
                try:
                    outcome = TrialOutcome.model_validate(data["trial"])
                except ValidationError:
                    continue
                self.finished[outcome.key] = outcome

    def _write(self, data: dict[str, object]) -> None:
        # Created 0600: a journal holds the sweep's commands (the model, its paths).
        lines = []
        if not self.path.exists():
            header = {"sweep_id": self.spec.sweep_id(), "spec": self.spec.model_dump(mode="json")}
            if self.machine:
                header["machine"] = self.machine
            lines.append(json.dumps(header))
        lines.append(json.dumps(data))
        append_records(self.path, lines, "sweep journal")

    def record(self, outcome: TrialOutcome) -> bool:
        """Write a finished trial, once (blocking: call it from a worker thread).

        A trial already in the journal (its key: kind, note, exact argv) is not written again:
        the journal never holds one trial finished twice. Returns whether it was written.
        One process writes a sweep's journal (:class:`tui.store.lock.SweepLock`); this guard
        also covers a strategy that finishes the same trial twice.
        """
        if outcome.key in self.finished:
            return False
        self._write({"trial": outcome.model_dump(mode="json")})
        self.finished[outcome.key] = outcome
        return True

    def close_done(self) -> None:
        """Mark the sweep finished (a later run with the same spec replays it whole)."""
        self._write({"event": "done"})
        self.was_done = True


def list_journals(data_dir: Path) -> list[JournalSummary]:
    """Every sweep journal in ``data_dir``, newest first."""
    folder = data_dir / SWEEPS_DIR
    if not folder.is_dir():
        return []
    out = []
    paths = sorted(folder.glob("*.jsonl"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in paths:
        summary = _summarise(path)
        if summary is not None:
            out.append(summary)
    return out


def read_summary(path: Path) -> JournalSummary | None:
    """One journal's summary; ``None`` when it is missing or unreadable."""
    return _summarise(path) if path.is_file() else None


def _summarise(path: Path) -> JournalSummary | None:
    try:
        lines = read_text(path, what="sweep journal").splitlines()
        header = parse_json(lines[0], finite=False) if lines else None
    except (ValueError, UntrustedFileError):  # not JSON, too deep, a FIFO, unreadable
        return None
    if not isinstance(header, dict) or not isinstance(header.get("spec"), dict):
        return None
    spec = header["spec"]
    trials = sum(1 for line in lines[1:] if line.startswith('{"trial"'))
    done = any(line.startswith('{"event": "done"') for line in lines[1:])
    return JournalSummary(
        path,
        str(header.get("sweep_id", path.stem)),
        str(spec.get("name", "?")),
        str(spec.get("strategy", "?")),
        trials,
        done,
        str(header["machine"]) if header.get("machine") else None,
    )


def load_spec_from_journal(path: Path) -> SweepSpec:
    """The spec a journal was started with (to resume it from the console)."""
    try:
        header = parse_json(read_text(path, what="sweep journal").splitlines()[0], finite=False)
        return SweepSpec.model_validate(header["spec"])
    except (ValueError, IndexError, KeyError, TypeError) as exc:  # ValidationError is one
        raise UntrustedFileError(f"cannot read sweep journal {path}: {one_line(exc)}") from None
