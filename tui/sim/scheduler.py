"""A continuous-batching scheduler over a paged KV cache, in the manner of vLLM v1.

Pure and clock-agnostic: :meth:`Scheduler.schedule` decides one step (which sequences run,
how many tokens each computes, which blocks they get, who is preempted) and
:meth:`Scheduler.complete` applies it once the step's time has passed. The asyncio engine
(:mod:`tui.sim.engine`) sleeps between the two; :func:`simulate` runs them on a virtual
clock for tests and what-if runs.

Rules, following vLLM v1's scheduler and KV-cache manager:

- running sequences are served first, in order, one token each while decoding, their
  remaining prompt (chunked to the step budget ``max_num_batched_tokens``) while
  prefilling; when a sequence needs a block and none is free, the most recently admitted
  running sequence is preempted (blocks freed, recomputed later from scratch);
- then waiting sequences are admitted while the batch has fewer than ``max_num_seqs``
  sequences, budget is left, and their blocks fit; no admission in a step that preempted;
- without chunked prefill a prompt is admitted only when it fits the budget whole;
- prefix caching: full blocks are identified by a hash chained over their token ids; a new
  sequence reuses the longest cached prefix (at least its last token is recomputed). Freed
  blocks stay cached until evicted (LRU). Queries/hits are counted once per request, at its
  first admission (``v1/core/kv_cache_manager.py:253-262``);
- KV usage is ``1 - free/(num_gpu_blocks - 1)``: one block is BlockPool's null block
  (``v1/core/block_pool.py:877-888``).
"""

from __future__ import annotations

from collections import OrderedDict, deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Protocol

from tui.sim.costmodel import CostModel, StepWork


def cdiv(a: int, b: int) -> int:
    """Ceiling division."""
    return -(-a // b)


class RequestStatus(StrEnum):
    """Where a request is in the engine."""

    WAITING = "waiting"
    RUNNING = "running"
    FINISHED = "finished"


@dataclass(eq=False)
class SimRequest:
    """One generation request as the engine tracks it.

    ``stop_after`` simulates the model emitting EOS: the request finishes with reason
    ``stop`` after that many tokens (``None``: only ``max_tokens`` ends it).
    """

    request_id: str
    prompt_ids: list[int]
    max_tokens: int
    stop_after: int | None = None
    arrival: float = 0.0
    lora: str | None = None  # the adapter the request runs under (None: the base model)
    output_ids: list[int] = field(default_factory=list)
    num_computed: int = 0
    block_ids: list[int] = field(default_factory=list)
    block_hashes: list[int] = field(default_factory=list)
    num_cached_blocks: int = 0
    admitted_once: bool = False
    num_preemptions: int = 0
    prefix_hit_tokens: int = 0
    status: RequestStatus = RequestStatus.WAITING
    finish_reason: str | None = None
    first_scheduled: float | None = None
    first_token: float | None = None
    last_token: float | None = None
    finished_at: float | None = None
    token_times: list[float] = field(default_factory=list)

    @property
    def num_prompt_tokens(self) -> int:
        """Prompt length in tokens."""
        return len(self.prompt_ids)

    @property
    def num_tokens(self) -> int:
        """Prompt plus generated tokens."""
        return len(self.prompt_ids) + len(self.output_ids)

    def token_at(self, i: int) -> int:
        """Token id at position ``i`` of prompt + output."""
        n = len(self.prompt_ids)
        return self.prompt_ids[i] if i < n else self.output_ids[i - n]


class BlockPool:
    """Fixed-size KV blocks with reference counts, an LRU free queue and a hash index.

    vLLM's free queue starts with every block in id order and hands blocks out from its
    front; freed blocks join its tail. Blocks never handed out are therefore always the
    first to go, so they are kept as a counter (``_fresh``) rather than a million-entry
    queue: a tiny model on a large GPU has millions of blocks.
    """

    def __init__(self, num_gpu_blocks: int) -> None:
        self.num_gpu_blocks = num_gpu_blocks
        self._ref = [0] * num_gpu_blocks
        self._hash: list[int | None] = [None] * num_gpu_blocks
        # Block 0 is the null block and is never handed out.
        self._fresh = 1 if num_gpu_blocks > 0 else 0  # next never-used block id
        self._free: OrderedDict[int, None] = OrderedDict()  # freed blocks, LRU first
        self._cached: dict[int, int] = {}

    @property
    def num_free(self) -> int:
        """Blocks not referenced by any sequence (cached-but-free ones included)."""
        return (self.num_gpu_blocks - self._fresh) + len(self._free)

    def usage(self) -> float:
        """``1 - free/(num_gpu_blocks - 1)``, 0-1."""
        usable = self.num_gpu_blocks - 1
        return 0.0 if usable <= 0 else 1.0 - self.num_free / usable

    def lookup(self, hashes: Iterable[int]) -> list[int]:
        """Block ids of the longest prefix of ``hashes`` present in the cache."""
        out = []
        for h in hashes:
            b = self._cached.get(h)
            if b is None:
                break
            out.append(b)
        return out

    def free_after_touch(self, block_ids: Iterable[int]) -> int:
        """Free blocks left once ``block_ids`` (cache hits) are referenced."""
        return self.num_free - sum(1 for b in block_ids if self._ref[b] == 0)

    def touch(self, block_ids: Iterable[int]) -> None:
        """Reference cached blocks (taking them off the free queue if unreferenced)."""
        for b in block_ids:
            if self._ref[b] == 0:
                self._free.pop(b, None)
            self._ref[b] += 1

    def allocate(self, n: int) -> list[int] | None:
        """``n`` fresh blocks from the LRU end (evicting their cached hashes), or ``None``."""
        if n > self.num_free:
            return None
        out = []
        fresh = min(n, self.num_gpu_blocks - self._fresh)
        for b in range(self._fresh, self._fresh + fresh):
            self._ref[b] = 1
            out.append(b)
        self._fresh += fresh
        for _ in range(n - fresh):
            b, _none = self._free.popitem(last=False)
            h = self._hash[b]
            if h is not None:
                if self._cached.get(h) == b:
                    del self._cached[h]
                self._hash[b] = None
            self._ref[b] = 1
            out.append(b)
        return out

    def release(self, block_ids: list[int]) -> None:
        """Drop one reference each; unreferenced blocks join the free queue tail-first."""
        for b in reversed(block_ids):
            self._ref[b] -= 1
            if self._ref[b] == 0:
                self._free[b] = None

    def cache(self, block_id: int, h: int) -> None:
        """Register a computed full block under hash ``h`` (first writer wins)."""
        if h in self._cached or self._hash[block_id] is not None:
            return
        self._cached[h] = block_id
        self._hash[block_id] = h

    def reset_cache(self) -> bool:
        """Forget all cached hashes (``/reset_prefix_cache``); fails while blocks are held."""
        if self.num_free != self.num_gpu_blocks - 1:
            return False
        self._cached.clear()
        self._hash = [None] * self.num_gpu_blocks
        return True


@dataclass(frozen=True)
class SchedulerConfig:
    """The resolved limits the scheduler works within."""

    num_gpu_blocks: int
    block_size: int
    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    max_loras: int = 0  # --max-loras with --enable-lora; 0: LoRA off

    @classmethod
    def of(
        cls, engine: EngineLimits, *, num_gpu_blocks: int, max_model_len: int, max_loras: int = 0
    ) -> SchedulerConfig:
        """The limits of a resolved ``engine`` with its KV capacity (``num_gpu_blocks``) and
        the length the memory plan settled on: the one place the simulator, the what-if
        scenarios and the twin assemble a scheduler's config."""
        return cls(
            num_gpu_blocks=num_gpu_blocks,
            block_size=engine.block_size,
            max_num_seqs=engine.max_num_seqs,
            max_num_batched_tokens=engine.max_num_batched_tokens,
            max_model_len=max_model_len,
            enable_prefix_caching=engine.enable_prefix_caching,
            enable_chunked_prefill=engine.enable_chunked_prefill,
            max_loras=max_loras,
        )


class EngineLimits(Protocol):
    """What a scheduler reads off a resolved engine config (``tui.domain.budget.EngineConfig``,
    the simulator's ``ResolvedConfig``)."""

    @property
    def block_size(self) -> int: ...
    @property
    def max_num_seqs(self) -> int: ...
    @property
    def max_num_batched_tokens(self) -> int: ...
    @property
    def enable_prefix_caching(self) -> bool: ...
    @property
    def enable_chunked_prefill(self) -> bool: ...


@dataclass
class StepPlan:
    """One step's decisions: tokens per sequence, and what happened while deciding."""

    scheduled: list[tuple[SimRequest, int]] = field(default_factory=list)
    preempted: list[SimRequest] = field(default_factory=list)
    admitted: list[SimRequest] = field(default_factory=list)
    work: StepWork = field(default_factory=StepWork)

    @property
    def empty(self) -> bool:
        """Nothing to compute."""
        return not self.scheduled


@dataclass(frozen=True)
class TokenEvent:
    """A sequence produced a token this step (and maybe finished)."""

    request: SimRequest
    token_id: int
    finished: bool


class Scheduler:
    """Waiting queue, running batch and block pool (see the module docstring)."""

    def __init__(self, config: SchedulerConfig) -> None:
        self.config = config
        self.pool = BlockPool(config.num_gpu_blocks)
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.prefix_queries = 0
        self.prefix_hits = 0
        self.num_preemptions = 0
        self.num_deferred = 0  # waiting requests skipped in the last step (LoRA budget)

    # -- requests ---------------------------------------------------------------------------
    def add(self, request: SimRequest) -> None:
        """Queue a new request."""
        request.status = RequestStatus.WAITING
        self._update_hashes(request)
        self.waiting.append(request)

    def abort(self, request: SimRequest) -> bool:
        """Remove a request wherever it is; ``False`` if it had already finished."""
        if request.status is RequestStatus.FINISHED:
            return False
        if request in self.running:
            self.running.remove(request)
            self.pool.release(request.block_ids)
            request.block_ids = []
        elif request in self.waiting:
            self.waiting.remove(request)
        request.status = RequestStatus.FINISHED
        request.finish_reason = "abort"
        return True

    def has_work(self) -> bool:
        """Anything waiting or running."""
        return bool(self.waiting or self.running)

    # -- one step -----------------------------------------------------------------------------
    def schedule(self, now: float = 0.0) -> StepPlan:
        """Decide the next step and reserve its blocks."""
        cfg = self.config
        plan = StepPlan()
        budget = cfg.max_num_batched_tokens
        i = 0
        self.num_deferred = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(req.num_tokens - req.num_computed, budget)
            if n <= 0:
                i += 1
                continue
            preempted_self = False
            while not self._grow(req, req.num_computed + n):
                victim = self.running.pop()
                self.preempt(victim)
                plan.preempted.append(victim)
                if victim is req:
                    preempted_self = True
                    break
            if preempted_self:
                break
            plan.scheduled.append((req, n))
            budget -= n
            i += 1
        if not plan.preempted:
            self._admit_waiting(plan, budget, now)
        plan.work = self._work(plan.scheduled)
        return plan

    def _admit_waiting(self, plan: StepPlan, budget: int, now: float) -> None:
        """Admit waiting requests in order while the batch, the budget and the blocks allow.

        A request whose LoRA adapter would exceed ``max_loras`` distinct adapters in the
        batch is skipped (vLLM v1's scheduler), not a barrier: later ones may still run.
        """
        cfg = self.config
        adapters = {r.lora for r in self.running if r.lora is not None}
        skipped: list[SimRequest] = []
        while self.waiting and budget > 0 and len(self.running) < cfg.max_num_seqs:
            req = self.waiting[0]
            if req.lora is not None and req.lora not in adapters and len(adapters) >= cfg.max_loras:
                skipped.append(self.waiting.popleft())
                continue
            admitted = self._admit(req, budget)
            if admitted is None:
                break
            self.waiting.popleft()
            req.status = RequestStatus.RUNNING
            if req.first_scheduled is None:
                req.first_scheduled = now
            if req.lora is not None:
                adapters.add(req.lora)
            self.running.append(req)
            plan.admitted.append(req)
            plan.scheduled.append((req, admitted))
            budget -= admitted
        self.waiting.extendleft(reversed(skipped))
        self.num_deferred = len(skipped)

    def complete(
        self, plan: StepPlan, now: float, next_token: Callable[[SimRequest], int]
    ) -> list[TokenEvent]:
        """Apply a step that has run: advance sequences, sample tokens, finish requests."""
        events: list[TokenEvent] = []
        bs = self.config.block_size
        for req, n in plan.scheduled:
            if req.status is not RequestStatus.RUNNING:
                continue  # aborted while the step ran
            req.num_computed += n
            if self.config.enable_prefix_caching:
                full = min(req.num_computed // bs, len(req.block_hashes), len(req.block_ids))
                for j in range(req.num_cached_blocks, full):
                    self.pool.cache(req.block_ids[j], req.block_hashes[j])
                req.num_cached_blocks = max(req.num_cached_blocks, full)
            if req.num_computed < req.num_tokens:
                continue  # prefill chunk: no token yet
            token = next_token(req)
            req.output_ids.append(token)
            self._update_hashes(req)
            if req.first_token is None:
                req.first_token = now
            req.last_token = now
            req.token_times.append(now)
            reason = None
            if req.stop_after is not None and len(req.output_ids) >= req.stop_after:
                reason = "stop"
            if len(req.output_ids) >= req.max_tokens or req.num_tokens >= self.config.max_model_len:
                reason = reason or "length"
            if reason is not None:
                self._finish(req, reason, now)
            events.append(TokenEvent(req, token, reason is not None))
        return events

    # -- internals ----------------------------------------------------------------------------
    def _update_hashes(self, req: SimRequest) -> None:
        if not self.config.enable_prefix_caching:
            return
        bs = self.config.block_size
        full = req.num_tokens // bs
        # vLLM's block hashes carry the adapter as an extra key: no sharing across adapters.
        start = len(req.block_hashes)
        if start >= full:
            return
        parent = req.block_hashes[-1] if req.block_hashes else hash(("lora", req.lora))
        tokens = req.prompt_ids + req.output_ids if req.output_ids else req.prompt_ids
        for j in range(start, full):
            parent = hash((parent, tuple(tokens[j * bs : (j + 1) * bs])))
            req.block_hashes.append(parent)

    def _grow(self, req: SimRequest, total_tokens: int) -> bool:
        need = cdiv(total_tokens, self.config.block_size) - len(req.block_ids)
        if need <= 0:
            return True
        new = self.pool.allocate(need)
        if new is None:
            return False
        req.block_ids.extend(new)
        return True

    def preempt(self, req: SimRequest) -> None:
        """Free ``req``'s blocks and put it back first in line (recomputed from scratch)."""
        self.pool.release(req.block_ids)
        req.block_ids = []
        req.num_computed = 0
        req.num_cached_blocks = 0
        req.num_preemptions += 1
        req.status = RequestStatus.WAITING
        self.num_preemptions += 1
        self.waiting.appendleft(req)

    def _admit(self, req: SimRequest, budget: int) -> int | None:
        """Reserve blocks for ``req``'s first chunk; its token count, or ``None`` if it waits."""
        cfg = self.config
        bs = cfg.block_size
        hits: list[int] = []
        if cfg.enable_prefix_caching:
            max_hit_blocks = (req.num_tokens - 1) // bs
            hits = self.pool.lookup(req.block_hashes[:max_hit_blocks])
        computed = len(hits) * bs
        n = req.num_tokens - computed
        if not cfg.enable_chunked_prefill and n > budget:
            return None
        n = min(n, budget)
        need = cdiv(computed + n, bs) - len(hits)
        if need > self.pool.free_after_touch(hits):
            return None
        self.pool.touch(hits)
        new = self.pool.allocate(need) or []
        req.block_ids = hits + new
        req.num_cached_blocks = len(hits)
        req.num_computed = computed
        if not req.admitted_once:
            req.admitted_once = True
            req.prefix_hit_tokens = computed
            if cfg.enable_prefix_caching:
                self.prefix_queries += req.num_prompt_tokens
                self.prefix_hits += computed
        return n

    def _finish(self, req: SimRequest, reason: str, now: float) -> None:
        if req in self.running:
            self.running.remove(req)
        self.pool.release(req.block_ids)
        req.block_ids = []
        req.status = RequestStatus.FINISHED
        req.finish_reason = reason
        req.finished_at = now

    @staticmethod
    def _work(scheduled: list[tuple[SimRequest, int]]) -> StepWork:
        prefill = decode = context = pairs = lora_tokens = decode_context = sampled = 0
        adapters: set[str] = set()
        for req, n in scheduled:
            if req.lora is not None:
                lora_tokens += n
                adapters.add(req.lora)
            is_decode = n == 1 and req.num_computed == req.num_tokens - 1 and req.output_ids
            if is_decode:
                decode += 1
                decode_context += req.num_computed + 1
            else:
                prefill += n
            sampled += req.num_computed + n >= req.num_tokens
            context += req.num_computed + n
            pairs += n * req.num_computed + n * (n + 1) // 2
        return StepWork(
            prefill_tokens=prefill,
            decode_seqs=decode,
            context_tokens=context,
            attention_pairs=pairs,
            decode_context_tokens=decode_context,
            num_seqs=len(scheduled),
            sampled_seqs=sampled,
            lora_tokens=lora_tokens,
            lora_adapters=len(adapters),
        )


@dataclass(frozen=True)
class SimulationResult:
    """Outcome of :func:`simulate`, in simulated seconds."""

    duration: float
    requests: list[SimRequest]
    steps: int
    num_preemptions: int
    prefix_queries: int
    prefix_hits: int

    @property
    def output_tokens(self) -> int:
        """Tokens generated over all requests."""
        return sum(len(r.output_ids) for r in self.requests)

    @property
    def output_throughput(self) -> float:
        """Generated tokens per simulated second."""
        return self.output_tokens / self.duration if self.duration > 0 else 0.0


def simulate(
    config: SchedulerConfig,
    cost: CostModel,
    requests: list[SimRequest],
    max_steps: int = 1_000_000,
) -> SimulationResult:
    """Run ``requests`` (each arriving at its ``arrival``) to completion on a virtual clock."""
    sched = Scheduler(config)
    pending = sorted(requests, key=lambda r: r.arrival)
    now = 0.0
    steps = 0
    k = 0
    while (k < len(pending) or sched.has_work()) and steps < max_steps:
        while k < len(pending) and pending[k].arrival <= now:
            sched.add(pending[k])
            k += 1
        if not sched.has_work():
            now = pending[k].arrival
            continue
        plan = sched.schedule(now)
        if plan.empty:
            if k < len(pending):
                now = max(now, pending[k].arrival)
                continue
            break  # nothing can ever run (a request larger than the cache)
        now += cost.step_time(plan.work)
        sched.complete(plan, now, lambda r: 1000 + len(r.output_ids))
        steps += 1
    return SimulationResult(
        duration=now,
        requests=requests,
        steps=steps,
        num_preemptions=sched.num_preemptions,
        prefix_queries=sched.prefix_queries,
        prefix_hits=sched.prefix_hits,
    )
