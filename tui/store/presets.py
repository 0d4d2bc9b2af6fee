"""Finding presets on disk: the shipped ones and the user's own.

Shipped presets live in the repository's ``presets/`` folder (installed into the wheel as
``tui/_presets``); user presets in ``<platform config dir>/vtc/presets/*.toml``. A user preset
with the same name as a shipped one replaces it. A broken file never hides the others: it is
reported in ``PresetCatalog.errors``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import platformdirs

from tui.domain.presets import Preset, PresetError, parse_preset, render_preset

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


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
    """All presets by name, plus the files that could not be read."""

    presets: list[Preset] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def get(self, name: str) -> Preset | None:
        """The preset called ``name``, if any."""
        return next((p for p in self.presets if p.name == name), None)


def load_presets(builtin_dir: Path | None = None, user_dir: Path | None = None) -> PresetCatalog:
    """Read shipped then user presets; user presets override shipped ones by name."""
    catalog = PresetCatalog()
    by_name: dict[str, Preset] = {}
    for folder, builtin in (
        (builtin_dir or builtin_presets_dir(), True),
        (user_dir or user_presets_dir(), False),
    ):
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.toml")):
            try:
                preset = parse_preset(path.read_text(encoding="utf-8"), str(path), builtin=builtin)
            except (OSError, PresetError) as exc:
                catalog.errors.append(str(exc))
                continue
            by_name[preset.name] = preset
    catalog.presets = list(by_name.values())
    return catalog


def save_user_preset(preset: Preset, user_dir: Path | None = None) -> Path:
    """Write ``preset`` to the user's preset folder atomically; returns the file."""
    folder = user_dir or user_presets_dir()
    folder.mkdir(parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in preset.name)
    target = folder / f"{safe}.toml"
    tmp = target.with_suffix(".toml.tmp")
    tmp.write_text(render_preset(preset), encoding="utf-8")
    tmp.replace(target)
    return target
