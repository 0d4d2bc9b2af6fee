"""Read a ``vllm serve --config`` YAML file from disk for ``vtc --config FILE``.

The reading is bounded and never raises anything but
:class:`~tui.domain.flags.config_yaml.ConfigYamlError` (a ``VtcError``: the CLI prints one
line); the file's values then go through the one validation path
(:func:`tui.domain.flags.config_yaml.import_config_yaml`).
"""

from __future__ import annotations

from pathlib import Path

from tui.domain.flags.config_yaml import (
    MAX_CONFIG_BYTES,
    ConfigImport,
    ConfigYamlError,
    import_config_yaml,
)
from tui.domain.flags.problems import FlagProblem
from tui.domain.flags.validation import ValidationContext
from tui.domain.flags.vllm_cli import VllmCli


def load_config_file(
    path: Path,
    *,
    model: str | None = None,
    cli: VllmCli | None = None,
    context: ValidationContext | None = None,
) -> ConfigImport:
    """``path`` imported as ``vllm serve --config`` would read it, every value checked.

    ``model`` (a command line's MODEL) beats the file's ``model:``. Raises
    :class:`ConfigYamlError` naming the file: a wrong extension (vLLM's own rule), a file
    that cannot be read, is over :data:`MAX_CONFIG_BYTES`, is not UTF-8, or holds a value
    vLLM would refuse.
    """
    ext = path.suffix.lstrip(".")
    if ext not in ("yaml", "yml"):
        # utils/argparse_utils.py:596-600, vLLM's words
        raise ConfigYamlError(f"{path}: Config file must be of a yaml/yml type. {ext} supplied")
    try:
        with path.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigYamlError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigYamlError(f"{path}: larger than {MAX_CONFIG_BYTES // 1024} KiB; not a config")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigYamlError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    try:
        return import_config_yaml(text, model=model, cli=cli, context=context)
    except ConfigYamlError as exc:
        problems = [FlagProblem(p.field, f"{path}: {p.line}") for p in exc.problems]
        raise ConfigYamlError(problems) from None
