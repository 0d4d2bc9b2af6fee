"""vLLM's defaults are declared once and everything else reads them from there."""

from __future__ import annotations

import pytest

from tui.domain import budget
from tui.domain.flags import vllm_defaults as D
from tui.domain.flags.serve import ServeFlags, flag_spec, flag_specs
from tui.domain.flags.vllm_tables import table_for
from tui.domain.vllm_release import RELEASES


def test_every_static_default_is_the_declared_flags_default() -> None:
    for spec in flag_specs():
        assert spec.vllm_default == D.SERVE_DEFAULTS.get(spec.name), spec.name
    assert ServeFlags(model="m").effective("gpu_memory_utilization") == D.GPU_MEMORY_UTILIZATION
    assert ServeFlags(model="m").effective_port == D.PORT


def test_the_shipped_parser_table_agrees_with_the_declared_defaults() -> None:
    cli = table_for("0.32.0").cli
    for name, value in D.SERVE_DEFAULTS.items():
        flag = cli.flag(name)
        assert flag is not None, name
        assert flag.default == value, name
    mode = cli.flag("performance_mode")
    assert mode is not None and mode.default == D.PERFORMANCE_MODE
    assert mode.choices == D.PERFORMANCE_MODES


@pytest.mark.parametrize(
    ("total_gib", "name", "kind", "ws", "expected"),
    [
        (200, "H200", "gpu", 1, (16384, 1024)),
        (80, "H100", "gpu", 1, (8192, 1024)),
        (80, "NVIDIA A100-SXM4-80GB", "gpu", 1, (2048, 256)),
        (10, "RTX 3080", "gpu", 1, (2048, 256)),
        (64, "cpu", "cpu", 2, (4096, 256)),
    ],
)
def test_batch_defaults_follow_reference_1_4(
    total_gib: int, name: str, kind: D.DeviceKind, ws: int, expected: tuple[int, int]
) -> None:
    got = D.batch_defaults(total_gib * 2**30, name, kind, ws)
    assert (got.max_num_batched_tokens, got.max_num_seqs) == expected
    assert budget.batch_defaults is D.batch_defaults  # the budget re-exports, never copies


def test_block_size_defaults() -> None:
    assert (D.default_block_size("gpu"), D.default_block_size("cpu")) == (16, 128)
    assert budget.GPU_DEFAULT_BLOCK_SIZE == D.GPU_BLOCK_SIZE
    assert flag_spec("block_size").vllm_default is None  # derived: depends on the device


def test_each_release_records_defaults_agree_with_its_own_parser_table() -> None:
    for record in RELEASES.values():
        cli = table_for(record.version).cli
        for name, value in record.defaults.by_flag().items():
            flag = cli.flag(name)
            assert flag is not None and flag.default == value, (record.version, name)
        mode = cli.flag("performance_mode")
        assert mode is not None and mode.default == record.defaults.performance_mode
