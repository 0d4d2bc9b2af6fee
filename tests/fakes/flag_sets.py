"""Generated ``vllm serve`` flag sets: what an operator might type, good and bad.

One generator for the property tests (driven by hypothesis) and for the vLLM oracle test
(driven by a seeded ``random.Random``, so a failing set can be replayed): every declared
flag in every spelling vLLM accepts (``-``/``_``, aliases, ``--no-x``, abbreviations,
``--x=v``), values from each type's edge cases (huge numbers, ``inf``/``nan``, blanks,
unicode digits, wrong suffixes, booleans with values), some of vLLM's other options, unknown
options, stray tokens and duplicates.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from hypothesis import strategies as st

from tui.domain.flags.serve import QUANTIZATION_METHODS, flag_specs
from tui.domain.flags.spec import FlagKind, FlagSpec

HUGE = "9" * 400
INT_VALUES = (
    "1",
    "2",
    "4",
    "8",
    "16",
    "32",
    "64",
    "100",
    "128",
    "256",
    "512",
    "1000",
    "1024",
    "2048",
    "3000",
    "4096",
    "0",
    "-1",
    "-2",
    "+8",
    " 64 ",
    "1_000",
    "٣٢",
    "1e3",
    "1.5",
    "0x10",
    "abc",
    "",
    "9" * 30,
    HUGE,
)
HUMAN_VALUES = (
    "1k",
    "2k",
    "1.5k",
    "1K",
    "1.5K",
    "4K",
    "64M",
    "1G",
    "20g",
    "2048",
    "auto",
    "AUTO",
    "-1",
    HUGE + "k",
    "0.5t",
    "k",
    "1KB",
)
FLOAT_VALUES = (
    "0.5",
    "0.8",
    "0.92",
    "1",
    "1.0",
    "0",
    "-1",
    "1.5",
    "2",
    "inf",
    "-inf",
    "nan",
    "1e-300",
    "1e308",
    "1e400",
    "abc",
    "",
    "0.9 ",
    "1_0",
    "1/2",
)
TEXT_VALUES = ("127.0.0.1", "0.0.0.0", "localhost", "svc", "", " ", "None", "a b", "x" * 300)
BOOL_SUFFIXES = ("", "", "", "=yes", "=1", "=on", "=true", "=maybe", "=")
EXTRA_OPTIONS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("--seed", ("0", "7", "-3", "x", "")),
    ("--disable-log-stats", ()),
    ("--enable-log-requests", ()),
    ("--no-enable-log-requests", ()),
    ("--trust-remote-code", ()),
    ("--performance-mode", ("balanced", "throughput", "interactivity", "fast")),
    ("--scheduling-policy", ("fcfs", "priority", "lifo")),
    ("--uvicorn-log-level", ("debug", "info", "loud")),
    ("--allow-deprecated-quantization", ()),
    ("--no-such-flag", ("3",)),
    ("--max-num", ("5",)),
    ("--api-key", ("sk-test-123",)),
    ("--enable-auto-tool-choice", ()),
    ("--stream-interval", ("1", "4", "0", "-1")),
    ("--shutdown-timeout", ("0", "30", "-1")),
    ("--max-num-queued-reqs", ("0", "8", "-1")),
    ("--kv-cache-metrics-sample", ("0.5", "1", "0", "1.5", "nan")),
)
ABBREVIATIONS = {
    "max_model_len": "--max-model",
    "kv_cache_memory_bytes": "--kv-cache-memory",
    "gpu_memory_utilization": "--gpu-memory",
    "num_gpu_blocks_override": "--num-gpu-blocks",
}


def _choices(spec: FlagSpec) -> tuple[str, ...]:
    if spec.name == "quantization":
        return (*QUANTIZATION_METHODS, "FP8", "AWQ", "bogus", "None", "")
    choices = spec.choices or ()
    return (*choices, *(c.upper() for c in choices[:2]), " auto", "bogus", "")


def values_for(spec: FlagSpec) -> tuple[str, ...]:
    """Candidate argv values for one declared flag."""
    if spec.name == "port":
        return ("8000", "8123", "0", "65535", "65536", "70000", "-1", "abc")
    if spec.kind is FlagKind.INT:
        return (*HUMAN_VALUES, *INT_VALUES) if spec.human else INT_VALUES
    if spec.kind is FlagKind.FLOAT:
        return FLOAT_VALUES
    if spec.kind is FlagKind.CHOICE:
        return _choices(spec)
    return TEXT_VALUES


def spellings(spec: FlagSpec) -> tuple[str, ...]:
    """Ways to write the flag's option: as declared, with underscores, aliases, abbreviated."""
    out = [spec.cli, "--" + spec.cli[2:].replace("-", "_"), *spec.aliases]
    if spec.name in ABBREVIATIONS:
        out.append(ABBREVIATIONS[spec.name])
    return tuple(out)


def _flag_tokens(spec: FlagSpec, pick: Callable[[Sequence[str]], str]) -> list[str]:
    option = pick(spellings(spec))
    if spec.kind is FlagKind.BOOL:
        if option.startswith("--") and pick(("", "no")) == "no":
            option = "--no-" + spec.cli[2:]
        return [option + pick(BOOL_SUFFIXES)]
    value = pick(values_for(spec))
    if option.startswith("--") and pick(("space", "space", "equals")) == "equals":
        return [f"{option}={value}"]
    if spec.name == "served_model_name" and pick(("one", "one", "two")) == "two":
        return [option, value, "second-name"]
    return [option, value]


def argv_from(
    pick: Callable[[Sequence[str]], str], count: Callable[[int, int], int], model: str
) -> list[str]:
    """One command line, every choice made by ``pick`` and ``count(lo, hi)``."""
    specs = flag_specs()
    argv = [model]
    for _ in range(count(0, 6)):
        spec = specs[count(0, len(specs) - 1)]
        argv += _flag_tokens(spec, pick)
    for _ in range(count(0, 2) if count(0, 3) == 0 else 0):
        option, values = EXTRA_OPTIONS[count(0, len(EXTRA_OPTIONS) - 1)]
        argv += [option, pick(values)] if values else [option]
    if count(0, 20) == 0:
        argv.append(pick(("stray", "-", "--", "-1")))
    return argv


def random_argv(rng: random.Random, model: str = "m") -> list[str]:
    """One command line from a seeded generator (replayable)."""
    return argv_from(rng.choice, rng.randint, model)


@st.composite
def argv_sets(draw: st.DrawFn, model: str = "m") -> list[str]:
    """Hypothesis: command lines from the generator, sometimes with arbitrary text mixed in."""

    def pick(options: Sequence[str]) -> str:
        return draw(st.sampled_from(list(options)))

    def count(lo: int, hi: int) -> int:
        return draw(st.integers(lo, hi))

    argv = argv_from(pick, count, model)
    if draw(st.booleans()):
        noise = draw(st.lists(st.text(max_size=12), max_size=3))
        position = draw(st.integers(1, len(argv)))
        argv[position:position] = noise
    return argv


@st.composite
def form_texts(draw: st.DrawFn) -> dict[str, str]:
    """Hypothesis: the form's text fields as an operator may leave them."""
    out: dict[str, str] = {}
    for spec in flag_specs():
        if not draw(st.integers(0, 3)):
            candidates = (
                ("", "on", "off", "ON", "true", "yes", "1", "maybe")
                if spec.kind is FlagKind.BOOL
                else values_for(spec)
            )
            out[spec.name] = draw(st.one_of(st.sampled_from(list(candidates)), st.text()))
    return out


def random_form(rng: random.Random) -> dict[str, str]:
    """The form's text fields from a seeded generator (each field set one time in four)."""
    out: dict[str, str] = {}
    for spec in flag_specs():
        if rng.randint(0, 3) == 0:
            if spec.kind is FlagKind.BOOL:
                out[spec.name] = rng.choice(("", "on", "off", "ON", "true", "yes", "1", "maybe"))
            else:
                out[spec.name] = rng.choice(values_for(spec))
    return out
