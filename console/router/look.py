"""One look at a router, folded into its RouterView, and which server stands behind each of its workers (pure).

The manager (console.router.manager) looks over the host link and httpx; `status` looks in its one round trip per
host (the agent runs the same status script and asks the same endpoints on the host: console.fleet.oneshot). Both
fold what they found with these functions, so a router reads the same either way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from console.router import command as rc
from console.router.answers import RouterCounters, RouterWorker
from console.router.state import RouterView

if TYPE_CHECKING:
    from console.config import Fleet
    from console.fleet.state import ServerState


def process_view(v: RouterView, rep: rc.ProcessReport, now: float) -> RouterView:
    """What the status script found: `stopped` (its last run's log stays readable), `crashed` (the caller adds why,
    from its log), or the live process's pid, start and log with the phase the HTTP answers will set."""
    meta = rep.meta or {}
    if not rep.started:
        return replace(v, phase="stopped", pid=None, workers=(), rps=None, worker_rps={}, error=None, checked_at=now,
                       counters=None, counters_at=None, log_path=meta.get("log_path") or v.log_path)
    v = replace(v, pid=rep.pid, started_at=meta.get("started_at"), log_path=meta.get("log_path"))
    if not rep.alive:
        return replace(v, phase="crashed", workers=(), rps=None, worker_rps={}, error=None, checked_at=now)
    return v


def unanswered(v: RouterView, error: str, now: float) -> RouterView:
    """/health or /workers did not answer (or not 200): a router that was not running is still starting."""
    phase = "starting" if v.phase in ("starting", "stopped", "unknown", "crashed") else v.phase
    return replace(v, phase=phase, error=error[:200], checked_at=now)


def answered(v: RouterView, workers: tuple[RouterWorker, ...], counters: RouterCounters | None, now: float,
             mono: float) -> RouterView:
    """/health said 200 and /workers listed them: running (requests/s once two metrics reads are in)."""
    return replace(v, phase="running", workers=workers, error=None, checked_at=now).with_counters(counters, mono)


def replica_of(fleet: Fleet, servers: Mapping[str, ServerState], name: str, url: str) -> str | None:
    """The live server behind a worker URL of router `name` (for the band's per-worker lines)."""
    spec = fleet.routers[name]
    for s in servers.values():
        if (s.meta.host == spec.host and s.meta.port is not None and s.alive
                and rc.worker_url(s.meta.bind, s.meta.port) == url):
            return s.name
    return None


def ended_replica_of(fleet: Fleet, servers: Mapping[str, ServerState], name: str, url: str) -> str | None:
    """The ended (crashed or stopped) replica of the router's presets behind a worker URL that no live server
    holds: the router may still list it, and call it healthy, until a sync removes it."""
    spec = fleet.routers[name]
    if replica_of(fleet, servers, name, url) is not None:
        return None
    for s in servers.values():
        if (s.meta.host == spec.host and s.meta.port is not None and not s.alive and s.meta.preset in spec.presets
                and rc.worker_url(s.meta.bind, s.meta.port) == url):
            return s.name
    return None


def ended_workers(fleet: Fleet, servers: Mapping[str, ServerState], v: RouterView) -> dict[str, str]:
    """Worker URL -> ended replica, for the workers the router's view lists (see ended_replica_of)."""
    return {w.url: who for w in v.workers if (who := ended_replica_of(fleet, servers, v.name, w.url))}
