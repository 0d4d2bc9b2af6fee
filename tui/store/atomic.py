"""Every whole file vtc writes, written the one way: a temporary file beside it, flushed to
disk, then renamed over it, so a reader sees the old file or the new one and a write that
fails (a full disk, a permission) leaves what was there.

The failure is :class:`StoreWriteError`: one line naming the file and the cause (a
``VtcError``, and an ``OSError`` so that a caller that handles file errors handles it),
never a traceback; the temporary file is removed. Journals append instead
(:mod:`tui.store.journal_file`); the run history is SQLite's (:mod:`tui.store.history`).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from tui.domain.errors import VtcError

PUBLIC_MODE = 0o644
"""Exports, reports and presets: the user's own files, readable as any file they write."""

KEPT_HINT = "the file as it was is kept; free space (or fix the permission) and do it again"


class StoreWriteError(VtcError, OSError):
    """A file vtc could not write; what was there is kept."""


def write_atomic(path: Path, text: str, *, what: str, mode: int = PUBLIC_MODE) -> None:
    """Replace ``path`` with ``text`` (UTF-8) through a temporary file and a rename.

    ``what`` names the file in the error (``"export"``, ``"profile"``...); ``mode`` is the
    new file's permission (``0o600`` for vtc's private files). The folder must exist.
    """
    tmp: str | None = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())  # the rename must not land before the data
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except OSError as exc:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise StoreWriteError(
            f"cannot write the {what} {path}: {exc.strerror or exc}", hint=KEPT_HINT
        ) from None
