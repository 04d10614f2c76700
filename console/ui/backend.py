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
        out: dict[str, Any] = {
            "messages": self.messages,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "chat_template_kwargs": {"enable_thinking": self.thinking},
        }
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
    """Adapts console.sglang.client.SGLangClient; the key is handed over in a private env mapping, never logged."""

    _KEY_VAR = "DFLASH_CONSOLE_API_KEY"

    def _client(self, base_url: str, api_key: str | None, timeout: float = 10.0) -> Any:
        from console.sglang.client import SGLangClient

        env = {self._KEY_VAR: api_key} if api_key else {}
        return SGLangClient(base_url, api_key_env=self._KEY_VAR if api_key else None, env=env, timeout=timeout)

    async def stream_chat(self, base_url: str, req: ChatRequest, api_key: str | None) -> AsyncIterator[ChatDelta]:
        from console.sglang import client as c

        tokens: int | None = None
        ttft = tok_s = None
        async with self._client(base_url, api_key, timeout=30.0) as cl:
            try:
                async for ev in cl.chat_stream(
                    req.messages,
                    model=req.model or "default",
                    max_tokens=req.max_tokens,
                    temperature=req.temperature,
                    extra={"chat_template_kwargs": {"enable_thinking": req.thinking}},
                ):
                    if isinstance(ev, c.ReasoningDelta):
                        yield ChatDelta("reasoning", ev.text)
                    elif isinstance(ev, c.ContentDelta):
                        yield ChatDelta("content", ev.text)
                    elif isinstance(ev, c.Finish):
                        yield ChatDelta("finish", finish_reason=ev.reason)
                    elif isinstance(ev, c.Usage):
                        tokens = ev.completion_tokens
                    elif isinstance(ev, c.StreamStats):
                        ttft, tok_s = ev.ttft_s, ev.tokens_per_s
                        tokens = tokens if tokens is not None else ev.tokens
            except c.ClientError as e:
                yield ChatDelta("error", e.message)
                return
        yield ChatDelta("usage", ttft_s=ttft, completion_tokens=tokens, tok_s=tok_s)

    async def probe(self, base_url: str, api_key: str | None) -> ProbeReport:
        async with self._client(base_url, api_key) as cl:
            res = await cl.probe()
        return probe_report(res)

    def curl(self, base_url: str, req: ChatRequest, api_key_env: str | None) -> str:
        from console.sglang.client import curl_command

        return curl_command(
            base_url,
            req.messages,
            model=req.model or "default",
            max_tokens=req.max_tokens,
            temperature=req.temperature,
            api_key_env=api_key_env,
            extra={"chat_template_kwargs": {"enable_thinking": req.thinking}},
        )


def probe_report(res: Any) -> ProbeReport:
    """One line from a client ProbeResult: health first, then model, TTFT, tok/s and the reply."""
    h = res.health
    parts = [f"health {h.state}" + (f" ({h.status})" if h.status else "") + f" in {h.latency_s * 1000:.0f} ms"]
    info = res.model_info or {}
    model = info.get("model_path") or info.get("served_model_name")
    if model:
        parts.append(f"model {str(model).rsplit('/', 1)[-1]}")
    st = res.stats
    if st is not None and st.ttft_s is not None:
        parts.append(f"TTFT {st.ttft_s * 1000:.0f} ms")
    if st is not None and st.tokens_per_s is not None:
        parts.append(f"{st.tokens_per_s:.1f} tok/s")
    if res.text:
        parts.append(repr(res.text.strip()[:60]))
    if res.error:
        parts.append(f"error: {res.error}")
    details = {
        "health": h.state,
        "model": model,
        "ttft_s": st.ttft_s if st else None,
        "tok_s": st.tokens_per_s if st else None,
        "error": res.error,
    }
    return ProbeReport(bool(res.ok), " · ".join(parts), details)
