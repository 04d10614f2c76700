"""The router's own HTTP API, as sglang-router 0.3 serves it: /health, /workers (GET, POST, DELETE), /metrics.

Every read has a total deadline and a size cap (console.sglang.httpbound), every body is host text parsed
through console.hostjson, and nothing here retries: the manager's next poll is the retry.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from console.router.answers import (
    HEALTH_MAX_BYTES,
    MAX_BYTES,
    RouterCounters,
    RouterWorker,
    parse_counters,
    parse_workers,
)
from console.sglang.httpbound import get_bounded

__all__ = ["RouterApi", "RouterCounters", "RouterWorker", "parse_counters", "parse_workers"]

DEADLINE_S = 5.0


class RouterApi:
    """Calls to one router at `base` (and its metrics at `metrics_base`) over a shared httpx client."""

    def __init__(self, http: httpx.AsyncClient, base: str, metrics_base: str | None = None) -> None:
        self.http, self.base, self.metrics_base = http, base.rstrip("/"), metrics_base

    async def health(self) -> int:
        r, _ = await get_bounded(
            self.http, self.base + "/health", deadline_s=DEADLINE_S, max_bytes=HEALTH_MAX_BYTES, what="router /health"
        )
        return r.status_code

    async def workers(self) -> list[RouterWorker]:
        r, body = await get_bounded(
            self.http, self.base + "/workers", deadline_s=DEADLINE_S, max_bytes=MAX_BYTES, what="router /workers"
        )
        if r.status_code != 200:
            raise httpx.HTTPStatusError(f"router /workers: HTTP {r.status_code}", request=r.request, response=r)
        return parse_workers(body)

    async def add_worker(self, url: str) -> tuple[bool, str]:
        """POST /workers {"url"}: the router queues the registration (202) and checks the worker itself."""
        return await self._send("POST", "/workers", json={"url": url})

    async def remove_worker(self, worker_id: str) -> tuple[bool, str]:
        return await self._send("DELETE", f"/workers/{worker_id}")

    async def counters(self) -> RouterCounters | None:
        if not self.metrics_base:
            return None
        r, body = await get_bounded(
            self.http,
            self.metrics_base.rstrip("/") + "/metrics",
            deadline_s=DEADLINE_S,
            max_bytes=MAX_BYTES,
            what="router /metrics",
        )
        if r.status_code != 200:
            return None
        return await asyncio.to_thread(parse_counters, body.decode("utf-8", "replace"))

    async def _send(self, method: str, path: str, **kw: Any) -> tuple[bool, str]:
        async with asyncio.timeout(DEADLINE_S):
            r = await self.http.request(method, self.base + path, **kw)
        text = r.content[:300].decode("utf-8", "replace")
        return r.status_code in (200, 201, 202, 204), f"HTTP {r.status_code}: {text}"
