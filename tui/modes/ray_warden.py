"""The warden a cluster worker starts (``python ray_warden.py SCRATCH``): a plain script.

It reads process ids, one a line, from its standard input, a pipe only its worker writes,
and opens a pidfd on each (the process itself, whatever pid numbers are reused later),
letting go of those that ended meanwhile (a worker serves trial after trial). When the
pipe closes, the worker is gone (closed, killed, its node going): each named process
still running is sent SIGTERM with its process group (vtc's servers and loads lead groups
of their own; vLLM's engine processes are in the server's), then SIGKILL after
:data:`GRACE_S`, and the worker's scratch folder is removed. Standard library only: it
starts in a moment and imports nothing of vtc.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import sys
import time

GRACE_S = 5.0


def _exited(fd: int) -> bool:
    """A pidfd turns readable once its process has exited."""
    return bool(select.select([fd], [], [], 0)[0])


def _signal(pid: int, fd: int, sig: signal.Signals) -> None:
    """``sig`` to the process and, where it leads one, its process group."""
    try:
        leads = os.getpgid(pid) == pid
        signal.pidfd_send_signal(fd, sig)
        if leads and not _exited(fd):  # the group still has its leader: the same group
            os.killpg(pid, sig)
    except OSError:
        pass  # gone meanwhile


def prune(watched: dict[int, int]) -> None:
    """Forget the watched processes that have exited (their pidfds closed)."""
    for pid, fd in list(watched.items()):
        if _exited(fd):
            os.close(fd)
            del watched[pid]


def stop(watched: dict[int, int], grace_s: float = GRACE_S) -> list[int]:
    """Stop every watched process still running (``pid -> pidfd``); the pids it stopped."""
    alive = {pid: fd for pid, fd in watched.items() if not _exited(fd)}
    for pid, fd in alive.items():
        _signal(pid, fd, signal.SIGTERM)
    end = time.monotonic() + grace_s
    while time.monotonic() < end and any(not _exited(fd) for fd in alive.values()):
        time.sleep(0.05)
    for pid, fd in alive.items():
        if not _exited(fd):
            _signal(pid, fd, signal.SIGKILL)
    return sorted(alive)


def main(argv: list[str]) -> int:
    """Watch until the worker's pipe closes, then stop and clear up."""
    scratch = argv[1] if len(argv) > 1 else None
    watched: dict[int, int] = {}
    for line in sys.stdin:  # ends when the worker is gone
        prune(watched)  # a worker serves trial after trial: their ended children let go
        try:
            pid = int(line)
            watched[pid] = os.pidfd_open(pid)
        except (ValueError, OSError):
            continue  # not a pid, or exited before it was named: nothing to stop
    stop(watched)
    if scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    sys.exit(main(sys.argv))
