"""A real HTTP server on loopback that misbehaves on purpose: drips, floods, never ends, nests JSON forever."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

DRIP_EVERY_S = 0.25
"""One byte this often: far inside any per-read timeout, so only a total deadline stops it."""
RUN_FOR_S = 30.0
"""Every misbehaviour stops by itself after this long, so a client without a deadline fails a test, not hangs it."""
DEEP = 100_000
"""Nesting for the too-deep JSON (json.loads raises RecursionError on it)."""
SSE_HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncache-control: no-cache\r\n\r\n"


def metrics_text(series: int) -> bytes:
    """Valid Prometheus text in SGLang's names, `series` samples long (about 100 bytes a sample)."""
    rows = [b"# HELP sglang:num_running_reqs running\n# TYPE sglang:num_running_reqs gauge\n"]
    rows += [
        b'sglang:num_running_reqs{dp_rank="%d",engine_type="unified",model_name="m",tp_rank="0"} 1.0\n' % i
        for i in range(series)
    ]
    return b"".join(rows)


class BadServer:
    """`mode` picks the misbehaviour for the next requests; `ok` answers /health 200 with no body."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.metrics_body = b""
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _handle(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        try:
            head = await r.readuntil(b"\r\n\r\n")
            path = head.split(b" ", 2)[1].decode()
            length = next(
                (int(x.split(b":")[1]) for x in head.split(b"\r\n") if x.lower().startswith(b"content-length:")), 0
            )
            if length:
                await r.readexactly(length)
            await getattr(self, "_" + self.mode)(path, w)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError, asyncio.CancelledError):
            pass  # the client left, or the server is stopping
        finally:
            w.close()

    async def _ok(self, path: str, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
        await w.drain()

    async def _drip(self, path: str, w: asyncio.StreamWriter) -> None:
        """200 at once, then a body (no length: it ends when the connection does) one byte at a time."""
        w.write(b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\n")
        await self._trickle(w)

    async def _declared(self, path: str, w: asyncio.StreamWriter) -> None:
        """Declares a 1 MB body, then drips it."""
        w.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n")
        await self._trickle(w)

    async def _trickle(self, w: asyncio.StreamWriter) -> None:
        end = time.monotonic() + RUN_FOR_S
        while time.monotonic() < end:
            w.write(b"x")
            await w.drain()
            await asyncio.sleep(DRIP_EVERY_S)

    async def _huge(self, path: str, w: asyncio.StreamWriter) -> None:
        """60 MB of valid-looking /metrics, no content-length (the size is only known by reading it)."""
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/plain; version=0.0.4\r\nconnection: close\r\n\r\n")
        chunk = metrics_text(600)
        sent = 0
        while sent < 60_000_000:
            w.write(chunk)
            sent += len(chunk)
            await w.drain()

    async def _metrics(self, path: str, w: asyncio.StreamWriter) -> None:
        body = self.metrics_body
        w.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % len(body)
            + body
        )
        await w.drain()

    async def _deep(self, path: str, w: asyncio.StreamWriter) -> None:
        """/health fine; /model_info and every SSE event nested DEEP levels."""
        if path == "/health":
            return await self._ok(path, w)
        doc = b"[" * DEEP + b"]" * DEEP
        if path.startswith("/v1/chat"):
            w.write(SSE_HEAD + b"data: " + doc + b"\n\n")
        else:
            w.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n" % len(doc) + doc
            )
        await w.drain()

    async def _endless(self, path: str, w: asyncio.StreamWriter) -> None:
        """/health fine; /model_info fine; the chat stream sends a token every 20 ms and never finishes."""
        if path == "/health":
            return await self._ok(path, w)
        if not path.startswith("/v1/"):
            body = b'{"model_path": "m"}'
            # it closes after each answer, so it says so: else a client reuses the connection for the chat and
            # loses it when the close lands (failed CI under load: 'connection lost', no tokens)
            w.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n"
                b"connection: close\r\n\r\n" % len(body) + body
            )
            return await w.drain()
        w.write(SSE_HEAD)
        end = time.monotonic() + RUN_FOR_S
        while time.monotonic() < end:
            w.write(b'data: {"choices": [{"index": 0, "delta": {"content": "la "}}]}\n\n')
            await w.drain()
            await asyncio.sleep(0.02)

    async def _noline(self, path: str, w: asyncio.StreamWriter) -> None:
        """The chat stream opens one `data:` line and never ends it (64 KiB every 10 ms)."""
        w.write(SSE_HEAD + b"data: ")
        end = time.monotonic() + RUN_FOR_S
        while time.monotonic() < end:
            w.write(b"y" * 65536)
            await w.drain()
            await asyncio.sleep(0.01)


@contextmanager
def serve(port: int = 0) -> Iterator[BadServer]:
    """The server on its own thread and loop (so a client blocking its own loop cannot stall the server)."""
    srv = BadServer()
    sock = socket.socket()
    sock.bind(("127.0.0.1", port))
    srv.port = sock.getsockname()[1]
    started = threading.Event()
    stop: list[asyncio.Future[None]] = []

    def run() -> None:
        loop = asyncio.new_event_loop()
        srv._loop = loop

        async def main() -> None:
            server = await asyncio.start_server(srv._handle, sock=sock)
            fut = loop.create_future()
            stop.append(fut)
            started.set()
            async with server:
                await fut
                for t in list(srv._tasks):  # end every misbehaviour still running, while the loop lives
                    t.cancel()
                await asyncio.gather(*srv._tasks, return_exceptions=True)

        loop.run_until_complete(main())
        loop.close()

    t = threading.Thread(target=run, daemon=True)
    t.start()
    started.wait(5)
    try:
        yield srv
    finally:
        assert srv._loop is not None
        srv._loop.call_soon_threadsafe(stop[0].set_result, None)
        t.join(5)


if __name__ == "__main__":  # `python badhttp.py MODE PORT [words...]`: one server as a process of its own
    import signal
    import sys

    with serve(int(sys.argv[2])) as s:
        s.mode = sys.argv[1]
        print("listening", flush=True)
        signal.sigwait({signal.SIGTERM, signal.SIGINT})
