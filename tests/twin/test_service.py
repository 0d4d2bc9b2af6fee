"""The console's twin: profiles read once per model, one prediction per distinct edit."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest
from fakes.profiles import cpu_profile

from tui.domain.workload import LoadSpec
from tui.store.profiles import save_profile
from tui.twin import service


async def test_the_same_edit_is_predicted_once_and_profiles_are_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = cpu_profile(tmp_path / "tiny")
    data = tmp_path / "data"
    save_profile(profile, data)
    reads: list[str] = []
    made: list[int] = []
    real_load, real_predict = service.load_profile, service.predict

    def counted_load(name, data_dir=None):  # type: ignore[no-untyped-def]
        reads.append(name)
        return real_load(name, data_dir)

    def counted_predict(*args, **kw):  # type: ignore[no-untyped-def]
        made.append(1)
        return real_predict(*args, **kw)

    monkeypatch.setattr(service, "load_profile", counted_load)
    monkeypatch.setattr(service, "predict", counted_predict)
    twin = service.TwinService(data, None, httpx.AsyncClient)
    load = LoadSpec(input_len=32, output_len=16, num_prompts=4, max_concurrency=2)
    # Keystrokes that land on the same command line, some at once, some after.
    first = await asyncio.gather(*(twin.predict(profile.flags, load) for _ in range(5)))
    again = await twin.predict(profile.flags, load)
    assert all(p is not None and p == again for p in first)
    assert len(made) == 1 and len(reads) == 1
    edited = profile.flags.model_copy(update={"max_num_seqs": 4})
    other = await twin.predict(edited, load)
    assert other is not None and other.starts
    assert len(made) == 2 and len(reads) == 1  # a new edit, the same profile
    assert await twin.predict(profile.flags.model_copy(update={"model": "nope"}), load) is None
