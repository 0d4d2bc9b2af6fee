"""Finding presets on disk: the shipped ones and the user's own.

Shipped presets live in the repository's ``presets/`` folder (installed into the wheel as
``tui/_presets``); user presets in ``<platform config dir>/vtc/presets/*.toml``. A user preset
with the same name as a shipped one replaces it. A file that cannot be used (unreadable, not
UTF-8, over :data:`MAX_PRESET_BYTES`, bad TOML, wrong types, a refused flag) never stops the
others: it is skipped with one line naming it in ``PresetCatalog.errors``, and under the
name it declares (else its file's stem) in ``PresetCatalog.skipped``, so a console asked for
it says why it was skipped rather than that there is none (issue 39).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from tui.domain.presets import Preset, PresetError, parse_preset, render_preset
from tui.domain.toml_text import loads_toml
from tui.store.atomic import write_atomic
from tui.store.regular_file import read_regular_bytes

_PACKAGE_DIR = Path(__file__).resolve().parent.parent
MAX_PRESET_BYTES = 256 * 1024
"""A preset file larger than this is skipped unread (the shipped ones are under 2 KiB)."""


def builtin_presets_dir() -> Path:
    """Where the shipped presets are: inside the wheel, else the source checkout."""
    installed = _PACKAGE_DIR / "_presets"
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / "presets"


def user_presets_dir() -> Path:
    """``<config dir>/vtc/presets`` (platformdirs: ~/.config/vtc/presets on Linux)."""
    return Path(platformdirs.user_config_dir("vtc")) / "presets"


@dataclass
class PresetCatalog:
    """All presets by name, plus one line per file that was skipped (``errors``)."""

    presets: list[Preset] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    """Why each skipped file was skipped, by the name it declares (and its file's stem)."""

    def get(self, name: str) -> Preset | None:
        """The preset called ``name``, if any."""
        return next((p for p in self.presets if p.name == name), None)

    def why_skipped(self, name: str) -> str | None:
        """Why the preset called ``name`` was skipped; ``None`` when none by that name was."""
        return self.skipped.get(name)


def load_presets(builtin_dir: Path | None = None, user_dir: Path | None = None) -> PresetCatalog:
    """Read shipped then user presets; user presets override shipped ones by name."""
    catalog = PresetCatalog()
    by_name: dict[str, Preset] = {}
    for folder, builtin in (
        (builtin_dir or builtin_presets_dir(), True),
        (user_dir or user_presets_dir(), False),
    ):
        for path in _preset_files(folder, catalog.errors):
            text = None
            try:
                text = read_preset_text(path)
                preset = parse_preset(text, str(path), builtin=builtin)
            except PresetError as exc:
                catalog.errors.append(f"{exc.one_line()}; skipped")
                for name in {path.stem, _declared_name(text)} - {None}:
                    catalog.skipped[str(name)] = exc.one_line()
                continue
            by_name[preset.name] = preset
            catalog.skipped.pop(preset.name, None)  # a user's good one replaces a bad one
    catalog.presets = list(by_name.values())
    return catalog


def _declared_name(text: str | None) -> str | None:
    """The ``name`` a preset file declares, when its TOML reads that far."""
    if text is None:
        return None
    try:
        name = loads_toml(text).get("name")
    except ValueError:
        return None
    return name if isinstance(name, str) and name else None


def _preset_files(folder: Path, errors: list[str]) -> list[Path]:
    try:
        if not folder.is_dir():
            return []
        return sorted(folder.glob("*.toml"))
    except OSError as exc:  # an unreadable folder: say so, load the other folder
        errors.append(f"{folder}: cannot list presets: {exc.strerror or exc}; skipped")
        return []


def read_preset_text(path: Path) -> str:
    """A preset file's text, read boundedly; :class:`PresetError` naming it otherwise."""
    try:
        raw = read_regular_bytes(path, MAX_PRESET_BYTES + 1)  # a FIFO never hangs the list
    except OSError as exc:
        raise PresetError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_PRESET_BYTES:
        raise PresetError(f"{path}: larger than {MAX_PRESET_BYTES // 1024} KiB; not a preset")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise PresetError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def save_user_preset(preset: Preset, user_dir: Path | None = None) -> Path:
    """Write ``preset`` to the user's preset folder atomically; returns the file."""
    folder = user_dir or user_presets_dir()
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in preset.name)
    target = folder / f"{safe}.toml"
    write_atomic(target, render_preset(preset), what="preset")
    return target
