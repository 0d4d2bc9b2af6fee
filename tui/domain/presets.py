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
from pydantic import BaseModel, ConfigDict, Field

from tui.domain.flags import ServeFlags
from tui.domain.workload import LoadSpec


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


class PresetError(ValueError):
    """A preset file that cannot be read; the message names the file and the problem."""


def parse_preset(text: str, origin: str = "<preset>", builtin: bool = False) -> Preset:
    """Parse one preset's TOML text; raises :class:`PresetError` naming ``origin``."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PresetError(f"{origin}: not valid TOML: {exc}") from exc
    flags: dict[str, Any] = dict(data.pop("flags", {}))
    flags["model"] = data.pop("model", flags.get("model", ""))
    if "extra_args" in flags:
        flags["extra_args"] = tuple(flags["extra_args"])
    try:
        return Preset.model_validate({**data, "flags": flags, "builtin": builtin})
    except Exception as exc:  # pydantic ValidationError: keep its per-field text
        raise PresetError(f"{origin}: {exc}") from exc


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
