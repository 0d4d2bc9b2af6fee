"""One Hugging Face cache resolver, honouring the variables huggingface_hub honours."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tui.load.tokenizer import hub_snapshot
from tui.server.model_config import find_model_config, hf_hub_cache
from tui.store.hf_cache import find_snapshot_file, hub_cache_dir, repo_folder


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        ({"HF_HUB_CACHE": "/a", "HUGGINGFACE_HUB_CACHE": "/x", "HF_HOME": "/b"}, "/a"),
        ({"HUGGINGFACE_HUB_CACHE": "/x", "HF_HOME": "/b"}, "/x"),
        ({"HF_HOME": "/b", "XDG_CACHE_HOME": "/c"}, "/b/hub"),
        ({"XDG_CACHE_HOME": "/c"}, "/c/huggingface/hub"),
        ({"HF_HUB_CACHE": "", "HF_HOME": ""}, str(Path.home() / ".cache/huggingface/hub")),
        ({}, str(Path.home() / ".cache/huggingface/hub")),
        ({"HF_HOME": "~/hf"}, str(Path.home() / "hf/hub")),
    ],
)
def test_the_cache_folder_follows_huggingface_hub(env: dict[str, str], expected: str) -> None:
    assert hub_cache_dir(env) == Path(expected)
    assert hf_hub_cache(env) == Path(expected)  # the pre-flight's name for the same resolver


def _snapshot(hub: Path, repo: str, revision: str, *files: str) -> Path:
    folder = hub / ("models--" + repo.replace("/", "--")) / "snapshots" / revision
    folder.mkdir(parents=True)
    for name in files:
        (folder / name).write_text("{}")
    return folder


def test_both_lookups_use_the_same_cache_and_prefer_refs_main(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hub = tmp_path / "xdg" / "huggingface" / "hub"
    main = _snapshot(hub, "org/m", "aaa", "config.json", "tokenizer.json")
    newer = _snapshot(hub, "org/m", "bbb", "config.json", "tokenizer.json")
    os.utime(main / "config.json", (1, 1))
    os.utime(main / "tokenizer.json", (1, 1))
    (hub / "models--org--m" / "refs").mkdir()
    (hub / "models--org--m" / "refs" / "main").write_text("aaa\n")
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_snapshot("org/m") == main  # was blind to XDG_CACHE_HOME before
    config = find_model_config("org/m")
    assert config.path == main / "config.json"
    (hub / "models--org--m" / "refs" / "main").write_text("gone")
    assert find_snapshot_file("org/m", "config.json") == newer / "config.json"


@pytest.mark.parametrize("repo", ["", "/", "a/b/c", "../x", "org/..", "./m"])
def test_what_cannot_be_a_repo_id_is_never_looked_up(tmp_path: Path, repo: str) -> None:
    assert repo_folder(repo, tmp_path) is None
    assert find_snapshot_file(repo, "config.json", hub=tmp_path) is None
