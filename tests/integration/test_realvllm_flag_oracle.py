"""vLLM 0.32 itself as the oracle: every flag set vtc accepts, vLLM's own checks accept.

A few hundred command lines from the seeded generator (``tests/fakes/flag_sets.py``, the
same the 10,000-set property test runs) go through vtc's one validation path with what the
console knows on this machine (the CPU device, the tiny model's ``config.json``), and all of
them through vLLM's own parser and config validation in the provisioned venv
(``vllm_oracle_script.py``). Each set vtc accepts must be accepted by vLLM twice: as the
operator typed it, and as vtc renders it for the launch.

``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` is set for the oracle: a ``max_model_len`` above the
model's own length is a pre-flight warning in vtc, not a refusal (vLLM accepts it with that
variable, and rope scaling moves the limit), so the oracle is asked the same question.

Also: the vLLM 0.32 parser table vtc ships still matches the provisioned vLLM's parser.

The same runs against vLLM 0.33's parser where its parser env is built (0.33's wheel on the
CPU build, ``python -m tui.server.parser_env 0.33.0``; CI's "vLLM 0.33 parser" stage):
the oracle and the table diff, with vtc checking against its 0.33 table.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.flag_sets import random_argv
from fakes.real_vllm import parser_env_python

from tui.domain.flags.problems import FlagError
from tui.domain.flags.validation import ModelFacts, ValidationContext, flags_from_argv
from tui.domain.flags.vllm_tables import (
    REGENERATE,
    help_module_file,
    is_newer_than_tables,
    module_file,
    newest_series,
    table_for,
)
from tui.domain.preflight import DeviceMemory
from tui.server.introspect import introspect_vllm, vllm_dist_version
from tui.server.provision import ProvisionedVllm

pytestmark = pytest.mark.realvllm

SETS = 400
SEED = 32
SCRIPT = Path(__file__).with_name("vllm_oracle_script.py")
ORACLE_TIMEOUT_S = 900.0  # import ~10 s, each set 0.01-1 s; a busy machine doubles it


class Oracle:
    """The provisioned vLLM, asked one command line at a time."""

    version = "0.32.0"

    def __init__(self, python: Path) -> None:
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1",
            "VLLM_LOGGING_LEVEL": "ERROR",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        self._proc = subprocess.Popen(
            [str(python), str(SCRIPT)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=env,
        )
        assert self._read() == {"ready": True}

    def _read(self) -> dict[str, object]:
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        assert line, f"the oracle exited ({self._proc.poll()})"
        data: dict[str, object] = json.loads(line)
        return data

    def ask(self, argv: list[str]) -> dict[str, object]:
        assert self._proc.stdin is not None
        self._proc.stdin.write(json.dumps(argv) + "\n")
        self._proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        if self._proc.stdin is not None:
            self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()


VERSIONS = ("0.32.0", "0.33.0")


def _python(real_vllm: ProvisionedVllm, version: str) -> Path:
    """The provisioned CPU build for 0.32; a newer version's parser env (else skip)."""
    return real_vllm.python if version == "0.32.0" else parser_env_python(version)


@pytest.fixture(scope="module", params=VERSIONS)
def oracle(request: pytest.FixtureRequest, real_vllm: ProvisionedVllm) -> Iterator[Oracle]:
    vllm = Oracle(_python(real_vllm, request.param))
    vllm.version = request.param
    yield vllm
    vllm.close()


def _context(model: Path, version: str) -> ValidationContext:
    config = json.loads((model / "config.json").read_text())
    return ValidationContext(
        device=DeviceMemory(total_bytes=16 * 2**30, kind="cpu", name="cpu"),
        model=ModelFacts(int(config["num_attention_heads"]), None),
        installed=version,  # the shipped table of that version
    )


def test_every_set_vtc_accepts_vllm_accepts(real_vllm: ProvisionedVllm, oracle: Oracle) -> None:
    model = str(real_vllm.model)
    context = _context(real_vllm.model, oracle.version)
    rng = random.Random(SEED)
    accepted = refused = vllm_accepted = vllm_refused_of_refused = 0
    disagreements: list[str] = []
    for _ in range(SETS):
        argv = random_argv(rng, model)
        answer = oracle.ask(argv)
        vllm_ok = bool(answer["ok"])
        vllm_accepted += vllm_ok
        try:
            flags = flags_from_argv(argv, context)
        except FlagError:
            refused += 1
            vllm_refused_of_refused += not vllm_ok
            continue
        accepted += 1
        rendered = flags.to_argv()
        launched = oracle.ask(rendered)
        for what, got, line in (("typed", answer, argv), ("launched", launched, rendered)):
            if not got["ok"]:
                disagreements.append(f"{what} {line}: vLLM says {got.get('error')}")
    print(
        f"oracle vLLM {oracle.version}: {SETS} sets; vtc accepted {accepted}, refused "
        f"{refused}; vLLM accepted {vllm_accepted} of the typed sets and refused "
        f"{vllm_refused_of_refused} of those vtc refused; vLLM refused {len(disagreements)} "
        "of the sets vtc accepted"
    )
    assert not disagreements, "\n".join(disagreements[:10])
    assert accepted >= SETS // 10  # the generator reaches sets vtc accepts


@pytest.mark.parametrize("version", VERSIONS)
def test_the_shipped_parser_table_is_the_provisioned_vllms(
    real_vllm: ProvisionedVllm, version: str, tmp_path: Path
) -> None:
    """``tools/gen_vllm_serve_options.py`` run against that vLLM writes exactly the module
    vtc ships for it (options, actions, types, arities, choices, config ranges, literals)
    and its help texts, which the flag search by meaning reads (issue 39): both from one
    introspection, written under ``tmp_path`` at the paths the checkout has them."""
    python = _python(real_vllm, version)
    root = Path(__file__).resolve().parents[2]
    subprocess.run(
        [
            sys.executable,
            str(root / "tools" / "gen_vllm_serve_options.py"),
            str(python),
            "--write-to",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
        cwd=root,
    )
    for module in (module_file(version), help_module_file(version)):
        assert (tmp_path / module).read_text() == (root / module).read_text(), module
    assert introspect_vllm(python).version.split("+")[0] == table_for(version).version


@pytest.mark.parametrize("version", VERSIONS)
def test_the_installed_vllm_is_not_newer_than_every_table(
    real_vllm: ProvisionedVllm, version: str
) -> None:
    """A vLLM newer than every table vtc ships fails here, with the command that writes its
    table (then add its record to ``tui/domain/vllm_release.py``)."""
    installed = vllm_dist_version(_python(real_vllm, version))
    assert not is_newer_than_tables(installed), (
        f"vLLM {installed} is newer than every table vtc ships (newest: {newest_series()}); "
        f"regenerate one: {REGENERATE}"
    )
