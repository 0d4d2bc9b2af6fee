"""What the ``vtc`` command line asked the console for (before any mode is chosen)."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
    gpu_metrics_url: str | None = None
    startup_timeout: float = 900.0
    autostart: bool = True
    serve_args: list[str] = field(default_factory=list)
    config: Path | None = None  # a vLLM --config YAML loaded into the form
    data_dir: Path | None = None
    poll_interval_s: float = 1.0
    attach: str | None = None  # the URL of a server this console watches but did not start
    attach_log: Path | None = None  # that server's startup log, read for its flags

    @classmethod
    def from_args(cls, args: argparse.Namespace, serve_args: Sequence[str]) -> ConsoleOptions:
        """From ``vtc``'s parsed arguments and the ``-- serve ...`` tail."""
        return cls(
            demo=args.demo,
            preset=args.preset,
            vllm=args.vllm,
            model=args.model,
            sim_gpu=args.sim_gpu,
            sim_speed=args.sim_speed,
            gpu_metrics_url=args.gpu_metrics_url,
            startup_timeout=args.startup_timeout,
            autostart=not args.no_autostart,
            serve_args=list(serve_args),
            config=args.config,
            attach=args.attach,
            attach_log=args.attach_log,
        )
