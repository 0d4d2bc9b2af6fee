"""One declared flag as the command line, the form and the checks see it.

``FlagSpec`` is read from ``ServeFlags``' declaration (:func:`tui.domain.flags.serve.flag_specs`):
its spellings, kind, default, range, and how a text value becomes a typed one. Two
readings of a text value, both vLLM's:

- :meth:`FlagSpec.parse_arg` reads an argv value exactly as vLLM 0.32's argparse types it
  (``engine/arg_utils.py:160-178,319-448``; ``utils/argparse_utils.py:29-93``): ``int``,
  ``float``, ``human_readable_int[_or_auto]``, choices compared verbatim, and for the
  ``optional_type`` flags ``""``/``"None"`` meaning "not set". A boolean takes no value
  (``--x`` / ``--no-x``; ``--x=yes`` is argparse's "ignored explicit argument").
- :meth:`FlagSpec.parse` reads what the form's text field holds: surrounding blanks
  are ignored, empty text means "not set", and a boolean is ``on``/``off`` (the form's
  choices) or ``true``/``false``.

Errors are :class:`~tui.domain.flags.problems.ArgvError` in argparse's words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import Field

from tui.domain.flags.humanint import (
    HumanIntError,
    format_human_bytes,
    parse_human_int,
    parse_human_int_or_auto,
)
from tui.domain.flags.problems import ArgvError

INT64_MAX = 2**63 - 1
"""The largest integer vtc passes: vLLM hands sizes and counts to torch as 64-bit integers."""

_FORM_TRUE = frozenset({"on", "true"})
_FORM_FALSE = frozenset({"off", "false"})


class FlagKind(StrEnum):
    """How a flag's value is typed on the command line."""

    INT = "int"
    FLOAT = "float"
    BOOL = "bool"  # BooleanOptionalAction: --x / --no-x
    CHOICE = "choice"
    STR = "str"


class FlagGroup(StrEnum):
    """Where a flag sits in the form; the order here is the form's order."""

    MEMORY = "Memory & KV cache"
    BATCHING = "Batching & scheduling"
    MODEL = "Model & precision"
    PARALLEL = "Parallelism"
    SERVER = "Server"


def flag(
    *,
    cli: str,
    help: str,
    group: FlagGroup,
    vllm_default: Any = None,
    config: str = "EngineArgs",
    aliases: tuple[str, ...] = (),
    human: bool = False,
    auto: bool = False,
    optional: bool = False,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    default: Any = None,
    finite: bool = False,
) -> Any:
    """Declare one flag: a pydantic ``Field`` whose extras hold what the CLI and form need.

    ``vllm_default`` is what vLLM uses when the flag is not passed (``None``: derived at run
    time, e.g. from the model config or the device); take it from
    :mod:`tui.domain.flags.vllm_defaults`. ``config`` names the vLLM config class whose pydantic
    validation reports a range error. ``optional``: vLLM types it with ``optional_type``
    (``""``/``"None"`` mean not set). ``finite``: a float that must be a finite number.
    """
    extra = {
        "cli": cli,
        "aliases": list(aliases),
        "group": group.value,
        "vllm_default": vllm_default,
        "config": config,
        "human": human,
        "auto": auto,
        "optional": optional,
    }
    return Field(
        default=default,
        ge=ge,
        gt=gt,
        le=le,
        description=help,
        json_schema_extra=extra,
        allow_inf_nan=False if finite else None,
    )


@dataclass(frozen=True)
class FlagSpec:
    """One flag as the CLI and the form see it, read from ``ServeFlags``' declaration."""

    name: str
    cli: str
    aliases: tuple[str, ...]
    kind: FlagKind
    group: FlagGroup
    help: str
    vllm_default: Any
    config: str
    choices: tuple[str, ...] | None = None
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    human: bool = False
    auto: bool = False
    optional: bool = False

    @property
    def spellings(self) -> tuple[str, ...]:
        """Every option string that names this flag (``_`` and ``-`` both accepted later)."""
        return (self.cli, *self.aliases)

    @property
    def option_strings(self) -> tuple[str, ...]:
        """The option strings vLLM registers (``--no-x`` too for a boolean)."""
        if self.kind is FlagKind.BOOL:
            return (self.cli, "--no-" + self.cli[2:], *self.aliases)
        return self.spellings

    @property
    def argparse_name(self) -> str:
        """How argparse names the flag in its errors: every option string, ``/``-joined."""
        return "/".join(self.option_strings)

    def render(self, value: Any) -> list[str]:
        """This flag and ``value`` as argv tokens."""
        if self.kind is FlagKind.BOOL:
            return [self.cli] if value else ["--no-" + self.cli[2:]]
        if self.human and self.name.endswith("_bytes") and isinstance(value, int):
            return [self.cli, format_human_bytes(value)]
        if isinstance(value, float) and value.is_integer() and self.kind is FlagKind.FLOAT:
            return [self.cli, repr(value)]
        text = str(value)
        if text.startswith("-") and not _is_number(text):
            # argparse reads "--host -:" as a flag missing its value; "--host=-:" is the value
            return [f"{self.cli}={text}"]
        return [self.cli, text]

    # -- reading values ------------------------------------------------------------------------
    def parse_arg(self, text: str) -> Any:
        """Type one argv value the way vLLM's argparse does; ``None`` means "not set".

        Raises :class:`ArgvError` with argparse's message.
        """
        if self.kind is FlagKind.BOOL:
            raise self._error(f"ignored explicit argument {text!r}")
        if self.kind is FlagKind.STR and not text.strip():
            # vLLM reads "" as "not set" for --host and as a missing name (an error) for
            # --served-model-name; vtc refuses both rather than guess what was meant
            raise self._error(f"an empty value {text!r}; leave the flag out for vLLM's default")
        if self.optional and text in ("", "None"):
            if self.name == "served_model_name":
                raise self._error("'None' is no name (vLLM reads it as a missing name)")
            return None  # vLLM's optional_type (engine/arg_utils.py:172-178)
        if self.kind is FlagKind.INT:
            return self._parse_int(text)
        if self.kind is FlagKind.FLOAT:
            return self._parse_float(text)
        if self.kind is FlagKind.CHOICE:
            assert self.choices is not None
            if text not in self.choices:
                options = ", ".join(repr(c) for c in self.choices)
                raise self._error(f"invalid choice: {text!r} (choose from {options})")
            return text
        return text

    def parse(self, text: str) -> Any:
        """Type the form's text for this flag: blanks trimmed, empty is "not set".

        Booleans are ``on``/``off`` (or ``true``/``false``); everything else as
        :meth:`parse_arg` reads it. Raises :class:`ArgvError`.
        """
        raw = text.strip()
        if raw == "":
            return None
        if self.kind is FlagKind.BOOL:
            lowered = raw.lower()
            if lowered in _FORM_TRUE:
                return True
            if lowered in _FORM_FALSE:
                return False
            raise self._error(f"expected on or off, got {text!r}")
        return self.parse_arg(raw)

    def _parse_int(self, text: str) -> int:
        type_name = (
            "human_readable_int_or_auto"
            if self.auto
            else ("human_readable_int" if self.human else "int")
        )
        try:
            if self.auto:
                return parse_human_int_or_auto(text)
            if self.human:
                return parse_human_int(text)
            return int(text)
        except HumanIntError as exc:
            raise self._error(str(exc)) from exc
        except (ValueError, OverflowError) as exc:
            if self.optional:
                # optional_type's own words (engine/arg_utils.py:160-169)
                raise self._error(f"Value {text} cannot be converted to {type_name}.") from exc
            raise self._error(f"invalid {type_name} value: {text!r}") from exc

    def _parse_float(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError as exc:
            raise self._error(f"invalid float value: {text!r}") from exc
        return value

    def _error(self, detail: str) -> ArgvError:
        return ArgvError(f"argument {self.argparse_name}: {detail}", field=self.name)

    def describe_range(self) -> str:
        """A short human rendering of the allowed range, for the form's hint line."""
        if self.auto:
            return ">0|-1"  # vLLM: a positive length, or -1 (auto); as short as the old hint
        parts = []
        if self.gt is not None:
            parts.append(f"> {_num(self.gt)}")
        if self.ge is not None:
            parts.append(f">= {_num(self.ge)}")
        if self.le is not None:
            parts.append(f"<= {_num(self.le)}")
        return ", ".join(parts)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else str(x)


def is_finite(value: float) -> bool:
    """``math.isfinite`` (named here so the flag rules read plainly)."""
    return math.isfinite(value)


def format_value(value: Any) -> str:
    """A compact rendering of a flag value for cards and diffs."""
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


def _is_number(text: str) -> bool:
    """Whether argparse takes ``text`` as a (negative) number rather than an option."""
    try:
        float(text)
    except ValueError:
        return False
    return True
