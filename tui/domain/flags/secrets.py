"""Secrets on a ``vllm serve`` command line: found, and moved into the environment vLLM reads.

vLLM 0.32's serve flags that carry a secret (its log masks the same three,
``entrypoints/serve/utils/api_utils.py:271-281``):

- ``--api-key KEY [KEY ...]``: vLLM falls back to ``VLLM_API_KEY`` when the flag is absent
  (``entrypoints/serve/middleware/register.py:32-36``; ``envs.VLLM_API_KEY`` holds one key);
- ``--hf-token [TOKEN]``: with a value, the Hugging Face token; without the flag,
  huggingface_hub reads ``HF_TOKEN``. A bare ``--hf-token`` (use the stored login) is no
  secret and stays;
- ``--watermark-config '{"key": ...}'``: a JSON object holding the watermark's secret key;
  vLLM reads it only from the command line, so vtc refuses it (it would show in ``ps``).

:func:`split_secrets` takes them out of an argv before anything stores it: the history, the
state file, logs, exports and the server's own argv then never see them, and the caller
puts the returned environment into the server's (and its own load client's) credentials.
Pure: the argv in, argv and environment out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tui.domain.flags.argv import ArgToken, lex, take_values
from tui.domain.flags.problems import SECRET_SHOWN, FlagError, FlagProblem
from tui.domain.flags.vllm_cli import VllmCli
from tui.domain.secret_names import SECRET_NAME


@dataclass(frozen=True)
class SecretFlag:
    """A serve flag that carries a secret, and where vLLM reads it instead.

    ``env`` ``None``: vLLM has no other way to receive it. ``value_optional``: the flag
    alone (``--hf-token``) is no secret.
    """

    dest: str
    env: str | None
    nargs: str | None
    value_optional: bool = False


SECRET_FLAGS: Mapping[str, SecretFlag] = {
    "--api-key": SecretFlag("api_key", "VLLM_API_KEY", "+"),
    "--hf-token": SecretFlag("hf_token", "HF_TOKEN", "?", value_optional=True),
    "--watermark-config": SecretFlag("watermark_config", None, None),
}
"""By vLLM's option name."""

SECRET_ENV: tuple[str, ...] = ("VLLM_API_KEY", "HF_TOKEN")
"""Environment variables that hold what the secret flags would carry."""


@dataclass(frozen=True)
class SecretHit:
    """One secret-bearing flag in an argv: its option, the tokens it spans, its values."""

    option: str
    spec: SecretFlag
    start: int
    end: int  # exclusive
    values: tuple[str, ...]

    @property
    def shown(self) -> str:
        """The flag as messages show it: its values masked."""
        masked = " ".join(SECRET_SHOWN for _ in self.values)
        return f"{self.option} {masked}".strip()


@dataclass(frozen=True)
class SecretSplit:
    """An argv without its secrets, and the environment that carries them instead.

    ``notes`` say what moved where (never the values).
    """

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    notes: tuple[str, ...] = ()


def _default_cli() -> VllmCli:
    # Imported here: the generated table is large and only needed for abbreviations.
    from tui.domain.flags.vllm_serve_options import vllm_032_cli

    return vllm_032_cli()


def _secret_option(token: ArgToken, cli: VllmCli) -> str | None:
    if token.option is None:
        return None
    if token.option in SECRET_FLAGS:
        return token.option
    resolution = cli.resolve(token.text)  # "--api-k" is an abbreviation argparse accepts
    if resolution.status == "known" and resolution.option in SECRET_FLAGS:
        return resolution.option
    return None


def find_secrets(argv: Sequence[str], cli: VllmCli | None = None) -> list[SecretHit]:
    """Every secret-bearing flag in ``argv`` (any spelling vLLM accepts), in order."""
    cli = cli or _default_cli()
    tokens = lex(argv)
    hits: list[SecretHit] = []
    for i, token in enumerate(tokens):
        option = _secret_option(token, cli)
        if option is None:
            continue
        spec = SECRET_FLAGS[option]
        values = take_values(tokens, i, spec.nargs)
        consumed = 0 if token.inline is not None else len(values)
        hits.append(SecretHit(option, spec, i, i + 1 + consumed, tuple(values)))
    return hits


def secret_problems(argv: Sequence[str], cli: VllmCli | None = None) -> list[FlagProblem]:
    """Why ``argv`` (extra arguments) may not be stored or launched: each secret in it."""
    out: list[FlagProblem] = []
    for hit in find_secrets(argv, cli):
        if hit.spec.value_optional and not hit.values:
            continue
        where = (
            f"set {hit.spec.env} in vtc's environment instead"
            if hit.spec.env
            else (
                "vLLM reads it only from the command line, where any user sees it (ps); vtc "
                "does not pass it"
            )
        )
        out.append(
            FlagProblem(
                "extra_args",
                f"{hit.shown} in extra args: a secret is never kept in the flags (history, "
                f"exports, ps); {where}",
            )
        )
    return out


def split_secrets(argv: Sequence[str], cli: VllmCli | None = None) -> SecretSplit:
    """``argv`` without its secrets, and ``{ENV_NAME: value}`` that vLLM reads instead.

    ``argv`` is a serve command line or extra arguments (any prefix such as ``vllm serve``
    is kept). Raises :class:`FlagError` (values masked) for a secret vLLM cannot take from
    the environment (``--watermark-config``), a flag without its value, or several API keys
    (``VLLM_API_KEY`` holds one).
    """
    tokens = list(argv)
    env: dict[str, str] = {}
    notes: list[str] = []
    problems: list[FlagProblem] = []
    drop: set[int] = set()
    for hit in find_secrets(tokens, cli):
        if hit.spec.value_optional and not hit.values:
            continue  # a bare --hf-token: use the stored login; no secret in it
        problem = _split_problem(hit)
        if problem is not None:
            problems.append(problem)
            continue
        assert hit.spec.env is not None
        env[hit.spec.env] = hit.values[0]
        drop.update(range(hit.start, hit.end))
        notes.append(f"{hit.option}: taken off the command line; passed as {hit.spec.env}")
    if problems:
        raise FlagError(problems)
    kept = tuple(t for i, t in enumerate(tokens) if i not in drop)
    return SecretSplit(kept, env, tuple(notes))


def _split_problem(hit: SecretHit) -> FlagProblem | None:
    if hit.spec.env is None:
        return FlagProblem(
            "extra_args",
            f"{hit.shown}: carries a secret key and vLLM reads it only from the command line, "
            "where any user sees it (ps); vtc does not launch it",
        )
    if not hit.values:
        return FlagProblem("extra_args", f"argument {hit.option}: expected at least one argument")
    if len(hit.values) > 1:
        return FlagProblem(
            "extra_args",
            f"{hit.shown}: {len(hit.values)} keys, but {hit.spec.env} holds one; pass one key",
        )
    if hit.values[0] == "":
        return FlagProblem("extra_args", f"{hit.option} '': an empty secret; leave the flag out")
    return None


def is_secret_name(name: str) -> bool:
    """Whether the environment variable ``name`` holds a secret (the one rule)."""
    return bool(SECRET_NAME.search(name))


@dataclass(frozen=True)
class ScrubbedArgs:
    """Arguments with every secret-bearing option removed, and the variables that carry
    those secrets instead (for references such as ``${VLLM_API_KEY}`` in an export)."""

    args: tuple[str, ...]
    secret_env: tuple[str, ...]


def scrub_secret_args(args: Sequence[str], cli: VllmCli | None = None) -> ScrubbedArgs:
    """``args`` without any secret-bearing option and its values; never raises.

    For rendering what is already recorded (an export, the board); a launch goes through
    :func:`split_secrets`, which refuses what cannot be moved into the environment.
    """
    tokens = list(args)
    drop: set[int] = set()
    names: list[str] = []
    for hit in find_secrets(tokens, cli):
        if hit.spec.value_optional and not hit.values:
            continue  # a bare --hf-token carries no secret
        drop.update(range(hit.start, hit.end))
        if not hit.values and hit.end < len(tokens):
            # A value argparse would refuse (it looks like an option): still a secret here.
            drop.add(hit.end)
        if hit.spec.env is not None and hit.spec.env not in names:
            names.append(hit.spec.env)
    return ScrubbedArgs(tuple(t for i, t in enumerate(tokens) if i not in drop), tuple(names))
