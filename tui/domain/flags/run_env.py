"""The run's environment: the variables a server is started with, part of its configuration.

Some of vLLM's settings are environment variables, not flags: vLLM 0.33's way around
``RuntimeError: UVA is not available`` (WSL2) is ``VLLM_USE_V2_MODEL_RUNNER=0``. So a run's
configuration is its flags *and* its environment (:attr:`ServeFlags.env
<tui.domain.flags.serve.ServeFlags.env>`): edited in the form, set by a diagnosis fix,
passed by the launcher (the process's environment, never its argv), stored with the run,
diffed on the board and written into every export.

Declared here once: the variables vtc knows (:data:`DECLARED_ENV`: what each does, and
vLLM's own rule for its value), the rule for a name, and what may never be part of a run's
configuration: a secret (``HF_TOKEN``, ``VLLM_API_KEY``: the history, the exports and the
board would hold it; vtc passes secrets from its own environment, by name) and vtc's own
plumbing. Pure: text in, values and problems out.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from tui.domain.secret_names import SECRET_NAME, SECRET_VALUE, holds_secret
from tui.domain.vllm_release import RUNNER_V2_ENV

EnvPairs = tuple[tuple[str, str], ...]
"""A run's environment as stored on :class:`ServeFlags`: ``(NAME, value)`` sorted by name
(hashable and order-free, so two runs with the same variables compare equal)."""

ENV_FIELD: Final = "env"
"""The ``ServeFlags`` field, and the name problems and the board use for it."""

_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# C0 (tab included: no shell or YAML writer keeps it as typed), DEL and C1
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
MAX_VALUE_CHARS: Final = 4096


@dataclass(frozen=True)
class EnvVarSpec:
    """A variable vtc knows: what it does, and how vLLM reads its value.

    ``integer``: vLLM reads it with ``int()`` (``bool(int(value))`` for its switches), so
    anything else stops the server with Python's ``invalid literal for int()``;
    ``choices``: the values vLLM accepts (case as vLLM compares it). ``source``: where in
    vLLM 0.32's ``envs.py`` it is read.
    """

    name: str
    help: str
    source: str
    integer: bool = False
    choices: tuple[str, ...] | None = None
    upper: bool = False  # vLLM upper-cases the value before comparing


DECLARED_ENV: Final[Mapping[str, EnvVarSpec]] = {
    spec.name: spec
    for spec in (
        EnvVarSpec(
            RUNNER_V2_ENV,
            "Model runner V2 (vLLM 0.33's default on GPUs) on 1, off 0: 0 selects the V1 "
            "runner, the way around 'UVA is not available' (WSL2) and a missing Triton.",
            "envs.py:2151 maybe_convert_bool: bool(int(value))",
            integer=True,
        ),
        EnvVarSpec(
            "VLLM_USE_FLASHINFER_SAMPLER",
            "0: PyTorch's sampler instead of FlashInfer's (no nvcc to build it, e.g. WSL2).",
            "envs.py:878 bool(int(value))",
            integer=True,
        ),
        EnvVarSpec(
            "VLLM_LOGGING_LEVEL",
            "vLLM's log level (DEBUG shows each stage in more detail).",
            "envs.py:852 os.getenv(...).upper()",
            choices=("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"),
            upper=True,
        ),
        EnvVarSpec(
            "CUDA_VISIBLE_DEVICES",
            "The GPUs the server sees, by index or UUID (0,1); a container export leaves it "
            "to the runtime.",
            "CUDA's own variable",
        ),
    )
}

RESERVED_ENV: Final[Mapping[str, str]] = {
    "PYTHONUNBUFFERED": "vtc sets it so the server's log arrives line by line",
    "VTC_RELAY_SYNC": "vtc's log relay uses it (tui/server/relay.py)",
}
"""vtc's own plumbing: a run may not set these."""

SECRET_REFUSAL: Final = (
    "holds a secret, and a run's environment is kept in the history, the board and the "
    "exports; set it in vtc's own environment: the server is given it by name"
)


def is_valid_name(name: str) -> bool:
    """Whether ``name`` is a portable environment variable name (letters, digits, ``_``)."""
    return bool(_NAME.match(name))


def name_problems(name: str) -> list[str]:
    """Why ``name`` may not be part of a run's environment (empty: it may)."""
    if not is_valid_name(name):
        shown = name if name.isprintable() and len(name) <= 60 else repr(name[:60])
        return [
            f"{shown!s}: not a variable name (letters, digits and _, not starting with a digit)"
        ]
    if SECRET_NAME.search(name):
        return [f"{name} {SECRET_REFUSAL}"]
    if name in RESERVED_ENV:
        return [f"{name}: {RESERVED_ENV[name]}; a run may not set it"]
    return []


def text_problems(label: str, texts: Iterable[object]) -> list[str]:
    """Why any of ``texts`` (a command line's model, flag values or extra arguments) is
    refused: a control character (an escape, a line break, NUL) that no terminal may be sent
    and no export can write as the run used it."""
    for text in texts:
        if isinstance(text, str) and _CONTROL.search(text):
            return [f"{label}: a value holds no control character (NUL, line break, escape...)"]
    return []


def value_problems(name: str, value: str) -> list[str]:
    """Why ``value`` is refused for ``name`` (vLLM's rule for a declared variable)."""
    if _CONTROL.search(value):
        return [
            f"{name}: a value holds no control character (NUL, line break, escape...): "
            "an export could not write it as the run used it"
        ]
    if SECRET_VALUE.search(value):  # only the name: the value is the secret
        return [f"{name}'s value {SECRET_REFUSAL}"]
    if len(value) > MAX_VALUE_CHARS:
        return [f"{name}: a value of {len(value)} characters (at most {MAX_VALUE_CHARS})"]
    spec = DECLARED_ENV.get(name)
    if spec is None:
        return []
    if spec.integer:
        try:
            int(value)
        except ValueError:
            # what vLLM's envs.py raises when it reads the variable
            return [f"{name}={value}: invalid literal for int() with base 10: {value!r}"]
    if spec.choices is not None:
        given = value.upper() if spec.upper else value
        if given not in spec.choices:
            return [f"{name}={value}: expected one of {', '.join(spec.choices)}"]
    return []


def env_problems(pairs: Iterable[tuple[str, str]]) -> list[str]:
    """Every reason ``pairs`` cannot be a run's environment (names, values, repeats)."""
    problems: list[str] = []
    seen: set[str] = set()
    for name, value in pairs:
        if name in seen:
            problems.append(f"{name}: given twice; keep one")
            continue
        seen.add(name)
        found = name_problems(name)
        problems += found or value_problems(name, value)
    return problems


def as_pairs(value: Any) -> list[tuple[str, str]]:
    """A mapping, or ``(name, value)`` pairs, as a list of pairs; ``ValueError`` otherwise."""
    if isinstance(value, Mapping):
        items = list(value.items())
    elif isinstance(value, (list, tuple)):
        items = [tuple(p) if isinstance(p, (list, tuple)) else p for p in value]
    else:
        raise ValueError("an environment is a table of NAME = value")
    pairs: list[tuple[str, str]] = []
    for item in items:
        if not (isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str)):
            raise ValueError("an environment is a table of NAME = value")
        name, raw = item
        if isinstance(raw, bool):
            raw = "1" if raw else "0"
        if not isinstance(raw, (str, int, float)):
            raise ValueError(f"{name}: a variable's value is text")
        pairs.append((name, str(raw)))
    return pairs


def normalized(pairs: Iterable[tuple[str, str]]) -> EnvPairs:
    """``pairs`` sorted by name (the stored form)."""
    return tuple(sorted(pairs))


def without_secrets(pairs: Iterable[tuple[str, str]]) -> EnvPairs:
    """``pairs`` without any variable that holds a secret, by name or by value's shape (a
    record read back: an older vtc kept ``HF_ENDPOINT=https://u:p@host``)."""
    return normalized((n, v) for n, v in pairs if not holds_secret(n, v))


def parse_env_text(text: str) -> tuple[EnvPairs, list[str]]:
    """The form's text (``NAME=value NAME2='a b'``, shell quoting) as pairs, or problems.

    A secret's value never reaches a problem: only its name is named.
    """
    try:
        words = shlex.split(text)
    except ValueError as exc:
        return (), [f"environment: {exc} (shell quoting)"]
    pairs: list[tuple[str, str]] = []
    problems: list[str] = []
    for position, word in enumerate(words, 1):
        name, eq, value = word.partition("=")
        if not eq:
            # not echoed: a pasted token alone would be shown back
            problems.append(f"environment word {position}: expected NAME=value")
            continue
        pairs.append((name, value))
    problems += env_problems(pairs)
    return (normalized(pairs), problems) if not problems else ((), problems)


def env_text(pairs: Iterable[tuple[str, str]]) -> str:
    """``pairs`` as the form shows them: ``NAME=value`` words, shell-quoted values."""
    return " ".join(f"{name}={shlex.quote(value)}" for name, value in pairs)


def applied(pairs: Iterable[tuple[str, str]], changes: Mapping[str, str | None]) -> EnvPairs:
    """``pairs`` with ``changes`` set (``None`` removes a variable)."""
    out = dict(pairs)
    for name, value in changes.items():
        if value is None:
            out.pop(name, None)
        else:
            out[name] = value
    return normalized(out.items())
