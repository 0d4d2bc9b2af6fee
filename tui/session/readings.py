"""The newest reading of each telemetry source, the history, and what the panels are told.

Each reading is stamped with the hub's clock when it arrives, so a source that hangs (a
stalled thread, a scrape that never finishes) turns stale after two missed intervals
whatever times its samples carry (``tui.domain.freshness``). A poll that raised is a DOWN
reading with its reason. A *standing* reading (the simulated GPU released once its
simulator exited) describes a state rather than a poll: it is current until replaced.

Once an interval the hub asks for :meth:`Readings.status`: the freshness of every source,
the server's GPUs and the advice that holds over the last minute of /metrics samples.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from tui.domain.advice import Advice, AdviceInputs, advise
from tui.domain.flags.serve import ServeFlags
from tui.domain.freshness import Freshness, freshness
from tui.domain.gpus import server_gpu_indices
from tui.domain.history import TelemetryHistory
from tui.domain.telemetry import GpuSample, HostSample, ServerMetrics, SourceStatus
from tui.session.port import TelemetryStatus

ADVICE_WINDOW_S = 60.0
"""The advisor looks at this much of the newest /metrics samples."""


@dataclass(frozen=True)
class Stamped:
    """A reading's state as freshness reads it: when it arrived, its status, its reason."""

    t: float
    status: SourceStatus
    message: str = ""


class Readings:
    """The newest reading per source (``"gpu"``, ``"host"``, ``"metrics"``) and the history.

    ``flags``: the current run's flags, when they are known to be the server's (the
    advisor's and the tensor/pipeline sizes that mark the server's GPUs). ``server_pid``:
    the watched server's root pid when it runs on this machine under this console.
    """

    def __init__(
        self,
        *,
        interval_s: float,
        clock: Callable[[], float],
        cuda_visible_devices: str | None = None,
        history: TelemetryHistory | None = None,
    ) -> None:
        self.history = history if history is not None else TelemetryHistory()
        self.flags: ServeFlags | None = None
        self.server_pid: int | None = None
        self.watching = False
        self._interval = interval_s
        self._clock = clock
        self._cuda_visible_devices = cuda_visible_devices
        self._stamps: dict[str, Stamped] = {}
        self._gpu: GpuSample | None = None
        self._host: HostSample | None = None
        self._metrics: ServerMetrics | None = None
        self._gpu_standing = False
        self._server_gpus: frozenset[int] = frozenset()

    @property
    def gpu(self) -> GpuSample | None:
        """The GPU reading shown now."""
        return self._gpu

    @property
    def server_gpus(self) -> frozenset[int]:
        """The indices of the server's GPUs, as of the newest GPU reading (empty: unknown)."""
        return self._server_gpus

    def on_gpu(self, sample: GpuSample, *, standing: bool = False) -> None:
        """A GPU reading is shown (``standing``: a state, current until replaced)."""
        self._gpu, self._gpu_standing = sample, standing
        self._stamp("gpu", sample.status, sample.message)
        self._server_gpus = self._find_server_gpus()
        self.history.record_gpu(sample, self._server_gpus or None)

    def on_host(self, sample: HostSample) -> None:
        """A host reading."""
        self._host = sample
        self._stamp("host", sample.status, sample.message)
        self.history.record_host(sample)

    def on_metrics(self, sample: ServerMetrics) -> None:
        """A /metrics reading of the watched server."""
        self._metrics = sample
        self._stamp("metrics", sample.status, sample.message)
        self.history.record_metrics(sample)

    def on_failure(self, source: str, message: str) -> None:
        """A poll of ``source`` raised: DOWN with the reason until a reading says otherwise."""
        self._stamp(source, SourceStatus.DOWN, message)

    def status(self) -> TelemetryStatus:
        """Freshness of every source, the server's GPUs and the advice, as of now."""
        now = self._clock()
        gpu = self._fresh("gpu", now)
        stamp = self._stamps.get("gpu")
        if self._gpu_standing and stamp is not None:  # a state, not a poll: current, no age
            gpu = Freshness(
                stamp.status, None, "" if stamp.status is SourceStatus.OK else stamp.message
            )
        metrics = self._fresh("metrics", now) if self.watching else None
        return TelemetryStatus(
            gpu=gpu,
            metrics=metrics,
            host=self._fresh("host", now) if "host" in self._stamps else None,
            server_gpus=self._server_gpus,
            advice=tuple(self._advice()) if metrics is not None and metrics.ok else (),
        )

    # -- internals ------------------------------------------------------------------------------
    def _stamp(self, source: str, status: SourceStatus, message: str) -> None:
        self._stamps[source] = Stamped(self._clock(), status, message)

    def _fresh(self, source: str, now: float) -> Freshness:
        return freshness(self._stamps.get(source), now, self._interval)

    def _find_server_gpus(self) -> frozenset[int]:
        gpu = self._gpu
        if gpu is None or gpu.status is not SourceStatus.OK or self.server_pid is None:
            return frozenset()  # not a server of this console on this machine: cannot tell
        flags = self.flags
        return server_gpu_indices(
            gpu.devices,
            cuda_visible_devices=self._cuda_visible_devices,
            tensor_parallel_size=flags.tensor_parallel_size if flags else None,
            pipeline_parallel_size=flags.pipeline_parallel_size if flags else None,
            server_pids=self._host.server_pids if self._host is not None else (),
        )

    def _advice(self) -> list[Advice]:
        latest = self._metrics
        if latest is None or latest.status is not SourceStatus.OK:
            return []
        recent = self.history.recent_metrics(latest.t - ADVICE_WINDOW_S)
        inputs = AdviceInputs(recent, self.flags, self._gpu, self._server_gpus)
        return advise(inputs)
