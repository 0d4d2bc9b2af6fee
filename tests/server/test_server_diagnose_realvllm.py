"""The new diagnosis kinds against what the real CPU vLLM 0.32.0 prints (``vtc setup-cpu-vllm``).

Each case runs ``vllm serve`` with a broken setup that fails before any engine starts (a
missing model path, a tensor-parallel size the heads do not divide by, a config that needs
custom code, a tokenizer that cannot be built), feeds its combined output to
``vtc diagnose -`` and checks the kind and the fix. The four start together (15-40 s each
on two busy cores, mostly vLLM's imports);
run under the shared lock: ``flock /tmp/vtc-realvllm.lock pytest -m realvllm <this file>``.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tui.server.provision import find_provisioned

pytestmark = pytest.mark.realvllm

PROVISIONED = find_provisioned()
needs_vllm = pytest.mark.skipif(
    PROVISIONED is None, reason="real vLLM not provisioned (vtc setup-cpu-vllm)"
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """A ``vllm serve`` that must fail by itself, started at once; its output read later.

    The four starts are launched together (each mostly imports vLLM on one core, then
    fails before any engine starts), so the module waits for the slowest, not the sum."""

    def __init__(self, log: Path, model: str, *args: str) -> None:
        assert PROVISIONED is not None
        env = dict(
            os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", VLLM_CPU_KVCACHE_SPACE="1"
        )
        argv = [str(PROVISIONED.vllm), "serve", model, "--host", "127.0.0.1"]
        self.log = log
        # To a file, not a pipe: a start must never wait on a reader that comes later.
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [*argv, "--port", str(_free_port()), *args],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def output(self) -> str:
        """Its output (stdout and stderr) once it exited; it must have failed."""
        self.proc.wait(timeout=600)
        assert self.proc.returncode != 0, "expected the start to fail"
        return self.log.read_bytes().decode("utf-8", errors="replace")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()


def _custom_code_model(tmp_path: Path) -> Path:
    model = _model_copy(tmp_path, "custom-code")
    config = json.loads((model / "config.json").read_text())
    config |= {
        "model_type": "vtc_custom",
        "architectures": ["VtcForCausalLM"],
        "auto_map": {"AutoConfig": "configuration_vtc.VtcConfig"},
    }
    (model / "config.json").write_text(json.dumps(config))
    (model / "configuration_vtc.py").write_text(
        "from transformers import LlamaConfig\n\n\nclass VtcConfig(LlamaConfig):\n"
        "    model_type = 'vtc_custom'\n"
    )
    return model


def _bad_tokenizer_model(tmp_path: Path) -> Path:
    # No tokenizer.json and a class transformers does not have (with tokenizer.json present,
    # vLLM 0.32 ignores the class and starts).
    model = _model_copy(tmp_path, "bad-tokenizer")
    (model / "tokenizer.json").unlink()
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["tokenizer_class"] = "NoSuchTokenizerFast"
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    return model


@pytest.fixture(scope="module")
def serves(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Serve]]:
    """The four failing starts, launched together; each test reads its own."""
    if PROVISIONED is None:
        pytest.skip("real vLLM not provisioned (vtc setup-cpu-vllm)")
    tmp = tmp_path_factory.mktemp("diagnose-realvllm")
    started: dict[str, Serve] = {}
    try:
        started["missing"] = Serve(tmp / "missing.log", "/nonexistent/vtc-no-such-model")
        started["tp"] = Serve(tmp / "tp.log", str(PROVISIONED.model), "--tensor-parallel-size", "3")
        started["custom"] = Serve(tmp / "custom.log", str(_custom_code_model(tmp)))
        started["tokenizer"] = Serve(tmp / "tokenizer.log", str(_bad_tokenizer_model(tmp)))
        yield started
    finally:
        for serve in started.values():
            serve.close()


def _diagnose(log: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "tui.cli", "diagnose", "-", "--json"],
        input=log.encode(),
        capture_output=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    doc: dict[str, object] = json.loads(done.stdout)
    return doc


def _model_copy(tmp_path: Path, name: str) -> Path:
    assert PROVISIONED is not None
    copy = tmp_path / name
    shutil.copytree(PROVISIONED.model, copy)
    return copy


@needs_vllm
def test_a_missing_model_path(serves: dict[str, Serve]) -> None:
    doc = _diagnose(serves["missing"].output())
    assert doc["kind"] == "model_not_found"
    assert doc["facts"]["model"] == "/nonexistent/vtc-no-such-model"  # type: ignore[index]


@needs_vllm
def test_tensor_parallel_size_the_heads_do_not_divide_by(serves: dict[str, Serve]) -> None:
    doc = _diagnose(serves["tp"].output())
    assert doc["kind"] == "tp_not_divisible"
    assert doc["fixes"][0]["set"] == {"tensor_parallel_size": 2}  # type: ignore[index]


@needs_vllm
def test_a_config_with_custom_code(serves: dict[str, Serve]) -> None:
    doc = _diagnose(serves["custom"].output())
    assert doc["kind"] == "trust_remote_code_required"
    assert doc["fixes"][0]["set"] == {"extra_args": ["--trust-remote-code"]}  # type: ignore[index]


@needs_vllm
def test_a_tokenizer_that_cannot_be_built(serves: dict[str, Serve]) -> None:
    doc = _diagnose(serves["tokenizer"].output())
    assert doc["kind"] == "tokenizer_error"
    assert doc["fixes"] == []  # --trust-remote-code would not help: nothing to load
