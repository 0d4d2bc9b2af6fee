"""DCGM-exporter style gauges -> GpuSample, from a page in dcgm-exporter's text format."""

from __future__ import annotations

import httpx
import pytest

from tui.domain.telemetry import SourceStatus
from tui.telemetry.dcgm import DcgmGpuSource, gpu_from_families
from tui.telemetry.scrape import parse_families

MIB = 1024 * 1024

# Two GPUs as dcgm-exporter (3.x, default counters) prints them. GPU 1 has no temperature
# series. Values: FB in MiB, util in %, temperature in C, power in W.
L0 = (
    'gpu="0",UUID="GPU-5b3c1f7e-2a4d-4c1e-9f55-0e0d8a6b7c01",pci_bus_id="00000000:18:00.0",'
    'device="nvidia0",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",'
    'DCGM_FI_DRIVER_VERSION="550.54.15"'
)
L1 = (
    'gpu="1",UUID="GPU-0c9d2e11-7b6a-4f3e-8d21-55aa0f3e9d42",pci_bus_id="00000000:2A:00.0",'
    'device="nvidia1",modelName="NVIDIA H100 80GB HBM3",Hostname="node-a",'
    'DCGM_FI_DRIVER_VERSION="550.54.15"'
)
GPU0 = {"used": 73012, "free": 8067, "util": 97, "temp": 64, "power": 655.321}
GPU1 = {"used": 0, "free": 81079, "util": 0, "power": 71.5}

PAGE = f"""\
# HELP DCGM_FI_DEV_SM_CLOCK SM frequency (in MHz).
# TYPE DCGM_FI_DEV_SM_CLOCK gauge
DCGM_FI_DEV_SM_CLOCK{{{L0}}} 1980
DCGM_FI_DEV_SM_CLOCK{{{L1}}} 345
# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).
# TYPE DCGM_FI_DEV_GPU_TEMP gauge
DCGM_FI_DEV_GPU_TEMP{{{L0}}} {GPU0["temp"]}
# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{{{L0}}} {GPU0["power"]}
DCGM_FI_DEV_POWER_USAGE{{{L1}}} {GPU1["power"]}
# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{{{L0}}} {GPU0["util"]}
DCGM_FI_DEV_GPU_UTIL{{{L1}}} {GPU1["util"]}
# HELP DCGM_FI_DEV_FB_FREE Framebuffer memory free (in MiB).
# TYPE DCGM_FI_DEV_FB_FREE gauge
DCGM_FI_DEV_FB_FREE{{{L0}}} {GPU0["free"]}
DCGM_FI_DEV_FB_FREE{{{L1}}} {GPU1["free"]}
# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).
# TYPE DCGM_FI_DEV_FB_USED gauge
DCGM_FI_DEV_FB_USED{{{L0}}} {GPU0["used"]}
DCGM_FI_DEV_FB_USED{{{L1}}} {GPU1["used"]}
"""


def test_page_to_devices() -> None:
    sample = gpu_from_families(parse_families(PAGE), t=3.0, source="dcgm:test")
    assert sample is not None
    assert sample.status is SourceStatus.OK
    assert (sample.t, sample.source) == (3.0, "dcgm:test")
    gpu0, gpu1 = sample.devices
    assert (gpu0.index, gpu1.index) == (0, 1)
    assert gpu0.name == "NVIDIA H100 80GB HBM3"
    assert gpu0.memory_used == GPU0["used"] * MIB
    assert gpu0.memory_total == (GPU0["used"] + GPU0["free"]) * MIB
    assert gpu0.utilization == GPU0["util"]
    assert gpu0.temperature_c == GPU0["temp"]
    assert gpu0.power_w == pytest.approx(GPU0["power"])
    assert gpu1.memory_used == 0
    assert gpu1.memory_total == GPU1["free"] * MIB
    assert gpu1.temperature_c is None  # series absent: N/A, not 0
    assert gpu1.power_w == pytest.approx(GPU1["power"])
    assert gpu0.processes == () and gpu1.processes == ()


def test_reserved_memory_counts_in_total() -> None:
    page = PAGE + f"DCGM_FI_DEV_FB_RESERVED{{{L0}}} 512\n"
    sample = gpu_from_families(parse_families(page), t=0.0, source="dcgm:test")
    assert sample is not None
    assert sample.devices[0].memory_total == (GPU0["used"] + GPU0["free"] + 512) * MIB
    assert sample.devices[0].memory_used == GPU0["used"] * MIB


def test_page_without_dcgm_gauges_is_none() -> None:
    page = '# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine="0"} 1.0\n'
    assert gpu_from_families(parse_families(page), t=0.0, source="dcgm:test") is None


def test_same_gpu_repeated_per_pod_is_not_double_counted() -> None:
    pod_a = L0 + ',pod="a",namespace="ml",container="vllm"'
    pod_b = L0 + ',pod="b",namespace="ml",container="vllm"'
    page = f"DCGM_FI_DEV_FB_USED{{{pod_a}}} 100\nDCGM_FI_DEV_FB_USED{{{pod_b}}} 100\n"
    sample = gpu_from_families(parse_families(page), t=0.0, source="dcgm:test")
    assert sample is not None
    (gpu,) = sample.devices
    assert gpu.memory_used == 100 * MIB


async def test_source_over_http() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text=PAGE))
    async with httpx.AsyncClient(transport=transport) as client:
        source = DcgmGpuSource("http://dcgm.test:9400/metrics", client, clock=lambda: 9.0)
        sample = await source.sample()
    assert sample.status is SourceStatus.OK
    assert sample.source == "dcgm:http://dcgm.test:9400/metrics"
    assert len(sample.devices) == 2 and sample.t == 9.0


async def test_source_page_without_gauges_is_unavailable() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(200, text="up 1\n"))
    async with httpx.AsyncClient(transport=transport) as client:
        sample = await DcgmGpuSource("http://dcgm.test/metrics", client).sample()
    assert sample.status is SourceStatus.UNAVAILABLE
    assert "DCGM_FI_DEV" in sample.message


async def test_source_http_error_is_down() -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(503, text="busy"))
    async with httpx.AsyncClient(transport=transport) as client:
        sample = await DcgmGpuSource("http://dcgm.test/metrics", client).sample()
    assert sample.status is SourceStatus.DOWN
    assert "HTTP 503" in sample.message


def test_bad_url_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="absolute http"):
        DcgmGpuSource("localhost:9400/metrics")
