"""Twin profiles on disk: ``<data dir>/profiles/NAME.json``, each save a new revision.

A save over an existing name keeps the previous file as ``NAME.r<revision>.json`` beside it
and writes the new one with the next revision, so a refit (a sweep's real trials, a
recalibration) never loses the profile it replaced. Files are JSON of
:class:`~tui.domain.profile.Profile`, created ``0600`` in a ``0700`` folder; one of another
schema version, or not a profile, is refused with one line naming it.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import ValidationError

from tui.domain.profile import PROFILE_SCHEMA, Profile, ProfileError
from tui.store.atomic import write_atomic
from tui.store.bounded_read import UntrustedFileError, read_json
from tui.store.history import default_data_dir
from tui.store.private import FILE_MODE, private_dir

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MAX_PROFILE_BYTES = 64 * 2**20


def profiles_dir(data_dir: Path | None = None) -> Path:
    """Where profiles live (the data dir's ``profiles/``)."""
    return (data_dir or default_data_dir()) / "profiles"


def check_name(name: str) -> str:
    """``name`` if it can name a profile file, else :class:`ProfileError`."""
    if not NAME_RE.match(name) or name.endswith(".json"):
        raise ProfileError(
            f"bad profile name {name[:80]!r}",
            hint="letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit",
        )
    return name


def profile_path(name: str, data_dir: Path | None = None) -> Path:
    """The current file of the profile ``name``."""
    return profiles_dir(data_dir) / f"{check_name(name)}.json"


#: The most KV tokens, blocks or context a profile may claim: far above any server's
#: (an H200's whole memory as KV of a 1-layer model is ~10^9 tokens), far below what
#: would exhaust this machine's memory in the simulator's block table.
MAX_PLAUSIBLE_TOKENS = 2**32


def read_profile(path: Path) -> Profile:
    """The profile in ``path`` (refused with one line when it is not a usable profile).

    Read by :func:`tui.store.bounded_read.read_json` (bounded size and depth, UTF-8, finite
    numbers), then checked for plausible sizes (:func:`_implausible`).
    """
    try:
        data = read_json(path, max_bytes=MAX_PROFILE_BYTES, what="profile")
    except UntrustedFileError as exc:
        raise ProfileError(exc.message) from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != PROFILE_SCHEMA:
        raise ProfileError(
            f"profile {path} has schema {str(version)[:40]!r}; "
            f"this vtc reads schema {PROFILE_SCHEMA}",
            hint="recalibrate with `vtc calibrate`",
        )
    try:
        profile = Profile.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])[:120]
        raise ProfileError(f"profile {path} is not valid: {where}: {first['msg'][:200]}") from None
    implausible = _implausible(profile)
    if implausible:
        raise ProfileError(f"profile {path} is not plausible: {implausible}")
    return profile


def _implausible(profile: Profile) -> str:
    """What in ``profile`` no real server has ("" when nothing)."""
    m = profile.memory
    for what, value in (
        ("memory.kv_tokens", m.kv_tokens),
        ("memory.num_blocks", m.num_blocks),
        ("memory.max_model_len", m.max_model_len),
        ("memory.max_num_seqs", m.max_num_seqs),
        ("memory.max_num_batched_tokens", m.max_num_batched_tokens),
    ):
        if value > MAX_PLAUSIBLE_TOKENS:
            return f"{what} {value:,} (at most {MAX_PLAUSIBLE_TOKENS:,})"
    if m.block_size > 2**16:
        return f"memory.block_size {m.block_size:,}"
    for name, value in profile.coefficients.model_dump().items():
        if not 0 <= value < 3600:  # a step or a request intake of an hour is no server's
            return f"coefficients.{name} {value:g} s"
    return ""


def load_profile(name_or_file: str, data_dir: Path | None = None) -> Profile:
    """A profile by name (the data dir's) or by path (a ``.json`` file or one with a '/')."""
    if name_or_file.endswith(".json") or os.sep in name_or_file:
        return read_profile(Path(name_or_file).expanduser())
    path = profile_path(name_or_file, data_dir)
    if not path.exists():
        known = ", ".join(p.name for p in list_profiles(data_dir)) or "none yet"
        raise ProfileError(
            f"no profile named {name_or_file!r} (known: {known})",
            hint="`vtc calibrate URL --name NAME` makes one",
        )
    return read_profile(path)


def profile_file(name_or_file: str, data_dir: Path | None = None) -> Path:
    """The file :func:`load_profile` would read (checked: it must hold a profile)."""
    load_profile(name_or_file, data_dir)
    if name_or_file.endswith(".json") or os.sep in name_or_file:
        return Path(name_or_file).expanduser().resolve()
    return profile_path(name_or_file, data_dir)


def save_profile(profile: Profile, data_dir: Path | None = None) -> Profile:
    """Write ``profile`` under its name as the next revision; the saved profile.

    The current file stays in place until the new one replaces it (its revision is kept
    beside it as a second name), so a write that fails leaves the profiles as they were.
    """
    path = profile_path(profile.name, data_dir)
    private_dir(path.parent)
    revision, kept = 1, None
    if path.exists():
        try:
            old = read_profile(path)
            revision = old.revision + 1
            kept = path.with_name(f"{profile.name}.r{old.revision}.json")
        except ProfileError:  # an unreadable old file is kept aside, never overwritten
            kept = path.with_name(f"{profile.name}.unreadable.json")
        kept.unlink(missing_ok=True)
        os.link(path, kept)  # a second name: no space needed, the current file untouched
    saved = profile.model_copy(update={"revision": revision})
    try:
        write_atomic(path, saved.model_dump_json(indent=1), what="profile", mode=FILE_MODE)
    except OSError:
        if kept is not None:
            kept.unlink(missing_ok=True)
        raise
    return saved


@dataclass(frozen=True)
class ProfileSummary:
    """One line of the profiles list."""

    name: str
    revision: int
    description: str  # the identity's line
    error: str  # "validation ±12% (median 5%, worst 31%)" or why the file is not usable
    usable: bool


def list_profiles(data_dir: Path | None = None) -> list[ProfileSummary]:
    """The current revision of every profile in the data dir, by name."""
    folder = profiles_dir(data_dir)
    if not folder.is_dir():
        return []
    out = []
    for path in sorted(folder.glob("*.json")):
        stem = path.stem
        if not NAME_RE.match(stem) or re.search(r"\.(r\d+|unreadable)$", stem):
            continue
        try:
            p = read_profile(path)
        except ProfileError as exc:
            out.append(ProfileSummary(stem, 0, "", exc.message, False))
            continue
        out.append(ProfileSummary(p.name, p.revision, p.identity.describe(), p.errors_line(), True))
    return out
