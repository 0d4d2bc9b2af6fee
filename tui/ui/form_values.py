"""Text <-> value for the form: flag values as the form shows them, and the Workload fields.

Flags are typed by the domain (``FlagSpec.parse`` via ``validate_form``); this module only
renders values back into field text and declares/parses the few ``LoadSpec`` fields the form
edits.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from tui.domain.flags import FlagKind, FlagProblem, FlagSpec
from tui.domain.workload import LoadSpec


def flag_text(spec: FlagSpec, value: Any) -> str:
    """``value`` as the form field shows it (empty: not passed, vLLM's default applies)."""
    if value is None:
        return ""
    if spec.kind is FlagKind.BOOL:
        return "on" if value else "off"
    return str(value)


def extra_text(extra_args: tuple[str, ...]) -> str:
    """Extra arguments as one shell-quoted line (``validate_form`` splits it back)."""
    return shlex.join(extra_args) if extra_args else ""


WorkloadKind = Literal["int", "optional_int", "rate", "choice"]


@dataclass(frozen=True)
class WorkloadField:
    """One ``LoadSpec`` field in the form's Workload section."""

    name: str
    label: str
    kind: WorkloadKind
    help: str
    blank: str = ""  # what an empty field means (placeholder)
    choices: tuple[str, ...] = ()


WORKLOAD_FIELDS: tuple[WorkloadField, ...] = (
    WorkloadField("endpoint", "endpoint", "choice", "OpenAI endpoint the load calls.",
                  choices=("completions", "chat")),
    WorkloadField("input_len", "input-len", "int", "Prompt tokens per request (random dataset)."),
    WorkloadField("output_len", "output-len", "int", "Output tokens per request (ignore_eos)."),
    WorkloadField("prefix_len", "prefix-len", "int",
                  "Shared prefix tokens in front of every prompt (prefix caching)."),
    WorkloadField("num_prompts", "num-prompts", "int", "Requests in the run."),
    WorkloadField("max_concurrency", "max-concurrency", "optional_int",
                  "Most requests in flight at once.", blank="unlimited"),
    WorkloadField("request_rate", "request-rate", "rate",
                  "Arrivals per second (Poisson unless burstiness is set).", blank="inf"),
)  # fmt: skip


def workload_text(spec: LoadSpec, field: WorkloadField) -> str:
    """The field text for ``spec``'s value (empty for unlimited/inf)."""
    value = getattr(spec, field.name)
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def parse_workload(
    base: LoadSpec, raw: Mapping[str, str]
) -> tuple[LoadSpec | None, list[FlagProblem]]:
    """``base`` with the form's Workload fields applied, or the problems, per field."""
    values: dict[str, Any] = {}
    problems: list[FlagProblem] = []
    for field in WORKLOAD_FIELDS:
        if field.name not in raw:
            continue
        text = raw[field.name].strip()
        if field.kind == "choice":
            values[field.name] = text or getattr(LoadSpec(), field.name)
            continue
        if text == "":
            if field.kind == "int":
                problems.append(FlagProblem(field.name, f"{field.label}: a number is required"))
            else:
                values[field.name] = None if field.kind == "optional_int" else math.inf
            continue
        try:
            values[field.name] = float(text) if field.kind == "rate" else int(text)
        except ValueError:
            kind = "number" if field.kind == "rate" else "whole number"
            problems.append(FlagProblem(field.name, f"{field.label}: {text!r} is not a {kind}"))
    if problems:
        return None, problems
    try:
        return LoadSpec.model_validate({**base.model_dump(), **values}), []
    except ValidationError as exc:
        out = []
        for err in exc.errors():
            loc = err.get("loc", ())
            name = str(loc[0]) if loc else None
            label = next((f.label for f in WORKLOAD_FIELDS if f.name == name), name or "workload")
            out.append(FlagProblem(name, f"{label}: {err.get('msg', 'invalid')}"))
        return None, out
