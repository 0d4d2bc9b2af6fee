"""One shipped table per vLLM version, chosen by the installed version (issue 19)."""

from __future__ import annotations

import pytest

from tui.domain.flags.problems import FlagError
from tui.domain.flags.validation import ValidationContext, flags_from_argv
from tui.domain.flags.vllm_tables import (
    REGENERATE,
    TABLE_MODULES,
    default_table,
    is_newer_than_tables,
    module_file,
    newest_series,
    release,
    table_for,
)

MEDUSA = '{"method": "medusa", "model": "m", "num_speculative_tokens": 2}'


def test_the_installed_version_picks_its_table_and_no_vllm_the_newest() -> None:
    assert newest_series() == "0.33"
    assert table_for("0.32.0+cpu").version == "0.32.0"
    assert table_for("0.33.0").version == "0.33.0"
    assert "0.32.0+cpu" in table_for("0.32.0+cpu").reason
    none = default_table()
    assert none.version == "0.33.0" and none.reason.startswith("no vLLM found")
    newer = table_for("0.34.1")
    assert newer.version == "0.33.0" and REGENERATE in newer.reason
    assert is_newer_than_tables("0.34.0") and not is_newer_than_tables("0.33.0rc1")
    assert release("0.33.0rc1.dev12+gabc") == (0, 33, 0)
    assert module_file("0.32.0") == "tui/domain/flags/vllm_serve_options.py"
    assert module_file("0.35.2") == "tui/domain/flags/vllm_serve_options_0_35.py"
    assert set(TABLE_MODULES) == {"0.32", "0.33"}


def test_033_offers_its_new_flags_and_032_refuses_them() -> None:
    new = ("--watchdog-config", "--monokernel", "--sleep-mode-backend", "--reasoning-effort-map")
    for option in new:
        assert table_for("0.33.0").cli.known(option), option
        assert not table_for("0.32.0").cli.known(option), option
    assert len(table_for("0.33.0").cli.flags) == len(table_for("0.32.0").cli.flags) + 4
    argv = ["vllm", "serve", "m", "--watchdog-config", '{"timeout": 60}']
    flags = flags_from_argv(argv, ValidationContext(installed="0.33.0"))
    assert "--watchdog-config" in flags.extra_args
    with pytest.raises(FlagError, match="unrecognized arguments: --watchdog-config"):
        flags_from_argv(argv, ValidationContext(installed="0.32.0"))


def test_medusa_is_refused_on_033_in_pydantics_words_and_kept_on_032() -> None:
    argv = ["vllm", "serve", "m", "--speculative-config", MEDUSA]
    with pytest.raises(FlagError) as info:
        flags_from_argv(argv, ValidationContext(installed="0.33.0"))
    text = str(info.value)
    assert "1 validation error for SpeculativeConfig: method: Input should be 'ngram'" in text
    assert "'step5_mtp'" in text and "input_value='medusa'" in text
    assert "type=literal_error" in text
    flags_from_argv(argv, ValidationContext(installed="0.32.0"))  # 0.32 still has medusa
    fly = '{"method": "ngram", "rejection_sample_method": "fly"}'
    flags_from_argv(["vllm", "serve", "m", "-sc", fly], ValidationContext(installed="0.33.0"))
    with pytest.raises(FlagError, match="rejection_sample_method"):
        flags_from_argv(["vllm", "serve", "m", "-sc", fly], ValidationContext(installed="0.32.0"))


def test_033_switch_spellings_and_deprecations() -> None:
    cli = table_for("0.33.0").cli
    flag = cli.flag("--enable-prefix-caching")
    assert flag is not None
    # EnableDisableAction: --disable-x is the negative, the old --no-enable-x still parses.
    assert flag.is_negative("--disable-prefix-caching")
    assert flag.is_negative("--no-enable-prefix-caching")
    assert not flag.is_negative("--enable-prefix-caching")
    assert cli.known("--no-enable-prefix-caching")
    on = flags_from_argv(
        ["vllm", "serve", "m", "--disable-prefix-caching"], ValidationContext(installed="0.33.0")
    )
    assert on.enable_prefix_caching is False
    # Deprecated ones are marked, not refused (the form shows the mark).
    for name in ("--mamba-cache-mode", "--ir-op-priority"):
        found = cli.flag(name)
        assert found is not None and found.is_deprecated, name
    kv = cli.flag("--kv-cache-dtype")
    assert kv is not None and kv.choices is None  # free text from 0.33 (platforms register)
