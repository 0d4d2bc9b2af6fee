"""One OpenAI-style generation request: its engine requests and vLLM 0.32's response shapes.

The JSON is vLLM's, field for field, as the CPU captures show it (``cmpl_stream*.txt``,
``chat_stream*.txt`` taken from a real 0.32 server; ``entrypoints/openai/completion`` and
``chat_completion`` ``protocol.py`` and ``serving.py``):

- completions chunks carry ``prompt_token_ids`` and ``token_ids`` in every choice (``null``
  unless the request sets ``return_token_ids``; then the first chunk of each prompt has its
  prompt ids and every chunk its token ids);
- chat chunks: the first carries ``delta.role`` and, at the top level, ``prompt_token_ids``
  and ``prompt_text``; later choices carry ``token_ids``, the last ``stop_reason`` too;
- ``system_fingerprint`` rides on the terminal chunk, or on the usage chunk when
  ``stream_options.include_usage`` asks for one (``--fingerprint-mode``);
- non-streaming bodies have vLLM's extra keys (``service_tier``, ``kv_transfer_params``,
  ``ec_transfer_params``, ``metrics``, ``routed_experts``, ...).

With ``--enable-log-requests`` each engine request logs vLLM's ``Received request <id>:
params: SamplingParams(...), lora_request: ...`` and ``Added request <id>-<8 hex>.`` lines
(``serve/utils/request_logger.py:65``, ``v1/engine/async_llm.py:578``).
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

from tui.sim.argv import LoraModule
from tui.sim.engine import Chunk, RequestHandle
from tui.sim.scheduler import SimRequest

if TYPE_CHECKING:
    from tui.sim.api_context import ApiContext

API = "APIServer"
SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8", "Cache-Control": "no-cache"}


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

    def body(self) -> dict[str, Any]:
        """The JSON error body vLLM sends."""
        return {
            "error": {
                "message": self.message,
                "type": self.err_type,
                "param": self.param,
                "code": self.status,
            }
        }


def dumps(body: Any) -> str:
    """Compact JSON, as FastAPI and pydantic render it."""
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False)


def _num(body: dict[str, Any], name: str, default: Any) -> Any:
    value = body.get(name)
    return default if value is None else value


def sampling_params_repr(body: dict[str, Any], max_tokens: int, chat: bool) -> str:
    """``SamplingParams.__repr__`` of vLLM 0.32 (``sampling_params.py:1444``) for ``body``."""
    stop = body.get("stop")
    stop_list = [stop] if isinstance(stop, str) else list(stop or [])
    logprobs = body.get("top_logprobs") if chat and body.get("logprobs") else body.get("logprobs")
    if chat and not body.get("logprobs"):
        logprobs = None
    return (
        f"SamplingParams(n={_num(body, 'n', 1)}, "
        f"presence_penalty={float(_num(body, 'presence_penalty', 0.0))}, "
        f"frequency_penalty={float(_num(body, 'frequency_penalty', 0.0))}, "
        f"repetition_penalty={float(_num(body, 'repetition_penalty', 1.0))}, "
        f"temperature={float(_num(body, 'temperature', 1.0))}, watermarking=None, "
        f"top_p={float(_num(body, 'top_p', 1.0))}, top_k={_num(body, 'top_k', 0)}, "
        f"min_p={float(_num(body, 'min_p', 0.0))}, seed={body.get('seed')}, stop={stop_list}, "
        f"stop_token_ids={list(body.get('stop_token_ids') or [])}, bad_words=[], "
        "thinking_token_budget=None, "
        f"include_stop_str_in_output={bool(body.get('include_stop_str_in_output', False))}, "
        f"ignore_eos={bool(body.get('ignore_eos', False))}, max_tokens={max_tokens}, "
        f"min_tokens={_num(body, 'min_tokens', 0)}, logprobs={logprobs}, "
        f"prompt_logprobs={body.get('prompt_logprobs')}, "
        f"skip_special_tokens={bool(_num(body, 'skip_special_tokens', True))}, "
        "spaces_between_special_tokens="
        f"{bool(_num(body, 'spaces_between_special_tokens', True))}, "
        "structured_outputs=None, extra_args=None)"
    )


def lora_request_repr(module: LoraModule | None, int_id: int) -> str:
    """``LoRARequest``'s repr as the request logger prints it (``None`` without an adapter)."""
    if module is None:
        return "None"
    return (
        f"LoRARequest(lora_name={module.name!r}, lora_int_id={int_id}, "
        f"lora_path={module.path!r}, base_model_name={module.base_model_name!r}, "
        "load_inplace=False, is_3d_lora_weight=False)"
    )


def validate_lengths(max_model_len: int, n_prompt: int, max_tokens: int | None) -> int:
    """vLLM's request-time length checks (``renderers/params.py:521-535``); the max_tokens used."""
    mml = max_model_len
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


async def merged(handles: list[RequestHandle]) -> AsyncIterator[tuple[int, Chunk]]:
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


@dataclass
class _StreamState:
    """Per-choice progress of one streamed response."""

    started: set[int] = field(default_factory=set)
    completion: int = 0
    aborted: bool = False


class Generation:
    """One API request's engine requests, from submission to the response."""

    def __init__(
        self, ctx: ApiContext, chat: bool, body: dict[str, Any], lora: LoraModule | None = None
    ) -> None:
        self.ctx = ctx
        self.chat = chat
        self.body = body
        self.lora = lora
        self.created = int(time.time())
        self.id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex[:16]
        self.model_name = lora.name if lora is not None else ctx.served_name
        self.handles: list[RequestHandle] = []
        self.prompts: list[list[int]] = []
        self.prompt_of: list[int] = []  # handle index -> prompt index
        self.prompt_tokens = 0
        self.return_ids = bool(body.get("return_token_ids"))
        self.include_usage = bool((body.get("stream_options") or {}).get("include_usage"))

    # -- submission ----------------------------------------------------------------------------
    def _log_received(self, rid: str, max_tokens: int) -> None:
        ctx = self.ctx
        if not ctx.log_requests:
            return
        lora_id = list(ctx.loras).index(self.lora.name) + 1 if self.lora else 0
        ctx.log.info(
            API,
            ctx.log.src("request_logger.received"),
            f"Received request {rid}: params: "
            f"{sampling_params_repr(self.body, max_tokens, self.chat)}, "
            f"lora_request: {lora_request_repr(self.lora, lora_id)}.",
        )

    def _log_added(self, rid: str) -> None:
        if self.ctx.log_requests:
            suffix = uuid.uuid4().hex[:8]
            self.ctx.log.info(
                API, self.ctx.log.src("async_llm.added"), f"Added request {rid}-{suffix}."
            )

    def submit(self, prompts: list[list[int]], max_tokens: int | None, n: int) -> None:
        """Validate lengths and queue ``n`` engine requests per prompt."""
        ignore_eos = bool(self.body.get("ignore_eos", False))
        planned: list[tuple[str, list[int], int]] = []
        for k, ids in enumerate(prompts):
            used = validate_lengths(self.ctx.max_model_len, len(ids), max_tokens)
            self.prompt_tokens += len(ids)  # counted once per prompt, whatever n is
            rid = self.id if self.chat else f"{self.id}-{k}"
            self._log_received(rid, used)
            planned.append((rid, ids, used))
        self.prompts = prompts
        lora = self.lora.name if self.lora else None
        for k, (rid, ids, used) in enumerate(planned):
            for j in range(n):
                engine_id = rid if n == 1 else f"{rid}_{j}"
                self.handles.append(
                    self.ctx.engine.submit(list(ids), used, ignore_eos, engine_id, lora)
                )
                self.prompt_of.append(k)
                self._log_added(engine_id)

    def abort(self) -> None:
        """Abort every engine request (the client went away, or the stream failed)."""
        for h in self.handles:
            self.ctx.engine.abort(h)

    # -- shapes ---------------------------------------------------------------------------------
    def _ids(self, index: int, first: bool) -> list[int] | None:
        if not (self.return_ids and first):
            return None
        return self.prompts[self.prompt_of[index]] if self.prompt_of else None

    def choice(
        self,
        index: int,
        text: str,
        finish: str | None,
        token_ids: list[int] | None = None,
        first: bool = False,
    ) -> dict[str, Any]:
        """One streamed choice, in vLLM's field order."""
        ids = token_ids if self.return_ids else None
        if self.chat:
            choice: dict[str, Any] = {
                "index": index,
                "delta": {"content": text},
                "logprobs": None,
                "finish_reason": finish,
            }
            if finish is not None:
                choice["stop_reason"] = None
            choice["token_ids"] = ids
            return choice
        return {
            "index": index,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "prompt_token_ids": self._ids(index, first),
            "token_ids": ids,
        }

    def role_frame(self, index: int) -> bytes:
        """The first chat chunk: the assistant role, prompt ids at the top level."""
        obj = self._head()
        obj["choices"] = [
            {
                "index": index,
                "delta": {"role": "assistant", "content": ""},
                "logprobs": None,
                "finish_reason": None,
            }
        ]
        obj["prompt_token_ids"] = self._ids(index, True)
        obj["prompt_text"] = None
        return self._sse(obj)

    def _head(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": "chat.completion.chunk" if self.chat else "text_completion",
            "created": self.created,
            "model": self.model_name,
        }

    @staticmethod
    def _sse(obj: dict[str, Any]) -> bytes:
        return b"data: " + dumps(obj).encode() + b"\n\n"

    def frame(self, choices: list[dict[str, Any]], terminal: bool = False) -> bytes:
        """One ``data:`` chunk; the fingerprint on a terminal one when no usage chunk follows."""
        obj = self._head()
        obj["choices"] = choices
        if terminal and not self.include_usage and self.ctx.fingerprint is not None:
            obj["system_fingerprint"] = self.ctx.fingerprint
        return self._sse(obj)

    def usage_frame(self, completion: int, metrics: dict[str, float] | None = None) -> bytes:
        """The final usage chunk; ``metrics`` (0.33's per-request timings) when given,
        else no ``metrics`` key (``exclude_none``)."""
        obj = self._head()
        obj["choices"] = []
        obj["usage"] = self.usage(completion)
        if self.ctx.fingerprint is not None:
            obj["system_fingerprint"] = self.ctx.fingerprint
        # vLLM sends them only when attributable to one stream: one prompt, n=1.
        single = len(self.prompts) == 1 and int(self.body.get("n") or 1) == 1
        if metrics and self.ctx.per_request_metrics and single:
            obj["metrics"] = metrics
        return self._sse(obj)

    def request_metrics(self) -> dict[str, float] | None:
        """``PerRequestMetrics`` of the one request, as 0.33 computes it (ms; None left out)."""
        if len(self.handles) != 1:
            return None
        return per_request_metrics(self.handles[0].request)

    def usage(self, completion: int) -> dict[str, int]:
        """``prompt_tokens``, ``total_tokens``, ``completion_tokens``."""
        return {
            "prompt_tokens": self.prompt_tokens,
            "total_tokens": self.prompt_tokens + completion,
            "completion_tokens": completion,
        }

    # -- streaming ---------------------------------------------------------------------------
    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Stream the engine's tokens as SSE, then ``[DONE]``."""
        resp = web.StreamResponse(headers=SSE_HEADERS)
        await resp.prepare(request)
        state = _StreamState()
        try:
            async for i, chunk in merged(self.handles):
                await self._stream_chunk(resp, state, i, chunk)
            if state.aborted:
                return resp  # the server is shutting down: end the stream without [DONE]
            if self.include_usage:
                await resp.write(self.usage_frame(state.completion, self.request_metrics()))
            await resp.write(b"data: [DONE]\n\n")
            await resp.write_eof()
        except ConnectionResetError:
            self.abort()  # the client went away: free its sequences, as vLLM aborts them
        except BaseException:
            self.abort()
            raise
        return resp

    async def _stream_chunk(
        self, resp: web.StreamResponse, state: _StreamState, i: int, chunk: Chunk
    ) -> None:
        if chunk.finish_reason == "abort":
            state.aborted = True
            return
        if chunk.token_id is not None:
            state.completion += 1
        first = i not in state.started
        if self.chat and first:
            # vLLM's first chat chunk carries the role; it goes out with the first token.
            await resp.write(self.role_frame(i))
        state.started.add(i)
        if chunk.token_id is None and chunk.finish_reason is None:
            return
        ids = [chunk.token_id] if chunk.token_id is not None else []
        choice = self.choice(i, chunk.text, chunk.finish_reason, ids, first=first)
        await resp.write(self.frame([choice], terminal=chunk.finish_reason is not None))

    async def complete(self) -> web.Response:
        """Wait for every token; one JSON body."""
        texts: dict[int, list[str]] = {i: [] for i in range(len(self.handles))}
        ids: dict[int, list[int]] = {i: [] for i in range(len(self.handles))}
        finish: dict[int, str] = {}
        completion = 0
        try:
            async for i, chunk in merged(self.handles):
                if chunk.token_id is not None:
                    texts[i].append(chunk.text)
                    ids[i].append(chunk.token_id)
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
        outputs = ["".join(texts[i]) for i in range(len(self.handles))]
        token_ids = [ids[i] for i in range(len(self.handles))]
        return json_response(self.body_json(outputs, finish, completion, token_ids))

    def body_json(
        self,
        outputs: list[str],
        finish: dict[int, str],
        completion: int,
        token_ids: list[list[int]] | None = None,
    ) -> dict[str, Any]:
        """The non-streaming response body."""
        choices = [
            self._full_choice(i, text, finish.get(i), token_ids[i] if token_ids else None)
            for i, text in enumerate(outputs)
        ]
        usage: dict[str, Any] = {
            **self.usage(completion),
            "prompt_tokens_details": None,
            "completion_tokens_details": None,
        }
        body: dict[str, Any] = {
            **self._head(),
            "object": "chat.completion" if self.chat else "text_completion",
            "choices": choices,
            "service_tier": None,
            "system_fingerprint": self.ctx.fingerprint,
            "usage": usage,
        }
        if self.chat:
            body["prompt_logprobs"] = None
            body["prompt_token_ids"] = self._ids(0, True)
            body["prompt_text"] = None
        body.update(kv_transfer_params=None, ec_transfer_params=None, metrics=None)
        return body

    def _full_choice(
        self, i: int, text: str, finish: str | None, ids: list[int] | None
    ) -> dict[str, Any]:
        out_ids = ids if self.return_ids else None
        if self.chat:
            message = {
                "role": "assistant",
                "content": text.lstrip(),
                "refusal": None,
                "annotations": None,
                "audio": None,
                "function_call": None,
                "reasoning": None,
            }
            return {
                "index": i,
                "message": message,
                "logprobs": None,
                "finish_reason": finish,
                "stop_reason": None,
                "token_ids": out_ids,
                "routed_experts": None,
            }
        return {
            "index": i,
            "text": text,
            "logprobs": None,
            "finish_reason": finish,
            "stop_reason": None,
            "token_ids": out_ids,
            "prompt_logprobs": None,
            "prompt_token_ids": self._ids(i, True),
            "routed_experts": None,
        }


def json_response(body: Any, status: int = 200) -> web.Response:
    """A compact JSON response, as FastAPI renders them."""
    return web.Response(text=dumps(body), status=status, content_type="application/json")


def per_request_metrics(req: SimRequest) -> dict[str, float]:
    """vLLM 0.33's ``build_per_request_timing_metrics`` (``generate/base/serving.py:55-95``)
    from the simulated request's timestamps (the engine clock the histograms use)."""
    out: dict[str, float] = {}
    scheduled, first, last = req.first_scheduled, req.first_token, req.last_token
    if scheduled is not None and first is not None:
        out["time_to_first_token_ms"] = (first - scheduled) * 1000
    if first is not None and last is not None:
        out["generation_time_ms"] = (last - first) * 1000
    if scheduled is not None:
        out["queue_time_ms"] = (scheduled - req.arrival) * 1000
    generated = len(req.output_ids)
    if first is not None and last is not None and generated > 1:
        out["mean_itl_ms"] = (last - first) / (generated - 1) * 1000
    if scheduled is not None and last is not None and last > scheduled:
        out["tokens_per_second"] = generated / (last - scheduled)
    return out
