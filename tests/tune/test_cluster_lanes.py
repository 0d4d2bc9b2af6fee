"""A cluster sweep's rules that need no cluster: lost trials, placement, where each ran.

The trial loop marks a trial whose node or worker died ``lost`` (naming the node), runs it
once more and never journals the lost attempt; a second loss is not retried again. The
count of trials a cluster runs at once, and the refusal when no node holds a trial's GPUs
(the whole sweep before anything starts, or one trial alone, never started nor journaled),
come from its alive nodes' GPUs alone. ``--json`` and the progress lines say when and where
each trial ran.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from fakes.sweep_lanes import ScriptedLane

from tui.app.cli import main
from tui.domain.board.table import sweep_text
from tui.domain.flags.serve import ServeFlags
from tui.domain.results import RunRecord, SweepTag
from tui.domain.sweep import SweepSpec, SweepState, SweepStatus, TrialState
from tui.domain.sweep.outcome import Placement
from tui.tune.gpus import Unplaceable, refusal, trials_at_once
from tui.tune.journal import Journal, journal_path
from tui.tune.lanes import LaneRefused, StartResult
from tui.tune.report import sweep_json, trial_line
from tui.tune.run import SweepRun

SPEC_TOML = """\
name = "no-ray"
strategy = "grid"
[base]
model = "m"
[parameters]
max_num_seqs = [8, 16]
[workload]
num_prompts = 4
"""


def grid_spec(**changes: object) -> SweepSpec:
    data: dict[str, object] = {
        "name": "cluster",
        "strategy": "grid",
        "objective": "request_throughput",
        "base": {"model": "m"},
        "parameters": {"max_num_seqs": [64, 128, 256]},
        "workload": {"input_len": 32, "output_len": 16, "num_prompts": 40},
        "slo": {"p99_e2el_ms": 30000},
    }
    data.update(changes)
    return SweepSpec.model_validate(data)


async def test_a_trial_lost_with_its_node_is_marked_lost_and_run_once_more(
    tmp_path: Path,
) -> None:
    spec = grid_spec()
    path = journal_path(tmp_path, spec.sweep_id())
    lane = ScriptedLane(name="node-b", lose_on_benches=(2,))  # the 2nd trial's load dies
    status = await SweepRun(spec, [lane], journal=Journal(path, spec)).run()
    assert status.state is SweepState.DONE
    states = [t.state for t in status.trials]
    assert states == [
        TrialState.MEASURED,
        TrialState.LOST,
        TrialState.MEASURED,
        TrialState.MEASURED,
    ]
    lost, retried = status.trials[1], status.trials[2]
    assert lost.note == retried.note and lost.key == retried.key
    assert "node-b" in lost.diagnosis and lost.verdict_text.startswith("lost: ")
    assert status.starts == 4  # the lost attempt was a start too
    assert lane.released == 3  # once per plan, lost attempt and retry together
    assert any("trial 2 lost on node-b" in note for note in status.notes)
    journaled = Journal(path, spec).finished
    assert len(journaled) == 3  # the lost attempt is not journaled: a resume runs it again
    assert all(t.state is TrialState.MEASURED for t in journaled.values())


async def test_a_trial_lost_twice_is_not_retried_a_third_time() -> None:
    lane = ScriptedLane(name="node-c", lose_on_benches=(1, 2))
    status = await SweepRun(grid_spec(), [lane]).run()
    assert [t.state for t in status.trials][:2] == [TrialState.LOST, TrialState.LOST]
    assert status.trials[0].note == status.trials[1].note
    assert [t.state for t in status.trials][2:] == [TrialState.MEASURED] * 2
    assert status.state is SweepState.DONE  # the sweep goes on: no failure streak either


@dataclass
class LiveCount:
    """A cluster's count of lanes: ``now`` trials at once, ``held`` lanes holding one."""

    now: int
    held: int

    def width(self) -> int:
        return self.now

    def working(self) -> int:
        return self.held


@dataclass
class Concurrency:
    """How many trials were between their start and their release at each start."""

    busy: int = 0
    at_starts: list[int] = field(default_factory=list)


@dataclass
class CountedLane(ScriptedLane):
    seen: Concurrency = field(default_factory=Concurrency)

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        self.seen.busy += 1
        self.seen.at_starts.append(self.seen.busy)
        await asyncio.sleep(0.01)  # the others of its batch start meanwhile
        return await super().start(flags, tag)

    async def release(self) -> None:
        self.seen.busy -= 1
        await super().release()


async def test_batches_follow_the_clusters_count_and_the_eta_the_lanes_holding_a_trial() -> None:
    spec = grid_spec(parameters={"max_num_seqs": [8, 16, 32, 64, 128, 256]})
    seen = Concurrency()
    lanes = [CountedLane(name=f"slot{i}", seen=seen) for i in range(8)]
    count = LiveCount(now=1, held=2)
    statuses: list[SweepStatus] = []

    def emit(status: SweepStatus) -> None:
        statuses.append(status)
        if status.trials:  # a node joined once the first trial ran: 3 at once from now on
            count.now = 3

    status = await SweepRun(spec, lanes, emit=emit, count=count).run()
    assert status.state is SweepState.DONE and len(status.trials) == 6
    assert seen.at_starts == [1, 1, 2, 3, 1, 2]  # batches of 1, then 3 (the new count), then 2
    timed = [s for s in statuses if s.eta_s is not None and s.planned is not None]
    assert timed
    for one in timed:  # the mean trial time x the trials left, over the 2 lanes holding one
        ran = [t.seconds for t in one.trials if t.started and t.seconds > 0]
        left = one.planned - len([t for t in one.trials if t.state is not TrialState.PRUNED])
        assert one.eta_s == pytest.approx(sum(ran) / len(ran) * max(0, left) / 2)


def test_trials_at_once_divides_each_nodes_gpus_by_the_smallest_trial() -> None:
    spec = grid_spec(base={"model": "m", "flags": {"tensor_parallel_size": 2}})
    assert trials_at_once({"a": 4.0, "b": 3.0, "c": 0.0}, spec) == 3  # 2 + 1, b's third idle
    assert trials_at_once({"a": 4.0}, grid_spec()) == 4
    mixed = grid_spec(parameters={"tensor_parallel_size": [1, 8]})
    assert trials_at_once({"a": 4.0}, mixed) == 4  # tp=1 trials run; tp=8 is refused alone


def test_a_sweep_no_node_can_hold_is_refused_in_one_line_naming_the_need() -> None:
    spec = grid_spec(
        base={"model": "m", "flags": {"pipeline_parallel_size": 2}},
        parameters={"tensor_parallel_size": [4, 8]},
    )
    with pytest.raises(Unplaceable) as caught:
        trials_at_once({"a": 4.0, "b": 4.0}, spec)
    line = caught.value.one_line()
    assert "\n" not in line
    assert "needs 8 GPU(s) on one node" in line and "the largest alive node has 4" in line
    with pytest.raises(Unplaceable, match="no node is alive"):
        trials_at_once({}, grid_spec())
    assert refusal(4, {"a": 4.0}) is None and refusal(5, {"a": 4.0, "b": 4.0}) is not None


@dataclass
class RefusingLane(ScriptedLane):
    """A cluster lane that refuses trials needing more than ``largest`` GPUs."""

    largest: int = 1

    async def start(self, flags: ServeFlags, tag: SweepTag) -> StartResult:
        need = flags.tensor_parallel_size or 1
        why = refusal(need, {"node": float(self.largest)})
        if why is not None:
            raise LaneRefused(why)
        return await super().start(flags, tag)


async def test_a_refused_trial_is_never_started_nor_journaled_and_the_rest_run(
    tmp_path: Path,
) -> None:
    spec = grid_spec(parameters={"tensor_parallel_size": [1, 4, 2]})
    path = journal_path(tmp_path, spec.sweep_id())
    lane = RefusingLane(name="node-a", largest=2)
    status = await SweepRun(spec, [lane], journal=Journal(path, spec)).run()
    assert status.state is SweepState.DONE
    by_tp = {t.params["tensor_parallel_size"]: t for t in status.trials}
    assert by_tp[1].state is by_tp[2].state is TrialState.MEASURED
    refused = by_tp[4]
    assert refused.state is TrialState.PRUNED and not refused.started
    assert "needs 4 GPU(s) on one node" in refused.diagnosis
    assert status.starts == 2 and len(lane.starts) == 2
    assert len(Journal(path, spec).finished) == 2  # a resume asks the cluster again


async def test_json_and_lines_say_when_and_where_each_trial_ran() -> None:
    status = await SweepRun(grid_spec(), [ScriptedLane(name="gpu0")]).run()
    where = Placement(
        node="box-2:ab12cd",
        gpu_ids=["2", "3"],
        gpu_model="H100 (simulated)",
        vllm_version="0.32.0",
        driver="simulated",
    )
    trial = status.trials[0].model_copy(update={"placement": where})
    report = sweep_json(status, grid_spec())
    first = report["trials"][0]
    started = datetime.fromisoformat(first["started_at"])
    ended = datetime.fromisoformat(first["ended_at"])
    assert started.tzinfo is not None and started <= ended
    assert first["node"] is None and first["gpu_ids"] is None  # this machine, no cluster
    placed = sweep_json(
        type(status)(**{**status.__dict__, "trials": (trial, *status.trials[1:])}), grid_spec()
    )["trials"][0]
    assert placed["node"] == "box-2:ab12cd" and placed["gpu_ids"] == ["2", "3"]
    assert placed["gpu_model"] == "H100 (simulated)" and placed["driver"] == "simulated"
    assert "box-2:ab12cd gpu 2,3" in trial_line(trial, "request_throughput")


def test_the_boards_sweep_column_names_the_node_and_gpus_of_a_cluster_trial() -> None:
    run = RunRecord(flags=ServeFlags(model="m"))
    placed = run.model_copy(
        update={"sweep": SweepTag(sweep_id="s-1", trial=3, where="box-2:ab12cd gpu 2,3")}
    )
    assert sweep_text(placed) == "s-1 t3 @ box-2:ab12cd gpu 2,3"
    here = run.model_copy(update={"sweep": SweepTag(sweep_id="s-1", trial=3)})
    assert sweep_text(here) == "s-1 t3"


def test_sweep_on_ray_without_the_extra_says_what_to_install_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for name in ("ray", "tui.app.ray_sweep", "tui.modes.ray_cluster", "tui.tune.ray_lane"):
        monkeypatch.setitem(sys.modules, name, None)  # as if the extra were not installed
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path / "data"))
    spec = tmp_path / "spec.toml"
    spec.write_text(SPEC_TOML, encoding="utf-8")
    code = main(["sweep", str(spec), "--demo", "--ray", "--ray-gpus", "2"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "Ray is not installed" in err[0] and "pip install 'vtc[ray]'" in err[0]
