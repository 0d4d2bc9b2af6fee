"""A run as a Docker Compose service on vLLM's image, with the GPUs reserved.

Follows vLLM's Docker deployment guide: the image's entrypoint is ``vllm serve`` (so
``command`` starts with the model), the Hub cache is mounted at
``/root/.cache/huggingface``, and ``/dev/shm`` is enlarged because PyTorch shares tensors
between vLLM's processes through it. GPUs are requested the Compose way
(``deploy.resources.reservations.devices``). Compose interpolates ``$``: secrets are
written as ``${NAME}`` references on purpose, every other ``$`` is doubled.
"""

from __future__ import annotations

from typing import Any

from tui.domain.export.launch import (
    ExportOptions,
    LaunchSpec,
    comment_block,
    container_env,
    dump_yaml,
    header_lines,
)

HF_CACHE_IN_CONTAINER = "/root/.cache/huggingface"


def _literal(text: str) -> str:
    return text.replace("$", "$$")


def compose_document(spec: LaunchSpec, options: ExportOptions) -> dict[str, Any]:
    """The compose file as a mapping (one service, ``vllm``)."""
    volumes = [f"{options.hf_cache}:{HF_CACHE_IN_CONTAINER}"]
    if spec.flags.model.startswith("/"):  # a local model: the container must see it
        volumes.append(f"{_literal(spec.flags.model)}:{_literal(spec.flags.model)}:ro")
    environment: dict[str, str] = {name: _literal(v) for name, v in container_env(spec).items()}
    environment.update({name: "${" + name + "}" for name in spec.secret_env})
    service: dict[str, Any] = {
        "image": spec.image,
        "command": [_literal(arg) for arg in spec.serve_args],
        "ports": [f"{spec.port}:{spec.port}"],
        "volumes": volumes,
        "shm_size": options.shm_size,
        "deploy": {
            "resources": {
                "reservations": {
                    "devices": [{"driver": "nvidia", "count": spec.gpus, "capabilities": ["gpu"]}]
                }
            }
        },
    }
    if environment:
        service["environment"] = environment
    return {"services": {"vllm": service}}


def compose_text(spec: LaunchSpec, options: ExportOptions) -> str:
    """Comment lines about the run, then ``compose.yaml``."""
    lines = header_lines(spec, container=True)
    lines.append("start it with: docker compose up -d (NVIDIA Container Toolkit required)")
    if spec.secret_env:
        lines.append("secrets come from the shell or a .env file next to this one")
    body = dump_yaml(compose_document(spec, options))
    return comment_block(lines) + body
