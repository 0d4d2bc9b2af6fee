"""The streaming client against a fake vLLM (ref section 4.1), with both transports."""

from __future__ import annotations

import socket

import pytest
from fakes.load import FakeVllm

from tui.load.account import TEXT_FALLBACK_BYTES, StreamRecorder
from tui.load.client import (
    NO_VALID_CHUNK,
    OpenAIStreamClient,
    PreparedRequest,
    TransportKind,
    api_url,
    make_transport,
    proxied,
)
from tui.load.prompts import PromptRequest
from tui.load.sse import TOKEN_MARK, SseParser
from tui.load.stats import RequestRecord
from tui.load.wire import BodyEnd, BodyFeed, Response

PROMPT = PromptRequest(index=3, prompt="the of and to in", prompt_len=5, expected_output_len=4)
TRANSPORTS: list[TransportKind] = ["native", "aiohttp"]


async def send(
    fake_url: str,
    kind: TransportKind,
    prompt: PromptRequest = PROMPT,
    **client_kwargs: object,
):
    transport = make_transport(kind, 4, float(client_kwargs.pop("timeout_s", 10.0)))  # type: ignore[arg-type]
    try:
        client = OpenAIStreamClient(
            transport,
            base_url=fake_url,
            model=str(client_kwargs.pop("model", "fake")),
            **client_kwargs,  # type: ignore[arg-type]
        )
        return await client.send(prompt)
    finally:
        await transport.aclose()


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_completions_stream_is_measured(fake_vllm: FakeVllm, kind: TransportKind) -> None:
    fake_vllm.first_delay_s = 0.05
    fake_vllm.chunk_delay_s = 0.02
    rec = await send(fake_vllm.base_url, kind)
    assert rec.success, rec.error
    assert rec.error == ""
    assert rec.output_tokens == 4  # usage.completion_tokens
    assert rec.prompt_len == 6  # overwritten by usage.prompt_tokens (5 words + BOS)
    assert len(rec.itl) == 3  # 4 choices chunks -> 3 gaps
    assert rec.generated_text == " tok" * 4
    # The server waits 50 ms before the first chunk and 20 ms between chunks: sleeps
    # never end early, so these are lower bounds whatever the machine's load.
    assert rec.ttft >= 0.049
    # The last chunk leaves the server 50 + 3 x 20 ms after the request came in at the
    # earliest, so it cannot be stamped sooner after the POST (however late the first was).
    assert rec.latency >= 0.05 + 3 * 0.02 - 0.001
    # latency ends at the last choices chunk: ttft + Σ itl (usage and [DONE] excluded)
    assert rec.latency == pytest.approx(rec.ttft + sum(rec.itl), abs=1e-9)
    assert rec.start_time > 0


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_chat_stream_is_measured(fake_vllm: FakeVllm, kind: TransportKind) -> None:
    rec = await send(fake_vllm.base_url, kind, endpoint="chat")
    assert rec.success, rec.error
    assert (rec.output_tokens, rec.prompt_len, len(rec.itl)) == (4, 6, 3)
    assert rec.generated_text == " tok" * 4
    body = fake_vllm.bodies[-1]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": PROMPT.prompt}]}
    ]
    assert body["max_completion_tokens"] == 4


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_http_500_fails_with_status_and_body(
    fake_vllm: FakeVllm, kind: TransportKind
) -> None:
    rec = await send(fake_vllm.base_url, kind, model="fail-500")
    assert not rec.success
    assert rec.error.startswith("HTTP 500 Internal Server Error")
    assert "boom from the fake" in rec.error


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_stream_without_choices_fails(fake_vllm: FakeVllm, kind: TransportKind) -> None:
    rec = await send(fake_vllm.base_url, kind, model="no-choices")
    assert not rec.success
    assert rec.error == NO_VALID_CHUNK
    assert rec.error == (
        "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
    )


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_per_request_timeout(fake_vllm: FakeVllm, kind: TransportKind) -> None:
    fake_vllm.first_delay_s = 3.0
    rec = await send(fake_vllm.base_url, kind, request_timeout_s=0.2)
    assert not rec.success
    assert "timed out after 0.2 s" in rec.error


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_connection_refused_is_a_failed_request(kind: TransportKind) -> None:
    with socket.socket() as sock:  # a free port with nothing listening once closed
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    rec = await send(f"http://127.0.0.1:{port}", kind)
    assert not rec.success
    assert rec.error


async def test_payload_and_headers(fake_vllm: FakeVllm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    await send(fake_vllm.base_url, "native")
    body, headers = fake_vllm.bodies[-1], fake_vllm.headers[-1]
    assert body["model"] == "fake" and body["prompt"] == PROMPT.prompt
    assert body["max_tokens"] == 4
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "ignore_eos" not in body and "temperature" not in body
    assert "authorization" not in headers
    assert headers["x-request-id"] == "3"

    await send(fake_vllm.base_url, "native", ignore_eos=True, temperature=0.0, api_key="sekrit")
    body, headers = fake_vllm.bodies[-1], fake_vllm.headers[-1]
    assert body["ignore_eos"] is True and body["temperature"] == 0.0
    assert headers["authorization"] == "Bearer sekrit"

    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    await send(fake_vllm.base_url, "aiohttp")
    assert fake_vllm.headers[-1]["authorization"] == "Bearer from-env"


def test_api_key_stays_out_of_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    class NoTransport:
        async def post(self, request: PreparedRequest, feed: BodyFeed, end: BodyEnd) -> Response:
            raise AssertionError("not used")

        async def preconnect(self, url: str, count: int) -> None:
            return None

        async def aclose(self) -> None:
            return None

    client = OpenAIStreamClient(
        NoTransport(),  # type: ignore[arg-type]
        base_url="http://h:1",
        model="m",
        api_key="sekrit",
    )
    assert "sekrit" not in repr(client)
    assert client.headers()["Authorization"] == "Bearer sekrit"
    with pytest.raises(ValueError, match="line breaks"):
        OpenAIStreamClient(NoTransport(), base_url="http://h:1", model="m", api_key="a\r\nX: y")


def test_a_proxy_for_the_url_selects_aiohttp(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    assert not proxied("http://gpu-box:8000/v1/completions")
    monkeypatch.setenv("http_proxy", "http://proxy:3128")
    assert proxied("http://gpu-box:8000/v1/completions")
    monkeypatch.setenv("no_proxy", "gpu-box")
    assert not proxied("http://gpu-box:8000/v1/completions")


def test_api_url() -> None:
    assert api_url("http://h:8000", "completions") == "http://h:8000/v1/completions"
    assert api_url("http://h:8000/v1/", "chat") == "http://h:8000/v1/chat/completions"
    with pytest.raises(ValueError, match="http"):
        api_url("h:8000", "completions")


def test_sse_parser_handles_split_events_comments_and_utf8() -> None:
    parser = SseParser()
    assert parser.feed(b'data: {"a"') == []
    assert parser.feed(b": 1}\n\n: ping\n\ndata: [DO") == [b'{"a": 1}']
    assert parser.feed(b"NE]\r\n\r\n") == [b"[DONE]"]
    snowman = "data: ☃\n\n".encode()
    assert parser.feed(snowman[:7]) == []  # cut inside the 3-byte character
    assert [p.decode() for p in parser.feed(snowman[7:])] == ["☃"]
    assert parser.feed(b"data: tail") == []
    assert parser.flush() == [b"tail"]


def test_sse_parser_multi_line_data_and_events_without_data() -> None:
    parser = SseParser()
    # data lines are joined with "\n"; "data:" without a space; other fields ignored.
    assert parser.feed(b"event: x\ndata: one\ndata:two\n\nid: 7\n\n") == [b"one\ntwo"]
    assert parser.flush() == []


def test_sse_parser_crlf_split_across_reads_and_big_reads() -> None:
    parser = SseParser()
    assert parser.feed(b"data: a\r\n\r") == []
    assert parser.feed(b"\ndata: b\r") == [b"a"]
    assert parser.feed(b"\n\r\n") == [b"b"]
    many = b"".join(b'data: {"i": %d}\n\n' % i for i in range(20_000))
    payloads = parser.feed(many + b"data: [DO")
    assert len(payloads) == 20_000 and payloads[-1] == b'{"i": 19999}'
    assert parser.feed(b"NE]\n\n") == [b"[DONE]"]


def test_sse_scan_counts_token_events_and_returns_the_rest() -> None:
    parser = SseParser()
    token = b'data: {"id":"c","choices":[{"index":0,"text":" a"}]}\n\n'
    usage = b'data: {"id":"c","choices":[],"usage":{"completion_tokens":3}}\n\n'
    # Three token events in one read: counted without a payload list (the fast path).
    tokens, others, block = parser.scan(token * 3)
    assert (tokens, others) == (3, [])
    assert [p for p in SseParser.payloads(block) if TOKEN_MARK in p] == [token[6:-2]] * 3
    # Mixed with a usage event, a comment and an unfinished event: the general path.
    tokens, others, _ = parser.scan(token + b": ping\n\n" + usage + b"data: [DO")
    assert tokens == 1
    assert others == [usage[6:-2]]
    tokens, others, _ = parser.scan(b"NE]\n\n")
    assert (tokens, others) == (0, [b"[DONE]"])
    # Spaced JSON is not marked: it goes to the caller's json.loads path.
    spaced = b'data: {"choices": [{"text": "x"}]}\n\n'
    assert parser.scan(spaced)[:2] == (0, [spaced[6:-2]])
    # A marked event split over two data lines is still found, on the general path.
    assert parser.scan(b'data: {"choices":[{"text":\ndata: "y"}]}\n\n')[0] == 1


@pytest.mark.parametrize("kind", TRANSPORTS)
async def test_chunks_written_together_are_all_counted(
    fake_vllm: FakeVllm, kind: TransportKind
) -> None:
    fake_vllm.batch = 3  # three chunks per write
    fake_vllm.chunk_delay_s = 0.02
    prompt = PromptRequest(index=1, prompt="x y", prompt_len=2, expected_output_len=6)
    rec = await send(fake_vllm.base_url, kind, prompt)
    assert rec.success and rec.output_tokens == 6
    # However TCP splits or joins the two writes, every chunk is one gap after the first,
    # none negative, and they add up to the latency. (Which chunks shared a read is the
    # network's business; what sharing a read means is tested on the recorder below.)
    assert len(rec.itl) == 5 and min(rec.itl) >= 0.0
    assert rec.latency == pytest.approx(rec.ttft + sum(rec.itl), abs=1e-9)
    # The second write left the server 20 ms after the first: the last chunk cannot have
    # been stamped earlier than that after the POST.
    assert rec.latency >= 0.02


def token_event(text: str) -> bytes:
    return b'data: {"id":"c","choices":[{"index":0,"text":"%s"}]}\n\n' % text.encode()


def test_chunks_of_one_read_share_its_timestamp() -> None:
    rec = RequestRecord(start_time=10.0)
    recorder = StreamRecorder(rec, "completions", collect_text=True)
    recorder.feed(10.5, token_event("a") + token_event("b") + token_event("c"))
    recorder.feed(10.75, token_event("d")[:20])  # half an event: nothing yet
    recorder.feed(11.0, token_event("d")[20:] + token_event("e"))
    usage = b'data: {"id":"c","choices":[],"usage":{"prompt_tokens":7,"completion_tokens":5}}\n\n'
    recorder.feed(11.25, usage + b"data: [DONE]\n\n")
    recorder.finish(11.5)
    assert rec.ttft == 0.5  # the first read's stamp, minus the POST
    assert rec.itl == [0.0, 0.0, 0.5, 0.0]  # first of a read: the gap; the rest: 0
    assert rec.latency == 1.0  # the last token chunk, not the usage chunk or the end
    assert (rec.output_tokens, rec.prompt_len, rec.success) == (5, 7, True)
    assert rec.generated_text == "abcde"


def test_a_stream_without_usage_keeps_a_bounded_text() -> None:
    rec = RequestRecord(start_time=0.0)
    recorder = StreamRecorder(rec, "completions", collect_text=False)
    event = token_event("x" * 100)
    count = 2 * TEXT_FALLBACK_BYTES // len(event)
    for i in range(count):
        recorder.feed(float(i + 1), event)
    recorder.finish(float(count + 1))
    # Too long to keep for counting: one token per chunk stands in, and no text is held.
    assert rec.success and rec.output_tokens == count and rec.generated_text == ""


@pytest.mark.parametrize("kind", TRANSPORTS)
@pytest.mark.parametrize("compact", [True, False])
async def test_text_is_decoded_only_when_wanted(
    fake_vllm: FakeVllm, compact: bool, kind: TransportKind
) -> None:
    fake_vllm.compact = compact
    rec = await send(fake_vllm.base_url, kind, collect_text=False)
    assert rec.success and rec.output_tokens == 4 and len(rec.itl) == 3
    # With usage and without collect_text, no text is kept (compact chunks: never parsed).
    assert rec.generated_text == ""
    fake_vllm.omit_usage = True
    rec = await send(fake_vllm.base_url, kind, collect_text=False)
    # No usage: bench serve counts the generated text instead, so it is decoded.
    assert rec.success and rec.output_tokens == 0
    assert rec.generated_text == " tok" * 4
