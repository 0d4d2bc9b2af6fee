"""The exported ``--config`` YAML, read by vLLM 0.32's own serve parser (real CPU build).

One probe process imports vLLM once and parses ``vllm serve --config FILE`` for every
generated flag set (``FlexibleArgumentParser`` with ``make_arg_parser``, reference 1.1-1.2:
the same expansion ``vllm serve`` runs), answering the parsed namespace as JSON.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.flag_strategies import serve_flags
from fakes.real_vllm import provisioned_vllm
from hypothesis import HealthCheck, given, settings
from property_profiles import examples

from tui.domain.export import export_run
from tui.domain.flags.serve import ServeFlags, flag_specs
from tui.domain.results import RunRecord

PROBE = """\
import json, sys
from vllm.utils.argparse_utils import FlexibleArgumentParser
from vllm.entrypoints.launchers.cli_args import make_arg_parser
parser = make_arg_parser(FlexibleArgumentParser())
print("READY", flush=True)
for line in sys.stdin:
    try:
        ns = vars(parser.parse_args(["--config", line.strip()]))
        cc = ns.get("compilation_config")
        mode = getattr(cc, "mode", None)
        ns["compilation_config_mode"] = None if mode is None else int(mode)
        print(json.dumps({"ok": True, "args": ns}, default=str), flush=True)
    except BaseException as exc:  # argparse exits on a bad argument: report it instead
        print(json.dumps({"ok": False, "error": repr(exc)}), flush=True)
"""


class Probe:
    """vLLM's serve parser in the provisioned venv, fed one config path per line."""

    def __init__(self, python: Path) -> None:
        env = {**os.environ, "VLLM_LOGGING_LEVEL": "ERROR"}
        self.proc = subprocess.Popen(
            [str(python), "-c", PROBE],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        first = self.proc.stdout.readline()
        assert first.strip() == "READY", f"the probe did not start: {first!r}"

    def parse(self, config: Path) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{config}\n")
        self.proc.stdin.flush()
        answer = json.loads(self.proc.stdout.readline())
        assert answer["ok"], answer.get("error")
        return answer["args"]

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def probe() -> Iterator[Probe]:
    found = provisioned_vllm()
    running = Probe(found.python)
    yield running
    running.close()


def _expected(flags: ServeFlags) -> dict[str, Any]:
    out: dict[str, Any] = {"model": flags.model}
    for spec in flag_specs():
        value = getattr(flags, spec.name)
        if value is not None:
            out[spec.name] = [value] if spec.name == "served_model_name" else value
    return out


@pytest.mark.realvllm
@settings(
    max_examples=examples(40),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(flags=serve_flags())
def test_vllm_reads_the_exported_yaml_as_the_same_flags(
    probe: Probe, tmp_path: Path, flags: ServeFlags
) -> None:
    run = RunRecord(id=1, label="#1", flags=flags)
    config = tmp_path / "serve.yaml"
    config.write_text(export_run(run, "yaml").text, encoding="utf-8")
    theirs = probe.parse(config)
    assert {k: theirs[k] for k in _expected(flags)} == _expected(flags)
    extra = flags.extra_args
    if "--compilation-config" in extra:
        assert theirs["compilation_config_mode"] == 0
    if "--enable-log-requests" in extra:
        assert theirs["enable_log_requests"] is True
    if "--max-loras" in extra:
        assert theirs["max_loras"] == 4
