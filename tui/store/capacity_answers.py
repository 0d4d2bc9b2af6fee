"""Capacity answers kept in the data dir, for ``vtc report`` and the next console.

Each answer ``vtc capacity`` (or the console's capacity view) gives is one JSON file,
``<data dir>/capacity/<UTC time>-<n>.json``, written atomically; :func:`recent_answers`
reads the newest back (an unreadable file is skipped, never fatal: the report goes on).
"""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path

from pydantic import ValidationError

from tui.domain.capacity import CapacityAnswer
from tui.store.bounded_read import UntrustedFileError, read_text

FOLDER = "capacity"
MOST_BYTES = 4 * 2**20
KEPT = 50
"""Answers kept; older files are removed when a new one is saved."""


def answers_dir(data_dir: Path) -> Path:
    """Where the answers are kept."""
    return data_dir / FOLDER


def save_answer(answer: CapacityAnswer, data_dir: Path) -> Path:
    """Write ``answer`` (a new file) and drop the oldest beyond :data:`KEPT`; the path."""
    folder = answers_dir(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S%f")
    path = folder / f"{stamp}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(answer.model_dump_json(indent=1), encoding="utf-8")
    tmp.replace(path)
    for old in sorted(folder.glob("*.json"))[:-KEPT]:
        with contextlib.suppress(OSError):
            old.unlink()
    return path


def recent_answers(data_dir: Path, most: int = 5) -> list[CapacityAnswer]:
    """The newest ``most`` answers, newest first (unreadable files skipped)."""
    folder = answers_dir(data_dir)
    if not folder.is_dir():
        return []
    out: list[CapacityAnswer] = []
    for path in sorted(folder.glob("*.json"), reverse=True):
        try:
            out.append(
                CapacityAnswer.model_validate_json(
                    read_text(path, max_bytes=MOST_BYTES, what="capacity answer")
                )
            )
        except (OSError, UntrustedFileError, ValidationError, ValueError):
            continue
        if len(out) >= most:
            break
    return out
