"""Bounded HTTP reads from a host: a total deadline (not per read), a body cap, capped SSE lines.

httpx's timeouts are per network read, so a server that sends a byte every 2 s never times out, and
`r.text` / `aiter_lines` buffer whatever arrives. Everything the console reads from a server goes
through here instead.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx

HEALTH_DEADLINE_S = 5.0
"""/health answers in milliseconds (SGLang's idle probe is a 1-token generate); 5 s is the old
per-read budget (4 s read + connect), now for the whole exchange."""
HEALTH_MAX_BYTES = 64 * 1024
METRICS_DEADLINE_S = 10.0
METRICS_MAX_BYTES = 8 * 1024 * 1024
"""SGLang's /metrics is tens of KiB (a few hundred series); 8 MiB parses in about a second off the loop."""
JSON_MAX_BYTES = 4 * 1024 * 1024
"""/model_info, /server_info: a few KiB."""
SSE_LINE_MAX_BYTES = 1024 * 1024
"""One SSE line (one chat-completion chunk) is under 1 KiB; a line without a newline stops here."""


class BodyTooLarge(ValueError):
    """The server sent more than the cap allows."""

    def __init__(self, what: str, limit: int) -> None:
        self.limit = limit
        super().__init__(f"{what} larger than {_size(limit)}; refused")


def _size(n: int) -> str:
    return f"{n // (1024 * 1024)} MiB" if n >= 1024 * 1024 else f"{n // 1024} KiB"


async def read_capped(r: httpx.Response, max_bytes: int, what: str = "response") -> bytes:
    """The body of a streamed response, refused (BodyTooLarge) once it passes max_bytes."""
    declared = r.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > max_bytes:
        raise BodyTooLarge(what, max_bytes)
    buf = bytearray()
    async for chunk in r.aiter_bytes():
        buf += chunk
        if len(buf) > max_bytes:
            raise BodyTooLarge(what, max_bytes)
    return bytes(buf)


async def get_bounded(
    http: httpx.AsyncClient, url: str, *, deadline_s: float, max_bytes: int, what: str = "response", **kw: Any
) -> tuple[httpx.Response, bytes]:
    """GET url: status and body within deadline_s in total (TimeoutError), at most max_bytes (BodyTooLarge)."""
    async with asyncio.timeout(deadline_s):
        async with http.stream("GET", url, **kw) as r:
            return r, await read_capped(r, max_bytes, what)


class Deadline:
    """A total time budget for a stream read step by step (a timeout context cannot span an async generator's yields)."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.at = None if seconds is None else time.monotonic() + seconds

    def left(self) -> float | None:
        """Seconds left; TimeoutError once spent."""
        if self.at is None:
            return None
        left = self.at - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    async def run(self, aw: Any) -> Any:
        """`aw` within what is left. A timeout scope, not `wait_for`: on Python 3.11 that wraps each step in a task
        of its own, two more loop turns per SSE chunk (the first token 0.15-0.19 ms later, measured alternating)."""
        left = self.left()
        if left is None:
            return await aw
        async with asyncio.timeout(left):
            return await aw


DONE_DRAIN_S = 0.25
"""After `data: [DONE]` the rest of the response (the chunked terminator, usually in the same read) is read for at
most this long, so the connection goes back to the pool (a response left unread closes its connection: every
chat message then opened a new TCP connection, through SSH a new forward channel)."""


def _left_or_zero(deadline: Deadline) -> float:
    try:
        left = deadline.left()
    except TimeoutError:
        return 0.0
    return DONE_DRAIN_S if left is None else left


async def sse_data(
    r: httpx.Response, deadline: Deadline, max_line: int = SSE_LINE_MAX_BYTES, done: str = "[DONE]"
) -> AsyncIterator[str]:
    """The `data` of each server-sent event, within the deadline; a line over max_line is BodyTooLarge.

    Only `data:` fields matter for OpenAI-style streams; `event:`, `id:`, `retry:` and comments are skipped.
    The `done` event is the last one yielded: the response is read to its end first (DONE_DRAIN_S at most)."""
    chunks = r.aiter_bytes().__aiter__()
    buf = b""
    data: list[str] = []
    drain: Deadline | None = None
    while True:
        try:
            chunk = await (drain or deadline).run(chunks.__anext__())
        except StopAsyncIteration:
            break
        except TimeoutError:
            if drain is None:
                raise
            break  # a server still sending after [DONE]: the connection is dropped, the answer is complete
        if drain is not None:
            if len(chunk) > max_line:
                break
            continue
        buf += chunk
        *lines, buf = buf.split(b"\n")
        if len(buf) > max_line:
            raise BodyTooLarge("an SSE line", max_line)
        for raw in lines:
            if len(raw) > max_line:
                raise BodyTooLarge("an SSE line", max_line)
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if data:
                    event, data = "\n".join(data), []
                    if event == done:
                        drain = Deadline(min(DONE_DRAIN_S, _left_or_zero(deadline)))
                        break
                    yield event
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
    if drain is not None:
        yield done
        return
    if buf.startswith(b"data:"):
        data.append(buf[5:].decode("utf-8", errors="replace").removeprefix(" "))
    if data:
        yield "\n".join(data)
