"""One row of the flags form: label, editor, range hint, and an inline error line."""

from __future__ import annotations

from typing import Literal, cast

from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.content import Content
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label, Select, Static

from tui.domain.flags.serve import (
    LAUNCH_HOST,
    QUANTIZATION_METHODS,
    FlagKind,
    FlagSpec,
    format_value,
)
from tui.ui.form_values import WorkloadField

# Free-text flags that still have a known vocabulary: the input suggests as you type.
_SUGGESTIONS: dict[str, tuple[str, ...]] = {"quantization": QUANTIZATION_METHODS}

EditorKind = Literal["input", "select"]


class FlagField(Vertical):
    """A labelled editor whose value is text; empty text means "not set".

    Booleans and choices use a ``Select`` whose blank entry reads "default (...)"; the
    tri-state boolean is blank/on/off. Everything else is a one-line ``Input`` with vLLM's
    default as placeholder.
    """

    def __init__(
        self,
        name: str,
        label: str,
        *,
        kind: EditorKind = "input",
        value: str = "",
        placeholder: str = "",
        hint: str = "",
        help: str = "",
        choices: tuple[str, ...] = (),
        suggestions: tuple[str, ...] = (),
    ) -> None:
        super().__init__(id=f"field-{name}", classes="flag-field")
        self.field_name = name
        self._label = label
        self._kind: EditorKind = kind
        self._value = value
        self._placeholder = placeholder
        self._hint = hint
        self._help = help
        self._choices = choices
        self._suggestions = suggestions
        self._error_shown: str | None = None
        self._warning_shown: str | None = None
        self._editor: Input | Select[str] | None = None  # made by compose (kept: see editor)

    @classmethod
    def for_flag(cls, spec: FlagSpec, value: str) -> FlagField:
        """The row for one ``vllm serve`` flag."""
        default = format_value(spec.vllm_default)
        prompt = "default" if spec.vllm_default is None else f"default ({default})"
        if spec.kind is FlagKind.BOOL:
            return cls(
                spec.name,
                spec.cli[2:],
                kind="select",
                value=value,
                placeholder=prompt,
                help=spec.help,
                choices=("on", "off"),
            )
        if spec.kind is FlagKind.CHOICE:
            return cls(
                spec.name,
                spec.cli[2:],
                kind="select",
                value=value,
                placeholder=prompt,
                help=spec.help,
                choices=spec.choices or (),
            )
        if spec.name == "host":  # vtc's launch default, not vLLM's (every interface)
            default = f"{LAUNCH_HOST} (vtc default)"
        return cls(
            spec.name,
            spec.cli[2:],
            value=value,
            placeholder=default,
            hint=spec.describe_range(),
            help=spec.help,
            suggestions=_SUGGESTIONS.get(spec.name, ()),
        )

    @classmethod
    def for_workload(cls, field: WorkloadField, value: str) -> FlagField:
        """The row for one workload setting (names are prefixed ``load-``)."""
        if field.kind == "choice":
            return cls(
                f"load-{field.name}",
                field.label,
                kind="select",
                value=value,
                placeholder="default",
                help=field.help,
                choices=field.choices,
            )
        return cls(
            f"load-{field.name}", field.label, value=value, placeholder=field.blank, help=field.help
        )

    def compose(self) -> ComposeResult:
        """Label, editor and hint on one line; the error line is added on the first error."""
        with Horizontal(classes="field-row"):
            yield Label(self._label, classes="field-label")
            self._editor = self._make_editor()
            yield self._editor
            if self._hint:
                yield Static(self._hint, classes="field-hint")

    def _make_editor(self) -> Input | Select[str]:
        editor_id = f"in-{self.field_name}"
        if self._kind == "select":
            options = [(c, c) for c in self._choices]
            initial = self._value if self._value in self._choices else Select.NULL
            return Select(
                options,
                prompt=self._placeholder,
                value=initial,
                allow_blank=True,
                compact=True,
                id=editor_id,
                classes="field-editor",
                tooltip=self._help,
            )
        suggester = (
            SuggestFromList(self._suggestions, case_sensitive=False) if self._suggestions else None
        )
        return Input(
            value=self._value,
            placeholder=self._placeholder,
            compact=True,
            id=editor_id,
            classes="field-editor",
            suggester=suggester,
            tooltip=self._help,
            select_on_focus=True,  # typing replaces the value (Tab, a click or the palette)
        )

    @property
    def editor(self) -> Input | Select[str]:
        """The Input or Select holding the value."""
        # Kept from compose, not queried: the form reads every field's value on each edit
        # and each validation, thirty fields and more each time.
        if self._editor is None:  # not composed yet: Textual's own NoMatches says so
            return cast("Input | Select[str]", self.query_one(".field-editor"))
        return self._editor

    @property
    def help(self) -> str:
        """The flag's help text."""
        return self._help

    @property
    def value(self) -> str:
        """The field's text ("" when not set)."""
        if not self.is_mounted:
            return self._value
        editor = self.editor
        if isinstance(editor, Select):
            selected = editor.value
            return selected if isinstance(selected, str) else ""
        return editor.value

    def set_value(self, text: str) -> None:
        """Put ``text`` in the field (a preset or a fix); "" clears it."""
        self._value = text
        if not self.is_mounted:
            return
        editor = self.editor
        if isinstance(editor, Select):
            if text in self._choices:
                editor.value = text
            else:
                editor.clear()
        else:
            editor.value = text

    def mark_read(self, source: str | None, unread: str) -> None:
        """Read-only, as read from a server this console did not start (attach mode).

        ``source`` says where the value was read (shown beside it); a field read from
        nowhere shows ``unread`` ("not known", or vLLM's default when the log said so)
        instead of a default it cannot vouch for.
        """
        editor = self.editor
        editor.disabled = True
        for range_hint in self.query(".field-hint").results(Static):
            range_hint.display = range_hint.has_class("field-source")  # nothing is typed here
        if source is None:
            if isinstance(editor, Select):
                editor.prompt = unread
            else:
                editor.placeholder = unread
        text = f"← {source}" if source is not None else ""
        hints = self.query(".field-source").results(Static)
        hint = next(hints, None)
        if hint is None:
            if not text:
                return
            hint = Static(classes="field-hint field-source")
            self.query_one(".field-row").mount(hint)
        hint.update(Content(text))

    def set_warning(self, message: str | None) -> None:
        """Show a pre-flight warning under the row (``None`` hides it)."""
        if message == self._warning_shown:
            return
        self._warning_shown = message
        warnings = self.query(".field-warning").results(Static)
        line = next(warnings, None)
        if line is None:
            if not message:
                return
            line = Static(classes="field-warning")
            self.mount(line)
        line.update(Content(message or ""))
        line.display = bool(message)

    def set_error(self, message: str | None) -> None:
        """Show ``message`` under the row (``None`` hides it)."""
        if message == self._error_shown:
            return  # the form re-validates on every keystroke: skip needless restyles
        self._error_shown = message
        # Mounted lazily: a form has dozens of fields and few errors, and every widget costs.
        errors = self.query(".field-error").results(Static)
        error = next(errors, None)
        if error is None:
            if not message:
                return
            error = Static(classes="field-error")
            self.mount(error)
        error.update(Content(message or ""))
        self.set_class(bool(message), "-invalid")
        self.editor.set_class(bool(message), "-invalid")
        if message and self.has_focus_within:  # the row being typed in: its error in sight
            error.scroll_visible(animate=False)
