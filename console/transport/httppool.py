"""One HTTP keep-alive pool per host for the console's own polls (/health, /metrics).

Without keep-alive every /health opened a new TCP connection to the host's forward listener, and
through SSH each of those is a new `direct-tcpip` channel (a round trip to the host and a TCP
connect there) before a byte of HTTP moves. A pooled connection is one channel that stays open
between polls. SGLang's uvicorn closes an idle connection after 5 s (`timeout_keep_alive=5`), so
the pool drops its own first (KEEPALIVE_EXPIRY_S), and a request that finds its reused connection
closed under it is sent once more on a fresh one.
"""

from __future__ import annotations

import httpx

KEEPALIVE_EXPIRY_S = 4.5
"""Below uvicorn's 5 s idle close: the console, not the server, ends an idle connection."""
MAX_IDLE_PER_HOST = 16
"""Idle connections kept per host (one per server port it polls; forward channels, not sessions)."""
STALE_ERRORS = (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError)
"""What a keep-alive connection closed by the server at the moment of reuse raises."""


class HostHttpPool:
    """An `httpx.AsyncClient` per host, made on first use and closed together."""

    def __init__(self) -> None:
        self._clients: dict[str, httpx.AsyncClient] = {}

    def client(self, host: str) -> httpx.AsyncClient:
        c = self._clients.get(host)
        if c is None or c.is_closed:
            from console.sglang.client import _ssl_context  # one CA-bundle load per process, not one per host

            c = httpx.AsyncClient(
                timeout=httpx.Timeout(4.0, connect=3.0),
                trust_env=False,
                verify=_ssl_context(),
                limits=httpx.Limits(
                    max_connections=MAX_IDLE_PER_HOST,
                    max_keepalive_connections=MAX_IDLE_PER_HOST,
                    keepalive_expiry=KEEPALIVE_EXPIRY_S,
                ),
            )
            self._clients[host] = c
        return c

    def idle_connections(self, host: str) -> int:
        """Connections the host's pool holds open now (each a forward channel through SSH)."""
        c = self._clients.get(host)
        pool = getattr(getattr(c, "_transport", None), "_pool", None)
        return sum(1 for conn in getattr(pool, "connections", ()) if conn.is_idle()) if pool is not None else 0

    async def aclose(self) -> None:
        clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            await c.aclose()


async def get_retrying_stale(
    client: httpx.AsyncClient, url: str, *, deadline_s: float, max_bytes: int, what: str
) -> tuple[httpx.Response, bytes]:
    """`get_bounded`, sent once more when the first attempt's connection was closed under it (a dead server
    fails both: through a forward it reads as a closed connection too)."""
    from console.sglang.httpbound import get_bounded

    try:
        return await get_bounded(client, url, deadline_s=deadline_s, max_bytes=max_bytes, what=what)
    except STALE_ERRORS:
        return await get_bounded(client, url, deadline_s=deadline_s, max_bytes=max_bytes, what=what)
