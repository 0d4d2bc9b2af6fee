"""Where a sweep's trials run: this console's server, or a Ray cluster (issue 21).

The same choice for ``vtc sweep SPEC --ray [ADDRESS] [--ray-gpus N]`` and the console's
sweep composer. It is not part of the spec: a sweep's id and journal are the same wherever
its trials run, so a sweep stopped on one cluster resumes on another of the same GPUs.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterChoice:
    """A Ray cluster: ``address`` to join it (``auto``, ``HOST:6379``, ``ray://HOST:10001``),
    or ``None`` for a local instance declaring ``gpus`` (``None``: as many as Ray counts)."""

    address: str | None = None
    gpus: int | None = None

    def describe(self) -> str:
        """``Ray at HOST:6379`` or ``a local Ray instance (4 GPUs)``."""
        if self.address:
            return f"Ray at {self.address}"
        gpus = f" ({self.gpus} GPUs)" if self.gpus is not None else ""
        return f"a local Ray instance{gpus}"
