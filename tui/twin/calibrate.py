"""``vtc calibrate``'s procedure: the designed loads on a real server, a journal, the fit.

:class:`Calibration` runs :func:`tui.domain.calibration.design`'s loads one after another
against a server (launched or attached: :class:`CalibrationTarget`, built by
:mod:`tui.modes.calibrate`) with the load engine of ``vtc bench``, reads the server's
``/metrics`` around each (its step count, from ``vllm:iteration_tokens_total``), writes
each finished load to the journal (``<data dir>/calibrations/NAME.jsonl``: a calibration
stopped by Ctrl-C, a closed terminal or SIGKILL resumes without repeating finished
loads), then fits the profile on the twin and scores each load family on a fit that never
saw it (:func:`tui.twin.validation.calibrate`), captures the model's shape, and saves it
(:func:`tui.store.profiles.save_profile`). The whole stays within ``budget_s``: after
each load the rest are sized again from the costs measured so far
(:func:`tui.twin.budget.plan`: fewer requests, then shorter long prompts, then a
lower top concurrency) so that every family and every pass completes, and the progress
line's ETA is those same estimates; a load still running at the budget's end is cut and
the fit uses the loads that finished.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import httpx

from tui.domain.calibration import (
    DesignedLoad,
    JournalLine,
    LogFacts,
    Progress,
    log_facts,
    memory_side,
)
from tui.domain.errors import VtcError
from tui.domain.flags.serve import ServeFlags
from tui.domain.profile import (
    UNFITTED,
    FitSample,
    Profile,
    ProfileIdentity,
    ServerSide,
    StepCoefficients,
)
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.load.runner import LoadRunner
from tui.session.loads import LoadRunnerLike
from tui.sim.twin import model_facts, resolved_batch
from tui.store.bounded_read import UntrustedFileError, json_object, parse_json, read_json_lines
from tui.store.journal_file import JournalWriteError, append_records
from tui.store.lock import SweepLock
from tui.store.profiles import check_name, save_profile
from tui.telemetry.scrape import ScrapeError, fetch_page, parse_families
from tui.twin.budget import Plan, plan
from tui.twin.fit import DEFAULT_RECIPE, FitRecipe
from tui.twin.validation import calibrate

MIN_LOADS = 3
"""Fewer finished loads than this cannot separate the coefficients: no profile is saved."""
WARMUPS = 2
"""Warm-up requests before the first designed load."""
ITERATION_COUNT = "vllm:iteration_tokens_total_count"
CACHE_CONFIG = "vllm:cache_config_info"
#: The server's own phase histograms (vLLM's engine clock), read as sum and count.
PHASES = {
    "queue": "vllm:request_queue_time_seconds",
    "prefill": "vllm:request_prefill_time_seconds",
    "decode": "vllm:request_decode_time_seconds",
}


def sent_load(designed: DesignedLoad, *, warm: bool) -> LoadSpec:
    """``designed``'s load as it is sent: the first with :data:`WARMUPS` warm-up requests
    (the server's first requests pay for its lazy start-up); the budget's plan sizes the
    rest from it as run."""
    return designed.load.model_copy(update={"num_warmups": WARMUPS}) if warm else designed.load


class CalibrationError(VtcError):
    """The calibration could not measure or fit (one line; the journal keeps what finished)."""


class CalibrationTarget(Protocol):
    """The server a calibration measures."""

    @property
    def base_url(self) -> str:
        """Where it answers (no trailing slash)."""
        ...

    @property
    def flags(self) -> ServeFlags:
        """Its flags (launched: as given; attached: as read from it)."""
        ...

    def client(self) -> httpx.AsyncClient:
        """A client for its pages (credentials as the console sends them)."""
        ...

    def log_text(self) -> str:
        """Its startup log so far ("" when none can be read)."""
        ...


@dataclass(frozen=True)
class ServerFacts:
    """What the server says of itself before the loads."""

    served_model: str
    root: str
    vllm_version: str
    labels: Mapping[str, str]
    sim_device: str | None  # vtc_sim_info's gpu_name: a simulator says what it simulates
    max_model_len: int = 0  # /v1/models'


def journal_path(data_dir: Path, name: str) -> Path:
    """The journal of calibration ``name``."""
    return data_dir / "calibrations" / f"{check_name(name)}.jsonl"


def read_journal(path: Path, flags: ServeFlags) -> dict[str, JournalLine]:
    """Finished loads of an earlier run of the same command (others: ignored).

    Read in whole records (:func:`tui.store.bounded_read.read_json_lines`); a last line
    torn by a kill is cut off the file here, so the next record starts on a line of its own.
    """
    done: dict[str, JournalLine] = {}
    if not path.exists():
        return done
    try:
        journal = read_json_lines(path, what="calibration journal", finite=False)
    except UntrustedFileError as exc:
        raise CalibrationError(exc.message, hint="run it again with --fresh") from None
    if journal.torn_at is not None:
        os.truncate(path, journal.torn_at)
    for record in journal.records:
        try:
            line = JournalLine.model_validate(record)
        except ValueError:
            continue  # another schema
        if _command(line.sample.flags) == _command(flags):
            done[line.name] = line
    return done


def _command(flags: ServeFlags) -> ServeFlags:
    """The flags that make a server what it is (where it listens left out)."""
    return flags.model_copy(update={"host": None, "port": None})


def _append(path: Path, line: JournalLine) -> None:
    """``line`` appended as one whole record (a full disk: one line, the journal whole)."""
    try:
        append_records(path, [line.model_dump_json()], "calibration journal")
    except JournalWriteError as exc:
        raise CalibrationError(exc.message, hint=exc.hint) from None


def calibration_lock(data_dir: Path, name: str) -> SweepLock:
    """The lock of calibration ``name``: one process measures a name at a time."""
    return SweepLock(
        journal_path(data_dir, name).with_suffix(".lock"), sweep_id=name, kind="calibration"
    )


def _page_json(text: str, page: str) -> Any:
    """``text`` as strict JSON; the ``ValueError`` names ``page`` (an HTML error page...)."""
    try:
        return parse_json(text)
    except ValueError as exc:
        raise ValueError(f"{page} is not JSON ({exc})") from None


async def server_facts(target: CalibrationTarget) -> ServerFacts:
    """``/v1/models``, ``/version`` and ``/metrics`` of the target."""
    url = target.base_url
    async with target.client() as client:
        try:
            models = _page_json(await fetch_page(client, f"{url}/v1/models"), "/v1/models")
            models = models["data"][0]
            version = json_object(
                _page_json(await fetch_page(client, f"{url}/version"), "/version"), "/version"
            ).get("version", "")
            models = json_object(models, "/v1/models' first model")
            page = await fetch_page(client, f"{url}/metrics")
        except (ScrapeError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise CalibrationError(f"cannot read the server at {url}: {exc}") from None
    families = await asyncio.to_thread(parse_families, page)
    labels: dict[str, str] = {}
    sim = None
    for family in families:
        for sample in family.samples:
            if sample.name == CACHE_CONFIG:
                labels = dict(sample.labels)
            elif sample.name == "vtc_sim_info":
                sim = sample.labels.get("gpu_name")
    return ServerFacts(
        served_model=str(models.get("id", "")),
        root=str(models.get("root") or models.get("id", "")),
        vllm_version=str(version),
        labels=labels,
        sim_device=sim,
        max_model_len=int(models.get("max_model_len") or 0),
    )


async def server_counters(target: CalibrationTarget) -> dict[str, float] | None:
    """The server's counters a load moves: ``steps`` (``vllm:iteration_tokens_total``'s
    count) and each phase histogram's ``_sum`` and ``_count`` (``None``: no page)."""
    try:
        async with target.client() as client:
            page = await fetch_page(client, f"{target.base_url}/metrics")
    except ScrapeError:
        return None
    families = await asyncio.to_thread(parse_families, page)
    wanted = {ITERATION_COUNT: "steps"}
    for phase, name in PHASES.items():
        wanted[f"{name}_sum"] = f"{phase}_sum"
        wanted[f"{name}_count"] = f"{phase}_count"
    out: dict[str, float] = {}
    for family in families:
        for sample in family.samples:
            key = wanted.get(sample.name)
            if key is not None:
                out[key] = out.get(key, 0.0) + sample.value
    return out


def server_side(before: dict[str, float] | None, after: dict[str, float] | None) -> ServerSide:
    """What the server counted between two reads of :func:`server_counters`."""
    if before is None or after is None:
        return ServerSide()

    def moved(key: str) -> float | None:
        if key not in before or key not in after:
            return None
        return after[key] - before[key]

    steps = moved("steps")
    means: dict[str, float | None] = {}
    count = 0
    for phase in PHASES:
        total, n = moved(f"{phase}_sum"), moved(f"{phase}_count")
        means[phase] = total / n if total is not None and n else None
        count = max(count, int(n or 0))
    return ServerSide(
        steps=int(steps) if steps is not None else None,
        requests=count,
        queue_s=means["queue"],
        prefill_s=means["prefill"],
        decode_s=means["decode"],
    )


def identity_of(
    flags: ServeFlags, facts: ServerFacts, log: LogFacts, device: str | None
) -> ProfileIdentity:
    """Which server this is: the model, the device (named, the simulator's, or the log's
    kind), vLLM's version, dtype, quantization and parallelism."""
    kind = log.device_kind or ("gpu" if facts.sim_device else "cpu" if not device else "gpu")
    named = device or facts.sim_device or ("cpu" if kind == "cpu" else "gpu (name not known)")
    return ProfileIdentity(
        model=flags.model,
        device=named,
        device_kind="cpu" if kind == "cpu" else "gpu",
        vllm_version=facts.vllm_version or log.vllm_version or "",
        dtype=flags.dtype or "auto",
        quantization=flags.quantization,
        tensor_parallel_size=flags.tensor_parallel_size or 1,
        pipeline_parallel_size=flags.pipeline_parallel_size or 1,
    )


async def reset_prefix_cache(base_url: str, client: Callable[[], httpx.AsyncClient]) -> bool:
    """``POST /reset_prefix_cache`` (a server in dev mode); whether it answered 200."""
    try:
        async with client() as c:
            response = await c.post(f"{base_url}/reset_prefix_cache", timeout=10.0)
    except httpx.HTTPError:
        return False
    return response.status_code == 200


ProgressSink = Callable[[Progress], None]


@dataclass
class Calibration:
    """One calibration of ``target`` into profile ``name`` (see the module docstring)."""

    name: str
    target: CalibrationTarget
    loads: list[DesignedLoad]
    data_dir: Path
    budget_s: float = 300.0
    device: str | None = None  # the device's name when the server cannot say it
    fresh: bool = False  # ignore the journal of an earlier run
    # Who sends the loads (default: vtc bench's engine in this process; the console passes
    # its load process, so its own screen never delays the measuring clock).
    runner: Callable[[], LoadRunnerLike] | None = None
    recipe: FitRecipe = DEFAULT_RECIPE  # the fit (and each validation fold: the same)

    async def run(self, on_progress: ProgressSink | None = None) -> Profile:
        """Measure, fit and save under the name's lock; the saved profile."""
        with calibration_lock(self.data_dir, self.name):
            return await self._run(on_progress)

    async def _run(self, on_progress: ProgressSink | None) -> Profile:
        facts = await server_facts(self.target)
        flags = self.target.flags
        path = journal_path(self.data_dir, self.name)
        if self.fresh and path.exists():
            path.replace(path.with_suffix(f".{int(time.time())}.old"))
        done = await asyncio.to_thread(read_journal, path, flags)
        started = time.monotonic()
        # Each load as it ran and its seconds: the costs the rest is sized from (plan).
        ran = {k: (v.sample.load, v.seconds) for k, v in done.items()}
        while True:
            sized = plan(self.loads, ran, self.budget_s)
            todo = [(i, d) for i, d in enumerate(sized.loads) if d.name not in done]
            left = self.budget_s - (time.monotonic() - started)
            if not todo or left <= 0:
                break
            i, designed = todo[0]
            report = self._reporter(on_progress, started, sized, done, designed.name)
            report(None)
            run = sent_load(designed, warm=i == 0)
            line = await self._measure(designed, run, facts, left, report=report)
            if line is None:
                break  # cut at the budget's end
            await asyncio.to_thread(_append, path, line)
            done[line.name] = line
            ran[line.name] = (run, line.seconds)
        if on_progress is not None:
            self._reporter(on_progress, started, sized, done, "fitting")(None)
        samples = [done[d.name].sample for d in self.loads if d.name in done]
        return await asyncio.to_thread(self._fit, facts, samples, started)

    def _reporter(
        self,
        sink: ProgressSink | None,
        started: float,
        sized: Plan,
        done: Mapping[str, JournalLine],
        name: str,
    ) -> Callable[[float | None], None]:
        def report(current_s: float | None) -> None:
            if sink is None:
                return
            elapsed = time.monotonic() - started
            left = sized.eta(done, current_s or 0.0)
            if left is not None:  # the budget cuts what it would not leave
                left = min(left, max(0.0, self.budget_s - elapsed))
            count = sum(d.name in done for d in sized.loads)
            sink(Progress(count, len(sized.loads), name, elapsed, left, self.budget_s))

        return report

    async def _measure(
        self,
        designed: DesignedLoad,
        load: LoadSpec,
        facts: ServerFacts,
        left_s: float,
        *,
        report: Callable[[float | None], None],
    ) -> JournalLine | None:
        runner = self.runner() if self.runner else LoadRunner(client="vtc-bench")
        # The twin serves each load from a cold cache: so does the server, where it can.
        await reset_prefix_cache(self.target.base_url, self.target.client)
        before = await server_counters(self.target)
        t0 = time.monotonic()
        running = runner.run(
            load,
            base_url=self.target.base_url,
            model=facts.served_model,
            on_progress=lambda p: report(p.elapsed),
        )
        task = asyncio.ensure_future(running)
        try:
            result: BenchResult = await asyncio.wait_for(asyncio.shield(task), left_s)
        except TimeoutError:
            await runner.cancel()
            with contextlib.suppress(Exception):
                await task
            return None
        except asyncio.CancelledError:  # stopped (Ctrl-C, k's worker): cut the load too
            with contextlib.suppress(Exception):
                await asyncio.shield(runner.cancel())
            task.cancel()
            raise
        secs = time.monotonic() - t0
        if not result.completed:
            raise CalibrationError(
                f"load {designed.name}: no request completed ({'; '.join(result.errors[:2])})"
            )
        server = server_side(before, await server_counters(self.target))
        if load.num_warmups:  # the warm-up requests are in the server's counts, not the load's
            server = ServerSide()
        sample = FitSample(
            name=designed.name,
            flags=self.target.flags,
            load=designed.load,
            result=result,
            server_steps=server.steps,
            server=server,
        )
        return JournalLine(name=designed.name, sample=sample, seconds=secs)

    def _fit(self, facts: ServerFacts, samples: list[FitSample], started: float) -> Profile:
        if len(samples) < MIN_LOADS:
            raise CalibrationError(
                f"only {len(samples)} of {len(self.loads)} loads finished within the budget "
                f"({self.budget_s:g} s): too few to fit",
                hint="raise --budget, or run the same command again: finished loads are kept",
            )
        flags = self.target.flags
        log = log_facts(self.target.log_text())
        identity = identity_of(flags, facts, log, self.device)
        model = model_facts(flags.model)  # read once here: predictions never read it
        mns, mnbt = resolved_batch(flags, identity, log.total_bytes, model)
        max_len = max(1, facts.max_model_len or flags.max_model_len or 1)
        memory = memory_side(
            facts.labels, log, max_model_len=max_len, max_num_seqs=mns, max_num_batched_tokens=mnbt
        )
        if memory is None:
            raise CalibrationError(
                "the server says nothing of its KV cache (no vllm:cache_config_info, no log)",
                hint="calibrate a server started without --disable-log-stats",
            )
        base = Profile(
            name=self.name,
            created=datetime.now(UTC).isoformat(timespec="seconds"),
            identity=identity,
            flags=flags,
            coefficients=StepCoefficients(),
            memory=memory,
            fit_error=UNFITTED,
            model=model,
            frontend_blocks=identity.device_kind == "cpu",
        )
        fitted = calibrate(base, samples, self.recipe)
        fitted = fitted.model_copy(update={"fit_seconds": time.monotonic() - started})
        return save_profile(fitted, self.data_dir)
