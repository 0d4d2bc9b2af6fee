"""Pure parsing of ``vllm serve`` log lines into startup stages and the KV-cache report.

vLLM prefixes its log records with ``(<process> pid=<N>) <LEVEL> <MM-DD HH:MM:SS> [file:line]``
(``logger.py:28-33``, reference section 2.3); uvicorn, tqdm progress bars, tracebacks and
warnings printed by other libraries arrive without it. :func:`split_prefix` handles both.

The stage patterns come from the real CPU captures (``startup_eager_kv64M.log``,
``startup_pressure.log``, the ``fail_*`` logs) and the GPU texts quoted in reference sections
2.1-2.3. Nothing here does I/O: the supervisor feeds lines to a :class:`StageTracker` and
forwards the events it returns.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final, TypeAlias

from tui.domain.events import KvCacheReported, ServerEvent, Stage, StageReached

_PREFIX: Final = re.compile(r"^\((?P<proc>[^()]+?) pid=(?P<pid>\d+)\)\s?(?P<rest>.*)$")
_LEVEL: Final = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL) "
    r"(?P<ts>\d\d-\d\d \d\d:\d\d:\d\d)(?:\.\d+)? \[(?P<src>[^\]]+)\] ?(?P<msg>.*)$"
)


@dataclass(frozen=True)
class LogRecord:
    """One log line split into vLLM's prefix fields and the message.

    Fields of a prefix that the line does not carry are ``None``; ``message`` is the rest of
    the line with its leading indentation kept (tracebacks and pydantic blocks need it).
    """

    message: str
    process: str | None = None
    pid: int | None = None
    level: str | None = None
    timestamp: str | None = None
    source: str | None = None


def split_prefix(line: str) -> LogRecord:
    """Split ``(APIServer pid=N) INFO MM-DD HH:MM:SS [file:line] msg``; any part may be absent."""
    text = line.rstrip("\r\n")
    process: str | None = None
    pid: int | None = None
    m = _PREFIX.match(text)
    if m:
        process, pid, text = m.group("proc"), int(m.group("pid")), m.group("rest")
    lv = _LEVEL.match(text)
    if lv:
        return LogRecord(
            message=lv.group("msg"),
            process=process,
            pid=pid,
            level=lv.group("level"),
            timestamp=lv.group("ts"),
            source=lv.group("src"),
        )
    return LogRecord(message=text, process=process, pid=pid)


# -- the KV-cache report (reference 2.2, kv_cache_utils.py:2327-2334) -------------------------
KV_CACHE_SIZE: Final = re.compile(
    r"(\w+(?: \+ host)?) KV cache size: ([\d,]+) tokens, "
    r"Maximum concurrency for ([\d,]+) tokens per request: ([\d.]+)x"
)


def _int(text: str) -> int:
    return int(text.replace(",", ""))


def parse_kv_cache_line(line: str) -> KvCacheReported | None:
    """The ``<DEV> KV cache size: N tokens, Maximum concurrency ...: Cx`` line, if it is one."""
    m = KV_CACHE_SIZE.search(line)
    if not m:
        return None
    return KvCacheReported(
        device=m.group(1),
        tokens=_int(m.group(2)),
        max_model_len=_int(m.group(3)),
        max_concurrency=float(m.group(4)),
    )


# -- stages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class StageHit:
    """A line that belongs to ``stage``; ``detail`` carries its numbers when it has some."""

    stage: Stage
    detail: str = ""
    numbers: dict[str, float] = field(default_factory=dict)


_Builder: TypeAlias = Callable[[re.Match[str]], StageHit]


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _raw(m: re.Match[str], name: str) -> str:
    # Details repeat the log's own number text ("0.00 s", "12.0 GiB"), not a re-rendering.
    return m.group(name).replace(",", "")


def _weights_detail(m: re.Match[str]) -> StageHit:
    d = m.groupdict()
    numbers: dict[str, float] = {}
    parts: list[str] = []
    if d.get("gib") is not None:
        numbers["gib"] = _num(d["gib"])
        parts.append(f"{_raw(m, 'gib')} GiB")
    if d.get("seconds") is not None:
        numbers["seconds"] = _num(d["seconds"])
        parts.append(f"{_raw(m, 'seconds')} s")
    return StageHit(Stage.LOADING_WEIGHTS, " in ".join(parts), numbers)


def _plain(stage: Stage) -> _Builder:
    def build(_m: re.Match[str]) -> StageHit:
        return StageHit(stage)

    return build


def _seconds(stage: Stage, label: str) -> _Builder:
    def build(m: re.Match[str]) -> StageHit:
        s = _num(m.group("seconds"))
        return StageHit(stage, f"{label} {_raw(m, 'seconds')} s", {"seconds": s})

    return build


def _kv_memory(m: re.Match[str]) -> StageHit:
    kv, total = _num(m.group("kv")), _num(m.group("total"))
    return StageHit(
        Stage.PROFILING,
        f"{_raw(m, 'kv')} of {_raw(m, 'total')} GiB for KV cache ({m.group('how').lower()})",
        {"kv_gib": kv, "total_gib": total},
    )


def _available_kv(m: re.Match[str]) -> StageHit:
    gib = _num(m.group("gib"))
    return StageHit(
        Stage.PROFILING, f"{_raw(m, 'gib')} GiB available for KV cache", {"kv_gib": gib}
    )


def _auto_fit(m: re.Match[str]) -> StageHit:
    new = int(m.group("new"))
    old = m.groupdict().get("old")
    text = f"max_model_len auto-fit {old} -> {new}" if old else f"max_model_len {new} fits"
    return StageHit(Stage.PROFILING, text, {"max_model_len": new})


def _kv_size(m: re.Match[str]) -> StageHit:
    tokens, mml, conc = _int(m.group(2)), _int(m.group(3)), float(m.group(4))
    return StageHit(
        Stage.KV_CACHE,
        f"{tokens:,} tokens, {conc:.2f}x at {mml:,} tokens per request",
        {"tokens": tokens, "max_model_len": mml, "max_concurrency": conc},
    )


def _blocks(m: re.Match[str]) -> StageHit:
    blocks = _int(m.group("blocks"))
    return StageHit(Stage.KV_CACHE, f"{blocks:,} blocks", {"blocks": blocks})


def _graphs(m: re.Match[str]) -> StageHit:
    s, gib = _num(m.group("seconds")), _num(m.group("gib"))
    return StageHit(
        Stage.COMPILING,
        f"graphs captured in {_raw(m, 'seconds')} s, {_raw(m, 'gib')} GiB",
        {"seconds": s, "gib": gib},
    )


def _api(m: re.Match[str]) -> StageHit:
    url = m.groupdict().get("url")
    return StageHit(Stage.API_UP, url or "")


_STAGE_PATTERNS: Final[tuple[tuple[re.Pattern[str], _Builder], ...]] = (
    # Weights. GPU: gpu_model_runner.py:5149-5153; both: default_loader.py "Loading weights
    # took"; CPU: cpu_model_runner.py:68 "Starting to load model"; older vLLM: "Loading model
    # weights took X GB".
    (
        re.compile(
            r"Model loading took (?P<gib>[\d.]+) GiB(?: memory)? and (?P<seconds>[\d.]+) seconds"
        ),
        _weights_detail,
    ),
    (re.compile(r"Loading model weights took (?P<gib>[\d.]+) GB"), _weights_detail),
    (re.compile(r"Loading weights took (?P<seconds>[\d.]+) seconds"), _weights_detail),
    (re.compile(r"Starting to load model\b"), _plain(Stage.LOADING_WEIGHTS)),
    (re.compile(r"Loading safetensors checkpoint shards"), _plain(Stage.LOADING_WEIGHTS)),
    # Memory profiling / KV budget. GPU: gpu_worker.py:649-674,759-762; CPU: cpu_worker.py.
    (
        re.compile(
            r"(?P<how>Auto|Explicitly) set \((?P<kv>[\d.]+)/(?P<total>[\d.]+)\) GiB "
            r"for KV cache on node \d+"
        ),
        _kv_memory,
    ),
    (re.compile(r"Available KV cache memory: (?P<gib>-?[\d.]+) GiB"), _available_kv),
    (
        re.compile(r"Memory profiling takes (?P<seconds>[\d.]+) seconds"),
        _seconds(Stage.PROFILING, "profiled in"),
    ),
    (re.compile(r"skipped memory profiling"), _plain(Stage.PROFILING)),
    # --max-model-len -1 (kv_cache_utils.py:2466-2483).
    (
        re.compile(r"Auto-fit max_model_len: reduced from (?P<old>\d+) to (?P<new>\d+)"),
        _auto_fit,
    ),
    (
        re.compile(r"Auto-fit max_model_len: full model context length (?P<new>\d+) fits"),
        _auto_fit,
    ),
    # KV cache allocated (kv_cache_utils.py:2327-2334; older: "# GPU blocks: N").
    (KV_CACHE_SIZE, _kv_size),
    (re.compile(r"# (?:GPU|CPU) blocks: (?P<blocks>[\d,]+)"), _blocks),
    # torch.compile and CUDA graphs (gpu_model_runner.py:6582; cpu_model_runner.py:87).
    (
        re.compile(
            r"Graph capturing finished in (?P<seconds>[\d.]+) secs?, took (?P<gib>-?[\d.]+) GiB"
        ),
        _graphs,
    ),
    (
        re.compile(r"torch\.compile takes (?P<seconds>[\d.]+) s in total"),
        _seconds(Stage.COMPILING, "torch.compile"),
    ),
    (re.compile(r"Warming up model for the compilation"), _plain(Stage.COMPILING)),
    (re.compile(r"Dynamo bytecode transform time"), _plain(Stage.COMPILING)),
    (re.compile(r"Compiling a graph for"), _plain(Stage.COMPILING)),
    (re.compile(r"Capturing CUDA graphs?\b"), _plain(Stage.COMPILING)),
    # API server (entry.py:140; uvicorn).
    (re.compile(r"Starting vLLM (?:API )?server(?: \d+)? on (?P<url>\S+)"), _api),
    (re.compile(r"Uvicorn running on (?P<url>\S+)"), _api),
    (re.compile(r"Application startup complete"), _api),
)


def stage_of(line: str) -> StageHit | None:
    """The startup stage a log line shows, or ``None`` for a line that marks no stage."""
    message = split_prefix(line).message
    for pattern, build in _STAGE_PATTERNS:
        m = pattern.search(message)
        if m:
            return build(m)
    return None


class StageTracker:
    """Turns a stream of log lines into ``StageReached`` and ``KvCacheReported`` events.

    A stage is reported when its first line appears. It is reported once more, with the same
    stage and a ``detail``, when a later line of that stage carries numbers (``Model loading
    took 14.99 GiB memory and 5.1 seconds``, ``Graph capturing finished in 12 secs``): a
    consumer keeps the first ``elapsed`` as the stage's start and the latest ``detail``.
    Stages are reported in the order the log shows them (on GPU the torch.compile lines come
    during memory profiling, before the KV cache line).
    """

    def __init__(self) -> None:
        self._first: dict[Stage, StageReached] = {}
        self._detail: dict[Stage, str] = {}
        self.current: Stage = Stage.LAUNCHING
        """The stage of the most recent stage line (``LAUNCHING`` before any)."""
        self.kv_cache: KvCacheReported | None = None
        """The last KV-cache report seen."""

    @property
    def reached(self) -> dict[Stage, StageReached]:
        """Each stage seen so far, with its first report."""
        return dict(self._first)

    def mark(self, stage: Stage, elapsed: float, detail: str = "") -> StageReached | None:
        """Record a stage that the supervisor knows of itself (launching, ready)."""
        self.current = stage
        if stage in self._first:
            return None
        event = StageReached(stage=stage, elapsed=elapsed, detail=detail)
        self._first[stage] = event
        self._detail[stage] = detail
        return event

    def feed(self, line: str, elapsed: float) -> list[ServerEvent]:
        """The events one log line produces (usually none)."""
        hit = stage_of(line)
        if hit is None:
            return []
        events: list[ServerEvent] = []
        self.current = hit.stage
        if hit.stage not in self._first:
            event = StageReached(stage=hit.stage, elapsed=elapsed, detail=hit.detail)
            self._first[hit.stage] = event
            self._detail[hit.stage] = hit.detail
            events.append(event)
        elif hit.detail and hit.detail != self._detail.get(hit.stage):
            self._detail[hit.stage] = hit.detail
            events.append(StageReached(stage=hit.stage, elapsed=elapsed, detail=hit.detail))
        if hit.stage is Stage.KV_CACHE:
            kv = parse_kv_cache_line(line)
            if kv is not None:
                self.kv_cache = kv
                events.append(kv)
        return events
