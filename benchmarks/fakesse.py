"""A minimal raw-asyncio OpenAI streaming server: the fastest possible peer, to isolate client-side costs.

Not a simulator (that is `console.sim`): it answers `/v1/models`, `/server_info` and streaming
`/v1/chat/completions` with one SSE chunk per token, at a fixed per-request token rate or with no
delay at all, keep-alive, chunked encoding, the usage chunk and `[DONE]`, like SGLang (docs/sglang.md §3.1).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from dataclasses import dataclass


@dataclass
class FakeOptions:
    """How the fake behaves: per-request tokens/s (0 = no delay), ignore_eos support, natural EOS length."""

    tokens_per_s: float = 0.0
    ttft_s: float = 0.0
    accept_ignore_eos: bool = True
    eos_after: int | None = None
    """Without ignore_eos, stop after this many tokens (None: always max_tokens)."""
    send_usage: bool = True
    flush_every: int = 16
    """Zero-delay mode: drain the socket every N chunks."""
    step_s: float | None = None
    """Decode-batch mode, like SGLang's scheduler: every step each running request gets one token, written as
    its own packet; a step lasts at least step_s (0: as fast as this process can). None: per-request pacing."""
    role_chunk: bool = True
    """False: no empty role chunk, and the headers leave with the first token, so a client's first
    byte is the first token (what makes curl's time_starttransfer a TTFT)."""


def _chunk(payload: bytes) -> bytes:
    data = b"data: " + payload + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(data), data)


_HEAD = b'{"id":"r","object":"chat.completion.chunk","created":0,"model":"fake","choices":['
_TOKEN = _chunk(
    _HEAD + b'{"index":0,"delta":{"reasoning_content":null,"content":" tok"},"logprobs":null,'
    b'"finish_reason":null,"matched_stop":null}]}'
)
_ROLE = _chunk(
    _HEAD + b'{"index":0,"delta":{"reasoning_content":null,"role":"assistant","content":""},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}'
)
_DONE = _chunk(b"[DONE]") + b"0\r\n\r\n"


def _finish(reason: str) -> bytes:
    return _chunk(
        _HEAD
        + b'{"index":0,"delta":{"reasoning_content":null},"logprobs":null,"finish_reason":"'
        + reason.encode()
        + b'","matched_stop":null}]}'
    )


def _usage(prompt: int, completion: int) -> bytes:
    u = {
        "prompt_tokens": prompt,
        "total_tokens": prompt + completion,
        "completion_tokens": completion,
        "prompt_tokens_details": None,
        "reasoning_tokens": 0,
    }
    return _chunk(
        b'{"id":"r","object":"chat.completion.chunk","created":0,"model":"fake","choices":[],"usage":'
        + json.dumps(u).encode()
        + b"}"
    )


def _response(status: str, body: bytes, ctype: str = "application/json") -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: {ctype}\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body


class FakeSSEServer:
    """Serve on 127.0.0.1 in a background thread with its own event loop; `url` once started."""

    def __init__(self, options: FakeOptions | None = None, port: int = 0) -> None:
        self.options = options or FakeOptions()
        self.port = port
        self.requests = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.base_events.Server | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._step: asyncio.Future[None] | None = None
        self._running = 0
        self.tokens_sent = 0
        self.steps = 0
        """Decode steps the batcher released (step_s mode)."""
        self._batcher: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def serve(self) -> None:
        """Run in the current loop until cancelled."""
        self._server = await asyncio.start_server(self._conn, "127.0.0.1", self.port, backlog=1024)
        self.port = self._server.sockets[0].getsockname()[1]
        self._ready.set()
        async with self._server:
            await self._server.serve_forever()

    def start(self) -> FakeSSEServer:
        def main() -> None:
            self._loop = asyncio.new_event_loop()
            with contextlib.suppress(asyncio.CancelledError):
                self._loop.run_until_complete(self.serve())

        self._thread = threading.Thread(target=main, daemon=True, name="fakesse")
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake SSE server did not start")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._server is not None:
            self._loop.call_soon_threadsafe(self._server.close)
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    async def _conn(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                length = 0
                for ln in lines[1:]:
                    if ln.lower().startswith("content-length:"):
                        length = int(ln.split(":", 1)[1])
                body = await reader.readexactly(length) if length else b""
                await self._route(method, path, body, writer)
        except (asyncio.IncompleteReadError, ConnectionError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _route(self, method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        if path == "/v1/models":
            w.write(_response("200 OK", b'{"object":"list","data":[{"id":"fake","object":"model"}]}'))
        elif path == "/server_info":
            w.write(_response("200 OK", b'{"model_path":"fake","tp_size":1,"api_key":"secret","version":"fake"}'))
        elif path == "/health":
            w.write(_response("200 OK", b""))
        elif path == "/v1/chat/completions" and method == "POST":
            await self._chat(json.loads(body), w)
            return
        else:
            w.write(_response("404 Not Found", b'{"detail":"Not Found"}'))
        await w.drain()

    async def _chat(self, req: dict, w: asyncio.StreamWriter) -> None:
        o = self.options
        self.requests += 1
        if req.get("ignore_eos") and not o.accept_ignore_eos:
            w.write(_response("400 Bad Request", b'{"error":"unknown field ignore_eos"}'))
            await w.drain()
            return
        n = int(req.get("max_tokens") or 16)
        if not req.get("ignore_eos") and o.eos_after is not None:
            n = min(n, o.eos_after)
        prompt = len(str(req.get("messages", [{}])[0].get("content", "")).split())
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        if o.role_chunk:
            w.write(head + _ROLE)
            head = b""
        if o.ttft_s:
            await w.drain()
            await asyncio.sleep(o.ttft_s)
        loop = asyncio.get_running_loop()
        t0 = loop.time()
        if o.step_s is not None:
            await self._batched(n, head, w)
            head = b"" if n else head
        for i in range(n if o.step_s is None else 0):
            w.write(head + _TOKEN if i == 0 else _TOKEN)
            if o.tokens_per_s > 0:
                await w.drain()
                delay = t0 + (i + 1) / o.tokens_per_s - loop.time()
                if delay > 0:
                    await asyncio.sleep(delay)
            elif i % o.flush_every == 0:
                await w.drain()
        if n == 0:  # no token carried the headers (in decode-batch mode the first token did, when there was one)
            w.write(head)
        w.write(_finish("length" if req.get("ignore_eos") or n == req.get("max_tokens") else "stop"))
        if o.send_usage and (req.get("stream_options") or {}).get("include_usage"):
            w.write(_usage(prompt, n))
        w.write(_DONE)
        await w.drain()

    async def _batched(self, n: int, head: bytes, w: asyncio.StreamWriter) -> None:
        """n tokens, one per decode step of the shared batcher (each its own write, so its own packet)."""
        if self._batcher is None or self._batcher.done():
            loop = asyncio.get_running_loop()
            self._step = loop.create_future()
            self._batcher = loop.create_task(self._steps())
        self._running += 1
        try:
            for i in range(n):
                assert self._step is not None
                await self._step
                w.write(head + _TOKEN if i == 0 else _TOKEN)
                self.tokens_sent += 1
        finally:
            self._running -= 1

    async def _steps(self) -> None:
        """The decode loop: release every running request once per step; it ends when none is left."""
        loop = asyncio.get_running_loop()
        step = self.options.step_s or 0.0
        next_at = loop.time()
        while self._running:
            next_at += step
            await asyncio.sleep(max(0.0, next_at - loop.time()))
            assert self._step is not None
            fut, self._step = self._step, loop.create_future()
            fut.set_result(None)
            self.steps += 1
            await asyncio.sleep(0)  # the released requests write their token before the next step
