"""Preset files that cannot be used never stop the console: each is skipped with one line.

Real files in a real folder, read by the real loader and by ``vtc presets`` in a real
process; plus generated TOML documents of any shape.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_profiles import examples

from tui.domain.presets import Preset, PresetError, parse_preset, render_preset
from tui.store.presets import MAX_PRESET_BYTES, builtin_presets_dir, load_presets

GOOD = """\
name = "{name}"
description = "a preset that loads"
source = "the robustness suite"
model = "m"

[flags]
max_num_seqs = 8
"""
HEAD = 'name = "x"\ndescription = "d"\nsource = "s"\nmodel = "m"\n'

BAD_FILES: dict[str, bytes] = {
    "latin1.toml": (HEAD + '[flags]\nserved_model_name = "caf\xe9"\n').encode("latin-1"),
    "binary.toml": bytes(range(256)) * 4,
    "broken.toml": b"name = \n[flags\n",
    "bool-as-int.toml": (HEAD + "[flags]\nmax_num_seqs = true\n").encode(),
    "float-as-int.toml": (HEAD + "[flags]\nmax_model_len = 2048.5\n").encode(),
    "string-flag.toml": (HEAD + '[flags]\nenforce_eager = "yes"\n').encode(),
    "zero-len.toml": (HEAD + "[flags]\nmax_model_len = 0\n").encode(),
    "huge-number.toml": (HEAD + f'[flags]\nmax_model_len = "{"9" * 400}k"\n').encode(),
    "secret.toml": (HEAD + '[flags]\nextra_args = ["--api-key", "sk-123"]\n').encode(),
    "typo-table.toml": (HEAD + "[flag]\nmax_num_seqs = 8\n").encode(),
    "workload-bool.toml": (HEAD + "[workload]\nnum_prompts = true\n").encode(),
    "too-big.toml": (HEAD + "# " + "x" * MAX_PRESET_BYTES + "\n").encode(),
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    user = tmp_path / "presets"
    user.mkdir()
    (user / "good.toml").write_text(GOOD.format(name="mine-good"))
    for name, data in BAD_FILES.items():
        (user / name).write_bytes(data)
    (user / "a-folder.toml").mkdir()  # named like a preset, but a directory
    return user


def test_each_bad_file_is_skipped_with_one_line_and_the_rest_load(folder: Path) -> None:
    catalog = load_presets(user_dir=folder)
    names = {p.name for p in catalog.presets}
    assert "mine-good" in names
    shipped = {p.stem for p in builtin_presets_dir().glob("*.toml")}
    assert shipped <= names  # the shipped ones load beside the user's
    assert len(catalog.errors) == len(BAD_FILES) + 1
    for error in catalog.errors:
        assert "\n" not in error and error.endswith("; skipped")
        assert str(folder) in error
        assert "sk-123" not in error
    by_file = {Path(e.split(":", 1)[0]).name: e for e in catalog.errors}
    assert "not UTF-8 text" in by_file["latin1.toml"]
    assert "expected an integer, got a boolean" in by_file["bool-as-int.toml"]
    assert "max_model_len must be a positive integer" in by_file["zero-len.toml"]
    assert "(too large)" in by_file["huge-number.toml"]
    assert "unknown key 'flag'" in by_file["typo-table.toml"]
    assert "larger than" in by_file["too-big.toml"]


def test_vtc_presets_lists_the_good_and_names_the_bad_without_a_traceback(
    folder: Path, tmp_path: Path
) -> None:
    env = {**os.environ, "XDG_CONFIG_HOME": str(tmp_path / "config")}
    user = tmp_path / "config" / "vtc" / "presets"
    user.parent.mkdir(parents=True)
    folder.rename(user)
    proc = subprocess.run(
        [sys.executable, "-m", "tui.cli", "presets"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 1  # something was skipped
    assert "mine-good" in proc.stdout
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == len(BAD_FILES) + 1


_SCALAR = st.one_of(
    st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=True), st.text(max_size=30)
)
_VALUE = st.one_of(
    _SCALAR,
    st.lists(_SCALAR, max_size=3),
    st.dictionaries(st.text(max_size=8), _SCALAR, max_size=3),
)
_KEYS = st.sampled_from(
    ["name", "description", "source", "model", "sim_gpu", "flags", "workload", "other"]
)
_FLAG_KEYS = st.sampled_from(
    [
        "max_model_len",
        "max_num_seqs",
        "enforce_eager",
        "gpu_memory_utilization",
        "quantization",
        "host",
        "extra_args",
        "kv_cache_memory_bytes",
        "nonsense",
    ]
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.dictionaries(_KEYS, _VALUE, max_size=8),
    st.dictionaries(_FLAG_KEYS, _VALUE, max_size=5),
    st.binary(max_size=40),
)
def test_any_toml_document_gives_a_preset_or_one_preset_error(
    doc: dict[str, Any], flags: dict[str, Any], noise: bytes
) -> None:
    document = {**doc, "flags": flags} if flags else doc
    try:
        text = tomli_w.dumps(document)
    except (TypeError, ValueError):
        text = repr(document)
    for candidate in (text, text + noise.decode("utf-8", "replace")):
        try:
            preset = parse_preset(candidate, "gen.toml")
        except PresetError as exc:
            assert str(exc).startswith("gen.toml: ") and "\n" not in str(exc)
            continue
        assert isinstance(preset, Preset)
        assert parse_preset(render_preset(preset), "again.toml") == preset


def _dsn_preset(value: str) -> str:
    return (
        'name = "dsn"\ndescription = "d"\nsource = "s"\nmodel = "m"\n'
        f'[flags]\nenv = {{ MY_DSN = "{value}" }}\n'
    )


def test_a_skipped_preset_asked_for_by_name_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 39: ``--preset dsn`` said "no preset called 'dsn'" for a preset skipped because
    ``MY_DSN`` holds a password, while ``vtc presets`` said why."""
    from tui.modes.common import starting_point
    from tui.modes.options import ConsoleOptions, SetupError

    user = tmp_path / "vtc" / "presets"
    user.mkdir(parents=True)
    (user / "my-dsn.toml").write_text(_dsn_preset("postgresql://app:pw123456@db/x"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    catalog = load_presets()
    reason = catalog.why_skipped("dsn")
    assert reason is not None and "MY_DSN's value holds a secret" in reason
    assert catalog.why_skipped("my-dsn") == reason  # by its file's name too
    with pytest.raises(SetupError) as caught:
        starting_point(ConsoleOptions(demo=True, preset="dsn"))
    line = caught.value.one_line()
    assert "preset 'dsn' was skipped" in line and "MY_DSN's value holds a secret" in line
    assert "pw123456" not in line
    with pytest.raises(SetupError) as unknown:
        starting_point(ConsoleOptions(demo=True, preset="nosuch"))
    assert "no preset called 'nosuch'" in unknown.value.one_line()


def test_a_url_with_a_user_but_no_password_is_no_secret(tmp_path: Path) -> None:
    """``postgresql://app@db/x`` names an account; a password or a token-shaped user is one."""
    from tui.domain.secret_names import holds_secret

    for plain in ("postgresql://app@db/x", "ssh://git@github.com/o/r", "https://j.doe@host"):
        assert not holds_secret("MY_DSN", plain), plain
    for secret in (
        "postgresql://app:pw123456@db/x",
        "https://:tok123456@host",
        "https://ghp_tokenvalue123@mirror.example.com",
        "https://a1b2c3d4e5f6g7h8i9j0k1@host",
    ):
        assert holds_secret("MY_DSN", secret), secret
    (tmp_path / "dsn.toml").write_text(_dsn_preset("postgresql://app@db/x"))
    catalog = load_presets(user_dir=tmp_path)
    preset = catalog.get("dsn")
    assert preset is not None and preset.flags.env == (("MY_DSN", "postgresql://app@db/x"),)
