"""Async HTTP client for one SGLang server: readiness, info, /metrics, streaming chat with client-side timings.

Readiness is `/health` answering 200 (503 = warming, refused = not up); `/v1/models` is never used
for it. Every failure is a `ClientError` subclass with a one-line message. Secrets never leave here:
`/server_info` is redacted, and `curl_command` shows the API key as `$ENV_VAR`.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import json
import os
import shlex
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx

from console import hostjson
from console.sglang.aio_streams import use_asyncio_streams
from console.sglang.httpbound import (
    HEALTH_DEADLINE_S,
    HEALTH_MAX_BYTES,
    JSON_MAX_BYTES,
    METRICS_DEADLINE_S,
    METRICS_MAX_BYTES,
    BodyTooLarge,
    Deadline,
    get_bounded,
    read_capped,
    sse_data,
)
from console.sglang.logfacts import is_secret_key
from console.sglang.metrics import Metrics, parse_metrics

# --- errors -------------------------------------------------------------------------------------------


class ClientError(Exception):
    """One-line, user-facing failure."""

    def __init__(self, url: str, message: str) -> None:
        self.url = url
        self.message = message
        super().__init__(f"{url}: {message}")


class NotUp(ClientError):
    """Connection refused / unreachable: nothing listens yet (or any more)."""


class Warming(ClientError):
    """503: the server is up but still warming up (or draining)."""


class Unauthorized(ClientError):
    """401: missing or wrong API key."""


class Timeout(ClientError):
    """No complete answer within the request's total deadline."""


class TooLarge(ClientError):
    """The answer passed its size cap (a /metrics of many MiB, an SSE line with no end)."""


class HTTPStatus(ClientError):
    def __init__(self, url: str, status: int, body: str) -> None:
        self.status = status
        super().__init__(url, f"HTTP {status}: {body.strip()[:200] or 'no body'}")


class Malformed(ClientError):
    """The server answered something that is not what SGLang sends (bad JSON, bad SSE event)."""


class ServerReportedError(ClientError):
    """The stream carried `data: {"error": ...}`."""


# --- results ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Health:
    state: Literal["ready", "warming", "down"]
    status: int | None
    latency_s: float
    message: str = ""

    @property
    def ready(self) -> bool:
        return self.state == "ready"


@dataclass(frozen=True)
class ReasoningDelta:
    text: str
    t: float
    kind: Literal["reasoning"] = "reasoning"


@dataclass(frozen=True)
class ContentDelta:
    text: str
    t: float
    kind: Literal["content"] = "content"


@dataclass(frozen=True)
class Finish:
    reason: str | None
    matched_stop: int | str | None
    t: float
    kind: Literal["finish"] = "finish"


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None
    kind: Literal["usage"] = "usage"


@dataclass(frozen=True)
class StreamStats:
    """Client-side timings, sent last: TTFT, inter-token gaps, decode tokens/s."""

    ttft_s: float | None
    inter_token_s: tuple[float, ...]
    tokens: int
    total_s: float
    kind: Literal["stats"] = "stats"

    @property
    def tokens_per_s(self) -> float | None:
        if self.ttft_s is None or self.tokens < 2:
            return None
        gen = self.total_s - self.ttft_s
        return (self.tokens - 1) / gen if gen > 0 else None


ChatEvent = ReasoningDelta | ContentDelta | Finish | Usage | StreamStats


@dataclass(frozen=True)
class ProbeResult:
    health: Health
    model_info: dict[str, Any] | None
    text: str
    reasoning: str
    stats: StreamStats | None
    usage: Usage | None
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.health.ready and self.error is None


PROBE_DEADLINE_S = 60.0
"""A probe is health, /model_info and 16 tokens: seconds on any real server, so a minute means it is stuck."""

# --- helpers ------------------------------------------------------------------------------------------


def redact(obj: Any) -> Any:
    """Drop every secret-looking key (api_key, *secret*, *password*, a `token` word), recursively."""
    if isinstance(obj, dict):
        return {k: redact(v) for k, v in obj.items() if not is_secret_key(str(k))}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def chat_body(
    messages: list[dict[str, Any]],
    *,
    model: str = "default",
    max_tokens: int = 256,
    temperature: float | None = None,
    stream: bool = True,
    extra: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if temperature is not None:
        body["temperature"] = temperature
    body.update(extra or {})
    return body


def curl_command(
    base_url: str,
    messages: list[dict[str, Any]],
    *,
    model: str = "default",
    max_tokens: int = 256,
    temperature: float | None = None,
    api_key_env: str | None = None,
    extra: Mapping[str, Any] | None = None,
) -> str:
    """The equivalent `curl -N` command; the key appears as "$ENV_VAR", never its value."""
    body = json.dumps(
        chat_body(messages, model=model, max_tokens=max_tokens, temperature=temperature, extra=extra),
        ensure_ascii=False,
    )
    parts = [
        "curl",
        "-N",
        shlex.quote(base_url.rstrip("/") + "/v1/chat/completions"),
        "-H",
        shlex.quote("Content-Type: application/json"),
    ]
    if api_key_env:
        if not api_key_env.replace("_", "").isalnum():
            raise ValueError(f"not an environment variable name: {api_key_env!r}")
        parts += ["-H", f'"Authorization: Bearer ${api_key_env}"']
    parts += ["-d", shlex.quote(body)]
    return " ".join(parts)


def _dicts(v: Any) -> list[dict[str, Any]]:
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _int(v: Any) -> int:
    try:
        return int(v or 0)
    except (TypeError, ValueError):
        return 0


async def parse_metrics_off_loop(body: bytes) -> Metrics:
    """Parse /metrics in a worker thread: a large one is seconds of pure Python the event loop must not wait on."""
    return await asyncio.to_thread(lambda: parse_metrics(body.decode("utf-8", errors="replace")))


# --- the client ---------------------------------------------------------------------------------------


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One SSL context for every client: building one loads the CA bundle (16-47 ms a client)."""
    return httpx.create_ssl_context()


def _partial_stats(times: list[float]) -> StreamStats | None:
    """TTFT and inter-token gaps of a stream cut short, from the times its deltas arrived (None: none came)."""
    if not times:
        return None
    return StreamStats(times[0], tuple(b - a for a, b in itertools.pairwise(times)), len(times), times[-1])


class SGLangClient:
    """One server's HTTP API. `api_key_env` names an environment variable (the preset's api_key_env)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key_env: str | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 10.0,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        self.timeout = timeout
        key = (env if env is not None else os.environ).get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._own = client is None
        self._http = client or httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, headers=headers, trust_env=False, verify=_ssl_context()
        )
        if client is None:
            use_asyncio_streams(self._http)  # its own client only: a shared one is its owner's to set up
        elif headers:
            self._http.headers.update(headers)

    async def aclose(self) -> None:
        if self._own:
            await self._http.aclose()

    async def __aenter__(self) -> SGLangClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def _url(self, path: str) -> str:
        return self.base_url + path

    def _fail(self, path: str, e: Exception) -> ClientError:
        url = self._url(path)
        if isinstance(e, httpx.TimeoutException):
            return Timeout(url, f"timed out ({type(e).__name__})")
        if isinstance(e, (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError)):
            return NotUp(
                url,
                "connection refused: the server is not listening"
                if isinstance(e, httpx.ConnectError)
                else f"connection lost: {e or type(e).__name__}",
            )
        return ClientError(url, f"{type(e).__name__}: {e}")

    def _check(self, path: str, r: httpx.Response, raw: bytes = b"") -> None:
        if r.status_code < 400:
            return
        body = raw[:4096].decode("utf-8", errors="replace")
        if r.status_code == 401:
            raise Unauthorized(
                self._url(path),
                "HTTP 401 Unauthorized: missing or wrong API key"
                + (f" (from ${self.api_key_env})" if self.api_key_env else " (set the preset's api_key_env)"),
            )
        if r.status_code == 503:
            raise Warming(self._url(path), "HTTP 503: the server is still warming up (or draining)")
        raise HTTPStatus(self._url(path), r.status_code, body)

    async def _get(self, path: str, *, deadline_s: float | None = None, max_bytes: int = JSON_MAX_BYTES) -> bytes:
        """The body of GET path, within a total deadline (default: the client's timeout) and a size cap."""
        deadline = self.timeout if deadline_s is None else deadline_s
        try:
            r, body = await get_bounded(self._http, path, deadline_s=deadline, max_bytes=max_bytes, what=path)
        except TimeoutError:
            raise Timeout(self._url(path), f"no complete answer within {deadline:g} s") from None
        except BodyTooLarge as e:
            raise TooLarge(self._url(path), str(e)) from None
        except httpx.HTTPError as e:
            raise self._fail(path, e) from None
        self._check(path, r, body)
        return body

    async def _json(self, path: str) -> Any:
        body = await self._get(path)
        try:
            return hostjson.loads(body, path)
        except hostjson.HostJsonError as e:
            raise Malformed(self._url(path), e.detail if e.too_deep else f"not JSON: {body[:80]!r}") from None

    async def health(self, deadline_s: float = HEALTH_DEADLINE_S) -> Health:
        """GET /health: 200 ready, 503 warming, refused/timeout down, all within deadline_s. Never raises."""
        t0 = time.perf_counter()
        try:
            r, _ = await get_bounded(
                self._http, "/health", deadline_s=deadline_s, max_bytes=HEALTH_MAX_BYTES, what="/health"
            )
        except TimeoutError:
            return Health("down", None, time.perf_counter() - t0, f"no complete answer within {deadline_s:g} s")
        except BodyTooLarge as e:
            return Health("down", None, time.perf_counter() - t0, str(e))
        except httpx.HTTPError as e:
            return Health("down", None, time.perf_counter() - t0, self._fail("/health", e).message)
        dt = time.perf_counter() - t0
        if r.status_code == 200:
            return Health("ready", 200, dt)
        if r.status_code == 503:
            return Health("warming", 503, dt, "HTTP 503: warming up")
        return Health("down", r.status_code, dt, f"HTTP {r.status_code}")

    async def _object(self, path: str) -> dict[str, Any]:
        obj = await self._json(path)
        if not isinstance(obj, dict):
            raise Malformed(self._url(path), f"expected a JSON object, got {type(obj).__name__}")
        return obj

    async def model_info(self) -> dict[str, Any]:
        return await self._object_or_old("/model_info")

    async def server_info(self) -> dict[str, Any]:
        """GET /server_info with api_key and every other secret-looking key removed."""
        return dict(redact(await self._object_or_old("/server_info")))

    async def _object_or_old(self, path: str) -> dict[str, Any]:
        """`path`, else SGLang's older `/get_…` name on a 404: SGLang's router (sglang-router 0.3) serves only that."""
        try:
            return await self._object(path)
        except HTTPStatus as e:
            if e.status != 404:
                raise
            return await self._object("/get_" + path.lstrip("/"))

    async def metrics(self) -> Metrics:
        """GET /metrics (404 means the server runs without --enable-metrics)."""
        body = await self._get("/metrics", deadline_s=METRICS_DEADLINE_S, max_bytes=METRICS_MAX_BYTES)
        try:
            return await parse_metrics_off_loop(body)
        except ValueError as e:
            raise Malformed(self._url("/metrics"), f"bad Prometheus text: {e}") from None

    async def chat_stream(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str = "default",
        max_tokens: int = 256,
        temperature: float | None = None,
        extra: Mapping[str, Any] | None = None,
        timeout: float | None = 300.0,
    ) -> AsyncIterator[ChatEvent]:
        """Stream /v1/chat/completions: reasoning/content deltas, finish, usage, then StreamStats."""
        path = "/v1/chat/completions"
        body = chat_body(messages, model=model, max_tokens=max_tokens, temperature=temperature, extra=extra)
        t0 = time.perf_counter()
        first: float | None = None
        last = t0
        gaps: list[float] = []
        n = 0
        deadline = Deadline(timeout)
        try:
            async with self._http.stream(
                "POST",
                path,
                json=body,
                timeout=timeout,
                headers={"Accept": "text/event-stream", "Cache-Control": "no-store"},
            ) as r:
                if r.status_code >= 400:
                    self._check(path, r, await deadline.run(read_capped(r, JSON_MAX_BYTES, path)))
                kind = r.headers.get("content-type", "").partition(";")[0]
                if "text/event-stream" not in kind:
                    raise Malformed(self._url(path), f"not an event stream: Content-Type {kind!r}")
                async for data in sse_data(r, deadline):
                    if data == "[DONE]":
                        break
                    try:
                        obj = hostjson.loads(data, "an SSE event")
                    except hostjson.HostJsonError as e:
                        detail = e.detail if e.too_deep else f"{data[:80]!r}"
                        raise Malformed(self._url(path), f"bad SSE event: {detail}") from None
                    if not isinstance(obj, dict):
                        raise Malformed(self._url(path), f"bad SSE event: {data[:80]!r}")
                    if "error" in obj:
                        err = obj["error"]
                        msg = err.get("message") if isinstance(err, dict) else err
                        raise ServerReportedError(self._url(path), f"server error: {str(msg)[:200]}")
                    now = time.perf_counter() - t0
                    for choice in _dicts(obj.get("choices")):
                        delta = choice.get("delta")
                        delta = delta if isinstance(delta, dict) else {}
                        for key, cls in (("reasoning_content", ReasoningDelta), ("content", ContentDelta)):
                            text = delta.get(key)
                            if text and isinstance(text, str):
                                if first is None:
                                    first = now
                                else:
                                    gaps.append(now - last)
                                last = now
                                n += 1
                                yield cls(text, now)
                        if choice.get("finish_reason"):
                            yield Finish(str(choice["finish_reason"]), choice.get("matched_stop"), now)
                    u = obj.get("usage")
                    if isinstance(u, dict) and not obj.get("choices"):
                        details = u.get("prompt_tokens_details") or {}
                        yield Usage(
                            _int(u.get("prompt_tokens")),
                            _int(u.get("completion_tokens")),
                            _int(u.get("total_tokens")),
                            details.get("cached_tokens") if isinstance(details, dict) else None,
                            u.get("reasoning_tokens"),
                        )
        except ClientError:
            raise
        except TimeoutError:
            raise Timeout(self._url(path), f"the stream did not finish within {timeout:g} s") from None
        except BodyTooLarge as e:
            raise TooLarge(self._url(path), str(e)) from None
        except httpx.HTTPError as e:
            raise self._fail(path, e) from None
        yield StreamStats(first, tuple(gaps), n, time.perf_counter() - t0)

    async def probe(
        self,
        prompt: str = "Say hello in one short sentence.",
        *,
        max_tokens: int = 16,
        deadline_s: float = PROBE_DEADLINE_S,
    ) -> ProbeResult:
        """Health, model info and one short streamed generation, all within deadline_s; errors are reported, not raised."""
        t0 = time.perf_counter()
        h = Health("down", None, 0.0, "no answer")
        info: dict[str, Any] | None = None
        text: list[str] = []
        reasoning: list[str] = []
        stats: StreamStats | None = None
        usage: Usage | None = None
        times: list[float] = []  # each delta's time: a probe cut by its deadline still has TTFT and a rate
        try:
            async with asyncio.timeout(deadline_s):
                h = await self.health(min(HEALTH_DEADLINE_S, deadline_s))
                if not h.ready:
                    return ProbeResult(h, None, "", "", None, None, h.message or h.state)
                info = await self.model_info()
                async for ev in self.chat_stream(
                    [{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0, timeout=deadline_s
                ):
                    if isinstance(ev, ContentDelta):
                        text.append(ev.text)
                        times.append(ev.t)
                    elif isinstance(ev, ReasoningDelta):
                        reasoning.append(ev.text)
                        times.append(ev.t)
                    elif isinstance(ev, StreamStats):
                        stats = ev
                    elif isinstance(ev, Usage):
                        usage = ev
        except TimeoutError:
            return ProbeResult(
                h,
                info,
                "".join(text),
                "".join(reasoning),
                stats or _partial_stats(times),
                usage,
                f"the probe did not finish within {deadline_s:g} s ({time.perf_counter() - t0:.1f} s spent)",
            )
        except ClientError as e:
            # the stream's own deadline can fire before the probe's (both are deadline_s): the tokens that came are
            # real figures either way
            return ProbeResult(
                h, info, "".join(text), "".join(reasoning), stats or _partial_stats(times), usage, e.message
            )
        return ProbeResult(h, info, "".join(text), "".join(reasoning), stats, usage)
