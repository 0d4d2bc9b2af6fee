"""The console's load process: ``python -m tui.load.worker`` (issue 23).

Runs one :class:`~tui.load.job.LoadJob` with the engine ``vtc bench`` uses
(:class:`~tui.load.runner.LoadRunner`, its GC frozen as a process that exists to run one
load), on an event loop that does nothing else. Reads the job from stdin, answers JSON
lines on stdout (:mod:`tui.load.job`), then exits.

- A ``cancel`` line on stdin cuts every stream; the partial result is still reported.
- End of stdin means the console is gone: the load is cut short and the process exits,
  so a load never outlives its console (on Linux the kernel also sends SIGTERM when the
  parent dies, ``PR_SET_PDEATHSIG``, in case the pipe is held open elsewhere).
- Anything else printed on stdout by a library goes to stderr: stdout carries only the
  protocol's lines.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
from typing import BinaryIO

from pydantic import ValidationError

from tui.domain.errors import VtcError, one_line
from tui.load.job import CANCEL_LINE, ErrorLine, LoadJob, ProgressLine, ResultLine, encode
from tui.load.runner import LoadRunner

JOB_LINE_LIMIT = 1 << 20
"""The longest job line accepted (a LoadSpec and a URL take well under 2 KB)."""
_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Linux: SIGTERM when the parent dies (best effort elsewhere: stdin's end suffices)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    if os.getppid() != parent:  # died before the request was made
        os.kill(os.getpid(), signal.SIGTERM)


async def _stdin() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=JOB_LINE_LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


async def _watch(reader: asyncio.StreamReader, runner: LoadRunner) -> None:
    """Cancel on a ``cancel`` line or at the end of stdin (the console went away)."""
    while True:
        line = await reader.readline()
        if not line or line == CANCEL_LINE:
            runner.cancel_nowait()
            if not line:
                return
        # any other line is ignored: the protocol has no other verb


async def serve(reader: asyncio.StreamReader, out: BinaryIO) -> int:
    """Read the job, run it, write its lines; the exit code (0: a result was written)."""

    def send(message: ProgressLine | ResultLine | ErrorLine) -> None:
        out.write(encode(message))
        out.flush()

    try:
        job = LoadJob.model_validate_json(await reader.readline())
    except (ValidationError, ValueError) as exc:
        send(ErrorLine(message=f"bad load job: {one_line(exc)}"))
        return 2
    runner = LoadRunner(
        api_key=job.api_key.get_secret_value() if job.api_key is not None else None,
        credential=job.credential(),
        progress_interval_s=job.progress_interval_s,
        freeze_gc=True,
        client="vtc-worker",
    )
    watcher = asyncio.create_task(_watch(reader, runner))
    try:
        result = await runner.run(
            job.spec,
            base_url=job.base_url,
            model=job.model,
            goodput=job.goodput,
            on_progress=lambda p: send(ProgressLine(progress=p)),
        )
    except VtcError as exc:
        send(ErrorLine(message=exc.message, hint=exc.hint or ""))
        return 1
    except Exception as exc:  # the console shows it as the load's one line
        send(ErrorLine(message=one_line(exc)))
        return 1
    finally:
        watcher.cancel()
    send(ResultLine(result=result))
    return 0


def main() -> int:
    """The worker's entry point (the console starts it with an argv list, no arguments)."""
    _die_with_parent(int(os.environ.get("VTC_WORKER_PARENT", os.getppid())))
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print() must never corrupt the protocol
    sys.stdout = sys.stderr

    async def run() -> int:
        return await serve(await _stdin(), out)

    try:
        return asyncio.run(run())
    except BrokenPipeError:  # the console is gone: nobody to tell
        return 1


if __name__ == "__main__":
    sys.exit(main())
