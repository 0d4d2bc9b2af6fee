"""What the simulator's HTTP handlers need from the running server (its engine, metrics,
tokenizer, log and switches), apart from the handlers so that every module serving a
request reads it without importing the HTTP app."""

from __future__ import annotations

from dataclasses import dataclass, field

from tui.sim.argv import FixedTiming, LoraModule
from tui.sim.engine import AsyncEngine
from tui.sim.logs import VllmLog
from tui.sim.metrics import SimMetrics
from tui.sim.tokenizer import Tokenizer


@dataclass
class ApiContext:
    """What the handlers need from the running server."""

    engine: AsyncEngine
    metrics: SimMetrics
    tokenizer: Tokenizer
    served_name: str
    model_path: str
    max_model_len: int
    max_logprobs: int
    api_key: str | None = None
    load_tracking: bool = False
    dev_mode: bool = False
    server_load: int = 0
    fixed: FixedTiming | None = None  # --sim-fixed-*: injected delays, engine bypassed
    loras: dict[str, LoraModule] = field(default_factory=dict)
    log: VllmLog = field(default_factory=VllmLog)
    log_requests: bool = False
    fingerprint: str | None = None
    per_request_metrics: bool = False  # --enable-per-request-metrics on a 0.33+ server
