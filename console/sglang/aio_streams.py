"""httpcore's network layer on plain asyncio streams, for the chat client: about 0.5 ms less of every request.

httpx reaches the socket through httpcore and httpcore through anyio, whose stream, task-group and
cancel-scope layers were a sixth of what a streamed chat request costs in Python. Measured alternating
per request on a fresh connection, the console's first token came 2.0-2.4 ms after curl's, 1.55-1.7 ms
with these streams; plain asyncio was 0.1 ms (benchmarks/bench_chat_ttft.py; half of this machine's
speed had made it +3.1 ms, over the +3 ms target).

httpx and httpcore stay as they are (the requests, pooling, h11, the errors); only the byte stream
under them changes. It mirrors httpcore's own anyio backend: the same methods, extra
info and exception mapping.

Private parts of httpx and httpcore, all here: the backend interface (`httpcore._backends.base`),
`httpcore._utils.is_socket_readable`, and, in `use_asyncio_streams`, `AsyncClient._transport` and
`AsyncConnectionPool._network_backend`. If the last two moved in a release, a client is left as it is;
tests/sglang/test_aio_streams.py fails either way.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Iterable
from typing import Any, TypeVar

import httpcore
import httpx
from httpcore import ConnectError, ConnectTimeout, ReadError, ReadTimeout, WriteError, WriteTimeout
from httpcore._backends.base import (  # what httpcore's backends implement
    SOCKET_OPTION,
    AsyncNetworkBackend,
    AsyncNetworkStream,
)
from httpcore._utils import is_socket_readable

T = TypeVar("T")


async def _mapped(
    step: Awaitable[T], timeout: float | None, on_timeout: type[Exception], on_error: type[Exception]
) -> T:
    """`step` within `timeout`: a timeout as httpcore's `on_timeout`, a socket error as `on_error`."""
    try:
        if timeout is None:
            return await step
        async with asyncio.timeout(timeout):
            return await step
    except TimeoutError as e:
        raise on_timeout(str(e) or "timed out") from e
    except OSError as e:  # ssl.SSLError is one
        raise on_error(str(e) or type(e).__name__) from e


class AsyncioStream(AsyncNetworkStream):
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._r, self._w = reader, writer

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await _mapped(self._r.read(max_bytes), timeout, ReadTimeout, ReadError)  # b"" at the end

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        if self._w.is_closing():
            raise WriteError("the connection is closed")
        self._w.write(buffer)
        await _mapped(self._w.drain(), timeout, WriteTimeout, WriteError)

    async def aclose(self) -> None:
        self._w.close()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> AsyncioStream:
        try:
            await _mapped(
                self._w.start_tls(ssl_context, server_hostname=server_hostname), timeout, ConnectTimeout, ConnectError
            )
        except Exception:
            await self.aclose()
            raise
        return self

    def get_extra_info(self, info: str) -> Any:
        if info == "ssl_object":
            return self._w.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._w.get_extra_info("sockname")
        if info == "server_addr":
            return self._w.get_extra_info("peername")
        if info == "socket":
            return self._w.get_extra_info("socket")
        if info == "is_readable":  # an idle kept connection that is readable was closed (or spoken to) by the server
            return self._r.at_eof() or self._w.is_closing() or is_socket_readable(self._w.get_extra_info("socket"))
        return None


class AsyncioBackend(AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[SOCKET_OPTION] | None = None,
    ) -> AsyncioStream:
        reader, writer = await _mapped(
            asyncio.open_connection(host, port, local_addr=(local_address, 0) if local_address else None),
            timeout,
            ConnectTimeout,
            ConnectError,
        )
        sock = writer.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return AsyncioStream(reader, writer)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[SOCKET_OPTION] | None = None
    ) -> AsyncioStream:
        reader, writer = await _mapped(asyncio.open_unix_connection(path), timeout, ConnectTimeout, ConnectError)
        return AsyncioStream(reader, writer)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def use_asyncio_streams(client: httpx.AsyncClient) -> bool:
    """Puts AsyncioBackend under `client`'s own connection pool; False (the client unchanged) if httpx or
    httpcore no longer have the attributes this relies on, or the client goes through a proxy."""
    pool = getattr(getattr(client, "_transport", None), "_pool", None)
    if type(pool) is not httpcore.AsyncConnectionPool or not hasattr(pool, "_network_backend"):
        return False
    pool._network_backend = AsyncioBackend()
    return True
