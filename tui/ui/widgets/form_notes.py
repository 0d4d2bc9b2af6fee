"""A form's notes: each problem and warning under the field it names, the rest on top.

The flags form's base (``FlagForm``): it finds a row by its name (``#field-NAME``) and puts
each note where the operator looks for it; what names no field goes to the form-wide boxes
(``#form-problems`` for problems, ``#preflight`` for pre-flight warnings).
"""

from __future__ import annotations

from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Static

from tui.domain.flags.serve import FlagProblem
from tui.ui.preflight_view import place_warnings
from tui.ui.widgets.flag_field import FlagField


class FormNotes(Vertical):
    """Rows found by name; problems and warnings placed under them."""

    def field(self, name: str) -> FlagField:
        """The row for a flag name, ``model``, ``extra_args``, ``env`` or
        ``load-<workload field>``."""
        return self.query_one(f"#field-{name}", FlagField)

    def place_problems(
        self, problems: list[FlagProblem], names: list[str], prefix: str
    ) -> list[str]:
        """Put each problem under its field; returns those that name no field."""
        by_field: dict[str, list[str]] = {}
        general: list[str] = []
        for problem in problems:
            if problem.field in names:
                by_field.setdefault(problem.field, []).append(problem.message)
            else:
                general.append(problem.message)
        for name in names:
            messages = by_field.get(name)
            self.field(prefix + name).set_error(" ".join(messages) if messages else None)
        return general

    def show_general(self, general: list[str]) -> None:
        """The problems that name no field, on top of the form (none: the box is hidden)."""
        box = self.query_one("#form-problems", Static)
        box.update(Content("\n".join(general)))
        box.display = bool(general)

    def first_problem_field(self, problems: list[FlagProblem], prefix: str = "") -> str | None:
        """The field name (with ``prefix``) of the first problem that names a field on screen."""
        for problem in problems:
            if problem.field and self.query(f"#field-{prefix}{problem.field}"):
                return prefix + problem.field
        return None

    def place_warnings(self, warnings: list[str], names: list[str]) -> None:
        """Pre-flight warnings, each under the field it names (the form-wide box keeps only
        those that name none; empty hides it)."""
        placed = place_warnings(warnings, names)
        for name in names:
            found = placed.by_field.get(name)
            self.field(name).set_warning(" ".join(f"! {w}" for w in found) if found else None)
        box = self.query_one("#preflight", Static)
        box.update(Content("\n".join(f"! {w}" for w in placed.general)))
        box.display = bool(placed.general)
