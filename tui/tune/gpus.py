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


def _sizes(spec: SweepSpec, name: str) -> list[int]:
    """Every value ``name`` takes over the spec (its base value and swept ones; 1 unset)."""
    values = [spec.base.flags.get(name)]
    if name in spec.parameters:
        values += list(spec.values(name))
    return [int(v) for v in values if isinstance(v, int) and v > 0] or [1]


def gpus_per_trial(spec: SweepSpec) -> int:
    """The most GPUs one trial needs: tensor x pipeline parallel, over the whole space."""
    return max(_sizes(spec, "tensor_parallel_size")) * max(_sizes(spec, "pipeline_parallel_size"))


def smallest_trial(spec: SweepSpec) -> int:
    """The fewest GPUs a trial of the spec needs: tensor x pipeline parallel at their least."""
    return min(_sizes(spec, "tensor_parallel_size")) * min(_sizes(spec, "pipeline_parallel_size"))


def lanes(gpus: Sequence[str], per_trial: int) -> list[str]:
    """``CUDA_VISIBLE_DEVICES`` per lane: consecutive groups of ``per_trial`` GPUs.

    GPUs left over (fewer than a trial needs) are not used.
    """
    per_trial = max(1, per_trial)
    return [
        ",".join(gpus[i : i + per_trial]) for i in range(0, len(gpus) - per_trial + 1, per_trial)
    ]


class Unplaceable(VtcError):
    """No alive node of the cluster has the GPUs any trial needs: refused before anything
    starts."""


def refusal(need: int, nodes: Mapping[str, float]) -> str | None:
    """Why no alive node can hold a trial of ``need`` GPUs (``None``: one can).

    ``nodes``: each alive node's GPUs now (its name -> count, as the cluster declares them).
    A trial's GPUs are on one node: vtc starts one ``vllm serve`` per trial, on one node.
    """
    largest = max(nodes.values(), default=0.0)
    if largest >= need:
        return None
    where = f"the largest alive node has {largest:g}" if nodes else "no node is alive"
    return (
        f"refused: the trial needs {need} GPU(s) on one node (tensor_parallel_size x "
        f"pipeline_parallel_size) and {where}"
    )


def trials_at_once(nodes: Mapping[str, float], spec: SweepSpec) -> int:
    """How many of the spec's smallest trials the alive ``nodes`` hold side by side now:
    per node, its GPUs // the smallest ``tp x pp``.

    Raises :class:`Unplaceable` (one line, the reason) when no alive node can hold even the
    smallest trial: nothing of the sweep could run. (A larger trial that no node holds is
    refused alone when its turn comes.)
    """
    need = smallest_trial(spec)
    why = refusal(need, nodes)
    if why is not None:
        raise Unplaceable(
            f"no trial of the sweep fits the Ray cluster: {why.removeprefix('refused: ')}",
            hint="add GPUs to a node (--ray-gpus on a local instance), or narrow the spec's "
            "parallel sizes",
        )
    return sum(int(count // need) for count in nodes.values())
