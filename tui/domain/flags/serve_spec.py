"""The form's view of :class:`~tui.domain.flags.serve.ServeFlags`: one :class:`FlagSpec` per
declared field, read off the field's declaration (its CLI spelling, aliases, kind, group,
vLLM default, bounds and help)."""

from __future__ import annotations

from typing import Any, Literal, get_args

import annotated_types
from pydantic import BaseModel

from tui.domain.flags.spec import FlagGroup, FlagKind, FlagSpec


def specs_of(model: type[BaseModel]) -> tuple[FlagSpec, ...]:
    """Every field of ``model`` that declares a CLI flag, in declaration order."""
    return tuple(_spec_of(name, field) for name, field in _declared_fields(model))


def _declared_fields(model: type[BaseModel]) -> list[tuple[str, Any]]:
    return [
        (name, field)
        for name, field in model.model_fields.items()
        if isinstance(field.json_schema_extra, dict) and "cli" in field.json_schema_extra
    ]


def _spec_of(name: str, field: Any) -> FlagSpec:
    extra = field.json_schema_extra
    kind, choices = _kind_and_choices(field.annotation)
    bounds: dict[str, float] = {}
    for meta in field.metadata:
        for attr in ("ge", "gt", "le"):
            if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                bounds[attr] = getattr(meta, attr)
    return FlagSpec(
        name=name,
        cli=str(extra["cli"]),
        aliases=tuple(extra["aliases"]),
        kind=kind,
        group=FlagGroup(str(extra["group"])),
        help=field.description or "",
        vllm_default=extra["vllm_default"],
        config=str(extra["config"]),
        choices=choices,
        human=bool(extra["human"]),
        auto=bool(extra["auto"]),
        optional=bool(extra["optional"]),
        **bounds,
    )


def _kind_and_choices(annotation: Any) -> tuple[FlagKind, tuple[str, ...] | None]:
    args = [a for a in get_args(annotation) if a is not type(None)]
    inner = args[0] if args else annotation
    if getattr(inner, "__origin__", None) is Literal:
        return FlagKind.CHOICE, tuple(get_args(inner))
    return {
        int: FlagKind.INT,
        float: FlagKind.FLOAT,
        bool: FlagKind.BOOL,
        str: FlagKind.STR,
    }[inner], None
