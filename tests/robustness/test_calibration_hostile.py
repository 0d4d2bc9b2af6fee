"""Calibration against what is not a good vLLM (issue 33): a /version that is not an
object, two calibrations of one name, a journal torn by a kill or on a full disk, numeric
options that are not numbers, and one credential rule for page reads and loads."""

from __future__ import annotations

import errno
import json
import os
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from fakes.load import FakeVllm, serve_fake

from tui.app.cli import main
from tui.domain.calibration import JournalLine, design
from tui.domain.credentials import Credentials
from tui.domain.flags.serve import ServeFlags
from tui.domain.flags.validation import serve_command
from tui.domain.profile import FitSample
from tui.domain.results import BenchResult
from tui.domain.workload import LoadSpec
from tui.modes.calibrate import AttachedTarget
from tui.store.lock import SweepLocked
from tui.twin.calibrate import (
    Calibration,
    CalibrationError,
    _append,
    calibration_lock,
    journal_path,
    read_journal,
    server_facts,
)

FLAGS = ServeFlags(model="m")


@dataclass
class PagesTarget:
    """A server answering fixed pages (nothing listens: an httpx mock transport)."""

    pages: dict[str, str]
    flags: ServeFlags = FLAGS
    base_url: str = "http://server"

    def client(self) -> httpx.AsyncClient:
        def answer(request: httpx.Request) -> httpx.Response:
            return httpx.Response(200, text=self.pages.get(request.url.path, ""))

        return httpx.AsyncClient(transport=httpx.MockTransport(answer))

    def log_text(self) -> str:
        return ""


MODELS = json.dumps({"data": [{"id": "m", "root": "m", "max_model_len": 512}]})


@pytest.mark.parametrize(
    ("pages", "said"),
    [
        ({"/v1/models": MODELS, "/version": "[1, 2]"}, "/version is a JSON list, not an object"),
        ({"/v1/models": MODELS, "/version": "[" * 100_000}, "nested 100000 levels deep"),
        ({"/v1/models": '{"data": ["m"]}', "/version": "{}"}, "first model is a JSON str"),
        ({"/v1/models": "[]", "/version": "{}"}, "cannot read the server"),
    ],
)
async def test_a_server_that_is_not_a_good_vllm_is_one_line(
    pages: dict[str, str], said: str
) -> None:
    with pytest.raises(CalibrationError) as caught:
        await server_facts(PagesTarget(pages))
    line = caught.value.one_line()
    assert said in line and "\n" not in line


async def test_a_second_calibration_of_one_name_is_refused(tmp_path: Path) -> None:
    target = PagesTarget({"/v1/models": MODELS, "/version": '{"version": "0.32.0"}'})
    run = Calibration(name="twin", target=target, loads=design(512, 0.25)[:3], data_dir=tmp_path)
    held = r"^calibration twin is already running: pid \d+"
    with calibration_lock(tmp_path, "twin"), pytest.raises(SweepLocked, match=held):
        await run.run()
    assert not journal_path(tmp_path, "twin").exists()  # nothing ran, nothing journaled


def _line(name: str) -> JournalLine:
    load = LoadSpec(input_len=8, output_len=4, num_prompts=2)
    sample = FitSample(name=name, flags=FLAGS, load=load, result=BenchResult(completed=2))
    return JournalLine(name=name, sample=sample, seconds=1.5)


def test_a_torn_journal_is_cut_on_resume_and_the_next_record_starts_whole(
    tmp_path: Path,
) -> None:
    path = journal_path(tmp_path, "twin")
    _append(path, _line("a"))
    whole = path.read_bytes()
    path.write_bytes(whole + _line("b").model_dump_json()[:40].encode())  # a kill mid-write
    assert set(read_journal(path, FLAGS)) == {"a"}
    assert path.read_bytes() == whole  # the torn tail is gone
    _append(path, _line("c"))
    assert set(read_journal(path, FLAGS)) == {"a", "c"}
    assert all(json.loads(x) for x in path.read_text().splitlines())


def test_a_full_disk_is_one_line_and_the_journal_stays_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = journal_path(tmp_path, "twin")
    _append(path, _line("a"))
    before = path.read_bytes()

    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("tui.store.journal_file.os.write", full)
    with pytest.raises(CalibrationError, match="No space left on device") as caught:
        _append(path, _line("b"))
    assert "\n" not in caught.value.one_line()
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    "option",
    [
        ["--budget", "nan"],
        ["--budget", "inf"],
        ["--budget", "0"],
        ["--scale", "nan"],
        ["--scale", "inf"],
        ["--scale", "0"],
        ["--scale", "-1"],
        ["--startup-timeout", "-5"],
    ],
)
def test_numeric_options_are_refused_at_parse_time(
    option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["calibrate", "http://127.0.0.1:9", "--name", "x", *option])
    assert caught.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].endswith(
        f"argument {option[0]}: must be a finite number above 0, got '{option[1]}'"
    )


def test_an_attach_log_that_is_not_a_regular_file_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("VTC_DATA_DIR", str(tmp_path))
    fifo = tmp_path / "log"
    os.mkfifo(fifo)
    for path, why in ((fifo, "a FIFO"), (tmp_path, "a directory"), (tmp_path / "no", "no such")):
        assert (
            main(["calibrate", "http://127.0.0.1:9", "--name", "x", "--attach-log", str(path)]) == 2
        )
        err = capsys.readouterr().err.strip()
        assert err.startswith("vtc: cannot read --attach-log") and why in err
        assert len(err.splitlines()) == 1


async def test_the_loads_send_the_key_the_page_reads_send() -> None:
    with serve_fake() as fake_vllm:
        await _loads_send_the_key(fake_vllm)


async def _loads_send_the_key(fake_vllm: FakeVllm) -> None:
    spec = LoadSpec(input_len=8, output_len=3, num_prompts=2, max_concurrency=2)
    for env, command in (
        ({"VLLM_API_KEY": "sk-vllm-env"}, None),
        ({"OPENAI_API_KEY": "sk-openai-env"}, None),
        ({"VLLM_API_KEY": "sk-vllm-env"}, ["serve", "m", "--api-key", "sk-serve-line"]),
    ):
        secrets = serve_command(command).env if command else None
        credentials = Credentials.from_env(env, command_line=secrets)
        target = AttachedTarget(fake_vllm.base_url, FLAGS, credentials)
        fake_vllm.headers.clear()
        await target.load_runner().run(spec, base_url=fake_vllm.base_url, model="fake")
        expected = f"Bearer {credentials.api_key}"
        assert {h.get("authorization") for h in fake_vllm.headers} == {expected}
        assert target.client().headers.get("authorization") == expected
        if command:  # the serve line's key beats the environment's, and the server gets it
            assert credentials.server_env()["VLLM_API_KEY"] == "sk-serve-line"
