"""The sections of a run's full view as styled text: summary, numbers, startup, reproduction.

Everything is read from the run's record and the board's row (comparisons, verdicts,
spreads, flag changes against the baseline): nothing is recomputed here.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping, Sequence
from pathlib import PurePath
from typing import Any

from textual.content import Content

from tui.domain.board.noise import Verdict
from tui.domain.board.table import Column, ColumnKind, Row, probe_text
from tui.domain.diagnosis import Fix
from tui.domain.export.command import serve_line
from tui.domain.export.launch import launch_spec
from tui.domain.flags.run_env import ENV_FIELD, env_text
from tui.domain.flags.serve import format_value
from tui.domain.results import RunRecord, RunStatus
from tui.domain.workload import LoadSpec
from tui.ui.board_cells import (
    DIFFERS,
    VERDICT_STYLES,
    judgement_lines,
    shown_delta,
    status_style,
)
from tui.ui.format import gib, percent, seconds, tokens

VERDICT_WORDS: dict[Verdict, str] = {
    Verdict.GAIN: "gain",
    Verdict.LOSS: "loss",
    Verdict.NOISE: "noise (inside the noise band)",
    Verdict.OTHER_LOAD: "other load: not compared",
}
UNREPEATED = " (not repeated yet: n runs it again)"
"""After a verdict that rests on single runs (issue 39: "one run each: n repeats" read as a
placeholder): ``n`` repeats the run, and the spread of repeats is the measured noise."""


def section(title: str) -> Content:
    """A section heading."""
    return Content.styled(title, "bold $text-primary")


def workload_text(spec: LoadSpec) -> str:
    """``64 prompts · 128 -> 128 tokens · concurrency 16 · rate inf · completions``."""
    conc = "unbounded" if spec.max_concurrency is None else str(spec.max_concurrency)
    rate = "inf" if math.isinf(spec.request_rate) else f"{spec.request_rate:g}/s"
    return (
        f"{spec.num_prompts} prompts · {spec.input_len} -> {spec.output_len} tokens · "
        f"concurrency {conc} · rate {rate} · {spec.endpoint}"
    )


def summary_lines(row: Row, baseline: str | None) -> list[Content]:
    """State and why it ended, the sweep, the baseline, repeats, the workload."""
    run = row.run
    state: list[str | tuple[str, str]] = [(row.state.upper(), status_style(run.status))]
    if run.served and run.status is not RunStatus.READY:
        state.append(" · it served")
    if run.ended_because:
        state.append(f" · {run.ended_because}")
    if run.exit_code is not None and run.status is not RunStatus.READY:
        state.append(f" · exit {run.exit_code}")
    lines = [Content.assemble(*state)]
    lines.append(Content(f"{run.created_at:%Y-%m-%d %H:%M} UTC · model {run.flags.model}"))
    if run.sweep is not None:
        note = f" · {run.sweep.note}" if run.sweep.note else ""
        probe = probe_text(run)
        note += f" · {probe}" if probe else ""
        lines.append(
            Content.styled(f"sweep {run.sweep.sweep_id}, trial {run.sweep.trial}{note}", "$accent")
        )
    if row.is_baseline:
        lines.append(Content.styled("This run is the baseline.", "bold $accent"))
    elif baseline is not None:
        lines.append(Content(f"Compared with the baseline {baseline}."))
        if row.judgement is not None:
            lines += judgement_lines(row.judgement)
    if row.repeats > 1:
        lines.append(
            Content(
                f"{row.repeats} runs share these flags and this workload "
                "(a group: its spread is the noise)."
            )
        )
    if run.workload is not None:
        lines.append(Content(f"workload: {workload_text(run.workload)}"))
    return lines


def flag_lines(row: Row) -> list[Content]:
    """Every flag the run set; those that differ from the baseline marked (and what it had)."""
    run = row.run
    changed = {c.name: c for c in row.flag_changes}
    lines = []
    for name, value in run.flags.explicit().items():
        change = changed.pop(name, None)
        if change is None:
            lines.append(Content(f"  {name} {format_value(value)}"))
        else:
            lines.append(
                Content.styled(
                    f"  {name} {format_value(value)}  (baseline {format_value(change.old)})",
                    DIFFERS,
                )
            )
    for change in changed.values():  # set by the baseline only: this run has the default
        lines.append(
            Content.styled(
                f"  {change.name} {format_value(change.new)}  "
                f"(baseline {format_value(change.old)})",
                DIFFERS,
            )
        )
    if run.flags.extra_args:
        lines.append(Content(f"  extra: {shlex.join(run.flags.extra_args)}"))
    if run.flags.env and ENV_FIELD not in changed:  # a differing one reads "env ... (baseline"
        lines.append(Content(f"  environment: {env_text(run.flags.env)}"))
    if len(lines) == 0:
        lines.append(Content.styled("  vLLM defaults", "$text-muted"))
    return lines


def failure_lines(run: RunRecord) -> list[Content]:
    """The diagnosis: kind, cause, the evidence line, every fix with its settings."""
    diagnosis = run.diagnosis
    if diagnosis is None:
        return (
            [Content.styled("failed (no diagnosis)", "$error")]
            if run.status is RunStatus.FAILED
            else []
        )
    lines = [
        Content.assemble(("cause ", "bold"), (diagnosis.kind, "$text-muted")),
        Content.styled(diagnosis.summary, "$error"),
    ]
    if diagnosis.evidence:
        lines.append(Content.styled(f"log: {diagnosis.evidence}", "$text-muted"))
    for i, fix in enumerate(diagnosis.fixes, 1):
        settings = ", ".join(
            [f"{k}={format_value(v)}" for k, v in fix.set.items()]
            + [f"env {k}={v}" for k, v in fix.env.items()]
        )
        lines.append(
            Content.assemble(
                (f"fix {i}: ", "bold"),
                fix.title,
                (f"  [{settings}]" if settings else "", "$text-muted"),
            )
        )
    return lines


def metric_lines(row: Row, columns: tuple[Column, ...]) -> list[Content]:
    """Each metric: value, change against the baseline, verdict, the group's spread."""
    lines = []
    for column, cell in zip(columns, row.cells, strict=True):
        if column.kind is not ColumnKind.METRIC or column.metric is None:
            continue
        parts: list[str | tuple[str, str]] = [f"  {column.title:<14}{cell.text:>12}"]
        comparison = cell.comparison
        if comparison is not None:
            style = VERDICT_STYLES.get(comparison.verdict, "")
            delta = shown_delta(comparison)
            if delta:
                parts.append((f"  {delta}", style))
            word = VERDICT_WORDS.get(comparison.verdict) if delta else None
            if word:
                sure = comparison.confirmed or comparison.verdict is Verdict.OTHER_LOAD
                parts.append((f"  {word}{'' if sure else UNREPEATED}", style))
            elif comparison.percent is not None and comparison.verdict is not Verdict.BASELINE:
                parts.append(("  no change", "$text-muted"))
        if cell.spread is not None:
            spread = cell.spread
            parts.append(
                (
                    f"  spread {column.metric.format(spread.low)}–"
                    f"{column.metric.format(spread.high)} over {spread.n}",
                    "$text-muted",
                )
            )
        lines.append(Content.assemble(*parts))
    lfl = row.like_for_like
    if lfl is not None and not lfl.ok:
        lines.append(Content.styled("  Not like for like with the baseline:", "$warning"))
        lines += [Content.styled(f"    {reason}", "$warning") for reason in lfl.reasons]
    bench = row.run.bench
    if bench is not None:
        lines.append(
            Content.styled(
                f"  {bench.completed} done, {bench.failed} failed in {seconds(bench.duration)}"
                + (" · cancelled: partial numbers" if bench.cancelled else "")
                + (
                    f" · {bench.aborted_by_server} aborted by the server"
                    if bench.aborted_by_server
                    else ""
                ),
                "$text-muted",
            )
        )
    return lines


def peak_lines(run: RunRecord) -> list[Content]:
    """The highest readings while the load ran."""
    p = run.peaks
    values = [
        ("KV cache", percent(p.kv_cache_usage) if p.kv_cache_usage is not None else None),
        ("waiting", f"{p.num_waiting:.0f}" if p.num_waiting is not None else None),
        (
            "out tok/s",
            f"{p.generation_tokens_per_s:.1f}" if p.generation_tokens_per_s is not None else None,
        ),
        ("GPU util", f"{p.gpu_util:.0f}%" if p.gpu_util is not None else None),
        (
            "GPU mem",
            f"{gib(p.gpu_mem_used_bytes)} GiB" if p.gpu_mem_used_bytes is not None else None,
        ),
        (
            "server RSS",
            f"{gib(p.server_rss_bytes)} GiB" if p.server_rss_bytes is not None else None,
        ),
    ]
    shown = [f"{name} {value}" for name, value in values if value is not None]
    return [Content("  peaks: " + " · ".join(shown))] if shown else []


def startup_lines(run: RunRecord) -> list[Content]:
    """Each startup stage (when it began, how long it took), ready time, KV capacity."""
    startup = run.startup
    lines = []
    for stage in startup.stages:
        took = seconds(stage.seconds) if stage.seconds is not None else "…"
        detail = f"  {stage.detail}" if stage.detail else ""
        began = f"+{stage.started_at:.1f}s"
        lines.append(Content(f"  {began:>8}  {took:>7}  {stage.name}{detail}"))
    if not startup.stages:
        lines.append(Content.styled("  no stages recorded", "$text-muted"))
    facts = []
    if startup.seconds_to_ready is not None:
        facts.append(f"ready after {seconds(startup.seconds_to_ready)}")
    if startup.kv_cache_tokens is not None:
        facts.append(f"KV cache {tokens(startup.kv_cache_tokens)} tokens")
    est, logged = startup.kv_estimate_tokens, startup.kv_cache_tokens
    if est is not None:
        off = f", {(est - logged) / logged * 100:+.1f}%" if logged else ""
        facts.append(f"pre-flight estimate {tokens(est)}{off}")
    if startup.max_concurrency is not None:
        facts.append(f"max concurrency {startup.max_concurrency:.2f}x")
    if facts:
        lines.append(Content("  " + " · ".join(facts)))
    return lines


def _is_vllm_serve(argv: Sequence[str]) -> bool:
    return len(argv) > 1 and PurePath(argv[0]).name == "vllm" and argv[1] == "serve"


def repro_lines(run: RunRecord) -> list[Content]:
    """What it takes to run it again on a real box: its ``vllm serve`` command line, the
    machine (secrets by name only); a run the simulator served also says what ran here."""
    lines = [Content(f"  {serve_line(launch_spec(run))}")]
    repro = run.repro
    if repro is None:
        lines.append(
            Content.styled("  machine not recorded (a run from before vtc kept it)", "$text-muted")
        )
        return lines
    if repro.argv and not _is_vllm_serve(repro.argv):
        ran = f"  ran here as (not vLLM): {shlex.join(repro.argv)}"
        lines.append(Content.styled(ran, "$text-muted"))
    machine = [
        f"vLLM {repro.vllm_version}" if repro.vllm_version else "",
        f"{repro.gpu_name} ×{repro.gpu_count}"
        if repro.gpu_name and repro.gpu_count
        else repro.gpu_name or "",
        f"driver {repro.driver_version}" if repro.driver_version else "",
        f"CUDA {repro.cuda_version}" if repro.cuda_version else "",
        f"host {repro.host}" if repro.host else "",
    ]
    shown = [m for m in machine if m]
    if shown:
        lines.append(Content.styled("  " + " · ".join(shown), "$text-muted"))
    env = [f"{k}={v}" for k, v in repro.env.items()] + [f"{k}=(secret)" for k in repro.secret_env]
    if env:
        lines.append(Content.styled("  env: " + " ".join(env), "$text-muted"))
    return lines


def fix_settings_text(fix: Fix, flags: Mapping[str, Any] | None = None) -> str:
    """A fix's flags as the form shows them (``flags``: what is applied, when more than
    ``fix.set``, e.g. the revert of a failed fix); the environment variables it sets in the
    run's environment on a line of their own."""
    applied = fix.set if flags is None else flags
    settings = ", ".join(f"{k}={format_value(v)}" for k, v in applied.items() if k != ENV_FIELD)
    if fix.env:
        names = " ".join(f"{k}={v}" if v is not None else f"unset {k}" for k, v in fix.env.items())
    elif ENV_FIELD in applied:  # the revert of an earlier fix's variables
        names = env_text(applied[ENV_FIELD]) or "none"
    else:
        return settings
    return settings + ("\n" if settings else "") + f"environment: {names}"
