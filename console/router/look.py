"""One look at a router, folded into its RouterView, and which server stands behind each of its workers (pure).

The manager (console.router.manager) looks over the host link and httpx; `status` looks in its one round trip per
host (the agent runs the same status script and asks the same endpoints on the host: console.fleet.oneshot). Both
fold what they found with these functions, so a router reads the same either way.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from console.fleet.oneshot import HEALTH_DEADLINE_S, Look, OneShot, RouterPart
from console.router import command as rc
from console.router.answers import (
    HEALTH_MAX_BYTES,
    MAX_BYTES,
    RouterCounters,
    RouterWorker,
    parse_counters,
    parse_workers,
)
from console.router.state import RouterView, crash_cause

if TYPE_CHECKING:
    from console.config import Fleet
    from console.fleet.state import ServerState


def process_view(v: RouterView, rep: rc.ProcessReport, now: float) -> RouterView:
    """What the status script found: `stopped` (its last run's log stays readable), `crashed` (the caller adds why,
    from its log), or the live process's pid, start and log with the phase the HTTP answers will set."""
    meta = rep.meta or {}
    if not rep.started:
        return replace(
            v,
            phase="stopped",
            pid=None,
            workers=(),
            rps=None,
            worker_rps={},
            error=None,
            checked_at=now,
            counters=None,
            counters_at=None,
            log_path=meta.get("log_path") or v.log_path,
        )
    v = replace(v, pid=rep.pid, started_at=meta.get("started_at"), log_path=meta.get("log_path"))
    if not rep.alive:
        return replace(v, phase="crashed", workers=(), rps=None, worker_rps={}, error=None, checked_at=now)
    return v


def unanswered(v: RouterView, error: str, now: float) -> RouterView:
    """/health or /workers did not answer (or not 200): a router that was not running is still starting."""
    phase = "starting" if v.phase in ("starting", "stopped", "unknown", "crashed") else v.phase
    return replace(v, phase=phase, error=error[:200], checked_at=now)


def not_ready(v: RouterView, code: int, now: float) -> RouterView:
    """/health answered, but not 200: the router is (again) starting, whatever it was."""
    return replace(v, phase="starting", error=f"/health HTTP {code}", checked_at=now)


def answered(
    v: RouterView, workers: tuple[RouterWorker, ...], counters: RouterCounters | None, now: float, mono: float
) -> RouterView:
    """/health said 200 and /workers listed them: running (requests/s once two metrics reads are in)."""
    return replace(v, phase="running", workers=workers, error=None, checked_at=now).with_counters(counters, mono)


def replica_of(fleet: Fleet, servers: Mapping[str, ServerState], name: str, url: str) -> str | None:
    """The live server behind a worker URL of router `name` (for the band's per-worker lines)."""
    spec = fleet.routers[name]
    for s in servers.values():
        if (
            s.meta.host == spec.host
            and s.meta.port is not None
            and s.alive
            and rc.worker_url(s.meta.bind, s.meta.port) == url
        ):
            return s.name
    return None


def ended_replica_of(fleet: Fleet, servers: Mapping[str, ServerState], name: str, url: str) -> str | None:
    """The ended (crashed or stopped) replica of the router's presets behind a worker URL that no live server
    holds: the router may still list it, and call it healthy, until a sync removes it."""
    spec = fleet.routers[name]
    if replica_of(fleet, servers, name, url) is not None:
        return None
    for s in servers.values():
        if (
            s.meta.host == spec.host
            and s.meta.port is not None
            and not s.alive
            and s.meta.preset in spec.presets
            and rc.worker_url(s.meta.bind, s.meta.port) == url
        ):
            return s.name
    return None


def ended_workers(fleet: Fleet, servers: Mapping[str, ServerState], v: RouterView) -> dict[str, str]:
    """Worker URL -> ended replica, for the workers the router's view lists (see ended_replica_of)."""
    return {w.url: who for w in v.workers if (who := ended_replica_of(fleet, servers, v.name, w.url))}


# -- `status`'s one round trip (console.fleet.oneshot) -----------------------------------------------------------
def router_config(fleet: Fleet, host_name: str) -> list[dict[str, Any]]:
    """What the agent looks at for each router on the host, as the manager does: its status script, its API's
    base URL as the host reaches it, its metrics URL (127.0.0.1 only: the console starts it so), the caps."""
    return [
        {
            "name": name,
            "status": rc.status_script(rc.state_dir(fleet.hosts[host_name], name)),
            "base": rc.worker_url(spec.bind, spec.port),
            "metrics": f"http://127.0.0.1:{spec.prometheus_port}",
            "max": MAX_BYTES,
            "health_max": HEALTH_MAX_BYTES,
            "log": rc.LOG_TAIL_BYTES,
        }
        for name, spec in fleet.routers.items()
        if spec.host == host_name
    ]


def _unanswered_why(what: str, p: RouterPart | None) -> str:
    if p is None or p.kind == "timeout":
        return f"router {what}: no complete answer within {HEALTH_DEADLINE_S:g} s"
    if p.kind == "big":
        return f"router {what}: larger than the cap; refused"
    if p.kind == "http":
        return f"router {what}: HTTP {p.status}"
    return p.text or p.kind  # `down`: ConnectError, as httpx names it


def router_views(fleet: Fleet, host_name: str, shot: OneShot, now: float, mono: float) -> dict[str, RouterView]:
    """Each router of the host as the manager's refresh folds the same answers: stopped, crashed with why (from
    its log's end), starting while its API does not answer 200, or running with its workers and counters
    (requests/s needs a second read: none here)."""
    out: dict[str, RouterView] = {}
    for name, spec in fleet.routers.items():
        if spec.host != host_name:
            continue
        v = RouterView(name, spec.host, spec.port, spec.policy)
        parts = shot.routers.get(name, {})
        proc = parts.get("proc")
        if proc is None or not proc.text.strip():
            out[name] = replace(v, error="its status script printed nothing", checked_at=now)
            continue
        v = process_view(v, rc.parse_status(proc.text), now)
        if v.phase == "crashed":
            log = parts.get("log")
            v = replace(
                v,
                error=crash_cause(
                    log.text if log else "", spec.python or fleet.hosts[host_name].python, spec.host, spec.port
                ),
            )
        if v.phase in ("stopped", "crashed"):
            out[name] = v
            continue
        health, workers, metrics = parts.get("health"), parts.get("workers"), parts.get("metrics")
        if health is not None and health.kind == "http" and health.status != 200:
            out[name] = not_ready(v, health.status if health.status is not None else 0, now)
            continue
        if health is None or health.kind != "http":
            out[name] = unanswered(v, _unanswered_why("/health", health), now)
            continue
        if workers is None or workers.kind != "http" or workers.status != 200:
            out[name] = unanswered(v, _unanswered_why("/workers", workers), now)
            continue
        try:
            listed = tuple(parse_workers(workers.text.encode("utf-8", "surrogateescape")))
        except ValueError as e:
            out[name] = unanswered(v, f"ValueError: {e}", now)
            continue
        counters = None
        if metrics is not None and metrics.kind == "http" and metrics.status == 200:
            with contextlib.suppress(ValueError):
                counters = parse_counters(metrics.text)
        out[name] = answered(v, listed, counters, now, mono)
    return out


def routers_of(fleet: Fleet, look: Look) -> dict[str, RouterView]:
    """Every router of the fleet after a one-shot look: as its host answered, or that its host did not."""
    out = {
        n: RouterView(n, s.host, s.port, s.policy, error=f"host {s.host} is not connected")
        for n, s in fleet.routers.items()
    }
    for host, (shot, now, mono) in look.shots.items():
        out.update(router_views(fleet, host, shot, now, mono))
    return out
