"""The flags form's lasting state on disk: ``<data dir>/<history>.form.json``.

One small JSON file per run history (``runs.form.json`` beside ``runs.sqlite``, the demo's
``demo-runs.form.json``), written atomically and ``0600`` like the history, by the console's
files adapter alone (:class:`~tui.store.console_files.ConsoleFiles`). Its flags are read back
through :class:`~tui.domain.flags.serve.ServeFlags`' validation, its workload through
:class:`~tui.domain.workload.LoadSpec`'s: a missing file reads as nothing kept (no word); a
damaged, foreign or outdated one as nothing kept with one line saying so, and the form starts
where it would have without it. Nothing is lost: the file is left as it is until the next
valid edit replaces it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tui.domain.flags.secrets import scrub_secret_args
from tui.domain.flags.serve import ServeFlags
from tui.domain.saved_form import SavedForm
from tui.domain.workload import LoadSpec
from tui.store.atomic import write_atomic
from tui.store.bounded_read import parse_json
from tui.store.private import FILE_MODE, private_dir
from tui.store.regular_file import read_regular_text

MAX_FORM_BYTES = 256 * 1024
"""A form is a few KiB (every flag set, long extra arguments); anything larger is not ours."""


def form_path(history: Path) -> Path:
    """The form file of the run history at ``history`` (``runs.sqlite`` -> ``runs.form.json``)."""
    return history.with_name(f"{history.stem}.form.json")


@dataclass(frozen=True)
class FormRead:
    """What reading the form file gave: the form kept (``None``: none), and one line when a
    file was there but could not be used."""

    saved: SavedForm | None
    note: str | None = None


def read_form(path: Path) -> FormRead:
    """The form kept at ``path``; nothing (and one line) when it cannot be used."""
    try:
        data = parse_json(read_regular_text(path, MAX_FORM_BYTES))
    except FileNotFoundError:
        return FormRead(None)
    except (OSError, ValueError) as exc:
        return FormRead(None, _unused(path, str(getattr(exc, "strerror", None) or exc)))
    if not isinstance(data, dict):
        return FormRead(None, _unused(path, "not a form"))
    preset = data.get("preset")
    try:
        flags = ServeFlags.model_validate(data.get("flags"))
        load = LoadSpec.model_validate(data.get("load"))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "flags"
        return FormRead(None, _unused(path, f"{where}: {first['msg']}"))
    return FormRead(SavedForm(flags, load, preset if isinstance(preset, str) else None))


def _unused(path: Path, why: str) -> str:
    return f"the form kept in {path} was not used ({why}); it starts afresh"


def write_form(path: Path, saved: SavedForm) -> None:
    """Write ``saved`` at ``path`` through a temporary file and a rename (``0600``); a secret
    option in its extra arguments is left out."""
    scrubbed = scrub_secret_args(saved.flags.extra_args)
    flags = saved.flags.model_copy(update={"extra_args": scrubbed.args})
    text = json.dumps(
        {
            # each model's own JSON (the workload writes an unlimited rate as "Infinity")
            "flags": json.loads(flags.model_dump_json(exclude_none=True)),
            "load": json.loads(saved.load.model_dump_json()),
            "preset": saved.preset,
        },
        indent=1,
    )
    private_dir(path.parent)
    write_atomic(path, text, what="form file", mode=FILE_MODE)
