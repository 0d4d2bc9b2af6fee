"""Any flag of the installed vLLM as a field (issue 39 item 1): editors, checks, the lift."""

from __future__ import annotations

from tui.domain.flags.cli_fields import (
    EditorKind,
    editor_kind,
    field_problems,
    fieldable,
    lift,
    tokens_of,
)
from tui.domain.flags.vllm_tables import table_for

T33 = table_for("0.33.0")
CLI = T33.cli


def flag(dest: str):  # type: ignore[no-untyped-def]
    found = CLI.flag(dest)
    assert found is not None, dest
    return found


def test_each_kind_of_flag_gets_its_editor() -> None:
    assert editor_kind(flag("speculative_config")) is EditorKind.JSON
    assert editor_kind(flag("compilation_config")) is EditorKind.JSON
    assert editor_kind(flag("kv_offloading_backend")) is EditorKind.CHOICE
    assert editor_kind(flag("kv_offloading_size")) is EditorKind.VALUE
    assert editor_kind(flag("enforce_eager")) is EditorKind.SWITCH
    assert not fieldable(flag("api_key")) and not fieldable(flag("config"))


def test_text_becomes_argv_tokens() -> None:
    assert tokens_of(flag("kv_offloading_size"), " 8 ") == ("--kv-offloading-size", "8")
    assert tokens_of(flag("kv_offloading_size"), "") == ()
    assert tokens_of(flag("enforce_eager"), "on") == ("--enforce-eager",)
    assert tokens_of(flag("enforce_eager"), "off") == ("--no-enforce-eager",)


def test_values_are_checked_in_vllms_words() -> None:
    def problems(dest: str, text: str) -> list[str]:
        return field_problems(flag(dest), text, CLI, bounds=T33.bounds, literals=T33.literals)

    assert problems("kv_offloading_size", "8") == []
    assert problems("kv_offloading_size", "lots") == [
        "argument --kv-offloading-size: Value lots cannot be converted to float."
    ]
    assert "invalid choice: 'disk'" in problems("kv_offloading_backend", "disk")[0]
    # a JSON config: an object, its Literal fields in pydantic's words (0.33 removed medusa)
    assert "expected a JSON object" in problems("speculative_config", "ngram")[0]
    medusa = '{"method": "medusa", "model": "m", "num_speculative_tokens": 2}'
    (refused,) = problems("speculative_config", medusa)
    assert "validation error for SpeculativeConfig" in refused and "'medusa'" in refused
    assert problems("speculative_config", '{"method": "ngram", "num_speculative_tokens": 4}') == []


def test_extra_args_that_name_such_flags_are_lifted_into_fields() -> None:
    extra = [
        "--kv-offloading-size",
        "8",
        "--speculative-config",
        '{"method": "ngram"}',
        "-cc.mode",
        "3",
        "--no-enforce-eager",
        "--kv-offloading-size",
        "9",
        "--max-num-seqs",
        "4",
    ]
    lifted = lift(extra, CLI, keep=frozenset({"max_num_seqs"}))
    assert lifted.values == {
        "kv_offloading_size": "8",
        "speculative_config": '{"method": "ngram"}',
        "enforce_eager": "off",
    }
    # dotted keys, a repeat (vtc refuses it where it is seen) and declared flags stay
    assert lifted.rest == ["-cc.mode", "3", "--kv-offloading-size", "9", "--max-num-seqs", "4"]
