"""The per-host keep-alive pool: polls reuse one connection, and a connection closed at reuse is sent again.

The peer is a real asyncio HTTP/1.1 server on loopback that counts the TCP connections it accepts.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest

from console.sglang.httpbound import get_bounded
from console.transport.httppool import HostHttpPool, get_retrying_stale
from tests.fixtures.rawhttp import RawServer

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok"


class CountingServer(RawServer):
    """Answers every GET with 200; `drop_second` closes a connection when its second request arrives, unanswered
    (what a server's idle close looks like when it crosses the client's reuse)."""

    def __init__(self, drop_second: bool = False) -> None:
        self.accepted = 0
        self.drop_second = drop_second
        super().__init__()

    async def _client(self, r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        self.accepted += 1
        served = 0
        try:
            while True:
                head = await r.readuntil(b"\r\n\r\n")
                if not head:
                    break
                if self.drop_second and served == 1:
                    break
                w.write(OK)
                await w.drain()
                served += 1
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            w.close()


@pytest.fixture
async def pool() -> AsyncIterator[HostHttpPool]:
    p = HostHttpPool()
    yield p
    await p.aclose()


async def test_polls_of_one_host_reuse_one_connection(pool: HostHttpPool) -> None:
    async with CountingServer() as srv:
        for _ in range(5):
            r, body = await get_retrying_stale(
                pool.client("gpu1"), f"http://127.0.0.1:{srv.port}/health", deadline_s=5, max_bytes=1024, what="/health"
            )
            assert (r.status_code, body) == (200, b"ok")
        assert srv.accepted == 1
        assert pool.idle_connections("gpu1") == 1
        assert pool.client("gpu1") is pool.client("gpu1") and pool.client("gpu1") is not pool.client("gpu2")


async def test_a_connection_closed_at_reuse_is_sent_again_on_a_fresh_one(pool: HostHttpPool) -> None:
    async with CountingServer(drop_second=True) as srv:
        url = f"http://127.0.0.1:{srv.port}/health"
        http = pool.client("gpu1")
        await get_retrying_stale(http, url, deadline_s=5, max_bytes=1024, what="/health")
        r, _ = await get_retrying_stale(http, url, deadline_s=5, max_bytes=1024, what="/health")
        assert r.status_code == 200
        assert srv.accepted == 2
        # the same exchange without the second attempt fails (the fresh connection's second request): the retry
        # is what saved the one above
        with pytest.raises(httpx.RemoteProtocolError):
            await get_bounded(http, url, deadline_s=5, max_bytes=1024, what="/health")
