"""Regenerate a vLLM version's ``vllm serve`` table from that vLLM's real parser.

Usage (a venv with vLLM installed: the CPU build of ``vtc setup-cpu-vllm`` for 0.32, the
parser env of ``python -m tui.server.parser_env 0.33.0`` for 0.33)::

    python tools/gen_vllm_serve_options.py VENV_PYTHON --write

``--write`` puts the module (and its help texts, :func:`render_help`) where
:mod:`tui.domain.flags.vllm_tables` looks for that version
(``tui/domain/flags/vllm_serve_options.py`` for 0.32, ``vllm_serve_options_0_33.py`` for 0.33, and
so on; a new version also needs its record in ``tui/domain/vllm_release.py``); without it the
module goes to stdout. ``--write-to DIR`` writes both at the same paths under ``DIR``
instead of the checkout (the oracle compares them with the shipped ones, from one
introspection). It runs the same introspection the console runs
(``tui/server/introspect_script.py``) and writes one row per argparse action;
``tests/integration/test_realvllm_flag_oracle.py`` checks that the shipped tables still
equal the provisioned parsers.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tui.domain.flags.vllm_cli import CliFlag
from tui.domain.flags.vllm_tables import help_module_file, module_file
from tui.server.introspect import dump_vllm_cli, script_env

# Run by the vLLM venv's Python: the range constraints (pydantic ge/gt/le/lt) each serve
# option's config class declares, by dest (the first class that declares the field wins),
# and the Literal choices of the fields of the JSON config flags (``--speculative-config``'s
# ``method``), in the order pydantic lists them in its "Input should be ..." message.
BOUNDS_SCRIPT = """
import dataclasses, importlib, json, os, sys, typing
out_fd = os.dup(1); os.dup2(2, 1)
import annotated_types
import vllm.config as C
from vllm.engine.arg_utils import EngineArgs
for where in ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args"):
    try:
        FrontendArgs = importlib.import_module(where).FrontendArgs
        break
    except ModuleNotFoundError:
        continue
dests = {f.name for cls in (EngineArgs, FrontendArgs) for f in dataclasses.fields(cls)}
classes = [getattr(C, n) for n in sorted(dir(C))] + [FrontendArgs]
bounds = {}
for cls in classes:
    fields = getattr(cls, "__pydantic_fields__", None)
    if not isinstance(cls, type) or not fields:
        continue
    for name, info in fields.items():
        if name not in dests or name in bounds or name.startswith("_"):
            continue
        found = {}
        for meta in info.metadata:
            for attr in ("ge", "gt", "le", "lt"):
                if isinstance(meta, getattr(annotated_types, attr.capitalize())):
                    found[attr] = getattr(meta, attr)
        if found:
            bounds[name] = [cls.__name__, found]

def literal_values(tp):
    # The values of a field that takes nothing but literals (and None): "Literal[...]",
    # "Literal[...] | None", a Literal of Literals. "str | Literal[...]" takes any text: [].
    origin = typing.get_origin(tp)
    if origin is typing.Literal:
        out = []
        for arg in typing.get_args(tp):
            if typing.get_origin(arg) is None:
                out.append(arg)
            else:
                inner = literal_values(arg)
                if not inner:
                    return []
                out.extend(inner)
        return out
    if origin is None or origin is typing.Annotated:
        return literal_values(typing.get_args(tp)[0]) if origin else []
    values = []
    for arg in typing.get_args(tp):
        if arg is type(None):
            continue
        inner = literal_values(arg)
        if not inner:
            return []
        values.extend(inner)
    return values

literals = {}
for dest in sorted(dests):
    if not dest.endswith("_config"):
        continue
    name = dest.replace("_", "").lower()
    cls = next((getattr(C, n) for n in dir(C) if n.lower() == name), None)
    fields = getattr(cls, "__pydantic_fields__", None)
    if not fields:
        continue
    found = {}
    for field, info in fields.items():
        values = literal_values(info.annotation)
        if values and all(isinstance(v, str) for v in values) and not field.startswith("_"):
            found[field] = values
    if found:
        literals[dest] = [cls.__name__, found]
os.write(out_fd, json.dumps({"bounds": bounds, "literals": literals}, sort_keys=True).encode())
"""


def config_facts(python: str) -> dict[str, dict[str, list[object]]]:
    """``{"bounds": {dest: [class, {"ge": 1}]}, "literals": {dest: [class, {field: [...]}]}}``."""
    done = subprocess.run(
        [python, "-c", BOUNDS_SCRIPT],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
        env=script_env(),
    )
    data: dict[str, dict[str, list[object]]] = json.loads(done.stdout)
    return data


HEADER = '''"""vLLM {version}'s ``vllm serve`` parser as data: each option, its action, type, arity.

Generated by ``tools/gen_vllm_serve_options.py`` from the real parser
(``make_arg_parser(FlexibleArgumentParser())`` of
``{module}``); the real-vLLM suite checks it still matches.
:mod:`tui.domain.flags.vllm_tables` picks the table of the installed vLLM's version when vtc has
not introspected it: to resolve abbreviations and aliases in extra arguments
(``--max-model`` is ``--max-model-len``), to check their values the way argparse types
them, and to refuse unknown options before a launch.

Row: ``(dest, option strings, action, type name, optional, nargs, choices, default,
deprecated)``; ``default`` only when it is plain data (scalars, lists, dicts); option
strings include the ones vLLM accepts but hides from ``--help``; ``deprecated`` when vLLM
marks the action or its help says so. Help texts are left out (introspect for them).
``BOUNDS``: the range each option's vLLM config class declares (pydantic ``ge``/``gt``/
``le``/``lt``), checked for the extra arguments with pydantic's words.
``LITERALS``: the allowed values of the fields of the JSON config options, in pydantic's
order (``--speculative-config``'s ``method``), refused with pydantic's words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

VERSION = "{version}"
PARSER_MODULE = "{module}"

# fmt: off
ROWS: tuple[tuple[Any, ...], ...] = (
'''

FOOTER = """)

BOUNDS: Mapping[str, tuple[str, Mapping[str, float]]] = {BOUNDS}

LITERALS: Mapping[str, tuple[str, Mapping[str, tuple[str, ...]]]] = {LITERALS}
# fmt: on
"""


def _literal(value: object) -> bool:
    """Whether ``value`` is plain data whose ``repr`` reads back (scalars, lists, dicts)."""
    if value is None or isinstance(value, bool | int | float | str):
        return True
    if isinstance(value, list | tuple):
        return all(_literal(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _literal(v) for k, v in value.items())
    return False


def _dict_body(items: dict[str, object]) -> str:
    return "{\n" + "".join(f"    {k!r}: {v!r},\n" for k, v in items.items()) + "}"


def render(data: dict[str, object], facts: dict[str, dict[str, list[object]]]) -> str:
    """The table module's text for one introspection dump and its config facts."""
    version = str(data.get("vllm_version") or "").split("+")[0]
    module = str(data.get("parser_module") or "")
    out = [HEADER.replace("{version}", version).replace("{module}", module)]
    for a in data["actions"]:  # type: ignore[attr-defined]
        if not a["option_strings"]:
            continue  # the positional model_tag
        default = a["default"]
        if not _literal(default):
            default = None  # not a plain value (a function, a class): not data
        choices = a["choices"]
        row = (
            a["dest"],
            tuple(a["option_strings"]),
            a["action"],
            a["type_name"],
            bool(a["optional"]),
            a["nargs"],
            None if choices is None else tuple(choices),
            default,
            CliFlag.from_json(a).is_deprecated,
        )
        out.append(f"    {row!r},\n")
    bounds = {
        dest: (str(cls), dict(sorted(limits.items())))  # type: ignore[call-overload]
        for dest, (cls, limits) in sorted(facts["bounds"].items())
    }
    literals = {
        dest: (str(cls), {f: tuple(v) for f, v in sorted(fields.items())})  # type: ignore[attr-defined]
        for dest, (cls, fields) in sorted(facts["literals"].items())
    }
    footer = FOOTER.replace("{BOUNDS}", _dict_body(bounds))  # type: ignore[arg-type]
    out.append(footer.replace("{LITERALS}", _dict_body(literals)))  # type: ignore[arg-type]
    return "".join(out)


HELP_HEADER = '''"""vLLM {version}'s ``vllm serve`` help texts, for the flag search by meaning.

Generated by ``tools/gen_vllm_serve_options.py`` beside the parser table of the same
version (:mod:`{table}`) from the same introspection.
``HELP``: by dest, the option's group (vLLM's config class) and its help text, blanks
collapsed, without the "API docs" links and the JSON boilerplate, at most {limit}
characters (the search reads words, not the whole page).
"""

from __future__ import annotations

from collections.abc import Mapping

VERSION = "{version}"

# fmt: off
HELP: Mapping[str, tuple[str, str]] = {
'''

HELP_LIMIT = 480
_BOILERPLATE = (
    "API docs:",
    "Should either be a valid JSON string or JSON keys passed individually.",
)


def help_text(text: str, limit: int = HELP_LIMIT) -> str:
    """``text`` as the help module keeps it (see :data:`HELP_HEADER`)."""
    lines = [line for line in text.splitlines() if not line.strip().startswith(_BOILERPLATE)]
    flat = " ".join(" ".join(lines).split())
    for words in _BOILERPLATE:
        flat = flat.replace(words, "").strip()
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0]
    return cut + " ..."


def render_help(data: dict[str, object], table: str) -> str:
    """The help module's text for one introspection dump (``table``: its table module)."""
    version = str(data.get("vllm_version") or "").split("+")[0]
    out = [
        HELP_HEADER.replace("{version}", version)
        .replace("{table}", table)
        .replace("{limit}", str(HELP_LIMIT))
    ]
    for a in data["actions"]:  # type: ignore[attr-defined]
        if not a["option_strings"] or a["action"] == "help":
            continue
        out.append(f"    {a['dest']!r}: ({a['group'] or ''!r}, {help_text(a['help'] or '')!r}),\n")
    out.append("}\n# fmt: on\n")
    return "".join(out)


def _write_root(argv: list[str]) -> Path | None:
    """Where ``--write`` (the checkout) or ``--write-to DIR`` puts the modules; None: stdout."""
    if "--write-to" in argv:
        return Path(argv[argv.index("--write-to") + 1])
    return Path(__file__).resolve().parents[1] if "--write" in argv else None


def main(argv: list[str]) -> int:
    """``gen_vllm_serve_options.py PYTHON [--write | --write-to DIR | --help-texts]``."""
    if not argv or argv[0].startswith("-"):
        print(__doc__, file=sys.stderr)
        return 2
    python = argv[0]
    data = dump_vllm_cli(python)
    version = str(data.get("vllm_version"))
    table = module_file(version).removesuffix(".py").replace("/", ".")
    if "--help-texts" in argv[1:]:  # the help module alone, to stdout
        sys.stdout.write(render_help(data, table))
        return 0
    text = render(data, config_facts(python))
    root = _write_root(argv[1:])
    if root is None:
        sys.stdout.write(text)
        return 0
    for target, body in (
        (root / module_file(version), text),
        (root / help_module_file(version), render_help(data, table)),
    ):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(body, encoding="utf-8")
        print(f"wrote {target}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
