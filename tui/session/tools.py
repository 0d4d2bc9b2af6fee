"""The board's commands on runs: repeat one, export one, save the form as a preset, read a log.

Repeating is what makes the board's noise verdicts possible (:mod:`tui.domain.board.noise`):
the same flags and the same workload, run again, form a group whose spread is the
machine's noise. A repeat is the operator's own loop done for them: restart with the run's
flags, wait until that run is ready (or has ended), run its workload; N times, stopping at
the first repeat that does not serve or whose load is cut short.

Files (exports, presets, logs) are read and written by the store's adapter it is given,
in a thread: never on the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from tui.domain.board.baseline import run_label
from tui.domain.board.saved import SavedBoard
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.log_tail import LogTail
from tui.domain.presets import Preset
from tui.domain.results import BenchResult, RunRecord, RunStatus
from tui.domain.saved_form import SavedForm
from tui.domain.workload import LoadSpec
from tui.session.port import RunUpdated, SessionEvent

MAX_REPEATS = 20
"""More repeats than this in one go is a typo, not a noise estimate."""


class RunFiles(Protocol):
    """The files the board writes and reads (``tui.store.console_files`` implements it)."""

    def write_export(self, run: RunRecord, fmt: str) -> Path: ...
    def save_preset(self, preset: Preset) -> Path: ...
    def log_tail(self, path: str) -> LogTail: ...
    def read_board(self) -> SavedBoard: ...
    def write_board(self, saved: SavedBoard) -> None: ...
    def write_form(self, saved: SavedForm) -> None: ...


class Driver(Protocol):
    """What repeating needs of the session: restart, load, and its event feed."""

    @property
    def can_restart(self) -> bool: ...
    def subscribe(self, callback: Callable[[SessionEvent], None]) -> None: ...
    async def restart(self, flags: ServeFlags) -> RunRecord: ...
    async def run_load(self, spec: LoadSpec) -> BenchResult | None: ...


class RepeatError(VtcError):
    """A repeat that could not be done or was cut short."""


class RunTools:
    """Implements :class:`~tui.session.port.SessionTools` over a session and the store's files."""

    def __init__(self, driver: Driver, files: RunFiles | None) -> None:
        self._driver = driver
        self._files = files
        self._waiting: dict[int, asyncio.Future[RunRecord]] = {}
        self._repeating = False
        driver.subscribe(self._on_event)

    # -- repeat ---------------------------------------------------------------------------------
    async def repeat(self, run: RunRecord, times: int) -> list[RunRecord]:
        """Run ``run``'s flags and workload ``times`` more times; returns the new runs.

        Raises :class:`RepeatError` when it cannot start, or names the repeat that did not
        serve (its diagnosis as the hint) or whose load failed or was cancelled; the runs
        made before that stay on the board.
        """
        label = run_label(run)
        workload = run.workload
        if workload is None or run.bench is None:
            raise RepeatError(
                f"{label} ran no load: nothing to repeat like for like",
                hint="b runs a load on the ready server first",
            )
        if not 1 <= times <= MAX_REPEATS:
            raise RepeatError(f"repeat {label} 1 to {MAX_REPEATS} times, not {times}")
        if not self._driver.can_restart:
            raise RepeatError("attached to a server this console did not start: cannot repeat")
        if self._repeating:
            raise RepeatError("a repeat is already under way", hint="s stops it")
        self._repeating = True
        try:
            return await self._repeat(run.flags, workload, times, label)
        finally:
            self._repeating = False

    async def _repeat(
        self, flags: ServeFlags, workload: LoadSpec, times: int, label: str
    ) -> list[RunRecord]:
        made: list[RunRecord] = []
        for n in range(1, times + 1):
            where = f"repeat {n}/{times} of {label}"
            record = await self._settled(await self._driver.restart(flags))
            made.append(record)
            if record.status is not RunStatus.READY:
                cause = record.diagnosis.summary if record.diagnosis else record.ended_because
                raise RepeatError(
                    f"{where}: {run_label(record)} {record.status.value}", hint=cause or None
                )
            result = await self._driver.run_load(workload)
            if result is None or result.cancelled:
                why = "cancelled" if result is not None else "failed"
                raise RepeatError(f"{where}: the load on {run_label(record)} {why}")
        return made

    async def _settled(self, record: RunRecord) -> RunRecord:
        """``record`` once it is no longer starting (ready, failed, stopped...)."""
        if record.status is not RunStatus.STARTING or record.id is None:
            return record
        future: asyncio.Future[RunRecord] = asyncio.get_running_loop().create_future()
        self._waiting[record.id] = future
        try:
            return await future
        finally:
            self._waiting.pop(record.id, None)

    def _on_event(self, event: SessionEvent) -> None:
        if not isinstance(event, RunUpdated) or event.record.status is RunStatus.STARTING:
            return
        future = self._waiting.get(event.record.id) if event.record.id is not None else None
        if future is not None and not future.done():
            future.set_result(event.record)

    # -- files ----------------------------------------------------------------------------------
    def _need_files(self) -> RunFiles:
        if self._files is None:
            raise VtcError("this console keeps no files (no data directory)")
        return self._files

    async def export(self, run: RunRecord, fmt: str) -> Path:
        """Write ``run`` as ``fmt`` under the data dir's ``exports/`` (in a thread)."""
        files = self._need_files()
        try:
            return await asyncio.to_thread(files.write_export, run, fmt)
        except OSError as exc:
            raise VtcError(f"cannot write the export: {exc.strerror or exc}") from exc

    async def save_preset(self, preset: Preset) -> Path:
        """Save ``preset`` as a user preset (in a thread); the file written."""
        files = self._need_files()
        try:
            return await asyncio.to_thread(files.save_preset, preset)
        except OSError as exc:
            raise VtcError(f"cannot save preset {preset.name!r}: {exc.strerror or exc}") from exc

    async def log_tail(self, run: RunRecord) -> LogTail:
        """The end of ``run``'s log file, or a note saying why there is none."""
        if not run.log_path:
            return LogTail((), "no log file recorded for this run")
        if self._files is None:
            return LogTail((), "this console keeps no files")
        return await asyncio.to_thread(self._files.log_tail, run.log_path)

    # -- the board's lasting choices ----------------------------------------------------------
    async def saved_board(self) -> SavedBoard:
        """The pin and view the last console left (the defaults without files)."""
        if self._files is None:
            return SavedBoard()
        return await asyncio.to_thread(self._files.read_board)

    async def save_board(self, saved: SavedBoard) -> None:
        """Keep the pin and view for the next console and ``vtc runs`` (in a thread)."""
        if self._files is None:
            return
        try:
            await asyncio.to_thread(self._files.write_board, saved)
        except OSError as exc:
            raise VtcError(f"cannot keep the board's pin and view: {exc.strerror or exc}") from exc

    async def save_form(self, saved: SavedForm) -> None:
        """Keep the flags form for the next console (in a thread)."""
        if self._files is None:
            return
        try:
            await asyncio.to_thread(self._files.write_form, saved)
        except OSError as exc:
            raise VtcError(f"cannot keep the form: {exc.strerror or exc}") from exc
