"""The flags form: a preset picker, the flags by group, extra args and the workload.

Every edit re-validates the whole form with the domain's ``validate_form`` (and the workload
with ``parse_workload``) and shows each problem under its field, so the operator sees what
vLLM would reject before anything launches.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from textual import events, on
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.message import Message
from textual.widgets import Input, Select, Static

from tui.domain.flags.run_env import ENV_FIELD, env_text
from tui.domain.flags.serve import (
    FlagGroup,
    FlagProblem,
    ServeFlags,
    flag_spec,
    flag_specs,
)
from tui.domain.flags.validation import ValidationContext, validate_form
from tui.domain.presets import Preset
from tui.domain.workload import LoadSpec
from tui.ui.form_values import (
    WORKLOAD_FIELDS,
    extra_text,
    flag_text,
    parse_workload,
    workload_text,
)
from tui.ui.presets_view import edited_prompt, holds, preset_label
from tui.ui.widgets.cli_field_rows import PREFIX, CliFieldRows, lift_declared
from tui.ui.widgets.flag_field import FlagField
from tui.ui.widgets.flag_search import CliStatus, FlagSearch
from tui.ui.widgets.form_notes import FormNotes
from tui.ui.widgets.twin_line import TwinLine

FORM_HELP = "Tab moves between fields; Esc leaves the form so letter keys act; F5 restarts."
NO_PRESET = "preset: (none loaded)"
MODEL = "model"
EXTRA = "extra_args"
ENV = ENV_FIELD
ENV_HELP = (
    "The server's environment: NAME=value words (shell quoting), part of the run "
    "(VLLM_USE_V2_MODEL_RUNNER=0 works around 'UVA is not available'). Secrets are not kept "
    "here: set them in vtc's environment."
)


class FlagForm(FormNotes):
    """Edits a :class:`ServeFlags` and a :class:`LoadSpec` as text, validated live."""

    class Validated(Message):
        """Posted after each re-validation: ``flags`` is ``None`` while the form is invalid."""

        def __init__(self, flags: ServeFlags | None) -> None:
            super().__init__()
            self.flags = flags

    def __init__(
        self,
        flags: ServeFlags,
        load: LoadSpec,
        presets: list[Preset],
        *,
        initial_preset: str | None = None,
        cli_status: Callable[[], CliStatus] | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        # The installed vLLM's full flag list, read when the search section asks (it may
        # arrive after mount); without a source the section only says there is none.
        self._cli_status = cli_status or (lambda: CliStatus(None, "no vLLM flag list"))
        self._flags = flags
        self._load = load
        self._presets = list(presets)
        names = [p.name for p in self._presets]
        # The preset the session started from is shown as chosen, without reloading it.
        self._initial_preset = names.index(initial_preset) if initial_preset in names else None
        # The preset the form was last loaded from (the picker marks it edited once it differs).
        self._chosen: Preset | None = (
            self._presets[self._initial_preset] if self._initial_preset is not None else None
        )
        self._general_flags: list[str] = []
        self._general_load: list[str] = []
        self._revalidate_pending = False
        self._reveal: FlagField | None = None  # focused while hidden: scrolled to when shown

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        """Preset picker and messages on top, the scrolling fields, the focused field's help."""
        if self._presets:
            yield self._picker()
        yield Static("", id="form-problems")
        yield Static("", id="preflight")
        yield TwinLine(id="twin-prediction")
        with VerticalScroll(id="form-fields"):
            yield FlagField(
                MODEL,
                "model",
                value=self._flags.model,
                placeholder="model name or path",
                help="The MODEL argument: a Hugging Face id or a local path.",
            )
            for group in FlagGroup:
                specs = [s for s in flag_specs() if s.group is group]
                if not specs:
                    continue
                yield Static(group.value, classes="group-title")
                for spec in specs:
                    yield FlagField.for_flag(spec, flag_text(spec, getattr(self._flags, spec.name)))
            yield Static("More vLLM flags", classes="group-title")
            yield FlagSearch(self._cli_status, id="flag-search-section")
            lifted = lift_declared(self._flags.extra_args, self._validation().parser)
            yield CliFieldRows(lifted.values, self._validation().parser, id="cli-fields")
            yield FlagField(
                EXTRA,
                "extra args",
                value=extra_text(tuple(lifted.rest)),
                placeholder="--flag value ...",
                help="Any other vllm serve arguments, passed through verbatim (shell quoting).",
            )
            yield FlagField(
                ENV,
                "environment",
                value=env_text(self._flags.env),
                placeholder="NAME=value ...",
                help=ENV_HELP,
            )
            yield Static("Workload (b)", classes="group-title")
            for field in WORKLOAD_FIELDS:
                yield FlagField.for_workload(field, workload_text(self._load, field))
        yield Static(FORM_HELP, id="field-help")

    def _picker(self) -> Select[int]:
        return Select(
            [(preset_label(p), i) for i, p in enumerate(self._presets)],
            prompt=NO_PRESET,
            compact=True,
            id="preset",
            value=Select.NULL if self._initial_preset is None else self._initial_preset,
        )

    def on_mount(self) -> None:
        """Validate the initial values once."""
        self.revalidate()

    @property
    def chosen_preset(self) -> Preset | None:
        """The preset the form was last loaded from (it may have been edited since)."""
        return self._chosen

    def add_preset(self, preset: Preset) -> None:
        """Offer ``preset`` in the picker (replacing a same-named one), shown as chosen."""
        names = [p.name for p in self._presets]
        if preset.name in names:
            self._presets[names.index(preset.name)] = preset
        else:
            self._presets.append(preset)
        index = [p.name for p in self._presets].index(preset.name)
        self._chosen = preset
        self._initial_preset = index  # the form already holds it: choosing it must not reload
        pickers = self.query("#preset")
        if not pickers:
            self.mount(self._picker(), before="#form-problems")
            return
        picker = pickers.first(Select)
        picker.set_options([(preset_label(p), i) for i, p in enumerate(self._presets)])
        picker.prompt = NO_PRESET
        picker.value = index

    def _mark_edited(self, flags: ServeFlags | None, workload: LoadSpec | None) -> None:
        """Once the form no longer holds the chosen preset, the picker says so."""
        chosen, pickers = self._chosen, self.query("#preset")
        if chosen is None or not pickers or holds(chosen, flags, workload):
            return
        picker = pickers.first(Select)
        picker.prompt = edited_prompt(chosen)
        if picker.value != Select.NULL:
            picker.clear()

    # -- reading ----------------------------------------------------------------------------
    def raw_flags(self) -> dict[str, str]:
        """The flag fields' text by snake_case name."""
        return {spec.name: self.field(spec.name).value for spec in flag_specs()}

    def raw_workload(self) -> dict[str, str]:
        """The workload fields' text by ``LoadSpec`` field name."""
        return {f.name: self.field(f"load-{f.name}").value for f in WORKLOAD_FIELDS}

    def _validation(self) -> ValidationContext:
        # The installed vLLM's own parser once it is known (else its version's table).
        return ValidationContext(cli=self._cli_status().cli)

    @property
    def cli_rows(self) -> CliFieldRows:
        """The rows of the installed vLLM's flags the form does not declare."""
        return self.query_one(CliFieldRows)

    def validate_flags(self) -> tuple[ServeFlags | None, list[FlagProblem]]:
        """The form's flags, or every problem (also shown next to the fields)."""
        context = self._validation()
        # the rows of undeclared flags travel as extra args, checked each under its row
        tokens, row_problems = self.cli_rows.check(context.parser, context.bounds, context.literals)
        flags, problems = validate_form(
            self.field(MODEL).value.strip(),
            self.raw_flags(),
            " ".join([extra_text(tokens), self.field(EXTRA).value]).strip(),
            context,
            self.field(ENV).value,
        )
        if row_problems:
            flags, problems = None, row_problems + problems
        names = [s.name for s in flag_specs()] + [MODEL, EXTRA, ENV]
        names += [PREFIX + dest for dest in self.cli_rows.dests]
        self._general_flags = self.place_problems(problems, names, "")
        self.show_general([*self._general_flags, *self._general_load])
        return flags, problems

    def validate_workload(self) -> tuple[LoadSpec | None, list[FlagProblem]]:
        """The form's workload, or its problems (also shown next to the fields)."""
        spec, problems = parse_workload(self._load, self.raw_workload())
        names = [f.name for f in WORKLOAD_FIELDS]
        self._general_load = self.place_problems(problems, names, "load-")
        self.show_general([*self._general_flags, *self._general_load])
        return spec, problems

    def revalidate(self) -> None:
        """Validate everything, show the problems, announce the outcome."""
        flags, _ = self.validate_flags()
        workload, _ = self.validate_workload()
        self._mark_edited(flags, workload)
        self.post_message(self.Validated(flags))

    def focus_field(self, name: str) -> None:
        """Move focus to a field's editor and scroll it into view (again once the form
        is laid out, if it was hidden: the table view at 80 columns)."""
        row = self.field(name)
        row.editor.focus()
        row.scroll_visible(animate=False)
        self._reveal = row if self.size.height == 0 else None

    def on_resize(self) -> None:
        """Shown again (its size was 0): the field just focused scrolls into sight now."""
        row, self._reveal = self._reveal, None
        if row is not None:
            row.scroll_visible(animate=False)

    def show_warnings(self, warnings: list[str]) -> None:
        """Pre-flight warnings for the current flags, each under the field it names."""
        self.place_warnings(warnings, [MODEL, *(s.name for s in flag_specs()), EXTRA, ENV])

    # -- writing ----------------------------------------------------------------------------
    def load_flags(self, flags: ServeFlags, *, rows: bool = True) -> None:
        """Put ``flags`` in the form, every field (unset flags become empty); ``rows``
        False: the extra args stay text (attached: read-only, no row to edit)."""
        self.field(MODEL).set_value(flags.model)
        for spec in flag_specs():
            self.field(spec.name).set_value(flag_text(spec, getattr(flags, spec.name)))
        self._load_extra(flags.extra_args, rows)
        self.field(ENV).set_value(env_text(flags.env))

    def _load_extra(self, extra: tuple[str, ...], rows: bool = True) -> None:
        """Extra args into the form: flags with fields to their rows, the rest as text."""
        parser = self._validation().parser
        lifted = lift_declared(extra if rows else (), parser)
        lifted.rest = lifted.rest if rows else list(extra)
        self.cli_rows.load(lifted.values, parser)
        self.field(EXTRA).set_value(extra_text(tuple(lifted.rest)))

    def load_workload(self, spec: LoadSpec) -> None:
        """Put ``spec`` in the Workload fields; fields the form lacks keep ``spec``'s values."""
        self._load = spec
        for field in WORKLOAD_FIELDS:
            self.field(f"load-{field.name}").set_value(workload_text(spec, field))

    def apply_settings(self, settings: Mapping[str, Any]) -> list[str]:
        """Set some flags (a diagnosis fix: ``None`` unsets; ``env`` the whole environment);
        returns the names changed."""
        changed = []
        for name, value in settings.items():
            if name == MODEL:
                self.field(MODEL).set_value(str(value))
            elif name == EXTRA:
                self._load_extra(tuple(value or ()))
            elif name == ENV:
                pairs = value.items() if isinstance(value, Mapping) else value or ()
                self.field(ENV).set_value(env_text(pairs))
            else:
                try:
                    spec = flag_spec(name)
                except KeyError:
                    continue
                self.field(name).set_value(flag_text(spec, value))
            changed.append(name)
        return changed

    # -- events -----------------------------------------------------------------------------
    @on(Input.Changed, ".field-editor")
    @on(Select.Changed, ".field-editor")
    def _edited(self, event: Input.Changed | Select.Changed) -> None:
        event.stop()
        # Loading a preset changes every field at once: validate once for the lot.
        if not self._revalidate_pending:
            self._revalidate_pending = True
            self.call_later(self._revalidate_now)

    def _revalidate_now(self) -> None:
        self._revalidate_pending = False
        self.revalidate()

    @on(FlagSearch.Picked)
    def _flag_picked(self, event: FlagSearch.Picked) -> None:
        """Focus the picked flag's field (an undeclared flag gets a row of its own)."""
        event.stop()
        self.edit_flag(event.doc.key)

    def edit_flag(self, dest: str) -> str | None:
        """Focus the field of ``dest`` (any field's name; an undeclared flag of the installed
        vLLM gets a row of its own); its name, ``None`` if there is no such flag."""
        if self.query(f"#field-{dest}"):
            self.focus_field(dest)
            return dest
        flag = self._validation().parser.flag(dest)
        return None if flag is None else self.cli_rows.open(flag, self.focus_field)

    @on(Select.Changed, "#preset")
    def _preset_chosen(self, event: Select.Changed) -> None:
        event.stop()
        if not isinstance(event.value, int):
            return
        if event.value == self._initial_preset:
            self._initial_preset = None  # the form already holds it: only a re-pick reloads
            return
        preset = self._presets[event.value]
        self._chosen = preset
        self.load_flags(preset.flags)
        if preset.workload is not None:
            self.load_workload(preset.workload)
        self.notify(f"{preset.description}\n({preset.source})", title=f"preset {preset.name}")

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        """Show the focused field's help at the bottom of the form; mark its row."""
        for node in event.widget.ancestors_with_self:
            if isinstance(node, FlagField):
                self.query_one("#field-help", Static).update(Content(node.help))
                node.add_class("-editing")  # its label lights up (styles: .-editing)
                return

    def on_descendant_blur(self, event: events.DescendantBlur) -> None:
        """The row being left is no longer marked."""
        for node in event.widget.ancestors_with_self:
            if isinstance(node, FlagField):
                node.remove_class("-editing")
                return
