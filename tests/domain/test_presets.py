"""Shipped presets: each parses, validates, names its source; TOML round-trips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tui.domain.presets import PresetError, parse_preset, render_preset
from tui.store.presets import builtin_presets_dir, load_presets, save_user_preset

SHIPPED = sorted(builtin_presets_dir().glob("*.toml"))


def test_the_seed_presets_are_shipped() -> None:
    names = {p.stem for p in SHIPPED}
    assert {
        "rtx3080-8b-baseline",
        "rtx3080-8b-fp8-best",
        "autotune-3b-512x4096",
        "production-awq",
        "max-throughput",
        "long-context",
        "cost-optimised-3b",
    } <= names


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.stem)
def test_shipped_preset_is_valid_and_sourced(path: Path) -> None:
    preset = parse_preset(path.read_text(), str(path), builtin=True)
    assert preset.name == path.stem
    assert len(preset.source) > 20  # names the write-up it comes from, by what it is
    assert not re.search(r"seeds?/?\s?\d{3}|issue \d", preset.source + preset.description)
    assert len(preset.description) > 20
    assert parse_preset(render_preset(preset)) == preset.model_copy(update={"builtin": False})


def test_autotune_preset_matches_the_seed() -> None:
    preset = parse_preset((builtin_presets_dir() / "autotune-3b-512x4096.toml").read_text())
    assert (preset.flags.max_num_seqs, preset.flags.max_num_batched_tokens) == (512, 4096)
    assert preset.workload is not None
    # auto_tune.sh: prefix = 128 * 30 / 100 (int) = 38, random part = 128 - 38.
    assert preset.workload.prefix_len + preset.workload.input_len == 128
    assert preset.workload.output_len == 384


def test_invalid_preset_names_file_and_field() -> None:
    pattern = r"bad\.toml: --gpu-memory-utilization 3\.0: Input should be less"
    with pytest.raises(PresetError, match=pattern):
        parse_preset(
            'name="x"\ndescription="d"\nsource="s"\nmodel="m"\n[flags]\ngpu_memory_utilization=3\n',
            "bad.toml",
        )
    with pytest.raises(PresetError, match="not valid TOML"):
        parse_preset("name = ", "broken.toml")


def test_user_presets_override_and_broken_files_are_reported(tmp_path: Path) -> None:
    builtin = parse_preset((builtin_presets_dir() / "long-context.toml").read_text())
    mine = builtin.model_copy(update={"description": "my own long-context tuning, 0.8"})
    save_user_preset(mine, tmp_path)
    (tmp_path / "broken.toml").write_text("nonsense = [")
    catalog = load_presets(user_dir=tmp_path)
    got = catalog.get("long-context")
    assert got is not None
    assert got.description == "my own long-context tuning, 0.8"
    assert not got.builtin
    assert len(catalog.errors) == 1 and "broken.toml" in catalog.errors[0]
    assert catalog.get("production-awq") is not None
