"""The console's twin: predictions for the form and the board, and calibration in place.

:class:`TwinService` is the session's :class:`~tui.session.port.TwinControl` (built by
:func:`tui.modes.common.assemble`). Its profile is the one named with ``--sim-profile``, or
the newest profile in the data dir of the model the form names; a profile fitted on another
model, device or vLLM is marked in every label (:func:`tui.domain.profile.identity_mismatch`).
Profiles are read from disk once per model (not per keystroke), and a prediction is made
once per distinct command line, load and server, in a worker thread, never on the
console's loop: the same edit asked again (a redraw, a second widget) gets the same
prediction. :meth:`TwinService.calibrate` runs ``vtc calibrate``'s procedure on the server
the console watches now, and the new profile becomes the twin.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import httpx

from tui.domain.calibration import Progress, design
from tui.domain.capacity import CapacityAnswer
from tui.domain.errors import VtcError, one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction
from tui.domain.profile import Profile, ProfileError, ProfileIdentity, identity_mismatch
from tui.domain.results import RunRecord
from tui.domain.sweep.slo import SloLimits
from tui.domain.workload import LoadSpec
from tui.server.log_excerpt import LogReadError, read_log_excerpt
from tui.session.loads import LoadRunnerLike
from tui.store.capacity_answers import save_answer
from tui.store.profiles import list_profiles, load_profile
from tui.twin.calibrate import Calibration
from tui.twin.capacity import twin_capacity
from tui.twin.predict import predict, server_identity

CONSOLE_BUDGET_S = 240.0
"""The most a calibration from the console takes (its loads; the fit adds a few seconds)."""
CACHED_PREDICTIONS = 64
"""Predictions kept (the form's recent edits, the board's runs)."""


class WatchedServer(Protocol):
    """What the twin needs of the session: the server watched now."""

    @property
    def base_url(self) -> str | None: ...
    @property
    def current(self) -> RunRecord | None: ...


class _SessionTarget:
    """The watched server as a calibration target."""

    def __init__(
        self, base_url: str, run: RunRecord, client: Callable[[], httpx.AsyncClient]
    ) -> None:
        self.base_url, self.flags, self._client = base_url, run.flags, client
        self._log = Path(run.log_path) if run.log_path else None

    def client(self) -> httpx.AsyncClient:
        return self._client()

    def log_text(self) -> str:
        if self._log is None:
            return ""
        try:
            return read_log_excerpt(self._log).text
        except LogReadError:
            return ""


class TwinService:
    """Predictions and calibration for one console (see the module docstring)."""

    def __init__(
        self,
        data_dir: Path,
        profile: str | None,
        client: Callable[[], httpx.AsyncClient],
        runner: Callable[[], LoadRunnerLike] | None = None,
        design: tuple[float, int] = (1.0, 2),
    ) -> None:
        self._runner = runner
        self._design = design  # k's designed loads: (scale, passes)
        self._data_dir = data_dir
        self._named = profile
        self._client = client
        self._profile: Profile | None = None  # the named (or calibrated) one, once read
        self._by_model: dict[str, Profile | None] = {}  # the newest per model, once read
        self._reading = threading.Lock()  # one worker reads; the others find its result
        self._made: OrderedDict[tuple[str, ...], asyncio.Future[Prediction | None]]
        self._made = OrderedDict()
        self._session: WatchedServer | None = None
        self.problem: str | None = None  # why no profile is used (one line)
        self.calibrating = False

    def bind(self, session: WatchedServer) -> None:
        """The session whose server :meth:`calibrate` measures."""
        self._session = session

    def _find(self, model: str) -> Profile | None:
        with self._reading:
            return self._read(model)

    def _read(self, model: str) -> Profile | None:
        if self._profile is not None:
            return self._profile
        if model in self._by_model:
            return self._by_model[model]
        try:
            if self._named:
                self._profile = load_profile(self._named, self._data_dir)
                return self._profile
            fits = []
            for summary in list_profiles(self._data_dir):
                if summary.usable:
                    p = load_profile(summary.name, self._data_dir)
                    if p.identity.model == model:
                        fits.append(p)
        except ProfileError as exc:
            self.problem = exc.one_line()
            return None
        found = max(fits, key=lambda p: p.created, default=None)
        self._by_model[model] = found
        return found

    def profile_for(self, model: str) -> Profile | None:
        """The profile the twin uses for ``model`` (blocking the first time: it reads files)."""
        return self._find(model)

    async def predict(self, flags: ServeFlags, load: LoadSpec) -> Prediction | None:
        """The twin's prediction for ``flags`` and ``load`` (``None``: no profile); made once
        per profile, command line, load and server (see the module docstring)."""
        profile = await asyncio.to_thread(self._find, flags.model)
        if profile is None:
            return None
        server = self._session.current if self._session is not None else None
        ident = server_identity(profile, flags, server)
        key = (profile.ref, flags.model_dump_json(), load.model_dump_json(), ident.describe())
        made = self._made.get(key)
        if made is None:
            made = asyncio.ensure_future(self._predict(profile, flags, load, server))
            self._made[key] = made
            while len(self._made) > CACHED_PREDICTIONS:
                self._made.popitem(last=False)
        else:
            self._made.move_to_end(key)
        return await asyncio.shield(made)

    async def _predict(
        self, profile: Profile, flags: ServeFlags, load: LoadSpec, server: RunRecord | None
    ) -> Prediction | None:
        try:
            return await asyncio.to_thread(predict, profile, flags, load, server)
        except Exception as exc:  # a command line the twin cannot read: no prediction
            self.problem = one_line(exc)
            return None

    async def calibrate(self, name: str, on_progress: Callable[[Progress], None]) -> str:
        """Calibrate the watched server into profile ``name``; it becomes the twin. One line
        saying what was saved."""
        session = self._session
        url = session.base_url if session is not None else None
        run = session.current if session is not None else None
        if url is None or run is None:
            raise VtcError("no server is ready to calibrate", hint="start one with r")
        if self.calibrating:
            raise VtcError("a calibration is already running")
        self.calibrating = True
        try:
            calibration = Calibration(
                name=name,
                target=_SessionTarget(url, run, self._client),
                loads=design(
                    run.flags.max_model_len or 4096,
                    self._design[0],
                    passes=self._design[1],
                    max_num_seqs=run.flags.max_num_seqs,
                ),
                data_dir=self._data_dir,
                budget_s=CONSOLE_BUDGET_S,
                runner=self._runner,
            )
            profile = await calibration.run(on_progress)
        finally:
            self.calibrating = False
        self._profile, self._named, self.problem = profile, profile.name, None
        self._made.clear()
        return f"twin {profile.ref} saved: {profile.identity.describe()}; {saved_errors(profile)}"

    async def capacity(
        self,
        flags: ServeFlags,
        load: LoadSpec,
        slos: SloLimits,
        *,
        target_rate: float | None = None,
        name: str = "current",
    ) -> CapacityAnswer:
        """The twin's capacity answer for ``flags`` (:func:`tui.twin.capacity.twin_capacity`,
        in a worker thread), kept for ``vtc report``; one line without a profile."""
        profile = await asyncio.to_thread(self._find, flags.model)
        if profile is None:
            raise VtcError(
                self.problem or f"no profile of this server ({flags.model})",
                hint="k calibrates it, or `vtc calibrate URL --name NAME`",
            )
        server = self._session.current if self._session is not None else None
        answer = await asyncio.to_thread(
            twin_capacity,
            profile,
            flags,
            load,
            slos,
            server=server,
            target_rate=target_rate,
            flags_name=name,
        )
        with contextlib.suppress(OSError):  # the report misses it; the console still shows it
            await asyncio.to_thread(save_answer, answer, self._data_dir)
        return answer

    def identity_note(self, server: ProfileIdentity) -> str:
        """What differs between the twin's profile and ``server`` ("" when it is the same)."""
        if self._profile is None:
            return ""
        return "; ".join(identity_mismatch(self._profile.identity, server))


def saved_errors(profile: Profile) -> str:
    """``validation error ±12% (median 5%, worst 31%); fit error ±7%; server's own spread
    3%``: what a calibration found, each error named by where it was measured."""
    val = profile.validation
    first = (
        f"validation error {val.label()} (median {val.median_pct:.0f}%, worst {val.worst_pct:.0f}%)"
        if val is not None
        else "not validated (too few load families)"
    )
    spread = profile.repeat_spread_pct
    floor = f"; server's own spread {spread:.0f}%" if spread is not None else ""
    return f"{first}; fit error {profile.fit_error.label()}{floor}"
