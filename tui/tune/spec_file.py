"""Reading a sweep spec: ``presets/sweeps/*.toml``, and auto_tune.sh's environment.

auto_tune.sh is configured by environment variables (every one overridable since vLLM PR
#23766; reference section 5): ``MODEL``, ``TP``, ``DOWNLOAD_DIR``, ``INPUT_LEN``,
``OUTPUT_LEN``, ``MAX_MODEL_LEN``, ``MIN_CACHE_HIT_PCT``, ``MAX_LATENCY_ALLOWED_MS``,
``NUM_SEQS_LIST``, ``NUM_BATCHED_TOKENS_LIST``. ``vtc sweep --strategy auto_tune`` takes
them the same way: over the spec file when one is given, else over the script's defaults.
``SYSTEM`` (TPU/GPU) only chose the script's log names and is not needed.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tui.domain.errors import VtcError
from tui.domain.sweep.spec import SweepSpec
from tui.domain.toml_text import loads_toml
from tui.store.regular_file import read_regular_text
from tui.tune.space import SweepParamsError, read_params_file

AUTO_TUNE_DEFAULTS: dict[str, str] = {
    "MODEL": "meta-llama/Llama-3.1-8B-Instruct",
    "TP": "1",
    "DOWNLOAD_DIR": "",
    "INPUT_LEN": "4000",
    "OUTPUT_LEN": "16",
    "MAX_MODEL_LEN": "4096",
    "MIN_CACHE_HIT_PCT": "0",
    "MAX_LATENCY_ALLOWED_MS": "100000000000",
    "NUM_SEQS_LIST": "128 256",
    "NUM_BATCHED_TOKENS_LIST": "512 1024 2048 4096",
}
ENV_NAMES = tuple(AUTO_TUNE_DEFAULTS)


MAX_SPEC_BYTES = 4 * 1024 * 1024
"""More than any spec needs (the shipped ones are under 4 KiB); a larger file is cut, and
then fails as TOML with its line."""


class SweepSpecError(VtcError):
    """A spec file that cannot be a sweep (the message names the file and the problem)."""


def load_spec(path: Path) -> SweepSpec:
    """The spec in ``path``; grid parameter files are read relative to it."""
    try:
        data = loads_toml(read_regular_text(path, MAX_SPEC_BYTES))
    except OSError as exc:
        raise SweepSpecError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SweepSpecError(f"{path.name}: not TOML: {exc}") from exc
    grid = data.get("grid")
    if isinstance(grid, dict):
        for key in ("serve_params", "bench_params"):
            if isinstance(grid.get(key), str):
                try:
                    grid[key] = read_params_file(path.parent / grid[key])
                except SweepParamsError as exc:
                    raise SweepSpecError(f"{path.name}: {exc.one_line()}") from exc
    return spec_from_dict(data, where=path.name)


def spec_from_dict(data: Mapping[str, Any], where: str = "sweep") -> SweepSpec:
    """Validate a spec's table (``SweepSpecError`` with the first problem, on one line)."""
    try:
        return SweepSpec.model_validate(dict(data))
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        msg = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        raise SweepSpecError(f"{where}: {loc + ': ' if loc else ''}{msg}") from exc
    except ValueError as exc:
        raise SweepSpecError(f"{where}: {exc}") from exc


def _ints(text: str, name: str) -> list[int]:
    try:
        return [int(x) for x in text.split()]
    except ValueError as exc:
        raise SweepSpecError(f"{name}={text!r}: expected integers separated by spaces") from exc


def auto_tune_from_env(env: Mapping[str, str], spec: SweepSpec | None = None) -> SweepSpec:
    """auto_tune.sh's variables over ``spec`` (or over the script's defaults)."""
    given = {k: env[k] for k in ENV_NAMES if env.get(k, "") != ""}
    if spec is None:
        given = {**AUTO_TUNE_DEFAULTS, **given}
        data: dict[str, Any] = {
            "name": "auto_tune",
            "strategy": "auto_tune",
            "objective": "request_throughput",
            "base": {"model": "-", "flags": {"enable_prefix_caching": True}},
            "workload": {},
        }
    else:
        data = spec.model_dump(mode="json")
        data["strategy"] = "auto_tune"
    base, workload = data["base"], data["workload"]
    flags = base.setdefault("flags", {})
    load = workload.setdefault("load", {}) if "load" in workload else workload
    try:
        _apply_env(given, data, base, flags, load)
    except ValueError as exc:
        raise SweepSpecError(f"auto_tune environment: {exc}") from exc
    total = load.get("input_len", 128) + load.get("output_len", 128)
    if "max_model_len" in flags and total > flags["max_model_len"]:  # the script's own check
        raise SweepSpecError(
            f"FAILED: INPUT_LEN({load.get('input_len')}) + OUTPUT_LEN({load.get('output_len')})"
            f" = {total}, which is > MAX_MODEL_LEN = {flags['max_model_len']}."
        )
    return spec_from_dict(data, where="auto_tune environment")


def _apply_env(
    given: Mapping[str, str],
    data: dict[str, Any],
    base: dict[str, Any],
    flags: dict[str, Any],
    load: dict[str, Any],
) -> None:
    if "MODEL" in given:
        base["model"] = given["MODEL"]
    if "TP" in given:
        flags["tensor_parallel_size"] = int(given["TP"])
    if "DOWNLOAD_DIR" in given:
        base["extra_args"] = [*base.get("extra_args", []), "--download-dir", given["DOWNLOAD_DIR"]]
    if "MAX_MODEL_LEN" in given:
        flags["max_model_len"] = int(given["MAX_MODEL_LEN"])
    if "INPUT_LEN" in given:
        load["input_len"] = int(given["INPUT_LEN"])
    if "OUTPUT_LEN" in given:
        load["output_len"] = int(given["OUTPUT_LEN"])
    if "MIN_CACHE_HIT_PCT" in given:
        pct = float(given["MIN_CACHE_HIT_PCT"])
        target = data["workload"]
        target["cache_hit_pct"] = pct
    if "MAX_LATENCY_ALLOWED_MS" in given:
        slo = data.setdefault("slo", {})
        limits = slo.setdefault("limits", {}) if "limits" in slo else slo
        limits["p99_e2el_ms"] = float(given["MAX_LATENCY_ALLOWED_MS"])
    params = data.setdefault("parameters", {})
    if "NUM_SEQS_LIST" in given:
        params["max_num_seqs"] = _ints(given["NUM_SEQS_LIST"], "NUM_SEQS_LIST")
    if "NUM_BATCHED_TOKENS_LIST" in given:
        params["max_num_batched_tokens"] = _ints(
            given["NUM_BATCHED_TOKENS_LIST"], "NUM_BATCHED_TOKENS_LIST"
        )
