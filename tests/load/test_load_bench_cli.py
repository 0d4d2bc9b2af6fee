"""``vtc bench``: bench serve's flags, summary block and result keys, against the fake."""

from __future__ import annotations

import argparse
import json
import re
from datetime import datetime
from pathlib import Path

import pytest
from fakes.load import FakeVllm

from tui.app.bench import main, progress_line
from tui.domain.workload import LoadProgress, workload_fields
from tui.load.bench_args import BenchError, add_bench_parser, build_spec
from tui.load.result_file import result_path


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="vtc")
    add_bench_parser(parser.add_subparsers(dest="command"))
    return parser.parse_args(["bench", *argv])


def test_flags_keep_bench_serve_names_and_defaults() -> None:
    args = parse()
    assert args.command == "bench"
    assert (args.num_prompts, args.input_len, args.output_len) == (1000, 1024, 128)
    assert args.request_rate == float("inf") and args.burstiness == 1.0
    assert args.max_concurrency is None and args.endpoint == "/v1/completions"
    assert args.dataset_name == "random" and args.transport == "auto"
    assert args.label is None
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
    assert args.goodput == ["ttft:200", "tpot:50"] and args.prefix_len == 8
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
    with pytest.raises(BenchError, match=r"^a run bounded by a duration at an infinite request"):
        build_spec(parse("--duration", "5"))
    timed = build_spec(parse("--duration", "5", "--max-concurrency", "2", "--num-warmups", "3"))
    assert (timed.duration_s, timed.num_warmups, timed.closed_loop) == (5.0, 3, True)


def test_every_workload_field_is_a_bench_flag_with_its_declared_bounds() -> None:
    # Rendered from LoadSpec's declaration: one option per field, bench serve's spelling.
    args = parse()
    assert {f.name for f in workload_fields()} <= set(vars(args))
    for field in workload_fields():
        value = getattr(args, field.name)
        if field.kind == "choice":  # the endpoint as the command line spells it (a path)
            assert value == field.cli_text(field.bench_default)
        elif field.kind == "bool":
            assert value is False  # a store_true flag
        else:
            assert value == field.bench_default
    assert build_spec(parse("--temperature", "0.5", "--seed", "9")).temperature == 0.5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--num-prompts", "0"], "argument --num-prompts: must be >= 1, got 0"),
        (["--max-concurrency", "0"], "argument --max-concurrency: must be >= 1, got 0"),
        (["--random-range-ratio", "1"], "argument --random-range-ratio: must be < 1, got 1"),
        (["--request-rate", "-2"], "argument --request-rate: must be > 0, got -2"),
        (["--input-len", "x"], "argument --input-len: invalid value 'x'"),
        (["--duration", "nan"], "argument --duration: must be a number, got nan"),
    ],
)
def test_bad_flags_exit_like_argparse(
    capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert message in capsys.readouterr().err


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
        "rtfx",
        "latencies",
        "queue_times",
        "endpoint_type",
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
    assert data["label"] is None and data["model_id"] == "fake"  # bench serve's defaults
    assert data["tokenizer_id"] == "fake" and data["rtfx"] == 0.0
    assert data["request_goodput"] == pytest.approx(6 / data["duration"])
    assert len(data["latencies"]) == len(data["queue_times"]) == 6  # always, as bench serve
    for key in ("ttfts", "itls", "errors", "input_lens", "start_times", "generated_texts"):
        assert key not in data, key  # only with --save-detailed
    # bench serve's keys first, in its order, then vtc's.
    keys = list(data)
    assert keys[:7] == [
        "date",
        "endpoint_type",
        "backend",
        "label",
        "model_id",
        "tokenizer_id",
        "num_prompts",
    ]
    assert keys.index("max_concurrency") < keys.index("duration") < keys.index("rtfx")
    assert keys.index("rtfx") < keys.index("mean_ttft_ms") < keys.index("cancelled")
    assert data["failed_errors"] == [] and data["cancelled"] is False


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


def test_startup_errors_exit_2_with_one_line(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _ = run(fake_vllm, tmp_path, "--model", "m", "--dataset-name", "sharegpt")
    assert code == 2
    assert capsys.readouterr().err == "vtc: --dataset-name sharegpt needs --dataset-path\n"
    code, _ = run(fake_vllm, tmp_path, "--model", "m", "--goodput", "ttft=1")
    err = capsys.readouterr().err
    assert code == 2 and "KEY:VALUE" in err and len(err.splitlines()) == 1
    code, _ = run(fake_vllm, tmp_path, "--model", "fail-500", "--disable-tqdm")
    assert code == 1  # nothing completed


def test_lengths_above_the_servers_max_model_len_are_refused(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.max_model_len = 100
    code, _ = run(fake_vllm, tmp_path, "--random-input-len", "200")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("vtc: --random-input-len asks for prompts of up to 200")
    assert "max_model_len 100" in err and len(err.splitlines()) == 1
    code, _ = run(fake_vllm, tmp_path, "--random-output-len", "101")
    assert code == 2 and "--random-output-len" in capsys.readouterr().err
    # With --model too: the card of that model gives the limit.
    code, _ = run(fake_vllm, tmp_path, "--model", "fake-model", "--random-input-len", "500")
    assert code == 2 and "max_model_len 100" in capsys.readouterr().err
    assert fake_vllm.bodies == []  # nothing was sent
    # Prompt + output past the limit: vLLM caps the outputs; said, not refused.
    code, _ = run(fake_vllm, tmp_path, "--random-input-len", "60", "--random-output-len", "60")
    assert code == 0 and "vLLM caps those outputs" in capsys.readouterr().err


def test_a_workload_too_big_for_memory_is_refused_before_building_it(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake_vllm.max_model_len = 10**9  # the server would take it: the client's memory would not
    code, _ = run(fake_vllm, tmp_path, "--random-input-len", "50000000", "--num-prompts", "1000")
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("vtc: this workload needs about ")
    assert "the limit is 2 GiB" in err and len(err.splitlines()) == 1
    assert fake_vllm.bodies == []


def test_an_unwritable_result_folder_is_refused_before_the_run(
    fake_vllm: FakeVllm, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code = main(
        [
            "--base-url",
            fake_vllm.base_url,
            "--num-prompts",
            "2",
            "--random-input-len",
            "16",
            "--save-result",
            "--result-dir",
            str(blocker / "sub"),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and err.startswith(f"vtc: cannot write the result to {blocker / 'sub'}")
    assert fake_vllm.bodies == []


def test_a_finished_result_that_cannot_be_written_goes_to_the_data_folder(
    fake_vllm: FakeVllm,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tui.load import result_file

    data_dir = tmp_path / "data"
    monkeypatch.setenv("VTC_DATA_DIR", str(data_dir))
    target = tmp_path / "out"
    real_write = result_file._write

    def failing(path: Path, text: str) -> None:
        if path.parent == target:  # the folder went away between the check and the save
            raise PermissionError(13, "Permission denied")
        real_write(path, text)

    monkeypatch.setattr(result_file, "_write", failing)
    code = main(
        [
            "--base-url",
            fake_vllm.base_url,
            "--num-prompts",
            "2",
            "--random-input-len",
            "16",
            "--disable-tqdm",
            "--save-result",
            "--result-dir",
            str(target),
            "--result-filename",
            "r.json",
        ]
    )
    out, err = capsys.readouterr()
    saved = data_dir / "bench" / "r.json"
    assert code == 0 and saved.is_file()
    assert json.loads(saved.read_text())["completed"] == 2
    assert err.count("\n") == 1 and f"the result is saved to {saved} instead" in err
    assert "Permission denied" in err and "Traceback" not in err
    assert f"Result saved to {saved}" in out


def test_default_result_file_name_follows_bench_serve(tmp_path: Path) -> None:
    now = datetime(2026, 11, 21, 6, 30, 5)
    common = {"result_filename": None, "backend": "openai", "now": now}
    assert result_path(
        result_dir=None,
        label=None,
        request_rate=float("inf"),
        max_concurrency=8,
        model_id="org/Model-7B",
        **common,  # type: ignore[arg-type]
    ) == Path("openai-infqps-concurrency8-Model-7B-20261121-063005.json")
    assert (
        result_path(
            result_dir=str(tmp_path),
            label="x",
            request_rate=2.5,
            max_concurrency=None,
            model_id="m",
            **common,  # type: ignore[arg-type]
        )
        == tmp_path / "x-2.5qps-m-20261121-063005.json"
    )
    assert result_path(
        result_dir=None,
        label=None,
        request_rate=3,
        max_concurrency=None,
        model_id="m",
        **common,  # type: ignore[arg-type]
    ) == Path("openai-3.0qps-m-20261121-063005.json")  # str(float): bench serve's spelling


def test_progress_line() -> None:
    progress = LoadProgress(
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
