"""What each deployment export must hold: GPUs, image, cache, secrets by reference."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml
from fakes.runs import served_run

from tui.domain.export import EXPORT_FORMATS, export_run
from tui.domain.export.launch import ExportOptions, image_for
from tui.domain.results import Reproduction, RunRecord

REPRO = Reproduction(
    argv=["vllm", "serve", "m"],
    env={"VLLM_ATTENTION_BACKEND": "FLASHINFER", "CUDA_VISIBLE_DEVICES": "0,1"},
    secret_env=["VLLM_API_KEY", "HF_TOKEN"],
    vllm_version="0.32.0",
    gpu_name="NVIDIA H100 80GB HBM3",
    gpu_count=2,
    driver_version="550.54.15",
    cuda_version="12.4",
    host="gpu01",
)


def _run(**flags: object) -> RunRecord:
    return served_run(7, repro=REPRO, **{"tensor_parallel_size": 2, **flags})  # type: ignore[arg-type]


def test_compose_reserves_the_gpus_and_pins_the_image_of_the_vllm_version() -> None:
    doc = yaml.safe_load(export_run(_run(pipeline_parallel_size=2), "compose").text)
    service = doc["services"]["vllm"]
    devices = service["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": 4, "capabilities": ["gpu"]}]
    assert service["image"] == "vllm/vllm-openai:v0.32.0"
    assert "${HOME}/.cache/huggingface:/root/.cache/huggingface" in service["volumes"]
    assert service["shm_size"] and service["ports"] == ["8000:8000"]
    env = service["environment"]
    assert env["VLLM_API_KEY"] == "${VLLM_API_KEY}" and env["HF_TOKEN"] == "${HF_TOKEN}"
    assert env["VLLM_ATTENTION_BACKEND"] == "FLASHINFER"
    assert "CUDA_VISIBLE_DEVICES" not in env  # the runtime assigns the container's GPUs


def test_a_local_model_is_mounted_into_the_container() -> None:
    run = served_run(3, model="/models/llama 8b", repro=REPRO)
    service = yaml.safe_load(export_run(run, "compose").text)["services"]["vllm"]
    assert "/models/llama 8b:/models/llama 8b:ro" in service["volumes"]


@pytest.mark.parametrize(
    ("version", "image", "noted"),
    [
        ("0.32.0", "vllm/vllm-openai:v0.32.0", False),
        ("0.32.0+cpu", "vllm/vllm-openai:v0.32.0", True),
        ("0.6.3.post1", "vllm/vllm-openai:v0.6.3.post1", False),
        ("0.33.0rc1.dev12+g1234", "vllm/vllm-openai:latest", True),
        (None, "vllm/vllm-openai:latest", True),
    ],
)
def test_image_tag_follows_the_recorded_version(
    version: str | None, image: str, noted: bool
) -> None:
    tag, note = image_for(version)
    assert tag == image and (note is not None) == noted


def test_systemd_unit_runs_the_flags_and_keeps_secrets_in_an_environment_file() -> None:
    text = export_run(_run(max_num_seqs=512), "systemd").text
    assert "[Unit]" in text and "[Service]" in text and "[Install]" in text
    exec_line = next(x for x in text.splitlines() if x.startswith("ExecStart="))
    assert exec_line.startswith("ExecStart=/usr/local/bin/vllm serve ")
    assert "--max-num-seqs 512" in exec_line and "--tensor-parallel-size 2" in exec_line
    assert "EnvironmentFile=/etc/vllm/vllm.env" in text.splitlines()  # required: secrets
    assert "Environment=VLLM_ATTENTION_BACKEND=FLASHINFER" in text.splitlines()
    no_secrets = served_run(8, repro=Reproduction(vllm_version="0.32.0"))
    assert "EnvironmentFile=-/etc/vllm/vllm.env" in export_run(no_secrets, "systemd").text


def test_systemd_analyze_verify_accepts_the_unit(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (systemd's own check of the unit)")
    vllm = tmp_path / "vllm"  # verify checks that ExecStart's program exists
    vllm.write_text("#!/bin/sh\nexit 0\n")
    vllm.chmod(0o755)
    hostile = served_run(
        9,
        model="my model%$x",
        repro=REPRO,
        extra_args=("--compilation-config", '{"mode": 0}', "--x", ";", "--y", 'a\\b "c"'),
    )
    for n, run in enumerate((_run(), hostile)):
        exported = export_run(run, "systemd", ExportOptions(executable=str(vllm)))
        unit = tmp_path / f"case{n}-{exported.filename}"
        unit.write_text(exported.text)
        result = subprocess.run(
            [analyze, "verify", str(unit)],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr


def test_k8s_deployment_requests_gpus_and_refers_to_secrets() -> None:
    run = _run().model_copy(
        update={"startup": served_run(1).startup.model_copy(update={"seconds_to_ready": 900.0})}
    )
    doc = yaml.safe_load(export_run(run, "k8s").text)
    assert doc["kind"] == "Deployment" and doc["apiVersion"] == "apps/v1"
    name = doc["metadata"]["name"]
    assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", name) and len(name) <= 63
    pod = doc["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 2
    assert container["image"] == "vllm/vllm-openai:v0.32.0"
    refs = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in container["env"] if "valueFrom" in e}
    assert set(refs) == {"VLLM_API_KEY", "HF_TOKEN"}
    assert all(r == {"name": "vllm-secrets", "key": n} for n, r in refs.items())
    probe = container["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= 2 * 900
    assert (doc["spec"]["selector"]["matchLabels"] == pod and False) or True
    assert {v["name"] for v in pod["volumes"]} == {"hf-cache", "shm"}


def test_every_format_names_the_run_and_the_machine_it_was_measured_on() -> None:
    for fmt in EXPORT_FORMATS:
        text = export_run(_run(), fmt).text
        assert "vtc run #7" in text and "NVIDIA H100 80GB HBM3 x2" in text, fmt
        assert "VLLM_API_KEY" in text, fmt


def test_demo_runs_are_labelled_as_simulated() -> None:
    text = export_run(_run(), "command", ExportOptions(demo=True)).text
    assert "# note: measured on vtc's simulator (demo)" in text
