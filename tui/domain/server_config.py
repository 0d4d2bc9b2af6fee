"""The effective configuration of a server this console did not start, as read from it.

An attached server (``vtc --attach URL``) was started by somebody else, so its flags are
not known: they are *read*, each from where the server itself says it:

- ``/v1/models``: the served model (``root``: its path; ``id``: the served name) and the
  ``max_model_len`` it enforces (vLLM's ``ModelCard``; see the CPU capture
  ``endpoints.txt``);
- ``/metrics``: ``vllm:cache_config_info``, one label per ``CacheConfig`` field
  (``block_size``, ``gpu_memory_utilization``, ``cache_dtype``, ``enable_prefix_caching``,
  ``kv_cache_memory_bytes``, ``num_gpu_blocks_override``: reference section on metrics,
  ``config/cache.py:322-325``; the CPU capture ``metrics_fresh_idle.txt``). vLLM 0.32
  exports no model-config gauge, so quantization and dtype come only from the log;
- the startup log, when the operator says where it is: ``non-default args: {...}`` (every
  flag that was set) and the engine's ``with config: ...`` line (the resolved values).

What a later source says wins (the log, then the engine's line, then ``/metrics``, then
``/v1/models``: the live endpoints report what runs now). Each flag keeps where it was read
(:attr:`ServerConfig.sources`), so the console can mark it; a flag read from nowhere is
*not known*, unless the log's ``non-default args`` was read, which lists every flag set:
the others are vLLM's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from tui.domain.flags.problems import FlagError
from tui.domain.flags.serve import ServeFlags, flag_specs
from tui.domain.flags.validation import flags_from_values

FROM_MODELS: Final = "/v1/models"
FROM_METRICS: Final = "/metrics"
FROM_LOG: Final = "startup log"

# vllm:cache_config_info's label -> the ServeFlags field it is (the label's text is str()
# of the CacheConfig field: "None" when unset).
_CACHE_LABELS: Final = {
    "block_size": "block_size",
    "gpu_memory_utilization": "gpu_memory_utilization",
    "cache_dtype": "kv_cache_dtype",
    "enable_prefix_caching": "enable_prefix_caching",
    "kv_cache_memory_bytes": "kv_cache_memory_bytes",
    "num_gpu_blocks_override": "num_gpu_blocks_override",
}
_INT_FLAGS: Final = {"block_size", "kv_cache_memory_bytes", "num_gpu_blocks_override"}


@dataclass(frozen=True)
class ServerConfig:
    """An attached server's configuration as read, and where each flag was read.

    ``flags``: the flags read (valid together; the model is always known). ``sources``:
    flag name -> :data:`FROM_MODELS`, :data:`FROM_METRICS` or :data:`FROM_LOG`.
    ``log_read``: the startup log's ``non-default args`` was read, so a flag read from
    nowhere is vLLM's default (else it is not known). ``notes``: what could not be read.
    """

    flags: ServeFlags
    sources: Mapping[str, str] = field(default_factory=dict)
    log_read: bool = False
    notes: tuple[str, ...] = ()

    def source(self, name: str) -> str | None:
        """Where flag ``name`` was read (``None``: nowhere)."""
        return self.sources.get(name)

    def unread(self) -> str:
        """What a flag read from nowhere is: vLLM's default, or not known."""
        return "vLLM default" if self.log_read else "not known"

    def summary(self) -> str:
        """One line: which flags came from where (``max-model-len from /v1/models; ...``)."""
        by_source: dict[str, list[str]] = {}
        for name, where in self.sources.items():
            by_source.setdefault(where, []).append(name.replace("_", "-"))
        parts = [f"{', '.join(names)} from {where}" for where, names in by_source.items()]
        return "; ".join(parts) if parts else "nothing could be read"


def cache_config_values(labels: Mapping[str, str]) -> dict[str, Any]:
    """``vllm:cache_config_info``'s labels as typed flag values ("None" labels left out)."""
    values: dict[str, Any] = {}
    for label, name in _CACHE_LABELS.items():
        text = labels.get(label)
        if text is None or text in ("", "None"):
            continue
        value: Any = text
        if name in _INT_FLAGS:
            value = _number(text, int)
        elif name == "gpu_memory_utilization":
            value = _number(text, float)
        elif name == "enable_prefix_caching":
            value = {"True": True, "False": False}.get(text)
        if value is not None:
            values[name] = value
    return values


def models_values(entry: Mapping[str, Any]) -> dict[str, Any]:
    """A ``/v1/models`` entry as flag values: the model, its served name, max_model_len."""
    values: dict[str, Any] = {}
    served, root = entry.get("id"), entry.get("root")
    if isinstance(root, str) and root:
        values["model"] = root
        if isinstance(served, str) and served and served != root:
            values["served_model_name"] = served
    elif isinstance(served, str) and served:
        values["model"] = served
    length = entry.get("max_model_len")
    if isinstance(length, int) and not isinstance(length, bool) and length > 0:
        values["max_model_len"] = length
    return values


def log_values(args: Mapping[str, Any]) -> dict[str, Any]:
    """A log's ``non-default args`` (or engine config) as the flags vtc declares."""
    declared = {s.name for s in flag_specs()} | {"model"}
    return {k: v for k, v in args.items() if k in declared and v is not None}


def read_config(
    fallback_model: str,
    *,
    log: Mapping[str, Any] | None = None,
    engine: Mapping[str, Any] | None = None,
    metrics: Mapping[str, Any] | None = None,
    models: Mapping[str, Any] | None = None,
    notes: tuple[str, ...] = (),
) -> ServerConfig:
    """Join what each source said (later ones win) into valid flags, keeping the sources.

    ``log``: ``non-default args`` (``None``: the log was not read); ``engine``: the engine's
    ``with config:`` pairs; ``metrics``: :func:`cache_config_values`; ``models``:
    :func:`models_values`. A value vLLM's rules refuse, alone or with the others, is left
    out with a note (the server runs, so this is a reading problem, never a reason to fail).
    """
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for where, values in (
        (FROM_LOG, log_values(log or {})),
        (FROM_LOG, log_values(engine or {})),
        (FROM_METRICS, metrics or {}),
        (FROM_MODELS, models or {}),
    ):
        for name, value in values.items():
            merged[name] = value
            sources[name] = where
    model = str(merged.pop("model", "") or fallback_model)
    sources.pop("model", None)
    if merged.get("served_model_name") == model:  # the engine's line names it either way
        del merged["served_model_name"]
    said = list(notes)
    kept = {n: v for n, v in merged.items() if _alone_valid(model, n, v, said)}
    flags = _together(model, kept, said)
    sources = {n: w for n, w in sources.items() if n in flags.explicit()}
    return ServerConfig(flags=flags, sources=sources, log_read=log is not None, notes=tuple(said))


def _alone_valid(model: str, name: str, value: Any, notes: list[str]) -> bool:
    try:
        flags_from_values({"model": model, name: value})
    except FlagError as exc:
        notes.append(f"{name}={value!r} read but not understood: {exc.problems[0].message}")
        return False
    return True


def _together(model: str, values: dict[str, Any], notes: list[str]) -> ServeFlags:
    """``values`` as flags; values a cross-flag rule refuses are dropped (named in notes)."""
    values = dict(values)
    for _ in range(4):
        try:
            return flags_from_values({"model": model, **values})
        except FlagError as exc:
            named = {p.field for p in exc.problems if p.field in values}
            if not named:
                break
            for name in sorted(named):
                notes.append(f"{name}={values.pop(name)!r} left out: {exc.problems[0].message}")
    return ServeFlags(model=model)


def _number(text: str, kind: type[int] | type[float]) -> int | float | None:
    try:
        return kind(text)
    except ValueError:
        return None
