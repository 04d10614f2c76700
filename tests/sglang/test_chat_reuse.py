"""Chat streams leave their connection reusable: after `data: [DONE]` the response is read to its end, so a
client's next message goes on the same connection (it opened a new one per message: through SSH a new forward
channel each). A server that keeps the stream open after [DONE] still ends the message, on a new connection next.

The peer is a real asyncio HTTP/1.1 server on loopback that counts the connections it accepts.
"""

from __future__ import annotations

import asyncio

from console.sglang.client import ContentDelta, SGLangClient, StreamStats
from tests.fixtures.rawhttp import RawServer


def _chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


class SseServer(RawServer):
    """Streams two content events and [DONE]; with `linger` it keeps the response open after [DONE]."""

    def __init__(self, linger: bool = False) -> None:
        self.linger = linger
        self.accepted = 0
        super().__init__()

    async def _client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(ln.split(b":", 1)[1])
                        for ln in head.split(b"\r\n")
                        if ln.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await r.readexactly(length)
                w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
                for word in (b"hello", b" world"):
                    w.write(_chunk(b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % word))
                w.write(_chunk(b"data: [DONE]\n\n"))
                await w.drain()
                if self.linger:
                    for _ in range(600):  # a minute of keep-alive comments after [DONE]
                        w.write(_chunk(b": still here\n\n"))
                        await w.drain()
                        await asyncio.sleep(0.1)
                w.write(b"0\r\n\r\n")
                await w.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()


async def _message(c: SGLangClient) -> tuple[str, StreamStats | None]:
    text, stats = "", None
    async for ev in c.chat_stream([{"role": "user", "content": "hi"}], max_tokens=4):
        if isinstance(ev, ContentDelta):
            text += ev.text
        elif isinstance(ev, StreamStats):
            stats = ev
    return text, stats


async def test_messages_of_one_client_share_one_connection() -> None:
    async with SseServer() as srv, SGLangClient(f"http://127.0.0.1:{srv.port}", timeout=30) as c:
        for _ in range(4):
            text, stats = await _message(c)
            assert text == "hello world" and stats is not None and stats.tokens == 2
        assert srv.accepted == 1  # before: 4


async def test_a_stream_kept_open_after_done_still_ends_the_message() -> None:
    async with SseServer(linger=True) as srv, SGLangClient(f"http://127.0.0.1:{srv.port}", timeout=30) as c:
        text, stats = await asyncio.wait_for(_message(c), 20)  # the server would keep it open for a minute
        assert text == "hello world" and stats is not None
        text, _ = await asyncio.wait_for(_message(c), 20)
        assert text == "hello world" and srv.accepted == 2  # the lingering connection was not reused
