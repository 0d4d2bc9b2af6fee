"""What is wrong with a flag set: one problem per flag, and the error that carries them.

Every path a flag value takes into vtc (the form, ``vtc -- serve ...``, a preset, a
``--config`` file, a diagnosis fix, a sweep) reports through these: a :class:`FlagProblem`
names the flag, the value and the rule (in vLLM's words where vLLM has them), and a
:class:`FlagError` carries them all as one line for the CLI and the console.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tui.domain.errors import VtcError

_SHOWN_VALUE_CHARS = 60
SECRET_SHOWN = "***"  # what a secret value reads as in any message


@dataclass(frozen=True)
class FlagProblem:
    """One reason a flag set is invalid, attached to a flag when it concerns one.

    ``field`` is the ``ServeFlags`` name (or ``model``/``extra_args``; ``None`` for a rule
    that spans flags); ``message`` the rule as shown under the form field; ``flag`` and
    ``value`` (its text) what :attr:`line` puts in front of it.
    """

    field: str | None
    message: str
    flag: str | None = None
    value: str | None = None

    @property
    def line(self) -> str:
        """One line naming the flag, the value and the rule."""
        message = " ".join(self.message.split())
        if self.flag is None or message.startswith(("argument ", self.flag)):
            return message  # argparse's own words already name the flag and the value
        shown = "" if self.value is None else f" {shown_value(self.value)}"
        return f"{self.flag}{shown}: {message}"


def shown_value(value: Any) -> str:
    """A value as a message shows it: quoted when empty, spaced or holding a control character
    (a newline would break the one line), cut when long."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) > _SHOWN_VALUE_CHARS:
        text = text[: _SHOWN_VALUE_CHARS - 1] + "…"
    if text == "" or any(c.isspace() for c in text) or not text.isprintable():
        return repr(text)
    return text


class FlagError(VtcError, ValueError):
    """A flag set vtc refuses; ``problems`` holds each reason (at least one).

    A ``ValueError`` too, so code written against the older parse functions keeps working.
    """

    def __init__(self, problems: Sequence[FlagProblem] | FlagProblem, *, hint: str | None = None):
        if isinstance(problems, FlagProblem):
            problems = [problems]
        self.problems: tuple[FlagProblem, ...] = tuple(problems) or (
            FlagProblem(None, "invalid flags"),
        )
        super().__init__("; ".join(p.line for p in self.problems), hint=hint)

    @classmethod
    def of(
        cls,
        message: str,
        *,
        field: str | None = None,
        flag: str | None = None,
        value: str | None = None,
    ) -> FlagError:
        """A one-problem error."""
        return cls([FlagProblem(field, message, flag, value)])


class ArgvError(FlagError):
    """A command line that vLLM's argparse would reject (exit code 2 there).

    The message is argparse's own (``argument --max-num-seqs: invalid int value: 'x'``).
    """

    def __init__(
        self,
        message: str | Sequence[FlagProblem],
        *,
        field: str | None = None,
        hint: str | None = None,
    ) -> None:
        if isinstance(message, str):
            super().__init__([FlagProblem(field, message)], hint=hint)
        else:
            super().__init__(message, hint=hint)


def problems_from_error(
    exc: ValidationError, cli_of: dict[str, str] | None = None, data: dict[str, Any] | None = None
) -> list[FlagProblem]:
    """Turn pydantic's ``ValidationError`` on ``ServeFlags`` into per-flag problems.

    Range errors keep pydantic's wording, which is exactly vLLM's (reference 1.5); ``cli_of``
    maps field names to their ``--flag`` and ``data`` holds the values validated, so each
    problem can name both. Cross-field errors (raised by the model validator, several joined
    by " | ") are attached to the flag each one names first.
    """
    cli_of = cli_of or {}
    data = data or {}
    out: list[FlagProblem] = []
    for err in exc.errors():
        loc = err.get("loc", ())
        field = str(loc[0]) if loc else None
        message = str(err.get("msg", "invalid")).removeprefix("Value error, ")
        if field is not None:
            out.append(_field_problem(field, message, cli_of, data))
            continue
        for part in message.split(_JOIN):
            out.append(_cross_problem(part, cli_of))
    return out


_JOIN = " | "  # how the model validator joins several cross-field problems


def join_problems(problems: Iterable[str]) -> str:
    """Several cross-field messages as one ``ValueError`` text (split back by
    :func:`problems_from_error`)."""
    return _JOIN.join(problems)


def _field_problem(
    field: str, message: str, cli_of: dict[str, str], data: dict[str, Any]
) -> FlagProblem:
    # the environment's values are never repeated: one may be a secret the rule refuses
    value = None if field == "env" else data.get(field)
    return FlagProblem(
        field,
        message,
        cli_of.get(field),
        None if value is None else (value if isinstance(value, str) else repr(value)),
    )


def _cross_problem(message: str, cli_of: dict[str, str]) -> FlagProblem:
    # "field: rule" from our own validators names its field first; vLLM's cross-field texts
    # name their flags in snake_case inside the sentence.
    head, sep, rest = message.partition(": ")
    if sep and head == "extra_args":
        return FlagProblem(head, rest)
    if sep and head in cli_of:
        return FlagProblem(head, rest, cli_of[head])
    named = [(message.find(name), name) for name in cli_of if name in message]
    field = min(named)[1] if named else None
    return FlagProblem(field, message)
