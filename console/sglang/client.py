"""Async HTTP client for one SGLang server: readiness, info, /metrics, streaming chat with client-side timings.

Readiness is `/health` answering 200 (503 = warming, refused = not up); `/v1/models` is never used
for it. Every failure is a `ClientError` subclass with a one-line message. Secrets never leave here:
`/server_info` is redacted, and `curl_command` shows the API key as `$ENV_VAR`.
"""

from __future__ import annotations

import functools
import json
import os
import shlex
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import httpx
from httpx_sse import SSEError, aconnect_sse

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
    pass


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


# --- helpers ------------------------------------------------------------------------------------------


def redact(obj: Any) -> Any:
    """Drop every secret-looking key (api_key, *secret*, *password*, a `token` word), recursively."""
    if isinstance(obj, dict):
        return {k: redact(v) for k, v in obj.items() if not is_secret_key(str(k))}
    if isinstance(obj, list):
        return [redact(v) for v in obj]
    return obj


def chat_body(messages: list[dict[str, Any]], *, model: str = "default", max_tokens: int = 256,
              temperature: float | None = None, stream: bool = True, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "messages": messages, "max_tokens": max_tokens, "stream": stream}
    if stream:
        body["stream_options"] = {"include_usage": True}
    if temperature is not None:
        body["temperature"] = temperature
    body.update(extra or {})
    return body


def curl_command(base_url: str, messages: list[dict[str, Any]], *, model: str = "default", max_tokens: int = 256,
                 temperature: float | None = None, api_key_env: str | None = None,
                 extra: Mapping[str, Any] | None = None) -> str:
    """The equivalent `curl -N` command; the key appears as "$ENV_VAR", never its value."""
    body = json.dumps(chat_body(messages, model=model, max_tokens=max_tokens, temperature=temperature, extra=extra),
                      ensure_ascii=False)
    parts = ["curl", "-N", shlex.quote(base_url.rstrip("/") + "/v1/chat/completions"),
             "-H", shlex.quote("Content-Type: application/json")]
    if api_key_env:
        if not api_key_env.replace("_", "").isalnum():
            raise ValueError(f"not an environment variable name: {api_key_env!r}")
        parts += ["-H", f'"Authorization: Bearer ${api_key_env}"']
    parts += ["-d", shlex.quote(body)]
    return " ".join(parts)


# --- the client ---------------------------------------------------------------------------------------


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One SSL context for every client: building one loads the CA bundle (16-47 ms a client)."""
    return httpx.create_ssl_context()


class SGLangClient:
    """One server's HTTP API. `api_key_env` names an environment variable (the preset's api_key_env)."""

    def __init__(self, base_url: str, *, api_key_env: str | None = None, env: Mapping[str, str] | None = None,
                 timeout: float = 10.0, client: httpx.AsyncClient | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key_env = api_key_env
        key = (env if env is not None else os.environ).get(api_key_env) if api_key_env else None
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        self._own = client is None
        self._http = client or httpx.AsyncClient(base_url=self.base_url, timeout=timeout, headers=headers,
                                                 trust_env=False, verify=_ssl_context())
        if client is not None and headers:
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
            return NotUp(url, "connection refused: the server is not listening" if isinstance(e, httpx.ConnectError)
                         else f"connection lost: {e or type(e).__name__}")
        return ClientError(url, f"{type(e).__name__}: {e}")

    def _check(self, path: str, r: httpx.Response) -> None:
        if r.status_code < 400:
            return
        body = r.text if not r.is_stream_consumed or r.is_closed else ""
        if r.status_code == 401:
            raise Unauthorized(self._url(path), "HTTP 401 Unauthorized: missing or wrong API key"
                               + (f" (from ${self.api_key_env})" if self.api_key_env else " (set the preset's api_key_env)"))
        if r.status_code == 503:
            raise Warming(self._url(path), "HTTP 503: the server is still warming up (or draining)")
        raise HTTPStatus(self._url(path), r.status_code, body)

    async def _get(self, path: str, **kw: Any) -> httpx.Response:
        try:
            r = await self._http.get(path, **kw)
        except httpx.HTTPError as e:
            raise self._fail(path, e) from None
        self._check(path, r)
        return r

    async def _json(self, path: str) -> Any:
        r = await self._get(path)
        try:
            return r.json()
        except ValueError:
            raise Malformed(self._url(path), f"not JSON: {r.text[:80]!r}") from None

    async def health(self) -> Health:
        """GET /health: 200 ready, 503 warming, refused/timeout down. Never raises."""
        t0 = time.perf_counter()
        try:
            r = await self._http.get("/health")
        except httpx.HTTPError as e:
            return Health("down", None, time.perf_counter() - t0, self._fail("/health", e).message)
        dt = time.perf_counter() - t0
        if r.status_code == 200:
            return Health("ready", 200, dt)
        if r.status_code == 503:
            return Health("warming", 503, dt, "HTTP 503: warming up")
        return Health("down", r.status_code, dt, f"HTTP {r.status_code}")

    async def model_info(self) -> dict[str, Any]:
        return dict(await self._json("/model_info"))

    async def server_info(self) -> dict[str, Any]:
        """GET /server_info with api_key and every other secret-looking key removed."""
        return dict(redact(await self._json("/server_info")))

    async def metrics(self) -> Metrics:
        """GET /metrics (404 means the server runs without --enable-metrics)."""
        r = await self._get("/metrics")
        try:
            return parse_metrics(r.text)
        except ValueError as e:
            raise Malformed(self._url("/metrics"), f"bad Prometheus text: {e}") from None

    async def chat_stream(self, messages: list[dict[str, Any]], *, model: str = "default", max_tokens: int = 256,
                          temperature: float | None = None, extra: Mapping[str, Any] | None = None,
                          timeout: float | None = 300.0) -> AsyncIterator[ChatEvent]:
        """Stream /v1/chat/completions: reasoning/content deltas, finish, usage, then StreamStats."""
        path = "/v1/chat/completions"
        body = chat_body(messages, model=model, max_tokens=max_tokens, temperature=temperature, extra=extra)
        t0 = time.perf_counter()
        first: float | None = None
        last = t0
        gaps: list[float] = []
        n = 0
        try:
            async with aconnect_sse(self._http, "POST", path, json=body, timeout=timeout) as src:
                r = src.response
                if r.status_code >= 400:
                    await r.aread()
                    self._check(path, r)
                async for ev in src.aiter_sse():
                    data = ev.data
                    if data == "[DONE]":
                        break
                    try:
                        obj = json.loads(data)
                    except ValueError:
                        raise Malformed(self._url(path), f"bad SSE event: {data[:80]!r}") from None
                    if not isinstance(obj, dict):
                        raise Malformed(self._url(path), f"bad SSE event: {data[:80]!r}")
                    if "error" in obj:
                        err = obj["error"]
                        msg = err.get("message") if isinstance(err, dict) else err
                        raise ServerReportedError(self._url(path), f"server error: {str(msg)[:200]}")
                    now = time.perf_counter() - t0
                    for choice in obj.get("choices") or []:
                        delta = choice.get("delta") or {}
                        for key, cls in (("reasoning_content", ReasoningDelta), ("content", ContentDelta)):
                            text = delta.get(key)
                            if text:
                                if first is None:
                                    first = now
                                else:
                                    gaps.append(now - last)
                                last = now
                                n += 1
                                yield cls(text, now)
                        if choice.get("finish_reason"):
                            yield Finish(choice["finish_reason"], choice.get("matched_stop"), now)
                    u = obj.get("usage")
                    if isinstance(u, dict) and not obj.get("choices"):
                        details = u.get("prompt_tokens_details") or {}
                        yield Usage(int(u.get("prompt_tokens") or 0), int(u.get("completion_tokens") or 0),
                                    int(u.get("total_tokens") or 0), details.get("cached_tokens"), u.get("reasoning_tokens"))
        except ClientError:
            raise
        except SSEError as e:
            raise Malformed(self._url(path), f"not an event stream: {e}") from None
        except httpx.HTTPError as e:
            raise self._fail(path, e) from None
        yield StreamStats(first, tuple(gaps), n, time.perf_counter() - t0)

    async def probe(self, prompt: str = "Say hello in one short sentence.", *, max_tokens: int = 16) -> ProbeResult:
        """Health, model info and one short streamed generation; errors are reported, not raised."""
        h = await self.health()
        if not h.ready:
            return ProbeResult(h, None, "", "", None, None, h.message or h.state)
        info: dict[str, Any] | None = None
        text, reasoning, stats, usage = [], [], None, None
        try:
            info = await self.model_info()
            async for ev in self.chat_stream([{"role": "user", "content": prompt}], max_tokens=max_tokens, temperature=0.0):
                if isinstance(ev, ContentDelta):
                    text.append(ev.text)
                elif isinstance(ev, ReasoningDelta):
                    reasoning.append(ev.text)
                elif isinstance(ev, StreamStats):
                    stats = ev
                elif isinstance(ev, Usage):
                    usage = ev
        except ClientError as e:
            return ProbeResult(h, info, "".join(text), "".join(reasoning), stats, usage, e.message)
        return ProbeResult(h, info, "".join(text), "".join(reasoning), stats, usage)
