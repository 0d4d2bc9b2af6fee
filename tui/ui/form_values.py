"""Text <-> value for the form: flag values as the form shows them, and the Workload fields.

Flags are typed by the domain (``FlagSpec.parse`` via ``validate_form``); this module only
renders values back into field text and parses the ``LoadSpec`` fields the form edits (which
ones, their labels, help and kinds come from ``LoadSpec``'s declaration).
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from tui.domain.flags.serve import FlagKind, FlagProblem, FlagSpec
from tui.domain.workload import LoadSpec, WorkloadField, form_fields


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


#: The Workload section's fields, rendered from ``LoadSpec``'s declaration.
WORKLOAD_FIELDS: tuple[WorkloadField, ...] = form_fields()


def workload_text(spec: LoadSpec, field: WorkloadField) -> str:
    """The field text for ``spec``'s value (empty for unlimited/inf)."""
    value = getattr(spec, field.name)
    if value is None or (isinstance(value, float) and math.isinf(value)):
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _parse_text(field: WorkloadField, text: str) -> tuple[Any, FlagProblem | None]:
    """One field's text to its value (an empty field means ``field.blank``)."""
    if field.kind == "choice":
        return (text or field.default), None
    if text == "":
        if field.kind in ("optional_int", "optional_float"):
            return None, None
        if field.kind == "rate":
            return math.inf, None
        return None, FlagProblem(field.name, f"{field.label}: a number is required")
    whole = field.kind in ("int", "optional_int")
    try:
        return (int(text) if whole else float(text)), None
    except ValueError:
        kind = "whole number" if whole else "number"
        return None, FlagProblem(field.name, f"{field.label}: {text!r} is not a {kind}")


def parse_workload(
    base: LoadSpec, raw: Mapping[str, str]
) -> tuple[LoadSpec | None, list[FlagProblem]]:
    """``base`` with the form's Workload fields applied, or the problems, per field."""
    values: dict[str, Any] = {}
    problems: list[FlagProblem] = []
    for field in WORKLOAD_FIELDS:
        if field.name not in raw:
            continue
        value, problem = _parse_text(field, raw[field.name].strip())
        if problem is not None:
            problems.append(problem)
        else:
            values[field.name] = value
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
