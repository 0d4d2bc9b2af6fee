"""A run as a Kubernetes Deployment of vLLM's image (``nvidia.com/gpu`` requested).

After vLLM's Kubernetes guide: the Hub cache on a PersistentVolumeClaim, ``/dev/shm`` as a
memory-backed ``emptyDir``, secrets from a Secret by ``secretKeyRef``, ``/health`` as the
probe. The startup probe allows twice the start time this run measured (at least five
minutes), so a slow first start is not killed. Kubernetes expands ``$(VAR)`` in args and
env values: every ``$`` is written ``$$``.
"""

from __future__ import annotations

import math
import re
from typing import Any

from tui.domain.export.launch import (
    ExportOptions,
    LaunchSpec,
    comment_block,
    container_env,
    dump_yaml,
    header_lines,
)

_PROBE_PERIOD_S = 10


def _literal(text: str) -> str:
    """``text`` as Kubernetes passes it: the kubelet expands ``$(VAR)`` in args and env
    values and reads ``$$`` as one ``$``, so every ``$`` is doubled (``$$(VAR)`` stays
    literal, and a ``$$(`` already there is not turned back into ``$(``)."""
    return text.replace("$", "$$")


def deployment_name(spec: LaunchSpec) -> str:
    """A DNS-1123 name from the model and the run: ``vllm-llama-3-1-8b-instruct-r7``."""
    model = spec.flags.model.rstrip("/").rsplit("/", 1)[-1].lower()
    run = re.sub(r"[^a-z0-9]+", "", spec.label.lower()) or "run"
    slug = re.sub(r"[^a-z0-9]+", "-", model).strip("-")
    name = f"vllm-{slug}"[: 63 - len(run) - 2].rstrip("-")
    return f"{name}-r{run}"


def _env(spec: LaunchSpec, options: ExportOptions) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": k, "value": _literal(v)} for k, v in container_env(spec).items()
    ]
    env += [
        {"name": name, "valueFrom": {"secretKeyRef": {"name": options.k8s_secret, "key": name}}}
        for name in spec.secret_env
    ]
    return env


def _startup_failures(spec: LaunchSpec) -> int:
    measured = spec.run.startup.seconds_to_ready or 0.0
    return max(30, math.ceil(2 * measured / _PROBE_PERIOD_S))


def deployment_document(spec: LaunchSpec, options: ExportOptions) -> dict[str, Any]:
    """The Deployment as a mapping."""
    name = deployment_name(spec)
    labels = {"app.kubernetes.io/name": "vllm", "app.kubernetes.io/instance": name}
    probe = {"httpGet": {"path": "/health", "port": spec.port}, "periodSeconds": _PROBE_PERIOD_S}
    container: dict[str, Any] = {
        "name": "vllm",
        "image": spec.image,
        "args": [_literal(arg) for arg in spec.serve_args],
        "ports": [{"name": "http", "containerPort": spec.port}],
        "resources": {"limits": {"nvidia.com/gpu": spec.gpus}},
        "volumeMounts": [
            {"name": "hf-cache", "mountPath": "/root/.cache/huggingface"},
            {"name": "shm", "mountPath": "/dev/shm"},
        ],
        "startupProbe": {**probe, "failureThreshold": _startup_failures(spec)},
        "readinessProbe": probe,
        "livenessProbe": {**probe, "failureThreshold": 3},
    }
    env = _env(spec, options)
    if env:
        container["env"] = env
    volumes = [
        {"name": "hf-cache", "persistentVolumeClaim": {"claimName": options.k8s_cache_claim}},
        {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "16Gi"}},
    ]
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [container], "volumes": volumes},
            },
        },
    }


def k8s_text(spec: LaunchSpec, options: ExportOptions) -> str:
    """Comment lines about the run, then the Deployment manifest."""
    lines = header_lines(spec, container=True)
    lines.append(f"needs PersistentVolumeClaim {options.k8s_cache_claim} and, for secrets,")
    lines.append(
        f"Secret {options.k8s_secret} (kubectl create secret generic {options.k8s_secret} "
        + " ".join(f"--from-literal={n}=..." for n in spec.secret_env)
        + ")"
        if spec.secret_env
        else "no Secret (this run had no secrets)"
    )
    body = dump_yaml(deployment_document(spec, options))
    return comment_block(lines) + body
