"""The simulator's HTTP API: vLLM's OpenAI-compatible endpoints on aiohttp.

Endpoints and shapes follow reference section 6 and ``endpoints.txt`` of the CPU captures:
``/health`` and ``/ping`` (200, empty), ``/version``, ``/v1/models`` (with
``max_model_len``), ``/load``, ``/metrics``, ``/tokenize``, ``/detokenize``,
``POST /v1/completions`` and ``POST /v1/chat/completions`` (streaming as SSE ``data:``
chunks in OpenAI's format, ``stream_options.include_usage`` adding a final usage chunk,
then ``data: [DONE]``; or one JSON body). With an API key, ``/v1/*`` needs
``Authorization: Bearer <key>`` and answers 401 ``{"error": "Unauthorized"}`` otherwise.
Request errors use vLLM's ``{"error": {"message", "type", "param", "code"}}`` body and its
message texts (reference 1.5, request time).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from prometheus_client import CONTENT_TYPE_LATEST

from tui.sim.argv import FixedTiming
from tui.sim.engine import AsyncEngine, Chunk, RequestHandle
from tui.sim.fixed import FixedStream
from tui.sim.logs import VERSION, VllmLog, uvicorn_access_line
from tui.sim.metrics import SimMetrics
from tui.sim.tokenizer import (
    GEN_WORDS,
    SimTokenizer,
    chat_prompt_ids,
    message_text,
    prompt_ids,
)

AUTH_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
UVICORN_BACKLOG = 2048


@dataclass
class ApiContext:
    """What the handlers need from the running server."""

    engine: AsyncEngine
    metrics: SimMetrics
    tokenizer: SimTokenizer
    served_name: str
    model_path: str
    max_model_len: int
    max_logprobs: int
    adds_bos: bool
    chat_template: str
    api_key: str | None = None
    load_tracking: bool = False
    dev_mode: bool = False
    server_load: int = 0
    fixed: FixedTiming | None = None  # --sim-fixed-*: injected delays, engine bypassed


CTX_KEY = web.AppKey("ctx", ApiContext)


class ApiError(Exception):
    """An OpenAI-style error response."""

    def __init__(
        self,
        message: str,
        status: int = 400,
        err_type: str = "BadRequestError",
        param: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.err_type, self.param = message, status, err_type, param

    def response(self) -> web.Response:
        """The JSON error body vLLM sends."""
        body = {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }
        return _json(body, status=self.status)


def access_logger_class(log: VllmLog) -> type[AbstractAccessLogger]:
    """An aiohttp access logger printing uvicorn's line format through ``log``."""

    class UvicornAccessLogger(AbstractAccessLogger):
        def log(self, request: web.BaseRequest, response: web.StreamResponse, time: float) -> None:
            peer = request.transport.get_extra_info("peername") if request.transport else None
            who = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else "-"
            try:
                phrase = HTTPStatus(response.status).phrase
            except ValueError:
                phrase = ""
            version = f"{request.version.major}.{request.version.minor}"
            log.stdout(
                uvicorn_access_line(
                    who, request.method, request.path_qs, version, response.status, phrase
                )
            )

    return UvicornAccessLogger


def _json(body: Any, status: int = 200) -> web.Response:
    """A compact JSON response, as FastAPI renders them."""
    return web.Response(
        text=json.dumps(body, separators=(",", ":"), ensure_ascii=False),
        status=status,
        content_type="application/json",
    )


def _ctx(request: web.Request) -> ApiContext:
    return request.app[CTX_KEY]


@web.middleware
async def _auth(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    ctx = _ctx(request)
    guarded = ctx.api_key and request.method != "OPTIONS" and request.path.startswith(AUTH_PREFIXES)
    if guarded and request.headers.get("Authorization") != f"Bearer {ctx.api_key}":
        return _json({"error": "Unauthorized"}, status=401)
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        return exc.response()


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = "uvicorn"


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _version(request: web.Request) -> web.Response:
    return _json({"version": VERSION})


async def _load(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    return _json({"server_load": ctx.server_load if ctx.load_tracking else 0})


async def _metrics(request: web.Request) -> web.Response:
    body = _ctx(request).metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _models(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    now = int(time.time())
    card = {
        "id": ctx.served_name,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": ctx.model_path,
        "parent": None,
        "max_model_len": ctx.max_model_len,
        "permission": [
            {
                "id": f"modelperm-{uuid.uuid4().hex[:16]}",
                "object": "model_permission",
                "created": now,
                "allow_create_engine": False,
                "allow_sampling": True,
                "allow_logprobs": True,
                "allow_search_indices": False,
                "allow_view": True,
                "allow_fine_tuning": False,
                "organization": "*",
                "group": None,
                "is_blocking": False,
            }
        ],
    }
    return _json({"object": "list", "data": [card]})


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ApiError(f"JSON decode error: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError("Request body must be a JSON object")
    return body


def _check_model(ctx: ApiContext, body: dict[str, Any]) -> None:
    model = body.get("model")
    if model is not None and model not in (ctx.served_name, ctx.model_path):
        raise ApiError(f"The model `{model}` does not exist.", 404, "NotFoundError", "model")


def _int_field(body: dict[str, Any], *names: str) -> int | None:
    for name in names:
        value = body.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            raise ApiError(f"{name} must be an integer")
        if value < 1 and name != "logprobs":
            raise ApiError(f"{name} must be at least 1, got {value}.")
        return value
    return None


def _validate_lengths(ctx: ApiContext, n_prompt: int, max_tokens: int | None) -> int:
    """vLLM's request-time length checks (``renderers/params.py:521-535``); the max_tokens used."""
    mml = ctx.max_model_len
    if n_prompt > mml:
        raise ApiError(
            f"This model's maximum context length is {mml} tokens. However, your prompt contains "
            f"{n_prompt} input tokens, which exceeds this limit even without any output tokens. "
            "Please reduce the length of the input prompt."
        )
    if max_tokens is None:
        return max(1, mml - n_prompt)
    if max_tokens > mml - n_prompt:
        raise ApiError(
            f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. This model's "
            f"maximum context length is {mml} tokens and your request has {n_prompt} input "
            f"tokens ({max_tokens} > {mml} - {n_prompt})."
        )
    return max_tokens


def _check_logprobs(ctx: ApiContext, body: dict[str, Any], chat: bool) -> None:
    n = body.get("top_logprobs") if chat else body.get("logprobs")
    if chat and not body.get("logprobs"):
        return
    if (
        isinstance(n, int)
        and not isinstance(n, bool)
        and ctx.max_logprobs != -1
        and n > ctx.max_logprobs
    ):
        raise ApiError(
            f"Requested sample logprobs of {n}, which is greater than max allowed: "
            f"{ctx.max_logprobs}"
        )


def _prompts(body: dict[str, Any]) -> list[str | list[int]]:
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        return [prompt]
    if isinstance(prompt, list) and prompt:
        if all(isinstance(p, int) and not isinstance(p, bool) for p in prompt):
            return [[int(p) for p in prompt]]
        if all(isinstance(p, str) for p in prompt):
            return list(prompt)
        if all(isinstance(p, list) for p in prompt):
            return [[int(t) for t in p] for p in prompt]
    raise ApiError("prompt must be a string, a list of strings or a list of token ids")


async def _merged(handles: list[RequestHandle]) -> AsyncIterator[tuple[int, Chunk]]:
    """Chunks of several requests, interleaved as they come, tagged with their index."""
    if len(handles) == 1:
        while True:
            chunk = await handles[0].queue.get()
            yield 0, chunk
            if chunk.finish_reason is not None:
                return
    out: asyncio.Queue[tuple[int, Chunk]] = asyncio.Queue()

    async def pump(i: int, h: RequestHandle) -> None:
        while True:
            chunk = await h.queue.get()
            out.put_nowait((i, chunk))
            if chunk.finish_reason is not None:
                return

    tasks = [asyncio.create_task(pump(i, h)) for i, h in enumerate(handles)]
    try:
        done = 0
        while done < len(handles):
            i, chunk = await out.get()
            if chunk.finish_reason is not None:
                done += 1
            yield i, chunk
    finally:
        for t in tasks:
            t.cancel()


class _Generation:
    """One API request's engine requests, from submission to the response."""

    def __init__(self, ctx: ApiContext, chat: bool, body: dict[str, Any]) -> None:
        self.ctx = ctx
        self.chat = chat
        self.body = body
        self.created = int(time.time())
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        self.handles: list[RequestHandle] = []
        self.prompt_tokens = 0

    def submit(self, prompts: list[list[int]], max_tokens: int | None, n: int) -> None:
        ignore_eos = bool(self.body.get("ignore_eos", False))
        for k, ids in enumerate(prompts):
            used = _validate_lengths(self.ctx, len(ids), max_tokens)
            self.prompt_tokens += len(ids)  # counted once per prompt, whatever n is
            for j in range(n):
                rid = f"{self.id}-{k}-{j}"
                self.handles.append(self.ctx.engine.submit(list(ids), used, ignore_eos, rid))

    def abort(self) -> None:
        for h in self.handles:
            self.ctx.engine.abort(h)

    def _choice(
        self, index: int, text: str, finish: str | None, first: bool = False
    ) -> dict[str, Any]:
        if self.chat:
            delta = {"role": "assistant", "content": text} if first else {"content": text}
            choice: dict[str, Any] = {
                "index": index,
                "delta": delta,
                "logprobs": None,
                "finish_reason": finish,
            }
            if finish is not None:
                choice["stop_reason"] = None
            return choice
        return {
            "index": index,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
        }

    def _frame(self, choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        obj: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.ctx.served_name,
            "choices": choices,
        }
        if usage is not None:
            obj["usage"] = usage
        return b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"

    def _usage(self, completion: int) -> dict[str, int]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + completion,
            "completion_tokens": completion,
        }

    async def stream(self, request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await resp.prepare(request)
        include_usage = bool((self.body.get("stream_options") or {}).get("include_usage"))
        started: set[int] = set()
        completion = 0
        aborted = False
        try:
            async for i, chunk in _merged(self.handles):
                if chunk.finish_reason == "abort":
                    aborted = True
                    continue
                if chunk.token_id is not None:
                    completion += 1
                if self.chat and i not in started:
                    # vLLM's first chat chunk carries the role; it goes out with the first token.
                    await resp.write(self._frame([self._choice(i, "", None, first=True)]))
                started.add(i)
                if chunk.token_id is None and chunk.finish_reason is None:
                    continue
                await resp.write(self._frame([self._choice(i, chunk.text, chunk.finish_reason)]))
            if aborted:
                return resp  # the server is shutting down: end the stream without [DONE]
            if include_usage:
                await resp.write(self._frame([], self._usage(completion)))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:
            self.abort()  # the client went away: free its sequences, as vLLM aborts them
        except BaseException:
            self.abort()
            raise
        return resp

    def plan_fixed(self, prompts: list[list[int]], max_tokens: int | None, n: int) -> list[int]:
        """Fixed-delay mode: validate like :meth:`submit`; tokens per sequence, no engine."""
        counts: list[int] = []
        for ids in prompts:
            used = _validate_lengths(self.ctx, len(ids), max_tokens)
            self.prompt_tokens += len(ids)
            counts.extend([max(1, used)] * n)
        return counts

    async def stream_fixed(
        self, request: web.Request, timing: FixedTiming, counts: list[int], arrival: float
    ) -> web.StreamResponse:
        """Stream on the injected schedule: token k at ``arrival + ttft + k·itl``.

        The first write goes through aiohttp (it sends the headers); the rest are written
        from timer callbacks by :class:`~tui.sim.fixed.FixedStream`, with frames built
        once per sequence, so the simulator keeps pace at a thousand streams.
        """
        loop = asyncio.get_running_loop()
        resp = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream; charset=utf-8",
                "Cache-Control": "no-cache",
            }
        )
        await resp.prepare(request)
        include_usage = bool((self.body.get("stream_options") or {}).get("include_usage"))
        words = [" " + w for w in GEN_WORDS[:8]]
        frames = [
            [self._frame([self._choice(i, w, None)]) for w in words] for i in range(len(counts))
        ]

        single = frames[0] if len(counts) == 1 and not self.chat else None
        n_words = len(words)

        def build(k: int, last: int) -> bytes:
            if single is not None and last < counts[0] - 1:  # the common case, no finish
                if k == last:
                    return single[k % n_words]
                return b"".join([single[j % n_words] for j in range(k, last + 1)])
            parts: list[bytes] = []
            for j in range(k, last + 1):
                for i, count in enumerate(counts):
                    if j >= count:
                        continue
                    if self.chat and j == 0:
                        parts.append(self._frame([self._choice(i, "", None, first=True)]))
                    if j == count - 1:
                        word = words[j % len(words)]
                        parts.append(self._frame([self._choice(i, word, "length")]))
                    else:
                        parts.append(frames[i][j % len(words)])
            return b"".join(parts)

        total = max(counts)
        stream: FixedStream | None = None
        try:
            await asyncio.sleep(max(0.0, arrival + timing.offset(0) - loop.time()))
            last = 0
            if timing.itl_s > 0:
                elapsed = loop.time() - arrival - timing.ttft_s
                last = min(total - 1, max(0, int(elapsed / timing.itl_s)))
            else:
                last = total - 1
            await resp.write(build(0, last))
            if last + 1 < total:
                if request.transport is None:
                    return resp  # the client went away
                stream = FixedStream(request.transport, build, total, timing, arrival)
                stream.start(last + 1)
                if not await stream.done:
                    return resp  # the client went away
            if include_usage:
                await resp.write(self._frame([], self._usage(sum(counts))))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:
            pass  # the client went away; nothing to free in fixed mode
        finally:
            if stream is not None:
                stream.cancel()
        return resp

    async def complete_fixed(
        self, timing: FixedTiming, counts: list[int], arrival: float
    ) -> web.Response:
        """Fixed-delay mode without streaming: answer when the last token is due."""
        loop = asyncio.get_running_loop()
        await asyncio.sleep(max(0.0, arrival + timing.offset(max(counts) - 1) - loop.time()))
        words = [" " + w for w in GEN_WORDS]
        texts = ["".join(words[j % len(words)] for j in range(c)) for c in counts]
        return self._body(texts, {i: "length" for i in range(len(counts))}, sum(counts))

    async def complete(self) -> web.Response:
        texts: dict[int, list[str]] = {i: [] for i in range(len(self.handles))}
        finish: dict[int, str] = {}
        completion = 0
        try:
            async for i, chunk in _merged(self.handles):
                if chunk.token_id is not None:
                    texts[i].append(chunk.text)
                    completion += 1
                if chunk.finish_reason is not None:
                    finish[i] = chunk.finish_reason
        except asyncio.CancelledError:
            self.abort()
            raise
        if "abort" in finish.values():
            raise ApiError(
                "Request aborted: the server is shutting down.", 503, "ServiceUnavailableError"
            )
        return self._body(["".join(texts[i]) for i in range(len(self.handles))], finish, completion)

    def _body(self, outputs: list[str], finish: dict[int, str], completion: int) -> web.Response:
        choices: list[dict[str, Any]] = []
        for i, text in enumerate(outputs):
            if self.chat:
                message: dict[str, Any] = {
                    "role": "assistant",
                    "content": text.lstrip(),
                    "refusal": None,
                    "annotations": None,
                    "audio": None,
                    "function_call": None,
                    "tool_calls": [],
                    "reasoning_content": None,
                }
                choices.append(
                    {
                        "index": i,
                        "message": message,
                        "logprobs": None,
                        "finish_reason": finish.get(i),
                        "stop_reason": None,
                    }
                )
            else:
                choices.append(
                    {
                        "index": i,
                        "text": text,
                        "logprobs": None,
                        "finish_reason": finish.get(i),
                        "stop_reason": None,
                        "prompt_logprobs": None,
                    }
                )
        usage: dict[str, Any] = {**self._usage(completion), "prompt_tokens_details": None}
        body = {
            "id": self.id,
            "object": "chat.completion" if self.chat else "text_completion",
            "created": self.created,
            "model": self.ctx.served_name,
            "choices": choices,
            "usage": usage,
            "prompt_logprobs": None,
            "kv_transfer_params": None,
        }
        return _json(body)


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    arrival = asyncio.get_running_loop().time()  # fixed-delay mode counts from here
    ctx = _ctx(request)
    body = await _json_body(request)
    _check_model(ctx, body)
    _check_logprobs(ctx, body, chat)
    n = _int_field(body, "n") or 1
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ApiError("messages must be a non-empty list")
        for m in messages:
            if not isinstance(m, dict):
                raise ApiError("each message must be an object")
            message_text(m.get("content"))
        prompts = [chat_prompt_ids(ctx.tokenizer, messages, ctx.chat_template)]
        max_tokens = _int_field(body, "max_completion_tokens", "max_tokens")
    else:
        prompts = [prompt_ids(ctx.tokenizer, p, ctx.adds_bos) for p in _prompts(body)]
        if any(not ids for ids in prompts):
            raise ApiError("The decoder prompt cannot be empty")
        max_tokens = _int_field(body, "max_tokens")
        if "max_tokens" not in body:
            max_tokens = 16  # the OpenAI completions default vLLM keeps
    gen = _Generation(ctx, chat, body)
    if ctx.fixed is not None:
        counts = gen.plan_fixed(prompts, max_tokens, n)
        ctx.server_load += 1
        try:
            if body.get("stream"):
                return await gen.stream_fixed(request, ctx.fixed, counts, arrival)
            return await gen.complete_fixed(ctx.fixed, counts, arrival)
        finally:
            ctx.server_load -= 1
    gen.submit(prompts, max_tokens, n)
    ctx.server_load += 1
    try:
        if body.get("stream"):
            return await gen.stream(request)
        return await gen.complete()
    finally:
        ctx.server_load -= 1


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


async def _tokenize(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    body = await _json_body(request)
    if isinstance(body.get("messages"), list):
        ids = chat_prompt_ids(ctx.tokenizer, body["messages"], ctx.chat_template)
    else:
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):
            raise ApiError("prompt must be a string")
        ids = prompt_ids(
            ctx.tokenizer, prompt, ctx.adds_bos and body.get("add_special_tokens", True)
        )
    return _json(
        {"count": len(ids), "max_model_len": ctx.max_model_len, "tokens": ids, "token_strs": None}
    )


async def _detokenize(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    body = await _json_body(request)
    tokens = body.get("tokens")
    if not isinstance(tokens, list):
        raise ApiError("tokens must be a list of token ids")
    return _json({"prompt": ctx.tokenizer.decode(int(t) for t in tokens)})


async def _reset_prefix_cache(request: web.Request) -> web.Response:
    ok = _ctx(request).engine.scheduler.pool.reset_cache()
    return _json({"success": ok})


ROUTES: list[tuple[str, str]] = [
    ("/load", "GET"),
    ("/version", "GET"),
    ("/health", "GET"),
    ("/metrics", "GET"),
    ("/tokenize", "POST"),
    ("/detokenize", "POST"),
    ("/v1/models", "GET"),
    ("/ping", "GET"),
    ("/ping", "POST"),
    ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"),
]


def build_app(ctx: ApiContext) -> web.Application:
    """The aiohttp application serving ``ctx``."""
    app = web.Application(middlewares=[_auth])
    app[CTX_KEY] = ctx
    app.on_response_prepare.append(_server_header)
    app.router.add_get("/health", _health)
    app.router.add_get("/ping", _health)
    app.router.add_post("/ping", _health)
    app.router.add_get("/version", _version)
    app.router.add_get("/load", _load)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/tokenize", _tokenize)
    app.router.add_post("/detokenize", _detokenize)
    if ctx.dev_mode:
        app.router.add_post("/reset_prefix_cache", _reset_prefix_cache)
    return app


def access_log_target() -> logging.Logger:
    """A logger object for aiohttp's access-log plumbing (the class does the writing)."""
    return logging.getLogger("vtc.sim.access")


@contextlib.asynccontextmanager
async def running_app(
    app: web.Application, sock: Any, log: VllmLog, access_log: bool
) -> AsyncIterator[web.AppRunner]:
    """Serve ``app`` on an already bound socket until the context exits."""
    kwargs: dict[str, Any] = {"handle_signals": False}
    if access_log:
        kwargs.update(access_log_class=access_logger_class(log), access_log=access_log_target())
    else:
        kwargs["access_log"] = None
    runner = web.AppRunner(app, shutdown_timeout=0.5, **kwargs)
    await runner.setup()
    # uvicorn's default backlog (vLLM's API server): a thousand clients connecting at
    # once must not overflow the accept queue (aiohttp's default is 128).
    site = web.SockSite(runner, sock, backlog=UVICORN_BACKLOG)
    await site.start()
    try:
        yield runner
    finally:
        await runner.cleanup()
