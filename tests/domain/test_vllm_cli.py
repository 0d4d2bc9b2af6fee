"""VllmCli: the installed vLLM's serve flags, looked up the way vLLM's own parser does.

The fixture ``vllm_cli_fixture.json`` is a 31-flag slice of the real introspection dump of
vLLM 0.32.0 (help text shortened).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tui.domain.flags.serve import KV_CACHE_DTYPES, ServeFlags, flag_specs
from tui.domain.flags.vllm_cli import CliDumpError, CliFlag, VllmCli

HERE = Path(__file__).parent


def _dump() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((HERE / "vllm_cli_fixture.json").read_text())
    return data


@pytest.fixture(scope="module")
def cli() -> VllmCli:
    return VllmCli.from_json(_dump())


# -- construction ------------------------------------------------------------------------------
def test_from_json_keeps_optionals_in_parser_order_and_drops_the_positional(cli: VllmCli) -> None:
    dump = _dump()
    optionals = [a["dest"] for a in dump["actions"] if a["option_strings"]]
    assert [f.dest for f in cli.flags] == optionals
    assert "model_tag" not in {f.dest for f in cli.flags}
    assert cli.version == "0.32.0"
    assert cli.group_descriptions["CacheConfig"].startswith("Configuration for the KV cache")


def test_flag_fields_come_from_the_dump(cli: VllmCli) -> None:
    gpu = cli.flag("gpu_memory_utilization")
    assert gpu is not None
    assert gpu.option_strings == ("--gpu-memory-utilization", "--device-memory-utilization")
    assert (gpu.type_name, gpu.default, gpu.group) == ("float", 0.92, "CacheConfig")
    assert gpu.name == "--gpu-memory-utilization"
    assert gpu.aliases == ("--device-memory-utilization",)
    kv = cli.flag("--kv-cache-dtype")
    assert kv is not None and kv.choices == KV_CACHE_DTYPES
    prefix = cli.flag("enable_prefix_caching")
    assert prefix is not None and prefix.is_boolean and not prefix.takes_value
    assert prefix.negation == "--no-enable-prefix-caching"
    served = cli.flag("--served-model-name")
    assert served is not None and served.nargs == "+" and served.takes_value
    assert cli.flag("--max-model-len") is cli.flag("max_model_len")
    assert cli.flag("--swap-space") is None


def test_json_round_trip(cli: VllmCli) -> None:
    again = VllmCli.from_json(cli.to_json())
    assert again.flags == cli.flags
    assert again.version == cli.version


def test_flags_may_be_given_as_a_list() -> None:
    flag = CliFlag("port", ("--port",), "int", 8000, None, None, "Port.", "Frontend")
    cli = VllmCli("0.32.0", [flag])
    assert cli.flags == (flag,)
    assert cli.known("--port")


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ([], "expected a JSON object"),
        ({"vllm_version": "1"}, "no 'actions' list"),
        ({"actions": [{"option_strings": []}]}, "without 'dest'"),
        ({"actions": [{"dest": "x", "option_strings": ["x"]}]}, "must start with '-'"),
        ({"actions": [{"dest": "x", "option_strings": "--x"}]}, "option_strings a list"),
        ({"actions": ["--x"]}, "must be an object"),
    ],
)
def test_malformed_dumps_are_rejected_clearly(data: Any, fragment: str) -> None:
    with pytest.raises(CliDumpError, match=fragment):
        VllmCli.from_json(data)


# -- known -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "option",
    [
        "--max-model-len",
        "--max_model_len",  # vLLM rewrites _ to -
        "--max-model-len=4096",
        "--no-enable-prefix-caching",  # BooleanOptionalAction's negation
        "--no_enable_prefix_caching",
        "--device-memory-utilization",  # a second long spelling
        "-tp",
        "-q",
        "-qawq",  # a short option glued to its value
        "--max-model",  # an unambiguous prefix (allow_abbrev)
        "--enable-prefix",
        "--compilation-config.mode",  # dotted JSON arg: only the part before '.' counts
        "-cc.cudagraph_mode=FULL",
        "--compilation_config.pass_config.x+",
        "-O3",  # vLLM maps -O<n> to --optimization-level
        "-O=2",
        "--help=all",
        "-h",
    ],
)
def test_known_accepts_what_vllm_accepts(cli: VllmCli, option: str) -> None:
    assert cli.known(option), cli.resolve(option)


@pytest.mark.parametrize(
    "option",
    [
        "--swap-space",
        "--disable-log-requests",
        "--no-max-model-len",  # no negation for a valued flag
        "--no-disable-log-stats",  # store_true has no --no- form
        "--max-num",  # ambiguous: seqs, batched-tokens, scheduled-tokens
        "--max-num-s",  # ambiguous: --max-num-seqs, --max-num-scheduled-tokens
        "-tp2",  # single-dash options of more than one letter never glue
        "--tp",
        "-x",
    ],
)
def test_known_rejects_what_vllm_rejects(cli: VllmCli, option: str) -> None:
    assert not cli.known(option), cli.resolve(option)


def test_resolution_reports_the_flag_and_ambiguity(cli: VllmCli) -> None:
    res = cli.resolve("--max_model=4k")
    assert res.status == "known" and res.option == "--max-model-len"
    assert res.flag is not None and res.flag.dest == "max_model_len"
    amb = cli.resolve("--max-num")
    assert amb.status == "ambiguous"
    assert set(amb.candidates) == {
        "--max-num-batched-tokens",
        "--max-num-scheduled-tokens",
        "--max-num-seqs",
    }
    assert cli.resolve("-1").status == "positional"
    assert cli.resolve("model/path").status == "positional"


def test_every_declared_serve_flag_is_known_to_the_fixture(cli: VllmCli) -> None:
    # The fixture is a slice of real vLLM 0.32.0, so our spellings must resolve exactly.
    for spec in flag_specs():
        for spelling in spec.spellings:
            res = cli.resolve(spelling)
            assert res.status == "known", spelling
            assert res.flag is not None and res.flag.dest == spec.name, spelling


# -- unknown options in a command line ---------------------------------------------------------
def test_unknown_options_of_a_full_serve_flags_argv(cli: VllmCli) -> None:
    flags = ServeFlags(
        model="m",
        max_model_len=4096,
        enable_prefix_caching=False,
        tensor_parallel_size=1,
        kv_cache_memory_bytes=64 * 2**20,
        extra_args=("--swap-space", "4", "--disable_log_requests", "--disable-log-stats"),
    )
    assert cli.unknown_options(flags.to_argv()) == ["--swap-space", "--disable_log_requests"]


def test_unknown_options_skips_values_and_reads_vllm_rewrites(cli: VllmCli) -> None:
    argv = [
        "model",
        "--max-model-len",
        "-1",  # a negative number is a value
        "-cc.mode",
        "--weird-json-value",  # a dotted arg always takes the next token
        "-O",
        "3",  # -O 3 -> --optimization-level 3
        "--served-model-name",
        "a",
        "b",
        "--foo=1",
        "--max-num",
        "8",
        "-O",
        "x",  # a bare -O without a level is not an option
        "--",
        "--after-double-dash",
    ]
    assert cli.unknown_options(argv) == ["--foo", "--max-num", "-O"]


def test_problems_explain_and_suggest(cli: VllmCli) -> None:
    argv = ["m", "--swap-space", "1", "--max-num-seq", "4", "--disable-log-requests", "--max-num"]
    problems = {p.option: p for p in cli.problems(argv)}
    assert problems["--swap-space"].kind == "unknown"
    assert "removed by vLLM 0.32" in problems["--swap-space"].message
    assert "--enable-log-requests" in problems["--disable-log-requests"].message
    assert problems["--max-num"].kind == "ambiguous"
    assert "could match" in problems["--max-num"].message
    # a unique prefix is fine: --max-num-seq -> --max-num-seqs
    assert "--max-num-seq" not in problems
    assert "--max-num-seqs" in cli.suggest("--max-num-seq")


def test_deprecated_flags_warn_but_are_not_unknown() -> None:
    # vLLM 0.32 marks deprecation in the help text (engine/arg_utils.py:456-459)
    help_text = (
        "--disable-cascade-attn is deprecated and has no effect since cascade attention has "
        "been removed. It will be removed in v0.33.0."
    )
    flag = CliFlag(
        dest="disable_cascade_attn",
        option_strings=("--disable-cascade-attn", "--no-disable-cascade-attn"),
        type_name="bool",
        default=False,
        choices=None,
        nargs=0,
        help=help_text,
        group="ModelConfig",
        action="boolean_optional",
    )
    cli = VllmCli("0.32.0", [flag])
    assert flag.is_deprecated
    (problem,) = cli.problems(["m", "--disable_cascade_attn"])
    assert problem.kind == "deprecated"
    assert problem.message == "--disable_cascade_attn: " + help_text
    assert cli.unknown_options(["m", "--disable-cascade-attn"]) == []


def test_empty_and_clean_command_lines_have_no_problems(cli: VllmCli) -> None:
    assert cli.unknown_options([]) == []
    assert cli.problems(ServeFlags(model="m", port=8001).to_argv()) == []


# -- search and ordering -----------------------------------------------------------------------
def test_search_ranks_name_matches_before_help_matches(cli: VllmCli) -> None:
    found = [f.name for f in cli.search("prefix")]
    assert found[0] == "--enable-prefix-caching"
    assert cli.search("max_model_len")[0].name == "--max-model-len"
    kv = [f.name for f in cli.search("kv cache")]
    assert kv[:2] == ["--kv-cache-memory-bytes", "--kv-cache-dtype"]
    # every word must match somewhere
    assert cli.search("kv cache zzzz") == []


def test_search_matches_help_choices_and_group(cli: VllmCli) -> None:
    assert "--kv-cache-dtype" in [f.name for f in cli.search("fp8_e4m3")]
    assert {f.group for f in cli.search("schedulerconfig")} == {"SchedulerConfig"}
    by_help = [f.name for f in cli.search("fraction")]
    assert "--gpu-memory-utilization" in by_help


def test_empty_search_lists_everything_but_help(cli: VllmCli) -> None:
    everything = cli.search("  ")
    assert len(everything) == len(cli.flags) - 1
    assert all(f.action != "help" for f in everything)


def test_common_first_puts_declared_flags_first_in_their_order(cli: VllmCli) -> None:
    names = [s.name for s in flag_specs()] + ["not_a_flag"]
    ordered = cli.common_first(names)
    head = [f.dest for f in ordered[: len(flag_specs())]]
    assert head == [s.name for s in flag_specs()]
    assert len(ordered) == len(cli.flags) - 1  # everything once, --help excluded
    assert len({f.dest for f in ordered}) == len(ordered)
    assert cli.common_first(["--max-num-seqs", "max_num_seqs"])[0].dest == "max_num_seqs"


# -- the --help=all fallback ---------------------------------------------------------------------
