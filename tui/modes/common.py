"""What every mode decides the same way: the starting flags, the history, the session.

Each mode (demo, local vLLM, attach, sweep) builds its own backends and sources; the
pieces here are the ones they share: where the form starts (preset, ``-- serve`` line,
``--config`` file, ``--model``), the run store and its history, and assembling a
:class:`~tui.session.Session` from the services.
"""

from __future__ import annotations

import dataclasses
import socket
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tui.domain.credentials import Credentials
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import serve_command
from tui.domain.presets import Preset
from tui.domain.results import RunRecord
from tui.domain.workload import LoadSpec
from tui.modes.adapters import STOP_GRACE_S
from tui.modes.options import ConsoleOptions, SetupError
from tui.modes.sources import HostReader, MetricsReader, local_client
from tui.server.adopted import AdoptedServer, ServerStateKeeper, inspect_state_file
from tui.session.bus import EventBus
from tui.session.facade import Session
from tui.session.hub import GpuPolicy, GpuReader, TelemetryHub
from tui.session.loads import LoadRunnerLike, LoadService
from tui.session.port import SessionInfo
from tui.session.preflight import CliLoader, Estimator, Preflight
from tui.session.relaunch import ReleaseWaiter
from tui.session.repro import Reproducer, ReproRecorder
from tui.session.runbook import RunBook
from tui.session.slot import ServerSlot
from tui.store.config_file import load_config_file
from tui.store.console_files import ConsoleFiles
from tui.store.form_file import FormRead
from tui.store.history import RunStore
from tui.store.presets import load_presets
from tui.store.run_liveness import settle_gone_runs
from tui.store.server_state import ServerStateError, ServerStateFile
from tui.tune.lanes import ClusterLanes
from tui.tune.service import SweepService
from tui.twin.service import TwinService


@dataclass
class StartingPoint:
    """Where the form starts, and what reading it produced besides flags."""

    flags: ServeFlags
    load: LoadSpec
    preset: Preset | None
    presets: list[Preset]
    secrets: dict[str, str] = field(default_factory=dict)  # env name -> value, out of argv
    notices: list[str] = field(default_factory=list)


def _from_serve_args(argv: Sequence[str], point: StartingPoint) -> ServeFlags:
    try:
        command = serve_command(argv)
    except VtcError as exc:
        raise SetupError(f"the serve command line after --: {exc.one_line()}") from exc
    point.secrets.update(command.env)  # taken out of the argv before anything stores it
    point.notices.extend(f"-- serve: {note}" for note in command.notes)
    return command.flags


def check_serve_line(options: ConsoleOptions) -> None:
    """Judge the ``-- serve`` line's flags before anything else is looked at (the executable,
    the history, the devices): a bad flag is the one line the operator sees. Raises
    :class:`SetupError`."""
    if options.serve_args:
        scratch = StartingPoint(ServeFlags(model="-"), LoadSpec(), None, [])
        _from_serve_args(options.serve_args, scratch)


def _from_config(path: Path, model: str | None, point: StartingPoint) -> ServeFlags:
    try:
        imported = load_config_file(path, model=model)
    except VtcError as exc:
        raise SetupError(f"--config: {exc.one_line()}") from exc
    point.secrets.update(imported.secret_env)
    point.notices.extend(f"--config {path.name}: {note}" for note in imported.notes)
    return imported.flags


def starting_point(
    options: ConsoleOptions,
    *,
    default_preset: str | None = None,
    fallback: ServeFlags | None = None,
) -> StartingPoint:
    """The form's first flags: ``-- serve`` line > ``--config`` > preset > ``--model`` > fallback.

    ``--model`` overrides the model of whichever came first. Raises :class:`SetupError`.
    """
    catalog = load_presets()
    name = options.preset or (default_preset if not options.serve_args else None)
    preset = catalog.get(name) if name else None
    if name and preset is None:
        why = catalog.why_skipped(name)
        if why is not None:  # it exists, but could not be used: say why, not "no such preset"
            raise SetupError(f"preset {name!r} was skipped: {why}", hint="vtc presets lists them")
        known = ", ".join(p.name for p in catalog.presets)
        raise SetupError(f"no preset called {name!r}", hint=f"known: {known}")
    load = preset.workload if preset is not None and preset.workload else LoadSpec()
    point = StartingPoint(ServeFlags(model="-"), load, preset, list(catalog.presets))
    point.notices.extend(f"preset skipped: {error}" for error in catalog.errors)
    if options.serve_args:
        point.flags = _from_serve_args(options.serve_args, point)
        point.preset = None
    elif options.config is not None:
        point.flags = _from_config(options.config, options.model, point)
    elif preset is not None:
        point.flags = preset.flags
    elif options.model:
        point.flags = ServeFlags(model=options.model)
    elif fallback is not None:
        point.flags = fallback
    else:
        raise SetupError(
            "name a model",
            hint="--model NAME, --preset NAME (see `vtc presets`), `-- serve MODEL [flags]`, "
            "--config FILE; or try `vtc --demo`",
        )
    if options.model:
        point.flags = point.flags.replace(model=options.model)
    return point


def open_history(path: Path, notices: list[str]) -> tuple[RunStore, list[RunRecord]]:
    """The run store at ``path`` and the runs it holds (the board's history).

    A damaged history is moved aside by the store and a fresh one started; what happened is
    added to ``notices`` (one line each) for the console to say.
    """
    store = RunStore(path)
    for lost in settle_gone_runs(store):  # a live run whose server is gone: closed as lost
        notices.append(f"History: run {lost.id} closed as lost: {lost.ended_because}")
    history = store.list()
    notices.extend(f"History: {line}" for line in store.notice.lines())
    return store, history


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@dataclass
class Services:
    """The adapters a mode chose, before they become the session's services."""

    store: RunStore
    history: list[RunRecord]
    slot: ServerSlot
    metrics: MetricsReader
    runner: LoadRunnerLike  # the console's: tui.load.process.ProcessLoadRunner
    gpu: GpuReader | None = None
    host: HostReader | None = None
    gpu_policy: GpuPolicy = field(default_factory=GpuPolicy)  # where the GPU reading comes from
    estimator: Estimator | None = None
    cli: CliLoader | None = None
    release: ReleaseWaiter | None = None
    reproducer: Reproducer | None = None
    files: ConsoleFiles | None = None  # exports, saved presets, log tails (the board's keys)
    twin_gpu: str | None = None  # the demo's catalogue GPU: the twin of its simulated server
    twin: bool = False  # predictions by the twin of the watched server (the console's modes)
    twin_profile: str | None = None  # --sim-profile: that profile (else one of the model's)
    twin_runner: Callable[[], LoadRunnerLike] | None = None  # a calibration's load runner
    twin_design: tuple[float, int] = (1.0, 2)  # k's calibration: (scale, passes)
    cluster: ClusterLanes | None = None  # sweeps on a Ray cluster (demo and local consoles)


def assemble(info: SessionInfo, services: Services, *, poll_interval_s: float) -> Session:
    """A session over the services a mode built (the one place they are joined).

    A session that launches servers also runs sweeps on them (``tui.tune``): their loads
    carry the sweep's goodput thresholds, their journals live beside the run history.
    """
    bus = EventBus()
    sweeps = None
    if services.slot.can_launch:
        sweeps = SweepService(
            data_dir=services.store.path.parent,
            emit=bus.emit,
            client=local_client,
            estimator=services.estimator,
            machine=info.label,
            twin_gpu=services.twin_gpu,
            cluster=services.cluster,
        )
        info = dataclasses.replace(info, sweeps=sweeps)
    twin = None
    if services.twin:
        twin = TwinService(
            services.store.path.parent,
            services.twin_profile,
            local_client,
            runner=services.twin_runner,
            design=services.twin_design,
        )
        info = dataclasses.replace(info, twin=twin)
    book = RunBook(services.store, services.history, bus.emit, session_id=uuid.uuid4().hex[:12])
    hub = TelemetryHub(
        emit=bus.emit,
        interval_s=poll_interval_s,
        gpu=services.gpu,
        host=services.host,
        metrics=services.metrics,
        policy=services.gpu_policy,
        record=book.apply,
        trust_flags=services.slot.can_launch,  # attached: the form's flags are not its own
    )
    session = Session(
        info,
        bus=bus,
        book=book,
        slot=services.slot,
        hub=hub,
        preflight=Preflight(services.estimator, services.cli),
        loads=LoadService(services.runner, bus.emit),
        release=services.release,
        repro=ReproRecorder(services.reproducer, book, hub),
        files=services.files,
    )
    if sweeps is not None:
        sweeps.bind(session)
    if twin is not None:
        twin.bind(session)
    return session


def named_start(options: ConsoleOptions) -> bool:
    """Whether the command line names where the form starts (a preset, a config file, a
    model, a ``-- serve`` line): it then wins over the form a previous console left."""
    return bool(options.serve_args or options.config or options.preset or options.model)


def resume_form(point: StartingPoint, kept: FormRead) -> None:
    """Start ``point`` from the form the last console left, when one was kept (its preset
    shown as chosen only while it is still offered); a kept form that could not be used
    says so in one line (issue 39: a relaunch reset the form)."""
    if kept.note:
        point.notices.append(kept.note)
    saved = kept.saved
    if saved is None:
        return
    point.flags, point.load = saved.flags, saved.load
    point.preset = next((p for p in point.presets if p.name == saved.preset), None)


@dataclass
class Reattach:
    """What the state file says about a server a previous console left running."""

    keeper: ServerStateKeeper
    existing: AdoptedServer | None = None
    flags: ServeFlags | None = None  # what it runs with: the form starts there
    notices: list[str] = field(default_factory=list)
    protected: frozenset[int] = frozenset()  # a live run another console still watches


def reattach(
    data_dir: Path,
    *,
    demo: bool,
    credentials: Credentials,
    history: Sequence[RunRecord],
    grace_s: float = STOP_GRACE_S,
) -> Reattach:
    """Read the mode's state file: a server to adopt, or a notice (never acting on a stale pid)."""
    state_file = ServerStateFile.in_data_dir(data_dir, demo=demo)
    found = inspect_state_file(state_file)
    result = Reattach(ServerStateKeeper(state_file, mode="demo" if demo else "vllm"))
    if found.notice:
        result.notices.append(found.notice)
    record = found.record
    if record is None:
        other = _watched_elsewhere(state_file)
        result.protected = frozenset({other} if other is not None else set())
        return result
    stored = next((r for r in history if r.id == record.run_id), None)
    result.existing = AdoptedServer(
        record,
        api_key=credentials.api_key,
        grace_s=grace_s,
        startup=stored.startup if stored is not None else None,
    )
    result.flags = stored.flags if stored is not None else None
    return result


def _watched_elsewhere(state_file: ServerStateFile) -> int | None:
    """The run id of a server another live console watches (its run stays live)."""
    try:
        record = state_file.read()
    except ServerStateError:
        return None
    return record.run_id if record is not None else None
