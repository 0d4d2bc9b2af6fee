"""The Hugging Face cache on this machine, found as huggingface_hub finds it (read only).

One resolver for every part of vtc that looks for a model's files without downloading them
(the pre-flight's ``config.json``, the load generator's ``tokenizer.json``). The cache
folder follows huggingface_hub's ``constants.py``: ``$HF_HUB_CACHE``, else the deprecated
``$HUGGINGFACE_HUB_CACHE``, else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``,
else ``~/.cache/huggingface/hub`` (``~`` and ``$VARS`` expanded; an empty variable counts
as unset). A repo's files are in ``models--ORG--NAME/snapshots/<revision>/``; the
revision ``refs/main`` names is preferred, else the newest snapshot that has the file.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def _expand(value: str) -> Path:
    return Path(os.path.expandvars(os.path.expanduser(value)))


def hub_cache_dir(env: Mapping[str, str] | None = None) -> Path:
    """The hub cache folder for ``env`` (default: this process's environment)."""
    environ = os.environ if env is None else env
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE"):
        if environ.get(name):
            return _expand(environ[name])
    if environ.get("HF_HOME"):
        return _expand(environ["HF_HOME"]) / "hub"
    xdg = environ.get("XDG_CACHE_HOME")
    base = _expand(xdg) if xdg else Path.home() / ".cache"
    return base / "huggingface" / "hub"


def repo_folder(repo_id: str, hub: Path) -> Path | None:
    """``hub/models--ORG--NAME`` for a repo id (``None`` for what cannot be one)."""
    repo = repo_id.strip().strip("/")
    parts = repo.split("/")
    if not repo or len(parts) > 2 or any(p in ("", ".", "..") for p in parts):
        return None
    return hub / ("models--" + repo.replace("/", "--"))


def find_snapshot_file(
    repo_id: str, filename: str, *, hub: Path | None = None, env: Mapping[str, str] | None = None
) -> Path | None:
    """``filename`` in the cached snapshot of ``repo_id``: the ``refs/main`` revision's if
    it has the file, else the newest snapshot's that does; ``None`` when not cached."""
    folder = repo_folder(repo_id, hub if hub is not None else hub_cache_dir(env))
    if folder is None:
        return None
    snapshots = folder / "snapshots"
    try:
        if not snapshots.is_dir():
            return None
        revision = _main_revision(folder)
        if revision:
            preferred = snapshots / revision / filename
            if preferred.is_file():
                return preferred
        found = [p for p in snapshots.glob(f"*/{filename}") if p.is_file()]
        return max(found, key=lambda p: p.stat().st_mtime) if found else None
    except OSError:  # an unreadable cache is the same as no cache: nothing is found there
        return None


def _main_revision(folder: Path) -> str:
    try:
        return (folder / "refs" / "main").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return ""
