"""``vtc bench``: bench serve's flags, summary block and result keys, against the fake."""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from load_fake_vllm import FakeVllm

from tui.load.bench_cli import (
    add_bench_parser,
    build_spec,
    main,
    progress_line,
    result_path,
)
from tui.load.live import LiveProgress


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vtc")
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", *argv])


def test_flags_keep_bench_serve_names_and_defaults() -> None:
    args = parse()
    assert args.command == "bench"
    assert (args.num_prompts, args.random_input_len, args.random_output_len) == (1000, 1024, 128)
    assert args.request_rate == float("inf") and args.burstiness == 1.0
    assert args.max_concurrency is None and args.endpoint == "/v1/completions"
    assert args.dataset_name == "random" and args.transport == "aiohttp"
    args = parse(
        "--base-url",
        "http://h:1",
        "--random-prefix-len",
        "8",
        "--goodput",
        "ttft:200",
        "tpot:50",
        "--percentile-metrics",
        "ttft,itl",
        "--metric-percentiles",
        "90,99.9",
        "--save-result",
        "--result-filename",
        "x.json",
        "--endpoint",
        "/v1/chat/completions",
    )
    assert args.goodput == ["ttft:200", "tpot:50"] and args.random_prefix_len == 8
    spec = build_spec(args)
    assert spec.endpoint == "chat" and spec.prefix_len == 8
    assert spec.ignore_eos is True  # forced for random datasets, as bench serve does


def test_spec_mapping_aliases_and_shared_prefix() -> None:
    spec = build_spec(parse("--input-len", "100", "--output-len", "7", "--max-concurrency", "4"))
    assert (spec.input_len, spec.output_len, spec.max_concurrency) == (100, 7, 4)
    shared = build_spec(
        parse(
            "--dataset-name", "shared-prefix", "--random-input-len", "200", "--cache-hit-pct", "25"
        )
    )
    assert (shared.prefix_len, shared.input_len) == (50, 150)
    assert build_spec(parse("--dataset-name", "custom")).ignore_eos is False
    assert build_spec(parse("--backend", "openai-chat")).endpoint == "chat"
    with pytest.raises(ValueError, match="greater than 0"):
        build_spec(parse("--max-concurrency", "0"))


def test_bad_flags_exit_like_argparse(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--num-prompts", "0"])
    assert exc.value.code == 2
    assert "must be at least 1" in capsys.readouterr().err


def run(fake: FakeVllm, tmp_path: Path, *extra: str) -> tuple[int, dict]:
    """Run ``vtc bench`` against the fake; (exit code, result JSON or {})."""
    path = tmp_path / "result.json"
    argv = [
        "--base-url",
        fake.base_url,
        "--random-input-len",
        "16",
        "--random-output-len",
        "5",
        "--num-prompts",
        "6",
        "--max-concurrency",
        "3",
        "--result-filename",
        str(path),
        *extra,
    ]
    return main(argv), (json.loads(path.read_text()) if path.exists() else {})


def test_run_prints_bench_serve_block_and_writes_its_keys(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, data = run(
        fake_vllm, tmp_path, "--model", "fake", "--goodput", "e2el:60000", "--disable-tqdm"
    )
    out, err = capsys.readouterr()
    assert code == 0
    assert "{s:{c}^{n}}".format(s=" Serving Benchmark Result ", n=50, c="=") in out
    assert re.search(r"^Successful requests:\s{21}6\s*$", out, re.M)
    assert re.search(r"^Request goodput \(req/s\):\s+\d+\.\d\d\s*$", out, re.M)
    assert re.search(r"^P99 E2EL \(ms\):\s+\d+\.\d\d\s*$", out, re.M)
    assert "-" * 15 + "Time to First Token" in out
    assert err == ""  # no progress lines with --disable-tqdm, no warnings
    for key in (
        "date",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p50_ttft_ms",
        "p90_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "mean_itl_ms",
        "mean_e2el_ms",
        "p99_e2el_ms",
    ):
        assert key in data, key
    assert data["completed"] == 6 and data["total_output_tokens"] == 30
    assert data["request_rate"] == "inf" and data["max_concurrency"] == 3
    assert data["label"] == "vtc" and data["model_id"] == "fake"
    assert data["request_goodput"] == pytest.approx(6 / data["duration"])
    assert "ttfts" not in data and "errors" not in data  # only with --save-detailed


def test_save_detailed_and_model_from_the_server(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.fail_every = 4  # request 0 and 4 fail
    code, data = run(fake_vllm, tmp_path, "--save-detailed", "--label", "mine")
    out, err = capsys.readouterr()
    assert code == 0
    assert "First model name: fake-model, first model id: /models/fake" in out
    assert {b["model"] for b in fake_vllm.bodies} == {"fake-model"}
    assert (data["completed"], data["failed"], data["label"]) == (4, 2, "mine")
    for key in ("input_lens", "output_lens", "ttfts", "itls", "latencies", "errors"):
        assert len(data[key]) == 6, key
    assert sorted(data["output_lens"]) == [0, 0, 5, 5, 5, 5]
    assert sum(1 for e in data["errors"] if "HTTP 500" in e) == 2
    texts = zip(data["generated_texts"], data["errors"], strict=True)
    assert all(text == " tok" * 5 for text, error in texts if not error)
    assert "2 failed request(s)" in err
    assert "[" in err and "done 6/6" in err  # live lines, the last one complete


def test_custom_dataset_through_the_cli(fake_vllm: FakeVllm, tmp_path: Path) -> None:
    lines = [json.dumps({"prompt": f"the of and {i}"}) for i in range(3)]
    (tmp_path / "p.jsonl").write_text("\n".join(lines), encoding="utf-8")
    code, data = run(
        fake_vllm,
        tmp_path,
        "--model",
        "fake",
        "--dataset-name",
        "custom",
        "--dataset-path",
        str(tmp_path / "p.jsonl"),
        "--custom-output-len",
        "2",
        "--num-prompts",
        "3",
        "--disable-tqdm",
    )
    assert code == 0 and data["completed"] == 3 and data["total_output_tokens"] == 6
    assert sorted(b["prompt"] for b in fake_vllm.bodies) == [f"the of and {i}" for i in range(3)]
    assert all("ignore_eos" not in b for b in fake_vllm.bodies)


def test_shared_prefix_reports_the_expected_hit_rate(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(
        fake_vllm,
        tmp_path,
        "--model",
        "fake",
        "--dataset-name",
        "shared-prefix",
        "--random-input-len",
        "64",
        "--cache-hit-pct",
        "50",
        "--disable-tqdm",
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "Shared prefix: 32 of ~64 prompt tokens" in out
    heads = {" ".join(b["prompt"].split()[:32]) for b in fake_vllm.bodies}
    assert len(heads) == 1


def test_startup_errors_exit_1_with_a_message(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(fake_vllm, tmp_path, "--model", "m", "--dataset-name", "sharegpt")
    assert code == 1
    assert (
        "vtc bench: error: --dataset-name sharegpt needs --dataset-path" in capsys.readouterr().err
    )
    code, _ = run(fake_vllm, tmp_path, "--model", "m", "--goodput", "ttft=1")
    assert code == 1 and "KEY:VALUE" in capsys.readouterr().err
    code, _ = run(fake_vllm, tmp_path, "--model", "fail-500", "--disable-tqdm")
    assert code == 1  # nothing completed


def test_default_result_file_name_follows_bench_serve(tmp_path: Path) -> None:
    now = datetime(2026, 11, 21, 6, 30, 5)
    args = parse("--max-concurrency", "8")
    assert result_path(args, "org/Model-7B", "vtc", now) == Path(
        "vtc-infqps-concurrency8-Model-7B-20261121-063005.json"
    )
    args = parse("--request-rate", "2.5", "--result-dir", str(tmp_path))
    assert result_path(args, "m", "x", now) == tmp_path / "x-2.5qps-m-20261121-063005.json"


def test_progress_line() -> None:
    progress = LiveProgress(
        elapsed=12.0,
        done=40,
        failed=1,
        in_flight=8,
        total=100,
        output_tokens_per_s=1234.0,
        ttft_p50_ms=120.0,
        ttft_p99_ms=340.0,
        itl_p50_ms=9.5,
        itl_p99_ms=31.0,
        loop_lag_mean_ms=6.0,
        client_cpu_pct=97.0,
        client_bound=True,
    )
    line = progress_line(progress, None)
    assert line.startswith("[   12s] done 40/100 failed 1 in flight 8 | 1,234 tok/s")
    assert "TTFT p50 120 p99 340 ms | ITL p50 9.5 p99 31 ms" in line
    assert line.endswith("client lag 6.0 ms cpu 97% CLIENT-BOUND")
    assert progress_line(progress, 60.0).startswith("[   12/60s] done 40 failed")
