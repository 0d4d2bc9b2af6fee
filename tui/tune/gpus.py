"""Which GPUs a sweep can run trials on in parallel, one trial (``tp x pp`` GPUs) per lane.

Where several GPUs are visible, each lane's launcher pins its servers with
``CUDA_VISIBLE_DEVICES`` (vLLM's workers take the first ``tp x pp`` visible devices), so
trials run side by side without sharing a GPU. Visible means ``CUDA_VISIBLE_DEVICES`` when
set (CUDA stops at the first invalid entry; ``-1`` hides every device), else every device
NVML counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from tui.domain.errors import VtcError
from tui.domain.sweep.spec import SweepSpec


def visible_gpus(env: Mapping[str, str], count: Callable[[], int]) -> list[str]:
    """The visible devices' ids (``CUDA_VISIBLE_DEVICES`` entries, else ``0..count-1``)."""
    text = env.get("CUDA_VISIBLE_DEVICES")
    if text is None:
        return [str(i) for i in range(max(0, count()))]
    out: list[str] = []
    for raw in text.split(","):
        entry = raw.strip()
        if not entry or entry.startswith("-"):
            break
        out.append(entry)
    return out


def gpus_per_trial(spec: SweepSpec) -> int:
    """The most GPUs one trial needs: tensor x pipeline parallel, over the whole space."""

    def largest(name: str) -> int:
        values = [spec.base.flags.get(name)]
        if name in spec.parameters:
            values += list(spec.values(name))
        return max((int(v) for v in values if isinstance(v, int)), default=1)

    return largest("tensor_parallel_size") * largest("pipeline_parallel_size")


def lanes(gpus: Sequence[str], per_trial: int) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` per lane: consecutive groups of ``per_trial`` GPUs.

    GPUs left over (fewer than a trial needs) are not used.
    """
    per_trial = max(1, per_trial)
    return [
        ",".join(gpus[i : i + per_trial]) for i in range(0, len(gpus) - per_trial + 1, per_trial)
    ]


class Unplaceable(VtcError):
    """No node of the cluster has the GPUs one trial needs: refused before anything starts."""


def trials_at_once(node_gpus: Mapping[str, float], spec: SweepSpec) -> int:
    """How many trials a cluster runs side by side: per node, its GPUs // ``tp x pp``.

    ``node_gpus``: each alive node's GPUs (its name -> count, as the cluster declares them).
    Raises :class:`Unplaceable` (one line, the reason) when no node can hold one trial:
    a trial never spans nodes (vLLM's tensor and pipeline groups are placed on one node
    here, its load run beside it).
    """
    per_trial = gpus_per_trial(spec)
    width = sum(int(count // per_trial) for count in node_gpus.values())
    if width > 0:
        return width
    largest = max(node_gpus.values(), default=0.0)
    where = f"the largest node has {largest:g}" if node_gpus else "the cluster has no alive node"
    raise Unplaceable(
        f"no node of the Ray cluster has the {per_trial} GPU(s) one trial needs "
        f"(tensor_parallel_size x pipeline_parallel_size over the spec): {where}",
        hint="add GPUs to a node (--ray-gpus on a local instance), or narrow the spec's "
        "parallel sizes",
    )
