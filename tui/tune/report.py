"""A sweep's results as ``vtc sweep`` writes them: JSON, auto_tune.sh's result.txt, lines."""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from tui.domain.sweep.outcome import SweepStatus, TrialOutcome, TrialState
from tui.domain.sweep.slo import OBJECTIVE_UNITS
from tui.domain.sweep.spec import SweepSpec


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    return "inf" if math.isinf(x) else round(x, 4)


def trial_json(trial: TrialOutcome) -> dict[str, Any]:
    """One trial: its flags, state, metrics and verdict (plus every measurement)."""
    m = trial.measurement
    return {
        "index": trial.index,
        "note": trial.note,
        "state": trial.state.value,
        "params": trial.params,
        "flags": flags_json(trial),
        "run_id": trial.run_id,
        "lane": trial.lane,
        "source": trial.source,  # "predicted" (the twin's, never started) or "measured"
        "predicted_by": trial.predicted_by,
        "slo_met": trial.slo_met,
        "verdict": trial.verdict_text,
        "objective": _num(trial.objective),
        "metrics": {k: _num(v) for k, v in trial.metrics.items()},
        "prefix_hit_pct": _num(m.prefix_hit_pct) if m is not None else None,
        "request_rate": m.rate if m is not None else None,
        "diagnosis": trial.diagnosis or None,
        "diagnosis_kind": trial.diagnosis_kind,
        "seconds": round(trial.seconds, 2),
        "started_at": _iso(trial.started_at),
        "ended_at": _iso(trial.ended_at),
        **placement_json(trial),
        "measurements": [
            {
                "phase": x.phase,
                "request_rate": x.rate,
                "num_prompts": x.load.num_prompts,
                "seed": x.load.seed,
                "objective": _num(x.objective),
                "slo_met": x.verdict.met,
                "violations": list(x.verdict.violations),
                "prefix_hit_pct": _num(x.prefix_hit_pct),
            }
            for x in trial.measurements
        ],
    }


def _iso(moment: datetime | None) -> str | None:
    """ISO 8601 with the offset (``2026-11-28T01:02:03.456789+00:00``)."""
    return moment.isoformat() if moment is not None else None


def placement_json(trial: TrialOutcome) -> dict[str, Any]:
    """Where the trial ran: ``node`` (this machine's host name when no cluster placed it),
    ``gpu_ids``, ``gpu_model``, ``vllm_version``, ``driver`` (``None``: not recorded)."""
    where = trial.placement
    if where is None:
        return {
            "node": None,
            "gpu_ids": None,
            "gpu_model": None,
            "vllm_version": None,
            "driver": None,
        }
    return {
        "node": where.node,
        "gpu_ids": list(where.gpu_ids),
        "gpu_model": where.gpu_model,
        "vllm_version": where.vllm_version,
        "driver": where.driver,
    }


def flags_json(trial: TrialOutcome) -> dict[str, Any] | None:
    """The trial's flags: the model, every flag set, the extra arguments, the command."""
    flags = trial.flags
    if flags is None:
        return None
    return {"model": flags.model, **flags.to_toml_dict(), "command": flags.command_line()}


def sweep_json(status: SweepStatus, spec: SweepSpec) -> dict[str, Any]:
    """``vtc sweep --json``: ``best`` (flags, metrics, slo_met), ``trials``, ``starts``..."""
    best = status.best
    return {
        "sweep_id": status.sweep_id,
        "name": status.name,
        "strategy": status.strategy,
        "objective": status.objective,
        "state": status.state.value,
        "message": status.message,
        "slo": status.slo or "none",
        "starts": status.starts,
        "failed_starts": status.failed_starts,
        "pruned": sum(1 for t in status.trials if t.state is TrialState.PRUNED),
        "resumed": status.resumed,
        "elapsed_s": round(status.elapsed_s, 1),
        "best": None
        if best is None
        else {
            "index": best.index,
            "note": best.note,
            "params": best.params,
            "flags": flags_json(best),
            "metrics": {k: _num(v) for k, v in best.metrics.items()},
            "objective": _num(best.objective),
            "slo_met": best.slo_met,
            "run_id": best.run_id,
            "request_rate": best.measurement.rate if best.measurement else None,
        },
        "notes": list(status.notes),
        "spec": spec.model_dump(mode="json"),
        "trials": [trial_json(t) for t in status.trials],
    }


def _metric(trial: TrialOutcome, key: str) -> str:
    value = trial.metrics.get(key)
    return "0" if value is None else f"{value:.2f}"


def result_txt(status: SweepStatus, spec: SweepSpec, version: str, profile_dir: str = "") -> str:
    """auto_tune.sh's ``result.txt``: ``hash:``, a line per pair, the best line.

    ``hash:`` holds what identifies the vLLM that ran (the script writes its checkout's git
    sha; vtc writes the version it launched). ``profile saved in:`` stays empty: vLLM 0.32's
    ``bench serve --profile`` needs ``--profiler-config`` on the server, so vtc does not
    profile.
    """
    limit = spec.slo.limits.get("p99_e2el_ms", 1e11)
    lines = [f"hash:{version}"]
    best: TrialOutcome | None = None
    for trial in status.trials:
        if not trial.note.startswith("pair "):
            continue
        s, t = trial.params.get("max_num_seqs"), trial.params.get("max_num_batched_tokens")
        head = f"max_num_seqs: {s}, max_num_batched_tokens: {t}"
        m = trial.measurement
        if trial.slo_met and m is not None:
            lines.append(
                f"{head}, request_rate: {m.rate}, e2el: {_metric(trial, 'p99_e2el_ms')}, "
                f"throughput: {_metric(trial, 'request_throughput')}, "
                f"goodput: {_metric(trial, 'request_goodput')}"
            )
            if best is None or (
                trial.metrics.get("request_throughput", 0)
                > best.metrics.get("request_throughput", 0)
            ):
                best = trial
        else:
            lines.append(f"{head} does not meet latency requirement {limit:g}")
    if best is None:
        lines.append(
            "best_max_num_seqs: 0, best_num_batched_tokens: 0, best_throughput: 0, "
            f"profile saved in: {profile_dir}"
        )
    else:
        lines.append(
            f"best_max_num_seqs: {best.params.get('max_num_seqs')}, best_num_batched_tokens: "
            f"{best.params.get('max_num_batched_tokens')}, best_throughput: "
            f"{_metric(best, 'request_throughput')}, profile saved in: {profile_dir}"
        )
    return "\n".join(lines) + "\n"


def trial_line(trial: TrialOutcome, objective: str) -> str:
    """``#3 gpu0 max_num_seqs=256 ...: 812.4 tok/s, met`` (one finished trial; a cluster
    sweep's names the node and GPUs: ``#3 node-a gpu 0,1 ...``)."""
    unit = OBJECTIVE_UNITS.get(objective, "")
    value = f"{trial.objective:.1f} {unit}, " if trial.objective is not None else ""
    run = f" run #{trial.run_id}" if trial.run_id is not None else ""
    where = trial.placement.describe() if trial.placement is not None else trial.lane
    lane = f" {where}" if where else ""
    return f"trial {trial.index}{lane}{run} {trial.note}: {value}{trial.verdict_text}"


def closing_line(status: SweepStatus) -> str:
    """``done: every trial the strategy planned has run (12 trials, 9 starts)``.

    The state is said once: a message that begins with it (``stopped: ...``) is not
    prefixed again.
    """
    word = status.state.value
    message = status.message.strip()
    if message.lower().startswith(word + ":"):
        message = message[len(word) + 1 :].strip()
    measured, predicted = _counts(status)
    counts = f"{measured} trials, {status.starts} starts" + (
        f", {predicted} predicted" if predicted else ""
    )
    return f"{word}: {message} ({counts})" if message and message != word else f"{word} ({counts})"


def _counts(status: SweepStatus) -> tuple[int, int]:
    """Trials done that a server measured, and the twin's predictions among ``done``: a
    twin-first sweep ranks hundreds of candidates on the twin, which are no trials run."""
    predicted = sum(1 for t in status.trials if t.predicted)
    return max(0, status.done - predicted), predicted


def progress_line(status: SweepStatus) -> str:
    """``search 5/13 trials · 4 starts (1 failed) · best 812.4 tok/s (trial 3) · ETA 2m10s``."""
    planned = f"/{status.planned}" if status.planned else ""
    measured, predicted = _counts(status)
    parts = [
        f"{status.strategy} {measured}{planned} trials",
        f"{status.starts} starts ({status.failed_starts} failed)",
    ]
    if predicted:
        parts.append(f"{predicted} predicted on the twin")
    best = status.best
    if best is not None and best.objective is not None:
        unit = OBJECTIVE_UNITS.get(status.objective, "")
        parts.append(f"best {best.objective:.1f} {unit} (trial {best.index})")
    else:
        parts.append("no configuration met the SLOs yet")
    if status.eta_s is not None and status.live:
        parts.append(f"ETA {duration(status.eta_s)}")
    return " · ".join(parts)


def duration(seconds: float) -> str:
    """``2m10s``, ``45s``, ``1h02m``."""
    s = int(max(0, seconds))
    if s >= 3600:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s}s"
