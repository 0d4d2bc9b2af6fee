"""Journals (a sweep's trials, a calibration's loads) appended in whole records.

A record is one JSON line; each append is one ``write`` of whole lines on an ``O_APPEND``
descriptor, then ``fsync``. A write the disk could only take part of (``ENOSPC``) is cut
back off the file, so the journal ends on a whole record whatever happens, and the error is
:class:`JournalWriteError`: one line naming the file, never a traceback. The reading side
is :func:`tui.store.bounded_read.read_json_lines` (a line torn by a kill is cut on resume).
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from tui.domain.errors import VtcError
from tui.store.private import FILE_MODE, private_dir


class JournalWriteError(VtcError):
    """A journal that could not take a record (a full disk, a permission)."""


def append_records(path: Path, lines: list[str], what: str = "journal") -> None:
    """``lines`` (JSON, no newline in any) appended to ``path`` as whole records."""
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    try:
        private_dir(path.parent)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
        try:
            start = os.fstat(fd).st_size
            try:
                written = os.write(fd, data)
            except OSError:
                os.ftruncate(fd, start)  # nothing of a record the disk refused stays
                raise
            if written != len(data):
                os.ftruncate(fd, start)
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        raise JournalWriteError(
            f"cannot write the {what} {path}: {exc.strerror or exc}",
            hint="what it recorded so far is kept whole; free space and run the same "
            "command again: it resumes",
        ) from None
