"""The state file of the server a console started: how the next ``vtc`` finds it again.

A console that launches a server writes ``<data dir>/server.json`` (``demo-server.json``
for the demo) naming the process (pid, its creation time, its argv), where it answers, its
log and its run on the board. The server runs in its own session, so it outlives an SSH
drop; the next ``vtc`` reads this file to reattach to it, and ``vtc stop`` to stop it. The
file is removed when the server stops or exits.

Pure file I/O: whether the recorded process still runs is decided in
:mod:`tui.server.adopted`. Writes are atomic (a temporary file in the same directory,
fsynced, then renamed over the old one), so a reader never sees half a file.
"""

from __future__ import annotations

import contextlib
import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tui.domain.errors import VtcError
from tui.store.atomic import write_atomic
from tui.store.private import FILE_MODE, private_dir

STATE_FILE = "server.json"
MAX_STATE_BYTES = 1 << 20
"""A state file is a few hundred bytes; anything over this is not one (and is not read)."""
DEMO_STATE_FILE = "demo-server.json"


def state_file_name(demo: bool) -> str:
    """The state file's name in the data dir: the demo keeps its own."""
    return DEMO_STATE_FILE if demo else STATE_FILE


class ServerStateError(VtcError):
    """The state file exists but cannot be read as one (the message says why, on one line)."""


class ServerStateRecord(BaseModel):
    """One server a console launched, as the state file records it.

    ``pgid`` is the process group to signal (the pid: the supervisor starts the server
    with ``start_new_session``); ``create_time`` (psutil's, seconds since the epoch) tells
    the process from a later one that reuses its pid. ``console_pid`` and
    ``console_create_time`` name the console that watches it now; both are ``None`` once
    that console has detached (or when it is unknown).
    """

    model_config = ConfigDict(frozen=True)

    pid: int = Field(gt=0)
    pgid: int = Field(gt=0)
    create_time: float
    base_url: str
    argv: list[str]
    flags: dict[str, Any] = Field(default_factory=dict)
    log_path: str | None = None
    run_id: int | None = None
    mode: str = ""
    started_at: datetime = Field(default_factory=lambda: datetime.now(UTC))
    console_pid: int | None = None
    console_create_time: float | None = None


class ServerStateFile:
    """Read, atomically write and remove one state file."""

    def __init__(self, path: Path) -> None:
        self.path = path

    @classmethod
    def in_data_dir(cls, data_dir: Path, *, demo: bool) -> ServerStateFile:
        """The state file of ``vtc`` (or ``vtc --demo``) in ``data_dir``."""
        return cls(data_dir / state_file_name(demo))

    def exists(self) -> bool:
        """Whether a state file is there (valid or not)."""
        return self.path.exists()

    def read(self) -> ServerStateRecord | None:
        """The recorded server, or ``None`` when there is no file.

        Raises :class:`ServerStateError` for a file that is there but is not a state record
        (truncated by a full disk, edited by hand, another version's).
        """
        try:
            with self.path.open("rb") as fh:
                raw = fh.read(MAX_STATE_BYTES + 1)
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise ServerStateError(f"cannot read {self.path}: {exc.strerror or exc}") from exc
        if len(raw) > MAX_STATE_BYTES:
            raise ServerStateError(f"{self.path} is not a vtc server state file (too large)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ServerStateError(
                f"{self.path} is not a vtc server state file (not UTF-8 text at byte {exc.start})"
            ) from None
        try:
            return ServerStateRecord.model_validate_json(text)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first.get("loc", ())) or "file"
            raise ServerStateError(
                f"{self.path} is not a vtc server state file ({where}: {first['msg']})"
            ) from exc

    def write(self, record: ServerStateRecord) -> None:
        """Replace the file with ``record``, atomically (readers see the old or the new)."""
        private_dir(self.path.parent)  # the file itself: mkstemp's 0600
        data = json.dumps(record.model_dump(mode="json"), indent=2) + "\n"
        write_atomic(self.path, data, what="server state file", mode=FILE_MODE)
        # The rename itself is durable once the directory is synced (best effort).
        with contextlib.suppress(OSError):
            dir_fd = os.open(self.path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)

    def remove(self, *, pid: int | None = None) -> bool:
        """Delete the file; with ``pid``, only if it still records that process.

        The ``pid`` guard keeps a console from deleting a file that another console has
        since written for its own server. Returns whether a file was removed.
        """
        if pid is not None:
            try:
                record = self.read()
            except ServerStateError:
                return False  # not ours to judge: the next vtc reports it
            if record is None or record.pid != pid:
                return False
        try:
            self.path.unlink()
        except FileNotFoundError:
            return False
        return True


def file_to_stop(data_dir: Path, *, demo: bool) -> tuple[ServerStateFile, bool]:
    """The state file ``vtc stop`` acts on, and whether it is the demo's.

    ``--demo``: the demo's. Plain ``vtc stop``: the console's, unless only the demo's
    file records a server (a demo left running by a hang-up): then that one, so the
    server the operator is asking about is found whichever way it was started.
    """
    console = ServerStateFile.in_data_dir(data_dir, demo=False)
    demo_file = ServerStateFile.in_data_dir(data_dir, demo=True)
    if demo or (not console.exists() and demo_file.exists()):
        return demo_file, True
    return console, False
