"""The form's fields for the installed vLLM's other flags, one row each, added on demand.

A flag the form does not declare (``--speculative-config``, ``--kv-offloading-size``...)
gets a row here when the operator picks it (the palette, the form's search) or when the
flags loaded into the form name it in their extra arguments. Each row is checked as vLLM's
parser checks it (:func:`tui.domain.flags.cli_fields.field_problems`), its error under it;
the rows' values travel as extra arguments (:meth:`CliFieldRows.tokens`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widget import AwaitMount

from tui.domain.flags.cli_fields import (
    Bounds,
    EditorKind,
    Lifted,
    Literals,
    editor_kind,
    field_problems,
    lift,
    placeholder,
    switch_values,
    tokens_of,
)
from tui.domain.flags.problems import FlagProblem
from tui.domain.flags.serve import flag_specs
from tui.domain.flags.vllm_cli import CliFlag, VllmCli
from tui.ui.widgets.flag_field import FlagField
from tui.ui.widgets.flag_search import first_sentence

PREFIX = "cli-"
"""A row's field name is ``cli-<dest>`` (its id ``field-cli-<dest>``)."""


def cli_row(flag: CliFlag, value: str) -> FlagField:
    """The row for one undeclared flag: a list for switches and choices, else a line."""
    kind = editor_kind(flag)
    deprecated = " (deprecated)" if flag.is_deprecated else ""
    help_text = f"{flag.name}{deprecated}: {first_sentence(flag.help) or flag.group}"
    if kind in (EditorKind.SWITCH, EditorKind.CHOICE):
        listed = tuple(str(c) for c in flag.choices or ())
        choices = switch_values(flag) if kind is EditorKind.SWITCH else listed
        default = "" if flag.default in (None, "") else f" ({flag.default})"
        return FlagField(
            PREFIX + flag.dest,
            flag.name[2:],
            kind="select",
            value=value,
            placeholder=f"default{default}",
            help=help_text,
            choices=choices,
        )
    hint = {EditorKind.JSON: "JSON", EditorKind.LIST: "words"}.get(kind, flag.type_name or "")
    return FlagField(
        PREFIX + flag.dest,
        flag.name[2:],
        value=value,
        placeholder=placeholder(flag),
        hint=hint.replace("human_readable_int", "int").replace("_or_auto", "|auto"),
        help=help_text,
    )


def lift_declared(extra: tuple[str, ...], cli: VllmCli) -> Lifted:
    """Extra args' flags that can have rows (the form's declared ones stay), and the rest."""
    return lift(extra, cli, frozenset(s.name for s in flag_specs()))


class CliFieldRows(Vertical):
    """The rows of the undeclared flags, in the order they were added."""

    def __init__(self, initial: Mapping[str, str], cli: VllmCli, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # by dest, in order; ``initial``: text by dest, the rows the form starts with
        self._flags: dict[str, CliFlag] = {}
        self._initial: list[FlagField] = []
        for dest, text in initial.items():
            flag = cli.flag(dest)
            if flag is not None:
                self._flags[dest] = flag
                self._initial.append(cli_row(flag, text))

    def compose(self) -> ComposeResult:
        """The rows the form starts with (flags its extra arguments named)."""
        yield from self._initial

    @property
    def dests(self) -> list[str]:
        """The flags that have a row."""
        return list(self._flags)

    def row(self, dest: str) -> FlagField:
        """The row of ``dest``."""
        return self.query_one(f"#field-{PREFIX}{dest}", FlagField)

    def add(self, flag: CliFlag, value: str = "") -> tuple[FlagField, AwaitMount | None]:
        """The row of ``flag``, and its mounting when it is new (``value``: a new row's)."""
        if flag.dest in self._flags:
            return self.row(flag.dest), None
        self._flags[flag.dest] = flag
        row = cli_row(flag, value)
        return row, self.mount(row)

    def open(self, flag: CliFlag, focus: Callable[[str], None]) -> str:
        """``focus`` the row of ``flag`` (a new row once it is mounted); its field name."""
        row, mounting = self.add(flag)
        if mounting is None:
            focus(row.field_name)
        else:
            self.call_later(self._focus_mounted, mounting, row.field_name, focus)
        return row.field_name

    async def _focus_mounted(
        self, mounting: AwaitMount, name: str, focus: Callable[[str], None]
    ) -> None:
        await mounting
        focus(name)

    def texts(self) -> dict[str, str]:
        """Each row's text by dest."""
        return {dest: self.row(dest).value for dest in self._flags}

    def load(self, values: Mapping[str, str], cli: VllmCli) -> None:
        """Put ``values`` (text by dest) in their rows, adding rows as needed; the other
        rows are emptied (they stay: the operator chose them)."""
        for dest in self._flags:
            if dest not in values:
                self.row(dest).set_value("")
        for dest, text in values.items():
            flag = cli.flag(dest)
            if flag is None:
                continue
            row, mounting = self.add(flag, text)
            if mounting is None:
                row.set_value(text)

    def check(
        self, cli: VllmCli, bounds: Bounds, literals: Literals
    ) -> tuple[tuple[str, ...], list[FlagProblem]]:
        """Every row's argv tokens, and each row's problems (also shown under it)."""
        tokens: list[str] = []
        problems: list[FlagProblem] = []
        for dest, flag in self._flags.items():
            row = self.row(dest)
            found = field_problems(flag, row.value, cli, bounds=bounds, literals=literals)
            row.set_error(" ".join(found) if found else None)
            problems += [FlagProblem(PREFIX + dest, message) for message in found]
            if not found:
                tokens += tokens_of(flag, row.value)
        return tuple(tokens), problems
