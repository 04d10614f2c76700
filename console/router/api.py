"""The router's own HTTP API, as sglang-router 0.3 serves it: /health, /workers (GET, POST, DELETE), /metrics.

Every read has a total deadline and a size cap (console.sglang.httpbound), every body is host text parsed
through console.hostjson, and nothing here retries: the manager's next poll is the retry.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import httpx

from console import hostjson
from console.sglang.httpbound import get_bounded

DEADLINE_S = 5.0
MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class RouterWorker:
    """One worker as the router lists it."""

    id: str
    url: str
    healthy: bool
    load: int | None
    """Requests the router has in flight on it (`load`), None when it reports none."""


@dataclass(frozen=True)
class RouterCounters:
    """Cumulative counters from the router's Prometheus endpoint (requests/s comes from two of these)."""

    requests: float
    """smg_router_requests_total, summed over models and endpoints."""
    per_worker: dict[str, float]
    """smg_worker_cb_outcomes_total{outcome="success"|"failure"} summed per worker URL."""
    failures: float
    active: float | None = None


def parse_workers(body: bytes) -> list[RouterWorker]:
    """GET /workers -> the workers (a malformed entry is skipped, never fatal)."""
    d = hostjson.loads(body, "router /workers")
    out = []
    for w in d.get("workers") or [] if isinstance(d, dict) else []:
        if not isinstance(w, dict) or not isinstance(w.get("url"), str):
            continue
        load = w.get("load")
        out.append(RouterWorker(str(w.get("id") or ""), w["url"], bool(w.get("is_healthy")),
                                int(load) if isinstance(load, int) and not isinstance(load, bool) and load >= 0 else None))
    return out


def parse_counters(text: str) -> RouterCounters:
    """The few smg_* series the console shows, from Prometheus text (prometheus_client's own parser)."""
    from prometheus_client.parser import text_string_to_metric_families

    requests = failures = 0.0
    active: float | None = None
    per: dict[str, float] = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == "smg_router_requests_total":
                requests += s.value
            elif s.name == "smg_worker_cb_outcomes_total":
                url = s.labels.get("worker", "")
                per[url] = per.get(url, 0.0) + s.value
                if s.labels.get("outcome") == "failure":
                    failures += s.value
            elif s.name == "smg_http_connections_active":
                active = s.value
    return RouterCounters(requests, per, failures, active)


class RouterApi:
    """Calls to one router at `base` (and its metrics at `metrics_base`) over a shared httpx client."""

    def __init__(self, http: httpx.AsyncClient, base: str, metrics_base: str | None = None) -> None:
        self.http, self.base, self.metrics_base = http, base.rstrip("/"), metrics_base

    async def health(self) -> int:
        r, _ = await get_bounded(self.http, self.base + "/health", deadline_s=DEADLINE_S, max_bytes=65536,
                                 what="router /health")
        return r.status_code

    async def workers(self) -> list[RouterWorker]:
        r, body = await get_bounded(self.http, self.base + "/workers", deadline_s=DEADLINE_S, max_bytes=MAX_BYTES,
                                    what="router /workers")
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
        r, body = await get_bounded(self.http, self.metrics_base.rstrip("/") + "/metrics", deadline_s=DEADLINE_S,
                                    max_bytes=MAX_BYTES, what="router /metrics")
        if r.status_code != 200:
            return None
        return await asyncio.to_thread(parse_counters, body.decode("utf-8", "replace"))

    async def _send(self, method: str, path: str, **kw: Any) -> tuple[bool, str]:
        async with asyncio.timeout(DEADLINE_S):
            r = await self.http.request(method, self.base + path, **kw)
        text = r.content[:300].decode("utf-8", "replace")
        return r.status_code in (200, 201, 202, 204), f"HTTP {r.status_code}: {text}"
