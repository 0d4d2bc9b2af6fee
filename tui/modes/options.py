"""What the ``vtc`` command line asked the console for (before any mode is chosen)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from tui.domain.errors import VtcError


class SetupError(VtcError):
    """Options that cannot make a console (the message says what to change)."""


@dataclass
class ConsoleOptions:
    """The console's options, as parsed by ``vtc``'s argument parser."""

    demo: bool = False
    preset: str | None = None
    vllm: str = "vllm"
    model: str | None = None
    sim_gpu: str | None = None
    sim_speed: float = 4.0
    sim_host: str = "linux"  # demo: the simulated machine's OS (wsl2: no UVA)
    gpu_metrics_url: str | None = None
    startup_timeout: float = 900.0
    autostart: bool = True
    serve_args: list[str] = field(default_factory=list)
    config: Path | None = None  # a vLLM --config YAML loaded into the form
    data_dir: Path | None = None
    poll_interval_s: float = 1.0
    attach: str | None = None  # the URL of a server this console watches but did not start
    attach_log: Path | None = None  # that server's startup log, read for its flags
    sim_profile: str | None = None  # a twin profile: the demo simulates it, others predict
    # k's calibration: its designed loads, x this, and how many passes (a test: the least
    # that still measures, fits and validates).
    calibration_scale: float = 1.0
    calibration_passes: int = 2

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, serve_args: Sequence[str] = (), **overrides: Any
    ) -> ConsoleOptions:
        """From a parsed command line: each field whose name the parser has as a ``dest``
        (``vtc``'s or ``vtc sweep``'s), the ``-- serve ...`` tail, then ``overrides``."""
        parsed = vars(args)
        values = {f.name: parsed[f.name] for f in fields(cls) if f.init and f.name in parsed}
        return cls(**{**values, "serve_args": list(serve_args), **overrides})
