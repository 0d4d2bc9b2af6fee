"""The console's side of its load process: a runner with ``LoadRunner``'s interface.

:class:`ProcessLoadRunner` starts ``python -m tui.load.worker`` for each load (an argv
list, its own process group), writes the :class:`~tui.load.job.LoadJob` on its stdin (the
API key goes there, never in argv), and reads its JSON lines: progress to the caller's
callback, then the typed :class:`~tui.domain.results.BenchResult` (issue 23). The UI's
loop only reads a line a second; every timestamp is taken in the worker.

Cancelling writes ``cancel`` and waits for the partial result; a worker that has not
answered within ``cancel_grace_s`` has its process group killed. A run whose awaiting
task is cancelled (the console closing) kills the group at once; a console that dies
closes the worker's stdin, which ends the worker (see :mod:`tui.load.worker`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections import deque
from collections.abc import Callable, Mapping
from pathlib import Path

from pydantic import SecretStr, ValidationError

from tui.domain.errors import one_line
from tui.domain.results import BenchResult
from tui.domain.url_credentials import UrlCredential
from tui.domain.workload import LoadProgress, LoadSpec
from tui.load.errors import LoadError
from tui.load.job import CANCEL_LINE, ErrorLine, LoadJob, ProgressLine, ResultLine, decode
from tui.server import children

WORKER_MODULE = "tui.load.worker"
LINE_LIMIT = 16 << 20
"""The longest line read from the worker (a result with every error text fits easily)."""
STDERR_LINES = 20
"""Lines of the worker's stderr kept to explain an exit without a result."""
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[2])


class LoadProcessError(LoadError):
    """The load process ended without a result, or said something that is not a line.

    ``partial``: what it had measured when it died (from its last progress line), so the
    run is recorded as a failed load with its counts instead of being lost.
    """

    def __init__(
        self, message: str, *, hint: str | None = None, partial: BenchResult | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.partial = partial


def measured_before_death(
    spec: LoadSpec, progress: LoadProgress | None, why: str
) -> BenchResult | None:
    """A partial, failed result from the last progress line of a worker that died: the
    requests done, failed and cut, the seconds it ran, ``why`` as its error. The progress's
    rolling rates and percentiles are not bench serve's statistics: left out, not faked."""
    if progress is None:
        return None
    cut = progress.in_flight
    done = progress.done
    return BenchResult(
        duration=progress.elapsed,
        completed=done,
        failed=progress.failed + cut,
        request_throughput=done / progress.elapsed if progress.elapsed > 0 else 0.0,
        num_prompts=progress.total,
        endpoint=spec.endpoint,
        cancelled=True,
        not_sent=max(0, progress.total - done - progress.failed - cut),
        errors=[why],
    )


class ProcessLoadRunner:
    """Runs each load in its own process; one at a time (the load service's rule)."""

    def __init__(
        self,
        *,
        api_key: str | None = None,
        credential: UrlCredential | None = None,
        progress_interval_s: float = 1.0,
        cancel_grace_s: float = 15.0,
        python: str = sys.executable,
    ) -> None:
        self._api_key = SecretStr(api_key) if api_key else None
        self._credential = credential  # the server URL's user:password, if it had one
        self._interval = progress_interval_s
        self._grace = cancel_grace_s
        self._python = python
        self._proc: asyncio.subprocess.Process | None = None
        self._ended: asyncio.Event | None = None
        self._cancelled = False  # asked while the worker was starting: said once it is up

    def __repr__(self) -> str:  # never the key
        return f"ProcessLoadRunner(running={self.running})"

    @property
    def running(self) -> bool:
        """Whether a load process is running."""
        return self._ended is not None and not self._ended.is_set()

    @property
    def pid(self) -> int | None:
        """The running worker's pid (its process group's id too)."""
        proc = self._proc
        return proc.pid if proc is not None and proc.returncode is None else None

    async def run(
        self,
        spec: LoadSpec,
        *,
        base_url: str,
        model: str,
        on_progress: Callable[[LoadProgress], None] | None = None,
        goodput: Mapping[str, float] | None = None,
    ) -> BenchResult:
        """Run ``spec`` in a worker process; the result, partial after :meth:`cancel`."""
        if self.running:
            raise LoadError("a load run is already in progress on this runner")
        job = LoadJob(
            spec=spec,
            base_url=base_url,
            model=model,
            goodput=dict(goodput or {}),
            api_key=self._api_key,
            progress_interval_s=self._interval,
            url_user=SecretStr(cred.user) if (cred := self._credential) else None,
            url_password=SecretStr(cred.password) if cred else None,
        )
        self._ended = ended = asyncio.Event()
        self._proc, self._cancelled = None, False
        try:
            proc = self._proc = await asyncio.create_subprocess_exec(
                *self.argv(),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,  # its own group: killed as one, deaf to the tty's ^C
                env=self._env(),
                limit=LINE_LIMIT,
            )
            children.started(proc.pid)  # at once: a listener (a cluster worker's warden) knows it
            return await self._talk(proc, job, on_progress)
        finally:
            await self._reap()
            ended.set()

    def argv(self) -> list[str]:
        """The worker's command line (no arguments: the job goes over stdin)."""
        return [self._python, "-m", WORKER_MODULE]

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        # The worker imports this very copy of vtc, wherever it was imported from.
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = _PACKAGE_ROOT + (os.pathsep + path if path else "")
        env["VTC_WORKER_PARENT"] = str(os.getpid())
        return env

    async def _talk(
        self,
        proc: asyncio.subprocess.Process,
        job: LoadJob,
        on_progress: Callable[[LoadProgress], None] | None,
    ) -> BenchResult:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        tail: deque[str] = deque(maxlen=STDERR_LINES)
        errors = asyncio.create_task(_collect(proc.stderr, tail))
        seen: list[LoadProgress] = []  # the last progress line: what a killed worker measured

        def progressed(progress: LoadProgress) -> None:
            seen[:] = [progress]
            if on_progress is not None:
                on_progress(progress)

        try:
            proc.stdin.write(job.model_dump_json().encode() + b"\n")
            if self._cancelled:  # cancel() came while the process was being started
                proc.stdin.write(CANCEL_LINE)
            await proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            pass  # it died at once: its exit code and stderr say why, below
        try:
            answer = await _read_answer(proc.stdout, progressed)
            code = await proc.wait()
            await errors  # the worker is gone: its stderr ends
        finally:
            errors.cancel()
        if isinstance(answer, ResultLine):
            return answer.result
        if isinstance(answer, ErrorLine):
            raise LoadError(answer.message, hint=answer.hint or None)
        said = f": {tail[-1]}" if tail else ""
        why = f"the load process exited with code {code} and no result{said}"
        last = seen[0] if seen else None
        raise LoadProcessError(why, partial=measured_before_death(job.spec, last, why))

    async def cancel(self) -> None:
        """Cut every stream of the running load; wait for its partial result to be read.

        A worker that does not finish within ``cancel_grace_s`` is killed with its group.
        """
        proc, ended = self._proc, self._ended
        if ended is None or ended.is_set():
            return
        self._cancelled = True
        if proc is not None and proc.stdin is not None and not proc.stdin.is_closing():
            with contextlib.suppress(BrokenPipeError, ConnectionResetError, RuntimeError):
                proc.stdin.write(CANCEL_LINE)
                await proc.stdin.drain()
        try:
            await asyncio.wait_for(ended.wait(), self._grace)
        except TimeoutError:
            if self._proc is not None:
                _kill_group(self._proc)
            await ended.wait()

    async def _reap(self) -> None:
        """After the run, or when its task is cancelled: nothing of the worker survives."""
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            _kill_group(proc)
            with contextlib.suppress(ProcessLookupError):
                await asyncio.shield(proc.wait())
        if proc.stdin is not None:
            proc.stdin.close()


async def _read_answer(
    stdout: asyncio.StreamReader, on_progress: Callable[[LoadProgress], None] | None
) -> ResultLine | ErrorLine | None:
    """Progress lines to ``on_progress`` until stdout ends; the last result or error."""
    answer: ResultLine | ErrorLine | None = None
    try:
        while line := await stdout.readline():
            message = decode(line)
            if isinstance(message, ProgressLine):
                if on_progress is not None:
                    on_progress(message.progress)
            else:
                answer = message
    except (ValidationError, ValueError) as exc:
        raise LoadProcessError(
            f"the load process said something unreadable: {one_line(exc)}"
        ) from exc
    return answer


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def _collect(stream: asyncio.StreamReader, tail: deque[str]) -> None:
    """Keep the last lines of the worker's stderr (sanitised: printable text only)."""
    with contextlib.suppress(ValueError, asyncio.LimitOverrunError):
        while line := await stream.readline():
            text = "".join(c for c in line.decode(errors="replace").strip() if c.isprintable())
            if text:
                tail.append(text[:300])
