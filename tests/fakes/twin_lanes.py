"""A simulated "real server" for twin-first tests: the what-if lane on a hidden profile.

The server runs :data:`HIDDEN` step costs on the tiny model (``fakes.profiles.cpu_profile``);
a twin that starts cold never sees them and must learn them from the trials it measures.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.fakes.profiles import cpu_profile
from tui.domain.profile import StepCoefficients
from tui.domain.sweep import SweepSpec
from tui.tune.whatif_lane import WhatIfLane

HIDDEN = StepCoefficients(b0=0.003, b1=0.00004, b2=0.00025, b3=0.0003, a0=0.002, a1=0.00001)
KV_BYTES = 64 * 2**20


class HiddenServer:
    """The hidden profile, written once; :meth:`lane` is a fresh "real" lane on it."""

    def __init__(self, folder: Path) -> None:
        profile = cpu_profile(folder / "model", HIDDEN, name="hidden")
        self.model = profile.flags.model
        self.path = folder / "hidden.json"
        self.path.write_text(profile.model_dump_json(), encoding="utf-8")

    def lane(self, name: str = "real") -> WhatIfLane:
        """A lane whose servers run the hidden step costs."""
        return WhatIfLane(["--sim-profile", str(self.path)], name=name)

    def spec(self, strategy: str = "twin", **changes: Any) -> SweepSpec:
        """A 15-combination CPU-like space whose p99 ITL limit the largest batches miss."""
        data: dict[str, Any] = {
            "name": "twin-test",
            "strategy": strategy,
            "objective": "output_throughput",
            "base": {
                "model": self.model,
                "flags": {
                    "max_model_len": 1024,
                    "kv_cache_memory_bytes": KV_BYTES,
                    "enforce_eager": True,
                },
            },
            "parameters": {
                "max_num_seqs": [2, 4, 8, 16, 32],
                "max_num_batched_tokens": [256, 512, 1024],
            },
            "workload": {"input_len": 128, "output_len": 32, "num_prompts": 32},
            "slo": {"p99_itl_ms": 20},
            "search": {"rate_search": "none"},
        }
        data.update(changes)
        return SweepSpec.model_validate(data)
