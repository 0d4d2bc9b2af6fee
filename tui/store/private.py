"""Files and folders only their owner may read: the history, state files, logs, journals.

A run's record holds its command line, its server log may echo a prompt, a state file names
a server's pid and URL: none of that is for the other users of a shared GPU box. Each is
created ``0600`` in a folder created ``0700`` (whatever the umask), and a history or log
file found readable by others is narrowed on open. Standard library only: the log relay
imports it.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import BinaryIO, TextIO

FILE_MODE = 0o600
DIR_MODE = 0o700


def private_dir(path: Path) -> Path:
    """``path`` (and missing parents) created ``0700``; an existing folder is left as it is."""
    missing = [p for p in (path, *path.parents) if not p.exists()]
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
    for created in missing:  # mkdir's mode applies to the last one only, and the umask cuts it
        with contextlib.suppress(OSError):
            os.chmod(created, DIR_MODE)
    return path


def private_file(path: Path) -> Path:
    """``path`` created empty ``0600`` if missing, else narrowed to ``0600`` (when ours)."""
    private_dir(path.parent)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
    try:
        if os.fstat(fd).st_mode & 0o077:
            with contextlib.suppress(OSError):  # another user's file: leave it
                os.fchmod(fd, FILE_MODE)
    finally:
        os.close(fd)
    return path


def open_private_append_text(path: Path) -> TextIO:
    """``path`` open for appending text, line-buffered, created ``0600``."""
    private_file(path)
    return path.open("a", encoding="utf-8", errors="replace", buffering=1)


def open_private_append_bytes(path: Path) -> BinaryIO:
    """``path`` open for appending bytes, unbuffered, created ``0600``."""
    private_file(path)
    return path.open("ab", buffering=0)
