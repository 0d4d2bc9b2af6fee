"""Reading a file the operator named (a preset, a spec, a config, a log) only if it is one.

A FIFO named ``*.toml`` in the presets folder used to hang ``vtc presets``: ``open()`` of a
FIFO waits for a writer. Every such read here opens with ``O_NONBLOCK`` (an open that
never waits), checks with ``fstat`` that the descriptor is a regular file, and refuses
anything else (FIFO, device, socket, directory) with :class:`NotRegularFileError`, an
``OSError`` whose ``strerror`` says what the path is, so the callers' one-line ``cannot read
PATH: ...`` messages hold unchanged. Paths of any length or with a NUL never crash a check
(:func:`is_regular_file`: ``ENAMETOOLONG`` is "not there").
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
from pathlib import Path
from typing import BinaryIO

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFileError(OSError):
    """The path is not a regular file (``strerror`` says what it is)."""


def kind_of(mode: int) -> str:
    """``a FIFO``, ``a directory``...: what a non-regular file is, in words."""
    return next((word for test, word in _KINDS if test(mode)), "not a regular file")


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """``path`` open for reading (binary), if it is a regular file; never waits to open."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(
                errno.EINVAL, f"not a regular file ({kind_of(mode)})", os.fspath(path)
            )
        flags = fcntl.fcntl(fd, fcntl.F_GETFL)
        fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular_bytes(path: str | os.PathLike[str], limit: int | None = None) -> bytes:
    """Up to ``limit`` bytes (all without one) of the regular file ``path``."""
    with open_regular(path) as fh:
        return fh.read() if limit is None else fh.read(limit)


def read_regular_text(path: str | os.PathLike[str], limit: int | None = None) -> str:
    """The regular file ``path`` as UTF-8 (``UnicodeDecodeError`` if it is not)."""
    return read_regular_bytes(path, limit).decode("utf-8")


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a regular file; ``False`` for any path the system cannot look up
    (too long, a NUL, a component that is not a folder, no permission)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def is_directory(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a directory (``False`` for any path that cannot be looked up)."""
    try:
        return stat.S_ISDIR(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def local_path(text: str) -> Path | None:
    """``text`` (a model id, a tokenizer) as a local path, ``~`` expanded where it can be;
    ``None`` when it cannot be one (a NUL byte). ``~nobody/x`` stays literal."""
    if "\x00" in text:
        return None
    try:
        return Path(text).expanduser()
    except (RuntimeError, ValueError):  # no home for that user
        return Path(text)
