"""The parameter space: the Cartesian product, and ``vllm bench sweep serve``'s files.

``--serve-params`` / ``--bench-params`` files are read as vLLM reads them
(``vllm/benchmarks/sweep/param_sweep.py``): a JSON list of records, or a dict of named
records (the name kept as ``_benchmark_name``); keys may use ``-`` or ``_``. The sweep
iterates the product of the serve and bench records, skipping pairs whose ``--link-vars``
differ (``sweep/serve.py`` ``_comb_is_valid``).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from tui.domain.errors import VtcError
from tui.domain.sweep.spec import SweepSpec
from tui.domain.sweep.tunables import Value, check_value, tunable_names
from tui.domain.workload import LoadSpec
from tui.load.datasets import shared_prefix_spec
from tui.store.bounded_read import parse_json
from tui.store.regular_file import read_regular_text

Choice = dict[str, Value]
"""One value per varied parameter (declared and pass-through names)."""

NAME_KEY = "_benchmark_name"

# ``vllm bench serve`` option dests -> LoadSpec fields (the ones vtc's generator runs).
BENCH_KEYS: Mapping[str, str] = {
    "random_input_len": "input_len",
    "input_len": "input_len",
    "random_output_len": "output_len",
    "output_len": "output_len",
    "random_range_ratio": "range_ratio",
    "random_prefix_len": "prefix_len",
    "num_prompts": "num_prompts",
    "max_concurrency": "max_concurrency",
    "request_rate": "request_rate",
    "burstiness": "burstiness",
    "seed": "seed",
}


class SweepParamsError(VtcError):
    """A ``--serve-params``/``--bench-params`` file or record vtc cannot use."""


def product(spec: SweepSpec) -> Iterator[Choice]:
    """Every combination of the spec's parameters, first parameter slowest, one at a time
    (the spec bounds the count: ``MAX_COMBINATIONS``)."""
    names = list(spec.parameters)
    axes = [spec.values(name) for name in names]
    return (dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes))


def read_params_file(path: Path) -> list[dict[str, Any]]:
    """A parameter-sweep JSON file as vLLM reads it (list, or dict of named records)."""
    try:
        data = parse_json(read_regular_text(path))
    except (OSError, ValueError) as exc:  # not regular, unreadable, not UTF-8, not JSON
        raise SweepParamsError(f"cannot read {path}: {exc}") from exc
    return records(data, str(path))


def records(data: Any, where: str = "parameters") -> list[dict[str, Any]]:
    """Normalise a parameter sweep (``param_sweep.py`` ``read_json``) into records."""
    if isinstance(data, dict):
        data = [{NAME_KEY: name, **params} for name, params in data.items()]
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise SweepParamsError(f"{where}: expected a list of objects (or a dict of them)")
    names = [r[NAME_KEY] for r in data if NAME_KEY in r]
    if len(names) != len(set(names)):
        raise SweepParamsError(f"{where}: duplicate {NAME_KEY} values")
    return [{_snake(k): v for k, v in r.items()} for r in data] or [{}]


def _snake(key: str) -> str:
    return key if key == NAME_KEY else key.replace("-", "_")


def serve_choice(record: Mapping[str, Any]) -> Choice:
    """A ``--serve-params`` record as a checked choice of tunables."""
    out: Choice = {}
    for key, value in record.items():
        if key == NAME_KEY:
            continue
        if key not in tunable_names():
            raise SweepParamsError(f"serve parameter {key!r} is not a tunable vtc flag")
        try:
            out[key] = check_value(key, value)
        except ValueError as exc:
            raise SweepParamsError(str(exc)) from exc
    return out


def bench_load(load: LoadSpec, record: Mapping[str, Any]) -> LoadSpec:
    """``load`` with a ``--bench-params`` record applied (``ValueError`` through LoadSpec)."""
    changes: dict[str, Any] = {}
    for key, value in record.items():
        if key == NAME_KEY:
            continue
        field = BENCH_KEYS.get(key)
        if field is None:
            raise SweepParamsError(f"bench parameter {key!r} is not one vtc's load runs")
        if field == "request_rate" and value in ("inf", "Infinity"):
            value = math.inf
        changes[field] = value
    return LoadSpec.model_validate({**load.model_dump(), **changes})


def linked(serve: Mapping[str, Any], bench: Mapping[str, Any], links: Sequence[tuple[str, str]]):
    """Whether a serve/bench pair honours every ``serve_key=bench_key`` link."""
    return all(s in serve and b in bench and serve[s] == bench[b] for s, b in (links or ()))


def base_load(spec: SweepSpec) -> LoadSpec:
    """The spec's load with its shared prefix sized from ``cache_hit_pct`` (auto_tune.sh's)."""
    load = spec.workload.load
    if spec.workload.cache_hit_pct:
        load = shared_prefix_spec(load, spec.workload.cache_hit_pct)
    return load


def request_model(spec: SweepSpec, settings: Mapping[str, Value]) -> str | None:
    """The model name requests carry: the adapter when the trial serves LoRA, else ``None``."""
    merged = {**spec.base.flags, **settings}
    if spec.workload.lora_adapter and merged.get("enable_lora") is True:
        return spec.workload.lora_adapter
    return None


def describe(choice: Mapping[str, Value]) -> str:
    """``max_num_seqs=256 max_num_batched_tokens=8192`` for notes and progress lines."""
    return " ".join(f"{k}={v}" for k, v in choice.items()) or "base"
