"""What every detector shares: building a :class:`Diagnosis`, numbers, flags by spelling."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from tui.domain.diagnosis import Diagnosis, Fix
from tui.domain.flags.serve import FlagKind, FlagSpec, flag_specs
from tui.domain.vllm_release import PROVISIONED, release_of
from tui.server.diagnose.reading import LogView, tolerant

Detector = Callable[[LogView], "Diagnosis | None"]

GIB: Final = 2**30
MIB: Final = 2**20

DEFAULT_BLOCK_SIZE_GPU: Final = 16  # config/cache.py:72,344-347
DEFAULT_BLOCK_SIZE_CPU: Final = 128  # platforms/cpu.py:292-293
BLOCK_MULTIPLE_GPU: Final = 16
BLOCK_MULTIPLE_CPU: Final = 32  # platforms/cpu.py:295-299; fail_b1 capture: MultipleOf(32)
LEGACY_GPU_MEMORY_UTILIZATION: Final = 0.9  # config.py / config/cache.py:43, vLLM 0.4 to 0.11
DEFAULT_PORT: Final = 8000


def make(
    log: LogView,
    kind: Any,
    summary: str,
    evidence: str,
    facts: dict[str, Any] | None = None,
    fixes: list[Fix] | None = None,
) -> Diagnosis:
    """A diagnosis with the facts every kind carries (device, exit code)."""
    all_facts: dict[str, Any] = dict(facts or {})
    all_facts.setdefault("device", log.device)
    if log.exit_code is not None:
        all_facts.setdefault("exit_code", log.exit_code)
    return Diagnosis(
        kind=kind,
        summary=summary,
        facts=all_facts,
        fixes=fixes or [],
        evidence=_short(evidence.strip()),
    )


def _short(text: str, limit: int = 2000) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- numbers ---------------------------------------------------------------------------------
def floor2(x: float) -> float:
    """Round down to 0.01 (the epsilon keeps 0.84 from becoming 0.83 by float error)."""
    return math.floor(x * 100 + 1e-9) / 100


def ceil2(x: float) -> float:
    """Round up to 0.01."""
    return math.ceil(x * 100 - 1e-9) / 100


def ceil_mib(n_bytes: float) -> int:
    """Bytes rounded up to whole MiB."""
    return math.ceil(n_bytes / MIB - 1e-9) * MIB


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


def num(x: float | None) -> str:
    """``12`` for 12.0, ``0.5`` for 0.5, empty for ``None``."""
    if x is None:
        return ""
    return str(int(x)) if float(x).is_integer() else str(x)


def literal(text: str) -> Any:
    """A Python literal from the log, else the text itself."""
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return text


def cast(spec: FlagSpec | None, value: float) -> Any:
    """``value`` as the flag's own type (an int flag gets an int)."""
    if spec is not None and spec.kind is FlagKind.FLOAT:
        return float(value)
    if float(value).is_integer():
        return int(value)
    return value


def gib(text: str, unit: str | None = None) -> float:
    """A memory figure from the log in GiB (``MiB`` converted; vLLM's "GB" is GiB)."""
    value = float(text)
    if unit in ("KiB", "KB"):
        return value / 1024 / 1024
    return value / 1024 if unit in ("MiB", "MB") else value


# -- flags -----------------------------------------------------------------------------------
def spec_by_spelling(text: str) -> FlagSpec | None:
    """The declared flag an option string or snake_case name refers to."""
    for piece in re.split(r"[/,\s]+", text.strip()):
        if not piece:
            continue
        norm = piece.replace("_", "-")
        for spec in flag_specs():
            if piece == spec.name or norm in (s.replace("_", "-") for s in spec.spellings):
                return spec
    return None


def spec_by_name(name: str) -> FlagSpec | None:
    """The declared flag called ``name``."""
    for spec in flag_specs():
        if spec.name == name:
            return spec
    return None


@dataclass(frozen=True)
class Setting:
    """A flag's value a fix starts from: ``assumed`` when neither the run's flags nor the
    log give it (``vtc diagnose`` on a bare error text): vLLM's default, taken on trust."""

    value: float
    assumed: bool = False


def util_setting(log: LogView) -> Setting:
    """The gpu_memory_utilization the run used: its own (flags, logged arguments); vLLM's
    default where the run's flags or the log's argument record show it was left unset; else
    that default *assumed* (issue 39: a bare OOM text was told "from 0.9", read nowhere)."""
    util = log.value("gpu_memory_utilization")
    if isinstance(util, int | float) and not isinstance(util, bool):
        return Setting(float(util))
    default = (
        LEGACY_GPU_MEMORY_UTILIZATION
        if before(log.version, (0, 12))
        # the default of the log's release (the provisioned one's when the log names none)
        else release_of(log.version or PROVISIONED.version).defaults.gpu_memory_utilization
    )
    recorded = log.non_default_args or log.namespace_args or log.engine_config
    known = log.flags is not None or (log.version is not None and bool(recorded))
    return Setting(default, assumed=not known)


def util_change(verb: str, setting: Setting, new: float, why: str = "") -> str:
    """``Lower gpu_memory_utilization from 0.9 to 0.85 (why)``; from an assumed value the fix
    says so: ``Lower gpu_memory_utilization to 0.87 (why; from 0.92 assumed: vLLM's default,
    the log does not give it)``."""
    name = "gpu_memory_utilization"
    if setting.assumed:
        assumed = f"from {setting.value} assumed: vLLM's default, the log does not give it"
        return f"{verb} {name} to {new} ({why + '; ' if why else ''}{assumed})"
    return f"{verb} {name} from {setting.value} to {new}" + (f" ({why})" if why else "")


def before(version: str | None, bound: tuple[int, int]) -> bool:
    """Whether the vLLM ``version`` the log names is older than ``bound`` (False if unknown)."""
    if not version:
        return False
    m = re.match(r"(\d+)\.(\d+)", version)
    return m is not None and (int(m.group(1)), int(m.group(2))) < bound


# The run's own eager switch where no argument record shows it: a pasted command line
# ("--enforce-eager") or Python call ("LLM(..., enforce_eager=True)"); not vLLM's advice in its
# capture notice ("set 'enforce_eager=True' or use '--enforce-eager' in the CLI"), quoted or not.
_EAGER_TEXT: Final = re.compile(
    r"(?<!['\w-])--enforce[-_]eager(?![\w'-])(?! in the CLI)|"
    r"(?<!set )(?<!')\benforce_eager\s*=\s*True\b(?!')(?! or use)"
)


def run_was_eager(log: LogView) -> bool:
    """Whether the run itself was eager: its flags or logged arguments, else its command line."""
    if log.value("enforce_eager") is True:
        return True
    return any(_EAGER_TEXT.search(line) for line in log.logical)


def positive_int(log: LogView, name: str, default: int = 1) -> int:
    """An integer flag's value in the run, ``default`` when unknown or not positive."""
    value = log.value(name)
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else default
    )


def block_size(log: LogView) -> tuple[int, str]:
    """The KV block size and where it came from (flags, log, or the device default)."""
    if log.flags is not None and log.flags.block_size is not None:
        return log.flags.block_size, "flags"
    for source in (log.non_default_args, log.namespace_args):
        logged = source.get("block_size")
        if isinstance(logged, int) and logged > 0:
            return logged, "log"
    if log.device == "cpu":
        return DEFAULT_BLOCK_SIZE_CPU, "CPU default"
    return DEFAULT_BLOCK_SIZE_GPU, "GPU default"  # also when the log names no device


_BIND: Final = tolerant(r"bind on address \('[^']*', (\d+)\)", "bind on address")
_LISTEN: Final = tolerant(
    r"(?:Starting vLLM (?:API )?server(?: \d+)?|Uvicorn running) on [\w.:/\[\]]+?:(\d+)",
    "Starting vLLM",
    "Uvicorn running",
)


def port(log: LogView) -> int:
    """The port the server tried to use."""
    v = log.value("port")
    if isinstance(v, int):
        return v
    for pattern in (_BIND, _LISTEN):
        found = log.find(pattern)
        if found:
            return int(found[0].group(1))
    return DEFAULT_PORT


def unset_title(spec: FlagSpec) -> str:
    """``Unset --flag (use X)``."""
    default = spec.vllm_default if spec.vllm_default is not None else "vLLM's default"
    return f"Unset {spec.cli} (use {default})"


def without_flag(extra: tuple[str, ...], spec: FlagSpec) -> tuple[str, ...]:
    """``extra`` without ``spec``'s occurrences (``--flag V``, ``--flag=V``, ``--no-flag``)."""
    names = set(spec.spellings)
    if spec.kind is FlagKind.BOOL:
        names |= {"--no-" + n[2:] for n in spec.spellings if n.startswith("--")}
    out: list[str] = []
    i = 0
    while i < len(extra):
        token = extra[i]
        name, eq, _ = token.partition("=")
        norm = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        if norm in names:
            i += 2 if spec.kind is not FlagKind.BOOL and not eq else 1
            continue
        out.append(token)
        i += 1
    return tuple(out)


def extra_with(log: LogView, names: set[str], option: str, value: str) -> dict[str, Any]:
    """``{"extra_args": ...}`` with the option ``names`` set to ``value``.

    With the run's flags: their extra arguments, the option's value replaced where it is
    given (``--x V`` or ``--x=V``) or ``option=value`` appended. Without them (a pasted log):
    just ``option=value``, so the fix still carries the value it names.
    """
    if log.flags is None:
        return {"extra_args": (f"{option}={value}",)}
    extra = list(log.flags.extra_args)
    for i, token in enumerate(extra):
        name, eq, _ = token.partition("=")
        norm = "--" + name[2:].replace("_", "-") if name.startswith("--") else name
        if norm not in names:
            continue
        if eq:
            extra[i] = f"{name}={value}"
            return {"extra_args": tuple(extra)}
        if i + 1 < len(extra):
            extra[i + 1] = value
            return {"extra_args": tuple(extra)}
    return {"extra_args": (*extra, f"{option}={value}")}
