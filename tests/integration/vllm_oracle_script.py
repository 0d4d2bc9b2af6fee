"""Feed command lines to vLLM's own serve parser and config validation (the oracle).

Run by the provisioned vLLM venv's Python, never imported by vtc or pytest. Reads one JSON
list per line on stdin (what follows ``vllm serve``) and writes one JSON object per line:
``{"ok": true}`` or ``{"ok": false, "error": "..."}``. Each line goes through exactly what
``vllm serve`` runs before it starts an engine (vLLM 0.32.0): ``make_arg_parser(
FlexibleArgumentParser())`` (``entrypoints/launchers/cli_args.py:421-467``),
``validate_parsed_serve_args`` (``:502-541``), then ``AsyncEngineArgs.from_cli_args(args)
.create_engine_config(usage_context=OPENAI_API_SERVER)``, which builds and validates every
config (pydantic ranges, cross-field rules, the model's config.json).

Only the JSON goes to the real stdout: vLLM's logging is sent to stderr by pointing file
descriptor 1 at 2 before vLLM is imported.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys

_OUT = os.dup(1)
os.dup2(2, 1)


def _reply(data: dict[str, object]) -> None:
    os.write(_OUT, (json.dumps(data) + "\n").encode())


def main() -> int:
    import importlib

    from vllm.engine.arg_utils import AsyncEngineArgs

    for where in ("vllm.entrypoints.common.cli_args", "vllm.entrypoints.launchers.cli_args"):
        try:  # 0.33 moved the module (no shim); 0.32 has the second
            cli_args = importlib.import_module(where)
            break
        except ModuleNotFoundError:
            continue
    make_arg_parser = cli_args.make_arg_parser
    validate_parsed_serve_args = cli_args.validate_parsed_serve_args
    from vllm.usage.usage_lib import UsageContext
    from vllm.utils.argparse_utils import FlexibleArgumentParser

    parser = make_arg_parser(FlexibleArgumentParser(prog="vllm serve"))
    _reply({"ready": True})
    for line in sys.stdin:
        argv = json.loads(line)
        err = io.StringIO()
        try:
            with contextlib.redirect_stderr(err):
                args = parser.parse_args(argv)
        except SystemExit:
            lines = err.getvalue().strip().splitlines() or ["argparse exit"]
            _reply({"ok": False, "error": "argparse: " + lines[-1]})
            continue
        except Exception as exc:  # vLLM's parser itself crashed (OverflowError on "999...k")
            _reply({"ok": False, "error": f"parser crashed: {type(exc).__name__}: {exc!s:.200}"})
            continue
        try:
            validate_parsed_serve_args(args)
            if getattr(args, "model_tag", None):
                args.model = args.model_tag
            engine_args = AsyncEngineArgs.from_cli_args(args)
            engine_args.create_engine_config(usage_context=UsageContext.OPENAI_API_SERVER)
        except Exception as exc:  # the oracle's answer: vLLM refused (any exception)
            detail = " ".join(str(exc).split())[:300]
            _reply({"ok": False, "error": f"{type(exc).__name__}: {detail}"})
            continue
        _reply({"ok": True})
    return 0


if __name__ == "__main__":
    sys.exit(main())
