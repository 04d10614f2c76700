"""The sim server's continuous batcher: deterministic token rates, SGLang's Prefill/Decode log lines.

Rate model (per server, P = token_rate_per_gpu * tp, H = half_concurrency, a = accept length):
    one decode iteration over C running requests takes  t(C) = (C + H) / P  seconds,
    each request gains a tokens per iteration (a = 1 without speculative decoding), so
    total_tok_s(C) = a * P * C / (C + H)    and    per_request_tok_s(C) = a * P / (C + H).
Throughput rises with concurrency and saturates at a*P; C is capped by max_running_requests and
the KV pool (extra requests wait: #queue-req). P = inf (DFLASH_SIM_TOKEN_RATE=inf) is zero-delay.
Prefill of N new tokens takes N / (20 * P) seconds. Logs: docs/sglang.md §2.1-2.3.

Speculative decoding: each of the d - 1 draft tokens of a verify step is accepted in turn with probability p
(per algorithm, `SPEC_ACCEPT_P`), so a = 1 + p + ... + p^(d-1) (the bonus token included, as SGLang counts it).
Sampling with temperature T > 0 lowers p for the EAGLE family (p * (1 - 0.4 * min(T, 1))); DFLASH verifies greedily
whatever was asked, so its p is unchanged and it warns once, as SGLang's DFlashWorker does.
"""

from __future__ import annotations

import asyncio
import math
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from console.sim import logs

WORDS = (
    "The",
    " answer",
    " is",
    " simple",
    ":",
    " the",
    " system",
    " scales",
    " with",
    " load",
    ",",
    " and",
    " each",
    " request",
    " shares",
    " the",
    " GPU",
    " fairly",
    ".",
    " Tokens",
    " stream",
    " back",
    " as",
    " they",
    " are",
    " decoded",
    ";",
    " latency",
    " grows",
    " when",
    " the",
    " batch",
    " fills",
    " up",
    ".",
)
THINK = (
    " Let",
    " me",
    " think",
    " about",
    " this",
    " step",
    " by",
    " step",
    ".",
    " First",
    ",",
    " consider",
    " the",
    " question",
    " carefully",
    ".",
    " Then",
    " check",
    " the",
    " details",
    ".",
)


@dataclass
class Request:
    """One generation request inside the batcher."""

    prompt_tokens: int
    max_new_tokens: int
    ignore_eos: bool = False
    reasoning: bool = False
    rid: str = field(default_factory=lambda: uuid.uuid4().hex)
    out: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    generated: int = 0
    reasoning_tokens: int = 0
    finish: str | None = None
    acc: float = 0.0
    t_arrive: float = field(default_factory=time.perf_counter)
    t_first: float | None = None
    temperature: float = 0.0

    @property
    def natural_len(self) -> int:
        return 24 + int(self.rid[:4], 16) % 40 + (len(THINK) if self.reasoning else 0)

    def next_piece(self) -> tuple[str, bool]:
        """(text, is_reasoning) for the next token."""
        i = self.generated
        if self.reasoning and i < len(THINK):
            return THINK[i], True
        j = i - (len(THINK) if self.reasoning else 0)
        return WORDS[j % len(WORDS)], False


SPEC_ACCEPT_P = {"DFLASH": 0.69, "EAGLE": 0.8, "EAGLE3": 0.62, "STANDALONE": 0.55, "NGRAM": 0.3}
"""Per-draft-token acceptance in the sim: an MTP head (NEXTN, run as EAGLE) at 1 step gives ~1.8, a DFlash drafter
at block 16 ~3.2, as the team sees them."""
GREEDY_ONLY = (
    "DFLASH currently supports greedy verification only; ignoring non-greedy sampling params "
    "(e.g. temperature/top_p/top_k) and using argmax."
)


def geometric_accept(p: float, d: int) -> float:
    """Expected accept length of a verify width `d`: drafts accepted in turn with probability `p`, plus the bonus."""
    return sum(p**k for k in range(max(1, d)))


class Engine:
    """Admits, prefills and decodes requests; see the module docstring for the timing formula."""

    def __init__(
        self,
        *,
        peak_per_gpu: float,
        tp: int,
        half: float,
        max_running: int,
        max_tokens: int,
        prefix: str,
        hybrid: bool,
        mamba_slots: int,
        accept_len: float = 1.0,
        draft_tokens: int = 1,
        log_interval: int = 40,
        algorithm: str | None = None,
    ) -> None:
        self.peak_per_gpu, self.tp, self.half = peak_per_gpu, tp, half
        self.max_running, self.max_tokens, self.prefix = max_running, max(1, max_tokens), prefix
        self.hybrid, self.mamba_slots = hybrid, max(1, mamba_slots)
        self.accept_len, self.draft_tokens, self.log_interval = accept_len, draft_tokens, max(1, log_interval)
        self.algorithm = algorithm
        self.accept_p = SPEC_ACCEPT_P.get(algorithm or "", 0.0)
        """Per-draft acceptance now (`sim: drafter collapse` sets it near 0); accept_len follows it."""
        self._acc_sum, self._acc_n = 0.0, 0
        self.total_acc, self.total_verify = 0.0, 0
        """Lifetime accepted tokens and verify steps: /server_info's avg_spec_accept_length."""
        self.warned_greedy = False
        self.last_accept_len = accept_len
        """The accept length of the last Decode line (the /metrics gauge)."""
        self.waiting: list[Request] = []
        self.running: list[Request] = []
        self.wake = asyncio.Event()
        self.forward_ct = 0
        self.last_tic = time.perf_counter()
        self.tokens_since = 0
        self.last_gen_throughput = 0.0
        self.slow = 1.0
        self.counters = {"prompt_tokens": 0, "generation_tokens": 0, "num_requests": 0, "cached_tokens": 0}
        self.ttfts: list[float] = []
        self.e2es: list[float] = []

    @property
    def peak(self) -> float:
        return self.peak_per_gpu * self.tp / self.slow

    def iteration_time(self, c: int) -> float:
        return 0.0 if math.isinf(self.peak) else (c + self.half) / self.peak

    def total_tok_s(self, c: int) -> float:
        """The documented throughput at concurrency c (what a bench should measure)."""
        return self.accept_len * self.peak * c / (c + self.half)

    def submit(self, req: Request) -> None:
        self.counters["num_requests"] += 1
        self.waiting.append(req)
        self.wake.set()

    def used_tokens(self) -> int:
        return sum(r.prompt_tokens + r.generated for r in self.running)

    def busy(self) -> float:
        """GPU utilisation % implied by the current batch."""
        return 0.0 if not self.running else min(100.0, 70.0 + 30.0 * len(self.running) / (len(self.running) + 4))

    def usage_fragment(self, decode: bool) -> str:
        used = self.used_tokens()
        u = used / self.max_tokens
        if self.hybrid:
            m = len(self.running) / self.mamba_slots
            return (
                (
                    f"#full token: {used}, full token usage: {u:.2f}, mamba num: {len(self.running)}, "
                    f"mamba usage: {m:.2f}, "
                )
                if decode
                else f"full token usage: {u:.2f}, mamba usage: {m:.2f}, "
            )
        return f"#token: {used}, token usage: {u:.2f}, " if decode else f"token usage: {u:.2f}, "

    def _admit(self) -> list[Request]:
        new: list[Request] = []
        budget = self.max_tokens - sum(r.prompt_tokens + r.max_new_tokens for r in self.running)
        while self.waiting and len(self.running) + len(new) < self.max_running:
            r = self.waiting[0]
            need = min(r.prompt_tokens + r.max_new_tokens, self.max_tokens)
            if need > budget and (self.running or new):
                break
            budget -= need
            new.append(self.waiting.pop(0))
        return new

    async def run(self) -> None:
        deadline = time.perf_counter()
        while True:
            new = self._admit()
            if new:
                n_tok = sum(r.prompt_tokens for r in new)
                t = 0.0 if math.isinf(self.peak) else n_tok / (20 * self.peak)
                t0 = time.perf_counter()
                await asyncio.sleep(t)
                self.running += new
                self.counters["prompt_tokens"] += n_tok
                thr = n_tok / max(1e-6, time.perf_counter() - t0)
                logs.line(
                    f"Prefill batch, #new-seq: {len(new)}, #new-token: {n_tok}, #cached-token: 0, "
                    f"{self.usage_fragment(False)}#running-req: {len(self.running) - len(new)}, "
                    f"#queue-req: {len(self.waiting)}, #pending-token: 0, cuda graph: False, "
                    f"input throughput (token/s): {thr:.2f}",
                    self.prefix,
                )
                deadline = time.perf_counter()
            if not self.running:
                self.wake.clear()
                await self.wake.wait()
                deadline = time.perf_counter()
                continue
            deadline += self.iteration_time(len(self.running))
            await asyncio.sleep(max(0.0, deadline - time.perf_counter()))
            self._step()

    def _step(self) -> None:
        now = time.perf_counter()
        produced = 0
        for r in self.running:
            a = self.request_accept(r)
            if self.draft_tokens > 1:
                self._acc_sum += a
                self._acc_n += 1
                self.total_acc += a
                self.total_verify += 1
            r.acc += a
            n, r.acc = int(r.acc), r.acc - int(r.acc)
            for _ in range(n):
                text, thinking = r.next_piece()
                r.generated += 1
                r.reasoning_tokens += thinking
                produced += 1
                if r.t_first is None:
                    r.t_first = now
                    self.ttfts.append(now - r.t_arrive)
                done = r.generated >= r.max_new_tokens or (not r.ignore_eos and r.generated >= r.natural_len)
                if done:
                    r.finish = "length" if r.generated >= r.max_new_tokens else "stop"
                r.out.put_nowait((text, thinking))
                if done:
                    self.e2es.append(now - r.t_arrive)
                    r.out.put_nowait(None)
                    break
        self.counters["generation_tokens"] += produced
        self.tokens_since += produced
        self.forward_ct += 1
        if self.forward_ct % self.log_interval == 0:
            self._log_decode()
        self.running = [r for r in self.running if r.finish is None]

    def set_accept_p(self, p: float | None) -> None:
        """The drafter's acceptance (None: the algorithm's own); the documented accept length follows."""
        self.accept_p = SPEC_ACCEPT_P.get(self.algorithm or "", 0.0) if p is None else max(0.0, min(1.0, p))
        if self.draft_tokens > 1:
            self.accept_len = geometric_accept(self.accept_p, self.draft_tokens)

    def request_accept(self, r: Request) -> float:
        """Tokens one verify step gives this request: the accept length at its temperature."""
        if self.draft_tokens <= 1:
            return self.accept_len
        p = self.accept_p
        if r.temperature > 0:
            if self.algorithm == "DFLASH":
                if not self.warned_greedy:
                    self.warned_greedy = True
                    logs.line(GREEDY_ONLY, self.prefix)
            else:
                p *= 1 - 0.4 * min(r.temperature, 1.0)
        return geometric_accept(p, self.draft_tokens)

    @property
    def avg_accept_len(self) -> float:
        """Lifetime mean accept length (what SGLang reports as avg_spec_accept_length)."""
        return self.total_acc / self.total_verify if self.total_verify else self.accept_len

    def _log_decode(self) -> None:
        now = time.perf_counter()
        self.last_gen_throughput = self.tokens_since / max(1e-6, now - self.last_tic)
        self.last_tic, self.tokens_since = now, 0
        spec = ""
        if self.draft_tokens > 1:
            acc = self._acc_sum / self._acc_n if self._acc_n else self.accept_len
            self._acc_sum, self._acc_n = 0.0, 0
            self.last_accept_len = acc
            rate = (acc - 1) / (self.draft_tokens - 1)
            spec = f"accept len: {acc:.2f}, accept rate: {rate:.2f}, "
        logs.line(
            f"Decode batch, #running-req: {len(self.running)}, {self.usage_fragment(True)}{spec}cuda graph: True, "
            f"gen throughput (token/s): {self.last_gen_throughput:.2f}, #queue-req: {len(self.waiting)}",
            self.prefix,
        )
