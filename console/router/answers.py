"""What a router's own API answers, read (pure): its /workers list and the few Prometheus counters the console shows.

Both the controller's calls (console.router.api, over httpx) and `status`'s one round trip (the host asks them
itself: console.fleet.oneshot) read the bodies here; this module imports no HTTP client.
"""

from __future__ import annotations

from dataclasses import dataclass

from console import hostjson

MAX_BYTES = 4 * 1024 * 1024
"""The cap on a /workers or /metrics body, whoever asks."""
HEALTH_MAX_BYTES = 64 * 1024


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
        out.append(
            RouterWorker(
                str(w.get("id") or ""),
                w["url"],
                bool(w.get("is_healthy")),
                int(load) if isinstance(load, int) and not isinstance(load, bool) and load >= 0 else None,
            )
        )
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
