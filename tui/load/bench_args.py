"""``vtc bench``'s arguments: the workload rendered from :class:`LoadSpec`'s declaration.

Each :class:`~tui.domain.workload.LoadSpec` field is one option, spelled as
``vllm bench serve`` spells it (its ``bench_flag``), with bench serve's default where it
differs from the console's and the declared bounds checked as argparse checks types.
The rest (the server, the dataset, statistics and result files) are bench serve's options
that are not part of a workload, declared here.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from typing import Any

from pydantic import ValidationError

from tui.domain.workload import LoadSpec, WorkloadField, workload_fields
from tui.load.client import TRANSPORT_KINDS
from tui.load.datasets import DEFAULT_CUSTOM_OUTPUT_LEN, shared_prefix_spec
from tui.load.errors import LoadError

DATASETS = ("random", "shared-prefix", "custom", "sharegpt")
BACKENDS = ("openai", "vllm", "openai-chat")
GENERATED = ("random", "shared-prefix")  # bench serve forces ignore_eos for these


class BenchError(LoadError):
    """A ``vtc bench`` run that cannot start, with the line to print."""


def _typed(field: WorkloadField, cast: Callable[[str], Any]) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            value = cast(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text!r}") from None
        if isinstance(value, float) and math.isnan(value):
            raise argparse.ArgumentTypeError("must be a number, got nan")
        problem = field.bound_problem(value)
        if problem is not None:
            raise argparse.ArgumentTypeError(f"{problem}, got {text}")
        return value

    parse.__name__ = field.kind  # argparse names the type in its messages
    return parse


def _whole(low: int, high: int | None = None) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[low, high]`` (one line otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid value {text[:40]!r}") from None
        if value < low or (high is not None and value > high):
            bounds = f"from {low} to {high}" if high is not None else f">= {low}"
            raise argparse.ArgumentTypeError(f"must be {bounds}, got {value}")
        return value

    parse.__name__ = "whole number"
    return parse


def _percent(text: str) -> float:
    """An argparse type: a finite percentage in ``[0, 100)``."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid value {text[:40]!r}") from None
    if not (math.isfinite(value) and 0.0 <= value < 100.0):
        raise argparse.ArgumentTypeError(f"must be a percentage in [0, 100), got {text[:40]}")
    return value


def add_workload_arguments(group: Any) -> None:
    """One option per :class:`LoadSpec` field (dest: the field name)."""
    for field in workload_fields():
        if field.kind == "bool":
            group.add_argument(
                field.bench_flag, dest=field.name, action="store_true", help=field.help
            )
            continue
        if field.kind == "choice":
            group.add_argument(
                field.bench_flag,
                dest=field.name,
                default=field.cli_text(field.bench_default),
                choices=[field.cli_text(c) for c in field.choices],
                help=f"{field.help} (default {field.cli_text(field.bench_default)})",
            )
            continue
        cast: Callable[[str], Any] = int if "int" in field.kind else float
        shown = "none" if field.bench_default is None else f"{field.bench_default:g}"
        group.add_argument(
            field.bench_flag,
            dest=field.name,
            type=_typed(field, cast),
            default=field.bench_default,
            help=f"{field.help} (default {shown})",
        )
        for alias in field.bench_aliases:
            group.add_argument(
                alias,
                dest=f"{field.name}_alias",
                type=_typed(field, cast),
                default=None,
                help=f"Same as {field.bench_flag}, and wins over it (bench serve's alias).",
            )


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Every ``vtc bench`` option, on ``parser``."""
    target = parser.add_argument_group("server")
    target.add_argument("--base-url", default=None, help="Server base URL (else host/port).")
    target.add_argument("--host", default="127.0.0.1", help="Server host (default 127.0.0.1).")
    target.add_argument(
        "--port", type=_whole(1, 65535), default=8000, help="Server port (default 8000)."
    )
    target.add_argument(
        "--backend",
        default="openai",
        choices=BACKENDS,
        help="Accepted for bench serve compatibility; openai-chat implies the chat endpoint.",
    )
    target.add_argument(
        "--model", default=None, help="Model name to send (default: the server's first)."
    )
    target.add_argument(
        "--tokenizer",
        default=None,
        help="Folder with tokenizer.json for building prompts (default: the model's).",
    )
    target.add_argument(
        "--transport",
        default="auto",
        choices=TRANSPORT_KINDS,
        help="HTTP client for the streams: vtc's own (native), aiohttp, or auto (native "
        "unless a *_PROXY variable applies to the server, then aiohttp).",
    )

    add_workload_arguments(parser.add_argument_group("workload (LoadSpec)"))

    data = parser.add_argument_group("dataset")
    data.add_argument(
        "--dataset-name",
        default="random",
        choices=DATASETS,
        help="Where prompts come from (default random: --random-input-len tokens each).",
    )
    data.add_argument("--dataset-path", default=None, help="JSONL (custom) or JSON (sharegpt).")
    data.add_argument(
        "--cache-hit-pct",
        type=_percent,
        default=50.0,
        help="shared-prefix: percent of --random-input-len shared by every prompt.",
    )
    data.add_argument(
        "--custom-output-len",
        type=_whole(1),
        default=DEFAULT_CUSTOM_OUTPUT_LEN,
        help=f"custom: output tokens per request (default {DEFAULT_CUSTOM_OUTPUT_LEN}).",
    )
    data.add_argument(
        "--sharegpt-output-len",
        type=_whole(1),
        default=None,
        help="sharegpt: output tokens per request (default: each conversation's answer).",
    )
    data.add_argument("--disable-shuffle", action="store_true", help="Keep the dataset's order.")
    data.add_argument(
        "--no-oversample",
        action="store_true",
        help="Send at most the dataset's prompts (default: repeat them up to --num-prompts).",
    )
    data.add_argument(
        "--skip-chat-template", action="store_true", help="Accepted; prompts are sent as is."
    )

    stats = parser.add_argument_group("statistics and results")
    stats.add_argument(
        "--goodput",
        nargs="+",
        default=None,
        metavar="KEY:MS",
        help="SLOs a request must meet to count as good, e.g. ttft:500 e2el:4000.",
    )
    stats.add_argument(
        "--percentile-metrics",
        default="ttft,tpot,itl,e2el",
        help="Metrics whose percentiles are reported (default ttft,tpot,itl,e2el).",
    )
    stats.add_argument(
        "--metric-percentiles", default="50,90,99", help="Percentiles reported (default 50,90,99)."
    )
    stats.add_argument("--save-result", action="store_true", help="Write the result JSON.")
    stats.add_argument(
        "--save-detailed", action="store_true", help="Also each request's timings in the JSON."
    )
    stats.add_argument("--result-dir", default=None, help="Where the JSON goes (default: here).")
    stats.add_argument(
        "--result-filename", default=None, help="The JSON's name (default: bench serve's)."
    )
    stats.add_argument("--label", default=None, help="File name prefix (default: --backend).")
    stats.add_argument(
        "--metadata",
        nargs="*",
        default=None,
        metavar="KEY=VALUE",
        help="Extra keys written into the result JSON.",
    )
    stats.add_argument(
        "--disable-tqdm", action="store_true", help="No live progress line on stderr."
    )


def add_bench_parser(subparsers: Any) -> None:
    """Register ``bench`` on an ``argparse`` subparsers object."""
    parser = subparsers.add_parser(
        "bench",
        help="run a load against a server, vllm bench serve style",
        description=(
            "Load an OpenAI-compatible server and report vllm bench serve's numbers "
            "(same flags where they overlap, same summary, same result keys)."
        ),
    )
    add_bench_arguments(parser)


def base_url(args: argparse.Namespace) -> str:
    """``--base-url``, else ``http://--host:--port``."""
    if args.base_url:
        return str(args.base_url).rstrip("/")
    host = f"[{args.host}]" if ":" in args.host else args.host
    return f"http://{host}:{args.port}"


def build_spec(args: argparse.Namespace) -> LoadSpec:
    """The :class:`LoadSpec` of the parsed options (:class:`BenchError` when invalid)."""
    values: dict[str, Any] = {}
    for field in workload_fields():
        value = getattr(args, field.name)
        alias = getattr(args, f"{field.name}_alias", None)
        values[field.name] = alias if alias is not None else value
    endpoint = next(f for f in workload_fields() if f.name == "endpoint")
    values["endpoint"] = endpoint.from_cli(str(args.endpoint))
    if args.backend == "openai-chat" and args.endpoint == endpoint.cli_text("completions"):
        values["endpoint"] = "chat"
    # bench serve forces ignore_eos for random datasets (serve.py:2133-2139).
    values["ignore_eos"] = bool(args.ignore_eos) or args.dataset_name in GENERATED
    try:
        spec = LoadSpec(**values)
        if args.dataset_name == "shared-prefix":
            spec = shared_prefix_spec(spec, args.cache_hit_pct)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        flag = next((f.bench_flag for f in workload_fields() if f.name == where), where)
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        raise BenchError(f"{flag}: {message}" if flag else message) from None
    except ValueError as exc:
        raise BenchError(str(exc)) from None
    return spec
