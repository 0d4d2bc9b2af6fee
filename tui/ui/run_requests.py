"""What the main screen does with the session's tools for the board's requests and the form.

The board posts ``RepeatRun`` and ``ExportRun``; the screen hands them here (and ctrl+s's
preset saving), and each runs in the one guarded worker (:func:`tui.ui.workers.run_guarded`),
reporting in one line.
"""

from __future__ import annotations

from textual.widget import Widget

from tui.domain.board.baseline import run_label
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord
from tui.session.port import SessionPort, SessionTools
from tui.ui.presets_view import check_preset_name, preset_from_form
from tui.ui.screen_keeper import open_screen
from tui.ui.screens.ask import AskScreen
from tui.ui.widgets.flag_form import FlagForm
from tui.ui.workers import run_guarded


def repeat_run(node: Widget, tools: SessionTools, run: RunRecord, times: int) -> None:
    """Run ``run`` again ``times`` times (same flags and workload): its noise."""
    label = run_label(run)
    node.notify(f"Repeating {label} {times}×: restart, ready, load (s stops).", title="Repeat")

    async def repeat() -> None:
        made = await tools.repeat(run, times)
        labels = " ".join(run_label(r) for r in made)
        node.notify(
            f"{label} repeated {len(made)}×: {labels}. Repeats form a group: a delta "
            "inside its spread reads as noise (~).",
            title="Repeat done",
        )

    run_guarded(node, "Repeat", repeat)


def export_run(node: Widget, tools: SessionTools, run: RunRecord, fmt: str) -> None:
    """Write ``run`` as ``fmt`` under the data dir; say where."""

    async def export() -> None:
        path = await tools.export(run, fmt)
        node.notify(f"{run_label(run)} as {fmt}: {path}", title="Exported")

    run_guarded(node, "Export", export)


def ask_and_save_preset(
    node: Widget, session: SessionPort, form: FlagForm, flags: ServeFlags
) -> None:
    """Ask a name, then save ``flags`` and the form's workload as one of the user's presets."""
    workload, _ = form.validate_workload()
    based_on = form.chosen_preset

    def save(name: str | None) -> None:
        if name is None:
            return
        preset = preset_from_form(
            name, flags, workload, based_on=based_on, machine=session.info.label
        )

        async def write() -> None:
            path = await session.tools.save_preset(preset)
            form.add_preset(preset)
            node.notify(str(path), title=f"Preset {preset.name} saved")

        run_guarded(node, "Save preset", write)

    hint = "letters, digits, - _ . · a preset of the same name is replaced"
    suggestion = f"{based_on.name}-mine" if based_on is not None else ""
    open_screen(
        node.app,
        AskScreen("Save the form as preset", suggestion, hint=hint, check=check_preset_name),
        save,
    )
