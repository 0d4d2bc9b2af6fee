"""Assembling a started simulator: tokenizer, scheduler, cost model, metrics, GPU gauges.

Everything here is built from the resolved configuration and memory plan of
:func:`tui.sim.startup.check_command`; nothing reads the clock or the network.
"""

from __future__ import annotations

import time
from pathlib import Path

from tui.sim.argv import SimCommand
from tui.sim.catalog import MIB
from tui.sim.costmodel import CostModel
from tui.sim.engine import AsyncEngine
from tui.sim.logs import VllmLog
from tui.sim.memory import MemoryPlan, ResolvedConfig
from tui.sim.metrics import GpuGaugeSource, SimMetrics
from tui.sim.model_files import model_folder
from tui.sim.scheduler import Scheduler, SchedulerConfig
from tui.sim.tokenizer import Tokenizer
from tui.sim.tokenizer_pick import load_tokenizer
from tui.sim.twin import TwinCost


def build_tokenizer(
    command: SimCommand, cfg: ResolvedConfig, folder: Path | None
) -> tuple[Tokenizer, str]:
    """The tokenizer vLLM would load (``--tokenizer``, else the model's), and a log note."""
    override = command.frontend.values.get("tokenizer")
    where = model_folder(str(override)) if override else folder
    template = command.frontend.values.get("chat_template")
    entry = cfg.entry
    return load_tokenizer(
        where,
        entry.shape.vocab_size,
        entry.adds_bos,
        entry.chat_template,
        str(template) if template else None,
    )


def cache_config_labels(cfg: ResolvedConfig, plan: MemoryPlan) -> dict[str, str]:
    """``vllm:cache_config_info``'s values for this server (the rest keep vLLM's defaults)."""
    cap = plan.capacity
    assert cap is not None
    return {
        "block_size": str(cfg.block_size),
        "effective_attention_block_size": str(cfg.block_size),
        "cache_dtype": cfg.kv_cache_dtype,
        "enable_prefix_caching": str(cfg.enable_prefix_caching),
        "gpu_memory_utilization": str(cfg.gpu_memory_utilization),
        "kv_cache_memory_bytes": str(cfg.kv_cache_memory_bytes),
        "num_gpu_blocks": str(cap.num_blocks),
        "num_gpu_blocks_override": str(cfg.num_gpu_blocks_override),
        "kv_cache_size_tokens": str(cap.kv_cache_size_tokens),
        "kv_cache_max_concurrency": str(cap.max_concurrency),
        "user_specified_block_size": str(cfg.flags.block_size is not None),
    }


def build_engine(
    command: SimCommand,
    cfg: ResolvedConfig,
    plan: MemoryPlan,
    tokenizer: Tokenizer,
    log: VllmLog,
) -> AsyncEngine:
    """The engine (scheduler, cost model, metrics) of a server that started."""
    cap = plan.capacity
    assert cap is not None
    front, sim = command.frontend, command.sim
    lora = front.lora
    served = cfg.flags.served_model_name or command.parsed.model or ""
    metrics = SimMetrics(
        served,
        plan.max_model_len,
        cache_config_labels(cfg, plan),
        front.log_stats,
        lora=lora.max_loras if lora.enabled else None,
    )
    offload = front.values.get("kv_offloading_size")
    native = front.values.get("kv_offloading_backend", "native") in (None, "native")
    if front.log_stats and native and isinstance(offload, int | float) and offload > 0:
        # the OffloadingConnector's families (config/vllm.py:1105-1132; offload_tables)
        metrics.publish_kv_offload(
            sim.vllm_version, int(offload * 2**30), cap.bytes_per_block, cap.block_size
        )
    profile = sim.profile
    metrics.set_sim_info(
        f"twin:{profile.name}" if profile else sim.gpu.key,
        profile.identity.device if profile else sim.gpu.name,
        sim.num_gpus,
        sim.speed,
        "fixed" if sim.fixed is not None else "model",
        "exact" if tokenizer.exact else "approximate",
    )
    scheduler = Scheduler(
        SchedulerConfig.of(
            cfg,
            num_gpu_blocks=cap.num_blocks,
            max_model_len=plan.max_model_len,
            max_loras=lora.max_loras if lora.enabled else 0,
        )
    )
    cost = CostModel.from_plan(plan, lora.max_lora_rank if lora.enabled else None)
    twin = TwinCost.of(cost, profile) if profile is not None else None
    engine = AsyncEngine(
        scheduler,
        twin or cost,
        metrics,
        tokenizer,
        log,
        speed=sim.speed,
        seed=sim.seed,
        mfu_metrics=front.mfu_metrics,
        admit_delay=twin.admit_delay if twin is not None else None,
    )
    add_gpu_gauges(metrics, engine, cfg, plan)
    return engine


def add_gpu_gauges(
    metrics: SimMetrics, engine: AsyncEngine, cfg: ResolvedConfig, plan: MemoryPlan
) -> None:
    """dcgm-exporter's gauges for every simulated GPU, read live from the engine."""
    gpu = cfg.hardware.gpu
    total_mib = gpu.total_bytes / MIB

    def gauges(index: int) -> GpuGaugeSource:
        busy = index < cfg.world_size
        ours = plan.process_bytes if busy else 0
        used_mib = float(round((cfg.hardware.used_by_others + ours) / MIB))

        def util() -> float:
            if not busy:
                return 0.0
            return round(100.0 * engine.busy.utilization(time.monotonic()), 1)

        return GpuGaugeSource(
            index=index,
            uuid=gpu.uuid(index),
            model_name=gpu.name,
            pci_bus_id=f"00000000:{index + 1:02X}:00.0",
            fb_used_mib=lambda: used_mib,
            fb_free_mib=lambda: float(round(total_mib - used_mib)),
            util_percent=util,
            mem_copy_util_percent=lambda: round(util() * 0.8, 1),
            temperature_c=lambda: round(34.0 + 0.45 * util(), 1),
            power_w=lambda: round(gpu.idle_w + (gpu.tdp_w - gpu.idle_w) * util() / 100.0, 1),
        )

    for index in range(cfg.hardware.num_gpus):
        metrics.add_gpu(gauges(index))
