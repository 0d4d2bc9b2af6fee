"""Where the simulator finds a model's files on disk, as vLLM would (never downloading).

A local directory is used as it is; a Hugging Face repo id is looked up in the local hub
cache (``$HF_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub``: huggingface_hub's precedence, the same rule as
``tui.server.model_config.hf_hub_cache``, which the simulator does not import) as
``models--ORG--NAME/snapshots/<rev>/``, preferring the revision ``refs/main`` names.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

_MARKERS = ("config.json", "tokenizer.json")


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache directory huggingface_hub uses."""
    environ = os.environ if env is None else env
    if environ.get("HF_HUB_CACHE"):
        return Path(environ["HF_HUB_CACHE"]).expanduser()
    if environ.get("HF_HOME"):
        return Path(environ["HF_HOME"]).expanduser() / "hub"
    xdg = environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def _snapshot(repo: str, hub: Path) -> Path | None:
    repo = repo.strip().strip("/")
    if not repo or repo.count("/") != 1 or ".." in repo.split("/"):
        return None
    folder = hub / ("models--" + repo.replace("/", "--"))
    snapshots = folder / "snapshots"
    if not snapshots.is_dir():
        return None
    ref = folder / "refs" / "main"
    try:
        revision = ref.read_text(encoding="utf-8").strip() if ref.is_file() else ""
    except (OSError, UnicodeDecodeError):
        revision = ""
    preferred = snapshots / revision if revision else None
    if preferred is not None and any((preferred / m).is_file() for m in _MARKERS):
        return preferred
    found = [d for d in snapshots.iterdir() if any((d / m).is_file() for m in _MARKERS)]
    return max(found, key=lambda d: d.stat().st_mtime) if found else None


def as_path(name: str) -> Path:
    """``name`` as a path, ``~`` expanded where it can be (``~nobody/x`` stays literal)."""
    try:
        return Path(name).expanduser()
    except RuntimeError:  # no home directory for that user
        return Path(name)


def model_folder(model: str, env: Mapping[str, str] | None = None) -> Path | None:
    """The folder holding ``model``'s files: itself if a directory, else its cache snapshot."""
    if not model:
        return None
    try:
        path = as_path(model)
        if path.is_dir():
            return path
        return _snapshot(model, hub_cache_dir(env))
    except (OSError, ValueError):  # unreadable entries or a NUL byte in the name: absent
        return None
