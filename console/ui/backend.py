"""ChatBackend: the UI's seam to a server's HTTP API (chat stream, probe, curl), adapting console.sglang.client."""

from __future__ import annotations

import json
import shlex
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

DeltaKind = Literal["reasoning", "content", "finish", "usage", "error"]


@dataclass(frozen=True)
class ChatDelta:
    """One piece of a streamed answer, as the chat pane shows it."""

    kind: DeltaKind
    text: str = ""
    finish_reason: str | None = None
    ttft_s: float | None = None
    completion_tokens: int | None = None
    tok_s: float | None = None


@dataclass(frozen=True)
class ChatRequest:
    """What the chat pane sends: the conversation and the knobs below the prompt."""

    messages: list[dict[str, str]]
    max_tokens: int = 512
    temperature: float = 0.7
    thinking: bool = True
    model: str | None = None

    def body(self) -> dict[str, Any]:
        """The OpenAI-style JSON body (thinking goes through chat_template_kwargs)."""
        out: dict[str, Any] = {"messages": self.messages, "max_tokens": self.max_tokens,
                               "temperature": self.temperature, "stream": True,
                               "chat_template_kwargs": {"enable_thinking": self.thinking}}
        if self.model:
            out["model"] = self.model
        return out


@dataclass(frozen=True)
class ProbeReport:
    """A probe's verdict: health first (ready means /health answered 200), then a short generation."""

    ok: bool
    summary: str
    details: dict[str, Any] = field(default_factory=dict)


class ChatBackend(Protocol):
    def stream_chat(self, base_url: str, req: ChatRequest, api_key: str | None) -> AsyncIterator[ChatDelta]: ...

    async def probe(self, base_url: str, api_key: str | None) -> ProbeReport: ...

    def curl(self, base_url: str, req: ChatRequest, api_key_env: str | None) -> str: ...


def fallback_curl(base_url: str, req: ChatRequest, api_key_env: str | None) -> str:
    """The equivalent curl; the key is referenced as $VAR so it is never printed."""
    parts = ["curl", "-N", f"{base_url.rstrip('/')}/v1/chat/completions", "-H", "Content-Type: application/json"]
    cmd = shlex.join(parts)
    if api_key_env:
        cmd += f' -H "Authorization: Bearer ${api_key_env}"'
    return cmd + " -d " + shlex.quote(json.dumps(req.body(), ensure_ascii=False))


class SglangBackend:
    """Adapts console.sglang.client (imported lazily so the UI starts without it)."""

    def _client(self) -> Any:
        from console.sglang import client

        return client

    async def stream_chat(self, base_url: str, req: ChatRequest, api_key: str | None) -> AsyncIterator[ChatDelta]:
        client = self._client()
        async for ev in client.stream_chat(base_url, req.messages, max_tokens=req.max_tokens,
                                           temperature=req.temperature, thinking=req.thinking,
                                           api_key=api_key, model=req.model):
            yield _delta_from(ev)

    async def probe(self, base_url: str, api_key: str | None) -> ProbeReport:
        res = await self._client().probe(base_url, api_key=api_key)
        ok = bool(getattr(res, "ok", False))
        summary = str(getattr(res, "summary", "") or res)
        details = dict(getattr(res, "__dict__", {}))
        return ProbeReport(ok, summary, details)

    def curl(self, base_url: str, req: ChatRequest, api_key_env: str | None) -> str:
        try:
            fn = self._client().curl_command
        except (ImportError, AttributeError):
            return fallback_curl(base_url, req, api_key_env)
        try:
            return str(fn(base_url, req.messages, max_tokens=req.max_tokens, temperature=req.temperature,
                          thinking=req.thinking, api_key_env=api_key_env))
        except TypeError:
            return fallback_curl(base_url, req, api_key_env)


def _delta_from(ev: Any) -> ChatDelta:
    """Maps a client stream event (by its `kind`/`type` and attributes) onto a ChatDelta."""
    kind = getattr(ev, "kind", None) or getattr(ev, "type", None) or type(ev).__name__.lower()
    kind = str(kind).removesuffix("event").removesuffix("delta")
    if kind not in ("reasoning", "content", "finish", "usage", "error"):
        kind = "content"
    return ChatDelta(kind, str(getattr(ev, "text", "") or ""), getattr(ev, "finish_reason", None),
                     getattr(ev, "ttft_s", None), getattr(ev, "completion_tokens", None), getattr(ev, "tok_s", None))
