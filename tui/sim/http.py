"""The simulator's HTTP API: vLLM's OpenAI-compatible endpoints on aiohttp.

Endpoints and shapes follow reference section 6 and the CPU captures (``endpoints.txt``):
``/health`` and ``/ping`` (200, empty), ``/version``, ``/v1/models`` (with
``max_model_len``; LoRA adapters listed after the base model with their ``root`` path and
``parent``), ``/load``, ``/metrics``, ``/tokenize``, ``/detokenize``, ``/kv_event_sources``,
``POST /v1/completions`` and ``POST /v1/chat/completions`` (streaming as SSE, see
:mod:`tui.sim.generation`). A request names an adapter as its ``model`` to run under it.
With ``VLLM_SERVER_DEV_MODE=1``: ``/reset_prefix_cache`` (``?reset_running_requests=``),
``/reset_mm_cache``, ``/reset_encoder_cache``, ``/is_sleeping`` (what auto_tune.sh and
``vllm bench sweep serve`` call). With an API key, ``/v1/*`` needs ``Authorization: Bearer
<key>`` and answers 401 ``{"error": "Unauthorized"}`` otherwise. Request errors use vLLM's
``{"error": {"message", "type", "param", "code"}}`` body and texts (reference 1.5), paths in
messages replaced by ``<path>`` as vLLM's ``sanitize_message`` does. Every request outside
vLLM's exclusions is counted in the ``http_*`` families, as prometheus-fastapi-instrumentator
counts them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from typing import Any

from aiohttp import web
from aiohttp.abc import AbstractAccessLogger
from prometheus_client import CONTENT_TYPE_LATEST

from tui.sim.api_context import ApiContext
from tui.sim.argv import LoraModule
from tui.sim.fixed import complete_fixed, plan_fixed, stream_fixed
from tui.sim.generation import API, ApiError, Generation, json_response
from tui.sim.logs import VllmLog, uvicorn_access_line
from tui.sim.metric_tables import HTTP_EXCLUDED
from tui.sim.tokenizer import ChatTemplateError, message_text

AUTH_PREFIXES = ("/v1", "/v2", "/inference", "/cohere")
UVICORN_BACKLOG = 2048


CTX_KEY = web.AppKey("ctx", ApiContext)


def sanitize_message(message: str) -> str:
    """vLLM's ``sanitize_message`` (``serve/exception_handling/utils.py``): no paths."""
    message = re.sub(r"/(?:home|usr|opt|var|tmp|root|lib|mnt|srv)(?:/[\w.\-]+)+", "<path>", message)
    message = re.sub(r"(?:/[\w\-]+)+/[\w\-]+\.\w+", "<path>", message)
    return message.strip()


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


def _ctx(request: web.Request) -> ApiContext:
    return request.app[CTX_KEY]


def _handler_name(request: web.Request) -> str:
    """The route template, or ``none`` for unmatched paths (the instrumentator's grouping)."""
    info = request.match_info
    if isinstance(info, web.UrlMappingMatchInfo) and info.http_exception is None:
        resource = info.route.resource
        if resource is not None:
            return resource.canonical
    return "none"


@web.middleware
async def _instrument(
    request: web.Request, handler: Callable[[web.Request], Any]
) -> web.StreamResponse:
    """The ``http_*`` metrics of every request outside vLLM's exclusions."""
    name = _handler_name(request)
    if name in HTTP_EXCLUDED:
        response: web.StreamResponse = await handler(request)
        return response
    start = time.perf_counter()
    status = 500
    response_bytes = 0
    try:
        response = await handler(request)
        status = response.status
        response_bytes = response.content_length or 0
        return response
    except web.HTTPException as exc:
        status = exc.status
        raise
    finally:
        _ctx(request).metrics.http.observe(
            name,
            request.method,
            status,
            time.perf_counter() - start,
            request.content_length or 0,
            response_bytes,
        )


@web.middleware
async def _auth(request: web.Request, handler: Callable[[web.Request], Any]) -> web.StreamResponse:
    ctx = _ctx(request)
    guarded = ctx.api_key and request.method != "OPTIONS" and request.path.startswith(AUTH_PREFIXES)
    if guarded and request.headers.get("Authorization") != f"Bearer {ctx.api_key}":
        return json_response({"error": "Unauthorized"}, status=401)
    try:
        response: web.StreamResponse = await handler(request)
        return response
    except ApiError as exc:
        return json_response(exc.body(), status=exc.status)


async def _server_header(request: web.Request, response: web.StreamResponse) -> None:
    response.headers["Server"] = "uvicorn"


async def _health(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def _version(request: web.Request) -> web.Response:
    return json_response({"version": _ctx(request).log.version})


async def _load(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    return json_response({"server_load": ctx.server_load if ctx.load_tracking else 0})


async def _metrics(request: web.Request) -> web.Response:
    body = _ctx(request).metrics.render()
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})


async def _kv_event_sources(request: web.Request) -> web.Response:
    return json_response({})


def _card(model_id: str, root: str, parent: str | None, max_len: int | None, now: int) -> Any:
    return {
        "id": model_id,
        "object": "model",
        "created": now,
        "owned_by": "vllm",
        "root": root,
        "parent": parent,
        "max_model_len": max_len,
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


async def _models(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    now = int(time.time())
    cards = [_card(ctx.served_name, ctx.model_path, None, ctx.max_model_len, now)]
    for lora in ctx.loras.values():
        parent = lora.base_model_name or ctx.served_name
        cards.append(_card(lora.name, lora.path, parent, None, now))
    return json_response({"object": "list", "data": cards})


async def _json_body(request: web.Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"JSON decode error: {exc}") from exc
    if not isinstance(body, dict):
        raise ApiError("Request body must be a JSON object")
    return body


def _resolve_model(ctx: ApiContext, body: dict[str, Any]) -> LoraModule | None:
    """The adapter a request names as its ``model`` (``None``: the base model)."""
    model = body.get("model")
    if model is None or model in (ctx.served_name, ctx.model_path, ""):
        return None
    if isinstance(model, str) and model in ctx.loras:
        return ctx.loras[model]
    message = f"The model `{model}` does not exist. Valid aliases: {ctx.served_name}."
    raise ApiError(sanitize_message(message), 404, "NotFoundError", "model")


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
        if all(
            isinstance(p, list) and all(isinstance(t, int) and not isinstance(t, bool) for t in p)
            for p in prompt
        ):
            return [[int(t) for t in p] for p in prompt]
    raise ApiError("prompt must be a string, a list of strings or a list of token ids")


def _messages(body: dict[str, Any]) -> list[dict[str, Any]]:
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError("messages must be a non-empty list")
    for m in messages:
        if not isinstance(m, dict):
            raise ApiError("each message must be an object")
        message_text(m.get("content"))
    return messages


def _chat_ids(ctx: ApiContext, messages: list[dict[str, Any]], body: dict[str, Any]) -> list[int]:
    try:
        return ctx.tokenizer.chat_ids(messages, bool(body.get("add_generation_prompt", True)))
    except ChatTemplateError as exc:
        raise ApiError(sanitize_message(str(exc))) from exc


def _request_prompts(
    ctx: ApiContext, body: dict[str, Any], chat: bool
) -> tuple[list[list[int]], int | None]:
    """Token ids of each prompt, and the requested ``max_tokens``."""
    if chat:
        prompts = [_chat_ids(ctx, _messages(body), body)]
        return prompts, _int_field(body, "max_completion_tokens", "max_tokens")
    add_special = bool(body.get("add_special_tokens", True))
    prompts = [ctx.tokenizer.prompt_ids(p, add_special) for p in _prompts(body)]
    if any(not ids for ids in prompts):
        raise ApiError("The decoder prompt cannot be empty")
    max_tokens = _int_field(body, "max_tokens")
    if "max_tokens" not in body:
        max_tokens = 16  # the OpenAI completions default vLLM keeps
    return prompts, max_tokens


async def _generate(request: web.Request, chat: bool) -> web.StreamResponse:
    arrival = asyncio.get_running_loop().time()  # fixed-delay mode counts from here
    ctx = _ctx(request)
    body = await _json_body(request)
    lora = _resolve_model(ctx, body)
    _check_logprobs(ctx, body, chat)
    n = _int_field(body, "n") or 1
    prompts, max_tokens = _request_prompts(ctx, body, chat)
    gen = Generation(ctx, chat, body, lora)
    ctx.server_load += 1
    try:
        if ctx.fixed is not None:
            counts = plan_fixed(gen, prompts, max_tokens, n)
            if body.get("stream"):
                return await stream_fixed(gen, request, ctx.fixed, counts, arrival)
            return await complete_fixed(gen, ctx.fixed, counts, arrival)
        gen.submit(prompts, max_tokens, n)
        if body.get("stream"):
            return await gen.stream(request)
        return await gen.complete()
    finally:
        ctx.server_load -= 1


async def _completions(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=False)


async def _chat(request: web.Request) -> web.StreamResponse:
    return await _generate(request, chat=True)


def _log_tokenize_request(ctx: ApiContext) -> None:
    if ctx.log_requests:
        rid = f"tokenize-{uuid.uuid4().hex[:16]}"
        ctx.log.info(
            API,
            ctx.log.src("request_logger.received"),
            f"Received request {rid}: params: None, lora_request: None.",
        )


async def _tokenize(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    body = await _json_body(request)
    _log_tokenize_request(ctx)
    if isinstance(body.get("messages"), list):
        ids = _chat_ids(ctx, _messages(body), body)
    else:
        prompt = body.get("prompt", "")
        if not isinstance(prompt, str):
            raise ApiError("prompt must be a string")
        ids = ctx.tokenizer.prompt_ids(prompt, bool(body.get("add_special_tokens", True)))
    strs = ctx.tokenizer.token_strs(ids) if body.get("return_token_strs") else None
    return json_response(
        {"count": len(ids), "max_model_len": ctx.max_model_len, "tokens": ids, "token_strs": strs}
    )


async def _detokenize(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    body = await _json_body(request)
    tokens = body.get("tokens")
    if not isinstance(tokens, list) or not all(
        isinstance(t, int) and not isinstance(t, bool) for t in tokens
    ):
        raise ApiError("tokens must be a list of token ids")
    _log_tokenize_request(ctx)
    return json_response({"prompt": ctx.tokenizer.decode(tokens)})


def _query_flag(request: web.Request, name: str) -> bool:
    value = request.query.get(name, "false").strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off", ""):
        return False
    raise ApiError(f"Input should be a valid boolean, unable to interpret input: {value!r}")


async def _reset_prefix_cache(request: web.Request) -> web.Response:
    ctx = _ctx(request)
    running = _query_flag(request, "reset_running_requests")
    _query_flag(request, "reset_external")
    ctx.log.info(API, ctx.log.src("cache_router.reset"), "Resetting prefix cache...")
    ok = ctx.engine.reset_prefix_cache(running)
    return json_response({"success": ok})


def _reset_note(message: str, line: int) -> Callable[[web.Request], Any]:
    async def handler(request: web.Request) -> web.Response:
        _ctx(request).log.info(API, f"api_router.py:{line}", message)
        return web.Response(status=200)

    return handler


async def _is_sleeping(request: web.Request) -> web.Response:
    return json_response({"is_sleeping": False})


ROUTES: list[tuple[str, str]] = [
    ("/load", "GET"),
    ("/version", "GET"),
    ("/kv_event_sources", "GET"),
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


def dev_routes() -> list[tuple[str, str]]:
    """The development endpoints the simulator serves with ``VLLM_SERVER_DEV_MODE=1``."""
    return [
        ("/reset_prefix_cache", "POST"),
        ("/reset_mm_cache", "POST"),
        ("/reset_encoder_cache", "POST"),
        ("/is_sleeping", "GET"),
    ]


def build_app(ctx: ApiContext) -> web.Application:
    """The aiohttp application serving ``ctx``."""
    app = web.Application(middlewares=[_instrument, _auth])
    app[CTX_KEY] = ctx
    app.on_response_prepare.append(_server_header)
    app.router.add_get("/health", _health)
    app.router.add_get("/ping", _health)
    app.router.add_post("/ping", _health)
    app.router.add_get("/version", _version)
    app.router.add_get("/load", _load)
    app.router.add_get("/metrics", _metrics)
    app.router.add_get("/kv_event_sources", _kv_event_sources)
    app.router.add_get("/v1/models", _models)
    app.router.add_post("/v1/completions", _completions)
    app.router.add_post("/v1/chat/completions", _chat)
    app.router.add_post("/tokenize", _tokenize)
    app.router.add_post("/detokenize", _detokenize)
    if ctx.dev_mode:
        app.router.add_post("/reset_prefix_cache", _reset_prefix_cache)
        app.router.add_post("/reset_mm_cache", _reset_note("Resetting multi-modal cache...", 52))
        app.router.add_post("/reset_encoder_cache", _reset_note("Resetting encoder cache...", 62))
        app.router.add_get("/is_sleeping", _is_sleeping)
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
