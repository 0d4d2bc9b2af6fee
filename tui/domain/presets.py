"""Presets: a named flag set with the workload it was tuned for and where it comes from.

Pure parsing and rendering of the TOML text; finding files on disk is ``tui.store.presets``.

A preset file looks like::

    name = "rtx3080-8b-fp8-best"
    description = "..."
    source = "seed 000: 17 hand runs on an RTX 3080 10 GB, run 17"
    model = "meta-llama/Llama-3.1-8B-Instruct"
    sim_gpu = "rtx3080-10gb"          # optional: the GPU the demo simulates for it

    [flags]                            # snake_case ServeFlags names
    max_model_len = 512

    [workload]                         # optional LoadSpec fields
    input_len = 128
"""

from __future__ import annotations

import tomllib
from typing import Any

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tui.domain.errors import VtcError
from tui.domain.flags.problems import FlagError
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import ValidationContext, flags_from_values, type_word
from tui.domain.toml_text import loads_toml
from tui.domain.workload import LoadSpec

_TEXT_KEYS = ("name", "description", "source")
_KEYS = frozenset({*_TEXT_KEYS, "model", "sim_gpu", "flags", "workload"})


class Preset(BaseModel):
    """A named, sourced configuration the operator can load into the form."""

    model_config = ConfigDict(frozen=True)

    name: str
    description: str
    source: str
    flags: ServeFlags
    workload: LoadSpec | None = None
    sim_gpu: str | None = None
    builtin: bool = Field(default=False, exclude=True)


class PresetError(VtcError, ValueError):
    """A preset file that cannot be read; one line naming the file and the problem."""


def parse_preset(
    text: str,
    origin: str = "<preset>",
    builtin: bool = False,
    context: ValidationContext | None = None,
) -> Preset:
    """Parse one preset's TOML text; raises :class:`PresetError` naming ``origin``.

    Types are strict: a flag's value must have the flag's type (``max_num_seqs = true`` is
    refused, not read as 1), and the flags go through the one validation path
    (:func:`tui.domain.flags.validation.flags_from_values`). Unknown keys are refused too (a
    misspelt ``[flag]`` table would otherwise load a preset with no flags).
    """
    try:
        data = loads_toml(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{origin}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - _KEYS)
    if unknown:
        raise PresetError(f"{origin}: unknown key {unknown[0]!r} (a preset has {sorted(_KEYS)})")
    for key in _TEXT_KEYS:
        if not isinstance(data.get(key), str):
            raise PresetError(f"{origin}: {key} must be text, got {type_word(data.get(key))}")
    flags_table = data.get("flags", {})
    if not isinstance(flags_table, dict):
        raise PresetError(f"{origin}: [flags] must be a table, got {type_word(flags_table)}")
    model = data.get("model", flags_table.get("model", ""))
    try:
        flags = flags_from_values({**flags_table, "model": model}, context)
    except FlagError as exc:
        raise PresetError(f"{origin}: {exc.one_line()}") from None
    return Preset(
        name=data["name"],
        description=data["description"],
        source=data["source"],
        flags=flags,
        workload=_workload(data.get("workload"), origin),
        sim_gpu=_sim_gpu(data.get("sim_gpu"), origin),
        builtin=builtin,
    )


def _workload(table: Any, origin: str) -> LoadSpec | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        raise PresetError(f"{origin}: [workload] must be a table, got {type_word(table)}")
    try:
        return LoadSpec.model_validate(table, strict=True)  # true is no number of prompts
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "workload"
        raise PresetError(f"{origin}: workload.{where}: {first.get('msg', 'invalid')}") from None


def _sim_gpu(value: Any, origin: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise PresetError(f"{origin}: sim_gpu must be text, got {type_word(value)}")


def render_preset(preset: Preset) -> str:
    """The TOML text of ``preset`` (round-trips through :func:`parse_preset`)."""
    doc: dict[str, Any] = {
        "name": preset.name,
        "description": preset.description,
        "source": preset.source,
        "model": preset.flags.model,
    }
    if preset.sim_gpu:
        doc["sim_gpu"] = preset.sim_gpu
    doc["flags"] = preset.flags.to_toml_dict()
    if preset.workload is not None:
        doc["workload"] = preset.workload.to_toml_dict()
    return tomli_w.dumps(doc)
