"""The console's cluster sweeps: Ray lanes built when the composer asks for them.

A demo or local console hands its sweep service :func:`cluster_lanes`; Ray itself is
imported only when a sweep is started on a cluster (the optional ``[ray]`` extra), so a
console without it runs as before and says, in one line, what to install.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from tui.domain.errors import VtcError
from tui.domain.sweep.cluster import ClusterChoice
from tui.domain.sweep.spec import SweepSpec
from tui.modes.options import ConsoleOptions
from tui.tune.lanes import ClusterLanes, ClusterRun

NO_RAY = "Ray is not installed here: a sweep on a cluster needs it"


def cluster_lanes(options: ConsoleOptions, data_dir: Path) -> ClusterLanes:
    """The console's builder of a sweep's lanes on a Ray cluster (joined or started)."""

    async def build(
        spec: SweepSpec, choice: ClusterChoice, on_progress: Callable[[str], None]
    ) -> ClusterRun:
        try:
            from tui.modes import ray_cluster  # Ray: imported only when a sweep asks for it
        except ImportError as exc:
            raise VtcError(NO_RAY, hint="pip install 'vtc[ray]'") from exc
        return await ray_cluster.open_cluster(spec, options, choice, data_dir, on_progress)

    return build
