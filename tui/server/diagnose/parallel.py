"""More GPUs asked for than there are: the world size (tensor x pipeline parallel) in its forms.

- 0.32 ``config/parallel.py:1052-1058``: ``World size (W) is larger than the number of
  available GPUs (G) in this node.``
- 0.5-0.10 multiprocessing executor (``multiproc_gpu_executor.py``, then
  ``mp_distributed_executor.py``): ``please set tensor_parallel_size (T) to less than max local
  gpu count (G)`` / ``please ensure that world_size (W) is less than than max local gpu count
  (G)``; 0.4.3 said it without the numbers.
- Ray (``executor/ray_utils.py`` 0.4+; ``v1/executor/ray_utils.py``): ``The number of required
  GPUs exceeds the total number of available GPUs in the placement group.`` (0.5.5+ adds
  ``Required number of devices: W. Total number of devices: G.``); the placement-group wait
  ``Cannot provide a placement group of placement_group_specs=[...] within N seconds`` and
  0.32's ``Cannot provide a placement group requiring W GPUs``.
- 0.32 Ray executor (``v1/executor/ray_utils.py:543``): ``Tensor parallel size (T) exceeds
  available GPUs (G).``
- 0.11.1-0.11.2 (quoted in vllm-project/vllm#28873 and NVIDIA-NeMo/Skills#1059):
  ``Tensor parallel size (T) cannot be larger than the number of available GPUs (G)`` and the
  Ray path's ``local_world_size (W) must be less than or equal to the number of visible
  devices (G).`` (``v1/worker/gpu_worker.py:212``).
- 0.8-0.11 chose Ray when the world size exceeded the local GPUs, and without Ray said
  ``Unable to load Ray ... required for multi-node inference``.
"""

from __future__ import annotations

from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.server.diagnose.common import make, positive_int
from tui.server.diagnose.reading import LogView, tolerant

# Each form: a pattern with some of the named groups ws (world size), tp, gpus.
_FORMS: Final = (
    (
        tolerant(
            r"World size \((?P<ws>\d+)\) is larger than the number of available GPUs "
            r"\((?P<gpus>\d+)\)"
        ),
        "is larger than the number of available GPUs",
    ),
    (
        tolerant(
            r"please set tensor_parallel_size(?: \((?P<tp>\d+)\))? to less than max local gpu count"
            r"(?: \((?P<gpus>\d+)\))?"
        ),
        "max local gpu count",
    ),
    (
        tolerant(
            r"please ensure that world_size \((?P<ws>\d+)\) is less than than max local gpu count "
            r"\((?P<gpus>\d+)\)"
        ),
        "max local gpu count",
    ),
    (
        tolerant(
            r"The number of required \w{1,10}s exceeds the total number of available \w{1,10}s in "
            r"the placement group\.(?: ?Required number of devices: (?P<ws>\d+)\. Total number of "
            r"devices: (?P<gpus>\d+)\.)?"
        ),
        "in the placement group",
    ),
    (
        tolerant(r"Tensor parallel size \((?P<tp>\d+)\) exceeds available GPUs \((?P<gpus>\d+)\)"),
        "exceeds available GPUs",
    ),
    (
        tolerant(
            r"Tensor parallel size \((?P<tp>\d+)\) cannot be larger than the number of available "
            r"GPUs \((?P<gpus>\d+)\)"
        ),
        "cannot be larger than the number of available GPUs",
    ),
    (
        tolerant(
            r"local_world_size \((?P<ws>\d+)\) must be less than or equal to the number of visible "
            r"devices \((?P<gpus>\d+)\)"
        ),
        "number of visible devices",
    ),
    (tolerant(r"Cannot provide a placement group requiring (?P<ws>\d+) GPUs"), "placement group"),
    (
        tolerant(
            r"Cannot provide a placement group of "
            r"placement_group_specs=(?P<specs>\[[^\]]{0,8000}\])"
        ),
        "placement group",
    ),
    (
        tolerant(r"Unable to load Ray.{0,400}?required for multi-node inference"),
        "Unable to load Ray",
    ),
)


def _largest_tp(gpus: int) -> int:
    """The largest power of two not above ``gpus``: attention heads divide by it."""
    tp = 1
    while tp * 2 <= gpus:
        tp *= 2
    return tp


def _numbers(log: LogView, groups: dict[str, Any]) -> tuple[int | None, int | None, int]:
    """World size, GPU count (``None`` when the log does not say) and pipeline stages."""
    pp = positive_int(log, "pipeline_parallel_size")
    tp = positive_int(log, "tensor_parallel_size", 0)
    ws: int | None = None
    if groups.get("ws"):
        ws = int(groups["ws"])
    elif groups.get("tp"):
        ws = int(groups["tp"]) * pp
    elif groups.get("specs"):
        ws = groups["specs"].count("'GPU'") or None
    elif tp:
        ws = tp * pp
    gpus = int(groups["gpus"]) if groups.get("gpus") else None
    return ws, gpus, pp


def _revert(log: LogView) -> list[Fix]:
    """The GPU count unknown: undo the parallel flags the run set (vLLM's default: 1 each)."""
    undo = {
        name: None
        for name in ("tensor_parallel_size", "pipeline_parallel_size")
        if positive_int(log, name) > 1
    }
    if not undo:
        return []
    names = " and ".join(undo)
    return [Fix(title=f"Revert {names} to 1 (the flag that asked for more GPUs)", set=undo)]


def _fixes(log: LogView, gpus: int | None, pp: int) -> list[Fix]:
    if not gpus or gpus < 1:
        return _revert(log)
    fixes: list[Fix] = []
    if 1 < pp <= gpus:
        tp_keep_pp = _largest_tp(max(1, gpus // pp))
        fixes.append(
            Fix(
                title=f"Use tensor_parallel_size {tp_keep_pp} (x {pp} pipeline stages)",
                set={"tensor_parallel_size": tp_keep_pp},
            )
        )
    tp = _largest_tp(gpus)
    fix_set: dict[str, Any] = {"tensor_parallel_size": tp}
    if pp > 1:
        fix_set["pipeline_parallel_size"] = 1
    if tp == 1 and positive_int(log, "tensor_parallel_size") > 1:
        title = f"Revert tensor_parallel_size to 1 (this machine has {gpus} GPU)"
    else:
        what = f"all {gpus}" if tp == gpus else f"{tp} of the {gpus}"
        title = f"Use {what} GPU(s) for tensor parallelism"
    fixes.append(Fix(title=title, set=fix_set))
    return fixes


def world_size_exceeds_gpus(log: LogView) -> Diagnosis | None:
    """The world size needs more GPUs than the node (or the Ray cluster) has."""
    for pattern, needle in _FORMS:
        found = log.find(pattern, needle)
        if found is None:
            continue
        m, evidence = found
        ws, gpus, pp = _numbers(log, m.groupdict())
        facts: dict[str, Any] = {"pipeline_parallel_size": pp}
        if ws is not None:
            facts["world_size"] = ws
        if gpus is not None:
            facts["gpu_count"] = gpus
        asked = f"world size {ws} (tensor x pipeline parallel)" if ws else "the world size"
        have = f"the {gpus} available" if gpus is not None else "are available"
        return make(
            log,
            "world_size_exceeds_gpus",
            f"{asked} needs more GPUs than {have}",
            evidence,
            facts,
            _fixes(log, gpus, pp),
        )
    return None
