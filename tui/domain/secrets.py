"""Which names hold secrets, declared once: for redaction, reproduction and exports.

A secret's *value* never leaves the process environment it was given in: not argv, not a
log line, not the history, not an export. What may be recorded is its *name*, so an export
can refer to it (``${VLLM_API_KEY}``, ``EnvironmentFile=``, a Kubernetes ``secretKeyRef``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tui.domain.results import RunRecord
from tui.domain.secret_names import SECRET_NAME
from tui.domain.vllm_config_yaml import SECRET_KEYS

#: ``vllm serve`` options that carry a secret, and the variable vLLM reads instead
#: (``--api-key`` falls back to ``VLLM_API_KEY``, reference 1.3; ``HF_TOKEN`` is read by
#: huggingface_hub).
SECRET_OPTIONS: dict[str, str] = {"--" + key: env for key, env in SECRET_KEYS.items()}


def is_secret_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a secret."""
    return bool(SECRET_NAME.search(name))


@dataclass(frozen=True)
class ScrubbedArgs:
    """Arguments with every secret option removed, and the variables that replace them."""

    args: tuple[str, ...]
    secret_env: tuple[str, ...]


def scrub_secret_args(args: Sequence[str]) -> ScrubbedArgs:
    """Drop ``--api-key VALUE...``/``--hf-token=VALUE`` (any ``_``/``-`` spelling) from ``args``.

    ``--api-key`` takes several values (``nargs="+"``), so every value up to the next option
    goes with it. Returns the remaining arguments and the environment variables that carry
    those secrets instead.
    """
    kept: list[str] = []
    names: list[str] = []
    skipping = False
    for token in args:
        if token.startswith("-") and token != "-":
            option = "--" + token.partition("=")[0].lstrip("-").replace("_", "-")
            env = SECRET_OPTIONS.get(option) if token.startswith("--") else None
            if env is not None:
                if env not in names:
                    names.append(env)
                skipping = "=" not in token
                continue
            skipping = False
        elif skipping:
            continue
        kept.append(token)
    return ScrubbedArgs(tuple(kept), tuple(names))


def without_secret_args(run: RunRecord) -> RunRecord:
    """``run`` with any secret option removed from its flags' extra arguments.

    vtc never puts a secret on a command line, but a record can still hold one (typed into
    the extra-arguments field, or written by an older version); whatever renders a run for
    someone to read (the board, the report, an export) goes through this first.
    """
    scrubbed = scrub_secret_args(run.flags.extra_args)
    if not scrubbed.secret_env:
        return run
    return run.model_copy(update={"flags": run.flags.replace(extra_args=scrubbed.args)})
