"""The console's twin: predictions for the form and the board, and calibration in place.

:class:`TwinService` is the session's :class:`~tui.session.port.TwinControl` (built by
:func:`tui.modes.common.assemble`). Its profile is the one named with ``--sim-profile``, or
the newest profile in the data dir of the model the form names; a profile fitted on another
model, device or vLLM is marked in every label (:func:`tui.domain.profile.identity_mismatch`).
Every prediction runs the twin in a worker thread, never on the console's loop.
:meth:`TwinService.calibrate` runs ``vtc calibrate``'s procedure on the server the console
watches now, and the new profile becomes the twin.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

import httpx

from tui.domain.calibration import Progress, design
from tui.domain.errors import VtcError, one_line
from tui.domain.flags.serve import ServeFlags
from tui.domain.prediction import Prediction
from tui.domain.profile import Profile, ProfileError, ProfileIdentity, identity_mismatch
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec
from tui.server.log_excerpt import LogReadError, read_log_excerpt
from tui.session.loads import LoadRunnerLike
from tui.sim.twin import predict
from tui.store.profiles import list_profiles, load_profile
from tui.tune.calibrate import Calibration

CONSOLE_POLISH = 40  # the fit's last step, kept short: the console waits for it
CONSOLE_BUDGET_S = 240.0
"""The most a calibration from the console takes (its loads; the fit adds a few seconds)."""


class WatchedServer(Protocol):
    """What the twin needs of the session: the server watched now."""

    @property
    def base_url(self) -> str | None: ...
    @property
    def current(self) -> RunRecord | None: ...


def to_prediction(
    profile: Profile, flags: ServeFlags, load: LoadSpec, server: RunRecord | None = None
) -> Prediction:
    """The twin's prediction as the domain carries it (blocking: run it in a thread).

    ``server``: the run watched now; its model, and its GPU and vLLM version where the
    machine reported them (not a simulator's), are checked against the profile's identity,
    and what differs is carried in the prediction's label.
    """
    made = predict(profile, flags, load)
    run = made.run
    caveat = "; ".join(identity_mismatch(profile.identity, server_identity(profile, flags, server)))
    return Prediction(
        profile=f"{profile.name} r{profile.revision}",
        error_pct=profile.error.median_pct,
        starts=made.starts,
        failure=made.failure,
        kv_tokens=made.kv_tokens,
        output_throughput=run.output_throughput if run else None,
        mean_ttft_ms=run.mean_ttft_ms if run else None,
        p99_ttft_ms=run.p99_ttft_ms if run else None,
        mean_tpot_ms=run.mean_tpot_ms if run else None,
        mean_e2el_ms=run.mean_e2el_ms if run else None,
        p99_e2el_ms=run.p99_e2el_ms if run else None,
        caveat=caveat,
    )


def server_identity(
    profile: Profile, flags: ServeFlags, server: RunRecord | None
) -> ProfileIdentity:
    """What is known of the server ``flags`` run on, in the profile's terms (unknown fields
    are the profile's own, so they never read as a difference)."""
    ident = profile.identity.model_copy(update={"model": flags.model})
    repro = server.repro if server is not None else None
    if repro is None or (repro.gpu_name or "").endswith("(simulated)"):
        return ident  # a simulator: the demo of this very profile
    update: dict[str, object] = {}
    if repro.vllm_version:
        update["vllm_version"] = repro.vllm_version.split("+")[0]
    if repro.gpu_name and ident.device_kind == "gpu":
        update["device"] = repro.gpu_name
    return ident.model_copy(update=update)


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
    ) -> None:
        self._runner = runner
        self._data_dir = data_dir
        self._named = profile
        self._client = client
        self._profile: Profile | None = None
        self._session: WatchedServer | None = None
        self.problem: str | None = None  # why no profile is used (one line)
        self.calibrating = False

    def bind(self, session: WatchedServer) -> None:
        """The session whose server :meth:`calibrate` measures."""
        self._session = session

    def _find(self, model: str) -> Profile | None:
        if self._profile is not None:
            return self._profile
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
            return max(fits, key=lambda p: p.created, default=None)
        except ProfileError as exc:
            self.problem = exc.one_line()
            return None

    def profile_for(self, model: str) -> Profile | None:
        """The profile the twin uses for ``model`` (blocking: it may read files)."""
        return self._find(model)

    async def predict(self, flags: ServeFlags, load: LoadSpec) -> Prediction | None:
        """The twin's prediction for ``flags`` and ``load`` (``None``: no profile)."""
        profile = await asyncio.to_thread(self._find, flags.model)
        if profile is None:
            return None
        server = self._session.current if self._session is not None else None
        try:
            return await asyncio.to_thread(to_prediction, profile, flags, load, server)
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
                loads=design(run.flags.max_model_len or 4096, passes=2),
                data_dir=self._data_dir,
                budget_s=CONSOLE_BUDGET_S,
                runner=self._runner,
                polish_evals=CONSOLE_POLISH,
            )
            profile = await calibration.run(on_progress)
        finally:
            self.calibrating = False
        self._profile, self._named, self.problem = profile, profile.name, None
        return (
            f"twin {profile.name} r{profile.revision} saved: {profile.identity.describe()}; "
            f"fit error ±{profile.error.median_pct:.0f}% (worst {profile.error.worst_pct:.0f}%)"
        )

    def identity_note(self, server: ProfileIdentity) -> str:
        """What differs between the twin's profile and ``server`` ("" when it is the same)."""
        if self._profile is None:
            return ""
        return "; ".join(identity_mismatch(self._profile.identity, server))
